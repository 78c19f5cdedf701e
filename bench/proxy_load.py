"""Load for the proxy benchmark, run in the lab's client namespace.

    python bench/proxy_load.py URL ROUND_TRIPS MESSAGES SIZE
Prints JSON: round-trip median and p99 (ms) of sequential echoes, and echoed messages per second
with many in flight.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time

from websockets.asyncio.client import connect


async def main(url: str, round_trips: int, messages: int, size: int) -> None:
    payload = "x" * size
    async with connect(url, compression=None, max_size=None, ping_interval=None) as ws:
        rtts = []
        for _ in range(round_trips):
            started = time.perf_counter()
            await ws.send(payload)
            await ws.recv()
            rtts.append((time.perf_counter() - started) * 1000)
        rtts.sort()

        async def receive() -> None:
            for _ in range(messages):
                await ws.recv()

        started = time.perf_counter()
        reader = asyncio.create_task(receive())
        for _ in range(messages):
            await ws.send(payload)
        await reader
        elapsed = time.perf_counter() - started
    print(json.dumps({"rtt_median_ms": statistics.median(rtts),
                      "rtt_p99_ms": rtts[int(len(rtts) * 0.99) - 1],
                      "messages_per_s": messages / elapsed}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
