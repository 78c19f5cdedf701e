"""A client frame as strict JSON, within the emulator's own limits.

A frame is refused (`ProtocolError`, 1007) if it is not strict JSON (`NaN`, `Infinity`, a number
out of a double's range), is not UTF-8, holds a string with a lone UTF-16 surrogate (`"\\ud800"`:
JSON allows the escape, UTF-8 cannot encode it), nests deeper than `MAX_DEPTH`, or holds more than
`MAX_VALUES` values. Those two limits are the emulator's own, to bound the time and memory one
frame costs; the service's are not measured.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from faultlab.emulator.refusals import INVALID_JSON, MALFORMED, ProtocolError
from faultlab.protocols.gemini import snake

# Objects and lists nested deeper than this are refused before anything walks them: the SDK's own
# setup nests 9 levels, a function's parameters schema 2 more per level of the schema it describes.
MAX_DEPTH = 64
# Parsed, a frame of tiny values costs about 22 bytes of memory per byte (16 MiB of `{},` took
# 357 MiB and 1.5 s to parse); the values are counted before parsing, as the commas and opening
# brackets outside strings (those inside are only looked for past the limit: 0.02-0.45 s for 16 MiB).
MAX_VALUES = 250_000
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_constant(token: str) -> Any:
    raise ProtocolError(f"{INVALID_JSON} Unexpected token: {token}.")


def _integer(token: str) -> int:
    if len(token) > 4000:  # int() refuses 4,300 digits (sys.get_int_max_str_digits) with a ValueError
        raise ProtocolError(f"{INVALID_JSON} Number out of range: {token[:40]}...")
    return int(token)


def _finite(token: str) -> float:
    number = float(token)
    if not math.isfinite(number):
        raise ProtocolError(f"{INVALID_JSON} Number out of range: {token[:40]}.")
    return number


class _Nested(Exception):
    """What `_check_tree` found wrong (a reason with `{path}` in it), and where: the keys and
    indices on the way, innermost first."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.trail: list[str | int] = []


LONE_SURROGATE = f"{INVALID_JSON} Invalid value at '{{path}}' (TYPE_STRING): a lone surrogate, not UTF-8."
TOO_DEEP = f"{INVALID_JSON} Nested deeper than {MAX_DEPTH} levels at '{{path}}'."


def _check_tree(value: Any, depth: int = 1) -> None:
    """No object or list deeper than MAX_DEPTH, and no string or key with a lone surrogate. Pure
    ASCII strings (base64 audio, most text) are skipped in O(1)."""
    if isinstance(value, str):
        if not value.isascii() and _SURROGATE.search(value):
            raise _Nested(LONE_SURROGATE)
        return
    if not isinstance(value, dict | list):
        return
    if depth > MAX_DEPTH:
        raise _Nested(TOO_DEEP)
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, sub in items:
        try:
            if isinstance(key, str):
                _check_tree(key)
            _check_tree(sub, depth + 1)
        except _Nested as exc:
            exc.trail.append(snake(key) if isinstance(key, str) else key)
            raise


def _path(trail: list[str | int]) -> str:
    """A snake_case field path, `setup.tools[0].function_declarations`, from innermost-first keys."""
    path = ""
    for key in reversed(trail):
        if isinstance(key, str):  # a key with a lone surrogate is shown escaped
            key = key.encode(errors="backslashreplace").decode()
        path += f"[{key}]" if isinstance(key, int) else f".{key}" if path else key
    return path


def _values(text: str) -> int:
    """How many values a JSON text holds, give or take one (exact past MAX_VALUES)."""
    count = text.count(",") + text.count("{") + text.count("[")
    if count <= MAX_VALUES:
        return count
    bare = _STRING.sub("", text)
    return bare.count(",") + bare.count("{") + bare.count("[")


def load_frame(frame: str | bytes) -> Any:
    """One client frame (text or binary JSON), parsed: strict JSON within the limits."""
    try:
        # JSON between systems is UTF-8 (RFC 8259); json.loads would also guess UTF-16 or 32.
        text = frame if isinstance(frame, str) else frame.decode()
    except UnicodeDecodeError:
        raise ProtocolError(MALFORMED) from None
    if _values(text) > MAX_VALUES:
        raise ProtocolError(f"{INVALID_JSON} More than {MAX_VALUES} values in one message.")
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_int=_integer, parse_float=_finite)
    except (ValueError, RecursionError):  # nested past the parser's depth
        raise ProtocolError(MALFORMED) from None
    try:
        _check_tree(data)
    except _Nested as exc:
        raise ProtocolError(exc.problem.format(path=_path(exc.trail))) from None
    return data
