"""`faultlab report`: draw a run's or a suite's reports again, or join runs made elsewhere into one
suite; and the suite's reports that `faultlab run` writes too."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from faultlab.commands.exits import fail

if TYPE_CHECKING:
    from faultlab.report.record import RunRecord


def report_suite(records: list[RunRecord], table: Path | None, junit: Path | None) -> int:
    """The suite table (printed, and written to `table` with its page beside it) and the JUnit
    file; the exit code of the worst run."""
    from faultlab.report.build import write_suite_reports
    from faultlab.report.junit import write_junit

    if table is not None:
        text, _ = write_suite_reports(records, table)
        click.echo(f"\n{text}\n(written to {table}; the suite's page: {table.with_suffix('.html')})")
    if junit is not None:
        write_junit(records, junit)
        click.echo(f"JUnit: {junit}")
    return max((r.exit_code for r in records), default=0)


class ReportGroup(click.Group):
    """`faultlab report PATH...` is `faultlab report build PATH...`; `merge` and `build` are
    its commands."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # A path named like a command is the command: `faultlab report ./merge` draws a folder.
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["build", *args]
        return super().parse_args(ctx, args)


@click.group(cls=ReportGroup)
def report() -> None:
    """Draw a run's or a suite's reports again (`faultlab report PATH...`), or join runs made
    elsewhere (CI shards, parallel jobs) into one suite (`faultlab report merge DIR...`)."""


@report.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path),
                metavar="PATH...")
def build(paths: tuple[Path, ...]) -> None:
    """(Re)build report.html and timeline.png of each run folder in PATH..., and a suite's page:
    PATH is a run folder, a suite's file (suite-TIME.md, .html or .json), or a folder of runs
    (then a suite page of all of them is written in it). Prints the files written.

    Exit codes: 0; 1 a picture could not be drawn (said on stderr); 2 PATH is none of these, or
    a result.json cannot be read."""
    from faultlab.commands.events import load_plugin_records
    from faultlab.report.build import rebuild
    from faultlab.report.record import RecordError

    load_plugin_records()
    try:
        written, failed = rebuild(list(paths))
    except RecordError as exc:
        fail(str(exc), 2)
    for path in written:
        click.echo(str(path))
    if failed:
        fail(f"not drawn (see above): {', '.join(map(str, failed))}", 1)


@report.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path),
                metavar="DIR...")
@click.option("--junit", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Also write the joined runs as JUnit XML to FILE.")
@click.option("--out", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Write the suite table here (default: suite-merged-TIME.md in the first DIR).")
def merge(folders: tuple[Path, ...], junit: Path | None, out: Path | None) -> None:
    """Join the runs found under DIR... (every result.json: shards' runs folders, CI artefacts)
    into one suite table, one JUnit file and one exit code.

    Exit codes: the worst run's (as `run`'s); 2 no result found, or one that is not
    faultlab's."""
    from faultlab.report.record import RecordError, RunRecord, find_records

    paths = find_records(list(folders))
    if not paths:
        fail(f"no result.json under {', '.join(map(str, folders))}", 2)
    try:
        records = [RunRecord.load(p) for p in paths]
    except RecordError as exc:
        fail(str(exc), 2)
    # In the order one run of the whole suite reports them: by profile file, then time.
    records.sort(key=lambda r: (r.profile_path, r.profile, r.started))
    first = folders[0] if folders[0].is_dir() else folders[0].parent
    sys.exit(report_suite(records, out or first / f"suite-merged-{datetime.now():%Y%m%d-%H%M%S}.md",
                           junit))
