"""OpenAI Realtime's probes: what `faultlab calibrate` does to an endpoint with the official
`openai` SDK, and what it times (the item ids are docs/openai-realtime.md's).

- `text_turn`: a session (O2) told the default scenario pack's words; `response.create` to the
  model's first output, a function call (O11); its `function_call_output` and `response.create`
  to the first output of the answer (O10) and the answer's audio rate; a session.update without
  its `type` to its error, then a good one answered (O6); a second connection's session (O3).
- `speech_turn`: speech, then silent samples at real-time rate, to the response (O13).
- `unknown_model`: a session asked for a model no service serves (O4).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from faultlab.calibrate.endpoint import Arrivals, Endpoint, EndpointError, failure
from faultlab.calibrate.probes import probe_words, speak, speech_chunks
from faultlab.calibrate.sheet import NEW_SESSION, STAYS_OPEN, Observations
from faultlab.emulator.personality import Personality
from faultlab.protocols.openai import AUDIO_RATE
from faultlab.speech import RATE_IN, resample

OUTPUT = ("response.output_audio.delta", "response.output_text.delta",
          "response.output_audio_transcript.delta", "response.function_call_arguments.done")
DEFAULT_MODEL = "gpt-realtime"
NO_SUCH_MODEL = "faultlab-no-such-model"
MARKER = "faultlab calibrate marker instructions"


def connect_errors() -> tuple[type[BaseException], ...]:
    from websockets.exceptions import InvalidHandshake, InvalidURI

    return (InvalidHandshake, InvalidURI, OSError, TimeoutError)


def is_output(event: dict[str, Any]) -> bool:
    return event.get("type") in OUTPUT


class Realtime(Arrivals[dict[str, Any]]):
    """One open connection: the SDK's, and every event it received with its arrival time."""

    def __init__(self, conn: Any, started: float) -> None:
        super().__init__()
        self.conn = conn
        self.started = started
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, client: Any, endpoint: Endpoint, model: str) -> Realtime:
        """Connect (the WebSocket open; its events read from then on)."""
        options: dict[str, Any] = {}
        if endpoint.ca is not None:  # the SDK reads SSL_CERT_FILE by itself; --ca says it here
            options["ssl"] = ssl.create_default_context(cafile=endpoint.ca)
        started = asyncio.get_running_loop().time()
        async with asyncio.timeout(endpoint.timeout_s):
            conn = await client.realtime.connect(
                model=model, websocket_connection_options=options).__aenter__()
        return cls(conn, started)

    async def _read(self) -> None:
        try:
            while True:
                self.arrived(json.loads(await self.conn.recv_bytes()))
        except Exception as exc:  # the connection ended
            self.end(exc)

    def of(self, kind: str) -> Callable[[dict[str, Any]], bool]:
        return lambda event: event.get("type") == kind

    async def close(self) -> None:
        self._reader.cancel()
        await asyncio.wait({self._reader})
        with contextlib.suppress(Exception):
            await self.conn.close()

    async def __aenter__(self) -> Realtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class RealtimeProber:
    """Runs OpenAI Realtime's probes against one endpoint, noting what they see in `seen`."""

    def __init__(self, endpoint: Endpoint, personality: Personality, seen: Observations) -> None:
        self.endpoint = endpoint
        self.personality = personality
        self.seen = seen
        self.timeout_s = endpoint.timeout_s
        self.words = probe_words()
        from openai import AsyncOpenAI

        self.client = AsyncOpenAI(api_key=endpoint.key, base_url=endpoint.base_url)

    def settings(self) -> dict[str, Any]:
        words = self.words
        return {"type": "realtime", "output_modalities": ["audio"],
                "instructions": f"{MARKER}. {words.instruction}",
                "tools": [{"type": "function", "name": words.tool,
                           "description": words.description,
                           "parameters": {"type": "object", "required": [words.parameter],
                                          "properties": {words.parameter: {"type": "string"}}}}]}

    async def fresh(self) -> Realtime:
        """A new session, timed to its session.created (O2); EndpointError without one."""
        try:
            live = await Realtime.open(self.client, self.endpoint, self.endpoint.model)
        except connect_errors() as exc:
            raise EndpointError(f"cannot open a Realtime session at {self.endpoint.describe()}: "
                                f"{failure(exc, self.timeout_s)}") from None
        created = await live.first(live.of("session.created"), 0, self.timeout_s)
        if created is None:
            await live.close()
            raise EndpointError(f"{self.endpoint.describe()} sent no session.created within "
                                f"{self.timeout_s:g}s")
        self.seen.time("setup_complete_s", created[0] - live.started)
        return live

    async def audio_rate(self, live: Realtime, since: int) -> None:
        """O11: the reply's audio seconds over the wall seconds from its first delta to
        response.done."""
        done = await live.first(live.of("response.done"), since, self.timeout_s)
        if done is None:
            self.seen.lack("audio_speedup", f"no response.done within {self.timeout_s:g}s")
            return
        deltas = [(at, len(base64.b64decode(e["delta"])) / 2 / AUDIO_RATE)
                  for at, e in live.received[since:]
                  if at <= done[0] and e.get("type") == "response.output_audio.delta"]
        if len(deltas) < 2:
            self.seen.lack("audio_speedup", "a reply without audio")
            return
        over = done[0] - deltas[0][0]
        if over > 0:
            self.seen.time("audio_speedup", sum(s for _, s in deltas) / over, over)

    async def text_turn(self) -> None:
        """O2, O11, O10, O6, O3: see the module's docstring."""
        loop = asyncio.get_running_loop()
        async with await self.fresh() as live:
            conn = live.conn
            first_id = live.received[0][1].get("session", {}).get("id")
            await conn.session.update(session=self.settings())
            await live.first(live.of("session.updated"), 0, self.timeout_s)
            await conn.conversation.item.create(item={
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": self.words.request}]})
            since, sent = live.mark(), loop.time()
            await conn.response.create()
            await self.seen.timing("reply_s", live.first(is_output, since, self.timeout_s), sent,
                                   f"no output within {self.timeout_s:g}s")
            await live.first(live.of("response.done"), since, self.timeout_s)
            call = next((e for _, e in live.received[since:]
                         if e.get("type") == "response.function_call_arguments.done"), None)
            if call is None:
                self.seen.lack("tool_reply_s", "the model made no function call")
            else:
                await conn.conversation.item.create(item={
                    "type": "function_call_output", "call_id": call["call_id"],
                    "output": json.dumps({"status": "committed"})})
                since, sent = live.mark(), loop.time()
                await conn.response.create()
                if await self.seen.timing(
                        "tool_reply_s", live.first(is_output, since, self.timeout_s), sent,
                        f"no output within {self.timeout_s:g}s"):
                    await self.audio_rate(live, since)
            await self.in_band_error(live)
        async with await self.fresh() as second:
            session = second.received[0][1].get("session", {})
            fresh = session.get("id") != first_id and MARKER not in str(session.get("instructions"))
            self.seen.saw("no_resumption", NEW_SESSION if fresh else "the first session's state")

    async def in_band_error(self, live: Realtime) -> None:
        loop = asyncio.get_running_loop()
        since, sent = live.mark(), loop.time()
        await live.conn.send({"type": "session.update", "session": {"instructions": "x"}})
        error = await live.first(live.of("error"), since, self.timeout_s)
        if error is None:
            self.seen.saw("in_band_error", f"no error within {self.timeout_s:g}s")
            return
        self.seen.time("invalid_argument_s", error[0] - sent)
        since = live.mark()
        await live.conn.session.update(session={"type": "realtime"})
        updated = await live.first(live.of("session.updated"), since, self.timeout_s)
        self.seen.saw("in_band_error", STAYS_OPEN if updated is not None
                      else "error, then no answer" if live.ended is None else "error, then closed")

    async def speech_turn(self) -> None:
        """O13: see the module's docstring."""
        speech = [resample(np.frombuffer(c, dtype="<i2"), RATE_IN, AUDIO_RATE) for c in
                  speech_chunks()]
        silence = np.zeros(len(speech[0]), dtype=np.int16)

        async def send(chunk: np.ndarray) -> None:
            await live.conn.input_audio_buffer.append(
                audio=base64.b64encode(chunk.astype("<i2").tobytes()).decode())

        async with await self.fresh() as live:
            spoken, filler = await speak(send, speech, silence)
            since = live.mark()
            try:
                if await self.seen.timing(
                        "turn_end_s", live.first(is_output, since, self.timeout_s), spoken,
                        f"no response within {self.timeout_s:g}s"):
                    await self.audio_rate(live, since)
            finally:
                filler.cancel()
                await asyncio.wait({filler})

    async def unknown_model(self) -> None:
        """O4: see the module's docstring."""
        from websockets.exceptions import InvalidStatus

        try:
            live = await Realtime.open(self.client, self.endpoint, NO_SUCH_MODEL)
        except InvalidStatus as exc:
            self.seen.saw("unknown_model", f"HTTP {exc.response.status_code}")
            return
        except connect_errors() as exc:
            self.seen.saw("unknown_model", failure(exc, self.timeout_s))
            return
        async with live:
            first = await live.first(lambda e: True, 0, self.timeout_s)
            if first is not None and first[1].get("type") == "session.created":
                self.seen.saw("unknown_model", "served")
                return
            await live.first(lambda e: False, 0, self.timeout_s)  # until it ends
            close = getattr(live.ended, "rcvd", None)
            error = first[1].get("error", {}).get("code") if first else None
            self.seen.saw("unknown_model", (f"error {error}" if error else "no error")
                          + (f", close {close.code}" if close else ", no close"))


# What each probe takes against an emulator at time scale 1 (measured: its default timings).
TEXT_TURN_S, SPEECH_TURN_S, UNKNOWN_MODEL_S = 2.5, 3.0, 0.2


def run_time_s(samples: int) -> float:
    return samples * (TEXT_TURN_S + SPEECH_TURN_S) + UNKNOWN_MODEL_S


async def run_probes(prober: RealtimeProber, samples: int,
                     progress: Callable[[str], None] | None = None) -> None:
    """Every probe, `samples` times each but the unknown model, once."""
    from websockets.exceptions import ConnectionClosed

    loop = asyncio.get_running_loop()
    steps: list[tuple[str, Callable[[], Awaitable[None]]]]
    steps = [(f"text turn {i + 1}/{samples}", prober.text_turn) for i in range(samples)]
    steps += [(f"speech turn {i + 1}/{samples}", prober.speech_turn) for i in range(samples)]
    steps.append(("unknown model", prober.unknown_model))
    for name, probe in steps:
        started = loop.time()
        try:
            await probe()
        except ConnectionClosed as exc:
            if progress is not None:
                progress(f"{name}: closed mid-probe ({failure(exc, 0)})")
            continue
        if progress is not None:
            progress(f"{name}: {loop.time() - started:.1f}s")
