"""Every problem of one profile at once, each as `file:line: field.path: message`.

The YAML node tree gives each key's line; pydantic's errors give each problem's path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import yaml
from pydantic import ValidationError

from faultlab.errors import ProfileError

Loc = tuple[str | int, ...]


def line_map(node: yaml.Node, path: Loc, lines: dict[Loc, int], problems: list[tuple[Loc, str]]) -> None:
    """Record the line of every key and item under `node`; note duplicate keys."""
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                lines[(*path, key)] = key_node.start_mark.line + 1
                problems.append(((*path, key), "duplicate key"))
            seen.add(key)
            lines[(*path, key)] = key_node.start_mark.line + 1
            line_map(value_node, (*path, key), lines, problems)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            line_map(item, (*path, i), lines, problems)


# A key written as it is in a path; any other (a space, a newline, a dot in it) is quoted.
PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")

def format_loc(loc: Sequence[str | int]) -> str:
    """`expect[4].count.event`; a key that is no plain name quoted (`hosts["a b"]`), so that a
    problem stays one line however a mangled file spells its keys."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not PLAIN_KEY.fullmatch(str(part)):
            out += f"[{json.dumps(str(part))}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(profile)"


def input_path(error: Mapping[str, Any], data: Any) -> Loc:
    """The path of pydantic's `error` in `data`, the input it validated: the keys and indexes
    that lead through it. pydantic's path also names the schemas it went through, as strings
    (a model validator's `function-after[validate(), Step]`, a union's member `list[str]` or a
    model's name): dropped, unless the input has such a key there. The last key of a missing
    field stays. The input is walked as pydantic read it, as JSON (faultlab.model.validate_plain):
    a YAML key `1` or `on` is `"1"` or `"true"` there."""
    out: list[str | int] = []
    try:
        node = json.loads(json.dumps(data))
    except (TypeError, ValueError):  # not plain data: walked as it is
        node = data
    loc = error["loc"]
    for n, part in enumerate(loc):
        if isinstance(node, Mapping) and part in node:
            out.append(part)
            node = node[part]
        elif isinstance(part, int):
            out.append(part)
            node = (node[part] if isinstance(node, list) and -len(node) <= part < len(node)
                    else None)
        elif n == len(loc) - 1 and error["type"] == "missing":
            out.append(part)
    return tuple(out)


def message_of(error: Mapping[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "required field is missing"
    return str(error["msg"]).removeprefix("Value error, ")


class Problems:
    """Collects every problem of one file with its line, so `validate` reports them all at once."""

    def __init__(self, source: str, lines: dict[Loc, int]) -> None:
        self.source = source
        self.lines = lines
        self.items: list[tuple[int, str]] = []

    def add(self, loc: Loc, message: str, line: int | None = None) -> None:
        """A problem at `loc`, reported at `line` or else at the line of loc's nearest key."""
        if line is None:
            line = next((self.lines[loc[:n]] for n in range(len(loc), -1, -1)
                         if loc[:n] in self.lines), 1)
        self.items.append((line, f"{self.source}:{line}: {format_loc(loc)}: {message}"))

    def add_validation(self, prefix: Loc, exc: ValidationError, data: Any) -> None:
        """pydantic's errors of validating `data` (what `prefix` names), each at its path."""
        for error in exc.errors():
            self.add((*prefix, *input_path(error, data)), message_of(error))

    def fail(self) -> NoReturn:
        raise ProfileError([text for _, text in sorted(self.items, key=lambda i: i[0])])

    def raise_if_any(self) -> None:
        if self.items:
            self.fail()
