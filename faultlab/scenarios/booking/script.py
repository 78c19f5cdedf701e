"""The booking conversation's script: what the Python and the JavaScript reference clients must
agree on (the phrases, the tool, the status line's wording, the timing defaults, the model names,
the exit codes), declared once in conversation.json beside this module, which
faultlab/clients/js/script.mjs reads too. Durations are seconds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPT_PATH = Path(__file__).with_name("conversation.json")


@dataclass(frozen=True)
class Script:
    """The booking conversation as conversation.json declares it (durations in seconds)."""

    say: str
    ask: str
    tool: str  # the function the model may call: book_slot(slot)
    tool_description: str
    tool_behavior: str  # NON_BLOCKING: the model goes on while the booking runs
    tool_parameters: dict[str, Any]  # a JSON Schema, lowercase types
    status_line: str  # a format: {tool}, {slot}, {status}, {booking}
    defaults_s: dict[str, float]  # by the Python option's name (dest)
    models: dict[str, str]  # the default model, by API
    exit_codes: dict[str, int]  # answered, refused, unanswered


def load_script(path: Path = SCRIPT_PATH) -> Script:
    data = json.loads(path.read_text())
    tool = data["tool"]
    return Script(say=data["say"], ask=data["ask"], tool=tool["name"],
                  tool_description=tool["description"], tool_behavior=tool["behavior"],
                  tool_parameters=tool["parameters"], status_line=data["status_line"],
                  defaults_s={k: float(v) for k, v in data["defaults_s"].items()},
                  models=dict(data["models"]), exit_codes=dict(data["exit_codes"]))


SCRIPT = load_script()
# The clients' exit codes: the user has the answer; the first connection was refused; never
# answered (gave up, or the conversation's time ran out).
ANSWERED = SCRIPT.exit_codes["answered"]
REFUSED = SCRIPT.exit_codes["refused"]
UNANSWERED = SCRIPT.exit_codes["unanswered"]
