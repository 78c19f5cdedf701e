"""Live API message kinds as faultlab writes them: snake_case, `top.sub+sub` for serverContent."""

from __future__ import annotations

import re


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def kind_matches(actual: str, wanted: str) -> bool:
    """`toolCall` matches `tool_call`; `serverContent.turnComplete` matches a server_content
    message carrying turn_complete among other things."""
    want = ".".join(snake(part) for part in wanted.split("."))
    if actual == want or actual.startswith(want + "."):
        return True
    head, _, sub = want.partition(".")
    a_head, _, a_sub = actual.partition(".")
    return bool(sub) and head == a_head and sub in a_sub.split("+")
