"""An unmodified `openai` SDK client, configured by the environment `faultlab emulator serve
--personality openai-realtime` prints (OPENAI_BASE_URL, SSL_CERT_FILE), against the real
emulator over TLS: text and audio turns, a function call, server VAD, in-band errors, a fresh
session on reconnect, an unknown model refused."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from openai import AsyncOpenAI
from websockets.exceptions import ConnectionClosedError

from faultlab.speech import RATE_IN, read_wav, resample

from .conftest import RunningEmulator

MODEL = "gpt-realtime"
BOOK_TOOL = {"type": "function", "name": "book_slot", "description": "Book a slot.",
             "parameters": {"type": "object", "properties": {"time": {"type": "string"}}}}
TIMEOUT = 30


async def until(conn: Any, kind: str) -> list[Any]:
    """Every event up to and with the first of `kind`."""
    seen = []
    async with asyncio.timeout(TIMEOUT):
        async for event in conn:
            seen.append(event)
            if event.type == kind:
                return seen
    raise AssertionError(f"the connection ended before {kind}: {[e.type for e in seen]}")


def of(events: list[Any], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


async def say(conn: Any, text: str) -> None:
    await conn.conversation.item.create(item={
        "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})


@pytest.fixture
def openai_emulator(start_emulator: Callable[..., RunningEmulator]) -> RunningEmulator:
    return start_emulator("openai-realtime", 0.1)


def test_a_text_turn_with_a_function_call(openai_emulator: RunningEmulator) -> None:
    async def go() -> tuple[list[Any], list[Any], list[Any]]:
        client = AsyncOpenAI()
        async with client.realtime.connect(model=MODEL) as conn:
            opening = await until(conn, "session.created")
            await conn.session.update(session={"type": "realtime", "output_modalities": ["text"],
                                               "tools": [BOOK_TOOL]})
            await until(conn, "session.updated")
            await say(conn, "Book me the 3pm slot tomorrow, please.")
            await conn.response.create()
            first = await until(conn, "response.done")
            (call,) = of(first, "response.function_call_arguments.done")
            await conn.conversation.item.create(item={
                "type": "function_call_output", "call_id": call.call_id,
                "output": json.dumps({"status": "booked"})})
            await conn.response.create()
            second = await until(conn, "response.done")
        return opening, first, second

    opening, first, second = asyncio.run(go())
    assert opening[0].type == "session.created" and opening[0].session.model == MODEL
    (call,) = of(first, "response.function_call_arguments.done")
    assert call.name == "book_slot" and json.loads(call.arguments)
    assert first[-1].response.status == "completed"
    said = "".join(e.delta for e in of(second, "response.output_text.delta"))
    assert "book" in said.lower()
    assert second[-1].response.output[0].content[0].text == said


def speech_24k(utterances: Path, name: str) -> bytes:
    pcm, _ = read_wav((utterances / f"{name}.wav").read_bytes())
    return resample(pcm, RATE_IN, 24000).astype("<i2").tobytes()


async def stream(conn: Any, pcm: bytes, chunk_s: float = 0.1, pace_s: float = 0.01) -> None:
    """PCM16 at 24 kHz in appends of `chunk_s` of audio, `pace_s` apart."""
    size = int(24000 * chunk_s) * 2
    for start in range(0, len(pcm), size):
        await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[start:start + size]).decode())
        await asyncio.sleep(pace_s)


def test_an_audio_turn_by_server_vad(openai_emulator: RunningEmulator, utterances: Path) -> None:
    async def go() -> list[Any]:
        client = AsyncOpenAI()
        async with client.realtime.connect(model=MODEL) as conn:
            await until(conn, "session.created")
            silence = np.zeros(24000, dtype="<i2").tobytes()
            sender = asyncio.create_task(stream(conn, speech_24k(utterances, "hello") + silence))
            events = await until(conn, "response.done")
            await sender
        return events

    events = asyncio.run(go())
    kinds = [e.type for e in events]
    assert kinds[:3] == ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                         "input_audio_buffer.committed"]
    audio = b"".join(base64.b64decode(e.delta) for e in of(events, "response.output_audio.delta"))
    assert len(audio) > 24000  # more than half a second of speech at 24 kHz
    transcript = "".join(e.delta for e in of(events, "response.output_audio_transcript.delta"))
    assert transcript and events[-1].response.output[0].content[0].transcript == transcript


def test_errors_are_in_band_and_a_reconnect_is_a_fresh_session(
        openai_emulator: RunningEmulator) -> None:
    async def go() -> tuple[list[Any], str, list[Any]]:
        client = AsyncOpenAI()
        async with client.realtime.connect(model=MODEL) as conn:
            created = await until(conn, "session.created")
            await conn.send({"type": "session.update", "event_id": "mine-1",
                             "session": {"output_modalities": ["text"]}})
            error = await until(conn, "error")
            await conn.session.update(session={"type": "realtime",
                                               "instructions": "Remember the word teal."})
            await until(conn, "session.updated")
        async with client.realtime.connect(model=MODEL) as conn:
            again = await until(conn, "session.created")
        return error, created[0].session.id, again

    error, first_id, again = asyncio.run(go())
    assert error[-1].error.code == "missing_required_parameter"
    assert error[-1].error.param == "session.type" and error[-1].error.event_id == "mine-1"
    session = again[0].session
    assert session.id != first_id and session.instructions == ""


def test_an_unknown_model_is_refused(openai_emulator: RunningEmulator) -> None:
    async def go() -> tuple[list[Any], ConnectionClosedError]:
        client = AsyncOpenAI()
        seen: list[Any] = []
        async with client.realtime.connect(model="gpt-nonexistent") as conn:
            with pytest.raises(ConnectionClosedError) as closed:
                async for event in conn:
                    seen.append(event)
        return seen, closed.value

    seen, closed = asyncio.run(go())
    assert [e.type for e in seen] == ["error"]
    assert seen[0].error.code == "model_not_found"
    assert closed.rcvd is not None and closed.rcvd.code == 4000
    assert closed.rcvd.reason == "invalid_request_error.model_not_found"


def test_another_api_version_or_the_beta_header_is_refused(openai_emulator: RunningEmulator) -> None:
    """A version the service does not serve is a 404 before any WebSocket; the retired beta's
    header gets an error and close 4000 (docs/openai-realtime.md O5)."""
    import ssl

    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    base = openai_emulator.env["OPENAI_BASE_URL"].replace("https", "wss").removesuffix("/v1")
    ctx = ssl.create_default_context(cafile=openai_emulator.env["SSL_CERT_FILE"])
    key = {"authorization": "Bearer test-key-not-a-secret"}

    async def go() -> tuple[int, dict[str, Any], int | None]:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(f"{base}/v2/realtime?model={MODEL}", ssl=ctx,
                               additional_headers=key):
                pass
        async with connect(f"{base}/v1/realtime?model={MODEL}", ssl=ctx, additional_headers={
                **key, "OpenAI-Beta": "realtime=v1"}) as ws:
            error = json.loads(await ws.recv())
            with pytest.raises(ConnectionClosedError):
                await ws.recv()
            return refused.value.response.status_code, error, ws.close_code

    status, error, code = asyncio.run(go())
    assert status == 404
    assert error["type"] == "error" and error["error"]["code"] == "beta_api_shape_disabled"
    assert code == 4000


def test_a_browser_offering_its_key_as_a_subprotocol_gets_realtime(
        openai_emulator: RunningEmulator) -> None:
    """A browser cannot set headers: it offers `realtime` and `openai-insecure-api-key.KEY`
    (O1); the emulator takes the key and chooses `realtime`."""
    import ssl

    from websockets.asyncio.client import connect
    from websockets.typing import Subprotocol

    base = openai_emulator.env["OPENAI_BASE_URL"].replace("https", "wss")
    ctx = ssl.create_default_context(cafile=openai_emulator.env["SSL_CERT_FILE"])

    async def go() -> tuple[str | None, str]:
        async with connect(f"{base}/realtime?model={MODEL}", ssl=ctx, subprotocols=[
                Subprotocol("realtime"),
                Subprotocol("openai-insecure-api-key.test-key-not-a-secret")]) as ws:
            return ws.subprotocol, json.loads(await ws.recv())["type"]

    assert asyncio.run(go()) == ("realtime", "session.created")
