import json
import os
import shutil
import stat
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from faultlab.capture.flows import analyse
from faultlab.capture.pcap import ACK, PSH, SYN, build_tcp_packet, write_header, write_record
from faultlab.capture.source import locate
from faultlab.capture.synthetic import REAPING_CLOSE, SessionPlan, record
from faultlab.capture.tshark import (
    TSHARK_HINT,
    frames_of,
    merge_keylogs,
    parse_row,
    tshark_argv,
)

from .conftest import faultlab
from .test_pcap import REQUEST, RESPONSE, C, S, ws_frame
from .test_pcap_server import PORT, Session

TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason=f"no tshark: {TSHARK_HINT}")
# The synthetic server's idle reaping, as L7's 480 s but short.
IDLE_S = 1.5


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def test_merged_key_logs_are_private_and_removed(tmp_path: Path) -> None:
    """The key logs are joined, each on its own lines, into one file only its owner can read,
    which is gone when the block ends."""
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("CLIENT_RANDOM 01 02")  # no final newline
    b.write_text("CLIENT_RANDOM 03 04\n")
    with tempfile.TemporaryDirectory(prefix="faultlab-tshark-") as folder:
        work = Path(folder)
        merged = merge_keylogs([a, b], work / "keys.log")
        assert stat.S_IMODE(merged.stat().st_mode) == 0o600
        assert stat.S_IMODE(work.stat().st_mode) == 0o700
        assert merged.read_text() == "CLIENT_RANDOM 01 02\nCLIENT_RANDOM 03 04\n"
    assert not merged.exists() and not work.exists()


def tricky_session(path: Path) -> Path:
    """A ws:// session whose frames test how tshark's fields are dealt out: texts with tabs,
    newlines, backslashes and control characters, an empty text, 16- and 64-bit lengths, a
    fragmented text message and a fragmented binary one, closes without a payload, with a code
    only and with a reason; the client's stream is cut into 1,400-byte segments, several frames
    to a packet."""
    s = Session()
    s.up(100.0, SYN)
    s.down(100.001, SYN | ACK)
    s.up(100.002, ACK)
    s.up(100.003, data=REQUEST)
    s.down(100.004, data=RESPONSE)
    realtime = json.dumps({"realtimeInput": {"audio": {"data": "A" * 300}}}).encode()
    up = b"".join([
        ws_frame(1, b"a\tb\nc", masked=True),
        ws_frame(1, b"", masked=True),
        ws_frame(1, "x\x1fy\u00e9\\z".encode(), masked=True),
        ws_frame(1, b'{"toolCall":\t{"functionCalls": [{"name": "a\\tb"}]}}', masked=True),
        ws_frame(1, realtime, masked=True),
        ws_frame(2, b"\x05" * 70_000, masked=True),
        bytes([0x01]) + ws_frame(1, b"part", masked=True)[1:],  # text, not final
        ws_frame(0, b"two", masked=True),
        ws_frame(9, b"", masked=True),
        ws_frame(8, b"", masked=True),
    ])
    for i in range(0, len(up), 1400):
        s.up(100.1 + i / 1e6, data=up[i:i + 1400])
    s.down(100.2, data=b"".join([
        ws_frame(1, b'{"setupComplete": {}}', masked=False),
        bytes([0x02]) + ws_frame(2, b"bin", masked=False)[1:],  # binary, not final
        ws_frame(0, b"ary", masked=False),
        ws_frame(8, struct.pack("!H", 1011), masked=False),
        ws_frame(1, b"after", masked=False),
        ws_frame(8, struct.pack("!H", 1011) + b"Internal error encountered.", masked=False),
    ]))
    return s.write(path)


@needs_tshark
def test_tshark_fields_are_dealt_out_into_the_frames_the_hand_decoder_reads(tmp_path: Path) -> None:
    """On plain ws://, where both can read, the frames made of tshark's fields equal the hand
    decoder's, kinds included."""
    assert TSHARK is not None
    path = tricky_session(tmp_path / "tricky.pcap")
    (flow,) = analyse(path).flows
    hand = [replace(f, ts=0.0) for _, f in flow.frames]
    assert [f.kind for f in hand if f.kind] == ["tool_call", "realtime_input.audio",
                                               "setup_complete"]
    assert len(hand) == 16
    keylog = tmp_path / "empty.log"
    keylog.write_text("")
    done = subprocess.run(tshark_argv(TSHARK, path, keylog, display_filter="websocket"),
                          capture_output=True, check=True,
                          env={**os.environ, "WIRESHARK_CONFIG_DIR": str(tmp_path)})
    rows = [parse_row(json.loads(line)["layers"]) for line in done.stdout.splitlines()
            if not line.startswith(b'{"index"')]
    assert [f for row in rows for f in row.frames] == hand


def test_texts_that_do_not_add_up_name_no_kind() -> None:
    """When a packet's texts cannot be matched with its text frames, no frame gets a kind rather
    than a neighbour's."""
    layers = {"frame_number": ["7"], "websocket_opcode": ["1", "1"], "websocket_fin": ["1", "1"],
              "websocket_mask": ["0", "0"], "websocket_payload_length": ["21", "5"],
              "websocket_payload_text": ['{"setupComplete": {}}', "hello"]}
    assert [f.kind for f in frames_of(layers)] == ["setup_complete", None]
    assert [f.kind for f in frames_of({**layers, "websocket_payload_text": ["hello"]})] == [
        None, None]


def fake_tls(path: Path) -> Path:
    """A connection whose first bytes each way are TLS handshake records."""
    hello = b"\x16\x03\x01\x00\x08" + b"\x01\x00\x00\x04" + b"\x03\x03\x00\x00"
    packets = [build_tcp_packet(C, PORT, S, 443, 1000, 0, SYN),
               build_tcp_packet(S, 443, C, PORT, 5000, 1001, SYN | ACK),
               build_tcp_packet(C, PORT, S, 443, 1001, 5001, ACK),
               build_tcp_packet(C, PORT, S, 443, 1001, 5001, PSH | ACK, hello),
               build_tcp_packet(S, 443, C, PORT, 5001, 1001 + len(hello), PSH | ACK,
                                b"\x16\x03\x03\x00\x04\x02\x00\x00\x00")]
    with path.open("wb") as f:
        write_header(f)
        for i, pkt in enumerate(packets):
            write_record(f, 100 + i / 10, pkt)
    return path


def test_without_tshark_flows_are_still_reported_with_one_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no tshark on PATH the flow statistics print and one line says how to get the frames
    inside TLS; without a key log, the line also says to give one."""
    path = fake_tls(tmp_path / "tls.pcap")
    keylog = tmp_path / "elsewhere" / "keys.log"  # not beside the capture: only when given
    keylog.parent.mkdir()
    keylog.write_text("")
    monkeypatch.setenv("PATH", str(tmp_path))
    done = faultlab("pcap", "inspect", str(path), "--keylog", str(keylog))
    assert done.returncode == 0, done.stderr
    assert f"flow 1: {C}:{PORT} -> {S}:443  (TLS)" in done.stdout
    assert "longest silence" in done.stdout and "server->client" in done.stdout
    hints = [line for line in done.stdout.splitlines() if TSHARK_HINT in line]
    assert hints == ["1 TLS flow(s): their WebSocket frames need tshark, which is not on PATH: "
                     "apt-get install tshark"]
    report = json.loads(faultlab("pcap", "inspect", str(path), "--json").stdout)
    assert report["flows"][0]["tls"] is True and report["flows"][0]["decrypted"] is None
    assert report["flows"][0]["client_to_server"]["packets"] == 3
    (note,) = report["notes"]
    assert "--keylog FILE" in note and note.endswith(TSHARK_HINT)


def test_a_tshark_failure_is_one_line_and_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When tshark fails, its first complaint is one line, exit 3 (a mechanism failed)."""
    fake = tmp_path / "bin" / "tshark"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'tshark: something broke' >&2\nexit 1\n")
    fake.chmod(0o755)
    keylog = tmp_path / "keys.log"
    keylog.write_text("")
    monkeypatch.setenv("PATH", str(fake.parent))
    done = faultlab("pcap", "inspect", str(fake_tls(tmp_path / "tls.pcap")), "--keylog", str(keylog))
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert done.stderr == "faultlab: tshark failed (exit 1): tshark: something broke\n"


def test_the_key_logs_beside_a_capture_file_come_with_it(tmp_path: Path) -> None:
    """A capture file is read with the run's key logs that lie beside it (a run folder's
    capture.pcap as the folder is), then the key logs given that are not among them; a file
    with none beside it has only those given."""
    run = tmp_path / "run"
    run.mkdir()
    pcap = fake_tls(run / "capture.pcap")
    for name in ("client-keys.log", "keys.log", "notes.log"):
        (run / name).write_text("")
    other = tmp_path / "other.log"
    other.write_text("")
    beside = [run / "keys.log", run / "client-keys.log"]
    assert locate(pcap).keylogs == beside == locate(run).keylogs
    assert locate(pcap, [run / ".." / "run" / "keys.log", other]).keylogs == [*beside, other]
    assert locate(fake_tls(tmp_path / "bare.pcap"), [other]).keylogs == [other]


@pytest.mark.parametrize("case", ["missing key log", "key log is a folder", "missing capture",
                                  "folder without capture"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    """A key log or capture that is not there is one line on stderr and exit 2."""
    pcap = fake_tls(tmp_path / "tls.pcap")
    args = {"missing key log": [str(pcap), "--keylog", str(tmp_path / "nope.log")],
            "key log is a folder": [str(pcap), "--keylog", str(tmp_path)],
            "missing capture": [str(tmp_path / "nope.pcap")],
            "folder without capture": [str(tmp_path)]}[case]
    for command in ("inspect", "server"):
        error = one_line_error(faultlab("pcap", command, *args))
        assert error.startswith("faultlab: ") and ("no such" in error or "no capture.pcap" in error)


# Real TLS, in a network namespace of the test's own (root).


@pytest.fixture(scope="module")
def reaped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A run-like folder: a wss:// session whose client sends setup and five audio chunks, gets
    an answer, then goes silent until the server closes 1011 after IDLE_S."""
    folder = tmp_path_factory.mktemp("reaped")
    yield record(SessionPlan(up_frames=5, reply_every=5, reply_chunks=3, idle_close_s=IDLE_S),
                 folder)


@pytest.mark.lab
@needs_tshark
def test_a_run_folders_wss_frames_are_listed_with_their_kinds(
    reaped: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pcap inspect RUN_DIR` decrypts with the folder's key logs and lists every frame each way,
    masked from the client, with Live API kinds and the close's code and reason; the merged key
    log is gone afterwards."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    done = faultlab("pcap", "inspect", str(reaped), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert list(scratch.iterdir()) == []
    assert report["keylogs"] == [str(reaped / "emulator-keys.log"), str(reaped / "client-keys.log")]
    assert report["notes"] == []
    (flow,) = report["flows"]
    assert flow["tls"] is True and flow["decrypted"] is True
    seen = [(f["direction"][:6], f["opcode"], f["masked"], f["kind"]) for f in flow["websocket_frames"]]
    audio = ("client", "text", True, "realtime_input.audio")
    turn = ("server", "text", False, "server_content.model_turn")
    assert seen == [
        ("client", "text", True, "setup"), ("server", "text", False, "setup_complete"),
        *[audio] * 5, *[turn] * 3,
        ("server", "text", False, "server_content.output_transcription"),
        ("server", "text", False, "server_content.generation_complete"),
        ("server", "text", False, "server_content.turn_complete"),
        ("server", "close", False, None), ("client", "close", True, None)]
    close = flow["websocket_frames"][-2]
    assert (close["close_code"], close["close_reason"]) == REAPING_CLOSE
    assert close["length"] == 2 + len(REAPING_CLOSE[1]) and close["fin"] is True
    assert all(f["length"] == 4346 for f in flow["websocket_frames"][2:7])  # 100 ms at 16 kHz
    text = faultlab("pcap", "inspect", str(reaped)).stdout
    assert "(TLS, decrypted)" in text
    assert "code=1011 reason='Internal error encountered.'" in text
    assert "kind=realtime_input.audio" in text


@pytest.mark.lab
@needs_tshark
def test_the_server_report_gives_the_close_after_the_clients_silence(reaped: Path) -> None:
    """`pcap server` finds the server's close 1011 IDLE_S after the client's last data (its last
    packet, an ACK, a little later), no pings, keepalives or giving up, as clock times too."""
    done = faultlab("pcap", "server", str(reaped), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (conn,) = report["connections"]
    close = conn["server_close"]
    assert (close["code"], close["reason"]) == REAPING_CLOSE
    assert close["answers_client_close"] is None
    # The server's timer starts when it has read the message, after the capture saw it: never
    # sooner (how much later is the machine's load). The client's last packet, an ACK, came after.
    assert close["client_data_silent_s"] >= IDLE_S - 0.01
    assert 0 < close["client_silent_s"] <= close["client_data_silent_s"]
    start = datetime.fromisoformat(report["start"]["clock"]).timestamp()
    at = datetime.fromisoformat(close["at"]["clock"]).timestamp()
    assert at - start == pytest.approx(close["at"]["t"], abs=2e-3)
    assert conn["server_pings"] == {"count": 0, "first": None}
    assert conn["server_keepalives"]["count"] == 0 and conn["server_gave_up"] is None
    text = faultlab("pcap", "server", str(reaped)).stdout
    assert "server close     1011 'Internal error encountered.' at t=" in text
    assert f"client silent    {close['client_silent_s']:.3f} s before it" in text


@pytest.mark.lab
@needs_tshark
def test_key_logs_given_for_a_capture_file(reaped: Path, tmp_path: Path) -> None:
    """`--keylog` decrypts a bare capture file; a key log of other connections decrypts nothing,
    and the output says so."""
    pcap = tmp_path / "capture.pcap"  # away from the run's key logs
    shutil.copyfile(reaped / "capture.pcap", pcap)
    done = faultlab("pcap", "inspect", str(pcap), "--keylog", str(reaped / "client-keys.log"),
                    "--json")
    (flow,) = json.loads(done.stdout)["flows"]
    assert flow["decrypted"] is True and len(flow["websocket_frames"]) == 15
    other = tmp_path / "other.log"
    other.write_text("".join(f"{label} {'ab' * 32} {'cd' * 48}\n" for label in (
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0")))
    done = faultlab("pcap", "inspect", str(pcap), "--keylog", str(other))
    assert done.returncode == 0, done.stderr
    assert ("the key log(s) decrypted none of the 1 TLS flow(s): they hold no secrets of these "
            "connections") in done.stdout
    assert "(TLS, not decrypted: no key for it)" in done.stdout
    assert "WebSocket frames" not in done.stdout


@pytest.mark.lab
@needs_tshark
def test_a_run_folders_capture_file_is_read_with_the_key_logs_beside_it(reaped: Path) -> None:
    """`pcap inspect RUN_DIR/capture.pcap`, no `--keylog`: the run's key logs beside the file
    decrypt it, and the report is the run folder's."""
    done = faultlab("pcap", "inspect", str(reaped / "capture.pcap"), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["keylogs"] == [str(reaped / "emulator-keys.log"), str(reaped / "client-keys.log")]
    assert report["notes"] == []
    (flow,) = report["flows"]
    assert flow["decrypted"] is True and len(flow["websocket_frames"]) == 15
    assert report == json.loads(faultlab("pcap", "inspect", str(reaped), "--json").stdout)


@pytest.mark.lab
@needs_tshark
def test_permessage_deflate_frames_are_inflated_to_name_their_kinds(tmp_path: Path) -> None:
    """With compression negotiated (as the websockets library offers by default), tshark
    inflates the frames and their kinds are still named."""
    folder = record(SessionPlan(up_frames=3, reply_every=3, reply_chunks=1, compression=True),
                    tmp_path / "deflate")
    (flow,) = json.loads(faultlab("pcap", "inspect", str(folder), "--json").stdout)["flows"]
    kinds = [f["kind"] for f in flow["websocket_frames"] if f["opcode"] == "text"]
    assert kinds.count("realtime_input.audio") == 3 and "server_content.model_turn" in kinds
    audio = next(f for f in flow["websocket_frames"] if f["kind"] == "realtime_input.audio")
    assert audio["length"] < 4346  # the payload as sent, compressed
