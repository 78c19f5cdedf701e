"""Scenario packs: all that belongs to one scenario, so that the core knows no scenario's words.

A pack is a module (or package) whose `PACK` is a `ScenarioPack` (faultlab.scenarios.pack): the
emulator's model for the scenario (its brain), the words `faultlab calibrate` says to make a model
call a tool, and, as its module is imported, its expectations (`faultlab.expect.registry`), suite
columns and summary events (`faultlab.report.registry`), registered as the core's are, and the
clients it brings (builtin programs and client kinds). Its backend lives beside it (the booking
pack: faultlab/scenarios/booking/).

Packs are found through the `faultlab.scenarios` entry point group, so a pack of your own is a pip
package whose pyproject.toml names it:

    [project.entry-points."faultlab.scenarios"]
    greeting = "my_package.greeting:PACK"

faultlab's own booking pack is registered the same way (its pyproject.toml, and
faultlab.plugins.BUILTINS for an install whose metadata predates it). `packs()` loads them all
once; `faultlab.expect` and the report's columns ask for them before they are used. A pack
imports faultlab.scenarios.pack (a leaf), never this loader, so no import runs in a circle.
"""

from __future__ import annotations

import functools

from faultlab.emulator.brain import Brain, echo
from faultlab.plugins import load
from faultlab.scenarios.pack import PackError, ProbeWords, ScenarioPack

__all__ = ["DEFAULT_SCENARIO", "ENTRY_POINTS", "PackError", "ProbeWords", "ScenarioPack", "brain_of",
           "pack_named", "packs"]

ENTRY_POINTS = "faultlab.scenarios"
# The scenario whose model an emulator serves when its personality names none (`scenario`): the
# field study's booking assistant, which every profile written before packs expects.
DEFAULT_SCENARIO = "booking"


@functools.cache
def packs() -> dict[str, ScenarioPack]:
    """Every installed pack by name, each loaded (imported) once."""
    found: dict[str, ScenarioPack] = load(ENTRY_POINTS, ScenarioPack, "scenario pack", PackError)
    return found


def pack_named(name: str | None) -> ScenarioPack:
    """The pack called `name` (None: DEFAULT_SCENARIO's); ValueError names the installed ones."""
    name = DEFAULT_SCENARIO if name is None else name
    installed = packs()
    if name not in installed:
        raise ValueError(f"unknown scenario {name!r}; one of: {', '.join(sorted(installed))}")
    return installed[name]


def brain_of(name: str | None) -> Brain:
    """A fresh model of the scenario `name` (None: the default), or the neutral one if its pack
    brings none."""
    pack = pack_named(name)
    return pack.brain() if pack.brain is not None else echo()
