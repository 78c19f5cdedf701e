"""A run's reports (report.html, timeline.png) and a suite's (the table, its page, the list of its
runs), written as a run or a suite ends and rebuilt from the files by `faultlab report PATH`.

A run's reports are drawn from its events.jsonl and result.json alone, so a run made elsewhere (a
CI shard, an older faultlab) is drawn the same way.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from faultlab.events import Event, read_events
from faultlab.private import write_private
from faultlab.report.page import PAGE_FILE
from faultlab.report.record import (
    RESULT_FILE,
    RecordError,
    RunRecord,
    attachments_in,
    find_records,
)

TIMELINE_PICTURE = "timeline.png"
SUITE_SUFFIXES = (".md", ".html", ".json")


def write_run_reports(run_dir: Path, events: Sequence[Event], record: RunRecord) -> list[str]:
    """timeline.png, then report.html (which links every file the folder holds by then) in
    `run_dir`; the names of those written. A report that cannot be drawn is said on stderr and
    left out: the run's verdict (result.json) and files stand without it."""
    from faultlab.report.page import write_run_page
    from faultlab.report.png import write_timeline_png
    from faultlab.report.registry import summary_events
    from faultlab.report.sequence import build_view

    view = build_view(events, record, description=record.description,
                      pack_events=summary_events())
    written = []
    for name, write in ((TIMELINE_PICTURE, write_timeline_png), (PAGE_FILE, write_run_page)):
        try:
            write(replace(view, files=attachments_in(run_dir)), run_dir / name)
        except Exception as exc:  # a drawing's bug must not cost the run its other reports
            print(f"faultlab: {run_dir / name} not written: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            continue
        written.append(name)
    return written


def rebuild_run(run_dir: Path) -> RunRecord:
    """Draw a finished run's reports again from its files."""
    record = RunRecord.load(run_dir / RESULT_FILE)
    events_file = run_dir / "events.jsonl"
    if not events_file.is_file():
        raise RecordError(f"{run_dir}: no events.jsonl to draw the run from")
    write_run_reports(run_dir, read_events(events_file), record)
    return record


def write_suite_reports(records: Sequence[RunRecord], table: Path) -> str:
    """The suite's table (`table`, markdown), its page and the list of its runs beside it (the
    same name, .html and .json); the table's text."""
    from faultlab.report.suite import write_suite
    from faultlab.report.suite_page import write_suite_page

    text = write_suite(records, table)
    write_suite_page(records, table.with_suffix(".html"))
    manifest = {"runs": [os.path.relpath(Path(r.run_dir) / RESULT_FILE, table.parent)
                         for r in records if r.run_dir]}
    write_private(table.with_suffix(".json"), json.dumps(manifest, indent=2) + "\n")
    return text


def suite_runs(suite_file: Path) -> list[Path]:
    """The result.json of each run of a suite, from the list written beside its table."""
    manifest = suite_file.with_suffix(".json")
    try:
        runs = json.loads(manifest.read_text())["runs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RecordError(f"{manifest}: cannot read the suite's list of runs ({exc})") from None
    return [suite_file.parent / r for r in runs]


def rebuild(paths: Sequence[Path]) -> list[Path]:
    """Rebuild the reports of run folders, of a suite (its table, page or list of runs) or of
    every run under a folder (and then a suite of them all, in that folder); the files written,
    run reports first."""
    runs: list[Path] = []  # result.json files
    suites: list[tuple[list[Path], Path]] = []  # the runs of a suite, and its table
    for path in paths:
        if path.is_file() and path.name.startswith("suite-") and path.suffix in SUITE_SUFFIXES:
            found = suite_runs(path)
            suites.append((found, path.with_suffix(".md")))
        elif path.is_dir() and (path / RESULT_FILE).is_file():
            found = [path / RESULT_FILE]
        elif path.is_dir():
            found = find_records([path])
            if not found:
                raise RecordError(f"{path}: no run folder (result.json) under it")
            suites.append((found, path / f"suite-{datetime.now():%Y%m%d-%H%M%S}.md"))
        else:
            raise RecordError(f"{path}: not a run folder, a folder of runs or a suite's file")
        runs += found
    records = {r: rebuild_run(r.parent) for r in dict.fromkeys(runs)}
    written = [r.parent / name for r in records for name in (PAGE_FILE, TIMELINE_PICTURE)
               if (r.parent / name).exists()]
    for found, table in suites:
        write_suite_reports([records[r] for r in found], table)
        written += [table, table.with_suffix(".html")]
    return written
