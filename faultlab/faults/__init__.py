"""Faults, one module each, registered by name. See README's fault catalogue.

Every module of this package is imported here; a fault module registers its class with
`@register`, so adding a fault touches nothing but its own module.
"""

from __future__ import annotations

import importlib
import pkgutil

from faultlab.faults.base import FAULTS, Fault, FaultContext, FaultParams, Layer, Need, ProxyChannel, register

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["FAULTS", "Fault", "FaultContext", "FaultParams", "Layer", "Need", "ProxyChannel", "register"]
