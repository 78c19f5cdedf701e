"""One realtime API as a plugin (the `faultlab.apis` entry point group): everything faultlab
needs of it, in one object.

Its parts are `module:attribute` references, imported when first used, so that loading the
plugin (which every registry of APIs does) costs no import of an SDK, the emulator or pydantic:
- `protocol`: its `Protocol` (faultlab.protocols.base): names, messages, credentials, dialects;
- `emulated`: its `EmulatedApi` (faultlab.emulator.apis.base), for the emulator to serve it;
- `personalities`: its `Personality`s (faultlab.emulator.personality), and `default_personality`,
  the one served when nothing names one (a cassette recorded off a capture); `quirks`: the
  pydantic model of the fields of a personality only this API has (its `quirks`);
- `probes`: its `Probes` (faultlab.calibrate.plugin), for `faultlab calibrate` to measure it;
- `builtins`: its builtin client programs (a profile's `client: {builtin: NAME}`), each a module
  run with `python -m`.
Only `protocol` is required: an API without the others is one faultlab speaks (a remote target,
the proxy) but does not emulate, measure, or bring a client for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from faultlab.plugins import resolve
from faultlab.protocols.base import Protocol

GROUP = "faultlab.apis"


@dataclass(frozen=True)
class ApiPlugin:
    """One realtime API's parts (module docstring), by reference. Each part is checked by its
    reader (faultlab.emulator.apis, faultlab.emulator.personality, faultlab.calibrate), which
    this leaf module does not import."""

    name: str
    protocol_ref: str
    emulated_ref: str | None = None
    personalities_ref: str | None = None
    default_personality: str | None = None
    quirks_ref: str | None = None
    probes_ref: str | None = None
    builtins: Mapping[str, str] = field(default_factory=dict)

    @cached_property
    def protocol(self) -> Protocol:
        protocol: Protocol = self.part(self.protocol_ref, Protocol)
        if protocol.name != self.name:
            raise TypeError(f"API {self.name}'s protocol {self.protocol_ref} is named "
                            f"{protocol.name!r}")
        return protocol

    def part(self, reference: str | None, what: type[Any]) -> Any:
        """The part `reference` names (imported now), None when the API brings none; TypeError
        when it is not a `what`."""
        if reference is None:
            return None
        found = resolve(reference)
        if not isinstance(found, what):
            raise TypeError(f"API {self.name}: {reference} is a {type(found).__name__}, not a "
                            f"{what.__name__}")
        return found
