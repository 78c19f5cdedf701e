"""The realtime APIs faultlab speaks, one `Protocol` each (faultlab.protocols.base), by name.

Each API is a plugin (`faultlab.protocols.plugin.ApiPlugin`, the `faultlab.apis` entry point
group) that brings its protocol, emulated API, personalities, calibrate probes and builtin
clients; Gemini Live (`gemini.py`) and OpenAI Realtime (`openai.py`) are registered as any other.
A run speaks its target's protocol (`TargetKind.protocol`): a remote target names it, the
emulator speaks its personality's, and the lab's own programs Gemini Live (`DEFAULT`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from faultlab.plugins import View, load
from faultlab.protocols import gemini
from faultlab.protocols.base import Protocol, Service
from faultlab.protocols.gemini import GEMINI
from faultlab.protocols.openai import OPENAI
from faultlab.protocols.plugin import GROUP, ApiPlugin

# The protocol of a run whose target names none, and the dialect of a connection that names none
# (the Developer API's: what a path-less test connection means).
DEFAULT_API: ApiPlugin = gemini.API
DEFAULT: Protocol = GEMINI
DEFAULT_DIALECT = DEFAULT.dialects[0]


@functools.cache
def apis() -> dict[str, ApiPlugin]:
    """Every installed realtime API by name (loaded once)."""
    found: dict[str, ApiPlugin] = load(GROUP, ApiPlugin)
    return found


def api_named(name: str) -> ApiPlugin:
    """The API called `name`; ValueError names the installed ones."""
    installed = apis()
    if name not in installed:
        raise ValueError(f"unknown realtime API {name!r}; one of: {', '.join(sorted(installed))}")
    return installed[name]


PROTOCOLS: Mapping[str, Protocol] = View(lambda: {n: a.protocol for n, a in apis().items()})


def recognising(message: Mapping[str, Any]) -> Protocol:
    """The protocol whose shape a decoded message has (a capture names none); the default's
    when none claims it."""
    for protocol in PROTOCOLS.values():
        if protocol.recognises(message):
            return protocol
    return DEFAULT


__all__ = ["DEFAULT", "DEFAULT_API", "DEFAULT_DIALECT", "GEMINI", "OPENAI", "PROTOCOLS", "ApiPlugin",
           "Protocol", "Service", "api_named", "apis", "recognising"]
