"""Frames: the WebSocket messages of a run, and the one way a profile matches them.

A frame comes from exactly one log per run: the proxy's (`proxy.frame`) when the run has a proxy,
else the emulator's (`emulator.frame`); both write one format (faultlab.vocabulary.run.FrameLogged).
`FrameWatch` counts a `FrameMatch`'s hits, so `nth: 2`
fires on the second matching message, whichever process it runs in.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from faultlab.events import Event
from faultlab.model import Model
from faultlab.protocols import DEFAULT, Protocol
from faultlab.vocabulary import Sender
from faultlab.vocabulary.run import FrameLogged

MAX_REGEX_CHARS = 1000  # a pattern in a profile; compiling is then quick (a 1,000-char one: 2 ms)


@dataclass(frozen=True)
class Frame:
    """One message: who sent it, on which connection (see faultlab.connections; 0 unknown), its
    kind in its protocol's words, its content where the log has it (the proxy does, events do
    not), and the protocol that names and matches it (the run's)."""

    sender: Sender
    connection: int
    kind: str
    content: bytes | str | None = None
    protocol: Protocol = DEFAULT

    @functools.cached_property
    def data(self) -> Any:
        """The content as JSON, its fields as profiles address them (`Protocol.normalise`; None
        when it is not JSON), parsed once however many steps match on it."""
        try:
            return self.protocol.normalise(json.loads(self.content or ""))
        except (ValueError, UnicodeDecodeError):
            return None


def connection_of(event: Event) -> int | None:
    """The connection an event is about: `k` in the run's numbering (the capture's, the proxy's),
    else `conn`, the emulator's own count of its connections; None when it names none."""
    value = event.fields.get("k", event.fields.get("conn"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def sender_of(event: Event) -> Sender | None:
    """Who sent the message a frame event logs; None for any other event."""
    frame = FrameLogged.read(event)
    return None if frame is None else frame.sender


def value_at(data: Any, path: str) -> Any:
    """The value at a dotted path (`tool_call.function_calls.0.name`); None when absent."""
    for part in path.split("."):
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return None
    return data


class FrameMatch(Model):
    """A WebSocket message: who sent it, its kind in the run's protocol (`toolCall`,
    `serverContent.turnComplete`; `response.function_call_arguments.done`), fields by dotted path
    (`equals`, `regex`), the n-th such message, on the k-th connection; `forward`: whether the
    step's fault acts before the matching message is relayed (only faults that run in the proxy
    can) or after it."""

    sender: Literal["client", "server", "either"] = Field(default="either", alias="from")
    """Who sent the message: `client`, `server` or `either`."""
    kind: str | None = None
    """The message's kind in the run's protocol, in either spelling (`toolCall`, `tool_call`) or
    by one of its parts (`serverContent.turnComplete`); absent: any kind."""
    equals: dict[str, Any] = Field(default_factory=dict)
    """Fields the message must have, by dotted snake_case path, each equal to its value:
    `{tool_call.function_calls.0.name: book_slot}` (only the proxy fires on these)."""
    regex: dict[str, str] = Field(default_factory=dict)
    """Fields by dotted snake_case path, each matching its regular expression (searched, at most
    1,000 characters; only the proxy fires on these)."""
    nth: int = Field(default=1, ge=1)
    """Fire on the n-th matching message of the run (`2`: the second), counted from 1."""
    connection: int | None = Field(default=None, ge=1)
    """Only messages on the client's k-th connection toward the target (counted from 1)."""
    forward: Literal["before", "after"] = "after"
    """Whether the step's fault acts `before` the matching message is relayed (it holds that
    message itself back; only faults that live in the proxy) or `after` it."""

    @field_validator("regex")
    @classmethod
    def _patterns(cls, value: dict[str, str]) -> dict[str, str]:
        for path, pattern in value.items():
            if len(pattern) > MAX_REGEX_CHARS:
                raise ValueError(f"{path}: a regular expression of {len(pattern)} characters; "
                                 f"at most {MAX_REGEX_CHARS}")
            try:
                re.compile(pattern)
            except (re.error, OverflowError) as exc:  # OverflowError: a repeat like {4294967296}
                raise ValueError(f"{path}: bad regular expression: {exc}") from None
            except RecursionError:  # about 500 nested groups exhaust Python's stack
                raise ValueError(f"{path}: bad regular expression: groups nested too deeply"
                                 ) from None
        return value

    @property
    def reads_content(self) -> bool:
        """Whether matching needs the message itself, which only the proxy has."""
        return bool(self.equals or self.regex) or self.forward == "before"

    def describe(self) -> str:
        return f"{self.kind or 'message'} from {self.sender}" + (
            f" #{self.nth}" if self.nth > 1 else "")

    def matches(self, frame: Frame) -> bool:
        """Whether `frame` is such a message (`nth` aside: `FrameWatch` counts)."""
        if self.sender not in ("either", frame.sender):
            return False
        if self.connection is not None and frame.connection != self.connection:
            return False
        if self.kind and not frame.protocol.kind_matches(frame.kind, self.kind):
            return False
        if self.equals or self.regex:
            data = frame.data
            if any(value_at(data, path) != value for path, value in self.equals.items()):
                return False
            if any(not re.search(pattern, str(value_at(data, path)))
                   for path, pattern in self.regex.items()):
                return False
        return True


class FrameWatch:
    """A `FrameMatch` watching one frame log: `offer` is true on its n-th matching frame only."""

    def __init__(self, match: FrameMatch) -> None:
        self.match = match
        self.seen = 0

    def offer(self, frame: Frame) -> bool:
        if not self.match.matches(frame):
            return False
        self.seen += 1
        return self.seen == self.match.nth
