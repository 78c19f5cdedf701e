"""The probes: what `faultlab calibrate` does to an endpoint with the official SDK, and what it
times (the item ids are docs/live-server-behaviour.md's).

- `drop_and_resume`: a turn in the default scenario pack's words leaves a pending tool call (T7);
  the connection is closed while the model is idle; a resume at once (R1), another
  release_window_s + 0.1 s after the close (R2), then the old call id answered on the resumed
  session (R4, T2, T3).
- `speech_turn`: speech, then silent samples at real-time rate, to the turn's end (T1, T3).
- `lockout`: resumes at a 1 s cadence while the first connection stays open (L1, L2); once it has
  been idle release_after_activity_s + 0.5 s it is closed and a resume sent at once (L3).

Every fresh session times its setupComplete (S1) and resumption update (U1); every accepted resume
its setupComplete (S2), every refused one its close (R1, L2).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import numpy as np

from faultlab.calibrate.endpoint import Endpoint, EndpointError, Live, connect_errors, failure
from faultlab.calibrate.sheet import ACCEPTED, ANSWERED, Observations
from faultlab.emulator.audio import DEFAULT_THRESHOLD_DBFS, FRAME_SAMPLES, frame_dbfs
from faultlab.emulator.personality import Personality
from faultlab.protocols.gemini import RATE
from faultlab.scenarios import PackError, ProbeWords, pack_named
from faultlab.speech import RATE_IN, RATE_OUT, synthesise

if TYPE_CHECKING:
    from google import genai
    from google.genai import types

SPOKEN = "Hello, can you hear me?"
CHUNK_S = 0.1  # speech and silence go in 100 ms chunks (20-100 ms recommended)
CHUNK_SAMPLES = int(RATE_IN * CHUNK_S)
RESUME_MARGIN_S = 0.1  # R2: one attempt 1.6 s after the drop worked
LOCKOUT_CADENCE_S = 1.0  # L1: the field's 1 s cadence, 118 of 118 refused
# L3: the old connection is closed once idle this long past release_after_activity_s, so that
# the resume after it is not an idle drop's (R1).
IDLE_MARGIN_S = 0.5
# A silent microphone keeps sending until the reply has been heard; at most this long.
SILENCE_CAP_S = 30.0


def reply_began(message: types.LiveServerMessage) -> bool:
    """The model's reply: a tool call (or its cancellation), speech or its transcript."""
    sc = message.server_content
    return bool(message.tool_call or message.tool_call_cancellation
                or (sc and (sc.model_turn or sc.output_transcription)))


def turn_ended(message: types.LiveServerMessage) -> bool:
    """What the end of the user's spoken turn brings: the input transcript (in one piece, T1),
    the reply, or the turn's end."""
    sc = message.server_content
    return reply_began(message) or bool(
        sc and (sc.input_transcription or sc.generation_complete or sc.turn_complete))


def turn_complete(message: types.LiveServerMessage) -> bool:
    return bool(message.server_content and message.server_content.turn_complete)


def generation_over(message: types.LiveServerMessage) -> bool:
    sc = message.server_content
    return bool(sc and (sc.generation_complete or sc.turn_complete))


def audio_seconds(message: types.LiveServerMessage) -> float:
    """Seconds of 16-bit mono audio the message carries."""
    sc = message.server_content
    if sc is None or sc.model_turn is None:
        return 0.0
    total = 0.0
    for part in sc.model_turn.parts or []:
        blob = part.inline_data
        if blob is not None and blob.data and (blob.mime_type or "").startswith("audio/pcm"):
            rate = RATE.search(blob.mime_type or "")
            total += len(blob.data) / 2 / (int(rate.group(1)) if rate else RATE_OUT)
    return total


def speech_chunks(text: str = SPOKEN) -> list[bytes]:
    """Synthesised speech in 100 ms chunks whose last sample is speech: trailing quiet frames are
    cut and leading silence added, so that the speech ends where a chunk ends."""
    pcm = synthesise(text, RATE_IN)
    levels = frame_dbfs(pcm)
    loud = np.nonzero(levels > DEFAULT_THRESHOLD_DBFS)[0]
    end = (int(loud[-1]) + 1) * FRAME_SAMPLES if len(loud) else len(pcm)
    pcm = pcm[:end]
    pad = np.zeros(-len(pcm) % CHUNK_SAMPLES, dtype=np.int16)
    raw = np.concatenate([pad, pcm]).astype("<i2").tobytes()
    step = CHUNK_SAMPLES * 2
    return [raw[i : i + step] for i in range(0, len(raw), step)]


def probe_words() -> ProbeWords:
    """What the probes say to make a model call a tool: the default scenario pack's words (those
    an emulator's default model answers with a tool call)."""
    pack = pack_named(None)
    if pack.probe is None:
        raise PackError(f"scenario pack {pack.name} has no words for calibrate's probes")
    return pack.probe


async def sleep_until(at: float) -> None:
    await asyncio.sleep(max(0.0, at - asyncio.get_running_loop().time()))


async def speak[C](send: Callable[[C], Awaitable[None]], speech: list[C],
                   silence: C) -> tuple[float, asyncio.Task[None]]:
    """Send each speech chunk when a microphone would have recorded it whole, then silent chunks
    at real-time rate (only silence heard as samples ends a turn, A1-A3) until the task that
    sends them is cancelled (SILENCE_CAP_S at most). Returns when the speech was sent, and that
    task."""
    begun = asyncio.get_running_loop().time()
    for index, chunk in enumerate(speech):
        await sleep_until(begun + (index + 1) * CHUNK_S)
        await send(chunk)

    async def keep_silent() -> None:
        with contextlib.suppress(Exception):
            for index in range(len(speech), len(speech) + int(SILENCE_CAP_S / CHUNK_S)):
                await sleep_until(begun + (index + 1) * CHUNK_S)
                await send(silence)

    return asyncio.get_running_loop().time(), asyncio.create_task(keep_silent())


class Prober:
    """Runs the probes against one endpoint, noting what they see in `seen`."""

    def __init__(self, endpoint: Endpoint, personality: Personality, seen: Observations) -> None:
        self.endpoint = endpoint
        self.personality = personality
        self.seen = seen
        self.timeout_s = endpoint.timeout_s
        self.client: genai.Client = endpoint.client()
        self.words = probe_words()

    def config(self, handle: str | None = None) -> types.LiveConnectConfig:
        from google.genai import types

        words = self.words
        tool = types.Tool(function_declarations=[types.FunctionDeclaration(
            name=words.tool, description=words.description,
            behavior=types.Behavior.NON_BLOCKING,
            parameters=types.Schema(type=types.Type.OBJECT, required=[words.parameter], properties={
                words.parameter: types.Schema(type=types.Type.STRING)}))])
        return types.LiveConnectConfig(
            response_modalities=[types.Modality.AUDIO], system_instruction=words.instruction,
            tools=[tool], input_audio_transcription=types.AudioTranscriptionConfig(),
            session_resumption=types.SessionResumptionConfig(handle=handle))

    async def fresh(self) -> Live:
        """A new session (S1); EndpointError when the endpoint does not give one."""
        try:
            live = await Live.open(self.client, self.endpoint, self.config())
        except connect_errors() as exc:
            raise EndpointError(f"cannot open a Live session at {self.endpoint.describe()}: "
                                f"{failure(exc, self.timeout_s)}") from None
        self.seen.time("setup_complete_s", live.setup_s)
        return live

    async def handle_of(self, live: Live, probe: str) -> str | None:
        """The session's resumption handle, from its one update (U1); without one, `probe`'s
        behaviour is recorded as not tried."""
        got = await live.first(lambda m: bool(m.session_resumption_update
                                              and m.session_resumption_update.new_handle),
                               0, self.timeout_s)
        if got is None:
            self.seen.lack("resumption_update_s", "no sessionResumptionUpdate")
            self.seen.saw(probe, "not tried: no resumption handle")
            return None
        at, message = got
        self.seen.time("resumption_update_s", at - live.opened)
        assert message.session_resumption_update is not None
        return message.session_resumption_update.new_handle

    async def resume(self, handle: str) -> tuple[str, Live | None]:
        """A resume: `accepted` and its connection (S2), or what refused it (R1, L2)."""
        from google.genai import errors

        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            live = await Live.open(self.client, self.endpoint, self.config(handle))
        except errors.APIError as exc:
            if exc.code == 1011:
                self.seen.time("refusal_s", loop.time() - started)
            return f"refused {exc.code}", None
        except connect_errors() as exc:
            return failure(exc, self.timeout_s), None
        self.seen.time("resumed_setup_complete_s", live.setup_s)
        return ACCEPTED, live

    async def audio_rate(self, live: Live, since: int) -> None:
        """T3: the reply's audio seconds over the wall seconds from its first chunk to
        generationComplete (or, without one, its last chunk, whose audio then does not count)."""
        end = await live.first(generation_over, since, self.timeout_s)
        if end is None:
            self.seen.lack("audio_speedup", f"no generationComplete within {self.timeout_s:g}s")
            return
        end_at, last = end
        chunks = [(at, audio_seconds(m)) for at, m in live.received[since:] if at <= end_at]
        chunks = [(at, seconds) for at, seconds in chunks if seconds > 0]
        if len(chunks) < 2:
            self.seen.lack("audio_speedup", "a reply without audio")
            return
        audio = sum(seconds for _, seconds in chunks)
        over = end_at - chunks[0][0]
        if not (last.server_content and last.server_content.generation_complete):
            audio -= chunks[-1][1]
            over = chunks[-1][0] - chunks[0][0]
        if over > 0:
            self.seen.time("audio_speedup", audio / over, over)

    async def drop_and_resume(self) -> None:
        """R1, R2, R4 (and T7, T2, T3): see the module's docstring."""
        from google.genai import types

        loop = asyncio.get_running_loop()
        async with await self.fresh() as first:
            handle = await self.handle_of(first, "idle_drop_refused")
            if handle is None:
                return
            since = first.mark()
            sent = loop.time()
            await first.session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text=self.words.request)]),
                turn_complete=True)
            await self.seen.timing("reply_s", first.first(reply_began, since, self.timeout_s),
                                   sent, f"no reply within {self.timeout_s:g}s")
            # Closed once the model is idle, its turn over (R1's condition).
            await first.first(turn_complete, since, self.timeout_s)
            call = next((m.tool_call for _, m in first.received[since:] if m.tool_call), None)
            dropped = await first.close()
        outcome, resumed = await self.resume(handle)
        self.seen.saw("idle_drop_refused", outcome)
        if resumed is None:
            await sleep_until(dropped + self.personality.release_window_s + RESUME_MARGIN_S)
            outcome, resumed = await self.resume(handle)
            self.seen.saw("release_window", outcome)
        if resumed is None:
            self.seen.saw("pending_call", "not tried: no resume accepted")
            return
        async with resumed:
            if call is None or not call.function_calls:
                self.seen.saw("pending_call", "not tried: the model made no tool call")
                return
            old = call.function_calls[0]
            since = resumed.mark()
            sent = loop.time()
            await resumed.session.send_tool_response(function_responses=[types.FunctionResponse(
                id=old.id, name=old.name, response={"status": "committed"})])
            answer = await resumed.first(reply_began, since, self.timeout_s)
            if answer is None:
                self.seen.saw("pending_call", f"no answer within {self.timeout_s:g}s")
                return
            at, message = answer
            if message.tool_call or message.tool_call_cancellation:
                self.seen.saw("pending_call", "a new toolCall" if message.tool_call
                              else "toolCallCancellation")
                return
            self.seen.saw("pending_call", ANSWERED)
            self.seen.time("tool_reply_s", at - sent)
            await self.audio_rate(resumed, since)

    async def speech_turn(self) -> None:
        """T1 and T3: see the module's docstring."""
        from google.genai import types

        speech = speech_chunks()
        silence = bytes(len(speech[0]))

        async def send(chunk: bytes) -> None:
            await live.session.send_realtime_input(
                audio=types.Blob(data=chunk, mime_type=f"audio/pcm;rate={RATE_IN}"))

        async with await self.fresh() as live:
            spoken, filler = await speak(send, speech, silence)
            since = live.mark()
            try:
                if await self.seen.timing(
                        "turn_end_s", live.first(turn_ended, since, self.timeout_s), spoken,
                        f"no end of turn within {self.timeout_s:g}s"):
                    await self.audio_rate(live, since)
            finally:
                filler.cancel()
                await asyncio.wait({filler})

    async def lockout(self) -> None:
        """L1, L2, L3: see the module's docstring."""
        loop = asyncio.get_running_loop()
        async with await self.fresh() as held:
            handle = await self.handle_of(held, "lockout")
            if handle is None:
                return
            quiet_since = held.received[-1][0]
            idle_until = quiet_since + self.personality.release_after_activity_s + IDLE_MARGIN_S
            attempt_at = loop.time()
            while True:
                outcome, taken = await self.resume(handle)
                self.seen.saw("lockout", outcome)
                if taken is not None:  # the session moved: nothing is locked any more
                    await taken.close()
                    break
                attempt_at += LOCKOUT_CADENCE_S
                if attempt_at >= idle_until:
                    break
                await sleep_until(attempt_at)
            await sleep_until(idle_until)
        outcome, resumed = await self.resume(handle)
        self.seen.saw("unlock", outcome)
        if resumed is not None:
            await resumed.close()


# What each probe takes against an emulator at time scale 1 (measured: its default timings).
DROP_AND_RESUME_S, SPEECH_TURN_S, LOCKOUT_S = 4.6, 3.4, 11.6


def run_time_s(samples: int) -> float:
    """About how long `run_probes` takes against an emulator at time scale 1."""
    return samples * (DROP_AND_RESUME_S + SPEECH_TURN_S) + LOCKOUT_S


async def run_probes(prober: Prober, samples: int,
                     progress: Callable[[str], None] | None = None) -> None:
    """Every probe: `samples` times each but the lockout, which holds a connection long enough
    to give samples of its own (about one a second)."""
    from google.genai import errors
    from websockets.exceptions import ConnectionClosed

    loop = asyncio.get_running_loop()
    seen = prober.seen
    # Each probe with how a connection the endpoint closed under it is recorded (the real service
    # closes sessions mid-way): against the behaviour or the timing its first step measures.
    steps: list[tuple[str, Callable[[], Awaitable[None]], Callable[[str], None]]]
    steps = [(f"drop and resume {i + 1}/{samples}", prober.drop_and_resume,
              lambda why: seen.saw("idle_drop_refused", why)) for i in range(samples)]
    steps += [(f"speech turn {i + 1}/{samples}", prober.speech_turn,
               lambda why: seen.lack("turn_end_s", why)) for i in range(samples)]
    steps.append(("lockout", prober.lockout, lambda why: seen.saw("lockout", why)))
    for name, probe, cut_short in steps:
        started = loop.time()
        try:
            await probe()
        except (ConnectionClosed, errors.APIError) as exc:
            why = f"closed mid-probe ({failure(exc, 0)})"
            cut_short(why)
            if progress is not None:
                progress(f"{name}: {why}")
            continue
        if progress is not None:
            progress(f"{name}: {loop.time() - started:.1f}s")
