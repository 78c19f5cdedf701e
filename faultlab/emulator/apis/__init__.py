"""The APIs the emulator serves, one `EmulatedApi` each: the protocol (faultlab.protocols), the
parser of its client frames and the encoder of its server frames, around one neutral core
(faultlab.emulator.messages). A personality names the API it is of (`Personality.protocol`).
"""

from __future__ import annotations

from faultlab.emulator.apis.base import EmulatedApi
from faultlab.emulator.apis.gemini import GEMINI_API
from faultlab.emulator.apis.openai import OPENAI_API

APIS: dict[str, EmulatedApi] = {api.protocol.name: api for api in (GEMINI_API, OPENAI_API)}

__all__ = ["APIS", "EmulatedApi"]
