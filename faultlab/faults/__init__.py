"""Faults, one module each, registered by name. See README's fault catalogue."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from faultlab.faults.base import Fault, FaultContext, FaultParams, LabView, Layer

FAULTS: dict[str, type[Fault[Any]]] = {}


def register[F: type[Fault[Any]]](cls: F) -> F:
    """Class decorator: make a fault available to profiles under `cls.name`."""
    if cls.name in FAULTS:
        raise RuntimeError(f"two faults are named {cls.name!r}")
    FAULTS[cls.name] = cls
    return cls


def _discover() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name not in ("base", "iptables", "flows", "app"):
            importlib.import_module(f"{__name__}.{module.name}")


_discover()

__all__ = ["FAULTS", "Fault", "FaultContext", "FaultParams", "LabView", "Layer", "register"]
