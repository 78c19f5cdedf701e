"""The realtime APIs faultlab speaks, one `Protocol` each (faultlab.protocols.base), by name.

A run speaks its target's protocol (`TargetKind.protocol`): a remote target names it (Gemini Live,
`gemini.py`, or OpenAI Realtime, `openai.py`), the emulator speaks its personality's, and the lab's
own programs Gemini Live (`DEFAULT`). Another API is a module beside these and an entry in
`PROTOCOLS` (and, for the emulator, faultlab.emulator.apis).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faultlab.protocols.base import Protocol, Service
from faultlab.protocols.gemini import GEMINI
from faultlab.protocols.openai import OPENAI

PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (GEMINI, OPENAI)}
# The protocol of a run whose target names none.
DEFAULT: Protocol = GEMINI


def recognising(message: Mapping[str, Any]) -> Protocol:
    """The protocol whose shape a decoded message has (a capture names none); the default's
    when none claims it."""
    for protocol in PROTOCOLS.values():
        if protocol.recognises(message):
            return protocol
    return DEFAULT

__all__ = ["DEFAULT", "GEMINI", "OPENAI", "PROTOCOLS", "Protocol", "Service", "recognising"]
