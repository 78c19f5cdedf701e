"""naive: the field study's plain client: one session, a resume loop, the old call id answered;
and the Live API's transport (google-genai) that it, field-recovery and racing-recovery run the
conversation loop (faultlab/clients/driver.py) on.

The loop runs the booking conversation (faultlab/scenarios/booking/conversation.py): it asks for the
booking (typed with `--say`, or spoken into the lab's virtual microphone with `--mic`), hands each
tool call to the booking backend, and answers the call (by its id, on whatever connection is up)
when the backend commits. It notices a dead path with its own pings (faultlab/clients/liveness.py:
one every `--ping-interval`; lost when neither a frame nor a pong came for `--lost-after`) or the
SDK's error, then resumes with the last handle: first after `--first-resume`, then `--retry-after`
after each refusal, until one works or `--give-up-after` has passed. Once every booking has
committed (or, with none, once the model has replied) it asks `--ask`, logs the answer, and leaves
when the model has been quiet for `--quiet`. It never opens a new session: when resuming fails,
the user is never told. (field-recovery and racing-recovery are this client with another way to
recover: `Recovery`.)

Events: the session's records (faultlab/vocabulary/session.py; `faultlab events schema`), the
backend's backend.* and, with `--mic`, the uplink's uplink.*.
A lost connection is aborted, unless `--close-old-after` or `--close-old-on-return` keep it to
close it cleanly later (client.old_back, client.old_close, client.old_closed with the echo).
Exit codes: 0 answered; 2 the first connection was refused (client.refused); 3 gave up resuming,
or never answered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

from faultlab.clients import uplink
from faultlab.clients.driver import Connection, Heard, Recovery, ReferenceClient, Refused
from faultlab.clients.options import main, parser_for
from faultlab.events import EventWriter
from faultlab.protocols.gemini import kind_of
from faultlab.scenarios.booking.conversation import Turn
from faultlab.scenarios.booking.script import SCRIPT

# The kinds that say nothing a run looks at (the session's bookkeeping), left out of
# client.received.
QUIET_KINDS = ("session_resumption_update", "usage_metadata")
# The Live API speaks 16-bit mono PCM at 24 kHz (faultlab.speech.RATE_OUT, not imported: it
# brings numpy into the client's start-up).
OUTPUT_RATE = 24000


def live_schema(schema: dict[str, Any]) -> Any:
    """A JSON Schema (conversation.json's) as google-genai's Schema (its types upper-case)."""
    from google.genai import types

    properties = schema.get("properties")
    return types.Schema(type=types.Type(str(schema["type"]).upper()),
                        properties={name: live_schema(inner) for name, inner in properties.items()}
                        if properties is not None else None)


class LiveTransport:
    """The Live API on google-genai's `client.aio.live`: sessions resumed with a handle."""

    resumable = True
    joiner = " "

    def __init__(self, args: argparse.Namespace) -> None:
        from google import genai

        self.args = args
        self.client = genai.Client()
        self.idle = asyncio.Event()
        self.idle.set()

    def _config(self, handle: str | None) -> Any:
        from google.genai import types

        audio = self.args.audio or self.args.mic
        return types.LiveConnectConfig(
            response_modalities=[types.Modality.AUDIO if audio else types.Modality.TEXT],
            output_audio_transcription=types.AudioTranscriptionConfig() if audio else None,
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
                name=SCRIPT.tool, behavior=types.Behavior(SCRIPT.tool_behavior),
                parameters=live_schema(SCRIPT.tool_parameters))])],
            session_resumption=types.SessionResumptionConfig(handle=handle))

    async def connect(self, handle: str | None) -> Connection:
        from google.genai import errors

        stack = AsyncExitStack()
        try:
            session = await stack.enter_async_context(
                self.client.aio.live.connect(model=self.args.model, config=self._config(handle)))
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(stack.aclose(), 1.0)
            if isinstance(exc, errors.APIError):
                raise Refused(exc.code, str(exc)) from exc
            raise
        return stack, session

    async def messages(self, session: Any) -> AsyncIterator[Heard]:
        while True:
            async for message in session.receive():
                yield heard(message)

    def why_lost(self, error: Exception) -> str:
        from google.genai import errors

        if isinstance(error, errors.APIError):
            return f"{error.code} {str(error)[:80]}"
        return type(error).__name__

    async def say(self, session: Any, turns: list[Turn], turn_complete: bool) -> None:
        from google.genai import types

        await session.send_client_content(turns=[
            types.Content(role=role, parts=[types.Part(text=text)]) for role, text in turns],
            turn_complete=turn_complete)

    async def answer_call(self, session: Any, call_id: str, name: str,
                          response: dict[str, Any]) -> None:
        from google.genai import types

        await session.send_tool_response(function_responses=[
            types.FunctionResponse(id=call_id, name=name, response=response)])

    async def send_audio(self, session: Any, pcm: bytes) -> None:
        from google.genai import types

        await session.send_realtime_input(
            audio=types.Blob(data=pcm, mime_type=f"audio/pcm;rate={uplink.RATE}"))

    async def end_audio(self, session: Any) -> None:
        await session.send_realtime_input(audio_stream_end=True)

    async def close(self, connection: Connection) -> None:
        stack, _ = connection
        if stack is not None:
            await stack.aclose()


def heard(message: Any) -> Heard:
    """A Live API message (google-genai's LiveServerMessage), in the loop's words."""
    kind = kind_of(message.model_dump(exclude_none=True))
    update = message.session_resumption_update
    content = message.server_content
    parts = content.model_turn.parts if content and content.model_turn else None
    output = bool(parts or message.tool_call)
    calls = message.tool_call.function_calls if message.tool_call else None
    said = Heard(kind, quiet=kind in QUIET_KINDS, output=output,
                 handle=update.new_handle if update else None,
                 calls=[(call.id, call.name, dict(call.args or {})) for call in calls or []],
                 speaking=True if output else None)
    for part in parts or []:
        if part.text:
            said.text.append(part.text)
        if part.inline_data and part.inline_data.data:
            said.audio = True
            said.audio_s += len(part.inline_data.data) / 2 / OUTPUT_RATE
    if content and content.output_transcription and content.output_transcription.text:
        said.text.append(content.output_transcription.text)
    if content and content.turn_complete:
        said.speaking, said.turn_end = False, True
    return said


class ResumeOnly(Recovery):
    """naive's recovery: resume with the last handle until `--give-up-after`, nothing else."""

    async def recover(self, client: ReferenceClient) -> bool:
        connection = await client.resume_attempts(time.monotonic(), client.args.give_up_after)
        if connection is None:
            return False
        client.install(*connection)
        return True


def naive(args: argparse.Namespace, events: EventWriter) -> ReferenceClient:
    return ReferenceClient(args, events, LiveTransport(args), ResumeOnly())


def cli() -> None:
    main(naive, parser_for(__doc__))


if __name__ == "__main__":
    cli()
