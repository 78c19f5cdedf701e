"""Gemini Live in the emulator: its client frames parsed (`gemini_parse`) and its server frames
spelled, as the Developer API and Vertex send them."""

from __future__ import annotations

import base64
import re
from random import Random

from faultlab.emulator.apis.base import EmulatedApi
from faultlab.emulator.apis.gemini_parse import parse_frame
from faultlab.emulator.apis.gemini_quirks import GeminiQuirks
from faultlab.emulator.messages import Call, Encoder, Frame, Parsed, Setup, Usage
from faultlab.emulator.personality import Personality
from faultlab.emulator.schema import client_message
from faultlab.protocols.gemini import GEMINI

DEADLINE = "Deadline expired before operation could complete."
# Developer API `models/<id>`; Vertex `publishers/google/models/<id>`, optionally under
# `projects/<p>/locations/<l>/`.
MODEL_NAME = re.compile(
    r"^(models/|(projects/[^/]+/locations/[^/]+/)?publishers/[^/]+/models/)[A-Za-z0-9._-]+$")


class GeminiEncoder(Encoder):
    def __init__(self, dialect: str, session_id_in_setup_complete: bool) -> None:
        self.dialect = dialect
        self.session_id_in_setup_complete = session_id_in_setup_complete

    def call_id(self, bits: int) -> str:
        return f"function-call-{bits:016x}"

    def setup_complete(self, session_id: str, setup: Setup) -> list[Frame]:
        # S1: Vertex says which session it is; the Developer API says nothing.
        complete = {"sessionId": session_id} if self.session_id_in_setup_complete else {}
        return [{"setupComplete": complete}]

    def resumption_update(self, handle: str, consumed: int | None) -> list[Frame]:
        update: Frame = {"newHandle": handle, "resumable": True}
        if consumed is not None:
            update["lastConsumedClientMessageIndex"] = str(consumed)
        return [{"sessionResumptionUpdate": update}]

    def go_away(self, time_left_s: float) -> list[Frame]:
        return [{"goAway": {"timeLeft": f"{time_left_s:g}s"}}]

    def speech_started(self) -> list[Frame]:
        return [{"voiceActivity": {"voiceActivityType": "ACTIVITY_START"}}]

    def input_transcription(self, text: str) -> list[Frame]:
        return [{"serverContent": {"inputTranscription": {"text": text, "finished": True}}}]

    def function_calls(self, calls: list[Call]) -> list[Frame]:
        return [{"toolCall": {"functionCalls": [
            {"id": c.id, "name": c.name, "args": dict(c.args)} for c in calls]}}]

    def text(self, text: str) -> list[Frame]:
        return [{"serverContent": {"modelTurn": {"role": "model", "parts": [{"text": text}]}}}]

    def output_transcription(self, text: str) -> list[Frame]:
        return [{"serverContent": {"outputTranscription": {"text": text}}}]

    def audio(self, pcm: bytes, rate: int) -> list[Frame]:
        return [{"serverContent": {"modelTurn": {"role": "model", "parts": [{"inlineData": {
            "mimeType": f"audio/pcm;rate={rate}", "data": base64.b64encode(pcm).decode()}}]}}}]

    def generation_complete(self, usage: Usage) -> list[Frame]:
        return [{"serverContent": {"generationComplete": True}}]

    def turn_complete(self, usage: Usage | None) -> list[Frame]:
        if usage is None:
            return [{"serverContent": {"turnComplete": True}}]
        counts: Frame = {"promptTokenCount": usage.prompt,
                         "totalTokenCount": usage.prompt + usage.response}
        counts["candidatesTokenCount" if self.dialect == "vertex" else "responseTokenCount"] = \
            usage.response
        # The turn's usage rides on its turnComplete (frameworks read it there).
        return [{"serverContent": {"turnComplete": True}, "usageMetadata": counts}]

    def interrupted(self, generated: bool, by_client: bool) -> list[Frame]:
        return [{"serverContent": {"interrupted": True}}]


class GeminiApi(EmulatedApi):
    protocol = GEMINI

    def parse(self, frame: str | bytes) -> Parsed:
        return parse_frame(frame)

    def prepare(self) -> None:
        client_message()  # the SDK's field tree: from the cache, or a second of importing the SDK

    def encoder(self, dialect: str, personality: Personality, rng: Random) -> Encoder:
        quirks = GeminiQuirks.model_validate(personality.quirks)
        return GeminiEncoder(dialect, quirks.session_id_in_setup_complete)

    def model_id(self, model: str) -> str | None:
        if not MODEL_NAME.match(model):
            return None
        return model.rsplit("models/", 1)[-1]

    def lifetime_over(self, personality: Personality) -> tuple[int, str]:
        return 1011, DEADLINE


GEMINI_API = GeminiApi()
