"""Conformance: the real google-genai SDK, configured only by environment variables, over TLS."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import errors, types
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .conftest import BOOKING, RunningEmulator, clip, silence

MODEL = "gemini-3.8-live"
NATIVE = "gemini-live-2.5-flash-native-audio"
BOOK_SLOT = types.Tool(function_declarations=[types.FunctionDeclaration(
    name="book_slot", behavior=types.Behavior.NON_BLOCKING,
    parameters=types.Schema(type=types.Type.OBJECT,
                            properties={"slot": types.Schema(type=types.Type.STRING)}))])
Start = Callable[..., RunningEmulator]


def config(**kw: Any) -> types.LiveConnectConfig:
    base: dict[str, Any] = {"response_modalities": ["TEXT"], "tools": [BOOK_SLOT],
                            "session_resumption": types.SessionResumptionConfig()}
    base.update(kw)
    return types.LiveConnectConfig(**base)


async def turn(session: Any, timeout: float = 10) -> list[types.LiveServerMessage]:
    """Every message up to and including the next turnComplete."""
    out = []
    async with asyncio.timeout(timeout):
        async for message in session.receive():
            out.append(message)
    return out


def text_of(messages: list[types.LiveServerMessage]) -> str:
    parts = []
    for m in messages:
        sc = m.server_content
        if sc and sc.model_turn and sc.model_turn.parts:
            parts += [p.text for p in sc.model_turn.parts if p.text]
        if sc and sc.output_transcription and sc.output_transcription.text:
            parts.append(sc.output_transcription.text)
    return " ".join(parts)


def audio_bytes(messages: list[types.LiveServerMessage]) -> int:
    total = 0
    for m in messages:
        sc = m.server_content
        if sc and sc.model_turn and sc.model_turn.parts:
            total += sum(len(p.inline_data.data or b"") for p in sc.model_turn.parts if p.inline_data)
    return total


async def handle_of(session: Any) -> str:
    async with asyncio.timeout(5):
        async for m in session.receive():
            if m.session_resumption_update and m.session_resumption_update.new_handle:
                return str(m.session_resumption_update.new_handle)
    raise AssertionError("no resumption handle")


async def say(session: Any, text: str) -> None:
    await session.send_client_content(
        turns=types.Content(role="user", parts=[types.Part(text=text)]), turn_complete=True)


async def stream(session: Any, pcm: bytes, realtime: bool = False, chunk_ms: int = 100) -> None:
    step = 16000 * 2 * chunk_ms // 1000
    for i in range(0, len(pcm), step):
        await session.send_realtime_input(
            audio=types.Blob(data=pcm[i : i + step], mime_type="audio/pcm;rate=16000"))
        await asyncio.sleep(chunk_ms / 1000 if realtime else 0.002)


async def booked(session: Any) -> tuple[list[types.LiveServerMessage], types.FunctionCall,
                                        list[types.LiveServerMessage]]:
    """The turn that ends in the booking's toolCall, the call, and the turn after the client
    answered it committed."""
    first = await turn(session)
    call = next(m.tool_call for m in first if m.tool_call)
    assert call and call.function_calls
    fc = call.function_calls[0]
    await session.send_tool_response(function_responses=[types.FunctionResponse(
        id=fc.id, name=fc.name, response={"status": "committed"})])
    return first, fc, await turn(session)


def refused(exc: pytest.ExceptionInfo[errors.APIError], code: int) -> bool:
    return exc.value.code == code


def test_text_turn(start_emulator: Start) -> None:
    """A text turn: setupComplete inside connect(), one resumption update, a reply, turnComplete."""
    start_emulator()

    async def scenario() -> tuple[str, list[types.LiveServerMessage]]:
        client = genai.Client()
        async with client.aio.live.connect(model=MODEL, config=config()) as session:
            handle = await handle_of(session)
            await say(session, "Hello there")
            return handle, await turn(session)

    handle, messages = asyncio.run(scenario())
    assert len(handle) == 36
    assert "You said: Hello there" in text_of(messages)
    assert messages[-1].server_content and messages[-1].server_content.turn_complete
    assert not any(m.session_resumption_update for m in messages)  # exactly one per connection


def test_audio_turn_ended_by_silence_then_tool_call_answered(start_emulator: Start,
                                                             utterances: Path) -> None:
    """Speech then silence ends the turn; the booking becomes a NON_BLOCKING toolCall followed by
    generationComplete and turnComplete; the tool response makes the model speak (audio + text)."""
    emulator = start_emulator()

    async def scenario() -> dict[str, Any]:
        client = genai.Client()
        cfg = config(response_modalities=["AUDIO"], input_audio_transcription={},
                     output_audio_transcription={})
        async with client.aio.live.connect(model=MODEL, config=cfg) as session:
            await handle_of(session)
            await stream(session, clip("booking", utterances) + silence(1.5))
            first, fc, second = await booked(session)
            return {"first": first, "call": fc, "second": second}

    got = asyncio.run(scenario())
    heard = [m.server_content.input_transcription.text for m in got["first"]
             if m.server_content and m.server_content.input_transcription]
    assert heard == [BOOKING]
    assert got["call"].name == "book_slot" and got["call"].args == {"slot": "tomorrow at 3pm"}
    tail = [m for m in got["first"] if m.server_content]
    assert tail[-1].server_content.turn_complete and tail[-2].server_content.generation_complete
    assert "is booked" in text_of(got["second"])
    assert audio_bytes(got["second"]) > 24000 * 2  # more than a second of 24 kHz speech
    assert "emulator.vad" in emulator.event_names()


def test_resume_restores_a_pending_call_answered_by_its_old_id(start_emulator: Start) -> None:
    """A tool call pending at a drop survives: the resumed session accepts the response for the
    old call id, with no re-issue, and answers truthfully afterwards."""
    start_emulator(time_scale=0.1)

    async def scenario() -> tuple[str, str, list[types.LiveServerMessage]]:
        client = genai.Client()
        async with client.aio.live.connect(model=MODEL, config=config()) as session:
            handle = await handle_of(session)
            await say(session, BOOKING)
            call = next(m.tool_call for m in await turn(session) if m.tool_call)
            call_id = call.function_calls[0].id  # type: ignore[union-attr,index]
        await asyncio.sleep(0.3)  # past the (scaled) release window after an idle drop
        resumed = config(session_resumption=types.SessionResumptionConfig(handle=handle))
        async with client.aio.live.connect(model=MODEL, config=resumed) as session:
            await handle_of(session)
            await session.send_tool_response(function_responses=[types.FunctionResponse(
                id=call_id, name="book_slot", response={"status": "committed"})])
            done = await turn(session)
            await say(session, "Did you book it?")
            asked = await turn(session)
        return str(call_id), text_of(done), asked

    call_id, done, asked = asyncio.run(scenario())
    assert call_id and "is booked" in done
    assert "Yes" in text_of(asked)
    assert not any(m.tool_call for m in asked)


def test_idle_drop_resume_is_refused_then_accepted(start_emulator: Start) -> None:
    """A resume right after an idle drop is closed 1011 before any frame; ~1.5 s (scaled) later
    the same handle resumes."""
    start_emulator(time_scale=0.2)

    async def scenario() -> tuple[errors.APIError, float, bool]:
        client = genai.Client()
        async with client.aio.live.connect(model=MODEL, config=config()) as session:
            handle = await handle_of(session)
            await say(session, "Hello there")
            await turn(session)
        resumed = config(session_resumption=types.SessionResumptionConfig(handle=handle))
        started = time.monotonic()
        try:
            async with client.aio.live.connect(model=MODEL, config=resumed):
                raise AssertionError("the immediate resume was accepted")
        except errors.APIError as exc:
            refusal, took = exc, time.monotonic() - started
        await asyncio.sleep(0.35)
        async with client.aio.live.connect(model=MODEL, config=resumed) as session:
            ok = bool(await handle_of(session))
        return refusal, took, ok

    refusal, took, ok = asyncio.run(scenario())
    assert refusal.code == 1011 and "Internal error encountered." in str(refusal)
    # Never before its window (0.472-0.704 s, scaled); when within it, test_session pins.
    assert took >= 0.2 * 0.46
    assert ok


def test_held_connection_locks_every_resume_until_closed(start_emulator: Start) -> None:
    """While the server holds the old connection, every resume is refused 1011; closing the old
    connection unlocks the session at once."""
    start_emulator(time_scale=0.05)

    async def scenario() -> tuple[list[int], bool]:
        client = genai.Client()
        codes = []
        async with client.aio.live.connect(model=MODEL, config=config()) as old:
            handle = await handle_of(old)
            resumed = config(session_resumption=types.SessionResumptionConfig(handle=handle))
            for _ in range(4):
                try:
                    async with client.aio.live.connect(model=MODEL, config=resumed):
                        codes.append(0)
                except errors.APIError as exc:
                    codes.append(exc.code)
                await asyncio.sleep(0.2)
        async with client.aio.live.connect(model=MODEL, config=resumed) as session:
            return codes, bool(await handle_of(session))

    codes, unlocked = asyncio.run(scenario())
    assert codes == [1011, 1011, 1011, 1011]
    assert unlocked


@pytest.mark.parametrize("silent", [False, True])
def test_silent_connection_is_reaped_and_its_handle_dies(start_emulator: Start,
                                                         silent: bool) -> None:
    """After the (scaled) 480 s of silence the server closes 1011; the handle is dead then: a
    resume is closed 1011 or never answered (S5), as the personality's share says."""
    start_emulator("gemini-dev-2026-10", 0.005,  # 480 s -> 2.4 s
                   "--set", f"dead_handle_silent={1 if silent else 0}")

    async def scenario() -> tuple[errors.APIError, float, BaseException]:
        client = genai.Client()
        started = time.monotonic()
        async with client.aio.live.connect(model=MODEL, config=config()) as session:
            handle = await handle_of(session)
            with pytest.raises(errors.APIError) as reaped:
                await turn(session, timeout=10)
            took = time.monotonic() - started
        resumed = config(session_resumption=types.SessionResumptionConfig(handle=handle))
        with pytest.raises((errors.APIError, TimeoutError)) as dead:
            async with asyncio.timeout(2):  # under the 2.4 s after which a silent one is reaped
                async with client.aio.live.connect(model=MODEL, config=resumed):
                    pass
        return reaped.value, took, dead.value

    reaped, took, dead = asyncio.run(scenario())
    assert reaped.code == 1011 and "Internal error encountered." in str(reaped)
    assert took >= 2.3  # never before the silence's end (its time: test_session's L7)
    if silent:
        assert isinstance(dead, TimeoutError)
    else:
        assert isinstance(dead, errors.APIError) and dead.code == 1011


def refusal_of(emulator: RunningEmulator, setup: dict[str, Any]) -> tuple[int | None, str | None, float]:
    """Send `setup` raw (what the SDK would not send) on the Developer API path; the close code and
    reason that follow, and how long after the setup they came."""

    async def scenario() -> tuple[int | None, str | None, float]:
        url = (emulator.env["GOOGLE_GEMINI_BASE_URL"].replace("https", "wss")
               + "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent")
        ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
        async with connect(url, ssl=ctx, additional_headers={"x-goog-api-key": "k"}) as ws:
            started = time.monotonic()
            await ws.send(json.dumps({"setup": setup}))
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            return ws.close_code, ws.close_reason, time.monotonic() - started

    return asyncio.run(scenario())


def test_transparent_resumption_is_refused_on_the_developer_api(start_emulator: Start) -> None:
    """`transparent: true` (injected: the SDK itself refuses it in Developer API mode) closes 1007
    with the real reason."""
    emulator = start_emulator(time_scale=1.0)
    code, reason, took = refusal_of(emulator, {"model": f"models/{MODEL}",
                                               "sessionResumption": {"transparent": True}})
    assert code == 1007
    assert reason == ('Invalid JSON payload received. Unknown name "transparent" at '
                      "'setup.session_resumption': Cannot find field.")
    assert took >= 0.03  # the service's own pause before it refuses


def test_text_modality_is_refused_on_native_audio(start_emulator: Start) -> None:
    """TEXT on a native-audio model closes 1007."""
    start_emulator()

    async def scenario() -> errors.APIError:
        with pytest.raises(errors.APIError) as info:
            async with genai.Client().aio.live.connect(model=NATIVE, config=config()):
                pass
        return info.value

    exc = asyncio.run(scenario())
    assert exc.code == 1007 and "response modalities (TEXT)" in str(exc)


@pytest.mark.parametrize(("ending", "replies"), [("nothing", False), ("audio_stream_end", False),
                                                 ("silence", True)])
def test_vertex_only_silent_samples_end_a_turn(start_emulator: Start, utterances: Path,
                                               ending: str, replies: bool) -> None:
    """Vertex: after speech, sending nothing or audioStreamEnd gets no reply; 1.5 s of silent
    samples at real-time rate gets a full spoken reply."""
    start_emulator(personality="vertex-2026", time_scale=0.2)

    async def scenario() -> tuple[int, bool, str | None]:
        client = genai.Client()
        cfg = types.LiveConnectConfig(response_modalities=["AUDIO"])
        async with client.aio.live.connect(model=NATIVE, config=cfg) as session:
            session_id = session.session_id
            await stream(session, silence(0.3) + clip("hello", utterances))
            if ending == "audio_stream_end":
                await session.send_realtime_input(audio_stream_end=True)
            elif ending == "silence":
                await stream(session, silence(1.5), realtime=True)
            try:
                messages = await turn(session, timeout=3.0)
            except TimeoutError:
                return 0, False, session_id
            done = any(m.server_content and m.server_content.turn_complete for m in messages)
            return audio_bytes(messages), done, session_id

    got, done, session_id = asyncio.run(scenario())
    assert session_id  # Vertex's setupComplete carries a sessionId
    if replies:
        assert done and got > 24000  # about a second of 24 kHz audio or more
    else:
        assert got == 0 and not done


def test_vertex_allows_transparent_resumption(start_emulator: Start) -> None:
    """Vertex accepts `transparent` and reports lastConsumedClientMessageIndex."""
    start_emulator(personality="vertex-2026")

    async def scenario() -> types.LiveServerSessionResumptionUpdate:
        cfg = types.LiveConnectConfig(
            response_modalities=["AUDIO"],
            session_resumption=types.SessionResumptionConfig(transparent=True))
        async with genai.Client().aio.live.connect(model=NATIVE, config=cfg) as session:
            async with asyncio.timeout(5):
                async for m in session.receive():
                    if m.session_resumption_update:
                        return m.session_resumption_update
        raise AssertionError("no update")

    update = asyncio.run(scenario())
    assert update.resumable and update.last_consumed_client_message_index == 0


def test_connection_lifetime_sends_goaway_then_closes(start_emulator: Start) -> None:
    """With a connection lifetime set, goAway(timeLeft) comes before close 1011 'Deadline
    expired'; by default (every other test here) no goAway ever comes."""
    start_emulator("gemini-dev-2026-10", 0.02, "--set", "connection_lifetime_s=120")

    async def scenario() -> tuple[str | None, errors.APIError]:
        client = genai.Client()
        time_left = None
        async with client.aio.live.connect(model=MODEL, config=config()) as session:
            with pytest.raises(errors.APIError) as info:
                async with asyncio.timeout(10):
                    while True:
                        async for m in session.receive():
                            if m.go_away:
                                time_left = m.go_away.time_left
        return time_left, info.value

    time_left, closed = asyncio.run(scenario())
    assert time_left is not None
    assert closed.code == 1011 and "Deadline expired" in str(closed)


def test_every_setup_field_of_the_sdk_is_accepted(start_emulator: Start) -> None:
    """S6: fields the emulator once refused (pipecat's historyConfig, safetySettings, labels,
    avatarConfig, translationConfig, proactivity) get setupComplete and a working session."""
    start_emulator()

    async def scenario() -> str:
        cfg = config(
            history_config=types.HistoryConfig(initial_history_in_client_content=True),
            safety_settings=[types.SafetySetting(
                category=types.HarmCategory.HARM_CATEGORY_HARASSMENT,
                threshold=types.HarmBlockThreshold.BLOCK_LOW_AND_ABOVE)],
            labels={"team": "faultlab"}, avatar_config=types.AvatarConfig(avatar_name="x"),
            translation_config=types.TranslationConfig(target_language_code="de"),
            proactivity=types.ProactivityConfig(proactive_audio=True),
            context_window_compression=types.ContextWindowCompressionConfig(
                sliding_window=types.SlidingWindow()))
        async with genai.Client().aio.live.connect(model=MODEL, config=cfg) as session:
            return await handle_of(session)

    assert len(asyncio.run(scenario())) == 36


def test_an_unknown_setup_field_is_refused_as_sent(start_emulator: Start) -> None:
    """S6: a name the SDK does not know closes 1007, spelled as the client sent it."""
    emulator = start_emulator()
    code, reason, _ = refusal_of(emulator, {"model": f"models/{MODEL}", "historyConfigg": {}})
    assert code == 1007
    assert reason == ('Invalid JSON payload received. Unknown name "historyConfigg" at '
                      "'setup': Cannot find field.")
