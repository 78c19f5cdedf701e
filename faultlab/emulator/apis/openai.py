"""OpenAI Realtime (the GA protocol of 2025-08) in the emulator: its client events parsed
(`openai_parse`), the core's moves spelled as its server events (`openai_encode`), and how a
connection opens, errs and ends (docs/openai-realtime.md).

A connection is a session: it opens with the request (`?model=`), `session.created` first (O2),
and nothing survives it (no resumption, O3). Errors are told in-band by an `error` event and the
socket stays open, but for a fatal one (an unknown model, O4; the beta header, O5), which closes
4000 with `<type>.<code>` as the reason (O6).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from random import Random
from urllib.parse import parse_qs, urlsplit

from faultlab.emulator.apis.base import EmulatedApi
from faultlab.emulator.apis.openai_encode import ERROR_TYPE, OpenAIEncoder
from faultlab.emulator.apis.openai_parse import DEFAULT_VAD, parse_event
from faultlab.emulator.messages import Encoder, Parsed, Setup
from faultlab.emulator.personality import Personality
from faultlab.emulator.refusals import ProtocolError
from faultlab.protocols.openai import OPENAI

MODEL_ID = re.compile(r"^[A-Za-z0-9._-]+$")
SESSION_EXPIRED = "Your session hit the maximum duration of {minutes:g} minutes."
BETA_REFUSED = ("The Realtime Beta API is no longer supported. Please use /v1/realtime for the GA "
                "API.")


class OpenAIApi(EmulatedApi):
    protocol = OPENAI

    def parse(self, frame: str | bytes) -> Parsed:
        return parse_event(frame)

    def encoder(self, dialect: str, personality: Personality, rng: Random) -> Encoder:
        return OpenAIEncoder(Random(rng.getrandbits(64)), personality)

    def opening(self, path: str, headers: Mapping[str, str]) -> Setup | None:
        if "realtime=v1" in (headers.get("openai-beta") or ""):
            # The beta protocol: retired in 2026 (until then the header chose it); the service
            # opens the WebSocket, says so, and closes 4000.
            raise ProtocolError(BETA_REFUSED, error_code="beta_api_shape_disabled", fatal=True)
        model = parse_qs(urlsplit(path).query).get("model", [""])[0]
        return Setup(model=model, modalities=("AUDIO",), functions=(), resumption=False,
                     handle=None, transparent=False, vad=DEFAULT_VAD, input_transcription=False,
                     output_transcription=True, system_instruction="")

    def model_id(self, model: str) -> str | None:
        return model if MODEL_ID.match(model) else None

    def closes_on(self, error: ProtocolError) -> tuple[int, str] | None:
        # O6, as users of the service reported it: a fatal error's event, then 4000 "<type>.<code>".
        return (4000, f"{ERROR_TYPE}.{error.error_code}") if error.fatal else None

    def lifetime_over(self, personality: Personality) -> tuple[int, str]:
        minutes = (personality.connection_lifetime_s or 3600) / 60
        return 1001, SESSION_EXPIRED.format(minutes=minutes)


OPENAI_API = OpenAIApi()
