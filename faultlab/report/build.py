"""A run's reports (timeline.png, summary.md, report.html) and a suite's (the table, its page,
the list of its runs), written as a run or a suite ends and drawn again from the files by
`faultlab report PATH`.

A run's pictures are drawn from its events.jsonl and result.json alone, so a run made elsewhere
(a CI shard, an older faultlab) is drawn the same way. Drawing comes after the verdict is on disk
(result.json), and a picture that cannot be drawn is said on stderr and left out: the run keeps
its verdict, its other reports and its exit code.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from faultlab.events import Event, read_events
from faultlab.private import remember_env_secrets, write_private
from faultlab.report.record import (
    PAGE_FILE,
    RESULT_FILE,
    TIMELINE_PICTURE,
    RecordError,
    RunRecord,
    attachments_in,
    find_records,
)

if TYPE_CHECKING:
    from faultlab.report.sequence import View
    from faultlab.result import RunResult

SUMMARY_FILE = "summary.md"


def _drawn(what: object, draw: Callable[[], object]) -> bool:
    """Whether `draw` drew `what`; a failure is one line on stderr, never the run's end."""
    try:
        draw()
    except Exception as exc:  # a drawing's bug, or a client's odd event, must not cost the run
        print(f"faultlab: {what} not drawn: {type(exc).__name__}: {exc}", file=sys.stderr)
        return False
    return True


def write_run_reports(run_dir: Path, events: Sequence[Event], record: RunRecord,
                      result: RunResult | None = None, timeline: bool = True) -> list[str]:
    """timeline.png (unless not `timeline`), then summary.md (of `result`, when given: it shows
    the picture if drawn), then report.html (which links every file the folder holds by then) in
    `run_dir`; the names of those written."""
    from faultlab.report.columns import summary_events
    from faultlab.report.page import write_run_page
    from faultlab.report.png import write_timeline_png
    from faultlab.report.sequence import build_view
    from faultlab.report.summary import write_summary

    # What the pictures show is what result.json says: with every secret the run met redacted.
    remember_env_secrets()
    record = record.redacted()
    views: list[View] = []
    _drawn(f"{run_dir}: the run as lanes", lambda: views.append(build_view(
        events, record, description=record.description, pack_events=summary_events())))
    written = []

    def draw(name: str, write: Callable[[View, Path], object]) -> None:
        if views and _drawn(run_dir / name, lambda: write(
                replace(views[0], files=attachments_in(run_dir)), run_dir / name)):
            written.append(name)

    if timeline:
        draw(TIMELINE_PICTURE, write_timeline_png)
    if result is not None:
        picture = TIMELINE_PICTURE if TIMELINE_PICTURE in written else None
        if _drawn(run_dir / SUMMARY_FILE,
                  lambda: write_summary(result, run_dir / SUMMARY_FILE, picture)):
            written.append(SUMMARY_FILE)
    draw(PAGE_FILE, write_run_page)
    return written


def view_of_run(run_dir: Path) -> View:
    """The view of a finished run's folder (its events.jsonl and result.json)."""
    from faultlab.report.columns import summary_events
    from faultlab.report.sequence import build_view

    record = RunRecord.load(run_dir / RESULT_FILE)
    return build_view(_events_of(run_dir), record, description=record.description,
                      pack_events=summary_events())


def _events_of(run_dir: Path) -> list[Event]:
    path = run_dir / "events.jsonl"
    try:
        return read_events(path)
    except OSError as exc:
        raise RecordError(f"{run_dir}: cannot read the run's events ({exc})") from None


def rebuild_run(run_dir: Path) -> tuple[RunRecord, list[str]]:
    """Draw a finished run's pictures again from its files: its record and the names written."""
    record = RunRecord.load(run_dir / RESULT_FILE)
    return record, write_run_reports(run_dir, _events_of(run_dir), record)


def write_suite_reports(records: Sequence[RunRecord], table: Path) -> tuple[str, bool]:
    """The suite's table (`table`, markdown), its page and the list of its runs beside it (the
    same name, .html and .json); the table's text, and whether the page was drawn."""
    from faultlab.report.suite import write_suite
    from faultlab.report.suite_page import write_suite_page

    text = write_suite(records, table)
    page = table.with_suffix(".html")
    drawn = _drawn(page, lambda: write_suite_page(records, page))
    manifest = {"runs": [os.path.relpath(Path(r.run_dir) / RESULT_FILE, table.parent)
                         for r in records if r.run_dir]}
    write_private(table.with_suffix(".json"), json.dumps(manifest, indent=2) + "\n")
    return text, drawn


def is_suite_file(path: Path) -> bool:
    """A suite's table, page or list of runs: a file with the list of runs beside it."""
    return path.is_file() and path.suffix in (".md", ".html", ".json") \
        and path.with_suffix(".json").is_file()


def suite_runs(suite_file: Path) -> list[Path]:
    """The result.json of each run of a suite, from the list written beside its table."""
    manifest = suite_file.with_suffix(".json")
    try:
        runs = json.loads(manifest.read_text())["runs"]
        return [suite_file.parent / str(r) for r in runs]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RecordError(f"{manifest}: cannot read the suite's list of runs ({exc})") from None


def rebuild(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Draw again the reports of run folders, of a suite (its table, page or list of runs) or of
    every run under a folder (and then a suite of them all, in that folder): the files written,
    and those that could not be drawn."""
    runs: list[Path] = []  # result.json files
    suites: list[tuple[list[Path], Path]] = []  # the runs of a suite, and its table
    for path in paths:
        if is_suite_file(path):
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
            raise RecordError(f"{path}: not a run folder, a folder of runs or a suite's file "
                              "(suite-TIME.md, .html or .json, with its .json beside it)")
        runs += found
    written: list[Path] = []
    failed: list[Path] = []
    records = {}
    for result in dict.fromkeys(runs):
        records[result], names = rebuild_run(result.parent)
        for name in (TIMELINE_PICTURE, PAGE_FILE):
            (written if name in names else failed).append(result.parent / name)
    for found, table in suites:
        _, drawn = write_suite_reports([records[r] for r in found], table)
        written.append(table)
        (written if drawn else failed).append(table.with_suffix(".html"))
    return written, failed
