"""An exploration, run: the unhurt run, the grid, refinement, shrinking and confirmation, each
run a `faultlab run` job in a lab of its own (`faultlab.jobs`), up to `jobs` at once, within the
budget; every run journaled as it ends (`faultlab.explore.journal`), so an exploration cut short
is resumed where it stopped, and shards are merged into one.

Its folder: `profile.yaml` (the base profile as given), `journal.jsonl`, `points/` (each point's
profile), `runs/` (each run's folder), `minimal/` (a profile per distinct failure, shrunk), and
`explore.json` and `explore.html` (faultlab.explore.result), written whenever it stops.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultlab.errors import FaultlabError, ProfileError
from faultlab.events import read_events
from faultlab.explore import schedule
from faultlab.explore.journal import BASELINE, JOURNAL, Head, Journal, Measured
from faultlab.explore.search import refinements, simpler, simplest
from faultlab.explore.space import (
    MAX_POINTS,
    Boundary,
    Point,
    Space,
    Variant,
    boundaries,
    count_points,
    grid,
    variants,
)
from faultlab.faults import FAULTS
from faultlab.jobs import Job, Progress, RunOptions, gather_shown
from faultlab.plainyaml import load_mapping
from faultlab.profile import Profile, parse_profile
from faultlab.report.record import RunRecord
from faultlab.vocabulary.run import FrameLogged

BASE_PROFILE = "profile.yaml"
# The path of the profile explored, whose folder its relative paths start from.
ORIGIN = "origin"
# Rounds of refinement and of shrinking at most (each splits a gap, or simplifies a schedule).
MAX_ROUNDS = 12
# Points tried after a flaky minimal schedule, for one whose reruns all fail.
FALLBACKS = 3


def exploring_jobs() -> int:
    """Runs at once when `--jobs` is auto: a point's run mostly waits on its client's timers, so
    eight per core, at most 16 (the whole booking-naive exploration on 2 cores: 262 s with 8 at
    once, 202 s with 16, the same findings, 0.8 of the 2 cores busy; each run a warm job)."""
    return min(8 * (os.cpu_count() or 1), 16)


# Runs a point's profile to its record (a `faultlab run` job; a stand-in in unit tests).
type Execute = Callable[[Profile], Awaitable[RunRecord]]


class SpaceError(FaultlabError):
    """A space that cannot be explored as given (exit 2): the message says why."""


@dataclass
class Budget:
    """At most `runs` runs in all (journal included) and none started after `deadline`
    (monotonic seconds)."""

    runs: int | None = None
    deadline: float | None = None
    spent_why: str | None = None
    # Runs started by this process (those measured before it are in the journal).
    started: int = 0

    def allows(self, measured: int) -> bool:
        """Whether another run may start, `measured` runs being in the journal from before."""
        if self.runs is not None and measured + self.started >= self.runs:
            self.spent_why = f"the budget of {self.runs} runs reached"
        elif self.deadline is not None and time.monotonic() >= self.deadline:
            self.spent_why = "the budget's time ran out"
        return self.spent_why is None


@dataclass
class Finding:
    """A distinct failure (its outcome), the simplest schedule that still shows it, and how its
    confirmation went."""

    outcome: str
    minimal: Point
    points: int
    # The other points that failed so, simplest first: where a flaky minimal gives way.
    fallbacks: list[Point] = field(default_factory=list)
    confirmed: list[Measured] = field(default_factory=list)
    profile: str = ""

    @property
    def confirmation(self) -> str:
        """`3 of 3` (reruns that failed so, of those made), or why none was made."""
        if not self.confirmed:
            return "not rerun (the budget ran out)"
        fails = sum(1 for m in self.confirmed if m.outcome == self.outcome)
        return f"{fails} of {len(self.confirmed)}"

    @property
    def flaky(self) -> bool:
        return any(m.outcome != self.outcome for m in self.confirmed)


class Exploration:
    """One exploration folder and what runs in it."""

    def __init__(self, folder: Path, base_text: str, space: Space, jobs: int,
                 options: RunOptions, say: Callable[[str], None], quiet: bool,
                 budget: Budget, shard: tuple[int, int] | None = None,
                 execute: Execute | None = None) -> None:
        self.folder = folder.absolute()
        # How a point's profile is run: a `faultlab run` job in a lab of its own.
        self.execute = execute or self._job
        self.base_text = base_text
        self.space = space
        self.jobs = jobs
        self.options = options
        self.say = say
        self.quiet = quiet
        self.budget = budget
        self.shard = shard
        self.base_path = folder / BASE_PROFILE
        # The files the profile names by relative paths (a cassette) are its own folder's.
        origin = folder / ORIGIN
        anchor = Path(origin.read_text().strip()) if origin.exists() else self.base_path
        data, problems = load_mapping(base_text, str(self.base_path), "a profile")
        self.base = parse_profile(base_text, str(self.base_path), anchor)
        self.base_data = _anchored(data, self.base)
        # The space's faults, each validated where the block names it (problems by line).
        self.variants = variants(self.space.faults, problems)
        problems.raise_if_any()
        self.journal = Journal.load(folder / JOURNAL)
        self._before = len(self.journal.runs)  # what the budget counts besides this process's
        self.found: list[Boundary] = []
        self.findings: list[Finding] = []
        self.phase = "unhurt run"
        # The jobs, shared by the measurements that run at once (each finding's), and the items
        # being measured, each with what ends when its measurement has.
        self._gate = asyncio.Semaphore(jobs)
        self._running: dict[tuple[Point | None, str, int], asyncio.Future[None]] = {}

    @property
    def runs_dir(self) -> Path:
        return self.folder / "runs"

    # -- the phases

    async def run(self) -> None:
        """Every phase the budget allows; a shard stops after its share of the grid."""
        baseline = await self._baseline()
        if baseline.outcome != "pass":
            return
        points = self._grid()
        self.phase = "grid"
        await self._measure([(p, "grid", 0) for p in points])
        if self.shard is not None:
            return
        self.phase = "refine"
        for _ in range(MAX_ROUNDS):
            more = refinements(self.measured(), self.space.refine, self.jobs)
            if not more or not await self._measure([(p, "refine", 0) for p in more]):
                break
        self.phase = "shrink"
        await self._shrink()
        self.phase = "confirm"
        await self._confirm()

    async def _baseline(self) -> Measured:
        """The unhurt run: its session's messages are the boundaries (journaled in the head)."""
        done = self.journal.first(BASELINE)
        if done is None:
            (done,) = await self._measure([(None, "baseline", 0)], force=True)
        if done.outcome == "pass" and self.journal.head is None:
            self.found = self._boundaries(Path(done.run_dir))
            self.journal.start(self._head())
        elif self.journal.head is not None:
            self.found = [Boundary.of(b) for b in self.journal.head.boundaries]
            if (why := self._head().same_search(self.journal.head)) is not None:
                raise SpaceError(f"{self.journal.path}: cannot continue this exploration: {why} "
                                 "since it began")
        return done

    def _head(self) -> Head:
        return Head(profile_sha256=hashlib.sha256(self.base_text.encode()).hexdigest(),
                    space=self.space.model_dump(mode="json", by_alias=True),
                    boundaries=[b.to_dict() for b in self.found],
                    variants=[{"fault": v.fault, **dict(v.params)} for v in self.variants],
                    shard=None if self.shard is None else f"{self.shard[0]}/{self.shard[1]}")

    def _boundaries(self, run_dir: Path) -> list[Boundary]:
        events = read_events(self.folder / run_dir / "events.jsonl")
        frames = [(e, f) for e, f in ((e, FrameLogged.read(e)) for e in events)
                  if f is not None and f.kind
                  and not (f.extra.get("dropped") or f.extra.get("injected"))]
        logs = {f.log for _, f in frames}
        log = "proxy" if "proxy" in logs else "emulator"
        messages = [(f.sender, f.kind, e.t) for e, f in frames if f.log == log]
        found = boundaries(messages, self.space.at, self.base.protocol.kind_matches)
        if not found:
            raise SpaceError(f"the unhurt run's session ({run_dir}) has no message the space's "
                             f"'at' takes ({len(messages)} messages in all): nothing to explore")
        return found

    def _grid(self) -> list[Point]:
        count = count_points(self.space, len(self.found), len(self.variants))
        if count > MAX_POINTS:
            raise SpaceError(f"the space has {count} points; at most {MAX_POINTS}: narrow it "
                             "(fewer kinds, a coarser step) or draw")
        points = grid(self.space, self.found, len(self.variants))
        if self.shard is not None:
            k, n = self.shard
            order = sorted(points, key=lambda p: p.key)
            points = order[k - 1::n]
        return points

    async def _shrink(self) -> None:
        """Each distinct failure shrunk, from the simplest point that showed it, one move at a
        time while a simpler schedule still fails the same way; the failures at once, sharing
        the jobs."""
        groups: dict[str, list[Point]] = {}
        for point, run in self.measured().items():
            if run.failing:
                groups.setdefault(run.outcome, []).append(point)
        moments = [b.t for b in self.found]
        ordered = sorted(groups.items(),
                         key=lambda g: simplest(g[1], moments).simplicity(moments))
        self.findings.extend(await _at_once([self._shrunk(outcome, points)
                                             for outcome, points in ordered]))

    async def _shrunk(self, outcome: str, points: list[Point]) -> Finding:
        _, durations = self.space.axes()
        moments = [b.t for b in self.found]
        current = simplest(points, moments)
        for _ in range(MAX_ROUNDS):
            candidates = simpler(current, durations, moments, self.space.refine)
            measured = self.measured()
            unknown = [c for c in candidates if c not in measured]
            for start in range(0, len(unknown), self.jobs):
                if self.budget.spent_why:
                    break
                await self._measure([(p, "shrink", 0) for p in unknown[start:start + self.jobs]])
                measured = self.measured()
                if any(_outcome(measured, c) == outcome for c in candidates):
                    break
            better = [c for c in candidates if _outcome(measured, c) == outcome]
            if not better:
                break
            current = better[0]
        # Grid points first: refinement's sit at a window's edge, where timing decides.
        measured = self.measured()
        others = sorted((p for p in points if p != current),
                        key=lambda p: (measured[p].purpose != "grid", p.simplicity(moments)))
        return Finding(outcome, current, len(points), others)

    async def _confirm(self) -> None:
        """Rerun each minimal schedule `confirm` times. One that does not fail so every time
        (a window's edge, where timing decides) gives way to the next simplest point that
        failed so and does, of up to `FALLBACKS`; else the first stays, reported as flaky. The
        findings at once, sharing the jobs."""
        await _at_once([self._confirmed(finding) for finding in self.findings])

    async def _confirmed(self, finding: Finding) -> None:
        first = finding.minimal
        for candidate in [first, *finding.fallbacks[:FALLBACKS]]:
            runs = [(candidate, "confirm", i) for i in range(self.space.confirm)]
            done = {r.repeat for r in self.journal.of(candidate.key, ["confirm"])}
            await self._measure([r for r in runs if r[2] not in done])
            confirmed = self.journal.of(candidate.key, ["confirm"])
            if len(confirmed) < self.space.confirm:
                break  # the budget ran out
            tried = Finding(finding.outcome, candidate, finding.points, [], confirmed)
            if not tried.flaky:
                finding.minimal, finding.confirmed = candidate, confirmed
                break
            if candidate == first:
                finding.confirmed = confirmed

    # -- measuring

    def measured(self) -> dict[Point, Measured]:
        """Each point's first measurement."""
        out: dict[Point, Measured] = {}
        for run in self.journal.runs:
            if run.key != BASELINE and run.purpose != "confirm":
                out.setdefault(Point.parse(run.key), run)
        return out

    async def _measure(self, items: Sequence[tuple[Point | None, str, int]],
                       force: bool = False) -> list[Measured]:
        """Run the items not measured yet, up to `jobs` at once (with every measurement running
        meanwhile), within the budget (unless `force`); each is journaled as it ends. An item
        another measurement is running is awaited, not run twice. Returns what this call
        measured."""
        todo = [item for item in items
                if not any(r.purpose == item[1] and r.repeat == item[2]
                           for r in self.journal.of(self._key(item[0])))]
        elsewhere = [self._running[i] for i in todo if i in self._running]
        todo = [item for item in todo if item not in self._running]
        if not todo:
            await _ended(elsewhere)
            return []
        progress = Progress(len(todo), self.jobs, live=sys.stderr.isatty() and not self.quiet,
                            label=f"explore: {self.phase}")
        got: list[Measured] = []

        async def one(point: Point | None, purpose: str, repeat: int) -> None:
            async with self._gate:
                if not force and not self.budget.allows(self._before):
                    return
                self.budget.started += 1
                progress.started_one()
                record = await self.execute(self._profile(point))
                run = self._measured(point, purpose, repeat, record)
                self.journal.add(run)
                got.append(run)
                progress.finished_one(record)
                progress.clear()
                if not self.quiet:
                    self.say(_line(point, run, self))
                progress.show()

        running = asyncio.get_running_loop().create_future()
        self._running.update(dict.fromkeys(todo, running))
        try:
            await gather_shown([one(*item) for item in todo], progress)
        finally:
            for item in todo:
                self._running.pop(item, None)
            running.set_result(None)
        await _ended(elsewhere)
        return got

    async def _job(self, profile: Profile) -> RunRecord:
        return await Job(profile, self.runs_dir, self.options).run()

    @staticmethod
    def _key(point: Point | None) -> str:
        return BASELINE if point is None else point.key

    def _measured(self, point: Point | None, purpose: str, repeat: int,
                  record: RunRecord) -> Measured:
        run_dir = Path(record.run_dir)
        where = str(run_dir.relative_to(self.folder)) if run_dir.is_relative_to(self.folder) \
            else str(run_dir)
        return Measured(self._key(point), purpose, repeat, record.verdict,
                        tuple(e["expectation"] for e in record.failed_expectations),
                        bool(record.unfired), record.error, where, record.duration_s)

    def profile_text(self, point: Point | None, comments: Sequence[str] = (),
                     suffix: str | None = None, description: str | None = None) -> str:
        """The profile a point runs (the base, unhurt, for None), its name the base's and
        `suffix` (the point's id by default), its description the base's unless given."""
        base = dict(self.base_data)
        if description is not None:
            base["description"] = description
        if point is None:
            name = schedule.point_name(self.base.name, suffix or "unhurt")
            if self._needs_proxy() and not base.get("proxy"):
                base["proxy"] = True  # the same frame log as the points that need the proxy
            return schedule.profile_text(base, name, [], comments)
        steps = schedule.steps_of(point, self.found, self.variants)
        name = schedule.point_name(self.base.name, suffix or point.id)
        return schedule.profile_text(base, name, steps, comments)

    def _needs_proxy(self) -> bool:
        return any("proxy" in FAULTS[v.fault].needs for v in self.variants)

    def _profile(self, point: Point | None) -> Profile:
        folder = self.folder / "points"
        folder.mkdir(exist_ok=True)
        path = folder / f"{'unhurt' if point is None else point.id}.yaml"
        text = self.profile_text(point)
        path.write_text(text)
        try:
            return parse_profile(text, str(path), path)
        except ProfileError as exc:
            raise SpaceError("a point's profile is not valid (the space gives a fault what it "
                             "cannot take):\n" + "\n".join(exc.problems)) from None


async def _at_once[T](work: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Await `work` at once, each result in its order; the first to fail cancels the others and
    its error is raised as it is (not in the ExceptionGroup a TaskGroup raises: a SpaceError
    reaches the command as one)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one) for one in work]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


async def _ended(measuring: Sequence[asyncio.Future[None]]) -> None:
    """Wait for other calls' measurements to end, without cancelling them when this is
    cancelled (as gather would: they are their callers' to end)."""
    if measuring:
        await asyncio.wait(measuring)


def _anchored(data: dict[str, Any], base: Profile) -> dict[str, Any]:
    """The profile as written, with the cassette it replays named by its absolute path: every
    point's profile is written in the exploration's folder."""
    cassette = base.target.cassette if base.target is not None else None
    if cassette is None:
        return data
    given = data["target"]["cassette"]
    file = str(cassette.file)
    target = {**data["target"],
              "cassette": {**given, "file": file} if isinstance(given, dict) else file}
    return {**data, "target": target}


def _outcome(measured: dict[Point, Measured], point: Point) -> str | None:
    """A point's outcome, if it was measured."""
    run = measured.get(point)
    return None if run is None else run.outcome



def _line(point: Point | None, run: Measured, exploration: Exploration) -> str:
    """How a point's run is told as it ends: its verdict, its schedule, what failed."""
    what = "unhurt run" if point is None else describe(point, exploration.found,
                                                       exploration.variants)
    failed = f"; failed: {'; '.join(run.failed)}" if run.failed else ""
    unfired = "; a step never fired" if run.unfired else ""
    return f"{run.verdict:<5} {what}  ({run.duration_s:.1f}s{failed}{unfired})"


def describe(point: Point, found: Sequence[Boundary], faults: Sequence[Variant]) -> str:
    """`drop (connection: "first") 0.5s after server tool_call, for 2s; then ...`."""
    parts = []
    for placed in point.steps:
        text = (f"{faults[placed.variant].describe()} {placed.after:g}s after "
                f"{found[placed.boundary].describe()}")
        parts.append(text + ("" if placed.duration is None else f", for {placed.duration:g}s"))
    return "; then ".join(parts)

