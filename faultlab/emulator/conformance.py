"""Whether a client frame's fields are those the installed SDK sends (S6), in either key spelling.

Which keys exist, at every level, and what JSON type each holds, is the SDK's business (`schema`);
an unknown name or a value of the wrong type is refused as the service does, with the snake_case
path of the field. Payloads the model reads as data (function arguments, tool results, schemas) are
leaves: their contents are not looked into.
"""

from __future__ import annotations

import re
from typing import Any

from faultlab.emulator.frame_tree import Leaf, Message
from faultlab.emulator.refusals import invalid_value, list_at, object_at, unknown_name
from faultlab.protocols.gemini import snake

_INTEGER = re.compile(r"-?\d{1,20}")  # proto3 JSON: a 64-bit integer may come as a string
_NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|NaN|-?Infinity")
_WIRE_TYPES = {"string": "TYPE_STRING", "integer": "TYPE_INT64", "number": "TYPE_DOUBLE",
               "boolean": "TYPE_BOOL", "enum": "TYPE_ENUM", "object": "TYPE_MESSAGE",
               "string_map": "TYPE_MESSAGE"}


def _holds(leaf: Leaf, value: Any) -> bool:
    """Whether one (not repeated) value is of the leaf's JSON type."""
    match leaf.type:
        case "string":
            return isinstance(value, str)
        case "integer":
            if isinstance(value, str):
                return _INTEGER.fullmatch(value) is not None and -(2**63) <= int(value) < 2**64
            return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**64
        case "number":
            if isinstance(value, str):
                return _NUMBER.fullmatch(value) is not None
            return isinstance(value, int | float) and not isinstance(value, bool)
        case "boolean":
            return isinstance(value, bool)
        case "enum":
            return isinstance(value, str) and value.upper() in leaf.names
        case "object":
            return isinstance(value, dict)
        case "string_map":
            return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    return True


def _wire_type(leaf: Leaf) -> str:
    """The service's name for a leaf's type, as its refusals quote it (asked only to refuse)."""
    return _WIRE_TYPES.get(leaf.type, "TYPE_MESSAGE")


def _check_leaf(value: Any, leaf: Leaf, where: str) -> None:
    if not leaf.repeated:
        if not _holds(leaf, value):
            raise invalid_value(where, _wire_type(leaf), value)
        return
    if not isinstance(value, list):
        raise invalid_value(where, _wire_type(leaf), value)
    for i, item in enumerate(value):
        if not _holds(leaf, item):
            raise invalid_value(f"{where}[{i}]", _wire_type(leaf), item)


def check_fields(value: dict[str, Any], message: Message, where: str) -> None:
    """Every key of `value`, at every depth, names a field of `message` in either spelling; a
    field of a message type holds an object (or a list of them), and any other value is of its
    field's JSON type (null is an unset field). Leaves are not looked into."""
    for key, sub in value.items():
        name = snake(key)
        spec = message.fields.get(name)
        if spec is None:
            raise unknown_name(key, where)
        if sub is None:
            continue
        path = f"{where}.{name}" if where else name
        if spec.message is not None and spec.shape == "list":
            for i, item in enumerate(list_at(sub, path)):
                check_fields(object_at(item, f"{path}[{i}]"), spec.message, f"{path}[{i}]")
        elif spec.message is not None and (spec.shape == "object" or isinstance(sub, dict)):
            check_fields(object_at(sub, path), spec.message, path)
        elif spec.leaf is not None:
            _check_leaf(sub, spec.leaf, path)
        else:
            raise invalid_value(path, "TYPE_MESSAGE", sub)
