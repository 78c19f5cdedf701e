"""The booking conversation's script (conversation.json) as the Python clients read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultlab.clients import realtime, recovery
from faultlab.clients.options import parser_for
from faultlab.scenarios.booking.backend import Booking
from faultlab.scenarios.booking.script import SCRIPT, SCRIPT_PATH, load_script

# The Python option (dest) each of the script's timing defaults sets, beside the window's.
TIMING = ("ask_after", "retry_after", "connect_timeout", "ping_interval", "lost_after", "quiet",
          "duration")


def test_the_clients_options_default_to_the_script() -> None:
    """Every reference client's phrases, timings and model default to conversation.json's."""
    args = parser_for(None).parse_args([])
    assert (args.say, args.ask, args.model) == (SCRIPT.say, SCRIPT.ask, SCRIPT.models["gemini"])
    assert {name: getattr(args, name) for name in TIMING} == {
        name: SCRIPT.defaults_s[name] for name in TIMING}
    field = parser_for(None)
    recovery.add_recovery_arguments(field, SCRIPT.defaults_s["window"])
    assert field.parse_args([]).give_up_after == 4.0 == SCRIPT.defaults_s["window"]
    assert realtime.parser(None, 30.0).parse_args([]).model == SCRIPT.models["openai"]


def test_a_status_line_is_worded_by_the_script() -> None:
    """A booking's status line fills the script's wording with the tool, slot, status and id."""
    booking = Booking("B2", "tomorrow 3pm", "tomorrow at 3pm", ["c1"], "pending")
    assert booking.status_line() == "[status] book_slot(tomorrow at 3pm): pending, booking B2"


def test_the_script_is_read_from_its_file(tmp_path: Path) -> None:
    """load_script reads what the file says, not a copy of it kept in the code."""
    data = json.loads(SCRIPT_PATH.read_text())
    data["say"], data["tool"]["name"], data["exit_codes"]["refused"] = "Hello?", "greet", 5
    other = tmp_path / "conversation.json"
    other.write_text(json.dumps(data))
    script = load_script(other)
    assert (script.say, script.tool, script.exit_codes["refused"]) == ("Hello?", "greet", 5)
    assert load_script() == SCRIPT


@pytest.mark.parametrize("name", ["answered", "refused", "unanswered"])
def test_the_exit_codes_are_distinct_small_numbers(name: str) -> None:
    """Each exit code the script names is a distinct number a shell can return."""
    codes = SCRIPT.exit_codes
    assert 0 <= codes[name] < 126 and list(codes.values()).count(codes[name]) == 1
