"""pipecat's and LiveKit Agents' OpenAI Realtime clients, the real ones, unmodified, against the
emulator over TLS (the CA from SSL_CERT_FILE), as openai-agents runs in
openai_clients/test_openai_agents.py.

Each is in a venv of its own, which `make install` makes (`.venv-pipecat`: pipecat-ai[openai,webrtc]
1.14.0; `.venv-livekit`: livekit-agents and livekit-plugins-openai 1.8.9), and is driven by a
script of its own there (pipecat_session.py, livekit_session.py: how, and why so, in their
docstrings) that imports nothing of faultlab and writes what the client saw as JSON. Each client
gets a typed turn answered, a function call answered and spoken of, and a spoken booking
through the server's VAD.

The emulator records a tape (`--record`) of every frame both ways, so the traffic each client made
is checked too: what it sent, and each server event as pipecat's parser and LiveKit's handlers
read it and as the SDK's types take it (pipecat_problems, livekit_problems, sdk_problems of
openai_clients/, whose test_pipecat.py and test_livekit.py also replay both clients' traffic on
the SDK's connection for what a run does not steer: barge-in, truncation, locally driven turns,
interruption).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from faultlab.cassette.tape import Message, Opened, read_tape

from .conftest import BOOKING, RunningEmulator
from .openai_clients.events import (
    BOOKED,
    RATE,
    Event,
    Findings,
    of,
    sdk_problems,
    silence,
)
from .openai_clients.livekit_model import livekit_problems
from .openai_clients.pipecat_service import pipecat_problems
from .test_openai_sdk import speech_24k

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def emulator(start_emulator: Callable[..., RunningEmulator], tmp_path: Path) -> RunningEmulator:
    return start_emulator("openai-realtime", 0.1, "--record", str(tmp_path / "tape.jsonl"))


def run_client(client: str, scenario: str, emulator: RunningEmulator, tmp_path: Path,
               *extra: str) -> dict[str, Any]:
    """What CLIENT_session.py, run by `.venv-CLIENT`'s interpreter, saw of `scenario`."""
    python = REPO / f".venv-{client}" / "bin" / "python"
    assert python.exists(), f"no {python}: `make install` makes it"
    out = tmp_path / f"{client}-{scenario}.json"
    done = subprocess.run(
        [str(python), str(Path(__file__).with_name(f"{client}_session.py")), scenario,
         emulator.env["OPENAI_BASE_URL"], str(out), *extra],
        capture_output=True, text=True, timeout=60, env={**os.environ})
    assert done.returncode == 0, done.stderr[-3000:]
    got: dict[str, Any] = json.loads(out.read_text())
    return got


class Connection:
    """One connection of the emulator's tape: its path, and the events each side sent."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.client: list[Event] = []
        self.server: list[Event] = []


def connections(tmp_path: Path) -> list[Connection]:
    found: dict[int, Connection] = {}
    for record in read_tape(tmp_path / "tape.jsonl"):
        if isinstance(record, Opened):
            found[record.conn] = Connection(record.path)
        elif isinstance(record, Message):
            side = found[record.conn].client if record.sender == "client" else found[
                record.conn].server
            side.append(json.loads(record.data))
    return list(found.values())


def responses(events: list[Event]) -> list[list[Event]]:
    """Each response's events, from its response.created to its response.done."""
    out = []
    for start, event in enumerate(events):
        if event["type"] == "response.created":
            rid = event["response"]["id"]
            end = next((i for i in range(start, len(events)) if events[i]["type"] == "response.done"
                        and events[i]["response"]["id"] == rid), len(events) - 1)
            out.append(events[start:end + 1])
    return out


BOOKED_SLOT = {"status": "booked", "slot": "tomorrow at 3pm"}


def pipecat_booking(found: Findings, name: str, run: dict[str, Any], users: list[str]) -> None:
    """A pipecat session that booked: the call, its result, the spoken reply (audio bracketed
    by TTSStarted/Stopped before its LLMFullResponseEndFrame: llm.py, _handle_evt_response_done),
    and the context the aggregators kept: the user's messages `users`, and the call, the result
    and the reply after the others. (Where a spoken user turn goes among them is pipecat's own
    race: its transcript goes up to the user aggregator as the call goes down to the assistant
    aggregator, and either may write first; both orders were seen.)"""
    found.check(run["calls"] == [{"slot": "tomorrow at 3pm"}], f"{name}: calls {run['calls']}")
    found.check(run["said"][-1:] == [BOOKED], f"{name}: said {run['said']}")
    found.check(run["audio_bytes"] > RATE, f"{name}: less than half a second of audio")
    context = run["context"]
    found.check([m["content"] for m in context if m["role"] == "user"] == users,
                f"{name}: the user's messages in the context: {context}")
    *_, call, result, reply = [None, None, None] + [m for m in context if m["role"] != "user"]
    found.check(call and [c["function"]["name"] for c in call.get("tool_calls", ())]
                == ["book_slot"], f"{name}: the call in the context: {call}")
    found.check(result and result["role"] == "tool"
                and json.loads(result["content"]) == BOOKED_SLOT, f"{name}: result {result}")
    found.check(reply and reply["role"] == "assistant" and reply["content"] == BOOKED,
                f"{name}: reply {reply}")
    kinds = [kind for kind, _ in run["frames"]]
    result_at = kinds.index("FunctionCallResultFrame") if "FunctionCallResultFrame" in kinds else -1
    order = [result_at, next((i for i, k in enumerate(kinds)
                              if k == "TTSStartedFrame" and i > result_at), -1)]
    order += [max((i for i, k in enumerate(kinds) if k == last), default=-1)
              for last in ("TTSStoppedFrame", "LLMFullResponseEndFrame")]
    found.check(-1 not in order and order == sorted(order), f"{name}: frames {order} of {kinds}")


def pipecat_traffic(found: Findings, conns: list[Connection], count: int) -> None:
    """A connection per session, the model in its URL; pipecat's first event its session.update,
    sent on session.created (llm.py, _handle_evt_session_created); every server event one that
    its parser takes and that stops nothing (pipecat_problems), and that the SDK's types take."""
    found.check(len(conns) == count and all(c.path.endswith("/realtime?model=gpt-realtime")
                                            for c in conns), [c.path for c in conns])
    for number, conn in enumerate(conns, 1):
        found.check([e["type"] for e in conn.client[:1]] == ["session.update"],
                    f"connection {number}: first sent {[e['type'] for e in conn.client[:1]]}")
        found.check(not pipecat_problems(conn.server),
                    f"connection {number}: {pipecat_problems(conn.server)}")
        found.check(not sdk_problems(conn.server),
                    f"connection {number}: {sdk_problems(conn.server)}")


def test_pipecat_text_turn_and_function_call(emulator: RunningEmulator, tmp_path: Path) -> None:
    """OpenAIRealtimeLLMService in a pipeline: a text turn (text out), then, in a session of
    its own, a booking (audio out, the default): book_slot, registered with register_function,
    is called, its result goes back, and the reply is spoken, its transcript in LLMTextFrames."""
    got = run_client("pipecat", "text", emulator, tmp_path)
    found = Findings()
    text, tool = got["text"], got["tool"]
    for name, run in got.items():
        found.check(not run["problems"], f"{name}: {run['problems']}")
    found.check(text["said"] == ["You said: Hello there"], f"text: said {text['said']}")
    found.check(text["audio_bytes"] == 0, f"text: {text['audio_bytes']} bytes of audio")
    found.check(text["context"] == [{"role": "user", "content": "Hello there"},
                                    {"role": "assistant", "content": "You said: Hello there"}],
                f"text: context {text['context']}")
    found.check(tool["said"] == [BOOKED], f"tool: said {tool['said']}")
    pipecat_booking(found, "tool", tool, [BOOKING])
    pipecat_traffic(found, connections(tmp_path), 2)
    found.done()


def test_pipecat_spoken_booking(emulator: RunningEmulator, utterances: Path,
                                tmp_path: Path) -> None:
    """Server VAD and input transcription (examples/realtime/realtime-openai.py): the greeting
    asked for by the opening context, then the user's spoken booking in InputAudioRawFrames,
    ended by the server's VAD, transcribed into the context; the call, its result, the reply."""
    pcm = tmp_path / "booking.pcm"
    pcm.write_bytes(speech_24k(utterances, "booking") + silence(1.0))
    run = run_client("pipecat", "audio", emulator, tmp_path, str(pcm))["audio"]
    found = Findings()
    found.check(not run["problems"], run["problems"])
    found.check(run["said"] == ["You said: Say hello!", BOOKED], f"said {run['said']}")
    found.check(run["context"][:2] == [
        {"role": "user", "content": "Say hello!"},
        {"role": "assistant", "content": "You said: Say hello!"}], f"context {run['context']}")
    pipecat_booking(found, "audio", run, ["Say hello!", BOOKING])
    kinds = [kind for kind, _ in run["frames"]]
    found.check("UserStartedSpeakingFrame" in kinds and "UserStoppedSpeakingFrame" in kinds,
                "no user turn from the server's VAD (speech_started/stopped)")
    conns = connections(tmp_path)
    pipecat_traffic(found, conns, 1)
    server = [e["type"] for conn in conns for e in conn.server]
    for kind in ("input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                 "conversation.item.input_audio_transcription.completed"):
        found.check(kind in server, f"no {kind}")
    found.done()


def livekit_traffic(found: Findings, conns: list[Connection], created_by_server: int) -> None:
    """One connection, to process_base_url's URL. Each response.create carries its event_id in
    metadata.client_event_id, which resolves generate_reply's future when response.created
    brings it back; the first `created_by_server` responses were the server VAD's. Each response
    as LiveKit's handlers read it (livekit_problems); no error; the SDK's types take it all."""
    found.check(len(conns) == 1, f"{len(conns)} connections")
    if not conns:
        return
    conn = conns[0]
    found.check(conn.path.endswith("/v1/realtime?model=gpt-realtime"), conn.path)
    asked = [e["event_id"] for e in of(conn.client, "response.create")]
    answered = responses(conn.server)
    echoed = [(r[0]["response"].get("metadata") or {}).get("client_event_id") for r in answered]
    found.check(asked and echoed == [None] * created_by_server + asked,
                f"response.create {asked}; response.created's client_event_id {echoed}")
    for response in answered:
        found.wrong += livekit_problems(response, None)
    found.check(not of(conn.server, "error"), of(conn.server, "error"))
    found.check(not sdk_problems(conn.server), sdk_problems(conn.server))


CALL = ["function_call", "book_slot", '{"slot": "tomorrow at 3pm"}']
OUTPUT = ["function_call_output", "book_slot", json.dumps(BOOKED_SLOT)]


def conversation(history: list[list[Any]]) -> list[list[Any]]:
    """The history's messages and calls (not its handoff and configuration items)."""
    return [item for item in history if item[0] in ("message", "function_call",
                                                   "function_call_output")]


def test_livekit_text_turn_and_function_call(emulator: RunningEmulator, tmp_path: Path) -> None:
    """An AgentSession, no room, with the OpenAI RealtimeModel as its LLM: a text turn
    (session.run(user_input=...)) answered, then a booking: the agent's function tool is called
    by its activity, the output sent back, and the reply generated (audio and text, the
    model's default modalities)."""
    got = run_client("livekit", "text", emulator, tmp_path)
    found = Findings()
    found.check(not got["problems"], got["problems"])
    found.check(got["runs"] == [[["message", "assistant", "You said: Hello there"]],
                                [CALL, OUTPUT, ["message", "assistant", BOOKED]]],
                f"runs: {got['runs']}")
    found.check(got["calls"] == ["tomorrow at 3pm"], f"calls: {got['calls']}")
    history = conversation(got["history"])
    found.check(history == [["message", "user", "Hello there"],
                            ["message", "assistant", "You said: Hello there"],
                            ["message", "user", BOOKING], CALL, OUTPUT,
                            ["message", "assistant", BOOKED]], f"history: {history}")
    livekit_traffic(found, connections(tmp_path), 0)
    found.done()


def test_livekit_spoken_booking(emulator: RunningEmulator, utterances: Path,
                                tmp_path: Path) -> None:
    """The session's audio input fed 20 ms frames of the user's booking: pushed to the realtime
    session, the turn ended by the server's (semantic) VAD and answered by it, the transcript the
    user's message in the history; the call, its output, the reply generated after it."""
    pcm = tmp_path / "booking.pcm"
    pcm.write_bytes(speech_24k(utterances, "booking") + silence(1.0))
    got = run_client("livekit", "audio", emulator, tmp_path, str(pcm))
    found = Findings()
    found.check(not got["problems"], got["problems"])
    found.check(got["calls"] == ["tomorrow at 3pm"], f"calls: {got['calls']}")
    history = conversation(got["history"])
    found.check(history == [["message", "user", BOOKING], CALL, OUTPUT,
                            ["message", "assistant", BOOKED]], f"history: {history}")
    conns = connections(tmp_path)
    livekit_traffic(found, conns, 1)
    appended = of(conns[0].client, "input_audio_buffer.append") if conns else []
    found.check(len(appended) > 10, f"{len(appended)} input_audio_buffer.append sent")
    found.done()
