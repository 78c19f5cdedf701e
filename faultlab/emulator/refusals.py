"""How the service refuses a client frame: `ProtocolError`, and its reasons as the service words them.

Every input error closes the connection 1007 (1008 for a model not served) with a reason of at most
123 bytes; the reasons quote the offending field by its snake_case path, as the service does.
"""

from __future__ import annotations

import json
from typing import Any

INVALID_JSON = "Invalid JSON payload received."
MALFORMED = f"{INVALID_JSON} Closing due to a malformed message."
CLOSE_REASON_BYTES = 123


class ProtocolError(Exception):
    """A client message the service rejects. An API that closes on errors (Gemini) closes with
    `code` and `reason` (<= 123 bytes); one that tells them in-band (OpenAI) sends the whole
    message with its `error_code`, the field at fault (`param`) and the client's `event_id`, and
    closes only on a `fatal` one (faultlab.emulator.apis)."""

    def __init__(self, reason: str, code: int = 1007, *, error_code: str = "invalid_value",
                 param: str | None = None, event_id: str | None = None,
                 fatal: bool = False) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = close_reason(reason)
        self.error_code = error_code
        self.param = param
        self.event_id = event_id
        self.fatal = fatal


def close_reason(text: str) -> str:
    """`text` as a close frame can carry it: UTF-8, at most 123 bytes, cut between characters."""
    return text.encode(errors="replace")[:CLOSE_REASON_BYTES].decode(errors="ignore")


def unknown_name(name: str, where: str) -> ProtocolError:
    at = f" at '{where}'" if where else ""
    return ProtocolError(f'{INVALID_JSON} Unknown name "{name}"{at}: Cannot find field.')


def invalid_value(where: str, wire_type: str, value: Any) -> ProtocolError:
    """The service's refusal of a value of the wrong type, quoting a scalar value (cut short)."""
    if isinstance(value, dict | list):
        shown = "{...}" if isinstance(value, dict) else "[...]"
    else:
        shown = json.dumps(value if not isinstance(value, str) else value[:40])
    return ProtocolError(f"{INVALID_JSON} Invalid value at '{where}' ({wire_type}), {shown}")


def object_at(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{INVALID_JSON} Invalid value at '{where}': expected an object.")
    return value


def list_at(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError(f"{INVALID_JSON} Invalid value at '{where}'.")
    return value
