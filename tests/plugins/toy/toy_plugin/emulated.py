"""The toy API in faultlab's emulator: its client frames parsed into the core's neutral
messages, the core's moves spelled as its server frames, and its one personality."""

from __future__ import annotations

import json
from random import Random

from faultlab.emulator.apis.base import EmulatedApi
from faultlab.emulator.messages import (
    Call,
    Encoder,
    Frame,
    Other,
    Parsed,
    Setup,
    Usage,
    UserContent,
    Vad,
)
from faultlab.emulator.personality import Personality, ServedModel
from faultlab.emulator.refusals import ProtocolError
from toy_plugin.protocol import TOY


class ToyEncoder(Encoder):
    def call_id(self, bits: int) -> str:
        return f"call-{bits:x}"

    def setup_complete(self, session_id: str, setup: Setup) -> list[Frame]:
        return [{"toy": "ready", "session": session_id}]

    def resumption_update(self, handle: str, consumed: int | None) -> list[Frame]:
        return []

    def go_away(self, time_left_s: float) -> list[Frame]:
        return []

    def speech_started(self) -> list[Frame]:
        return []

    def input_transcription(self, text: str) -> list[Frame]:
        return []

    def function_calls(self, calls: list[Call]) -> list[Frame]:
        return [{"toy": "call", "name": c.name} for c in calls]

    def text(self, text: str) -> list[Frame]:
        return [{"toy": "reply", "text": text}]

    def output_transcription(self, text: str) -> list[Frame]:
        return []

    def audio(self, pcm: bytes, rate: int) -> list[Frame]:
        return []

    def generation_complete(self, usage: Usage) -> list[Frame]:
        return []

    def turn_complete(self, usage: Usage | None) -> list[Frame]:
        return [{"toy": "done"}]

    def interrupted(self, generated: bool, by_client: bool) -> list[Frame]:
        return []


class ToyApi(EmulatedApi):
    protocol = TOY

    def parse(self, frame: str | bytes) -> Parsed:
        try:
            message = json.loads(frame)
            kind = message["toy"]
        except (ValueError, TypeError, KeyError):
            raise ProtocolError("not a toy message", 1007) from None
        if kind == "hello":
            return Parsed(Setup(model=str(message.get("model", "")), modalities=("TEXT",),
                                functions=(), resumption=False, handle=None, transparent=False,
                                vad=Vad(disabled=True), input_transcription=False,
                                output_transcription=False, system_instruction=""), kind, message)
        if kind == "say":
            return Parsed(UserContent(turns=(("user", str(message.get("text", ""))),),
                                      turn_complete=True), kind, message)
        return Parsed(Other(), kind, message)

    def encoder(self, dialect: str, personality: Personality, rng: Random) -> Encoder:
        return ToyEncoder()

    def model_id(self, model: str) -> str | None:
        return model or None

    def lifetime_over(self, personality: Personality) -> tuple[int, str]:
        return 1000, "time is up"


TOY_API = ToyApi()
PERSONALITIES = (
    Personality(name="toy-1", protocol="toy", api="echo",
                models=(ServedModel(pattern="toy-*", modalities=("TEXT",)),),
                setup_complete_s=(0.01, 0.02), reply_s=(0.05, 0.1)),
)
