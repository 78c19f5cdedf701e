"""`faultlab events`: the event vocabulary as a JSON Schema, and a run folder's events held to it
(docs/guide/own-client.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from faultlab.commands.exits import fail


def load_plugin_records() -> None:
    """The records every installed scenario pack and client kind brings join the vocabulary as
    they load."""
    from faultlab.errors import FaultlabError
    from faultlab.profile.client_kinds import client_kinds

    try:
        client_kinds()
    except FaultlabError as exc:
        fail(str(exc), 2)


@click.group()
def events() -> None:
    """The events a run writes: every one's JSON Schema, and a run folder checked against them."""


@events.command()
def schema() -> None:
    """Print the JSON Schema of every event (one of its records, by `event`): faultlab's, and
    every installed scenario pack's and client kind's.

    Exit codes: 0."""
    load_plugin_records()
    from faultlab.vocabulary.schema import event_schema

    click.echo(json.dumps(event_schema(), indent=2))


@events.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path),
                metavar="RUN_DIR...")
def check(run_dirs: tuple[Path, ...]) -> None:
    """Name each event of each RUN_DIR's events.jsonl (and *.events.jsonl) that no record has,
    and each field of the wrong type, as FILE:LINE.

    Exit codes: 0 none; 1 some; 2 not a run folder."""
    from faultlab.vocabulary.schema import RUN_EVENTS, event_files

    folders: list[tuple[Path, list[Path]]] = []
    for run_dir in run_dirs:
        if not run_dir.is_dir():
            fail(f"{run_dir}: not a folder (give a run folder, runs/NAME-TIME)", 2)
        if not (files := event_files(run_dir)):
            fail(f"{run_dir}: no {RUN_EVENTS} (not a run folder)", 2)
        folders.append((run_dir, files))
    load_plugin_records()
    from faultlab.vocabulary.schema import check_file

    found = lines = 0
    for _, files in folders:
        for path in files:
            for problem in check_file(path, str(path)):
                click.echo(problem)
                found += 1
            lines += sum(1 for line in path.open() if line.strip())
    count = sum(len(files) for _, files in folders)
    click.echo(f"{found} problem(s) in {lines} event(s) of {count} file(s)", err=True)
    sys.exit(1 if found else 0)
