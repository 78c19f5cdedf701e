"""Conformance with the public OpenAI Realtime clients, on the real `openai` SDK over TLS.

The clients, each driving the GA protocol as its own code does (file:line in the comments, at the
commits read):
- the openai SDK's realtime examples (openai/openai-python e43b422, examples/realtime/): what
  they send and read, on the SDK itself;
- an openai-agents RealtimeAgent with a function tool, run for real (the `openai-agents`
  package, 0.24.0). Its OpenAIRealtimeWebSocketModel does not read OPENAI_BASE_URL: it connects to
  `model_config["url"]`, else to api.openai.com (agents/realtime/openai_realtime.py, connect()).
  It runs in a venv of its own, `.venv-agents`, which `make install` makes: it pins
  websockets<17, and the emulator needs 17 (tests/emulator/agents_session.py);
- pipecat's OpenAIRealtimeLLMService (pipecat-ai/pipecat acead05,
  src/pipecat/services/openai/realtime/llm.py and events.py) and LiveKit Agents' RealtimeModel
  (livekit/agents da6af86, livekit-plugins/livekit-plugins-openai/livekit/plugins/openai/realtime/
  realtime_model.py and utils.py): the events each sends, in its order and with its fields, sent
  on the SDK's connection; what each reads of the server's events asserted. This reaches what a
  run of the real client does not steer (barge-in, truncation, locally driven turns,
  interruption, conversation.item.retrieve). The real clients, unmodified, run in
  test_openai_public_clients.py (pipecat-ai 1.14.0, livekit-agents 1.8.9, each in a venv of its
  own that `make install` makes), whose traffic is checked with pipecat_problems,
  livekit_problems and sdk_problems from here.

Every server event is also validated against the SDK's own types, strictly, as openai-agents
validates them (a failure there is an error event in the agent's session). A test gathers what
it finds and fails once, with all of it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest
from openai import AsyncOpenAI
from openai.types.realtime import RealtimeServerEvent
from pydantic import Field, TypeAdapter, ValidationError

from .conftest import BOOKING, HELLO, RunningEmulator
from .test_openai_sdk import speech_24k

MODEL = "gpt-realtime"
TIMEOUT = 15
RATE = 24000
Event = dict[str, Any]
SERVER_EVENT: TypeAdapter[Any] = TypeAdapter(
    Annotated[RealtimeServerEvent, Field(discriminator="type")])
BOOK_INSTRUCTIONS = "You book appointment slots with the book_slot tool."
BOOKED = "Done: your slot tomorrow at 3pm is booked."
# Audio is sent ten times faster than real time, as the emulator runs at time scale 0.1.
PACE = 0.1


@pytest.fixture
def emulator(start_emulator: Callable[..., RunningEmulator]) -> RunningEmulator:
    return start_emulator("openai-realtime", 0.1)


class Findings:
    """What a test found wrong, reported together."""

    def __init__(self) -> None:
        self.wrong: list[str] = []

    def check(self, ok: object, what: str) -> None:
        if not ok:
            self.wrong.append(what)

    def done(self) -> None:
        if self.wrong:
            pytest.fail("\n".join(map(str, self.wrong)), pytrace=False)


async def read_until(conn: Any, stop: str | Callable[[Event], bool],
                     seen: list[Event] | None = None) -> list[Event]:
    """The server's events, as JSON, up to and with the first that `stop` names or matches."""
    out: list[Event] = []
    try:
        async with asyncio.timeout(TIMEOUT):
            while True:
                event = json.loads(await conn.recv_bytes())
                out.append(event)
                if seen is not None:
                    seen.append(event)
                if event["type"] == stop if isinstance(stop, str) else stop(event):
                    return out
    except TimeoutError:
        raise AssertionError(f"nothing matching {stop!r} within {TIMEOUT} s, after "
                             f"{[e['type'] for e in out]}") from None


def of(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e["type"] == kind]


def index(events: list[Event], match: Callable[[Event], bool]) -> int:
    """The position of the first event that matches (len(events): none)."""
    return next((i for i, e in enumerate(events) if match(e)), len(events))


def kind_is(kind: str, **fields: Any) -> Callable[[Event], bool]:
    return lambda e: e["type"] == kind and all(_get(e, k) == v for k, v in fields.items())


_MISSING = object()


def _get(event: Event, path: str) -> Any:
    value: Any = event
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return _MISSING
        value = value[key]
    return value


def sdk_problems(events: list[Event]) -> list[str]:
    """Events the SDK's types refuse, validated as openai-agents does (it eases only a null
    previous_item_id: openai_realtime.py, _handle_ws_event)."""
    out = []
    for event in events:
        if "previous_item_id" in event and event["previous_item_id"] is None:
            event = {**event, "previous_item_id": ""}
        try:
            SERVER_EVENT.validate_python(event)
        except ValidationError as exc:
            out.append(f"{event['type']}: the SDK's types refuse it: "
                       f"{str(exc).splitlines()[1:3]}")
    return out


def b64(pcm: bytes) -> str:
    return base64.b64encode(pcm).decode()


def silence(seconds: float) -> bytes:
    return np.zeros(int(RATE * seconds), dtype="<i2").tobytes()


def chunks(pcm: bytes, seconds: float) -> list[bytes]:
    size = int(RATE * seconds) * 2
    return [pcm[i:i + size] for i in range(0, len(pcm), size)]


def transcript(events: list[Event], response_id: str | None = None) -> str:
    return "".join(e["delta"] for e in of(events, "response.output_audio_transcript.delta")
                   if response_id is None or e["response_id"] == response_id)


def audio_bytes(events: list[Event]) -> int:
    return sum(len(base64.b64decode(e["delta"])) for e in of(events, "response.output_audio.delta"))


# The openai SDK's examples (openai-python examples/realtime/).


def test_sdk_example_text_chat(emulator: RunningEmulator) -> None:
    """realtime.py: a session.update sent at once, then turns of a user message and
    response.create, each read to its response.done."""

    async def go() -> tuple[list[Event], list[list[Event]]]:
        seen: list[Event] = []
        async with AsyncOpenAI().realtime.connect(model=MODEL) as conn:  # realtime.py:22-24
            # realtime.py:25-31: before reading anything.
            await conn.session.update(session={"output_modalities": ["text"], "model": MODEL,
                                               "type": "realtime"})
            turns = []
            for text in ("Hello there", "Did you book it?"):
                await conn.conversation.item.create(item={  # realtime.py:37-44
                    "type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": text}]})
                await conn.response.create()  # realtime.py:45
                turns.append(await read_until(conn, "response.done", seen))  # realtime.py:46-52
        return seen, turns

    seen, turns = asyncio.run(go())
    found = Findings()
    (updated,) = of(seen, "session.updated")
    found.check(updated["session"]["output_modalities"] == ["text"], "session.updated: not text")
    for turn, said in zip(turns, ("You said: Hello there", "I haven't booked anything yet."),
                          strict=True):
        deltas = "".join(e["delta"] for e in of(turn, "response.output_text.delta"))
        (done,) = of(turn, "response.output_text.done")
        found.check(deltas == said == done["text"], f"said {deltas!r}, done {done['text']!r}")
        found.check(turn[-1]["response"]["status"] == "completed", "a turn did not complete")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()


def test_session_update_sent_at_once_follows_session_created(emulator: RunningEmulator) -> None:
    """Both SDK examples send their session.update as soon as the socket is open, before reading
    anything (realtime.py:25-31, push_to_talk_app.py:166-174), as openai-agents does
    (openai_realtime.py connect(): _update_session_config) and LiveKit (realtime_model.py:908,
    :1111-1126). session.created is the service's first event all the same; openai-agents takes
    the session of each session.created and session.updated as the one in force
    (_update_created_session), so a late session.created puts the defaults back. Six
    connections: the order must hold on every one."""

    async def go() -> list[list[str]]:
        orders = []
        client = AsyncOpenAI()
        for session in ({"output_modalities": ["text"], "model": MODEL, "type": "realtime"},
                        {"audio": {"input": {"turn_detection": {"type": "server_vad"}}},
                         "model": MODEL, "type": "realtime"}) * 3:
            async with client.realtime.connect(model=MODEL) as conn:
                await conn.session.update(session=session)
                seen = await read_until(conn, "session.updated")
                seen += [] if of(seen, "session.created") else await read_until(
                    conn, "session.created")
                orders.append([e["type"] for e in seen])
        return orders

    found = Findings()
    for number, order in enumerate(asyncio.run(go()), 1):
        found.check(order == ["session.created", "session.updated"],
                    f"connection {number}: {order}: the session.update sent at once was "
                    "acknowledged before the session was announced")
    found.done()


@pytest.mark.parametrize("server_vad", [True, False], ids=["server-vad", "push-to-talk"])
def test_sdk_example_push_to_talk(emulator: RunningEmulator, utterances: Path,
                                  server_vad: bool) -> None:
    """push_to_talk_app.py: server VAD (the default), or none and the turn committed by hand;
    a response.cancel as recording starts; 20 ms of microphone audio an append; audio and
    transcript deltas gathered by item."""

    async def go() -> list[Event]:
        seen: list[Event] = []
        async with AsyncOpenAI().realtime.connect(model=MODEL) as conn:  # :160
            # :166-174 (turn_detection None: "manually handle VAD yourself", :165).
            detection = {"type": "server_vad"} if server_vad else None
            await conn.session.update(session={
                "audio": {"input": {"turn_detection": detection}}, "model": MODEL,
                "type": "realtime"})
            await read_until(conn, "session.created", seen)
            # :249-251: the first chunk recorded sends a response.cancel, nothing being under way.
            await conn.send({"type": "response.cancel"})
            speech = speech_24k(utterances, "hello") + (silence(1.0) if server_vad else b"")
            for chunk in chunks(speech, 0.02):  # read_size = SAMPLE_RATE * 0.02 (:226, :253)
                await conn.input_audio_buffer.append(audio=b64(chunk))
                await asyncio.sleep(0.02 * PACE)
            if not server_vad:  # :278-286: K released, no turn detection: commit and ask
                await conn.input_audio_buffer.commit()
                await conn.response.create()
            await read_until(conn, "response.done", seen)
        return seen

    seen = asyncio.run(go())
    found = Findings()
    created = of(seen, "session.created")[0]
    found.check(created["session"].get("id"), "session.created has no session.id (:182)")
    errors = of(seen, "error")
    found.check([e["error"]["code"] for e in errors] == ["response_cancel_not_active"],
                f"errors: {errors}")
    expected = (["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped"]
                if server_vad else [])
    after = [e["type"] for e in seen if e["type"].startswith("input_audio_buffer.")]
    found.check(after == [*expected, "input_audio_buffer.committed"], f"buffer events: {after}")
    # :190-210: audio deltas and transcript deltas are kept by item_id.
    items = {e["item_id"] for e in of(seen, "response.output_audio.delta")}
    found.check(len(items) == 1, f"audio items: {items}")
    found.check(audio_bytes(seen) > RATE, "less than half a second of audio")
    (done,) = of(seen, "response.output_audio_transcript.done")
    found.check(transcript(seen) == done["transcript"] == f"You said: {HELLO}",
                f"transcript {transcript(seen)!r}, done {done['transcript']!r}")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()


# openai-agents, for real: in a venv of its own (`make install` makes it; openai-agents pins
# websockets below 17, which the emulator needs), running tests/emulator/agents_session.py.

AGENTS_PYTHON = Path(__file__).resolve().parents[2] / ".venv-agents" / "bin" / "python"


def run_agent(emulator: RunningEmulator, tmp_path: Path, scenario: str,
              *extra: str) -> dict[str, Any]:
    """What agents_session.py saw of `scenario` against `emulator`."""
    assert AGENTS_PYTHON.exists(), f"no {AGENTS_PYTHON}: `make install` makes it"
    out = tmp_path / f"agents-{scenario}.json"
    done = subprocess.run(
        [str(AGENTS_PYTHON), str(Path(__file__).with_name("agents_session.py")), scenario,
         emulator.env["OPENAI_BASE_URL"], str(out), *extra],
        capture_output=True, text=True, timeout=60, env={**os.environ})
    assert done.returncode == 0, done.stderr[-3000:]
    got: dict[str, Any] = json.loads(out.read_text())
    return got


def test_openai_agents_text_turn_and_function_call(emulator: RunningEmulator,
                                                   tmp_path: Path) -> None:
    """A RealtimeAgent answers a text turn, calls its function tool, gets the tool's output
    sent back (function_call_output and response.create, by its response sequencer) and speaks
    of it."""
    got = run_agent(emulator, tmp_path, "text")
    found = Findings()
    found.check(not got["problems"], got["problems"])
    found.check(got["calls"] == ["tomorrow at 3pm"], f"calls: {got['calls']}")
    found.check([json.loads(o) for o in got["tool_outputs"]]
                == [{"status": "booked", "slot": "tomorrow at 3pm"}], got["tool_outputs"])
    found.check(got["said"] == [["user", ["Hello there"]], ["assistant", ["You said: Hello there"]],
                                ["user", [BOOKING]], ["assistant", [BOOKED]]],
                f"history: {got['said']}")
    (call,) = got["function_calls"]
    found.check(call["name"] == "book_slot" and call["output"] and call["status"] == "completed",
                f"the call in the history: {call}")
    found.check(not sdk_problems(got["raw"]), sdk_problems(got["raw"]))
    found.done()


def test_openai_agents_audio_turn(emulator: RunningEmulator, utterances: Path,
                                  tmp_path: Path) -> None:
    """A RealtimeAgent with its default settings (audio out, semantic VAD, input
    transcription: openai_realtime.py DEFAULT_MODEL_SETTINGS) hears a spoken turn in 40 ms
    chunks (examples/realtime/cli/demo.py CHUNK_LENGTH_S) and answers in audio."""
    pcm = tmp_path / "hello.pcm"
    pcm.write_bytes(speech_24k(utterances, "hello") + silence(1.0))
    got = run_agent(emulator, tmp_path, "audio", str(pcm))
    found = Findings()
    found.check(not got["problems"], got["problems"])
    found.check(got["audio_bytes"] > RATE, "less than half a second of audio")
    found.check(got["said"] == [["user", [HELLO]], ["assistant", [f"You said: {HELLO}"]]],
                f"history: {got['said']}")
    found.check(not sdk_problems(got["raw"]), sdk_problems(got["raw"]))
    found.done()


# pipecat's OpenAIRealtimeLLMService (services/openai/realtime/llm.py, events.py), reproduced.

PIPECAT_MODEL = "gpt-realtime-2.1"  # llm.py:292, in the URL's ?model= (llm.py:334)
# adapters/services/open_ai_realtime_adapter.py:217-226: a tool as the service sends it.
PIPECAT_TOOL = {"type": "function", "name": "book_slot", "description": "Book an appointment slot.",
                "parameters": {"type": "object",
                               "properties": {"slot": {"type": "string", "description": "When"}},
                               "required": ["slot"]}}
# events.py:1106-1138: the events it parses; anything else raises in parse_server_event
# (events.py:1156-1157), out of the receive loop (llm.py:836-837), which ends. And each model's
# fields without a default (events.py:346-1103): a missing one raises there too.
_IDS = ("response_id", "item_id", "output_index", "content_index")
_RESPONSE = ("response.id", "response.object", "response.status", "response.output")
PIPECAT_REQUIRED: dict[str, tuple[str, ...]] = {
    "error": ("error.type", "error.message"),
    "session.created": ("session",), "session.updated": ("session",),
    "conversation.created": ("conversation.id", "conversation.object"),
    "input_audio_buffer.committed": ("item_id",), "input_audio_buffer.cleared": (),
    "input_audio_buffer.speech_started": ("audio_start_ms", "item_id"),
    "input_audio_buffer.speech_stopped": ("audio_end_ms", "item_id"),
    "conversation.item.added": ("item.type",), "conversation.item.done": ("item.type",),
    "conversation.item.input_audio_transcription.delta": ("item_id", "content_index", "delta"),
    "conversation.item.input_audio_transcription.completed": (
        "item_id", "content_index", "transcript"),
    "conversation.item.input_audio_transcription.failed": (
        "item_id", "content_index", "error.type", "error.message"),
    "conversation.item.truncated": ("item_id", "content_index", "audio_end_ms"),
    "conversation.item.deleted": ("item_id",), "conversation.item.retrieved": ("item.type",),
    "response.created": _RESPONSE, "response.done": _RESPONSE,
    "response.output_item.added": ("response_id", "output_index", "item.type"),
    "response.output_item.done": ("response_id", "output_index", "item.type"),
    "response.content_part.added": (*_IDS, "part.type"),
    "response.content_part.done": (*_IDS, "part.type"),
    "response.output_text.delta": (*_IDS, "delta"), "response.output_text.done": (*_IDS, "text"),
    "response.output_audio_transcript.delta": (*_IDS, "delta"),
    "response.output_audio_transcript.done": (*_IDS, "transcript"),
    "response.output_audio.delta": (*_IDS, "delta"), "response.output_audio.done": _IDS,
    "response.function_call_arguments.delta": (
        "response_id", "item_id", "output_index", "call_id", "delta"),
    "response.function_call_arguments.done": (
        "response_id", "item_id", "output_index", "call_id", "arguments"),
    "rate_limits.updated": ("rate_limits",),
}
_ITEM_TYPES = ("message", "function_call", "function_call_output")  # events.py:297
_CONTENT_TYPES = ("text", "audio", "input_text", "input_audio", "input_image", "output_text",
                  "output_audio")  # events.py:269-271
# events.py:1066-1070: a usage has all of these.
_USAGE = ("total_tokens", "input_tokens", "output_tokens", "input_token_details",
          "output_token_details")
# llm.py:866-876: any other error is "fatal": the receive loop returns.
# Errors its receive loop handles: a cancel or a response too many, and a retrieve of an item
# that is gone (llm.py:1131-1149, matched by the event_id it gave).
PIPECAT_TOLERATED = ("response_cancel_not_active", "conversation_already_has_active_response",
                     "item_retrieve_invalid_item_id")


def pipecat_problems(events: list[Event]) -> list[str]:
    """What would stop pipecat's receive loop: an event it cannot parse, or a fatal error."""
    out = []
    for e in events:
        kind = e["type"]
        if kind not in PIPECAT_REQUIRED:
            out.append(f"{kind}: a type pipecat does not parse (events.py:1156-1157)")
            continue
        for path in ("event_id", *PIPECAT_REQUIRED[kind]):
            if _get(e, path) in (None, _MISSING):
                out.append(f"{kind}: no {path} (events.py)")
        items = [e.get("item"), *(e["response"]["output"] if "response" in e else [])]
        for item in (i for i in items if isinstance(i, dict)):
            if item.get("type") not in _ITEM_TYPES:
                out.append(f"{kind}: an item of type {item.get('type')} (events.py:297)")
            for part in item.get("content") or []:
                if part.get("type") not in _CONTENT_TYPES:
                    out.append(f"{kind}: content of type {part.get('type')} (events.py:269)")
        if "response" in e:
            if "status_details" not in e["response"]:
                out.append(f"{kind}: no response.status_details (events.py:1095)")
            usage = e["response"].get("usage")
            for field in _USAGE if usage is not None else ():
                if usage.get(field) is None:
                    out.append(f"{kind}: no response.usage.{field} (events.py:1066-1070)")
        if kind == "response.done" and e["response"].get("usage") is None:
            # llm.py:1013-1016 reads usage.input_tokens of every response.done, cancelled too.
            out.append(f"response.done ({e['response']['status']}): usage is null "
                       "(llm.py:1013-1016 reads response.usage.input_tokens: AttributeError)")
        if kind == "error" and e["error"].get("code") not in PIPECAT_TOLERATED:
            out.append(f"error {e['error'].get('code')}: fatal to pipecat (llm.py:866-876)")
    return list(dict.fromkeys(out))


def pipecat(kind: str, **fields: Any) -> Event:
    """A client event as pipecat sends it: model_dump(exclude_none=True) of its model, the
    event_id (a uuid4) first (events.py:369-376; llm.py:700-706)."""
    return {"event_id": str(uuid.uuid4()), "type": kind, **fields}


def pipecat_session(**session: Any) -> Event:
    """llm.py:797-826: the session properties, with the model and instructions kept in sync
    with the service's settings (llm.py:116-125)."""
    return pipecat("session.update", session={"type": "realtime", "model": PIPECAT_MODEL,
                                               "instructions": BOOK_INSTRUCTIONS, **session})


def pipecat_user_text(text: str) -> tuple[str, Event]:
    """The context's user message (open_ai_realtime_adapter.py:192-196), its id made by the
    client (events.py:295)."""
    item_id = uuid.uuid4().hex
    return item_id, pipecat("conversation.item.create", item={
        "id": item_id, "type": "message", "role": "user",
        "content": [{"type": "input_text", "text": text}]})


# llm.py:1210-1214 (ResponseProperties: output_modalities defaults to ["audio"]).
PIPECAT_RESPONSE = {"output_modalities": ["audio"]}


async def pipecat_setup(conn: Any, seen: list[Event], session: Event, context: str) -> str:
    """session.created → session.update (llm.py:838-839, 879-882); session.updated → the
    context's message, the settings again, response.create (llm.py:884-890, 1176-1214).
    Returns the context message's id."""
    await read_until(conn, "session.created", seen)
    await conn.send(session)
    await read_until(conn, "session.updated", seen)
    item_id, item = pipecat_user_text(context)
    await conn.send(item)
    await conn.send({**session, "event_id": str(uuid.uuid4())})
    await conn.send(pipecat("response.create", response=PIPECAT_RESPONSE))
    return item_id


def test_pipecat_context_and_function_call(emulator: RunningEmulator) -> None:
    """The service's start (session.update on session.created, the context's message and
    response.create on session.updated) and a function call: the call is tracked from its
    conversation.item.added and run on response.function_call_arguments.done; the result goes
    back with response.create at once, without waiting for response.done."""

    async def go() -> tuple[list[Event], str]:
        seen: list[Event] = []
        async with AsyncOpenAI().realtime.connect(model=PIPECAT_MODEL) as conn:
            session = pipecat_session(
                # examples/realtime/realtime-openai.py: transcription, semantic VAD, noise
                # reduction; the tools from the context (llm.py:809-822).
                audio={"input": {"transcription": {"model": "gpt-realtime-whisper"},
                                 "noise_reduction": {"type": "near_field"},
                                 "turn_detection": {"type": "semantic_vad"}}},
                tools=[PIPECAT_TOOL])
            item_id = await pipecat_setup(conn, seen, session, BOOKING)
            done = await read_until(conn, "response.function_call_arguments.done", seen)
            call = done[-1]
            # llm.py:1077-1105: run at once; the result (1378-1385) and response.create
            # (1279-1280 → 1210-1214) follow it.
            output = json.dumps({"status": "booked", "slot": json.loads(call["arguments"])["slot"]})
            await conn.send(pipecat("conversation.item.create", item={
                "id": uuid.uuid4().hex, "type": "function_call_output",
                "call_id": call["call_id"], "output": output}))
            await conn.send(pipecat("response.create", response=PIPECAT_RESPONSE))
            await read_until(conn, lambda e: e["type"] == "response.done"
                             and e["response"]["output"]
                             and e["response"]["output"][0]["type"] == "message", seen)
            # retrieve_conversation_item (llm.py:460-485): event_id "rci_{item_id}", awaited until
            # conversation.item.retrieved (llm.py:992-996), or an error
            # item_retrieve_invalid_item_id whose event_id names the item (llm.py:1131-1149).
            for wanted in (item_id, "item_gone"):
                await conn.send({**pipecat("conversation.item.retrieve", item_id=wanted),
                                 "event_id": f"rci_{wanted}"})
            # A fence: the service answers a connection's events in order.
            await conn.send(pipecat("input_audio_buffer.clear"))
            await read_until(conn, "input_audio_buffer.cleared", seen)
        return seen, item_id

    seen, item_id = asyncio.run(go())
    found = Findings()
    found.check(not pipecat_problems(seen), pipecat_problems(seen))
    # llm.py:949-951: its own items are recognised by the id it gave them.
    found.check(any(kind_is("conversation.item.added", **{"item.id": item_id})(e) for e in seen),
                "no conversation.item.added with the context message's id")
    (call,) = of(seen, "response.function_call_arguments.done")
    added = index(seen, kind_is("conversation.item.added", **{"item.call_id": call["call_id"]}))
    # llm.py:936-942, 1090-1108: a call is run only if conversation.item.added told of it first,
    # and its name is read from that item (llm.py:1100).
    found.check(added < seen.index(call), "the call's conversation.item.added does not come first")
    found.check(added < len(seen) and seen[added]["item"].get("name") == "book_slot",
                "the call's conversation.item.added has no name")
    found.check(json.loads(call["arguments"]) == {"slot": "tomorrow at 3pm"}, call["arguments"])
    spoken = [e for e in of(seen, "response.done") if e["response"]["output"]
              and e["response"]["output"][0]["type"] == "message"]
    found.check(transcript(seen, spoken[-1]["response"]["id"]) == BOOKED,
                f"said {transcript(seen)!r}")
    retrieved = [e["item"]["id"] for e in of(seen, "conversation.item.retrieved")]
    found.check(retrieved == [item_id], f"conversation.item.retrieve of {item_id}: retrieved "
                f"{retrieved} (retrieve_conversation_item waits for it forever)")
    refused = [e["error"] for e in of(seen, "error")]
    found.check([(r["code"], r["event_id"]) for r in refused]
                == [("item_retrieve_invalid_item_id", "rci_item_gone")],
                f"conversation.item.retrieve of an unknown item: errors {refused}")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()


def test_pipecat_server_vad_turn_and_barge_in(emulator: RunningEmulator,
                                              utterances: Path) -> None:
    """Server VAD: the user's speech is answered; speech over the answer makes pipecat truncate
    the audio item it was playing (on input_audio_buffer.speech_started, llm.py:1116-1121 →
    588-621), and the new turn is answered."""

    async def go() -> tuple[list[Event], Event]:
        seen: list[Event] = []
        async with AsyncOpenAI().realtime.connect(model=PIPECAT_MODEL) as conn:
            # events.py:94-107: TurnDetection() with its defaults.
            session = pipecat_session(audio={"input": {
                "transcription": {"model": "gpt-realtime-whisper"},
                "turn_detection": {"type": "server_vad", "threshold": 0.5,
                                   "prefix_padding_ms": 300, "silence_duration_ms": 500}}})
            await pipecat_setup(conn, seen, session, "Say hello!")
            await read_until(conn, "response.done", seen)

            async def speak(name: str) -> None:  # llm.py:1306-1308, 20 ms frames
                for chunk in chunks(speech_24k(utterances, name) + silence(1.0), 0.02):
                    await conn.send(pipecat("input_audio_buffer.append", audio=b64(chunk)))
                    await asyncio.sleep(0.02 * PACE)

            first = asyncio.create_task(speak("hello"))
            answer = await read_until(conn, "response.output_audio.delta", seen)
            await first
            playing = answer[-1]
            started = asyncio.get_running_loop().time()
            barge_in = asyncio.create_task(speak("asked"))
            await read_until(conn, "input_audio_buffer.speech_started", seen)
            # _truncate_current_audio_response (llm.py:588-621): the shorter of the wall clock
            # and the audio received.
            received = audio_bytes([e for e in seen if e.get("item_id") == playing["item_id"]
                                    and e["type"] == "response.output_audio.delta"]) // 2
            elapsed_ms = int((asyncio.get_running_loop().time() - started) * 1000)
            truncate = pipecat("conversation.item.truncate", item_id=playing["item_id"],
                               content_index=playing["content_index"],
                               audio_end_ms=min(elapsed_ms, received * 1000 // RATE))
            await conn.send(truncate)
            await barge_in
            await read_until(conn, lambda e: e["type"] == "response.done"
                             and transcript(seen, e["response"]["id"]) != "", seen)
        return seen, truncate

    seen, truncate = asyncio.run(go())
    found = Findings()
    found.check(not pipecat_problems(seen), pipecat_problems(seen))
    truncated = of(seen, "conversation.item.truncated")
    found.check([(t["item_id"], t["audio_end_ms"]) for t in truncated]
                == [(truncate["item_id"], truncate["audio_end_ms"])], f"truncated: {truncated}")
    heard = [e["transcript"] for e in
             of(seen, "conversation.item.input_audio_transcription.completed")]
    # The second utterance starts 2.7476 s into the stream (the first clip, then 1 s of silence):
    # not on a 20 ms boundary, as a microphone's speech may start anywhere.
    found.check(heard == [HELLO, "Did you book it?"],
                f"transcriptions: {heard} (the second utterance's onset is off the 20 ms grid)")
    said = [transcript(seen, e["response"]["id"]) for e in of(seen, "response.done")]
    found.check(said == ["You said: Say hello!", f"You said: {HELLO}",
                         "I haven't booked anything yet."], f"said: {said}")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()


def test_pipecat_locally_driven_turns(start_emulator: Callable[..., RunningEmulator],
                                      utterances: Path) -> None:
    """turn_detection=False (sent as null, events.py:404-409): pipecat's own VAD drives the turns.
    A turn ends with input_audio_buffer.commit and response.create (llm.py:572-575); the user
    speaking again as the answer is asked for is an interruption: input_audio_buffer.clear, the
    last 0.5 s of audio appended again so the onset survives the clear, response.cancel
    (llm.py:554-561, 1321-1332; DEFAULT_USER_AUDIO_PREROLL_SECS, llm.py:77), and no truncation,
    no audio having come (llm.py:595-596)."""

    # The interruption must reach the emulator before its answer does: a reply 1 s after the
    # request (10 s at time scale 0.1) rather than the personality's 30-70 ms, which a loaded
    # machine's client once took longer than to send its 13 messages (the answer completed).
    start_emulator("openai-realtime", 0.1, "--set", "reply_s=[10, 10]")

    async def go() -> tuple[list[Event], list[Event]]:
        seen: list[Event] = []
        sent = bytearray()  # the pre-roll: every append, the last 0.5 s kept (llm.py:1314-1319)

        async def append(pcm: bytes, pace: float = PACE) -> None:
            for chunk in chunks(pcm, 0.02):
                await conn.send(pipecat("input_audio_buffer.append", audio=b64(chunk)))
                sent.extend(chunk)
                await asyncio.sleep(0.02 * pace)

        async with AsyncOpenAI().realtime.connect(model=PIPECAT_MODEL) as conn:
            session = pipecat_session(audio={"input": {
                "transcription": {"model": "gpt-realtime-whisper"}, "turn_detection": None}})
            await pipecat_setup(conn, seen, session, "Say hello!")
            await read_until(conn, "response.done", seen)
            await append(speech_24k(utterances, "hello") + silence(0.5))
            await conn.send(pipecat("input_audio_buffer.commit"))
            await conn.send(pipecat("response.create", response=PIPECAT_RESPONSE))
            # The user goes on speaking: the local VAD confirms speech after its start_secs
            # (0.2 s), appended by then, and interrupts the answer before it begins.
            second = speech_24k(utterances, "asked")
            onset = int(0.2 * RATE) * 2
            await append(second[:onset], pace=0)
            interrupted_at = len(seen)
            await conn.send(pipecat("input_audio_buffer.clear"))
            await conn.send(pipecat("input_audio_buffer.append",
                                    audio=b64(bytes(sent[-int(0.5 * RATE) * 2:]))))
            await conn.send(pipecat("response.cancel"))
            await append(second[onset:] + silence(0.5))
            await conn.send(pipecat("input_audio_buffer.commit"))
            await conn.send(pipecat("response.create", response=PIPECAT_RESPONSE))
            cancelled = await read_until(conn, "response.done", seen)
            await read_until(conn, lambda e: e["type"] == "response.done"
                             and e["response"]["id"] != cancelled[-1]["response"]["id"], seen)
        return seen, seen[interrupted_at:]

    seen, interrupted = asyncio.run(go())
    found = Findings()
    found.check(not pipecat_problems(seen), pipecat_problems(seen))
    found.check(of(interrupted, "input_audio_buffer.cleared"), "no input_audio_buffer.cleared")
    statuses = [e["response"]["status"] for e in of(seen, "response.done")]
    found.check(statuses == ["completed", "cancelled", "completed"], f"responses: {statuses}")
    # What the second commit held: the pre-roll (silence and the onset) and the rest of it, the
    # onset once: the clear dropped what was appended before it.
    said = transcript(interrupted, of(interrupted, "response.done")[-1]["response"]["id"])
    found.check(said == "I haven't booked anything yet.",
                f"the second turn was answered {said!r}: the audio appended before "
                "input_audio_buffer.clear was kept")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()


# LiveKit Agents' RealtimeModel (livekit-plugins-openai .../realtime/realtime_model.py), reproduced.


def shortuuid(prefix: str) -> str:
    """livekit.agents.utils.shortuuid: the prefix and 12 characters."""
    return prefix + uuid.uuid4().hex[:12]


def livekit_session_update() -> Event:
    """realtime_model.py:1308-1344, as _send_task dumps it (by_alias, exclude_unset:
    :1116-1118) with the defaults of RealtimeModel() (:388, :123, :477, :535; utils.py:36-47)."""
    pcm = {"rate": RATE, "type": "audio/pcm"}
    return {"session": {
        "type": "realtime", "model": MODEL, "output_modalities": ["audio"],
        "audio": {"input": {"format": pcm, "noise_reduction": None,
                            "transcription": {"model": "gpt-4o-mini-transcribe"},
                            "turn_detection": {"type": "semantic_vad", "create_response": True,
                                               "eagerness": "medium",
                                               "interrupt_response": True}},
                  "output": {"format": pcm, "speed": 1.0, "voice": "marin"}},
        "max_output_tokens": "inf", "tool_choice": "auto", "tracing": None},
        "type": "session.update", "event_id": shortuuid("session_update_")}


# llm.utils.build_legacy_openai_schema(internally_tagged=True), validated as RealtimeFunctionTool
# (realtime_model.py:1597-1627).
LIVEKIT_TOOL = {"type": "function", "name": "book_slot", "description": "Book an appointment slot.",
                "parameters": {"type": "object", "properties": {"slot": {"type": "string"}},
                               "required": ["slot"]}}


async def livekit_start(conn: Any, tools: list[Event]) -> None:
    """RealtimeSession.__init__ queues the session.update (:908), sent first once the socket is
    open (:1111-1126), session.created or not; the agent's activity then sets the instructions
    (agent_activity.py:577 → :1644-1653) and the tools (agent_activity.py:604 → :1575-1579,
    :1629-1642)."""
    await conn.send(livekit_session_update())
    await conn.send({"session": {"type": "realtime", "instructions": BOOK_INSTRUCTIONS},
                     "type": "session.update", "event_id": shortuuid("instructions_update_")})
    if tools:
        await conn.send({"session": {"type": "realtime", "model": MODEL, "tools": tools},
                         "type": "session.update", "event_id": shortuuid("tools_update_")})


async def livekit_add_item(conn: Any, seen: list[Event], item: Event, previous: str) -> None:
    """update_chat_ctx (:1459-1550): conversation.item.create with the item's own id, then the
    wait (5 s at most, :1489-1493) for its conversation.item.added (:1967-1971)."""
    await conn.send({"type": "conversation.item.create", "item": item,
                     "previous_item_id": previous, "event_id": shortuuid("chat_ctx_create_")})
    await read_until(conn, kind_is("conversation.item.added", **{"item.id": item["id"]}), seen)


async def livekit_generate_reply(conn: Any, seen: list[Event]) -> tuple[str, list[Event]]:
    """generate_reply (:1691-1740), tool_choice given per response (agent_activity.py:3807-3811):
    its future is resolved by the response.created whose response.metadata.client_event_id is
    its event_id (:1865-1901), else it fails after 10 s (:1720-1727)."""
    event_id = shortuuid("response_create_")
    await conn.send({"type": "response.create", "event_id": event_id, "response": {
        "instructions": None, "metadata": {"client_event_id": event_id}, "tool_choice": "auto"}})
    return event_id, await read_until(conn, "response.done", seen)


def livekit_problems(response: list[Event], event_id: str | None) -> list[str]:
    """What LiveKit's handlers need of one response's events (:1865-2248)."""
    out = []
    (created,) = of(response, "response.created")
    metadata = created["response"].get("metadata") or {}
    if event_id is not None and metadata.get("client_event_id") != event_id:
        out.append(f"response.created has metadata {metadata}, not the client_event_id "
                   f"{event_id}: generate_reply's future is never resolved (:1869, :1898-1901) "
                   "and fails after 10 s (:1720-1727)")
    messages: set[str] = set()
    for e in response[response.index(created):]:
        kind = e["type"]
        if kind == "response.output_item.added" and e["item"]["type"] == "message":
            messages.add(e["item"]["id"])  # :1914-1933
        elif kind in ("response.output_text.delta", "response.output_audio_transcript.delta",
                      "response.output_audio.delta", "response.content_part.added"):
            if e["item_id"] not in messages:  # :2069, :2096, :2104, :1947-1950
                out.append(f"{kind} for {e['item_id']}, not a message announced by "
                           "response.output_item.added (KeyError)")
        elif kind == "response.output_item.done" and e["item"]["type"] == "function_call":
            item = e["item"]  # :2146-2163
            out += [f"function call item without {f}" for f in ("id", "call_id", "name",
                                                                 "arguments")
                    if item.get(f) is None]
        elif kind == "conversation.item.added":
            item = e["item"]  # utils.py:248-301
            need = {"function_call": ("call_id", "name", "arguments"),
                    "function_call_output": ("call_id", "output"),
                    "message": ("role", "content")}.get(item["type"], ())
            out += [f"conversation.item.added: a {item['type']} without {f}" for f in need
                    if item.get(f) is None]
    # The order the plugin's comment gives for a response (:106-117), of the events that came
    # (at response.done it closes whatever is open: :2178-2188).
    for message in messages:
        order = [index(response, kind_is("response.output_item.added", **{"item.id": message})),
                 index(response, kind_is("conversation.item.added", **{"item.id": message})),
                 index(response, kind_is("response.content_part.added", item_id=message)),
                 index(response, lambda e, m=message: e["type"].endswith(".delta")
                       and e.get("item_id") == m),
                 index(response, kind_is("response.content_part.done", item_id=message)),
                 index(response, kind_is("response.output_item.done", **{"item.id": message})),
                 len(response) - 1]
        came = [i for i in order if i < len(response)]
        if came != sorted(came) or response[-1]["type"] != "response.done":
            out.append(f"message {message}: events out of the order of :106-117 ({order})")
    return out


def test_livekit_user_text_and_function_call(emulator: RunningEmulator) -> None:
    """generate_reply(user_input=...) (agent_activity.py:3761-3811): the user's message through
    update_chat_ctx, then response.create with its client_event_id; the function call read from
    response.output_item.done, its output added to the chat context, and a reply generated."""

    async def go() -> tuple[list[Event], list[tuple[str, list[Event]]]]:
        seen: list[Event] = []
        # process_base_url (:819-866) turns OPENAI_BASE_URL (:519) into the URL the SDK makes.
        async with AsyncOpenAI().realtime.connect(
                model=MODEL, extra_headers={"User-Agent": "LiveKit Agents"}) as conn:  # :1069
            await livekit_start(conn, [LIVEKIT_TOOL])
            user = {"id": shortuuid("item_"), "type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": BOOKING}]}  # utils.py:202-244
            await livekit_add_item(conn, seen, user, "root")  # :1547: "root" before the first
            replies = [await livekit_generate_reply(conn, seen)]
            call = next(e["item"] for e in of(replies[0][1], "response.output_item.done")
                        if e["item"]["type"] == "function_call")
            # The tool's output joins the chat context (agent_activity.py:4362-4363; utils.py:
            # 158-167), after the call; then the reply (agent_activity.py:4374-4395).
            await livekit_add_item(conn, seen, {
                "id": shortuuid("item_"), "type": "function_call_output",
                "call_id": call["call_id"], "output": json.dumps({"status": "booked"})},
                call["id"])
            replies.append(await livekit_generate_reply(conn, seen))
        return seen, replies

    seen, replies = asyncio.run(go())
    found = Findings()
    for event_id, response in replies:
        found.wrong += livekit_problems(response, event_id)
    found.check(not of(seen, "error"), of(seen, "error"))
    calls = [e["item"] for e in of(replies[0][1], "response.output_item.done")]
    found.check([(c["type"], c.get("name"), c.get("arguments")) for c in calls]
                == [("function_call", "book_slot", '{"slot": "tomorrow at 3pm"}')], calls)
    found.check(transcript(replies[1][1]) == BOOKED, f"said {transcript(replies[1][1])!r}")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()


def test_livekit_spoken_turn_and_interruption(emulator: RunningEmulator,
                                              utterances: Path) -> None:
    """Audio pushed in 100 ms chunks (:929-932, :1656-1666), turns by the server's (semantic)
    VAD; the user's transcript attached to the item conversation.item.added announced
    (:2019-2040); the reply interrupted as it starts (the user speaking over it, or
    AgentSession.interrupt()): interrupt() sends response.cancel (:1746-1749), and truncate()
    of a message none of which was played deletes it (:1769-1776); a later response.cancel,
    nothing being under way, gets an error LiveKit ignores by its message (:2322-2323)."""

    async def go() -> tuple[list[Event], list[Event]]:
        seen: list[Event] = []
        async with AsyncOpenAI().realtime.connect(
                model=MODEL, extra_headers={"User-Agent": "LiveKit Agents"}) as conn:
            await livekit_start(conn, [])

            async def push() -> None:  # the microphone, sent as it comes
                for chunk in chunks(speech_24k(utterances, "hello") + silence(1.0), 0.1):
                    await conn.send({"type": "input_audio_buffer.append", "audio": b64(chunk)})
                    await asyncio.sleep(0.1 * PACE)

            microphone = asyncio.create_task(push())
            answer = await read_until(conn, kind_is("response.output_item.added",
                                                    **{"item.type": "message"}), seen)
            message = answer[-1]["item"]["id"]
            await conn.send({"type": "response.cancel"})
            await conn.send({"type": "conversation.item.delete", "item_id": message,
                             "event_id": shortuuid("chat_ctx_delete_")})
            response = answer[index(answer, kind_is("response.created")):]
            response += await read_until(conn, "response.done", seen)
            await microphone
            await read_until(conn, kind_is("conversation.item.deleted", item_id=message), seen)
            await conn.send({"type": "response.cancel"})
            await read_until(conn, "error", seen)
        return seen, response

    seen, response = asyncio.run(go())
    found = Findings()
    found.wrong += livekit_problems(response, None)
    (heard,) = of(seen, "conversation.item.input_audio_transcription.completed")
    found.check(heard["transcript"] == HELLO, heard)
    # :2026-2029: the transcript goes to the item the chat context has by then.
    added = index(seen, kind_is("conversation.item.added", **{"item.id": heard["item_id"]}))
    found.check(added < seen.index(heard), "the transcript's item was not added before it")
    # The cancel comes while the answer is generated (at 4x real time and time scale 0.1, its
    # 2.3 s of audio take 60 ms), or, on a loaded machine, after: then it is refused too.
    done = response[-1]["response"]
    late = done["status"] == "completed"
    found.check(late or (done["status"] == "cancelled" and (done["status_details"] or {}).get(
        "type") == "cancelled"), f"response.done: {done['status']}, {done['status_details']}")
    errors = of(seen, "error")
    found.check(len(errors) == 1 + late and all(e["error"]["message"].startswith(
        "Cancellation failed") for e in errors), f"errors: {errors}")
    found.check(not sdk_problems(seen), sdk_problems(seen))
    found.done()
