"""What a realtime API brings for `faultlab calibrate` (its plugin's `probes`): a leaf module, so
that a plugin names its probes without importing calibrate's SDK clients."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from faultlab.calibrate.endpoint import Endpoint
    from faultlab.calibrate.sheet import Observations, Sheet
    from faultlab.emulator.personality import Personality


@dataclass(frozen=True)
class Probes:
    """One API's probes: how they run, how long, with which model, on which sheet."""

    run: Callable[[Endpoint, Personality, Observations, int, Callable[[str], None] | None],
                  Awaitable[None]]
    run_time_s: Callable[[int], float]
    default_model: str
    sheet: Sheet
