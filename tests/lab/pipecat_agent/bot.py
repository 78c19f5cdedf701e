"""A pipecat SmallWebRTC voice agent, built as pipecat's examples build one, its user a web page
on WebRTC (page/index.html) and its model OpenAI Realtime on WebSocket: what a team that ships a
voice agent runs. Run by the interpreter of `.venv-pipecat` (pipecat-ai[openai,webrtc], made by
`make install`); it imports nothing of faultlab. tests/lab/test_pipecat_webrtc.py runs it as a
program target in the namespace lab.

    bot.py PORT FAULTLAB_PYTHON [BOOKING_S]

It serves, with CORS for the page (served on the client's own loopback):
- GET /api/ice: the page's ICE servers, the lab's TURN server (FAULTLAB_TURN_URLS and its
  credentials: an app's server hands them to its page), none without one;
- POST /api/offer: SmallWebRTC's signalling ({sdp, type} in, {sdp, type, pc_id} out; the offer
  carries its candidates, no trickle); each offer a call with a pipeline of its own, but one
  that names a call's `pc_id` with `restart_pc: true`: pipecat's restart of that call's peer
  connection (a new one, its ICE anew, for the same pipeline: the conversation goes on; 404 for
  a call it does not hold). Each peer connection has its own pc_id.
The bot's own ICE has no server: host candidates on the server's address (aiortc would ask
Google's STUN server if given none at all; pipecat passes an empty list).

Its model: the faultlab emulator (`FAULTLAB_PYTHON -m faultlab emulator serve`, personality
openai-realtime) on the server's own loopback, started here as the model service a real agent
reaches over the internet; it recognises the lab microphone's utterances
($FAULTLAB_RUN_DIR/speech) and logs to model.events.jsonl in the run folder. Server VAD ends the
user's turn; book_slot books, in BOOKING_S seconds (0 by default). The bot stops it when
SIGTERM (the run's stop) ends the bot, and the kernel when anything else does
(PR_SET_PDEATHSIG).

What it does goes to the run's timeline as its events ($FAULTLAB_EVENTS, one JSON line each):
`bot.model` (pid: the model service's process), `bot.connected` (again: its peer connection
restarted), `bot.restart` (pc_id: the new peer connection's, replaced: the old one's),
`bot.heard` (text: the model's transcript of the user), `bot.tool_call` (name, args),
`bot.booked` (slot), `bot.said` (text), `bot.disconnected`. What the user is told of the call
(heard, tool_call, booked, said) also goes to the page on the call's data channel
({"event": ..., fields}) while it is connected.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web
from loguru import logger
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    Frame,
    LLMFullResponseEndFrame,
    LLMRunFrame,
    LLMTextFrame,
    TranscriptionFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.realtime import events
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService
from pipecat.transports.base_transport import TransportParams
from pipecat.transports.smallwebrtc.connection import SmallWebRTCConnection
from pipecat.transports.smallwebrtc.transport import SmallWebRTCTransport
from pipecat.workers.runner import WorkerRunner

MODEL = "gpt-realtime"
INSTRUCTIONS = "You book appointment slots with the book_slot tool."
GREETING = "Say hello!"
BOOK_SLOT = FunctionSchema(name="book_slot", description="Book an appointment slot.",
                           properties={"slot": {"type": "string", "description": "When"}},
                           required=["slot"])
CORS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "Content-Type",
        "Access-Control-Allow-Methods": "GET, POST, OPTIONS"}
MODEL_READY_S = 30
PR_SET_PDEATHSIG = 1  # prctl(2)


def announce(event: str, **fields: Any) -> None:
    """One line on the run's timeline (faultlab's event format: `event`, `ts`, fields)."""
    line = json.dumps({"event": event, "ts": time.time(), **fields}) + "\n"
    with open(os.environ["FAULTLAB_EVENTS"], "a") as out:
        out.write(line)


def dies_with(parent: int) -> None:
    """In the model's child, before it runs: SIGTERM when the bot (`parent`) ends, however it
    ends; at once if it ended before this was in place."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:
        os._exit(1)


def start_model(python: str) -> tuple[subprocess.Popen[str], str]:
    """The emulator on this namespace's loopback, and its WebSocket base URL; its CA is put in
    SSL_CERT_FILE, which the TLS context of pipecat's websockets reads."""
    run_dir = Path(os.environ["FAULTLAB_RUN_DIR"])
    proc = subprocess.Popen(
        [python, "-m", "faultlab", "emulator", "serve", "--host", "127.0.0.1", "--port", "0",
         "--personality", "openai-realtime", "--ca-dir", str(run_dir / "model-ca"),
         "--utterances", str(run_dir / "speech"), "--events", str(run_dir / "model.events.jsonl")],
        stdout=subprocess.PIPE, stderr=(run_dir / "model.log").open("w"), text=True,
        env={k: v for k, v in os.environ.items() if k != "FAULTLAB_EVENTS"},
        preexec_fn=functools.partial(dies_with, os.getpid()))
    announce("bot.model", pid=proc.pid)
    assert proc.stdout is not None
    found: dict[str, str] = {}
    deadline = time.monotonic() + MODEL_READY_S
    while "OPENAI_BASE_URL" not in found and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"the model service did not start: {run_dir / 'model.log'}")
        key, _, value = line.removeprefix("export ").strip().partition("=")
        found[key] = value.strip("'\"")
    os.environ["SSL_CERT_FILE"] = found["SSL_CERT_FILE"]
    return proc, found["OPENAI_BASE_URL"].replace("https://", "wss://", 1) + "/realtime"


class Narrator(FrameProcessor):
    """Beside the model: what the bot heard (before it, upstream) and said (after it), on the
    timeline and to the page."""

    def __init__(self, connection: SmallWebRTCConnection) -> None:
        super().__init__()
        self.connection = connection
        self.words = ""

    def tell(self, event: str, **fields: Any) -> None:
        announce(event, **fields)
        if self.connection.is_connected():
            self.connection.send_app_message({"event": event, **fields})

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TranscriptionFrame):
            self.tell("bot.heard", text=frame.text)
        if isinstance(frame, LLMTextFrame):
            self.words += frame.text
        if isinstance(frame, LLMFullResponseEndFrame) and self.words:
            self.tell("bot.said", text=self.words)
            self.words = ""
        await self.push_frame(frame, direction)


class Bot:
    def __init__(self, model_url: str, booking_s: float) -> None:
        self.model_url = model_url
        self.booking_s = booking_s
        self.calls: dict[str, SmallWebRTCConnection] = {}  # by pc_id
        # SIGTERM (the run's stop) cancels the calls and ends run().
        self.runner = WorkerRunner(handle_sigint=False, handle_sigterm=True)

    async def call(self, connection: SmallWebRTCConnection) -> None:
        """One call's pipeline, as pipecat's realtime examples build it, over the call."""
        transport = SmallWebRTCTransport(webrtc_connection=connection, params=TransportParams(
            audio_in_enabled=True, audio_out_enabled=True))
        properties = events.SessionProperties(audio=events.AudioConfiguration(
            input=events.AudioInput(transcription=events.InputAudioTranscription(),
                                    turn_detection=events.TurnDetection())))
        llm = OpenAIRealtimeLLMService(
            api_key="not-a-real-key", base_url=self.model_url,
            settings=OpenAIRealtimeLLMService.Settings(
                model=MODEL, system_instruction=INSTRUCTIONS, session_properties=properties))
        narrator = Narrator(connection)

        async def book_slot(params: FunctionCallParams) -> None:
            narrator.tell("bot.tool_call", name="book_slot", args=dict(params.arguments))
            await asyncio.sleep(self.booking_s)  # the booking system's time
            slot = params.arguments.get("slot")
            narrator.tell("bot.booked", slot=slot)
            await params.result_callback({"status": "booked", "slot": slot})

        llm.register_function("book_slot", book_slot)
        # As examples/realtime/realtime-openai.py: the context opens with a user message, and
        # a run of it once the user is there (the session's tools go with the first context:
        # without that run, the server VAD's first response came before them).
        pair = LLMContextAggregatorPair(LLMContext([{"role": "user", "content": GREETING}],
                                                   tools=ToolsSchema([BOOK_SLOT])))
        # The model's transcript of the user goes upstream from it, its words downstream.
        worker = PipelineWorker(
            Pipeline([transport.input(), pair.user(), Narrator(connection), llm, narrator,
                      transport.output(), pair.assistant()]),
            params=PipelineParams(), cancel_on_idle_timeout=False)

        greeted = False

        @transport.event_handler("on_client_connected")
        async def connected(transport: Any, client: Any) -> None:
            nonlocal greeted
            announce("bot.connected", again=greeted)
            if not greeted:  # once a call: a restarted peer connection is the same conversation
                greeted = True
                await worker.queue_frames([LLMRunFrame()])

        @transport.event_handler("on_client_disconnected")
        async def disconnected(transport: Any, client: Any) -> None:
            announce("bot.disconnected")
            for pc_id in [i for i, known in self.calls.items() if known is connection]:
                del self.calls[pc_id]  # a restart of it has no pipeline to go on with
            await worker.cancel()

        await self.runner.add_workers(worker)

    async def offer(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("restart_pc"):
            known = self.calls.get(body.get("pc_id") or "")
            if known is None:  # not a call of this bot's, or one that ended
                return web.json_response({"error": "no such call"}, status=404, headers=CORS)
            old = known.pc_id
            await known.renegotiate(sdp=body["sdp"], type=body["type"], restart_pc=True)
            # The new peer connection has an id of its own, which the page's next restart names.
            self.calls[known.pc_id] = known
            announce("bot.restart", pc_id=known.pc_id, replaced=old)
            return web.json_response(known.get_answer(), headers=CORS)
        connection = SmallWebRTCConnection(ice_servers=[])  # host candidates only, no STUN
        await connection.initialize(sdp=body["sdp"], type=body["type"])
        await self.call(connection)
        self.calls[connection.pc_id] = connection
        return web.json_response(connection.get_answer(), headers=CORS)


async def ice(request: web.Request) -> web.Response:
    urls = os.environ.get("FAULTLAB_TURN_URLS", "").split()
    servers = [{"urls": urls, "username": os.environ.get("FAULTLAB_TURN_USERNAME", ""),
                "credential": os.environ.get("FAULTLAB_TURN_CREDENTIAL", "")}] if urls else []
    return web.json_response({"iceServers": servers}, headers=CORS)


async def preflight(request: web.Request) -> web.Response:
    return web.Response(headers=CORS)


async def serve(port: int, python: str, booking_s: float) -> None:
    model, url = start_model(python)
    try:
        bot = Bot(url, booking_s)
        app = web.Application()
        app.add_routes([web.get("/api/ice", ice), web.post("/api/offer", bot.offer),
                        web.options("/api/{route}", preflight)])
        site_runner = web.AppRunner(app)
        await site_runner.setup()
        try:
            await web.TCPSite(site_runner, "0.0.0.0", port).start()
            await bot.runner.run(auto_end=False)  # a host of calls, until SIGTERM ends the bot
        finally:
            await site_runner.cleanup()
    finally:
        model.terminate()
        model.wait()


if __name__ == "__main__":
    logger.remove()
    logger.add(sys.stderr, level="INFO")
    asyncio.run(serve(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 0))
