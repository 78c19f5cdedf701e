"""The greeting pack's client for lab tests: says hello and logs `client.greeting` when the model
greets back (an unmodified google-genai client; events to FAULTLAB_EVENTS)."""

import asyncio
import os

from google import genai
from google.genai import types

from faultlab.events import EventWriter


async def main() -> None:
    os.environ.pop("GOOGLE_GEMINI_BASE_URL", None)  # the real name, mapped to the emulator
    events = EventWriter()
    config = types.LiveConnectConfig(response_modalities=["TEXT"])
    async with genai.Client().aio.live.connect(model="gemini-3.8-live", config=config) as session:
        await session.send_client_content(
            turns=types.Content(role="user", parts=[types.Part(text="Hello there")]),
            turn_complete=True)
        text = []
        async for message in session.receive():
            sc = message.server_content
            if sc and sc.model_turn and sc.model_turn.parts:
                text += [p.text for p in sc.model_turn.parts if p.text]
    reply = " ".join(text)
    events.emit("client.reply", text=reply)
    if reply.startswith("Hello"):
        events.emit("client.greeting", text=reply)
    events.close()


asyncio.run(main())
