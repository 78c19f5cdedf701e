"""Durations as profiles and command lines write them: `1.5s`, `200ms`, `2m`; ranges `1.8-1.9s`."""

from __future__ import annotations

import re

_NUMBER, _UNIT = r"(\d+(?:\.\d+)?|\.\d+)", r"(ms|s|m|h)"
_DURATION = re.compile(rf"^\s*{_NUMBER}\s*{_UNIT}\s*$")
# The same shapes as JSON Schema patterns (ECMA-262 reads these as Python does): what an editor
# checks a profile's durations and ranges by.
DURATION_PATTERN = _DURATION.pattern
DURATION_RANGE_PATTERN = rf"^\s*{_NUMBER}\s*{_UNIT}?\s*-\s*{_NUMBER}\s*{_UNIT}\s*$"
_SECONDS_PER_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_SECONDS = 365 * 24 * 3600.0


def parse_duration(text: object) -> float:
    """Seconds in a duration string such as `1.5s`, `200ms`, `2m` or `1h`; a bare number is refused."""
    if isinstance(text, bool) or not isinstance(text, str):
        raise ValueError(f"a duration needs a unit, e.g. '1.5s' or '200ms' (got {text!r})")
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"not a duration: {text!r} (write e.g. '1.5s', '200ms', '2m')")
    seconds = float(match.group(1)) * _SECONDS_PER_UNIT[match.group(2)]
    if seconds > MAX_SECONDS:  # 10^309 s parses as inf, and a year is longer than any run
        raise ValueError(f"{text.strip()[:40]!r} is longer than a year, the longest duration")
    return seconds


def parse_duration_range(text: object) -> tuple[float, float]:
    """The low and high seconds of a range such as `1.8-1.9s`, `500ms-2s` or `[1.8s, 1.9s]`; a
    low without a unit takes the high's."""
    if isinstance(text, list | tuple) and len(text) == 2:
        low, high = parse_duration(text[0]), parse_duration(text[1])
    elif isinstance(text, str) and text.count("-") == 1:
        left, right = (part.strip() for part in text.split("-"))
        unit = re.search(r"(ms|s|m|h)$", right)
        if unit is not None and re.fullmatch(r"\d+(?:\.\d+)?|\.\d+", left):
            left += unit.group(1)
        low, high = parse_duration(left), parse_duration(right)
    else:
        raise ValueError(f"not a range of durations: {text!r} (write e.g. '1.8-1.9s')")
    if low > high:
        raise ValueError(f"{text!r}: the low end is above the high end")
    return low, high
