"""`faultlab calibrate`: the official SDK's probes against a realtime endpoint (the real service,
or an emulator), measured beside a personality's ranges: Gemini Live's probes (`probes`), or
OpenAI Realtime's (`realtime`) for a personality of that protocol.

`calibrate(endpoint, personality, samples, tolerance_s)` runs the probes (`probes`) and returns a
`Calibration`: the sheet (`sheet`) as text or JSON, which measures are flagged, and the measured
values as a personality file. An endpoint that gives no session raises `EndpointError`; a
personality of an API whose plugin brings no probes (`PROBES`), ValueError.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from faultlab.calibrate import realtime
from faultlab.calibrate.endpoint import DEFAULT_MODEL, Endpoint, EndpointError
from faultlab.calibrate.plugin import Probes
from faultlab.calibrate.probes import Prober, run_probes, run_time_s
from faultlab.calibrate.sheet import (
    GEMINI_SHEET,
    OPENAI_SHEET,
    Observations,
    Row,
    Sheet,
    judge,
    measured_fields,
    render,
)
from faultlab.emulator.personality import Personality, personality_file_text
from faultlab.plugins import View
from faultlab.private import redact
from faultlab.protocols import apis

__all__ = [
    "DEFAULT_MODEL",
    "PROBES",
    "Calibration",
    "Endpoint",
    "EndpointError",
    "Probes",
    "calibrate",
    "probes_for",
    "run_time_s",
]


async def _gemini(endpoint: Endpoint, personality: Personality, seen: Observations,
                  samples: int, progress: Callable[[str], None] | None) -> None:
    await run_probes(Prober(endpoint, personality, seen), samples, progress)


async def _openai(endpoint: Endpoint, personality: Personality, seen: Observations,
                  samples: int, progress: Callable[[str], None] | None) -> None:
    await realtime.run_probes(realtime.RealtimeProber(endpoint, personality, seen), samples,
                              progress)


# Gemini Live's and OpenAI Realtime's, which their plugins name (faultlab.protocols.plugin).
GEMINI_PROBES = Probes(_gemini, run_time_s, DEFAULT_MODEL, GEMINI_SHEET)
OPENAI_PROBES = Probes(_openai, realtime.run_time_s, realtime.DEFAULT_MODEL, OPENAI_SHEET)
# By the personality's protocol, as each API's plugin brings them: an API that brings none is one
# calibrate cannot measure.
PROBES: Mapping[str, Probes] = View(lambda: {
    name: probes for name, api in apis().items()
    if (probes := api.part(api.probes_ref, Probes)) is not None})


def probes_for(protocol: str) -> Probes:
    """The probes of the API `protocol` names; ValueError when calibrate has none for it."""
    try:
        return PROBES[protocol]
    except KeyError:
        raise ValueError(f"calibrate has no probes for the {protocol} API, so it cannot measure "
                         f"it (it measures {', '.join(PROBES)}: faultlab.calibrate.PROBES)"
                         ) from None


@dataclass(frozen=True)
class Calibration:
    """What one calibrate run measured, judged against a personality."""

    endpoint: Endpoint
    personality: Personality
    samples: int
    tolerance_s: float
    seen: Observations
    duration_s: float

    @property
    def sheet(self) -> Sheet:
        return probes_for(self.personality.protocol).sheet

    @cached_property
    def rows(self) -> list[Row]:
        return judge(self.seen, self.personality, self.tolerance_s, self.sheet)

    @property
    def flagged(self) -> list[str]:
        return [r.name for r in self.rows if r.flagged]

    def heading(self) -> str:
        return (f"{self.endpoint.describe()} (model {self.endpoint.model}) beside personality "
                f"{self.personality.name}: {self.samples} sample(s) a probe, "
                f"{self.duration_s:.1f}s")

    def text(self) -> str:
        return render(self.rows, self.heading(), self.tolerance_s, self.sheet.docs)

    def to_json(self) -> dict[str, Any]:
        data = {
            "endpoint": self.endpoint.describe(), "model": self.endpoint.model,
            "personality": self.personality.name, "samples": self.samples,
            "tolerance_s": self.tolerance_s, "duration_s": round(self.duration_s, 2),
            "measures": [{"name": r.name, "items": r.items, "what": r.what,
                          "flagged": r.flagged, **r.data} for r in self.rows],
            "flagged": self.flagged,
        }
        redacted: dict[str, Any] = redact(data)
        return redacted

    def personality_file(self, base: str, changes: dict[str, Any]) -> str:
        """A personality file: `base` with `changes` (a compared file's own), then every field
        measured set to what was measured."""
        kept = {k: v for k, v in changes.items() if k != "name"}  # named after the new file
        heading = (f"Measured by `faultlab calibrate` on {datetime.now():%Y-%m-%d %H:%M}\n"
                   f"against {self.endpoint.describe()} (model {self.endpoint.model}), "
                   f"{self.samples} sample(s) a probe.\n"
                   "Serve it: faultlab emulator serve --personality THIS_FILE")
        measured = measured_fields(self.seen, self.personality, self.sheet)
        return personality_file_text(base, {**kept, **measured}, heading)


async def calibrate(endpoint: Endpoint, personality: Personality, samples: int,
                    tolerance_s: float, progress: Callable[[str], None] | None = None,
                    ) -> Calibration:
    """Run every probe against `endpoint` and judge what they measured against `personality`."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    seen = Observations()
    await probes_for(personality.protocol).run(endpoint, personality, seen, samples, progress)
    return Calibration(endpoint, personality, samples, tolerance_s, seen, loop.time() - started)
