"""summary.md: what happened in a run, in a few lines and a table of expectations."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from faultlab.private import redact_text, remember_env_secrets, write_private
from faultlab.report.registry import summary_events

if TYPE_CHECKING:
    from faultlab.lab.process import Ending
    from faultlab.result import RunResult

# Events worth a line in the summary's timeline (the rest stay in events.jsonl); scenario packs
# add their own (faultlab.report.registry.register_summary_events).
NOTABLE = ("lab.ready", "target.ready", "process.start", "process.exit", "fault.", "tcp.",
           "client.", "server.", "run.", "resume.", "recovery.", "mic.", "uplink.")


def _is_notable(name: str, notable: tuple[str, ...]) -> bool:
    return any(name == n or (n.endswith(".") and name.startswith(n)) for n in notable)


def describe_ending(ending: Ending) -> str:
    """`0`, `-11 (SIGSEGV)`, `stopped (SIGTERM, exited 0 in 0.12 s)`, `killed after 2 s grace`."""
    if ending.killed:
        return f"killed after {ending.grace_s:g} s grace"
    if not ending.stopped:
        return f"{ending.code} ({ending.signal_name})" if ending.signal_name else str(ending.code)
    how = f"ended by {ending.signal_name}" if ending.signal_name else f"exited {ending.code}"
    return f"stopped (SIGTERM, {how} in {ending.stop_s:.2f} s)"


def _ended(result: RunResult) -> str:
    """How each process ended, or its exit code at teardown if the run could not tell."""
    roles = dict.fromkeys([*result.exit_codes, *result.endings])
    return ", ".join(
        f"{role} {describe_ending(result.endings[role])}" if role in result.endings else
        f"{role} {'running' if result.exit_codes[role] is None else result.exit_codes[role]}"
        for role in roles)


def render_summary(result: RunResult) -> str:
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
    applied = [e for e in result.events if e.name == "fault.applied"]
    if applied:
        lines += ["", "## Faults", "", "| t (s) | step | fault | trigger | applied in (ms) |",
                  "|---:|---|---|---|---:|"]
        for e in applied:
            f = e.fields
            lines.append(f"| {e.t:.3f} | {f.get('step')} | {f.get('fault')} | "
                         f"{f.get('trigger')} | {f.get('applied_in_ms')} |")
    if result.outcomes:
        lines += ["", "## Expectations", "", "| | expectation | seen |", "|---|---|---|"]
        for o in result.outcomes:
            lines.append(f"| {'held' if o.held else '**FAILED**'} | {o.expectation} | {o.seen} |")
    names = (*NOTABLE, *summary_events())
    notable = sorted((e for e in result.events if _is_notable(e.name, names)), key=lambda e: e.t)
    if notable:
        lines += ["", "## Timeline", "", "| t (s) | source | event | fields |", "|---:|---|---|---|"]
        for e in notable[:200]:
            fields = ", ".join(f"{k}={v}" for k, v in e.fields.items() if k != "argv")
            lines.append(f"| {e.t:.3f} | {e.source} | {e.name} | {fields} |")
    lines += ["", "Files: `events.jsonl`, `capture.pcap`, `client.log`, `target.log`.", ""]
    return "\n".join(lines)


def write_summary(result: RunResult, path: Path) -> None:
    remember_env_secrets()
    write_private(path, redact_text(render_summary(result)))
