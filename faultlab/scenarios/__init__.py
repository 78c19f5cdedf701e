"""Scenario packs, one module each: a scenario's expectations, suite-table columns and summary
events, registered on import, so the core knows no scenario's words. See README's "Scenario packs".

`faultlab.expect` imports this package, so every pack is registered before a profile is validated.
"""

from __future__ import annotations

import importlib
import pkgutil


def _discover() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


_discover()
