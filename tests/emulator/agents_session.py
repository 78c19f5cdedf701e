"""A real openai-agents RealtimeAgent against the emulator, run by the interpreter of its own venv
(`make install` makes `.venv-agents`: openai-agents pins websockets below 17, which faultlab's
emulator needs). It imports nothing of faultlab; tests/emulator/openai_clients/test_openai_agents.py
runs it and reads what it writes.

    agents_session.py text BASE OUT
    agents_session.py audio BASE OUT PCM   (PCM: 24 kHz 16-bit mono speech, then silence)

BASE is the emulator's OPENAI_BASE_URL: openai-agents reads no such variable, it connects to
`model_config["url"]` as given (agents/realtime/openai_realtime.py, connect()).

OUT gets JSON: the session's problems (errors, events it could not read), the server's raw
events, the function calls made, the tools' outputs, the history's messages and calls, and the
bytes of audio received.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents import function_tool
from agents.realtime import RealtimeAgent, RealtimeRunner
from agents.realtime.openai_realtime import DEFAULT_REALTIME_MODEL

TIMEOUT_S = 15
BOOK_INSTRUCTIONS = "You book appointment slots with the book_slot tool."
CHUNK_S = 0.04  # examples/realtime/cli/demo.py CHUNK_LENGTH_S
PACE = 0.1  # audio goes 10x faster than real time (the emulator runs at time scale 0.1)


class Events:
    """A RealtimeSession's events, pumped as they come."""

    def __init__(self, session: Any) -> None:
        self.events: list[Any] = []
        self._session = session
        self._new = asyncio.Event()
        self._task = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        async for event in self._session:
            self.events.append(event)
            self._new.set()

    async def until(self, match: Callable[[Any], bool], start: int = 0) -> int:
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                for i in range(start, len(self.events)):
                    if match(self.events[i]):
                        return i
                self._new.clear()
                await self._new.wait()

    def summary(self, calls: list[str]) -> dict[str, Any]:
        history = next((list(e.history) for e in reversed(self.events)
                        if e.type == "history_updated"), [])
        return {
            "problems": [f"session error: {e.error}" for e in self.events if e.type == "error"]
            + [f"model {e.data.type}: {e.data}" for e in self.events
               if e.type == "raw_model_event" and e.data.type in ("error", "exception")],
            "raw": [e.data.data for e in self.events
                    if e.type == "raw_model_event" and e.data.type == "raw_server_event"],
            "calls": calls,
            "tool_outputs": [e.output for e in self.events if e.type == "tool_end"],
            "said": [[item.role, [getattr(c, "text", None) or getattr(c, "transcript", None)
                                  for c in item.content]]
                     for item in history if item.type == "message"],
            "function_calls": [{"name": item.name, "output": item.output, "status": item.status}
                               for item in history if item.type == "function_call"],
            "audio_bytes": sum(len(e.audio.data) for e in self.events if e.type == "audio"),
        }


def spoke_after_call(history: list[Any]) -> bool:
    """Whether an assistant message with words follows a function call in the history."""
    calls = [i for i, item in enumerate(history) if item.type == "function_call"]
    return bool(calls) and any(
        item.type == "message" and item.role == "assistant"
        and any(getattr(c, "text", None) for c in item.content)
        for item in history[calls[-1] + 1:])


async def text(url: str) -> dict[str, Any]:
    """A text turn, then a booking: the agent calls its function tool and speaks of it."""
    calls: list[str] = []

    @function_tool
    def book_slot(slot: str) -> str:
        """Book an appointment slot."""
        calls.append(slot)
        return json.dumps({"status": "booked", "slot": slot})

    agent = RealtimeAgent(name="Booker", instructions=BOOK_INSTRUCTIONS, tools=[book_slot])
    runner = RealtimeRunner(agent, config={"model_settings": {
        "model_name": "gpt-realtime", "modalities": ["text"]}})
    async with await runner.run(model_config={"url": url}) as session:
        events = Events(session)
        await session.send_message("Hello there")
        first = await events.until(lambda e: e.type == "agent_end")
        await session.send_message("Book me the 3pm slot tomorrow, please.")
        # Until the model has spoken after its call: the call's own response ends (agent_end)
        # before or after the tool does, as the machine's load has it.
        await events.until(lambda e: e.type == "history_updated" and spoke_after_call(e.history),
                           first + 1)
        return events.summary(calls)


async def audio(url: str, pcm: bytes) -> dict[str, Any]:
    """The agent's default settings (audio out, semantic VAD, input transcription) hear a
    spoken turn in 40 ms chunks and answer in audio."""
    runner = RealtimeRunner(RealtimeAgent(name="Listener", instructions="Answer briefly."))
    async with await runner.run(model_config={"url": url}) as session:
        events = Events(session)
        size = int(24000 * CHUNK_S) * 2
        for start in range(0, len(pcm), size):
            await session.send_audio(pcm[start:start + size])
            await asyncio.sleep(CHUNK_S * PACE)
        await events.until(lambda e: e.type == "audio_end")
        await events.until(lambda e: e.type == "agent_end")
        return events.summary([])


def url_of(base: str, model: str) -> str:
    return f"{base.replace('https://', 'wss://', 1)}/realtime?model={model}"


def main() -> None:
    scenario, base, out = sys.argv[1:4]
    # Each with the model its session.update names.
    got = (asyncio.run(text(url_of(base, "gpt-realtime"))) if scenario == "text"
           else asyncio.run(audio(url_of(base, DEFAULT_REALTIME_MODEL),
                                  Path(sys.argv[4]).read_bytes())))
    Path(out).write_text(json.dumps(got, default=str))


if __name__ == "__main__":
    main()
