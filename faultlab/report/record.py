"""result.json: a run as machines read it, and all that a suite table, JUnit XML and `report
merge` need, so that runs made elsewhere (parallel jobs, CI shards) join one suite.

One object: faultlab's version; the profile (name, path, sha256 of its file); the verdict, exit
code and error; when it started and how long it ran; the processes' exit codes and endings; the
faults with their trigger and `applied_in_ms`; the expectations with what was seen; the steps that
never fired; the run folder and its files; and `cells`, each suite-table column's value for this
run (`faultlab.report.registry`), which the table combines over a scenario's runs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faultlab.errors import FaultlabError
from faultlab.private import redact_text, remember_env_secrets, write_private
from faultlab.report.registry import columns

if TYPE_CHECKING:
    from faultlab.result import RunResult

RESULT_FILE = "result.json"
FORMAT = 1
# The run folder's files a report points at, where the run made them.
ATTACHMENTS = ("summary.md", "events.jsonl", "capture.pcap", "client.log", "target.log",
               "proxy.log")


class RecordError(FaultlabError):
    """A result.json that cannot be read; the message names the file."""


def faultlab_version() -> str:
    try:
        return version("faultlab")
    except PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class RunRecord:
    """One run, as result.json holds it."""

    profile: str
    verdict: str
    exit_code: int
    run_dir: str
    started: str
    duration_s: float
    profile_path: str = ""
    profile_sha256: str = ""
    backend: str = "netns"
    error: str | None = None
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    endings: dict[str, str] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    expectations: list[dict[str, Any]] = field(default_factory=list)
    unfired: list[str] = field(default_factory=list)
    attachments: list[str] = field(default_factory=list)
    cells: dict[str, Any] = field(default_factory=dict)
    faultlab: str = ""
    format: int = FORMAT

    @classmethod
    def of(cls, result: RunResult) -> RunRecord:
        """The record of a finished run."""
        from faultlab.report.summary import describe_ending

        p = result.profile
        applied = {e.fields.get("step"): e for e in result.events if e.name == "fault.applied"}
        reverted = {e.fields.get("step"): e.t for e in result.events if e.name == "fault.reverted"}
        faults = [{"step": step, "fault": e.fields.get("fault"), "layer": e.fields.get("layer"),
                   "trigger": e.fields.get("trigger"), "t": round(e.t, 6),
                   "applied_in_ms": e.fields.get("applied_in_ms"),
                   "reverted_t": None if step not in reverted else round(reverted[step], 6)}
                  for step, e in applied.items()]
        observed = result.observed
        return cls(
            profile=p.name, verdict=result.verdict, exit_code=result.exit_code,
            run_dir=str(result.run_dir),
            started=result.started.astimezone().isoformat(timespec="seconds"),
            duration_s=round(result.duration_s, 3), profile_path=str(p.path or ""),
            profile_sha256=_sha256(p.path), backend=p.backend, error=result.error,
            exit_codes=dict(result.exit_codes),
            endings={role: describe_ending(e) for role, e in result.endings.items()},
            faults=faults,
            expectations=[{"expectation": o.expectation, "held": o.held, "seen": o.seen}
                          for o in result.outcomes],
            unfired=list(result.unfired),
            attachments=[name for name in ATTACHMENTS if (result.run_dir / name).exists()],
            cells={c.heading: c.cell(observed) for c in columns()},
            faultlab=faultlab_version(),
        )

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
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except TypeError as exc:
            raise RecordError(f"{path}: not a faultlab result ({exc})") from None


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
