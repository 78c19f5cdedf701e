"""Load for the emulator benchmark: N real-time audio sessions (100 ms chunks, server VAD on) in
one API's messages: Gemini Live's (16 kHz `realtimeInput.audio`) or OpenAI Realtime's (24 kHz
`input_audio_buffer.append`).

Run as a process of its own (so the load does not share the emulator's core):
    python bench/emulator_load.py gemini|openai N SECONDS URL CAFILE
Each session streams a spoken sentence and 1.2 s of silence, over and over, at real-time rate,
and reads whatever the emulator answers. Prints the generator's own worst send lag (ms) as JSON.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import sys
import time

import numpy as np
from websockets.asyncio.client import connect

from faultlab.speech import RATE_IN, resample, synthesise

CHUNK_S = 0.1
SETUP = {"setup": {"model": "models/gemini-3.8-live",
                   "generationConfig": {"responseModalities": ["AUDIO"]}}}
OPENAI_RATE = 24000


def chunks_of(protocol: str, pcm: np.ndarray) -> list[str]:
    """16 kHz speech as 100 ms audio messages of `protocol`."""
    if protocol == "openai":
        pcm = resample(pcm, RATE_IN, OPENAI_RATE)
        step = int(CHUNK_S * OPENAI_RATE)
        return [json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(
            pcm[i : i + step].astype("<i2").tobytes()).decode()})
            for i in range(0, len(pcm) - step + 1, step)]
    step = int(CHUNK_S * RATE_IN)
    return [json.dumps({"realtimeInput": {"audio": {
        "data": base64.b64encode(pcm[i : i + step].astype("<i2").tobytes()).decode(),
        "mimeType": "audio/pcm;rate=16000"}}}) for i in range(0, len(pcm) - step + 1, step)]


async def session(protocol: str, url: str, ctx: ssl.SSLContext, chunks: list[str],
                  seconds: float, lags: list[float]) -> None:
    headers = ({"authorization": "Bearer bench"} if protocol == "openai"
               else {"x-goog-api-key": "bench"})
    async with connect(url, ssl=ctx, additional_headers=headers, compression=None,
                       max_size=None) as ws:
        if protocol == "gemini":
            await ws.send(json.dumps(SETUP))
        await ws.recv()  # setupComplete, or OpenAI's session.created

        async def drain() -> None:
            async for _ in ws:
                pass

        reader = asyncio.create_task(drain())
        start = time.monotonic()
        worst = 0.0
        for i in range(int(seconds / CHUNK_S)):
            planned = start + i * CHUNK_S
            delay = planned - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            worst = max(worst, time.monotonic() - planned)
            await ws.send(chunks[i % len(chunks)])
        lags.append(worst)
        reader.cancel()


async def main(protocol: str, n: int, seconds: float, url: str, cafile: str) -> None:
    ctx = ssl.create_default_context(cafile=cafile)
    speech = synthesise("Book me the 3pm slot tomorrow, please.", RATE_IN)
    chunks = chunks_of(protocol, np.concatenate([speech, np.zeros(int(1.2 * RATE_IN), np.int16)]))
    lags: list[float] = []
    await asyncio.gather(*(session(protocol, url, ctx, chunks, seconds, lags) for _ in range(n)))
    print(json.dumps({"sessions": len(lags), "worst_send_lag_ms": round(max(lags) * 1000, 1)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]))
