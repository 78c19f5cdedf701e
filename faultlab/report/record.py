"""result.json: a run as machines read it, and all that a suite table, JUnit XML and `report
merge` need, so that runs made elsewhere (parallel jobs, CI shards) join one suite.

One object: faultlab's version; the profile (name, path, sha256 of its file); the verdict, exit
code and error; when it started and how long it ran; the processes' exit codes and endings; the
faults with their trigger, `applied_in_ms` and `reverted_t` (when the fault stopped hurting:
reverted, ended by another step, or its `for` ran out; null for one done at once or one that
lasted to the run's end: faultlab.vocabulary.fault_spans); the expectations with what was seen;
the steps that never fired; the run folder and its files; and `cells`, each suite-table column's
value for this run (`faultlab.report.columns`), which the table combines over a scenario's runs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faultlab.cassette.format import RUN_CASSETTE
from faultlab.errors import FaultlabError
from faultlab.private import redact_text, remember_env_secrets, write_private
from faultlab.report.columns import columns
from faultlab.vocabulary.run import fault_spans

if TYPE_CHECKING:
    from faultlab.lab.process import Ending
    from faultlab.result import RunResult

RESULT_FILE = "result.json"
# The run's pictures (faultlab.report.build draws them).
PAGE_FILE = "report.html"
TIMELINE_PICTURE = "timeline.png"
FORMAT = 1
# The run folder's files a report points at, where the run made them.
ATTACHMENTS = (PAGE_FILE, TIMELINE_PICTURE, "summary.md", "events.jsonl", "capture.pcap",
               RUN_CASSETTE, "client.log", "target.log", "proxy.log")


class RecordError(FaultlabError):
    """A result.json that cannot be read; the message names the file."""


def faultlab_version() -> str:
    try:
        return version("faultlab")
    except PackageNotFoundError:
        return "unknown"


def describe_ending(ending: Ending) -> str:
    """`0`, `-11 (SIGSEGV)`, `stopped (SIGTERM, exited 0 in 0.12 s)`, `killed after 2 s grace`."""
    if ending.killed:
        return f"killed after {ending.grace_s:g} s grace"
    if not ending.stopped:
        return f"{ending.code} ({ending.signal_name})" if ending.signal_name else str(ending.code)
    how = f"ended by {ending.signal_name}" if ending.signal_name else f"exited {ending.code}"
    return f"stopped (SIGTERM, {how} in {ending.stop_s:.2f} s)"


@dataclass(frozen=True)
class RunRecord:
    """One run, as result.json holds it."""

    profile: str
    verdict: str
    exit_code: int
    run_dir: str
    started: str
    duration_s: float
    description: str = ""
    profile_path: str = ""
    profile_sha256: str = ""
    backend: str = "netns"
    # The realtime API the run spoke (faultlab.protocols), which names its messages.
    protocol: str = "gemini"
    error: str | None = None
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    endings: dict[str, str] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    expectations: list[dict[str, Any]] = field(default_factory=list)
    unfired: list[str] = field(default_factory=list)
    attachments: list[str] = field(default_factory=list)
    cells: dict[str, Any] = field(default_factory=dict)
    # The field study's range for a time column (`detected`: [low, high] seconds), where the
    # profile states one.
    field_ranges: dict[str, list[float]] = field(default_factory=dict)
    faultlab: str = ""
    format: int = FORMAT

    @classmethod
    def of(cls, result: RunResult) -> RunRecord:
        """The record of a finished run."""
        p = result.profile
        faults = [{"step": s.step, "fault": s.applied.fault, "layer": s.applied.layer,
                   "trigger": s.applied.trigger, "t": round(s.t, 6),
                   "applied_in_ms": s.applied.applied_in_ms,
                   "reverted_t": None if s.end is None or s.instant else round(s.end, 6)}
                  for s in fault_spans(result.events)]
        observed = result.observed
        return cls(
            profile=p.name, description=p.description, verdict=result.verdict, exit_code=result.exit_code,
            run_dir=str(result.run_dir),
            started=result.started.astimezone().isoformat(timespec="seconds"),
            duration_s=round(result.duration_s, 3), profile_path=str(p.path or ""),
            profile_sha256=_sha256(p.path), backend=p.backend, protocol=p.protocol.name,
            error=result.error,
            exit_codes=dict(result.exit_codes),
            endings={role: describe_ending(e) for role, e in result.endings.items()},
            faults=faults,
            expectations=[{"expectation": o.expectation, "held": o.held, "seen": o.seen,
                           "at": None if o.at is None else round(o.at, 6)}
                          for o in result.outcomes],
            unfired=list(result.unfired),
            attachments=attachments_in(result.run_dir),
            cells={c.heading: c.cell(observed) for c in columns()},
            field_ranges={k: list(v) for k, v in p.field_ranges.ranges().items()},
            faultlab=faultlab_version(),
        )

    def redacted(self) -> RunRecord:
        """The record as result.json holds it: every secret the run met redacted."""
        return replace(self, **{k: v for k, v in json.loads(redact_text(self.to_json())).items()
                                if k in self.__dataclass_fields__})

    def with_attachments(self) -> RunRecord:
        """The record listing the files its run folder holds now (its reports are drawn after
        the record is made)."""
        return replace(self, attachments=attachments_in(Path(self.run_dir)))

    @property
    def failed_expectations(self) -> list[dict[str, Any]]:
        return [e for e in self.expectations if not e["held"]]

    def outcome_lines(self, failed_only: bool = False) -> list[str]:
        """`  ok   <expectation>  (seen: ...)` per expectation (`FAIL` for one that failed), and
        `  ERROR <why>` when the lab failed: how a terminal and a test report tell a run."""
        lines = [f"  {'ok  ' if e['held'] else 'FAIL'} {e['expectation']}  (seen: {e['seen']})"
                 for e in self.expectations if not (failed_only and e["held"])]
        return lines + ([f"  ERROR {self.error}"] if self.error else [])

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    def write(self, run_dir: Path) -> Path:
        """result.json in `run_dir`: private, and with every key the run met redacted."""
        remember_env_secrets()
        path = run_dir / RESULT_FILE
        write_private(path, redact_text(self.to_json()))
        return path

    @classmethod
    def load(cls, path: Path) -> RunRecord:
        """A record read back; a RecordError that names the file and the field if it is not one."""
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RecordError(f"{path}: cannot read a faultlab result: {exc}") from None
        if not isinstance(data, dict):
            raise RecordError(f"{path}: not a faultlab result (a JSON object)")
        if not isinstance(data.get("format", FORMAT), int) or data.get("format", FORMAT) > FORMAT:
            raise RecordError(f"{path}: written by a newer faultlab (format {data.get('format')});"
                              f" this one reads format {FORMAT}: upgrade faultlab")
        known = set(cls.__dataclass_fields__)
        # Where the run folder is now (a CI artefact is not where the run was made), so that
        # reports link to its files.
        data["run_dir"] = str(path.parent)
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except TypeError as exc:
            raise RecordError(f"{path}: not a faultlab result ({exc})") from None


def attachments_in(run_dir: Path) -> list[str]:
    return [name for name in ATTACHMENTS if (run_dir / name).exists()]


def _sha256(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def find_records(folders: list[Path]) -> list[Path]:
    """Every result.json under `folders` (a run folder, a runs folder, a CI artefact tree, a
    result.json itself), each once however many of the folders hold it."""
    found: dict[Path, Path] = {}
    for folder in folders:
        paths = [folder] if folder.is_file() else sorted(folder.rglob(RESULT_FILE))
        for path in paths:
            found.setdefault(path.resolve(), path)
    return list(found.values())
