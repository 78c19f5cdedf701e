"""Cassettes without sockets: the tape's redaction, the cassette file (round trip, audio beside
it, its errors by line), and the replay's matching, timing and divergence on the sans-I/O core."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from faultlab.cassette.build import build, protocol_of
from faultlab.cassette.format import (
    Cassette,
    CassetteError,
    Ending,
    Recorded,
    Said,
    audio_path,
    read_cassette,
    stand_in,
    with_stand_ins,
    write_cassette,
)
from faultlab.cassette.replay import DIVERGED_CODE, Replay, steps_of
from faultlab.cassette.show import render
from faultlab.cassette.tape import Closed, Message, Opened, from_json, to_json
from faultlab.emulator.outbox import Action
from faultlab.emulator.personality import personality_with
from faultlab.emulator.session import Emulator
from faultlab.errors import ProfileError
from faultlab.profile import parse_profile
from faultlab.protocols import GEMINI

SECRET = "AIzaFakeKeyForTheCassetteTests0123456789"
HANDLE = "0c5c7a3e-1d2b-4c6f-8a9e-7b1d2c3e4f50"
PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
SETUP = json.dumps({"setup": {"model": "models/gemini-3.8-live",
                              "generationConfig": {"responseModalities": ["TEXT"]}}})
RESUME = json.dumps({"setup": {"model": "models/gemini-3.8-live",
                               "generationConfig": {"responseModalities": ["TEXT"]},
                               "sessionResumption": {"handle": HANDLE}}})
SAY = json.dumps({"clientContent": {"turns": [{"role": "user", "parts": [{"text": "Hi"}]}],
                                    "turnComplete": True}})
DONE = json.dumps({"setupComplete": {}})
HEARD = json.dumps({"serverContent": {"inputTranscription": {"text": "hello"}}})
UPDATE = json.dumps({"sessionResumptionUpdate": {"newHandle": HANDLE, "resumable": True}})


def chunk(samples: int = 1600, url: bool = False) -> str:
    pcm = bytes(range(256)) * (samples * 2 // 256) + b"\xfb\xff" * 8
    data = (base64.urlsafe_b64encode if url else base64.b64encode)(pcm).decode()
    return json.dumps({"realtimeInput": {"audio": {"data": data,
                                                   "mimeType": "audio/pcm;rate=16000"}}})


def said(at: float, sender: str, payload: str, n: int = 0, after: int = 0) -> Said:
    kind = GEMINI.describe(payload).get("kind", "text")
    return Said(at, sender, kind, payload, n, after)  # type: ignore[arg-type]


def spoken() -> Cassette:
    """Setup, three audio chunks heard and answered, then the server closes 1011."""
    conn = Recorded(1, 0.0, PATH, said=[
        said(0.01, "client", SETUP, n=1), said(0.31, "server", DONE, after=1),
        said(1.0, "client", chunk(), n=2), said(1.1, "client", chunk(), n=3),
        said(1.2, "client", chunk(), n=4), said(1.5, "server", HEARD, after=4),
    ], ending=Ending(2.0, 1011, "Internal error encountered.", "server", after=4))
    return Cassette("gemini", "test", [conn], "gemini-dev-2026-10")


# The tape.


def test_a_tape_line_holds_no_secret_and_reads_back() -> None:
    opened = Opened(1.0, 1, f"{PATH}?key={SECRET}", None,
                    {"User-Agent": "sdk/1", "x-goog-api-key": SECRET, "Authorization": "x"})
    line = to_json(opened)
    assert SECRET not in json.dumps(line)
    assert line["open"]["headers"] == {"user-agent": "sdk/1"}  # credentials are not kept
    assert "key=<redacted len=" in line["open"]["path"]
    message = to_json(Message(2.0, 1, "server", UPDATE))
    assert HANDLE not in json.dumps(message) and "<redacted len=36 " in message["text"]
    binary = to_json(Message(3.0, 1, "server", UPDATE.encode()))
    assert HANDLE.encode() not in base64.b64decode(binary["binary"])
    back = from_json(json.loads(json.dumps(to_json(Closed(4.0, 1, 1000, "bye", "client")))))
    assert back == Closed(4.0, 1, 1000, "bye", "client")


def test_a_tape_becomes_connections_in_the_order_they_opened() -> None:
    records = [Opened(10.0, 7, PATH), Message(10.1, 7, "client", SETUP),
               Opened(10.2, 3, PATH), Message(10.3, 7, "server", DONE),
               Message(10.4, 3, "client", RESUME), Closed(10.9, 3, 1011, "no", "server"),
               Message(11.0, 9, "server", DONE)]  # a connection whose opening it never saw
    cassette = build(records, protocol_of(records), "test")
    first, second = cassette.connections
    assert (first.conn, first.at, second.conn, second.at) == (1, 0.0, 2, pytest.approx(0.2))
    assert [(s.kind, s.n, s.after) for s in first.said] == [("setup", 1, 0),
                                                           ("setup_complete", 0, 1)]
    assert second.ending == Ending(pytest.approx(0.9), 1011, "no", "server", 1)


def test_a_cassette_holds_no_secret_whatever_its_tape_held(tmp_path: Path) -> None:
    """A capture's records are not redacted: the cassette made of them is."""
    records = [Opened(0.0, 1, f"{PATH}?key={SECRET}", None, {"x-goog-api-key": SECRET}),
               Message(0.1, 1, "server", UPDATE), Message(0.2, 1, "client", RESUME),
               Message(0.3, 1, "client", json.dumps({"note": f"my key is {SECRET}"}))]
    path = write_cassette(tmp_path / "c.cassette.jsonl", build(records, "gemini", "capture"))
    text = path.read_text()
    assert SECRET not in text and HANDLE not in text
    assert text.count("<redacted len=36 ") == 2  # one handle, both ways


# The file.


def test_a_cassette_file_reads_back_with_its_audio_beside_it(tmp_path: Path) -> None:
    cassette = spoken()
    cassette.connections[0].said.append(said(1.3, "client", chunk(url=True), n=5))
    path = write_cassette(tmp_path / "a.cassette.jsonl", cassette)
    text = path.read_text()
    assert "$audio:0:3088" in text and ":url" in text
    assert audio_path(path) == tmp_path / "a.cassette.audio" and audio_path(path).exists()
    back = read_cassette(path)
    # The same messages, the same JSON (its spacing is not kept).
    assert [(s.at, s.sender, s.kind, json.loads(s.payload), s.n, s.after)
            for s in back.connections[0].said] == [
        (s.at, s.sender, s.kind, json.loads(s.payload), s.n, s.after)
        for s in cassette.connections[0].said]
    assert back.connections[0].ending == cassette.connections[0].ending
    # Sorted keys, one record a line: a diff shows what changed; a message's own keys are
    # served in their order.
    assert all(list(json.loads(x)) == sorted(json.loads(x)) for x in text.splitlines())
    assert list(json.loads(back.connections[0].said[0].payload)["setup"]) == [
        "model", "generationConfig"]


def test_a_cassette_without_audio_has_no_side_file(tmp_path: Path) -> None:
    conn = Recorded(1, 0.0, PATH, said=[said(0.0, "client", SETUP, n=1)])
    path = write_cassette(tmp_path / "t.cassette.jsonl",
                          Cassette("gemini", "test", [conn]))
    assert not audio_path(path).exists() and "audio" not in json.loads(path.read_text().split("\n")[0])


HEAD = '{"cassette": 1, "protocol": "gemini"}'
OPEN = '{"at": 0, "conn": 1, "open": {"path": "/ws/x"}}'


@pytest.mark.parametrize(("lines", "problem"), [
    ([], "t.cassette.jsonl: empty"),
    (['{"cassette": 2, "protocol": "gemini"}'], "t.cassette.jsonl:1: cassette: not a version 1"),
    (['{"cassette": 1, "protocol": "smoke"}'], "t.cassette.jsonl:1: protocol: 'smoke' is not one"),
    (['{"cassette": 1, "protocol": "gemini"}', "{not json"], "t.cassette.jsonl:2: not JSON"),
    (['{"cassette": 1, "protocol": "gemini"}', '{"at": 0, "conn": 2, "from": "client", "text": ""}'],
     "t.cassette.jsonl:2: conn: connection 2 has no open line before it"),
    (['{"cassette": 1, "protocol": "gemini", "audio": "t.cassette.audio"}'],
     "t.cassette.jsonl:1: audio: cannot read"),
    (['{"cassette": 1, "protocol": "gemini", "audio": "../x"}'],
     "t.cassette.jsonl:1: audio: '../x' is not a file name beside the cassette"),
    ([HEAD, OPEN, '{"at": 1, "close": 5, "conn": 1}'], "t.cassette.jsonl:3: close: 5 is not an object"),
    ([HEAD, OPEN, '{"at": "soon", "conn": 1, "from": "client", "n": 1, "text": ""}'],
     "t.cassette.jsonl:3: at: 'soon' is not a number"),
    ([HEAD, OPEN, '{"at": 1, "conn": 1, "from": "client", "n": 2, "text": ""}'],
     "t.cassette.jsonl:3: n: 2 follows client message 0 of connection 1: it must be 1"),
    ([HEAD, OPEN, '{"after": 1, "at": 1, "conn": 1, "from": "server", "text": ""}'],
     "t.cassette.jsonl:3: after: 1 is not one of the 0 client messages before it"),
    ([HEAD, OPEN, '{"at": 1, "conn": 1, "from": "server", "json": {"data": "$audio:0:9"}}'],
     "t.cassette.jsonl:3: json: $audio:0:9 is past the side file's end"),
])
def test_a_broken_cassette_is_named_by_file_line_and_field(tmp_path: Path, lines: list[str],
                                                           problem: str) -> None:
    path = tmp_path / "t.cassette.jsonl"
    path.write_text("\n".join(lines) + ("\n" if lines else ""))
    with pytest.raises(CassetteError) as exc:
        read_cassette(path)
    assert exc.value.problems[0].startswith(f"{tmp_path}/{problem}"), exc.value.problems


def test_a_secret_is_served_as_a_stable_stand_in_of_its_length() -> None:
    placeholder = "<redacted len=36 sha256=491de1ef>"
    served = with_stand_ins(f'{{"newHandle": "{placeholder}"}}')
    assert stand_in(placeholder) in served and "redacted" not in served
    assert stand_in(placeholder) == stand_in(placeholder) and len(stand_in(placeholder)) == 36
    assert stand_in(placeholder).count("-") == 4  # a UUID's shape, as the emulator's handles
    assert len(stand_in("<redacted len=39 sha256=0123abcd>")) == 39


# The replay.


class Client:
    """One replayed connection driven as the emulator's shell drives it."""

    def __init__(self, replay: Replay, now: float = 0.0) -> None:
        self.conn = replay.connect(now, "developer", client_port=40000)
        self.conn.begin(PATH, {}, now)

    def send(self, payload: str, now: float) -> None:
        self.conn.receive(payload, now)

    def until(self, now: float) -> list[Action]:
        return self.conn.poll(now)


def replay_of(cassette: Cassette, divergence: str = "strict", time_scale: float = 1.0,
              **overrides: object) -> tuple[Replay, list[tuple[str, dict[str, Any]]]]:
    seen: list[tuple[str, dict[str, Any]]] = []
    emulator = Emulator(personality_with("gemini-dev-2026-10", overrides), time_scale,
                        emit=lambda name, **f: seen.append((name, f)), seed=1)
    return Replay(cassette, emulator, divergence), seen  # type: ignore[arg-type]


def sent(actions: list[Action]) -> list[str]:
    return [GEMINI.describe(a.wire or b"").get("kind", "") if not a.closes else f"close {a.code}"
            for a in actions]


def test_each_answer_waits_for_its_message_then_its_recorded_delay() -> None:
    replay, seen = replay_of(spoken())
    client = Client(replay, 100.0)
    assert client.until(200.0) == []  # nothing before the setup
    client.send(SETUP, 100.0)
    assert client.until(100.29) == []
    assert sent(client.until(100.3)) == ["setup_complete"]
    # Five chunks where the recording had three: one run of audio, timed from its first chunk.
    for i in range(5):
        client.send(chunk(800), 101.0 + i * 0.05)
    assert sent(client.until(101.49)) == []
    assert sent(client.until(101.5)) == ["server_content.input_transcription"]
    assert sent(client.until(102.0)) == ["close 1011"]
    assert not [f for name, f in seen if name == "cassette.diverged"]


def test_the_time_scale_applies_to_every_recorded_delay() -> None:
    replay, _ = replay_of(spoken(), time_scale=0.5)
    client = Client(replay)
    client.send(SETUP, 0.0)
    assert sent(client.until(0.149)) == [] and sent(client.until(0.15)) == ["setup_complete"]


def test_a_diverging_message_closes_under_strict_naming_both() -> None:
    replay, seen = replay_of(spoken())
    client = Client(replay)
    client.send(SETUP, 0.0)
    client.send(SAY, 0.5)
    (close,) = client.until(0.5)
    assert close.closes and close.code == DIVERGED_CODE
    assert "expected realtime_input.audio (client message 2-4" in close.reason
    assert "received client_content" in close.reason
    (diverged,) = [f for name, f in seen if name == "cassette.diverged"]
    assert diverged["received"] == "client_content" and diverged["then"] == "strict"
    client.send(chunk(), 0.6)  # after the close, nothing is answered
    assert client.until(10.0) == []


def test_a_diverging_message_goes_to_the_personality_under_fallback() -> None:
    replay, seen = replay_of(spoken(), "fallback")
    client = Client(replay)
    client.send(SETUP, 0.0)
    assert sent(client.until(0.3)) == ["setup_complete"]
    client.send(SAY, 0.5)
    frames = [a for a in client.until(10.0) if a.frame is not None]
    texts = [json.dumps(a.frame) for a in frames]
    assert any("You said: Hi" in t for t in texts), texts
    assert not any("setupComplete" in t for t in texts)  # the recording answered the setup
    assert [f["then"] for name, f in seen if name == "cassette.diverged"] == ["fallback"]


def test_the_emulator_takes_a_resumed_connection_over_whole() -> None:
    """Under fallback a resumed connection goes on as a fresh session (the emulator never
    issued the stand-in handle): the message that diverged is logged once and answered, the
    personality's goAway still comes, and the connection ends when the emulator's does."""
    resumed = Recorded(1, 0.0, PATH, said=[said(0.0, "client", RESUME, n=1),
                                           said(0.5, "server", DONE, after=1),
                                           said(1.0, "client", chunk(), n=2)],
                       ending=Ending(3.0, 1011, "Internal error encountered.", "server", 2))
    replay, seen = replay_of(Cassette("gemini", "test", [resumed]), "fallback",
                             connection_lifetime_s=20.0)
    client = Client(replay)
    client.send(RESUME, 0.0)
    assert sent(client.until(0.5)) == ["setup_complete"]
    client.send(SAY, 1.0)
    texts = [json.dumps(a.frame) for a in client.until(15.0) if a.frame is not None]
    assert any("You said: Hi" in t for t in texts), texts
    assert not any("setupComplete" in t for t in texts)  # the recording answered the setup
    assert any("goAway" in t for t in texts)
    logged = [f for name, f in seen if name == "emulator.frame" and f["from"] == "client"]
    assert [f["kind"] for f in logged] == ["setup", "client_content"]
    # No close was sent but the emulator's: none of the recording's is told of.
    assert not [f for name, f in seen if name == "emulator.close" and f.get("why") == "recorded"]
    assert not client.conn.closed
    client.conn.peer_closed(16.0)
    assert client.conn.closed


def test_audio_and_video_chunks_interleaved_are_one_run() -> None:
    video = json.dumps({"realtimeInput": {"video": {"data": "AAAA", "mimeType": "image/jpeg"}}})
    conn = Recorded(1, 0.0, PATH, said=[said(0.0, "client", SETUP, n=1),
                                        said(1.0, "client", chunk(), n=2),
                                        said(1.1, "client", video, n=3),
                                        said(1.5, "server", HEARD, after=3)])
    assert [(s.first, s.last) for s in steps_of(conn, GEMINI.is_stream)] == [(1, 1), (2, 3)]
    replay, seen = replay_of(Cassette("gemini", "test", [conn]))
    client = Client(replay)
    client.send(SETUP, 0.0)
    for i, payload in enumerate([video, chunk(), video, chunk()]):
        client.send(payload, 1.0 + i * 0.1)
    assert sent(client.until(1.5)) == ["server_content.input_transcription"]
    assert not [f for name, f in seen if name == "cassette.diverged"]


def test_a_connection_plays_the_recorded_one_that_starts_as_it_does() -> None:
    fresh = Recorded(1, 0.0, PATH, said=[said(0.0, "client", SETUP, n=1),
                                         said(0.2, "server", DONE, after=1)])
    resumed = Recorded(2, 5.0, PATH, said=[said(5.0, "client", RESUME, n=1)],
                       ending=Ending(5.6, 1011, "refused", "server", after=1))
    replay, seen = replay_of(Cassette("gemini", "test", [fresh, resumed]))
    first = Client(replay)
    first.send(RESUME, 0.0)  # a resume first: the recorded resume is played, not the fresh one
    assert sent(first.until(1.0)) == ["close 1011"]
    second = Client(replay, 2.0)
    second.send(SETUP, 2.0)
    assert sent(second.until(3.0)) == ["setup_complete"]
    assert [f["recorded"] for name, f in seen if name == "cassette.play"] == [1, 2, 1]
    third = Client(replay, 4.0)  # none is left
    (close,) = third.until(4.0)
    assert close.code == DIVERGED_CODE and "no recorded connection is left" in close.reason


def test_steps_take_a_run_of_stream_chunks_for_one_and_turns_one_each() -> None:
    conn = Recorded(1, 0.0, PATH, said=[
        said(0.0, "client", SETUP, n=1), said(1.0, "client", chunk(), n=2),
        said(1.1, "client", chunk(), n=3), said(2.0, "client", SAY, n=4),
        said(3.0, "client", SAY, n=5)])
    steps = steps_of(conn, GEMINI.is_stream)
    assert [(s.kind, s.first, s.last) for s in steps] == [
        ("setup", 1, 1), ("realtime_input.audio", 2, 3), ("client_content", 4, 4),
        ("client_content", 5, 5)]


def test_show_tells_the_conversation() -> None:
    text = render(spoken(), "spoken.cassette.jsonl")
    assert "connection 1 at 0.000 s" in text and "4 client and 2 server messages" in text
    assert "#2-4  realtime_input.audio" in text and "3 x, 0.29 s of audio" in text
    assert "close 1011 'Internal error encountered.'" in text


# The profile.


def test_a_profile_replays_a_cassette_and_speaks_its_protocol(tmp_path: Path) -> None:
    conn = Recorded(1, 0.0, "/v1/realtime", said=[
        said(0.0, "server", json.dumps({"type": "session.created", "session": {}}))])
    write_cassette(tmp_path / "o.cassette.jsonl", Cassette("openai", "test", [conn]))
    (tmp_path / "p.yaml").write_text(
        "name: p\ntarget: {cassette: o.cassette.jsonl}\nclient: {builtin: openai-naive}\n")
    from faultlab.profile import load_profile

    profile = load_profile(tmp_path / "p.yaml")
    assert profile.protocol.name == "openai" and profile.target_kind is not None
    assert profile.target_kind.name == "cassette"


@pytest.mark.parametrize(("target", "problem"), [
    ("{cassette: none.cassette.jsonl}", "target.cassette.file: "),
    ("{cassette: {file: o.cassette.jsonl, personality: gemini-dev-2026-10}}",
     "target.cassette.personality: gemini-dev-2026-10 speaks gemini; the cassette openai"),
    ("{cassette: {file: o.cassette.jsonl, divergence: loose}}", "target.cassette.divergence"),
])
def test_a_cassette_target_that_cannot_be_is_told(tmp_path: Path, target: str, problem: str) -> None:
    write_cassette(tmp_path / "o.cassette.jsonl", Cassette("openai", "test", []))
    with pytest.raises(ProfileError) as exc:
        parse_profile(f"name: p\ntarget: {target}\nclient: {{builtin: naive}}\n",
                      str(tmp_path / "p.yaml"), tmp_path / "p.yaml")
    assert problem in "\n".join(exc.value.problems)


def test_recording_needs_a_target_and_the_proxy_records_a_program() -> None:
    with pytest.raises(ProfileError) as exc:
        parse_profile("name: p\nrecord: true\nclient: {builtin: naive}\n")
    assert "record: a cassette records a target's side" in exc.value.problems[0]
    program = parse_profile("name: p\nrecord: true\ntarget: {builtin: ws-echo-server, port: 8765}\n"
                            "client: {builtin: ws-client}\n")
    assert "proxy" in program.needs
    emulated = parse_profile("name: p\nrecord: true\ntarget: {emulator: {}}\n"
                             "client: {builtin: naive}\n")
    assert "proxy" not in emulated.needs
