"""Wireshark's tshark as the dissector of WebSocket frames inside TLS, decrypted with a key log.

tshark decrypts TLS 1.2 and 1.3 from an NSS key log, reassembles TCP and TLS records, unmasks the
client's frames and inflates permessage-deflate; faultlab asks it for a handful of fields, once per
capture, and reads its output line by line while its own flow walk reads the same file
(`flows.analyse` merges the two by packet number).

Measured on a synthetic 15-minute Live API session (bench/pcap_bench.py: 39,867 packets, 11,356
frames, 57 MB, 2 cores): `-T ek` and `-T fields` both take 2.0 s; ek is kept because it escapes
text as JSON, where `-T fields` prints a tab as `\\t` but a backslash and control characters raw,
so one message could not be told from the next. Enabling only the protocols needed saved nothing
(2.2 s). Parsing the rows and naming 11,387 messages' kinds takes 0.17 s, while tshark runs.
Plain ws:// stays with the hand decoder (`faultlab.capture.websocket`): it walks the same capture
in 0.4-0.65 s and needs nothing installed, so tshark runs only when there are key logs, and only
frames inside TLS are taken from it.

With payloads (for a cassette), tshark is also asked for each message and the WebSocket's HTTP
handshake (PAYLOAD_FIELDS): a text message's text (inflated when permessage-deflate compressed
it) at its last frame, a binary one's bytes likewise (as the `data` dissector's hex), the
Upgrade request's method, target and header lines, the answer's status and header lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from faultlab.capture.websocket import (
    OPCODES,
    HttpHead,
    Message,
    WsFrame,
    header_lines,
    message_kind,
)
from faultlab.errors import MechanismError
from faultlab.private import open_private

TSHARK_HINT = "apt-get install tshark"

# Packets that completed WebSocket frames inside TLS, and those that carried a decrypted TLS
# Finished message (type 20): encrypted in TLS 1.3, and shown only as "Encrypted Handshake
# Message" in TLS 1.2, so tshark names it only when the key log held that connection's secrets.
DISPLAY_FILTER = "(tls && websocket) || tls.handshake.type == 20"
FIELDS = (
    "frame.number", "tls.handshake.type", "websocket.fin", "websocket.opcode", "websocket.mask",
    "websocket.payload_length", "websocket.payload_length_ext_16",
    "websocket.payload_length_ext_64", "websocket.payload.close.status_code",
    "websocket.payload.close.reason", "websocket.payload.text",
)
# With payloads: the packets that carry the WebSocket's handshake inside TLS too, and the fields
# of messages and handshakes. Binary messages have no field of the websocket dissector's own:
# their bytes go to the `data` dissector.
PAYLOAD_DISPLAY_FILTER = f"{DISPLAY_FILTER} || (tls && http)"
PAYLOAD_FIELDS = (
    "websocket.rsv", "data.data", "http.request.method", "http.request.uri", "http.request.version",
    "http.request.line", "http.response.version", "http.response.code",
    "http.response.code.desc", "http.response.line",
)
# The preferences the parsing relies on, whatever the user's Wireshark profile says (tshark runs
# with an empty configuration folder). Out-of-order segments, as after a loss, are reassembled too
# (Wireshark 4.0 does not by default).
PREFERENCES = ("tcp.desegment_tcp_streams:TRUE", "tcp.reassemble_out_of_order:TRUE",
               "tls.desegment_ssl_records:TRUE", "tls.desegment_ssl_application_data:TRUE",
               "websocket.text_type:No subdissection", "websocket.decompress:TRUE")
# What tshark prints to stderr that is no failure: its warning when run as root, and the end of
# a capture cut short, whose whole packets it has dissected (the flow walk stops there too).
HARMLESS = ("Running as user", "appears to have been cut short")


class TsharkError(MechanismError):
    """tshark failed on a capture."""


@dataclass(frozen=True, slots=True)
class DecryptedPacket:
    """What tshark saw in one packet (numbered from 1): whether it finished a decrypted TLS
    handshake, and the WebSocket frames inside TLS it completed (their `ts` is left 0.0: the
    flow walk stamps the packet's time). With payloads: the texts and binary messages whose last
    frame it holds, in order, and its half of a WebSocket handshake (its `ts` left 0.0 too)."""

    number: int
    handshake_done: bool
    frames: list[WsFrame]
    texts: list[str] = field(default_factory=list)
    binaries: list[bytes] = field(default_factory=list)
    head: HttpHead | None = None
    compressed: list[bool] = field(default_factory=list)  # each frame's RSV1 (permessage-deflate)


@dataclass(slots=True)
class TlsMessages:
    """Deals tshark's messages out to one direction's frames. tshark gives each message whole
    at its last frame, a packet's texts in one list and its binary messages in another; which
    frame ends which kind of message a fragment may only say packets later, so the message under
    way is kept from one packet to the next. An empty message has no value in the lists."""

    text: bool | None = None  # the message under way: text, binary, or none
    length: int = 0  # its payload bytes so far, as sent
    # tshark (4.0) inflates a permessage-deflate message only when it is one frame: a fragmented
    # one's value is its compressed bytes, which no message is given.
    readable: bool = True

    def deal(self, frames: list[WsFrame], row: DecryptedPacket) -> list[WsFrame]:
        """`frames` (the row's, stamped), each message's last frame with its message; when the
        values do not add up (more or fewer than the messages ended), none of the packet's
        messages gets one."""
        ends: list[tuple[int, bool, bool]] = []  # (frame, text, readable) of each non-empty end
        whole: dict[int, Message] = {}
        compressed = row.compressed if len(row.compressed) == len(frames) else None
        for i, frame in enumerate(frames):
            if frame.opcode in ("text", "binary"):
                self.text, self.length = frame.opcode == "text", 0
                self.readable = frame.fin or (compressed is not None and not compressed[i])
            elif frame.opcode != "continuation" or self.text is None:
                continue
            self.length += frame.length
            if frame.fin:
                if self.length:
                    ends.append((i, self.text, self.readable))
                else:
                    whole[i] = "" if self.text else b""
                self.text = None
        texts, binaries = row.texts, row.binaries
        if len(ends) != len(texts) + len(binaries) or sum(t for _, t, _ in ends) != len(texts):
            return frames
        next_text, next_binary = iter(texts), iter(binaries)
        for i, text, readable in ends:
            value = next(next_text) if text else next(next_binary)
            if readable:
                whole[i] = value
        return [replace(f, message=whole[i]) if i in whole else f for i, f in enumerate(frames)]


def find_tshark() -> str | None:
    return shutil.which("tshark")


def merge_keylogs(keylogs: Sequence[Path], into: Path) -> Path:
    """The key logs concatenated into one private file (tshark reads a single
    `tls.keylog_file`); `into` is the file's path."""
    with open_private(into, "wb") as out:
        for path in keylogs:
            data = path.read_bytes()
            out.write(data if data.endswith(b"\n") or not data else data + b"\n")
    return into


def tshark_argv(tshark: str, pcap: Path, keylog: Path, display_filter: str | None = None,
                payloads: bool = False) -> list[str]:
    """The command that prints FIELDS (and PAYLOAD_FIELDS, with `payloads`) of the packets
    `display_filter` keeps (by default DISPLAY_FILTER, or PAYLOAD_DISPLAY_FILTER), as `-T ek`
    lines."""
    if display_filter is None:
        display_filter = PAYLOAD_DISPLAY_FILTER if payloads else DISPLAY_FILTER
    argv = [tshark, "-r", str(pcap), "-n", "-o", f"tls.keylog_file:{keylog}"]
    for pref in PREFERENCES:
        argv += ["-o", pref]
    argv += ["-Y", display_filter, "-T", "ek"]
    for name in (*FIELDS, *PAYLOAD_FIELDS) if payloads else FIELDS:
        argv += ["-e", name]
    return argv


@contextlib.contextmanager
def dissect(pcap: Path, keylog: Path, tshark: str, workdir: Path, payloads: bool = False) -> Iterator[
        Iterator[DecryptedPacket]]:
    """tshark reading `pcap` with `keylog`: its packets as they come (with their messages and
    handshakes when `payloads`); tshark is stopped when the block ends, however it ends, and its
    failure raises TsharkError once its output is read. `workdir` (private) serves as its empty
    configuration folder."""
    argv = tshark_argv(tshark, pcap, keylog, payloads=payloads)
    env = {**os.environ, "WIRESHARK_CONFIG_DIR": str(workdir)}
    with (workdir / "tshark.err").open("w+b") as err:
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env,
                                    stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise TsharkError(f"tshark did not start: {exc}") from exc
        stdout = proc.stdout
        assert stdout is not None
        try:
            yield _rows(proc, stdout, err)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            stdout.close()


def _rows(proc: subprocess.Popen[bytes], out: Iterable[bytes], err: IO[bytes]) -> Iterator[
        DecryptedPacket]:
    for line in out:
        if line.startswith(b'{"index"'):
            continue
        yield parse_row(json.loads(line)["layers"])
    if proc.wait() != 0:
        err.seek(0)
        problems = [ln for ln in err.read().decode(errors="replace").splitlines()
                    if ln.strip() and not any(h in ln for h in HARMLESS)]
        if problems:
            raise TsharkError(f"tshark failed (exit {proc.returncode}): {problems[0]}")


def parse_row(layers: dict[str, list[str]]) -> DecryptedPacket:
    """One packet of tshark's `-T ek` output (the `layers` object of FIELDS, and of
    PAYLOAD_FIELDS when they were asked for)."""
    return DecryptedPacket(int(layers["frame_number"][0]),
                           "20" in layers.get("tls_handshake_type", ()), frames_of(layers),
                           layers.get("websocket_payload_text", []),
                           [bytes.fromhex(v) for v in layers.get("data_data", ())],
                           http_head(layers),
                           [int(v, 16) & 4 != 0 for v in layers.get("websocket_rsv", ())])


def http_head(layers: dict[str, list[str]]) -> HttpHead | None:
    """The packet's half of an HTTP handshake, rebuilt from its dissected parts (its `ts` left
    0.0); None when it holds none."""
    if "http_request_method" in layers:
        start = " ".join(layers.get(f"http_request_{part}", [""])[0]
                         for part in ("method", "uri", "version"))
        return HttpHead(0.0, start, header_lines(layers.get("http_request_line", ())))
    if "http_response_code" in layers:
        start = " ".join(layers.get(f"http_response_{part}", [""])[0]
                         for part in ("version", "code", "code_desc"))
        return HttpHead(0.0, start, header_lines(layers.get("http_response_line", ())))
    return None


def _flag(value: str) -> bool:
    return value in ("1", "true", "True")


def frames_of(layers: dict[str, list[str]]) -> list[WsFrame]:
    """The frames in one packet's fields. tshark lists each field's values for all the packet's
    frames in one array, so they are dealt out by Wireshark's rules: an extended length only for
    a 7-bit length of 126 or 127, a close code for a close payload of 2 bytes or more and a
    reason beyond 2, and a text for each non-empty whole text message (a fragmented one's at its
    last fragment). When the texts do not add up, no frame of the packet gets a kind."""
    opcodes = [int(v) for v in layers.get("websocket_opcode", ())]
    fins = [_flag(v) for v in layers.get("websocket_fin", ())]
    masks = [_flag(v) for v in layers.get("websocket_mask", ())]
    short = [int(v) for v in layers.get("websocket_payload_length", ())]
    if not opcodes or not len(opcodes) == len(fins) == len(masks) == len(short):
        return []
    ext16 = iter(layers.get("websocket_payload_length_ext_16", ()))
    ext64 = iter(layers.get("websocket_payload_length_ext_64", ()))
    codes = iter(layers.get("websocket_payload_close_status_code", ()))
    reasons = iter(layers.get("websocket_payload_close_reason", ()))
    lengths = []
    for n in short:
        if n == 126:
            n = int(next(ext16, 0))
        elif n == 127:
            n = int(next(ext64, 0))
        lengths.append(n)
    kinds = _kinds(opcodes, fins, lengths, layers.get("websocket_payload_text", []))
    frames = []
    for i, opcode in enumerate(opcodes):
        code = reason = None
        if opcode == 8 and lengths[i] >= 2:
            code = int(next(codes, 0)) or None
            reason = next(reasons, "") if lengths[i] > 2 else ""
        frames.append(WsFrame(0.0, OPCODES.get(opcode, f"0x{opcode:x}"), lengths[i], fins[i],
                              masks[i], code, reason, kinds[i]))
    return frames


def _kinds(opcodes: list[int], fins: list[bool], lengths: list[int],
           texts: list[str]) -> list[str | None]:
    kinds: list[str | None] = [None] * len(opcodes)
    whole = [i for i, op in enumerate(opcodes) if op == 1 and fins[i] and lengths[i]]
    ends = sorted(whole + [i for i, op in enumerate(opcodes) if op == 0 and fins[i]])
    # A fragmented message's text comes at its last fragment if it was a text message, and not
    # at all if it was binary (the fields do not say which): both ways are tried. As in the hand
    # decoder, only a message in one frame is named.
    for holders in (whole, ends):
        if len(holders) == len(texts):
            for i, text in zip(holders, texts, strict=True):
                if opcodes[i] == 1:
                    kinds[i] = message_kind(text)
            break
    return kinds
