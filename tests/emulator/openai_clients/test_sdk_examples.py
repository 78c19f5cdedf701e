"""The openai SDK's realtime examples (openai/openai-python e43b422, examples/realtime/): what
they send and read, on the SDK itself."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from openai import AsyncOpenAI

from ..conftest import HELLO, RunningEmulator
from ..test_openai_sdk import speech_24k
from .events import (
    MODEL,
    PACE,
    RATE,
    Event,
    Findings,
    audio_bytes,
    b64,
    chunks,
    of,
    read_until,
    sdk_problems,
    silence,
    transcript,
)


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
