"""The `faultlab` command: parses, calls the library, maps errors to exit codes. Here the root
group and the commands of a run; the other groups are modules of `faultlab.commands`.

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
from faultlab.commands import cassette as cassette_commands
from faultlab.commands import emulator as emulator_commands
from faultlab.commands import events as events_commands
from faultlab.commands import explore as explore_commands
from faultlab.commands import lab as lab_commands
from faultlab.commands import report as report_commands
from faultlab.commands.exits import EXIT_INTERRUPTED, fail, fail_with_problems
from faultlab.errors import FaultlabError, PrivilegeError, ProfileError

if TYPE_CHECKING:
    from faultlab.report.record import RunRecord


def main() -> None:
    """The `faultlab` command: click's, with SIGINT and SIGTERM answered at any moment (the
    entry, faultlab.__main__, catches them before importing this module, which does not)."""
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
        interrupt.announce()
    # A signal noted once the work was done (its reports being written) still gives the code.
    interrupt.finish(code)


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
        fail_with_problems(exc)
    if not files:
        fail("no profiles found in " + ", ".join(paths), 2)
    return files


@cli.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH_OR_NAME...")
def validate(paths: tuple[str, ...]) -> None:
    """Check profiles (files, folders, or names such as silent-loss); print every problem as
    file:line: field: message.

    Exit codes: 0 every profile is valid; 2 a problem was found."""
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


def _jobs(value: str) -> int:
    from faultlab.jobs import parse_jobs

    try:
        return parse_jobs(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


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
@click.option("--jobs", "-j", "jobs_text", default="auto", show_default=True, metavar="N|auto",
              help="Runs at once, each in its own lab and process (auto: two per core, at "
                   "most 8; 1: one after another, in this process, its events shown live).")
@click.option("--shard", metavar="K/N", default=None,
              help="Run only the K-th of N stable shards of the runs (for a CI matrix; join "
                   "them with `faultlab report merge`).")
@click.option("--junit", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Also write the runs as JUnit XML to FILE.")
@click.option("--record", is_flag=True,
              help="Record each run's sessions as a cassette (RUN/session.cassette.jsonl), as "
                   "`record: true` in a profile does.")
@click.option("--no-timeline", "timeline", is_flag=True, flag_value=False, default=True,
              help="Draw no timeline.png (report.html still shows each run): ~0.15 s of CPU "
                   "less a run.")
@click.option("--report-to", type=click.Path(path_type=Path), default=None, hidden=True)
def run(paths: tuple[str, ...], runs_dir: Path, quiet: bool, repeat: int,
        client_image: str | None, jobs_text: str, shard: str | None, junit: Path | None,
        record: bool, timeline: bool, report_to: Path | None) -> None:
    """Run profiles (files, folders of them, or names such as silent-loss) and check their
    expectations.

    With several runs, a table in the field study's style (outcomes and latency ranges per
    scenario) is printed and written to RUNS_DIR/suite-TIME.md. Every run folder gets
    result.json.

    Exit codes: the worst run's: 0 every expectation held; 1 one failed; 2 a usage or profile
    error (an unknown name too); 3 the lab or a mechanism failed; 130 interrupted by SIGINT
    (Ctrl-C), 143 by SIGTERM (at any moment, after teardown)."""
    import asyncio

    jobs = _jobs(jobs_text)
    # Before the runner's imports, so that a misspelt name is answered at once.
    files = _profile_files(paths)
    from faultlab.jobs import RunOptions, parse_shard, plan, run_suite, runs_here
    from faultlab.jobs import shard as take_shard
    from faultlab.lab.privilege import reexec_in_user_namespace
    from faultlab.profile import load_profile, recording, unset_pass_env, with_client_image

    try:
        profiles = [load_profile(f) for f in files]
    except ProfileError as exc:
        fail_with_problems(exc)
    if unset := [line for p in profiles for line in unset_pass_env(p)]:
        fail_with_problems(ProfileError(unset))
    if client_image is not None:
        try:
            profiles = [with_client_image(p, client_image) for p in profiles]
        except ValueError as exc:
            fail(f"--client-image: {exc}", 2)
    if record:
        try:
            profiles = [recording(p) for p in profiles]
        except ProfileError as exc:
            fail_with_problems(exc)
    runs = plan(profiles, repeat)
    if shard is not None:
        try:
            runs = take_shard(runs, *parse_shard(shard))
        except ValueError as exc:
            fail(f"--shard: {exc}", 2)
    try:
        reexec_in_user_namespace(sys.argv[1:])
    except PrivilegeError as exc:
        fail(str(exc), 3)
    if shard is not None and not runs:
        click.echo(f"shard {shard}: no runs (fewer runs than shards)")

    # Each run's record under its planned index, also for runs a signal interrupted.
    records: dict[int, RunRecord] = {}

    def tell(record: RunRecord) -> None:
        for line in record.outcome_lines():
            click.echo(line)
        where = f"; report: {Path(record.run_dir) / 'summary.md'}" if record.run_dir else ""
        click.echo(f"== {record.profile}: {record.verdict} in {record.duration_s:.2f}s{where}")

    if runs_here(runs, jobs):
        # While this is one thread with no event loop, and with the runner's modules: the lab's
        # own programs are forked from a copy of it (a warm job has forked its own already).
        import faultlab.runner  # noqa: F401
        from faultlab.lab.zygote import fork_zygote

        fork_zygote()
    code = 0
    try:
        asyncio.run(interrupt.cancel_on_signal(run_suite(
            runs, runs_dir, jobs, RunOptions(client_image, record, timeline), records, click.echo, tell,
            quiet, report_to)))
    except asyncio.CancelledError:  # only a signal cancels the runs; main() exits with its code
        interrupt.announce("the lab was torn down")
        code = EXIT_INTERRUPTED
    except FaultlabError as exc:
        fail(str(exc), 3)
    # From here a signal only changes the exit code: the reports are written whole, of the runs
    # made so far when a signal cut the suite short.
    done = [records[i] for i in sorted(records)]
    table = runs_dir / f"suite-{datetime.now():%Y%m%d-%H%M%S}.md"
    worst = report_commands.report_suite(done, table if len(runs) > 1 and done else None, junit)
    sys.exit(code or worst)


# The widest the names' column of `faultlab profiles` gets: a longer name (a folder's, as
# webrtc/udp-blocked-falls-back-to-turn-tcp) has its summary on the next line, as argparse's help
# has a long option's, so that 80 columns still show each summary's first words.
NAME_COLUMN = 28


@cli.command()
def profiles() -> None:
    """List the profiles that run and validate take by name, each with its first sentence:
    those in ./profiles/ (when it is not the shipped folder), then the shipped ones.

    Exit codes: 0."""
    from faultlab.catalogue import profile_catalogue, profile_summary

    shelves = profile_catalogue()
    width = min(max((len(name) for _, names in shelves for name in names), default=0),
                NAME_COLUMN)
    indent = "  " if len(shelves) > 1 else ""
    room = max(shutil.get_terminal_size((110, 24)).columns - len(indent) - width - 2, 30)
    for heading, names in shelves:
        if indent:
            click.echo(f"{heading}:")
        for name, path in names.items():
            summary = textwrap.shorten(profile_summary(path), room, placeholder=" ...")
            if len(name) > width:  # its summary on the next line, in the column
                click.echo(f"{indent}{name}")
                name = ""
            click.echo(f"{indent}{name:<{width}}  {summary}".rstrip())


@cli.command()
def schema() -> None:
    """Print the profile's JSON Schema (faultlab's and every installed plugin's faults, client
    kinds, personalities and expectations), for an editor: `# yaml-language-server: $schema=FILE`
    on a profile's first line.

    Exit codes: 0; 2 a plugin does not load."""
    from faultlab.errors import FaultlabError
    from faultlab.profile.schema import schema_text

    try:
        click.echo(schema_text(), nl=False)
    except FaultlabError as exc:  # a plugin that does not load
        fail(str(exc), 2)


@cli.command()
def doctor() -> None:
    """Show what faultlab can use on this machine, and how to fix what is missing; then every
    fault with its layer and mechanism.

    Exit codes: 0 all there; 1 something is missing."""
    from faultlab.doctor import diagnose, fault_catalogue

    ok = True
    for check in diagnose():
        click.echo(f"{'ok  ' if check.ok else ('warn' if check.optional else 'FAIL')} "
                   f"{check.name:<16} {check.detail}")
        if not check.ok and check.fix:
            click.echo(f"     {'':<16} fix: {check.fix}")
        ok = ok and (check.ok or check.optional)
    click.echo("\nfaults (name, layer, mechanism):")
    for fault in fault_catalogue():
        click.echo(f"  {fault.name:<14} {fault.layer:<7} {fault.mechanism}")
    sys.exit(0 if ok else 1)


@cli.group()
def pcap() -> None:
    """Capture analysis."""


_capture_path = click.argument("path", type=click.Path(path_type=Path), metavar="PCAP|RUN_DIR")
_keylog_option = click.option(
    "--keylog", "keylogs", multiple=True, type=click.Path(path_type=Path), metavar="FILE",
    help="TLS key log (NSS format, as SSLKEYLOGFILE writes) to read wss:// with; repeatable. "
         "A run's key logs (in its folder, beside its capture) are used by themselves.")
_json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


def _show_capture(path: Path, keylogs: tuple[Path, ...], as_json: bool, server_side: bool) -> None:
    """Read a capture (a file, or a run folder's) in one pass and print the flows or the
    server's behaviour; bad input is one line and exit 2, a tshark failure exit 3."""
    from faultlab.capture.pcap import PcapFormatError
    from faultlab.capture.source import CaptureInputError, locate, read_capture

    try:
        report = read_capture(locate(path, keylogs, server_side))
    except CaptureInputError as exc:
        fail(str(exc), 2)
    except PcapFormatError as exc:
        fail(f"{path}: {exc}", 2)
    except OSError as exc:
        fail(f"{exc.filename or path}: {exc.strerror}", 2)
    except FaultlabError as exc:
        fail(str(exc), 3)
    if server_side:
        from faultlab.capture.behaviour import ServerReport

        server = ServerReport.of(report)
        click.echo(json.dumps(server.to_dict(), indent=2) if as_json else server.render_text())
    elif as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        from faultlab.capture.flows_text import render_text

        click.echo(render_text(report))


@pcap.command()
@_capture_path
@_keylog_option
@_json_option
def inspect(path: Path, keylogs: tuple[Path, ...], as_json: bool) -> None:
    """Flows and WebSocket frames of a capture, wss:// included.

    PATH is a pcap or a run folder (its capture.pcap). Per flow: packets, bytes, FIN/RST,
    retransmissions, keepalives, silences, and every frame each way; frames inside TLS need
    key logs (a run's, in its folder or beside the capture, are found by themselves) and tshark.

    Exit codes: 0; 2 a bad file or path; 3 tshark failed."""
    _show_capture(path, keylogs, as_json, server_side=False)


@pcap.command("server")
@_capture_path
@_keylog_option
@_json_option
def server_report(path: Path, keylogs: tuple[Path, ...], as_json: bool) -> None:
    """What the server did on each connection of a capture.

    PATH is a pcap or a run folder (its server.pcap when there is one, else capture.pcap). Per
    connection: the last data, the server's longest silence, its pings and keepalives, its close
    and the client's silence before it, its retransmissions, and when its TCP gave up.

    Exit codes: 0; 2 a bad file or path; 3 tshark failed."""
    _show_capture(path, keylogs, as_json, server_side=True)


for command in (report_commands.report, lab_commands.lab, emulator_commands.emulator,
                emulator_commands.calibrate, cassette_commands.cassette,
                explore_commands.explore, events_commands.events):
    cli.add_command(command)
