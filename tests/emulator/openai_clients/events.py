"""What the public OpenAI Realtime clients' tests share: the server's events as JSON, read up to
one that matters, picked out, and validated against the openai SDK's own types; the findings of
a test, reported together; audio as the clients send it."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
import pytest
from openai.types.realtime import RealtimeServerEvent
from pydantic import Field, TypeAdapter, ValidationError

MODEL = "gpt-realtime"
TIMEOUT = 15
RATE = 24000
Event = dict[str, Any]
SERVER_EVENT: TypeAdapter[Any] = TypeAdapter(
    Annotated[RealtimeServerEvent, Field(discriminator="type")])
BOOK_INSTRUCTIONS = "You book appointment slots with the book_slot tool."
BOOKED = "Done: your slot tomorrow at 3pm is booked."
# Audio is sent ten times faster than real time, as the emulator runs at time scale 0.1.
PACE = 0.1


class Findings:
    """What a test found wrong, reported together."""

    def __init__(self) -> None:
        self.wrong: list[str] = []

    def check(self, ok: object, what: str) -> None:
        if not ok:
            self.wrong.append(what)

    def done(self) -> None:
        if self.wrong:
            pytest.fail("\n".join(map(str, self.wrong)), pytrace=False)


async def read_until(conn: Any, stop: str | Callable[[Event], bool],
                     seen: list[Event] | None = None) -> list[Event]:
    """The server's events, as JSON, up to and with the first that `stop` names or matches."""
    out: list[Event] = []
    try:
        async with asyncio.timeout(TIMEOUT):
            while True:
                event = json.loads(await conn.recv_bytes())
                out.append(event)
                if seen is not None:
                    seen.append(event)
                if event["type"] == stop if isinstance(stop, str) else stop(event):
                    return out
    except TimeoutError:
        raise AssertionError(f"nothing matching {stop!r} within {TIMEOUT} s, after "
                             f"{[e['type'] for e in out]}") from None


def of(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e["type"] == kind]


def index(events: list[Event], match: Callable[[Event], bool]) -> int:
    """The position of the first event that matches (len(events): none)."""
    return next((i for i, e in enumerate(events) if match(e)), len(events))


def kind_is(kind: str, **fields: Any) -> Callable[[Event], bool]:
    return lambda e: e["type"] == kind and all(field_at(e, k) == v for k, v in fields.items())


MISSING = object()


def field_at(event: Event, path: str) -> Any:
    value: Any = event
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return MISSING
        value = value[key]
    return value


def sdk_problems(events: list[Event]) -> list[str]:
    """Events the SDK's types refuse, validated as openai-agents does (it eases only a null
    previous_item_id: openai_realtime.py, _handle_ws_event)."""
    out = []
    for event in events:
        if "previous_item_id" in event and event["previous_item_id"] is None:
            event = {**event, "previous_item_id": ""}
        try:
            SERVER_EVENT.validate_python(event)
        except ValidationError as exc:
            out.append(f"{event['type']}: the SDK's types refuse it: "
                       f"{str(exc).splitlines()[1:3]}")
    return out


def b64(pcm: bytes) -> str:
    return base64.b64encode(pcm).decode()


def silence(seconds: float) -> bytes:
    return np.zeros(int(RATE * seconds), dtype="<i2").tobytes()


def chunks(pcm: bytes, seconds: float) -> list[bytes]:
    size = int(RATE * seconds) * 2
    return [pcm[i:i + size] for i in range(0, len(pcm), size)]


def transcript(events: list[Event], response_id: str | None = None) -> str:
    return "".join(e["delta"] for e in of(events, "response.output_audio_transcript.delta")
                   if response_id is None or e["response_id"] == response_id)


def audio_bytes(events: list[Event]) -> int:
    return sum(len(base64.b64decode(e["delta"])) for e in of(events, "response.output_audio.delta"))
