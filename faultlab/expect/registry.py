"""The registry of expectation kinds, keyed by the field a profile item starts with.

A leaf module: the core's kinds (`basic`, `session`) and scenario packs (faultlab.scenarios)
import `register` from here, and `faultlab.expect` loads the packs, so no import runs in a circle.
"""

from __future__ import annotations

from faultlab.expect.base import Expectation

EXPECTATIONS: dict[str, type[Expectation]] = {}


def key_of(cls: type[Expectation]) -> str:
    """The field an expectation's profile item starts with: the model's first field."""
    first = next(iter(cls.model_fields), None)
    if first is None:
        raise TypeError(f"expectation {cls.__name__} has no field to be named by")
    return first


def register[E: type[Expectation]](cls: E) -> E:
    """Class decorator: make an expectation available to profiles under its first field."""
    key = key_of(cls)
    if key in EXPECTATIONS:
        raise RuntimeError(f"two expectations start with {key!r}: "
                           f"{EXPECTATIONS[key].__qualname__} and {cls.__qualname__}")
    EXPECTATIONS[key] = cls
    return cls
