"""The `faultlab` command: parses, calls the library, maps errors to exit codes.

Exit codes: 0 every expectation held; 1 an expectation failed; 2 usage or profile error;
3 the lab or a mechanism failed; 130 interrupted by SIGINT, 143 by SIGTERM, at any moment (what
the run had built is torn down first; see `faultlab.interrupt`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from faultlab import interrupt
from faultlab.errors import FaultlabError, PrivilegeError, ProfileError

if TYPE_CHECKING:
    from collections.abc import Callable

    from faultlab.events import Event
    from faultlab.report.record import RunRecord

# What `main` exits with after SIGINT; after SIGTERM, 143 (128 + the signal's number).
EXIT_INTERRUPTED = 130


def _fail(message: str, code: int) -> None:
    click.echo(f"faultlab: {message}", err=True)
    sys.exit(code)


def _fail_with_problems(exc: ProfileError) -> NoReturn:
    """Every `file:line: field: message` line of a malformed file, then exit 2."""
    for line in exc.problems:
        click.echo(line, err=True)
    sys.exit(2)


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
        _fail_with_problems(exc)
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


def _jobs(value: str) -> int:
    from faultlab.jobs import default_jobs

    if value == "auto":
        return default_jobs()
    if not value.isdigit() or not 1 <= int(value) <= 64:
        raise click.BadParameter(f"{value!r}: a number of runs at once, 1-64, or auto")
    return int(value)


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
@click.option("--report-to", type=click.Path(path_type=Path), default=None, hidden=True)
def run(paths: tuple[str, ...], runs_dir: Path, quiet: bool, repeat: int,
        client_image: str | None, jobs_text: str, shard: str | None, junit: Path | None,
        report_to: Path | None) -> None:
    """Run profiles (files, folders of them, or names such as silent-loss) and check their
    expectations.

    With several runs, a table in the field study's style (outcomes and latency ranges per
    scenario) is printed and written to RUNS_DIR/suite-TIME.md. Every run folder gets
    result.json; the exit code is the worst run's."""
    import asyncio

    jobs = _jobs(jobs_text)
    # Before the runner's imports, so that a misspelt name is answered at once.
    files = _profile_files(paths)
    from faultlab.jobs import Progress, parse_shard, plan, run_parallel
    from faultlab.jobs import shard as take_shard
    from faultlab.lab.privilege import reexec_in_user_namespace
    from faultlab.profile import load_profile, unset_pass_env, with_client_image
    from faultlab.report.record import RESULT_FILE
    from faultlab.runner import Run

    try:
        profiles = [load_profile(f) for f in files]
    except ProfileError as exc:
        _fail_with_problems(exc)
    if unset := [line for p in profiles for line in unset_pass_env(p)]:
        _fail_with_problems(ProfileError(unset))
    if client_image is not None:
        try:
            profiles = [with_client_image(p, client_image) for p in profiles]
        except ValueError as exc:
            _fail(f"--client-image: {exc}", 2)
    runs = plan(profiles, repeat)
    if shard is not None:
        try:
            runs = take_shard(runs, *parse_shard(shard))
        except ValueError as exc:
            _fail(f"--shard: {exc}", 2)
    try:
        reexec_in_user_namespace(sys.argv[1:])
    except PrivilegeError as exc:
        _fail(str(exc), 3)
    if shard is not None and not runs:
        click.echo(f"shard {shard}: no runs (fewer runs than shards)")

    # Each run's record under its planned index, also for runs a signal interrupted.
    records: dict[int, RunRecord] = {}

    def tell(record: RunRecord) -> None:
        for line in record.outcome_lines():
            click.echo(line)
        where = f"; report: {Path(record.run_dir) / 'summary.md'}" if record.run_dir else ""
        click.echo(f"== {record.profile}: {record.verdict} in {record.duration_s:.2f}s{where}")

    async def run_all() -> None:
        if jobs > 1 and len(runs) > 1:
            progress = Progress(len(runs), jobs, live=sys.stderr.isatty() and not quiet)
            await run_parallel(runs, runs_dir, jobs, client_image, tell, progress, records)
            return
        for index, planned in enumerate(runs):
            count = f" ({index + 1}/{len(runs)})" if len(runs) > 1 else ""
            click.echo(f"== {planned.profile.name}{count}")
            run = Run(planned.profile, runs_dir, _progress(quiet))
            if report_to is not None:  # a parallel suite's job: where its record will be
                report_to.write_text(str(run.run_dir.absolute() / RESULT_FILE) + "\n")
            try:
                await run.execute()
            finally:
                if run.record is not None:  # judged however the run ended
                    records[index] = run.record
            tell(records[index])

    code = 0
    try:
        asyncio.run(interrupt.cancel_on_signal(run_all()))
    except asyncio.CancelledError:  # only a signal cancels the runs; main() exits with its code
        interrupt.announce("the lab was torn down")
        code = EXIT_INTERRUPTED
    except FaultlabError as exc:
        _fail(str(exc), 3)
    # From here a signal only changes the exit code: the reports are written whole, of the runs
    # made so far when a signal cut the suite short.
    done = [records[i] for i in sorted(records)]
    table = runs_dir / f"suite-{datetime.now():%Y%m%d-%H%M%S}.md"
    worst = _report_suite(done, table if len(runs) > 1 and done else None, junit)
    sys.exit(code or worst)


def _report_suite(records: list[RunRecord], table: Path | None, junit: Path | None) -> int:
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


@cli.group(cls=ReportGroup)
def report() -> None:
    """Draw a run's or a suite's reports again (`faultlab report PATH...`), or join runs made
    elsewhere (CI shards, parallel jobs) into one suite (`faultlab report merge DIR...`)."""


@report.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path),
                metavar="PATH...")
def build(paths: tuple[Path, ...]) -> None:
    """(Re)build report.html and timeline.png of each run folder in PATH..., and a suite's page:
    PATH is a run folder, a suite's file (suite-TIME.md, .html or .json), or a folder of runs
    (then a suite page of all of them is written in it)."""
    from faultlab.report.build import rebuild
    from faultlab.report.record import RecordError

    try:
        written, failed = rebuild(list(paths))
    except RecordError as exc:
        _fail(str(exc), 2)
    for path in written:
        click.echo(str(path))
    if failed:
        _fail(f"not drawn (see above): {', '.join(map(str, failed))}", 1)


@report.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path),
                metavar="DIR...")
@click.option("--junit", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Also write the joined runs as JUnit XML to FILE.")
@click.option("--out", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Write the suite table here (default: suite-merged-TIME.md in the first DIR).")
def merge(folders: tuple[Path, ...], junit: Path | None, out: Path | None) -> None:
    """Join the runs found under DIR... (every result.json: shards' runs folders, CI artefacts)
    into one suite table, one JUnit file and one exit code: the worst run's."""
    from faultlab.report.record import RecordError, RunRecord, find_records

    paths = find_records(list(folders))
    if not paths:
        _fail(f"no result.json under {', '.join(map(str, folders))}", 2)
    try:
        records = [RunRecord.load(p) for p in paths]
    except RecordError as exc:
        _fail(str(exc), 2)
    # In the order one run of the whole suite reports them: by profile file, then time.
    records.sort(key=lambda r: (r.profile_path, r.profile, r.started))
    first = folders[0] if folders[0].is_dir() else folders[0].parent
    sys.exit(_report_suite(records, out or first / f"suite-merged-{datetime.now():%Y%m%d-%H%M%S}.md",
                           junit))


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
    """Remove what killed runs left behind: their containers, the processes in their namespaces,
    the namespaces, their scratch folders and leases, and their folders in the temp dir; live
    runs' are spared."""
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
              metavar="NAME|FILE",
              help="Which measured service behaviour to reproduce: a name (gemini-dev-2026-10, "
                   "vertex-2026) or a personality file (YAML: `base: NAME` and the fields it "
                   "changes, as `faultlab calibrate --out` writes).")
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

    from faultlab.emulator.run import serve_until_stopped
    from faultlab.plainyaml import load_plain

    overrides: dict[str, object] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _fail(f"--set {item!r}: write FIELD=VALUE", 2)
        try:
            overrides[key.strip()] = load_plain(value, "--set")[1]
        except ProfileError:
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
    except ProfileError as exc:  # the personality file's problems, each file:line: field
        _fail_with_problems(exc)
    except FaultlabError as exc:
        _fail(str(exc), 3)


@cli.command()
@click.option("--base-url", metavar="URL", default=None, envvar="GOOGLE_GEMINI_BASE_URL",
              show_envvar=True,
              help="An emulator's base URL, as `emulator serve` prints it (default: the real "
                   "service, with GOOGLE_API_KEY from the environment).")
@click.option("--ca", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="The CA certificate (PEM) the endpoint's TLS is checked "
                                   "against: the emulator's SSL_CERT_FILE (which the SDK also "
                                   "reads by itself).")
@click.option("--model", default=None,
              help="The Live model to open sessions with (default: gemini-3.8-live, the field "
                   "measurements' model).")
@click.option("--personality", default="gemini-dev-2026-10", show_default=True,
              metavar="NAME|FILE", help="The ranges to compare with: a built-in personality or "
                                        "a personality file.")
@click.option("--samples", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Runs of each probe (the lockout probe runs once, for about 12 s); against "
                   "an emulator at time scale 1, 1 takes about 20 s and 3 about 36 s.")
@click.option("--tolerance", "tolerance_s", type=click.FloatRange(0, 10), default=0.15,
              show_default=True, metavar="SECONDS",
              help="How far a timing may stray outside its range before it is flagged: network "
                   "round trips (a connect takes about four) and a loaded machine.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0.5, 120), default=10.0,
              show_default=True, metavar="SECONDS", help="The longest wait for any one answer.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Write the measured values as a personality file, for "
                                   "`emulator serve --personality FILE`.")
def calibrate(base_url: str | None, ca: Path | None, model: str | None, personality: str,
              samples: int, tolerance_s: float, timeout_s: float, as_json: bool,
              out: Path | None) -> None:
    """Measure a Live API endpoint with the official SDK, beside a personality's ranges.

    Fresh and resumed set-up (S1, S2, U1), the refused resume after an idle drop and the one
    after the release window (R1, R2), the lockout while the old connection is open and the
    unlock once it is closed (L1-L3), a pending tool call answered after a resume (R4, T2), a
    text turn's reply (T7), the end of a spoken turn (T1) and the reply's audio rate (T3).
    Exit 0: every measure within its range; 1: one or more flagged; 2: a usage error; 3: the
    endpoint gave no session."""
    import asyncio

    from faultlab.calibrate import DEFAULT_MODEL, Endpoint, EndpointError, run_time_s
    from faultlab.calibrate import calibrate as measure
    from faultlab.emulator.personality import personality_source, personality_with
    from faultlab.private import redact_text

    try:
        base, changes = personality_source(personality)
    except ProfileError as exc:
        _fail_with_problems(exc)
    except ValueError as exc:
        _fail(str(exc), 2)
    if out is not None and not os.access(out.absolute().parent, os.W_OK | os.X_OK):
        _fail(f"--out {out}: cannot write in {out.absolute().parent}", 2)
    try:
        endpoint = Endpoint.from_options(base_url, ca, model or DEFAULT_MODEL, timeout_s)
    except ValueError as exc:
        _fail(str(exc), 2)
    click.echo(f"faultlab calibrate: {endpoint.describe()}, {samples} sample(s) a probe, about "
               f"{run_time_s(samples):.0f} s against an emulator at time scale 1", err=True)
    try:
        result = asyncio.run(interrupt.cancel_on_signal(measure(
            endpoint, personality_with(base, changes), samples, tolerance_s,
            lambda line: click.echo(f"  {line}", err=True))))
    except asyncio.CancelledError:  # only a signal cancels it; main() exits with its code
        interrupt.announce()
        sys.exit(EXIT_INTERRUPTED)
    except EndpointError as exc:
        _fail(str(exc), 3)
    unwritten = False
    if out is not None:
        try:
            out.write_text(result.personality_file(base, changes))
            click.echo(f"personality file: {out}", err=True)
        except OSError as exc:  # the measures are still printed below
            click.echo(f"faultlab: cannot write {out}: {exc.strerror or exc}", err=True)
            unwritten = True
    click.echo(json.dumps(result.to_json(), indent=2) if as_json else redact_text(result.text()))
    sys.exit(2 if unwritten else 1 if result.flagged else 0)


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
        _fail(str(exc), 2)
    except PcapFormatError as exc:
        _fail(f"{path}: {exc}", 2)
    except OSError as exc:
        _fail(f"{exc.filename or path}: {exc.strerror}", 2)
    except FaultlabError as exc:
        _fail(str(exc), 3)
    if server_side:
        from faultlab.capture.behaviour import ServerReport

        server = ServerReport.of(report)
        click.echo(json.dumps(server.to_dict(), indent=2) if as_json else server.render_text())
    elif as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        from faultlab.capture.flows import render_text

        click.echo(render_text(report))


@pcap.command()
@_capture_path
@_keylog_option
@_json_option
def inspect(path: Path, keylogs: tuple[Path, ...], as_json: bool) -> None:
    """Flows and WebSocket frames of a capture, wss:// included.

    PATH is a pcap or a run folder (its capture.pcap). Per flow: packets, bytes, FIN/RST,
    retransmissions, keepalives, silences, and every frame each way; frames inside TLS need
    key logs (a run's, in its folder or beside the capture, are found by themselves) and tshark."""
    _show_capture(path, keylogs, as_json, server_side=False)


@pcap.command("server")
@_capture_path
@_keylog_option
@_json_option
def server_report(path: Path, keylogs: tuple[Path, ...], as_json: bool) -> None:
    """What the server did on each connection of a capture.

    PATH is a pcap or a run folder (its server.pcap when there is one, else capture.pcap). Per
    connection: the last data, the server's longest silence, its pings and keepalives, its close
    and the client's silence before it, its retransmissions, and when its TCP gave up."""
    _show_capture(path, keylogs, as_json, server_side=True)
