"""Memory under load: thousands of connections with setups and 10 MB turns, through the real
server over TLS, leave the emulator's memory where it started once their handles have died."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect

from ..conftest import patience
from .conftest import RunningEmulator

PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
SETUP = json.dumps({"setup": {"model": "models/gemini-3.8-live", "sessionResumption": {},
                              "generationConfig": {"responseModalities": ["TEXT"]}}})
CONNECTIONS = 3000
BIG_EVERY = 75  # every 75th connection sends a 10 MB turn: 40 of them, half text, half audio
TURN_BYTES = 10_000_000
# 0.001: a handle lives 7.2 s after its connection ends (2 h). Reaping is not what this test is
# about: at 480 s it would be 0.48 s, which a client waiting on a loop busy with others' 10 MB
# turns can reach; 10,000 s make it 10 s.
TIME_SCALE = 0.001
HANDLE_TTL_S = 7200 * TIME_SCALE
REAP = "reap_after_s=10000"
WITHIN_KIB = 50 * 1024


def text_turn() -> str:
    words = "the quick brown fox jumps over the lazy dog and keeps on running "
    text = words * (TURN_BYTES // len(words))
    return json.dumps({"clientContent": {"turns": [{"role": "user", "parts": [{"text": text}]}],
                                         "turnComplete": True}})


def audio_turn() -> list[str]:
    """10 MB of 16 kHz speech (a tone, 5 min 12 s) in 1 MB chunks, then 1 s of silence."""
    samples = TURN_BYTES // 2
    tone = (np.sin(np.arange(samples) / 16000 * 2 * np.pi * 180) * 8000).astype("<i2").tobytes()
    chunks = [tone[i : i + 1_000_000] for i in range(0, len(tone), 1_000_000)]
    chunks.append(bytes(32_000))
    return [json.dumps({"realtimeInput": {"audio": {"data": base64.b64encode(c).decode(),
                                                    "mimeType": "audio/pcm;rate=16000"}}})
            for c in chunks]


@dataclass
class Load:
    text: str = field(default_factory=text_turn)
    audio: list[str] = field(default_factory=audio_turn)
    handles: int = 0
    answered: int = 0


async def until(ws: ClientConnection, key: str, inner: str | None = None) -> None:
    while True:
        frame = json.loads(await ws.recv())
        if key in frame and (inner is None or inner in frame[key]):
            return


async def one(url: str, ctx: ssl.SSLContext, load: Load, big: str | None) -> None:
    """A connection: setup with resumption, the handle, maybe a 10 MB turn and its answer, close."""
    async with asyncio.timeout(30):
        async with connect(url, ssl=ctx, additional_headers={"x-goog-api-key": "k"},
                           compression=None, max_size=None) as ws:
            await ws.send(SETUP)
            await until(ws, "sessionResumptionUpdate")
            load.handles += 1
            if big is not None:
                for frame in [load.text] if big == "text" else load.audio:
                    await ws.send(frame)
                await until(ws, "serverContent", "turnComplete")
                load.answered += 1


async def run_load(url: str, ctx: ssl.SSLContext, load: Load, n: int, big_every: int) -> None:
    limit = asyncio.Semaphore(32)

    async def guarded(i: int) -> None:
        big = None if i % big_every else ("text" if i // big_every % 2 else "audio")
        async with limit:
            await one(url, ctx, load, big)

    await asyncio.gather(*(guarded(i + 1) for i in range(n)))


def forgotten_and_kept(emulator: RunningEmulator) -> tuple[int, int | None]:
    events = [json.loads(x) for x in emulator.events.read_text().splitlines()]
    forgot = [e for e in events if e["event"] == "emulator.forgot"]
    return sum(e["sessions"] for e in forgot), forgot[-1]["kept"] if forgot else None


@pytest.mark.slow
def test_memory_comes_back_once_the_handles_of_3000_sessions_with_10_mb_turns_die(
        start_emulator: Callable[..., RunningEmulator]) -> None:
    """3,000 connections over TLS, each with a resumable setup, 40 of them with a 10 MB turn (20
    as one clientContent, 20 as 10 audio chunks of 5 min of speech): the emulator holds a bounded
    share of each turn, and its RSS comes back within 50 MB of where it started once every handle
    has died (7.2 s after its connection, at time scale 0.001), with no connection after."""
    emulator = start_emulator("gemini-dev-2026-10", TIME_SCALE, "--set", REAP)
    url = emulator.env["GOOGLE_GEMINI_BASE_URL"].replace("https", "wss") + PATH
    ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    load = Load()
    asyncio.run(run_load(url, ctx, load, 20, 1_000_000))  # warm-up: imports, TLS, caches
    start = emulator.rss_kib()

    asyncio.run(run_load(url, ctx, load, CONNECTIONS, BIG_EVERY))
    loaded = emulator.rss_kib()
    assert load.handles == CONNECTIONS + 20 and load.answered == CONNECTIONS // BIG_EVERY

    deadline = time.monotonic() + HANDLE_TTL_S + patience(5.0)
    while forgotten_and_kept(emulator) != (CONNECTIONS + 20, 0):
        assert time.monotonic() < deadline, forgotten_and_kept(emulator)
        time.sleep(0.25)
    end = emulator.rss_kib()
    peak = emulator.rss_kib("VmHWM")
    print(f"emulator RSS: start {start / 1024:.0f} MB, after the load {loaded / 1024:.0f} MB, "
          f"peak {peak / 1024:.0f} MB, end {end / 1024:.0f} MB")
    assert end - start < WITHIN_KIB
    heard = [json.loads(x) for x in emulator.events.read_text().splitlines()
             if '"emulator.heard"' in x]
    assert {e["audio_s"] for e in heard} == {60.0} and len(heard) == CONNECTIONS // BIG_EVERY // 2
