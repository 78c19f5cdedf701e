"""What an exploration measured, one JSON line a run, appended as each run ends: what a resumed
or merged exploration starts from, and what explore.json is made of.

The first line is the exploration's head: the base profile's digest, the space, the unhurt run's
boundaries and the fault variants. Every later line is one run: its point's key (`baseline` for
the unhurt run), why it ran (`grid`, `refine`, `shrink`, `confirm`), its repeat, verdict, the
expectations that failed, whether every step fired, and its run folder. A run that a signal cut
short is not written: a resumed exploration runs it again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from faultlab.errors import FaultlabError
from faultlab.private import write_private

JOURNAL = "journal.jsonl"
FORMAT = 1
BASELINE = "baseline"


class JournalError(FaultlabError):
    """A journal that cannot be read or continued; the message names the file and line."""


@dataclass(frozen=True)
class Measured:
    """One run of a point (or of the unhurt profile)."""

    key: str
    purpose: str
    repeat: int
    verdict: str
    failed: tuple[str, ...] = ()
    unfired: bool = False
    error: str | None = None
    run_dir: str = ""
    duration_s: float = 0.0

    @property
    def outcome(self) -> str:
        """`pass`, `fail: <the failed expectations>`, `error`, or `unfired` (a step never
        fired: the run says nothing of its point)."""
        if self.verdict == "ERROR":
            return "error"
        if self.unfired:
            return "unfired"
        return "pass" if self.verdict == "PASS" else "fail: " + " & ".join(self.failed)

    @property
    def failing(self) -> bool:
        return self.outcome.startswith("fail")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["failed"] = list(self.failed)
        return d


@dataclass
class Head:
    """What an exploration is about: continued or merged only with the same head."""

    profile_sha256: str
    space: dict[str, Any]
    boundaries: list[dict[str, Any]]
    variants: list[dict[str, Any]]
    shard: str | None = None
    format: int = FORMAT

    def same_search(self, other: Head) -> str | None:
        """Why `other` is not the same exploration (None when it is)."""
        for name in ("profile_sha256", "space", "variants", "boundaries"):
            if getattr(self, name) != getattr(other, name):
                what = {"profile_sha256": "the profile", "space": "the explore block",
                        "variants": "the faults", "boundaries": "the unhurt session's messages"}
                return f"{what[name]} differ"
        return None


@dataclass
class Journal:
    """An exploration's journal file: its head and every run measured so far."""

    path: Path
    head: Head | None = None
    runs: list[Measured] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> Journal:
        journal = cls(path)
        if not path.exists():
            return journal
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if number == 1 and "head" in data:
                    journal.head = Head(**data["head"])
                elif "run" in data:
                    run = data["run"]
                    journal.runs.append(Measured(**{**run, "failed": tuple(run["failed"])}))
                else:
                    raise ValueError("neither a head nor a run")
            except (ValueError, TypeError, KeyError) as exc:
                # A line cut by a crash mid-write is the last one; it is run again.
                if number == len(lines):
                    break
                raise JournalError(f"{path}:{number}: not an exploration journal line: {exc}"
                                   ) from None
        if journal.head is not None and journal.head.format > FORMAT:
            raise JournalError(f"{path}:1: written by a newer faultlab (format "
                               f"{journal.head.format}); upgrade faultlab")
        return journal

    def start(self, head: Head) -> None:
        self.head = head
        write_private(self.path, json.dumps({"head": asdict(head)}, sort_keys=True) + "\n")
        for run in self.runs:
            self._append(run)

    def add(self, run: Measured) -> None:
        self.runs.append(run)
        self._append(run)

    def _append(self, run: Measured) -> None:
        with self.path.open("a") as out:
            out.write(json.dumps({"run": run.to_dict()}, sort_keys=True) + "\n")

    def of(self, key: str, purposes: Iterable[str] | None = None) -> list[Measured]:
        wanted = None if purposes is None else set(purposes)
        return [r for r in self.runs if r.key == key and (wanted is None or r.purpose in wanted)]

    def first(self, key: str) -> Measured | None:
        """The point's measurement (its first run, not a confirmation)."""
        return next((r for r in self.runs if r.key == key and r.purpose != "confirm"), None)


def merged(journals: Sequence[Journal], path: Path) -> Journal:
    """One journal of the shards' journals (each point once), written to `path`; a JournalError
    when they are not shards of one exploration."""
    heads = [j.head for j in journals]
    if any(h is None for h in heads):
        missing = next(j.path for j in journals if j.head is None)
        raise JournalError(f"{missing}: no exploration head: the shard never ran its unhurt run")
    first = heads[0]
    assert first is not None
    for journal in journals[1:]:
        assert journal.head is not None
        why = first.same_search(journal.head)
        if why is not None:
            raise JournalError(f"{journal.path} and {journals[0].path} are not shards of one "
                               f"exploration: {why}")
    out = Journal(path)
    seen: set[tuple[str, str, int]] = set()
    # A shard's run folders, named from the merged exploration's folder.
    runs = [replace(r, run_dir=os.path.relpath(j.path.parent / r.run_dir, path.parent))
            if r.run_dir and not Path(r.run_dir).is_absolute() else r
            for j in journals for r in j.runs]
    for run in sorted(runs, key=lambda r: (r.purpose != "baseline", r.key, r.repeat)):
        if (run.key, run.purpose, run.repeat) not in seen:
            seen.add((run.key, run.purpose, run.repeat))
            out.runs.append(run)
    out.start(Head(**{**asdict(first), "shard": None}))
    return out
