"""How every `faultlab` command ends on an error: one line and an exit code (see `faultlab.cli`)."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from faultlab.errors import ProfileError

# What `main` exits with after SIGINT; after SIGTERM, 143 (128 + the signal's number).
EXIT_INTERRUPTED = 130


def fail(message: str, code: int) -> NoReturn:
    click.echo(f"faultlab: {message}", err=True)
    sys.exit(code)


def fail_with_problems(exc: ProfileError) -> NoReturn:
    """Every `file:line: field: message` line of a malformed file, then exit 2."""
    for line in exc.problems:
        click.echo(line, err=True)
    sys.exit(2)
