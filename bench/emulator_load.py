"""Load for the emulator benchmark: N real-time audio sessions (16 kHz, 100 ms chunks, VAD on).

Run as a process of its own (so the load does not share the emulator's core):
    python bench/emulator_load.py N SECONDS URL CAFILE
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

from faultlab.speech import RATE_IN, synthesise

CHUNK_S = 0.1
SETUP = {"setup": {"model": "models/gemini-3.8-live",
                   "generationConfig": {"responseModalities": ["AUDIO"]}}}


async def session(url: str, ctx: ssl.SSLContext, chunks: list[str], seconds: float,
                  lags: list[float]) -> None:
    async with connect(url, ssl=ctx, additional_headers={"x-goog-api-key": "bench"},
                       compression=None, max_size=None) as ws:
        await ws.send(json.dumps(SETUP))
        await ws.recv()

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


async def main(n: int, seconds: float, url: str, cafile: str) -> None:
    ctx = ssl.create_default_context(cafile=cafile)
    speech = synthesise("Book me the 3pm slot tomorrow, please.", RATE_IN)
    pcm = np.concatenate([speech, np.zeros(int(1.2 * RATE_IN), np.int16)])
    step = int(CHUNK_S * RATE_IN)
    chunks = [json.dumps({"realtimeInput": {"audio": {
        "data": base64.b64encode(pcm[i : i + step].astype("<i2").tobytes()).decode(),
        "mimeType": "audio/pcm;rate=16000"}}}) for i in range(0, len(pcm) - step + 1, step)]
    lags: list[float] = []
    await asyncio.gather(*(session(url, ctx, chunks, seconds, lags) for _ in range(n)))
    print(json.dumps({"sessions": len(lags), "worst_send_lag_ms": round(max(lags) * 1000, 1)}))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]))
