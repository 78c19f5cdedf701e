"""Bad input: thousands of malformed setups and frames each end in a close with a reason."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import ssl
from collections.abc import Callable
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from faultlab.emulator.wire import ProtocolError, parse_frame

from .conftest import RunningEmulator

PATH = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
SETUP = {"setup": {"model": "models/gemini-3.8-live",
                   "generationConfig": {"responseModalities": ["TEXT"]}}}
CASES = 2000


def junk(rng: random.Random) -> Any:
    return rng.choice([None, 7, -1.5, True, "x" * rng.randint(0, 40), [1, "a"], {"k": []}])


def bad_setup(rng: random.Random) -> str | bytes:
    """A first frame the service must refuse."""
    valid = json.dumps(SETUP)
    kind = rng.randrange(12)
    if kind == 0:
        return valid[: rng.randint(1, len(valid) - 2)]  # truncated JSON
    if kind == 1:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
    if kind == 2:
        return json.dumps(rng.choice([[], [SETUP], 3, "setup", None]))
    if kind == 3:
        return json.dumps({**SETUP, "clientContent": {}})  # two top-level keys
    if kind == 4:
        return json.dumps({f"x{rng.randint(0, 999)}": junk(rng)})  # unknown message
    if kind == 5:
        return json.dumps({"setup": {"model": junk(rng) if rng.random() < 0.5 else ""}})
    if kind == 6:
        return json.dumps({"setup": {**SETUP["setup"], f"bogus{rng.randint(0, 99)}": junk(rng)}})
    if kind == 7:
        return json.dumps({"setup": {**SETUP["setup"], "generationConfig": {
            "responseModalities": rng.choice(["TEXT", 5, [1], {"a": 1}])}}})
    if kind == 8:
        return json.dumps({"setup": {**SETUP["setup"], "sessionResumption": {
            "handle": rng.choice([5, ["h"], {"h": 1}, "not-a-known-handle"])}}})
    if kind == 9:
        return json.dumps({"setup": {**SETUP["setup"], "tools": rng.choice(
            [5, "t", [{"functionDeclarations": [{"behavior": "NON_BLOCKING"}]}]])}})
    if kind == 10:
        return json.dumps({"setup": {**SETUP["setup"], "realtimeInputConfig": {
            "automaticActivityDetection": {"silenceDurationMs": rng.choice(["abc", [1], 1.5])}}}})
    return json.dumps({rng.choice(["realtimeInput", "clientContent", "toolResponse"]): {}})


def bad_frame(rng: random.Random) -> str | bytes:
    """A frame after a good setup that the service must refuse."""
    kind = rng.randrange(10)
    if kind == 0:
        return json.dumps({"realtimeInput": {"audio": {"data": "!!not base64!!" * rng.randint(1, 5),
                                                       "mimeType": "audio/pcm;rate=16000"}}})
    if kind == 1:
        odd = base64.b64encode(bytes(rng.randrange(1, 200, 2))).decode()
        return json.dumps({"realtimeInput": {"audio": {"data": odd, "mimeType": "audio/pcm"}}})
    if kind == 2:
        return json.dumps({"realtimeInput": {"audio": {"data": "AAAA",
                                                       "mimeType": rng.choice(["image/png", 5])}}})
    if kind == 3:
        return json.dumps({"realtimeInput": {f"bogus{rng.randint(0, 9)}": junk(rng)}})
    if kind == 4:
        return json.dumps({"clientContent": {"turns": rng.choice([5, "t", {"a": 1}])}})
    if kind == 5:
        return json.dumps({"toolResponse": {"functionResponses": [{"name": "x", "response": {}}]}})
    if kind == 6:
        return json.dumps(SETUP)  # a second setup
    if kind == 7:
        return json.dumps({"realtimeInput": {"activityStart": {}}})  # automatic VAD is on
    if kind == 8:
        return json.dumps({"realtimeInput": {"text": rng.choice([5, [1], {"a": "b"}, True])}})
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))


async def one_case(url: str, ctx: ssl.SSLContext, frame: str | bytes,
                   after_setup: bool) -> tuple[int | None, str]:
    async with asyncio.timeout(10):
        async with connect(url, ssl=ctx, additional_headers={"x-goog-api-key": "k"},
                           compression=None) as ws:
            if after_setup:
                await ws.send(json.dumps(SETUP))
                assert "setupComplete" in json.loads(await ws.recv())
            await ws.send(frame)
            try:
                while True:
                    await ws.recv()
            except ConnectionClosed:
                pass
            return ws.close_code, ws.close_reason or ""


def test_malformed_input_always_ends_in_a_close_with_a_reason(
        start_emulator: Callable[..., RunningEmulator]) -> None:
    """Every malformed setup or frame is closed (1007 for bad requests) with a reason; the
    emulator never crashes or hangs, and a good session works afterwards."""
    emulator = start_emulator(time_scale=0.01)
    url = emulator.env["GOOGLE_GEMINI_BASE_URL"].replace("https", "wss") + PATH
    ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    rng = random.Random(20261129)
    cases = [(bad_setup(rng), False) for _ in range(CASES // 2)]
    cases += [(bad_frame(rng), True) for _ in range(CASES // 2)]

    async def scenario() -> list[tuple[int | None, str]]:
        limit = asyncio.Semaphore(16)

        async def guarded(frame: str | bytes, after: bool) -> tuple[int | None, str]:
            async with limit:
                return await one_case(url, ctx, frame, after)

        results = await asyncio.gather(*(guarded(f, a) for f, a in cases))
        # And the service still serves a good session.
        async with connect(url, ssl=ctx, additional_headers={"x-goog-api-key": "k"}) as ws:
            await ws.send(json.dumps(SETUP))
            assert "setupComplete" in json.loads(await ws.recv())
            await ws.send(json.dumps({"clientContent": {"turns": [
                {"role": "user", "parts": [{"text": "still there?"}]}], "turnComplete": True}}))
            kinds = []
            while "turnComplete" not in kinds:
                frame = json.loads(await ws.recv())
                kinds += list(frame.get("serverContent", {}))
        return list(results)

    results = asyncio.run(scenario())
    assert emulator.process.poll() is None  # still running
    codes = [code for code, _ in results]
    assert all(code in (1007, 1008) for code in codes), sorted(set(map(str, codes)))
    assert codes.count(1007) / len(codes) > 0.9
    assert all(reason for _, reason in results)


def test_a_frame_nested_past_the_parser_depth_is_malformed() -> None:
    """JSON nested deeper than the parser goes is refused 1007 as malformed, not a crash."""
    with pytest.raises(ProtocolError) as info:
        parse_frame("[" * 100_000 + "]" * 100_000)
    assert info.value.code == 1007 and "malformed" in info.value.reason
