"""Conformance with the way framework clients drive the Live API, on the real SDK over TLS.

Written from the protocol (docs/live-wire-protocol.md) and from what the frameworks' Gemini Live
services send: pipecat's `historyConfig` and whitespace nudges (`realtimeInput.text = " "`),
LiveKit Agents' request with `turnComplete: false` followed by a placeholder turn, text and
audio interleaved in one session, and tools declared without `behavior`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import errors, types

from ..conftest import patience
from .conftest import BOOKING, HELLO, clip, silence
from .test_sdk import Start, handle_of, stream, text_of, turn

NATIVE = "gemini-2.5-flash-native-audio-preview-12-2025"
# Declared the way frameworks declare them: no `behavior` (the model's default, BLOCKING).
BOOK_SLOT = types.Tool(function_declarations=[types.FunctionDeclaration(
    name="book_slot", description="Book a slot",
    parameters=types.Schema(type=types.Type.OBJECT,
                            properties={"slot": types.Schema(type=types.Type.STRING)}))])


def framework_config(**kw: Any) -> types.LiveConnectConfig:
    """What pipecat's Gemini Live service sets up: audio out with transcripts, history in
    client content, and a few fields the emulator once refused."""
    base: dict[str, Any] = {
        "response_modalities": ["AUDIO"], "tools": [BOOK_SLOT],
        "system_instruction": "You are a booking assistant.",
        "input_audio_transcription": {}, "output_audio_transcription": {},
        "session_resumption": types.SessionResumptionConfig(),
        "history_config": types.HistoryConfig(initial_history_in_client_content=True),
        "context_window_compression": types.ContextWindowCompressionConfig(
            sliding_window=types.SlidingWindow()),
        "safety_settings": [types.SafetySetting(
            category=types.HarmCategory.HARM_CATEGORY_HARASSMENT,
            threshold=types.HarmBlockThreshold.BLOCK_NONE)],
    }
    base.update(kw)
    return types.LiveConnectConfig(**base)


async def spoken_turns(session: Any, quiet_s: float = 3.0) -> list[list[types.LiveServerMessage]]:
    """Every turn the model takes until it has been quiet for `quiet_s` (at time scale 0.1 an
    answer starts within 0.11 s; the rest is room for a loaded machine), answering each tool call
    with a committed result."""
    turns = []
    while True:
        try:
            messages = await turn(session, timeout=patience(quiet_s))
        except TimeoutError:
            return turns
        turns.append(messages)
        for m in messages:
            if m.tool_call and m.tool_call.function_calls:
                await session.send_tool_response(function_responses=[types.FunctionResponse(
                    id=fc.id, name=fc.name, response={"status": "committed"})
                    for fc in m.tool_call.function_calls])


def booked_and_confirmed(turns: list[list[types.LiveServerMessage]]) -> None:
    """Exactly one book_slot call and exactly one spoken turn, the confirmation."""
    calls = [fc for t in turns for m in t if m.tool_call for fc in m.tool_call.function_calls or []]
    assert [(c.name, c.args) for c in calls] == [("book_slot", {"slot": "tomorrow at 3pm"})]
    spoken = [text_of(t) for t in turns if text_of(t)]
    assert spoken == ["Done: your slot tomorrow at 3pm is booked."]


def run(start_emulator: Start, scenario: Any) -> Any:
    start_emulator(time_scale=0.1)
    return asyncio.run(scenario(genai.Client()))


async def user(session: Any, text: str, turn_complete: bool) -> None:
    await session.send_client_content(
        turns=types.Content(role="user", parts=[types.Part(text=text)]),
        turn_complete=turn_complete)


@pytest.mark.parametrize("placeholder", [".", ""])
def test_livekit_request_then_placeholder_turn(start_emulator: Start, placeholder: str) -> None:
    """LiveKit sends the request with turnComplete false, then a placeholder turn to get the
    reply generated."""

    async def scenario(client: genai.Client) -> list[list[types.LiveServerMessage]]:
        async with client.aio.live.connect(model=NATIVE, config=framework_config()) as session:
            await handle_of(session)
            await user(session, BOOKING, turn_complete=False)
            if placeholder:
                await user(session, placeholder, turn_complete=True)
            else:
                await session.send_client_content(turn_complete=True)
            return await spoken_turns(session)

    booked_and_confirmed(run(start_emulator, scenario))


def test_request_split_over_several_parts(start_emulator: Start) -> None:
    async def scenario(client: genai.Client) -> list[list[types.LiveServerMessage]]:
        async with client.aio.live.connect(model=NATIVE, config=framework_config()) as session:
            await handle_of(session)
            await user(session, "Book me the slot", turn_complete=False)
            await user(session, "at 3pm tomorrow, please.", turn_complete=True)
            return await spoken_turns(session)

    booked_and_confirmed(run(start_emulator, scenario))


def test_pipecat_text_with_whitespace_nudges(start_emulator: Start) -> None:
    """pipecat on Gemini 3 sends user text as realtimeInput.text and nudges with " "."""

    async def scenario(client: genai.Client) -> list[list[types.LiveServerMessage]]:
        async with client.aio.live.connect(model="gemini-3.8-live",
                                           config=framework_config()) as session:
            await handle_of(session)
            await session.send_realtime_input(text=BOOKING)
            await session.send_realtime_input(text=" ")
            turns = await spoken_turns(session)
            await session.send_realtime_input(text=" ")  # after the answer: nothing new
            return turns + await spoken_turns(session)

    booked_and_confirmed(run(start_emulator, scenario))


def test_text_and_audio_interleaved_keep_one_turn_at_a_time(start_emulator: Start,
                                                           utterances: Path) -> None:
    """Speech, then text while the spoken reply plays, then speech again: every turn the SDK
    receives ends once, with nothing of another turn inside it."""

    async def scenario(client: genai.Client) -> list[list[types.LiveServerMessage]]:
        async with client.aio.live.connect(model=NATIVE, config=framework_config()) as session:
            await handle_of(session)
            await stream(session, clip("hello", utterances) + silence(1.0))
            first: list[types.LiveServerMessage] = []
            async for m in session.receive():  # until the reply's first audio
                first.append(m)
                sc = m.server_content
                if sc and sc.model_turn:
                    break
            await session.send_realtime_input(text="Tell me about the weather instead.")
            first += await turn(session)
            second = await turn(session)
            await stream(session, clip("hello", utterances) + silence(1.0))
            return [first, second, *await spoken_turns(session)]

    first, second, *rest = run(start_emulator, scenario)
    assert first[-1].server_content and first[-1].server_content.turn_complete
    assert any(m.server_content and m.server_content.interrupted for m in first)
    for t in [second, *rest]:
        flags = [m.server_content for m in t if m.server_content]
        assert not any(sc.interrupted for sc in flags)
        assert [sc.turn_complete for sc in flags].count(True) == 1 and flags[-1].turn_complete
    assert "Tell me about the weather instead" in text_of(second)
    assert HELLO.split(",")[0] in text_of(rest[0])


def test_a_blocking_call_keeps_the_model_silent_until_its_result(start_emulator: Start) -> None:
    """A tool declared without behavior: the call ends the model's turn; it speaks only after
    the response, once."""

    async def scenario(client: genai.Client) -> tuple[list[Any], list[Any]]:
        async with client.aio.live.connect(model=NATIVE, config=framework_config()) as session:
            await handle_of(session)
            await session.send_realtime_input(text=BOOKING)
            first = await turn(session)
            with pytest.raises(TimeoutError):
                await turn(session, timeout=1.0)
            fc = next(m.tool_call for m in first if m.tool_call).function_calls[0]
            await session.send_tool_response(function_responses=[types.FunctionResponse(
                id=fc.id, name=fc.name, response={"status": "committed"})])
            return first, await turn(session)

    first, second = run(start_emulator, scenario)
    assert not text_of(first) and "is booked" in text_of(second)


def test_usage_metadata_comes_with_turn_complete(start_emulator: Start) -> None:
    """pipecat records token usage from the message that completes the turn."""

    async def scenario(client: genai.Client) -> list[types.LiveServerMessage]:
        async with client.aio.live.connect(model=NATIVE, config=framework_config()) as session:
            await handle_of(session)
            await user(session, "Hello there", turn_complete=True)
            return await turn(session)

    last = run(start_emulator, scenario)[-1]
    assert last.server_content and last.server_content.turn_complete
    assert last.usage_metadata and last.usage_metadata.total_token_count


def test_an_unknown_model_is_closed_1008(start_emulator: Start) -> None:
    async def scenario(client: genai.Client) -> None:
        async with client.aio.live.connect(model="no-such-model-xyz", config=framework_config()):
            pass

    with pytest.raises(errors.APIError) as refused:
        run(start_emulator, scenario)
    assert refused.value.code == 1008 and "no-such-model-xyz is not found" in str(refused.value)
