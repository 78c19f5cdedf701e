"""An SDK client for lab tests: asks for the booking and logs every message it receives.

    python sdk_booking_client.py LISTEN_SECONDS
"""

import asyncio
import os
import sys

from google import genai
from google.genai import types

from faultlab.events import EventWriter

BOOK_SLOT = types.Tool(function_declarations=[types.FunctionDeclaration(
    name="book_slot", behavior=types.Behavior.NON_BLOCKING,
    parameters=types.Schema(type=types.Type.OBJECT,
                            properties={"slot": types.Schema(type=types.Type.STRING)}))])


def kind(message: types.LiveServerMessage) -> str:
    data = message.model_dump(exclude_none=True)
    data.pop("usage_metadata", None) if len(data) > 1 else None
    return next(iter(data), "empty")


async def listen(session: object, events: EventWriter) -> None:
    while True:
        async for message in session.receive():  # type: ignore[attr-defined]
            events.emit("client.received", kind=kind(message))


async def main(seconds: float) -> None:
    os.environ.pop("GOOGLE_GEMINI_BASE_URL", None)
    events = EventWriter()
    config = types.LiveConnectConfig(response_modalities=["TEXT"], tools=[BOOK_SLOT])
    async with genai.Client().aio.live.connect(model="gemini-3.8-live", config=config) as session:
        events.emit("client.connected")
        await session.send_client_content(turns=types.Content(role="user", parts=[
            types.Part(text="Book me the 3pm slot tomorrow, please.")]), turn_complete=True)
        try:
            await asyncio.wait_for(listen(session, events), seconds)
        except TimeoutError:
            events.emit("client.listened", seconds=seconds)
            # Leave without the close handshake: through a frozen path it would wait 10 s.
            os._exit(0)


asyncio.run(main(float(sys.argv[1])))
