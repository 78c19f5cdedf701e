"""live-probe: an unmodified google-genai client that says something and logs what comes back.

It reaches the service only through the environment (`GOOGLE_API_KEY`, `SSL_CERT_FILE`, the lab's
hosts file or `GOOGLE_GEMINI_BASE_URL`), sends its turns, and writes to `FAULTLAB_EVENTS`:
`client.connected`, `client.received` (the kind of every message, tool call ids and names),
`client.error` (the SDK's exception: type, close code, message), `client.no_answer` (a turn but the
last got no answer within `--listen`), `client.done`.

Exit codes: 0 listened to the end; 2 the connection failed or was closed under it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from faultlab.events import EventWriter
from faultlab.protocols.gemini import kind_of
from faultlab.units import parse_duration
from faultlab.vocabulary.session import (
    ClientConnected,
    ClientDone,
    ClientError,
    ClientNoAnswer,
    ClientReceived,
)


async def probe(args: argparse.Namespace, events: EventWriter) -> int:
    from google import genai
    from google.genai import errors, types

    tools: list[Any] = [types.Tool(function_declarations=[types.FunctionDeclaration(
        name=name, behavior=types.Behavior.NON_BLOCKING,
        parameters=types.Schema(type=types.Type.OBJECT,
                                properties={"slot": types.Schema(type=types.Type.STRING)}))])
        for name in args.tool]
    config = types.LiveConnectConfig(response_modalities=[args.modality], tools=tools or None)
    try:
        async with genai.Client().aio.live.connect(model=args.model, config=config) as session:
            events.announce(ClientConnected())

            async def one_turn() -> None:
                """Log what comes back until the model's turn ends (the SDK's iterator stops)."""
                async for message in session.receive():
                    fields: dict[str, Any] = {"kind": kind_of(message.model_dump(exclude_none=True))}
                    if message.tool_call and message.tool_call.function_calls:
                        fields["ids"] = [c.id for c in message.tool_call.function_calls]
                        fields["tools"] = [c.name for c in message.tool_call.function_calls]
                    events.announce(ClientReceived(**fields))

            async def listen() -> None:
                while True:
                    await one_turn()

            try:
                # A conversation: each turn but the last waits for the model's answer (the
                # emulator answers turns sent at once as one).
                for i, text in enumerate(args.say):
                    await session.send_client_content(turns=types.Content(
                        role="user", parts=[types.Part(text=text)]), turn_complete=True)
                    if i < len(args.say) - 1:
                        try:
                            await asyncio.wait_for(one_turn(), args.listen)
                        except TimeoutError:
                            events.announce(ClientNoAnswer(i + 1, args.listen))
                await asyncio.wait_for(listen(), args.listen)
            except TimeoutError:
                events.announce(ClientDone(listened_s=args.listen))
                return 0
    except errors.APIError as exc:
        events.announce(ClientError(type=type(exc).__name__, code=exc.code,
                                         message=str(exc)[:200]))
    except OSError as exc:
        events.announce(ClientError(type=type(exc).__name__, message=str(exc)[:200]))
    return 2


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--say", action="append", default=[],
                        help="a user turn (repeatable: each waits for the answer to the last)")
    parser.add_argument("--tool", action="append", default=[],
                        help="declare a NON_BLOCKING function with a `slot` argument")
    parser.add_argument("--listen", type=parse_duration, default=3.0,
                        help="how long to log what comes back, e.g. 3s")
    parser.add_argument("--model", default="gemini-3.8-live")
    parser.add_argument("--modality", default="TEXT", choices=["TEXT", "AUDIO"])
    events = EventWriter()
    code = asyncio.run(probe(parser.parse_args(), events))
    events.close()
    sys.exit(code)


if __name__ == "__main__":
    cli()
