"""The shape of a client frame's field tree: its messages, their fields, and the leaves (S6).

`sdk_tree` derives the installed SDK's tree; `schema` keeps it in the user's cache; `conformance`
checks a frame against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Shape = Literal["object", "list", "any"]
JsonType = Literal["string", "integer", "number", "boolean", "enum", "object", "string_map", "any"]


@dataclass(frozen=True, eq=False)
class Message:
    """A message type of the wire protocol: its fields by snake_case name (and alias, if any)."""

    name: str
    fields: dict[str, Field] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Leaf:
    """What a field holds when it holds no message: one JSON type (for an enum, its names in upper
    case), or a list of them."""

    type: JsonType
    repeated: bool = False
    names: frozenset[str] = frozenset()


ANY = Leaf("any")


@dataclass(frozen=True, eq=False)
class Field:
    """One field: the message it holds (None for a leaf), whether the wire form must be an object,
    a list of objects, or may also be something else (a union with scalars), and what that
    something else is (`leaf`; None when the field holds nothing but its message)."""

    message: Message | None
    shape: Shape = "any"
    leaf: Leaf | None = ANY
