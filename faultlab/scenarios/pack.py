"""What a scenario pack is made of (a leaf module: packs import it, the loader reads it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from faultlab.errors import FaultlabError

if TYPE_CHECKING:
    from faultlab.clients.kind import ClientKind
    from faultlab.emulator.brain import Brain


class PackError(FaultlabError):
    """A scenario pack cannot be loaded, or is named twice; the message names the pack."""


@dataclass(frozen=True)
class ProbeWords:
    """What `faultlab calibrate` tells a model so that it makes a NON_BLOCKING tool call: the
    instruction, the user's request, and the tool (one string parameter)."""

    instruction: str
    request: str
    tool: str
    description: str
    parameter: str


@dataclass(frozen=True)
class ScenarioPack:
    """One scenario's pack: its name (a personality's `scenario`), the emulator's model for it
    (None: the neutral one), the words calibrate speaks (None: it has none), and the clients it
    brings: builtin programs (a profile's `builtin: NAME`, each a module run with `python -m`)
    and client kinds (faultlab.clients.kind)."""

    name: str
    brain: Callable[[], Brain] | None = None
    probe: ProbeWords | None = None
    clients: Mapping[str, str] = field(default_factory=dict)
    kinds: tuple[ClientKind, ...] = ()
