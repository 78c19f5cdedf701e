"""The reference clients' conversation loop (faultlab/clients/driver.py) over a scripted transport:
no SDK, no socket; and each transport's reading of its API's messages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from faultlab.clients.driver import Connection, Heard, ReferenceClient, Refused
from faultlab.clients.naive import ResumeOnly
from faultlab.clients.options import parser_for
from faultlab.clients.realtime import Reconnect
from faultlab.events import EventWriter
from faultlab.scenarios.booking.conversation import Turn
from faultlab.scenarios.booking.script import ANSWERED, REFUSED, SCRIPT, UNANSWERED

ARGS = ["--commit", "50ms", "--ask-after", "10ms", "--quiet", "100ms", "--duration", "5s",
        "--retry-after", "50ms", "--give-up-after", "300ms"]


class Session:
    """One scripted connection: what the model says arrives in `inbox`."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[Heard | Exception] = asyncio.Queue()


class ScriptedModel:
    """A transport whose model books on the request and answers the question truthfully."""

    joiner = " "

    def __init__(self, resumable: bool = True, refuse: int = 0) -> None:
        self.resumable = resumable
        self.refuse = refuse  # how many connects to refuse (1011)
        self.idle = asyncio.Event()
        self.idle.set()
        self.sessions: list[Session] = []
        self.closed: list[Any] = []

    async def connect(self, handle: str | None) -> Connection:
        if self.refuse:
            self.refuse -= 1
            raise Refused(1011, "the old connection is still open")
        session = Session()
        self.sessions.append(session)
        return None, session

    async def messages(self, session: Any) -> AsyncIterator[Heard]:
        while True:
            item = await session.inbox.get()
            if isinstance(item, Exception):
                raise item
            yield item

    def why_lost(self, error: Exception) -> str:
        return f"gone: {error}"

    async def say(self, session: Any, turns: list[Turn], turn_complete: bool) -> None:
        said = [text for _, text in turns]
        if SCRIPT.ask in said:
            session.inbox.put_nowait(Heard("server_content.model_turn", output=True,
                                           speaking=True, text=["Yes,", "it's booked."]))
            session.inbox.put_nowait(Heard("server_content.turn_complete", speaking=False,
                                           turn_end=True))
        elif SCRIPT.say in said:
            session.inbox.put_nowait(Heard("tool_call", output=True, speaking=True, handle="h1",
                                           calls=[("c1", SCRIPT.tool, {"slot": "tomorrow 3pm"})]))
            session.inbox.put_nowait(Heard("server_content.turn_complete", speaking=False,
                                           turn_end=True))

    async def answer_call(self, session: Any, call_id: str, name: str,
                          response: dict[str, Any]) -> None:
        session.inbox.put_nowait(Heard("server_content.model_turn", output=True, speaking=True,
                                       text=["Booked."], audio=True, audio_s=0.5))
        session.inbox.put_nowait(Heard("server_content.turn_complete", speaking=False,
                                       turn_end=True))

    async def send_audio(self, session: Any, pcm: bytes) -> None:
        pass

    async def end_audio(self, session: Any) -> None:
        pass

    async def close(self, connection: Connection) -> None:
        self.closed.append(connection[1])


def converse(tmp_path: Path, transport: ScriptedModel, recovery: Any,
             *args: str) -> tuple[int, list[tuple[str, dict[str, Any]]]]:
    path = tmp_path / "events.jsonl"
    events = EventWriter(path)
    client = ReferenceClient(parser_for(None).parse_args([*ARGS, *args]), events, transport,
                             recovery)
    code = asyncio.run(client.run())
    events.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return code, [(line.pop("event"), line) for line in lines if line.pop("ts", True)]


def names(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [name for name, _ in events if name != "client.received"]


def test_a_healthy_conversation_books_answers_asks_and_leaves(tmp_path: Path) -> None:
    """The loop books on the tool call, answers it by its id once committed, asks, logs the
    answer (its pieces joined by the transport's joiner), leaves cleanly and exits 0."""
    transport = ScriptedModel()
    code, events = converse(tmp_path, transport, ResumeOnly())
    assert code == ANSWERED
    assert names(events) == [
        "client.connected", "client.tool_call", "backend.job", "backend.commit",
        "client.tool_response", "client.audio_start", "client.audio_end", "client.answer",
        "client.ask", "client.answer"]
    fields = dict(events)
    assert fields["client.tool_response"]["id"] == "c1"
    assert [f["text"] for n, f in events if n == "client.answer"] == ["Booked.", "Yes, it's booked."]
    assert transport.closed == transport.sessions


def test_a_refused_first_connection_is_client_refused_and_its_exit_code(tmp_path: Path) -> None:
    """A first connection the service refuses is client.refused with its code, and exit 2."""
    code, events = converse(tmp_path, ScriptedModel(refuse=1), ResumeOnly())
    assert code == REFUSED
    assert events[0] == ("client.refused", {"code": 1011,
                                            "reason": "the old connection is still open"})


def lose_on_the_answer(transport: ScriptedModel, refuse: int) -> None:
    """The path dies as the tool response goes out: the service refuses `refuse` connects."""
    answer = transport.answer_call

    async def lose(session: Any, call_id: str, name: str, response: dict[str, Any]) -> None:
        if transport.sessions.index(session) == 0:
            transport.refuse = refuse
            session.inbox.put_nowait(ConnectionResetError("reset"))
        await answer(session, call_id, name, response)

    transport.answer_call = lose  # type: ignore[method-assign]


def test_a_loss_is_resumed_with_the_last_handle_until_the_window_ends(tmp_path: Path) -> None:
    """Lost after the tool response, naive's recovery resumes until --give-up-after, every
    attempt refused, then gives up: exit 3, the user never told."""
    transport = ScriptedModel()
    lose_on_the_answer(transport, refuse=100)
    code, events = converse(tmp_path, transport, ResumeOnly())
    assert code == UNANSWERED
    seen = names(events)
    assert seen[seen.index("client.lost") - 1] == "client.tool_response"
    assert dict(events)["client.lost"] == {"why": "gone: reset"}
    attempts = seen.count("resume.attempt")
    assert attempts >= 2 and seen.count("resume.refused") == attempts
    assert seen[-1] == "resume.gave_up" and "client.ask" not in seen


def test_a_session_that_dies_with_its_connection_is_restored_anew(tmp_path: Path) -> None:
    """Without resumption, a recovering client connects again (a refusal retried), restores
    the new session with the request, the booking's status line and the question, and the user
    gets the answer there."""
    transport = ScriptedModel(resumable=False)
    lose_on_the_answer(transport, refuse=1)
    code, events = converse(tmp_path, transport, Reconnect(True))
    assert code == ANSWERED
    seen = names(events)
    assert seen[seen.index("client.lost"):] == [
        "client.lost", "recovery.attempt", "recovery.failed", "recovery.attempt",
        "recovery.new_session", "client.ask", "recovery.restored", "client.recovered",
        "client.answer"]
    assert dict(events)["recovery.restored"] == {"lines": 1, "asked": True}
    assert dict(events)["recovery.failed"]["error"].startswith("Refused: ")
    assert len(transport.sessions) == 2


def test_a_live_api_message_is_read_as_the_loop_hears_it() -> None:
    """naive.py reads a google-genai message: its kind, the calls, text and audio, the handle,
    the end of the turn; bookkeeping kinds are quiet."""
    from google.genai import types

    from faultlab.clients import naive

    turn = types.LiveServerMessage(server_content=types.LiveServerContent(
        model_turn=types.Content(parts=[types.Part(text="Booked."), types.Part(
            inline_data=types.Blob(data=b"\0" * 4800, mime_type="audio/pcm;rate=24000"))]),
        turn_complete=True))
    said = naive.heard(turn)
    assert (said.kind, said.text, said.audio, said.audio_s) == (
        "server_content.turn_complete+model_turn", ["Booked."], True, 0.1)
    assert (said.output, said.speaking, said.turn_end, said.quiet) == (True, False, True, False)
    call = naive.heard(types.LiveServerMessage(tool_call=types.LiveServerToolCall(
        function_calls=[types.FunctionCall(id="c1", name="book_slot", args={"slot": "3pm"})])))
    assert (call.kind, call.calls, call.speaking) == (
        "tool_call", [("c1", "book_slot", {"slot": "3pm"})], True)
    update = naive.heard(types.LiveServerMessage(
        session_resumption_update=types.LiveServerSessionResumptionUpdate(new_handle="h2")))
    assert (update.handle, update.quiet, update.output) == ("h2", True, False)


def test_a_realtime_event_is_read_as_the_loop_hears_it() -> None:
    """realtime.py reads an OpenAI Realtime event: a response's start and end (cancelled), a
    function call, a delta of text or audio, an in-band error; deltas are quiet."""
    from types import SimpleNamespace as Event

    from faultlab.clients import realtime

    assert realtime.heard(Event(type="response.created")).speaking is True
    done = realtime.heard(Event(type="response.done", response=Event(status="cancelled")))
    assert (done.speaking, done.turn_end, done.cancelled) == (False, True, True)
    call = realtime.heard(Event(type="response.function_call_arguments.done", call_id="c1",
                                name="book_slot", arguments='{"slot": "3pm"}'))
    assert (call.calls, call.output, call.quiet) == ([("c1", "book_slot", {"slot": "3pm"})],
                                                     True, False)
    audio = realtime.heard(Event(type="response.output_audio.delta", delta="A" * 64000))
    assert (audio.audio, audio.audio_s, audio.quiet) == (True, 1.0, True)
    text = realtime.heard(Event(type="response.output_text.delta", delta="Booked"))
    assert (text.text, text.output) == (["Booked"], True)
    error = realtime.heard(Event(type="error", error=Event(code="busy", message="later")))
    assert (error.error, error.speaking) == (("busy", "later"), False)
