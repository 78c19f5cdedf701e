"""The realtime APIs faultlab speaks, one `Protocol` each (faultlab.protocols.base), by name.

Gemini Live is the one so far, and the protocol of every run (`DEFAULT`). A second API is a module
beside `gemini.py` and an entry in `PROTOCOLS`.
"""

from __future__ import annotations

from faultlab.protocols.base import Protocol, Service
from faultlab.protocols.gemini import GEMINI

PROTOCOLS: dict[str, Protocol] = {GEMINI.name: GEMINI}
# The protocol of a run, and of a tool that reads messages without a run (pcap inspect).
DEFAULT: Protocol = GEMINI

__all__ = ["DEFAULT", "GEMINI", "PROTOCOLS", "Protocol", "Service"]
