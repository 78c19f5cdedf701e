"""`faultlab lab`: lab maintenance."""

from __future__ import annotations

import click

from faultlab.commands.exits import fail
from faultlab.errors import FaultlabError


@click.group()
def lab() -> None:
    """Lab maintenance."""


@lab.command()
def gc() -> None:
    """Remove what killed runs left behind: their containers, the processes in their namespaces,
    the namespaces, their scratch folders and leases, and their folders in the temp dir; live
    runs' are spared.

    Exit codes: 0; 3 something could not be removed."""
    from faultlab.lab.gc import collect

    try:
        report = collect()
    except FaultlabError as exc:
        fail(str(exc), 3)
    for line in report:
        click.echo(line)
    if not report:
        click.echo("nothing to clean")
