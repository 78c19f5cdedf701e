"""summary.md: what happened in a run, in a few lines, its picture (timeline.png), the table of
expectations, and a timeline whose repeated events (a model turn's chunks, an audio stream) are
one row each, as report.html collapses them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from faultlab.private import redact_text, remember_env_secrets, write_private
from faultlab.report.bursts import Burst, bursts
from faultlab.report.columns import summary_events
from faultlab.report.record import describe_ending
from faultlab.vocabulary.audio import AUDIO_PREFIXES
from faultlab.vocabulary.lab import TargetReady
from faultlab.vocabulary.run import (
    FaultApplied,
    FaultFailed,
    FaultReverted,
    FaultRevertFailed,
    LabReady,
    ProcessExit,
    ProcessStart,
    RunEnd,
    RunError,
    RunInterrupted,
    RunStart,
    RunTeardown,
    RunTimeout,
    TcpConnect,
    TcpFin,
    TcpRst,
    fault_spans,
)
from faultlab.vocabulary.server import ECHO_PREFIX
from faultlab.vocabulary.session import SESSION_PREFIXES

if TYPE_CHECKING:
    from faultlab.result import RunResult

TIMELINE_ROWS = 200
# Events worth a line in the summary's timeline (the rest stay in events.jsonl); scenario packs
# add their own (faultlab.report.registry.register_summary_events).
NOTABLE = (*(r.NAME for r in (
    LabReady, TargetReady, ProcessStart, ProcessExit, FaultApplied, FaultReverted, FaultFailed,
    FaultRevertFailed, TcpConnect, TcpFin, TcpRst, RunStart, RunTimeout, RunError, RunInterrupted,
    RunTeardown, RunEnd)), *SESSION_PREFIXES, *AUDIO_PREFIXES, ECHO_PREFIX)


def _is_notable(name: str, notable: tuple[str, ...]) -> bool:
    return any(name == n or (n.endswith(".") and name.startswith(n)) for n in notable)


def _ended(result: RunResult) -> str:
    """How each process ended, or its exit code at teardown if the run could not tell."""
    roles = dict.fromkeys([*result.exit_codes, *result.endings])
    return ", ".join(
        f"{role} {describe_ending(result.endings[role])}" if role in result.endings else
        f"{role} {'running' if result.exit_codes[role] is None else result.exit_codes[role]}"
        for role in roles)


def _row(burst: Burst) -> str:
    e = burst.first
    fields = ", ".join(f"{k}={v}" for k, v in burst.fields.items())
    if burst.count == 1:
        return f"| {e.t:.3f} | {e.source} | {e.name} | {fields} |"
    audio = f", {burst.audio_s:.2f} s audio" if burst.audio_s else ""
    return (f"| {e.t:.3f}-{burst.last.t:.3f} | {e.source} | {e.name} x{burst.count} | "
            f"{fields}{audio} |")


def render_summary(result: RunResult, picture: str | None = None) -> str:
    """The summary; `picture`: the run's timeline image, by its name in the run folder."""
    p = result.profile
    lines = [f"# {p.name}: {result.verdict}", ""]
    if p.description:
        lines += [p.description, ""]
    lines += [
        f"- started {result.started:%Y-%m-%d %H:%M:%S}, ran {result.duration_s:.2f} s",
        f"- profile: `{p.path or p.name}`",
    ]
    codes = _ended(result)
    if codes:
        lines.append(f"- exit codes: {codes}")
    if result.unfired:
        lines.append(f"- steps that never fired: {', '.join(result.unfired)}")
    if result.error:
        lines += ["", f"**The lab failed:** {result.error}"]
    if picture:
        lines += ["", f"![the run's timeline]({picture})", "",
                  "Zoom, pan and every event's fields: `report.html`."]
    spans = fault_spans(result.events)
    if spans:
        lines += ["", "## Faults", "", "| t (s) | step | fault | trigger | applied in (ms) |",
                  "|---:|---|---|---|---:|"]
        for span in spans:
            a = span.applied
            lines.append(f"| {span.t:.3f} | {a.step} | {a.fault} | {a.trigger} | "
                         f"{a.applied_in_ms} |")
    if result.outcomes:
        lines += ["", "## Expectations", "", "| | expectation | seen |", "|---|---|---|"]
        for o in result.outcomes:
            lines.append(f"| {'held' if o.held else '**FAILED**'} | {o.expectation} | {o.seen} |")
    names = (*NOTABLE, *summary_events())
    notable = sorted((e for e in result.events if _is_notable(e.name, names)), key=lambda e: e.t)
    rows = bursts(notable)
    if rows:
        lines += ["", "## Timeline", "", "| t (s) | source | event | fields |", "|---:|---|---|---|"]
        lines += [_row(burst) for burst in rows[:TIMELINE_ROWS]]
        if len(rows) > TIMELINE_ROWS:
            lines.append(f"| | | ... {len(rows) - TIMELINE_ROWS} more rows | `events.jsonl` |")
    lines += ["", "Files: `report.html`, `events.jsonl`, `capture.pcap`, `client.log`, "
                  "`target.log`.", ""]
    return "\n".join(lines)


def write_summary(result: RunResult, path: Path, picture: str | None = None) -> None:
    remember_env_secrets()
    write_private(path, redact_text(render_summary(result, picture)))
