"""A connection ends in the emulator's view when the client's close frame arrives, after every
message sent before it, not when TCP ends a round trip and a FIN later (on a lossy path, each a
packet a retransmission timeout can hold back: the delivered-audio ratio's end)."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from websockets.client import ClientProtocol
from websockets.frames import Close, Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from faultlab.emulator.personality import personality_from
from faultlab.emulator.server import EmulatorServer
from faultlab.emulator.session import Emulator

DEV = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
SETUP = {"setup": {"model": "models/gemini-3.8-live"}}
AUDIO = {"realtimeInput": {"audio": {"data": base64.b64encode(bytes(3200)).decode(),
                                     "mimeType": "audio/pcm;rate=16000"}}}
FRAMES = 5


def masked(opcode: Opcode, data: bytes) -> bytes:
    return Frame(opcode, data).serialize(mask=True, extensions=[])


async def close_with_tcp_held_open() -> tuple[list[tuple[str, dict[str, Any]]], list[State]]:
    """Send a setup, FRAMES audio messages and a close frame in one write, then hold the TCP
    connection open (no FIN): the emulator's events, and the server connection's state when it
    told the disconnect."""
    told: list[tuple[str, dict[str, Any]]] = []
    states: list[State] = []
    disconnected = asyncio.Event()

    def emit(name: str, **fields: Any) -> None:
        told.append((name, fields))
        if name == "emulator.disconnect":
            states.extend(ws.protocol.state for ws in server._handlers)
            disconnected.set()

    server = EmulatorServer(Emulator(personality_from("gemini-dev-2026-10"), emit=emit), None)
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        client = ClientProtocol(parse_uri(f"ws://localhost:{server.port}{DEV}?key=not-a-key"))
        client.send_request(client.connect())
        writer.write(b"".join(client.data_to_send()))
        while not (events := client.events_received()):
            client.receive_data(await reader.read(4096))
        assert isinstance(events[0], Response) and events[0].status_code == 101
        writer.write(b"".join([masked(Opcode.TEXT, json.dumps(SETUP).encode()),
                               *(masked(Opcode.TEXT, json.dumps(AUDIO).encode())
                                 for _ in range(FRAMES)),
                               masked(Opcode.CLOSE, Close(1000, "").serialize())]))
        await asyncio.wait_for(disconnected.wait(), 10)
        writer.close()
    return told, states


def test_the_close_frame_ends_the_connection_after_the_messages_before_it() -> None:
    told, states = asyncio.run(close_with_tcp_held_open())
    names = [name for name, _ in told]
    audio = [i for i, (name, fields) in enumerate(told)
             if name == "emulator.frame" and fields.get("audio_s")]
    assert len(audio) == FRAMES  # none lost to the early end
    assert max(audio) < names.index("emulator.disconnect")
    # Told while TCP was still up: websockets was waiting for the client's FIN.
    assert states == [State.CLOSING]
