"""pipecat's OpenAIRealtimeLLMService, unmodified, against the emulator, run by the interpreter of
its own venv (`make install` makes `.venv-pipecat`). It imports nothing of faultlab;
tests/emulator/test_openai_public_clients.py runs it and reads what it writes.

    pipecat_session.py text BASE OUT
    pipecat_session.py audio BASE OUT PCM   (PCM: 24 kHz 16-bit mono speech, then silence)

BASE is the emulator's OPENAI_BASE_URL. The service reads no such variable: it connects to its
`base_url` argument, a WebSocket URL, with `?model=` added (services/openai/realtime/llm.py,
__init__), through websockets' connect, whose TLS context is ssl.create_default_context(): the
emulator's CA comes from SSL_CERT_FILE.

Each session is a pipeline as pipecat's realtime examples build one, less the transport: the
context aggregators around the service, and a processor after it that keeps what it pushes. The
context opens with a user message and an LLMRunFrame: the service sends the context's messages
and response.create once the session is updated. book_slot is registered with
register_function: the service calls it on the call's arguments, sends its result back, and the
assistant aggregator's context frame asks for the reply.
- text: two sessions. "Hello there", text out; then a booking, audio out (the default).
- audio: "Say hello!" answered, then the user's booking spoken in 20 ms InputAudioRawFrames, as a
  transport's input pushes them; server VAD and input transcription.
(A user message appended later, LLMMessagesAppendFrame, is taken by the user aggregator, which
pushes the context down, and the service runs no response on a context frame that comes down:
only on one the assistant aggregator sends up (llm.py, _handle_context). Hence a session each.)

OUT gets JSON, for each session: the frames that came by (kind and direction, in order; not the
audio), the words of each response, the calls made, the bytes of audio, the context at the end,
and the problems: ErrorFrames, and pipecat's own warnings and errors (its loguru log).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loguru import logger
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    EndFrame,
    ErrorFrame,
    Frame,
    FunctionCallResultFrame,
    InputAudioRawFrame,
    LLMFullResponseEndFrame,
    LLMRunFrame,
    LLMTextFrame,
    OutputTransportMessageUrgentFrame,
    TTSAudioRawFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.realtime import events
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService
from pipecat.workers.runner import WorkerRunner

TIMEOUT_S = 15
MODEL = "gpt-realtime"
BOOK_INSTRUCTIONS = "You book appointment slots with the book_slot tool."
BOOKING = "Book me the 3pm slot tomorrow, please."
RATE = 24000
CHUNK = RATE * 2 // 50  # 20 ms of 16-bit mono
PACE = 0.1  # audio goes 10x faster than real time (the emulator runs at time scale 0.1)
BOOK_SLOT = FunctionSchema(name="book_slot", description="Book an appointment slot.",
                           properties={"slot": {"type": "string", "description": "When"}},
                           required=["slot"])


class Keep(FrameProcessor):
    """What the service pushes, downstream, and what the assistant aggregator sends back up."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[Frame] = []
        self.seen: list[tuple[str, str]] = []
        self.words = ""  # the current response's
        self.responses: list[tuple[int, str]] = []  # where each ended, and its words
        self.ended = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        self.frames.append(frame)
        if not isinstance(frame, TTSAudioRawFrame | InputAudioRawFrame
                                 | OutputTransportMessageUrgentFrame):
            self.seen.append((type(frame).__name__, direction.name))
        # With audio out the transcript comes as LLMTextFrames too, kept out of the context
        # (llm.py, _push_output_transcript_text_frames).
        if isinstance(frame, LLMTextFrame):
            self.words += frame.text
        if isinstance(frame, LLMFullResponseEndFrame | ErrorFrame):
            self.responses.append((len(self.frames), self.words))
            self.words = ""
            self.ended.set()
        await self.push_frame(frame, direction)

    async def until(self, done: Callable[[], bool]) -> None:
        async with asyncio.timeout(TIMEOUT_S):
            while not done():
                self.ended.clear()
                await self.ended.wait()


async def session(base: str, opening: str, properties: events.SessionProperties,
                  calls_tool: bool, pcm: bytes = b"") -> dict[str, Any]:
    """A pipeline whose context opens with the user's `opening` (and `pcm`, 24 kHz 16-bit mono
    speech, said once that is answered), run until a response with words has ended (after the
    tool's result, if it `calls_tool`)."""
    problems: list[str] = []
    sink = logger.add(lambda message: problems.append(f"pipecat log: {message.strip()}"),
                      level="WARNING", format="{level} {name}: {message}")
    calls: list[dict[str, Any]] = []

    async def book_slot(params: FunctionCallParams) -> None:
        calls.append(dict(params.arguments))
        await params.result_callback({"status": "booked", "slot": params.arguments["slot"]})

    llm = OpenAIRealtimeLLMService(
        api_key="test-key-not-a-secret",
        base_url=f"{base.replace('https://', 'wss://', 1)}/realtime",
        settings=OpenAIRealtimeLLMService.Settings(
            model=MODEL, system_instruction=BOOK_INSTRUCTIONS, session_properties=properties))
    llm.register_function("book_slot", book_slot)
    context = LLMContext([{"role": "user", "content": opening}], tools=ToolsSchema([BOOK_SLOT]))
    pair = LLMContextAggregatorPair(context)
    keep = Keep()
    worker = PipelineWorker(Pipeline([pair.user(), llm, keep, pair.assistant()]),
                            params=PipelineParams(), cancel_on_idle_timeout=False)

    def answered() -> bool:
        if any(isinstance(f, ErrorFrame) for f in keep.frames):
            return True
        start = next((i for i, f in enumerate(keep.frames)
                      if isinstance(f, FunctionCallResultFrame)), None) if calls_tool else 0
        return start is not None and any(end > start and words
                                         for end, words in keep.responses)

    async def drive() -> None:
        try:
            await worker.queue_frames([LLMRunFrame()])
            if pcm:
                await keep.until(lambda: bool(keep.responses))
                # As a transport's input pushes the microphone: 20 ms frames, as they come.
                for start in range(0, len(pcm), CHUNK):
                    await worker.queue_frame(InputAudioRawFrame(
                        audio=pcm[start:start + CHUNK], sample_rate=RATE, num_channels=1))
                    await asyncio.sleep(0.02 * PACE)
            await keep.until(answered)
        except TimeoutError:
            problems.append(f"no answer within {TIMEOUT_S} s")
        finally:
            await worker.queue_frame(EndFrame())

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), drive())
    logger.remove(sink)
    return {
        "problems": problems + [f"ErrorFrame: {f.error}" for f in keep.frames
                                if isinstance(f, ErrorFrame)],
        "frames": keep.seen,
        "said": [words for _, words in keep.responses if words],
        "calls": calls,
        "audio_bytes": sum(len(f.audio) for f in keep.frames if isinstance(f, TTSAudioRawFrame)),
        "context": context.get_messages(),
    }


async def text(base: str) -> dict[str, Any]:
    return {"text": await session(base, "Hello there", events.SessionProperties(
                output_modalities=["text"]), calls_tool=False),
            "tool": await session(base, BOOKING, events.SessionProperties(), calls_tool=True)}


async def audio(base: str, pcm: bytes) -> dict[str, Any]:
    # examples/realtime/realtime-openai.py's audio input: transcription, and server VAD here.
    properties = events.SessionProperties(audio=events.AudioConfiguration(
        input=events.AudioInput(transcription=events.InputAudioTranscription(),
                                turn_detection=events.TurnDetection())))
    return {"audio": await session(base, "Say hello!", properties, calls_tool=True, pcm=pcm)}


if __name__ == "__main__":
    logger.remove()  # its DEBUG log on stderr is long; warnings are kept as problems
    logger.add(sys.stderr, level="INFO")
    scenario, base, out = sys.argv[1:4]
    got = (asyncio.run(text(base)) if scenario == "text"
           else asyncio.run(audio(base, Path(sys.argv[4]).read_bytes())))
    Path(out).write_text(json.dumps(got, default=str))
