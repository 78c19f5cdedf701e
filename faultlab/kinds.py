"""Live API message kinds as faultlab writes them: snake_case, `top.sub+sub` for serverContent."""

from __future__ import annotations

import re

from faultlab.events import Event


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


def frame_sender(event: Event) -> str | None:
    """Who sent the message a frame event logs ("client" or "server"): the proxy's and the
    emulator's spellings; None for any other event."""
    if event.name == "proxy.frame":
        return "client" if event.fields.get("dir") == "client->server" else "server"
    if event.name == "emulator.frame":
        return "client" if event.fields.get("dir") == "in" else "server"
    return None
