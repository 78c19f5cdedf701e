"""The `faultlab` command: parses, calls the library, maps errors to exit codes.

Exit codes: 0 every expectation held; 1 an expectation failed; 2 usage or profile error;
3 the lab or a mechanism failed; 130 interrupted by SIGINT, 143 by SIGTERM, at any moment (what
the run had built is torn down first; see `faultlab.interrupt`).
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from faultlab import interrupt
from faultlab.errors import FaultlabError, PrivilegeError, ProfileError

if TYPE_CHECKING:
    from collections.abc import Callable

    from faultlab.events import Event

# What `main` exits with after SIGINT; after SIGTERM, 143 (128 + the signal's number).
EXIT_INTERRUPTED = 130


def _fail(message: str, code: int) -> None:
    click.echo(f"faultlab: {message}", err=True)
    sys.exit(code)


def main() -> None:
    """The `faultlab` command: click's, with SIGINT and SIGTERM answered at any moment (the
    script's first call; importing this module does not touch signals)."""
    interrupt.catch()
    code: Any = 0
    try:
        try:
            interrupt.raise_from_now()
            cli.main(prog_name="faultlab")
        except SystemExit as exc:
            code = exc.code
        interrupt.note_only()
    except interrupt.Interrupted:
        click.echo(f"faultlab: interrupted by {interrupt.describe()}", err=True)
    sys.exit(interrupt.exit_code(code))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="faultlab")
def cli() -> None:
    """Network fault injection for WebSocket and Live API clients."""


def _profile_files(paths: tuple[str, ...]) -> list[Path]:
    """The files that PATH arguments (files, folders, profile names) name; exit 2 when none."""
    from faultlab.catalogue import resolve_profiles

    try:
        files = resolve_profiles(paths)
    except ProfileError as exc:
        for line in exc.problems:
            click.echo(line, err=True)
        sys.exit(2)
    if not files:
        _fail("no profiles found in " + ", ".join(paths), 2)
    return files


@cli.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH_OR_NAME...")
def validate(paths: tuple[str, ...]) -> None:
    """Check profiles (files, folders, or names such as silent-loss); print every problem as
    file:line: field: message."""
    from faultlab.profile import load_profile

    problems: list[str] = []
    files = _profile_files(paths)
    for path in files:
        try:
            load_profile(path)
        except ProfileError as exc:
            problems += exc.problems
    for line in problems:
        click.echo(line, err=True)
    if problems:
        sys.exit(2)
    click.echo(f"{len(files)} profile(s) valid")


def _progress(quiet: bool) -> Callable[[Event], None] | None:
    if quiet:
        return None

    def show(event: Event) -> None:
        fields = " ".join(f"{k}={v}" for k, v in event.fields.items() if k not in ("argv", "path"))
        click.echo(f"{event.t:8.3f}  {event.source:<8} {event.name:<22} {fields}"[:160])

    return show


@cli.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH_OR_NAME...")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"),
              show_default=True, help="Where run folders are written.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the verdicts.")
@click.option("--repeat", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="Run each profile this many times.")
@click.option("--client-image", metavar="IMAGE", default=None,
              help="Run each profile's client as a container of IMAGE (the same command or "
                   "builtin; faultlab-clients has the builtins).")
def run(paths: tuple[str, ...], runs_dir: Path, quiet: bool, repeat: int,
        client_image: str | None) -> None:
    """Run profiles (files, folders of them, or names such as silent-loss) and check their
    expectations.

    With several runs, a table in the field study's style (outcomes and latency ranges per
    scenario) is printed and written to RUNS_DIR/suite-TIME.md."""
    import asyncio

    # Before the runner's imports, so that a misspelt name is answered at once.
    files = _profile_files(paths)
    from faultlab.lab.privilege import reexec_in_user_namespace
    from faultlab.profile import Profile, load_profile, with_client_image
    from faultlab.report.suite import write_suite
    from faultlab.result import RunResult
    from faultlab.runner import Run

    try:
        profiles = [load_profile(f) for f in files]
    except ProfileError as exc:
        for line in exc.problems:
            click.echo(line, err=True)
        sys.exit(2)
    if client_image is not None:
        try:
            profiles = [with_client_image(p, client_image) for p in profiles]
        except ValueError as exc:
            _fail(f"--client-image: {exc}", 2)
    try:
        reexec_in_user_namespace(sys.argv[1:])
    except PrivilegeError as exc:
        _fail(str(exc), 3)

    results: list[RunResult] = []

    async def run_all() -> int:
        worst = 0
        total = len(profiles) * repeat
        for profile in profiles:
            for _ in range(repeat):
                count = f" ({len(results) + 1}/{total})" if total > 1 else ""
                result = await run_one(profile, count)
                results.append(result)
                worst = max(worst, result.exit_code)
        return worst

    async def run_one(profile: Profile, progress: str) -> RunResult:
        click.echo(f"== {profile.name}{progress}")
        result = await Run(profile, runs_dir, _progress(quiet)).execute()
        for o in result.outcomes:
            mark = "ok  " if o.held else "FAIL"
            click.echo(f"  {mark} {o.expectation}  (seen: {o.seen})")
        if result.error:
            click.echo(f"  ERROR {result.error}")
        click.echo(f"== {profile.name}: {result.verdict} in {result.duration_s:.2f}s; "
                   f"report: {result.run_dir / 'summary.md'}")
        return result

    try:
        code = asyncio.run(interrupt.cancel_on_signal(run_all()))
    except asyncio.CancelledError:  # only a signal cancels the runs; main() exits with its code
        _fail(f"interrupted by {interrupt.describe()}; the lab was torn down", EXIT_INTERRUPTED)
    except FaultlabError as exc:
        _fail(str(exc), 3)
    # From here a signal only changes the exit code: the suite table is written whole.
    if len(results) > 1:
        table = runs_dir / f"suite-{datetime.now():%Y%m%d-%H%M%S}.md"
        click.echo("\n" + write_suite(results, table) + f"\n(written to {table})")
    sys.exit(code)


@cli.command()
def profiles() -> None:
    """List the profiles that run and validate take by name, each with its first sentence."""
    from faultlab.catalogue import profile_catalogue, profile_summary

    shelves = profile_catalogue()
    width = max((len(name) for _, names in shelves for name in names), default=0)
    indent = "  " if len(shelves) > 1 else ""
    room = max(shutil.get_terminal_size((110, 24)).columns - len(indent) - width - 2, 30)
    for heading, names in shelves:
        if indent:
            click.echo(f"{heading}:")
        for name, path in names.items():
            summary = textwrap.shorten(profile_summary(path), room, placeholder=" ...")
            click.echo(f"{indent}{name:<{width}}  {summary}".rstrip())


@cli.group()
def lab() -> None:
    """Lab maintenance."""


@lab.command()
def gc() -> None:
    """Remove what killed runs left behind: the processes in their namespaces, the namespaces,
    their scratch folders and leases, and their folders in the temp dir; live runs' are spared."""
    from faultlab.lab.gc import collect

    try:
        report = collect()
    except FaultlabError as exc:
        _fail(str(exc), 3)
    for line in report:
        click.echo(line)
    if not report:
        click.echo("nothing to clean")


@cli.command()
def doctor() -> None:
    """Show what faultlab can use on this machine, and how to fix what is missing."""
    from faultlab.doctor import diagnose

    ok = True
    for check in diagnose():
        click.echo(f"{'ok  ' if check.ok else ('warn' if check.optional else 'FAIL')} "
                   f"{check.name:<16} {check.detail}")
        if not check.ok and check.fix:
            click.echo(f"     {'':<16} fix: {check.fix}")
        ok = ok and (check.ok or check.optional)
    sys.exit(0 if ok else 1)


@cli.group()
def emulator() -> None:
    """The Live API emulator."""


@emulator.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0 picks a free one).")
@click.option("--personality", default="gemini-dev-2026-10", show_default=True,
              help="Which measured service behaviour to reproduce.")
@click.option("--time-scale", default=1.0, show_default=True, type=float,
              help="Factor on every server timer (0.1 replays ten times faster).")
@click.option("--ca-dir", type=click.Path(path_type=Path), default=None,
              help="Folder of the lab CA (default: ~/.local/share/faultlab/ca).")
@click.option("--utterances", type=click.Path(path_type=Path), multiple=True,
              help="Folder of NAME.wav + NAME.txt: speech the emulator recognises (repeatable).")
@click.option("--events", "events_path", type=click.Path(path_type=Path), default=None,
              help="JSONL file for the emulator's events (default: $FAULTLAB_EVENTS).")
@click.option("--seed", type=int, default=None, help="Seed for the drawn delays.")
@click.option("--set", "settings", multiple=True, metavar="FIELD=YAML",
              help="Change one personality field, e.g. --set connection_lifetime_s=600.")
def serve(host: str, port: int, personality: str, time_scale: float, ca_dir: Path | None,
          utterances: tuple[Path, ...], events_path: Path | None, seed: int | None,
          settings: tuple[str, ...]) -> None:
    """Serve the Live API on TLS; prints the environment an SDK client needs."""
    import asyncio

    import yaml

    from faultlab.emulator.run import serve_until_stopped

    overrides: dict[str, object] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _fail(f"--set {item!r}: write FIELD=VALUE", 2)
        try:
            overrides[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            _fail(f"--set {item!r}: the value is not YAML", 2)

    def announce(env: dict[str, str], bound: int) -> None:
        for key, value in env.items():
            click.echo(f"export {key}={value}")
        click.echo(f"# faultlab emulator ({personality}, time scale {time_scale:g}) "
                   f"listening on port {bound}; Ctrl-C stops it", err=True)
        sys.stdout.flush()

    try:
        asyncio.run(serve_until_stopped(host, port, personality, time_scale, ca_dir, utterances,
                                        events_path, seed, announce, overrides))
    except FaultlabError as exc:
        _fail(str(exc), 3)


@cli.group()
def pcap() -> None:
    """Capture analysis."""


@pcap.command()
@click.argument("file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def inspect(file: Path, as_json: bool) -> None:
    """Per flow: packets, bytes, FIN/RST, retransmissions, keepalives, silences, WebSocket frames."""
    from faultlab.capture.flows import analyse, render_text
    from faultlab.capture.pcap import PcapFormatError

    try:
        report = analyse(file)
    except PcapFormatError as exc:
        _fail(f"{file}: {exc}", 2)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo(render_text(report))
