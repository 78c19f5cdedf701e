"""LiveKit Agents' OpenAI RealtimeModel, unmodified, against the emulator, run by the interpreter of
its own venv (`make install` makes `.venv-livekit`). It imports nothing of faultlab;
tests/emulator/test_openai_public_clients.py runs it and reads what it writes.

    livekit_session.py BASE OUT

BASE is the emulator's OPENAI_BASE_URL, given as the model's `base_url` (it would read
OPENAI_BASE_URL itself too); process_base_url makes the wss://.../v1/realtime?model= URL of it
(livekit/agents/llm/_realtime/openai.py). The socket is opened by aiohttp's ws_connect on the
ClientSession given as `http_session`, so that no job context is needed (without one,
RealtimeModel._ensure_http_session falls back to a ClientSession of its own); aiohttp's default TLS
context is ssl.create_default_context(), so the emulator's CA comes from SSL_CERT_FILE.

No LiveKit server or room: an AgentSession started with no room runs the agent as LiveKit's own
tests do, text in by `session.run(user_input=...)` (generate_reply(user_input=...): the user's
message through the realtime session's update_chat_ctx, then response.create), the function tool
run by the agent's activity and its output sent back, and the reply generated after it.

OUT gets JSON: each run's events (messages, function calls, their outputs), the history at the
end, the calls the tool got, and the problems: the session's errors and LiveKit's own warnings
and errors (its logging). The traffic itself is on the emulator's tape.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

import aiohttp
from livekit import rtc
from livekit.agents import Agent, AgentSession, function_tool, io
from livekit.plugins.openai.realtime import RealtimeModel

TIMEOUT_S = 15
BOOK_INSTRUCTIONS = "You book appointment slots with the book_slot tool."
BOOKING = "Book me the 3pm slot tomorrow, please."
RATE = 24000
CHUNK = RATE * 2 // 50  # 20 ms of 16-bit mono
PACE = 0.1  # audio goes 10x faster than real time (the emulator runs at time scale 0.1)


class Problems(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.found.append(f"livekit log: {record.levelname} {record.name}: {record.getMessage()}")


class Booker(Agent):
    def __init__(self) -> None:
        super().__init__(instructions=BOOK_INSTRUCTIONS)
        self.calls: list[str] = []

    @function_tool
    async def book_slot(self, slot: str) -> str:
        """Book an appointment slot."""
        self.calls.append(slot)
        return json.dumps({"status": "booked", "slot": slot})


def described(item: Any) -> list[Any]:
    if item.type == "message":
        return ["message", item.role, item.text_content]
    if item.type == "function_call":
        return ["function_call", item.name, item.arguments]
    if item.type == "function_call_output":
        return ["function_call_output", item.name, item.output]
    return [item.type]


class Microphone(io.AudioInput):
    """The session's audio input, as a room's track would feed it: 20 ms frames, as they come,
    then silence, the microphone staying open."""

    def __init__(self, pcm: bytes) -> None:
        super().__init__(label="microphone")
        self._pcm = pcm
        self._at = 0

    async def __anext__(self) -> rtc.AudioFrame:
        await asyncio.sleep(0.02 * PACE)
        chunk = self._pcm[self._at:self._at + CHUNK].ljust(CHUNK, b"\0")
        self._at += CHUNK
        return rtc.AudioFrame(chunk, RATE, 1, CHUNK // 2)


async def run(base: str, turns: Any) -> dict[str, Any]:
    """An AgentSession with the Booker and the RealtimeModel, through `turns(session, agent)`,
    which returns each run's events."""
    problems = Problems()
    logging.getLogger("livekit").addHandler(problems)
    errors: list[str] = []
    runs: list[list[list[Any]]] = []
    agent = Booker()
    async with aiohttp.ClientSession() as http:
        model = RealtimeModel(base_url=base, api_key="test-key-not-a-secret", http_session=http)
        async with AgentSession(llm=model) as session:
            session.on("error", lambda event: errors.append(f"session error: {event.error!r}"))
            try:
                async with asyncio.timeout(TIMEOUT_S):
                    runs = await turns(session, agent)
            except TimeoutError:
                errors.append(f"no answer within {TIMEOUT_S} s")
            history = [described(item) for item in session.history.items]
        await model.aclose()
    return {"problems": errors + problems.found, "runs": runs, "history": history,
            "calls": agent.calls}


async def text(session: AgentSession, agent: Booker) -> list[list[list[Any]]]:
    """Typed turns: session.run(user_input=...), as LiveKit's own tests drive an agent."""
    await session.start(agent)
    runs = []
    for said in ("Hello there", BOOKING):
        result = await session.run(user_input=said)
        runs.append([described(event.item) for event in result.events])
    return runs


def audio(pcm: bytes) -> Any:
    async def turns(session: AgentSession, agent: Booker) -> list[list[list[Any]]]:
        """A spoken booking: the microphone's audio pushed to the realtime session, the turn
        ended by the server's VAD, the transcript the user's message; then the tool's call and
        output and the reply, in the history."""
        answered = asyncio.Event()
        session.input.audio = Microphone(pcm)
        session.on("conversation_item_added", lambda event: answered.set() if agent.calls and (
            event.item.type == "message" and event.item.role == "assistant") else None)
        await session.start(agent)
        await answered.wait()
        return []
    return turns


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    scenario, base, out = sys.argv[1:4]
    turns = text if scenario == "text" else audio(Path(sys.argv[4]).read_bytes())
    Path(out).write_text(json.dumps(asyncio.run(run(base, turns)), default=str))
