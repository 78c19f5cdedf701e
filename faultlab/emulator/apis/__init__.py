"""The APIs the emulator serves, one `EmulatedApi` each: the protocol (faultlab.protocols), the
parser of its client frames and the encoder of its server frames, around one neutral core
(faultlab.emulator.messages). A personality names the API it is of (`Personality.protocol`);
each API's plugin (`faultlab.apis`) brings its `EmulatedApi`, imported when first served.
"""

from __future__ import annotations

from collections.abc import Mapping

from faultlab.emulator.apis.base import EmulatedApi
from faultlab.plugins import View
from faultlab.protocols import apis


def _emulated() -> dict[str, EmulatedApi]:
    parts: dict[str, EmulatedApi | None] = {
        name: api.part(api.emulated_ref, EmulatedApi) for name, api in apis().items()}
    return {name: emulated for name, emulated in parts.items() if emulated is not None}


# By the API's name: the APIs the emulator can serve.
APIS: Mapping[str, EmulatedApi] = View(_emulated)

__all__ = ["APIS", "EmulatedApi"]
