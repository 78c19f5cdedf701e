"""`faultlab explore`: search a profile's fault space, shrink each failure to a minimal profile
(faultlab.explore; docs/guide/exploring.md)."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from faultlab.commands.exits import EXIT_INTERRUPTED, fail, fail_with_problems
from faultlab.errors import FaultlabError, PrivilegeError, ProfileError

if TYPE_CHECKING:
    from faultlab.explore.exploration import Budget, Exploration
    from faultlab.explore.space import Space


@click.command()
@click.argument("items", nargs=-1, required=True, metavar="PROFILE | EXPLORATION_DIR...")
@click.option("--space", "space_text", metavar="YAML", default=None,
              help="The space as an `explore:` block's fields (a YAML mapping), over the "
                   "profile's own block: e.g. '{faults: [{fault: drop}], after: [0s, 1s]}'.")
@click.option("--seed", type=int, default=None, help="The seed of every draw (the block's, else 0).")
@click.option("--runs", "max_runs", type=click.IntRange(1), default=None,
              help="Run at most this many runs in all (the block's `runs`).")
@click.option("--time", "max_time", metavar="DURATION", default=None,
              help="Start no run after this long, e.g. 20m (the block's `time`).")
@click.option("--confirm", type=click.IntRange(1, 20), default=None,
              help="Reruns of each minimal profile that must all fail (the block's, else 3).")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=Path("runs"),
              show_default=True, help="Where the exploration's folder is made.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="The exploration's folder (default: RUNS_DIR/explore-TIME-NAME).")
@click.option("--jobs", "-j", "jobs_text", default="auto", show_default=True, metavar="N|auto",
              help="Runs at once, each in its own lab (auto: four per core, at most 8).")
@click.option("--shard", metavar="K/N", default=None,
              help="Run the unhurt run and the K-th of N shares of the grid only; give the "
                   "shards' folders to `faultlab explore` to merge them and go on.")
@click.option("--client-image", metavar="IMAGE", default=None,
              help="Run the client as a container of IMAGE (as `faultlab run` does).")
@click.option("-q", "--quiet", is_flag=True, help="Print only the findings.")
def explore(items: tuple[str, ...], space_text: str | None, seed: int | None,
            max_runs: int | None, max_time: str | None, confirm: int | None, runs_dir: Path,
            out: Path | None, jobs_text: str, shard: str | None, client_image: str | None,
            quiet: bool) -> None:
    """Search where and how a fault makes a profile's expectations fail, and shrink each
    distinct failure to the smallest schedule that still fails, written as a profile.

    PROFILE has an `explore:` block (or --space gives one). An unhurt run lists the session's
    messages; the grid places the faults after each, refinement bisects where the verdict
    flips, shrinking simplifies each failure, and each minimal profile is rerun (--confirm).
    Everything lands in the exploration's folder: explore.json, explore.html, minimal/*.yaml.
    Given an exploration's folder, it goes on where it stopped; given several shards' folders,
    it merges them into a new one and goes on.

    Exit codes: 0 no failure found; 1 a failure found (or the unhurt run fails); 2 a bad
    space or profile; 3 the lab failed; 130 or 143 interrupted (its runs are kept)."""
    import asyncio

    from faultlab import interrupt
    from faultlab.explore import result
    from faultlab.explore.exploration import SpaceError, exploring_jobs
    from faultlab.jobs import RunOptions, parse_jobs, parse_shard
    from faultlab.lab.privilege import reexec_in_user_namespace
    from faultlab.units import parse_duration

    try:
        jobs = exploring_jobs() if jobs_text == "auto" else parse_jobs(jobs_text)
        part = None if shard is None else parse_shard(shard)
        limit = None if max_time is None else parse_duration(max_time)
        exploration = _exploration(items, space_text, seed, confirm, runs_dir, out, jobs,
                                   RunOptions(client_image, timeline=False), quiet,
                                   (max_runs, limit), part)
    except (ValueError, SpaceError) as exc:
        fail(str(exc), 2)
    except ProfileError as exc:
        fail_with_problems(exc)
    try:
        reexec_in_user_namespace(sys.argv[1:])
    except PrivilegeError as exc:
        fail(str(exc), 3)
    click.echo(f"exploring {exploration.base.name} in {exploration.folder}")
    code, stopped = 0, None
    try:
        asyncio.run(interrupt.cancel_on_signal(exploration.run()))
    except asyncio.CancelledError:
        interrupt.announce("the labs were torn down; go on with: faultlab explore "
                           f"{exploration.folder}")
        code, stopped = EXIT_INTERRUPTED, "interrupted"
    except SpaceError as exc:
        click.echo(f"faultlab: {exc}", err=True)
        code, stopped = 2, str(exc)
    except FaultlabError as exc:
        click.echo(f"faultlab: {exc}", err=True)
        code, stopped = 3, str(exc)
    stopped = stopped or exploration.budget.spent_why
    data = result.write(exploration, stopped)
    sys.exit(code or _tell(exploration, data))


def _budget(given: tuple[int | None, float | None], space: Space) -> Budget:
    """The command line's budget (`--runs`, `--time` in seconds), else the block's."""
    import time

    from faultlab.explore.exploration import Budget

    runs, limit = given
    runs = space.runs if runs is None else runs
    limit = space.time if limit is None else limit
    return Budget(runs, None if limit is None else time.monotonic() + limit)


def _exploration(items: tuple[str, ...], space_text: str | None, seed: int | None,
                 confirm: int | None, runs_dir: Path, out: Path | None, jobs: int,
                 options: Any, quiet: bool, budget: tuple[int | None, float | None],
                 shard: tuple[int, int] | None) -> Exploration:
    """The exploration the command line names: a new one of a profile, one to go on with, or
    the merge of shards."""
    from faultlab.explore.exploration import BASE_PROFILE, ORIGIN, Exploration
    from faultlab.explore.journal import JOURNAL, Journal, merged

    folders = [Path(i) for i in items if (Path(i) / JOURNAL).exists()]
    overrides = {k: v for k, v in (("seed", seed), ("confirm", confirm)) if v is not None}
    if folders:
        if len(folders) != len(items):
            raise ValueError("give one profile, or exploration folders (each with its "
                             f"{JOURNAL}), not both")
        if space_text is not None or overrides or shard is not None:
            raise ValueError("an exploration goes on with the space, seed and shard it began "
                             "with: --space, --seed, --confirm and --shard are for a new one")
        journals = [Journal.load(f / JOURNAL) for f in folders]
        if journals[0].head is None:
            raise ValueError(f"{folders[0]}: its unhurt run never passed: start it anew")
        base_text = (folders[0] / BASE_PROFILE).read_text()
        space = _space(journals[0].head.space, str(folders[0] / JOURNAL))
        if len(folders) == 1:
            folder = folders[0]
        else:
            folder = out or _new_folder(runs_dir, f"{space_name(base_text)}-merged")
            folder.mkdir(parents=True, exist_ok=False)
            (folder / BASE_PROFILE).write_text(base_text)
            if (folders[0] / ORIGIN).exists():
                (folder / ORIGIN).write_text((folders[0] / ORIGIN).read_text())
            merged(journals, folder / JOURNAL)
        return Exploration(folder, base_text, space, jobs, options, click.echo, quiet,
                           _budget(budget, space))
    if len(items) != 1:
        raise ValueError("explore one profile at a time")
    from faultlab.catalogue import resolve_profiles
    from faultlab.plainyaml import load_mapping
    from faultlab.profile import load_profile

    (path,) = resolve_profiles(items)
    profile = load_profile(path)
    base_text = path.read_text()
    data, _ = load_mapping(base_text, str(path), "a profile")
    block = dict(data.get("explore") or {})
    if space_text is not None:
        from faultlab.plainyaml import load_plain

        _, given = load_plain(space_text, "--space")
        if not isinstance(given, dict):
            raise ValueError("--space: a YAML mapping of the explore block's fields, e.g. "
                             "'{faults: [{fault: drop}]}'")
        block |= given
    if not block:
        raise ValueError(f"{path}: no `explore:` block, and no --space: say what to search")
    space = _space(block | overrides, "--space" if space_text else str(path))
    folder = out or _new_folder(runs_dir, profile.name)
    folder.mkdir(parents=True, exist_ok=False)
    (folder / BASE_PROFILE).write_text(base_text)
    (folder / ORIGIN).write_text(f"{path.absolute()}\n")
    return Exploration(folder, base_text, space, jobs, options, click.echo, quiet,
                       _budget(budget, space), shard)


def _space(block: dict[str, Any], source: str) -> Space:
    from pydantic import ValidationError

    from faultlab.explore.space import Space, variants
    from faultlab.model import validate_plain
    from faultlab.problems import Problems

    problems = Problems(source, {})
    try:
        space = validate_plain(Space, block)
    except ValidationError as exc:
        problems.add_validation(("explore",), exc, block)
        problems.fail()
    # Each fault as its fault validates it, before the exploration's folder is made.
    variants(space.faults, problems)
    problems.raise_if_any()
    return space


def space_name(base_text: str) -> str:
    from faultlab.plainyaml import load_plain

    _, data = load_plain(base_text, "profile")
    return str(data.get("name", "profile")) if isinstance(data, dict) else "profile"


def _new_folder(runs_dir: Path, name: str) -> Path:
    base = runs_dir / f"explore-{datetime.now():%Y%m%d-%H%M%S}-{name}"
    candidate, n = base, 0
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}.{n}")
    return candidate


def _tell(exploration: Exploration, data: dict[str, Any]) -> int:
    """The findings, one paragraph each; the exit code they give."""
    unhurt = data["unhurt"]
    if unhurt is not None and unhurt["outcome"] != "pass":
        click.echo(f"the unhurt run already fails ({unhurt['outcome']}): make the profile pass "
                   "without faults first")
        return 1 if unhurt["outcome"].startswith("fail") else 3
    counts = ", ".join(f"{n} {kind}" for kind, n in data["counts"].items()) or "no points"
    click.echo(f"{len(data['points'])} point(s): {counts}"
               + (f"; stopped early: {data['stopped']}" if data["stopped"] else ""))
    for number, finding in enumerate(data["failures"], 1):
        flaky = " (FLAKY)" if finding["flaky"] else ""
        click.echo(f"failure {number}: {'; '.join(finding['failed'])}\n"
                   f"  seen at {finding['points']} point(s); minimal: "
                   f"{finding['minimal']['describe']}\n"
                   f"  confirmed: {'failed ' if finding['confirmed'][0].isdigit() else ''}"
                   f"{finding['confirmed']}{flaky}; profile: "
                   f"{exploration.folder / finding['profile']}")
    click.echo(f"explore.json and explore.html in {exploration.folder}")
    failed = data["failures"] or any(p["outcome"].startswith("fail") for p in data["points"])
    return 1 if failed else 0
