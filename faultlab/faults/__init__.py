"""Faults, one module each, registered by name. The catalogue: docs/guide/faults.md.

A fault's module is named after it and registers its class with `@register`; `FAULTS` imports
it when a profile first names it, so adding a fault touches nothing but its own module.
"""

from __future__ import annotations

from faultlab.faults.base import FAULTS, Fault, FaultContext, FaultParams, Layer, Need, ProxyChannel, register

__all__ = ["FAULTS", "Fault", "FaultContext", "FaultParams", "Layer", "Need", "ProxyChannel", "register"]
