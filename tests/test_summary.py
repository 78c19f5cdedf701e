"""summary.md tells a process that exited from one the run stopped, and from one it had to kill."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from faultlab.lab.process import Ending
from faultlab.profile import parse_profile
from faultlab.report.summary import describe_ending, render_summary
from faultlab.result import RunResult

PROFILE = parse_profile("name: ends\nclient: {command: [x]}\n")


def summary(exit_codes: dict[str, int | None], endings: dict[str, Ending]) -> str:
    return render_summary(RunResult(PROFILE, Path("."), datetime.now(), exit_codes=exit_codes,
                                    endings=endings))


def test_a_target_stopped_on_sigterm_is_told_from_one_that_exited() -> None:
    """The client exited by itself; the target, running at teardown, exited on the run's SIGTERM."""
    text = summary({"target": None, "client": 0}, {
        "client": Ending(0),
        "target": Ending(0, stopped=True, grace_s=2.0, stop_s=0.123)})
    assert "- exit codes: target stopped (SIGTERM, exited 0 in 0.12 s), client 0\n" in text


def test_a_target_that_outlived_the_grace_is_reported_killed() -> None:
    """A target the run had to SIGKILL says so, with the grace it was given."""
    text = summary({"target": None, "client": 0}, {
        "client": Ending(0), "target": Ending(-9, stopped=True, killed=True, grace_s=2.0,
                                              stop_s=2.004)})
    assert "- exit codes: target killed after 2 s grace, client 0\n" in text


def test_endings_by_signal() -> None:
    """A process that died of a signal by itself, or of the run's SIGTERM, names the signal."""
    assert describe_ending(Ending(-11)) == "-11 (SIGSEGV)"
    assert describe_ending(Ending(-15, stopped=True, grace_s=2.0, stop_s=0.01)) == \
        "stopped (SIGTERM, ended by SIGTERM in 0.01 s)"


def test_without_an_ending_the_exit_code_at_teardown_is_shown() -> None:
    """A run interrupted before its processes were stopped still shows what it knew."""
    text = summary({"target": None, "client": 1}, {})
    assert "- exit codes: target running, client 1\n" in text


def test_repeated_events_are_one_timeline_row_and_the_picture_is_embedded() -> None:
    """A model turn's fifteen chunks are one row with their count and audio; the picture is
    shown when the run drew one."""
    from faultlab.events import Event

    chunks = [Event(11.1 + i * 0.02, "client", "client.received",
                    {"kind": "server_content.model_turn", "audio_s": 0.1}) for i in range(15)]
    result = RunResult(PROFILE, Path("."), datetime.now(), events=[
        Event(10.0, "client", "client.ask", {"text": "Did you book it?"}), *chunks])
    text = render_summary(result, "timeline.png")
    assert "![the run's timeline](timeline.png)" in text
    rows = [line for line in text.splitlines() if "client.received" in line]
    assert rows == ["| 11.100-11.380 | client | client.received x15 | "
                    "kind=server_content.model_turn, 1.50 s audio |"]
    assert "timeline.png" not in render_summary(result)
