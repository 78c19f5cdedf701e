"""An unmodified google-genai client for lab tests: one text turn, events to FAULTLAB_EVENTS.

It removes GOOGLE_GEMINI_BASE_URL first, so it reaches the service by its real name, which the
lab's hosts file maps to the emulator; trust comes from SSL_CERT_FILE alone.
"""

import asyncio
import os

from google import genai
from google.genai import types

from faultlab.events import EventWriter


async def main() -> None:
    os.environ.pop("GOOGLE_GEMINI_BASE_URL", None)
    events = EventWriter()
    client = genai.Client()
    config = types.LiveConnectConfig(response_modalities=["TEXT"],
                                     session_resumption=types.SessionResumptionConfig())
    async with client.aio.live.connect(model="gemini-3.8-live", config=config) as session:
        events.emit("client.connected")
        await session.send_client_content(
            turns=types.Content(role="user", parts=[types.Part(text="Hello from the lab")]),
            turn_complete=True)
        text = []
        async for message in session.receive():
            sc = message.server_content
            if sc and sc.model_turn and sc.model_turn.parts:
                text += [p.text for p in sc.model_turn.parts if p.text]
        events.emit("client.reply", text=" ".join(text))


asyncio.run(main())
