"""SIGINT and SIGTERM at any moment of `faultlab run` tear down and exit 130 / 143; after SIGKILL
at any moment, `faultlab lab gc` removes everything the run made.

Each run here is judged only by what it made itself: its labs' slots (the leases that named its
pid, watched while it runs, and its `lab.ready`), its temp folders (it gets a TMPDIR of its own),
its processes (this test process is their subreaper, so none escapes to init), and the host's
links, routes and rules. Other faultlab runs may come and go on the machine meanwhile.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from faultlab.lab.netns import LAB_NAME, LEASE_DIR, ROOT_NETNS_DIR, lease_path

from ..conftest import PROFILES, REPO, patience
from ..test_interrupt import console_script, signal_at
from .helpers import host_network_state, lab_traces

pytestmark = pytest.mark.lab

SEED = 17
# Each moment (anywhere twice, the lab's set-up, the teardown) for both profiles, each profile
# with both signals twice; 16 ran every combination, at a minute more of the suite's time.
SIGNAL_RUNS = 8
KILL_RUNS = 10
PR_SET_CHILD_SUBREAPER = 36
# The emulator, the SDK's client and a packet fault (no proxy).
EMULATED = """\
name: signal-emulated
target:
  emulator: {time_scale: 0.1}
client:
  builtin: live-probe
  args: [--say, "Book me the 3pm slot tomorrow, please.", --listen, 1s]
  env: {GOOGLE_API_KEY: not-a-real-key}
timeline:
  - {id: cut, when: {event: client.connected}, do: {fault: drop}}
  - {id: back, when: {event: client.connected}, after: 300ms, do: {fault: restore}}
expect:
  - {event: fault.applied, where: {step: cut}}
  - {exit_code: 0}
timeout: 30s
"""
# The emulator behind the proxy, which aborts both legs at the model's tool call.
PROXIED = PROFILES / "abort-on-toolcall.yaml"
VERDICT = re.compile(r"^== (\S+): (PASS|FAIL|ERROR) in ", re.M)
VERDICT_CODES = {"PASS": 0, "FAIL": 1, "ERROR": 3}


def handlers_installed(pid: int) -> bool:
    """Whether the process catches SIGTERM (Python catches SIGINT from its start, not SIGTERM):
    faultlab's first instruction has run."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True  # gone already: nothing to wait for
    caught = int(next(x for x in status.splitlines() if x.startswith("SigCgt:")).split()[1], 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def processes_under(root: int) -> dict[int, str]:
    """Every descendant of `root`: pid and state (Z for a zombie)."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry)] = (int(fields[1]), fields[0])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, state) in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = state
                frontier.append(pid)
    return found


def live_processes_left(before: Collection[int] = ()) -> list[str]:
    """This test's descendants still running but those `before` (another test's in this
    worker: a warm jobs' server lives as long as the process that started it); zombies (ours
    as subreaper) are reaped."""
    left = []
    for pid, state in processes_under(os.getpid()).items():
        if pid in before:
            continue
        if state == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            continue
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            left.append(f"process {pid}: {argv[:200]}")
    return left


@pytest.fixture(scope="module")
def subreaper() -> Iterator[None]:
    """Orphans of the runs here become this process's children, not init's."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    live_processes_left()


def faultlab_namespaces() -> set[str]:
    names = os.listdir(ROOT_NETNS_DIR) if ROOT_NETNS_DIR.is_dir() else []
    return {n for n in names if LAB_NAME.match(n)}


def unleased(namespace: str) -> bool:
    match = LAB_NAME.match(namespace)
    return match is not None and not lease_path(int(match.group(1))).exists()


def gc(tmp: Path) -> subprocess.CompletedProcess[str]:
    """`faultlab lab gc` as the run's user would type it, with the run's TMPDIR."""
    return subprocess.run([sys.executable, "-m", "faultlab", "lab", "gc"], cwd=REPO,
                          env=dict(os.environ, TMPDIR=str(tmp)), capture_output=True, text=True,
                          timeout=patience(60), check=False)


@dataclass
class Trial:
    """One `faultlab run`, started and watched."""

    profile: Path
    work: Path
    proc: subprocess.Popen[bytes]
    caught_wall: float = 0.0  # when its signal handlers were in place
    slots: set[int] = field(default_factory=set)
    signal_wall: float | None = None  # when the first signal was sent
    exited_wall: float = 0.0
    _watcher: threading.Thread | None = None
    before: frozenset[int] = frozenset()  # this process's descendants when it started

    @property
    def tmp(self) -> Path:
        return self.work / "tmp"

    @classmethod
    def start(cls, profile: Path, work: Path, command: Sequence[str] = ("-m", "faultlab")
              ) -> Trial:
        """`faultlab run PROFILE`, the command being `python COMMAND...`."""
        (work / "tmp").mkdir(parents=True)
        env = dict(os.environ, TMPDIR=str(work / "tmp"))
        before = frozenset(processes_under(os.getpid()))
        with (work / "out").open("wb") as out, (work / "err").open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, *command, "run", "--runs-dir", str(work / "runs"),
                 str(profile)], cwd=REPO, env=env, stdout=out, stderr=err)
        trial = cls(profile, work, proc, before=before)
        trial._watcher = threading.Thread(target=trial._watch_leases, daemon=True)
        trial._watcher.start()
        deadline = time.monotonic() + patience(10)
        while not handlers_installed(proc.pid):
            assert time.monotonic() < deadline, "faultlab never caught SIGTERM"
            time.sleep(0.001)
        trial.caught_wall = time.time()
        return trial

    def _watch_leases(self) -> None:
        """Note every slot whose lease names this run, as long as it runs."""
        pid = str(self.proc.pid)
        while True:
            done = self.proc.poll() is not None
            with contextlib.suppress(OSError):
                for lease in LEASE_DIR.glob("lab-*.pid"):
                    with contextlib.suppress(OSError, IndexError):
                        if lease.read_text().split()[0] == pid:
                            self.slots.add(int(lease.name.removeprefix("lab-").split(".")[0]))
            if done:
                return
            time.sleep(0.003)

    def logged(self, name: str) -> bool:
        """Whether the run has written event `name`."""
        run_dir = self.run_dir
        return run_dir is not None and f'"event": "{name}"'.encode() in (
            run_dir / "events.jsonl").read_bytes()

    def wait_for(self, where: str) -> None:
        """Until the run reaches `where`: its lab set-up (its lease is taken), or its teardown
        (it has logged `run.teardown`); or until it exits."""
        def reached() -> bool:
            return bool(self.slots) if where == "lab set-up" else self.logged("run.teardown")

        deadline = time.monotonic() + patience(60)
        while not reached() and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)

    def send(self, signum: int) -> bool:
        """Send `signum` if the run is still going; whether it was sent."""
        if self.proc.poll() is not None:
            return False
        if self.signal_wall is None:
            self.signal_wall = time.time()
        self.proc.send_signal(signum)
        return True

    def wait(self) -> int:
        code = self.proc.wait(timeout=patience(60))
        self.exited_wall = time.time()
        assert self._watcher is not None
        self._watcher.join()
        for event in self.events:
            if event["event"] == "lab.ready":
                self.slots.add(int(event["slot"]))
        return code

    @property
    def output(self) -> str:
        return (self.work / "out").read_text(errors="replace") + (
            self.work / "err").read_text(errors="replace")

    @property
    def run_dir(self) -> Path | None:
        found = sorted((self.work / "runs").glob("*/events.jsonl"))
        return found[0].parent if found else None

    @property
    def events(self) -> list[dict[str, Any]]:
        if self.run_dir is None:
            return []
        lines = (self.run_dir / "events.jsonl").read_text().splitlines()
        return [json.loads(x) for x in lines if x.endswith("}")]

    def at(self, name: str) -> float | None:
        """When `name` happened, on the run's clock."""
        return next((float(e["t"]) for e in self.events if e["event"] == name), None)

    def clock(self, wall: float) -> float:
        """A wall time on the run's clock (negative: before the run started)."""
        start = next((e for e in self.events if e["event"] == "run.start"), None)
        return wall - float(start["unix_time"]) if start else float("-inf")

    def phase(self) -> str:
        """Where the signal fell."""
        if self.signal_wall is None:
            return "after the exit"
        t = self.clock(self.signal_wall)
        client = next((float(e["t"]) for e in self.events
                       if e["event"] == "process.start" and e["role"] == "client"), None)
        marks = [("lab set-up", self.at("run.start")), ("target, proxy, capture",
                 self.at("lab.ready")), ("client running", client),
                 ("teardown", self.at("run.teardown")), ("report", self.at("run.end"))]
        phase = "start-up (imports, profile)"
        for name, mark in marks:
            if mark is not None and t >= mark:
                phase = name
        return phase

    def leftovers(self, namespaces_before: set[str], host_before: str) -> list[str]:
        """What this run made that is still there."""
        pid = self.proc.pid
        found = [f"{trace} (slot {slot})" for slot in sorted(self.slots)
                 for trace in lab_traces(slot, pid)]
        if LEASE_DIR.is_dir():
            found += [str(p) for p in LEASE_DIR.glob("lab-*.pid")
                      if p.read_text().split()[:1] == [str(pid)]]
            found += [str(p) for p in LEASE_DIR.glob(f".lab-*.{pid}.*")]
        found += [str(p) for p in self.tmp.iterdir()]
        found += live_processes_left(self.before)
        # A namespace of a slot never seen leased: a new one without any lease, that stays.
        strays = {n for n in faultlab_namespaces() - namespaces_before if unleased(n)}
        if strays:
            time.sleep(0.5)
            found += sorted(n for n in strays if (ROOT_NETNS_DIR / n).exists() and unleased(n))
        if host_network_state() != host_before:
            found.append("the host's links, routes or rules changed")
        return found


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory, subreaper: None) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("profiles")
    (folder / "signal-emulated.yaml").write_text(EMULATED)
    return {"emulated": folder / "signal-emulated.yaml", "proxied": PROXIED}


@pytest.fixture(scope="module")
def lifetimes(profiles: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
              ) -> dict[str, float]:
    """Each profile once, undisturbed: it passes, leaves nothing, and lives this long after
    faultlab's first instruction (seconds)."""
    out = {}
    for name, path in profiles.items():
        namespaces, host = faultlab_namespaces(), host_network_state()
        trial = Trial.start(path, tmp_path_factory.mktemp(f"undisturbed-{name}"))
        assert trial.wait() == 0, trial.output
        assert trial.leftovers(namespaces, host) == []
        out[name] = trial.exited_wall - trial.caught_wall
    return out


def aim(trial: Trial, rng: random.Random, where: str, lifetime: float) -> str:
    """Wait until the moment to send a signal: anywhere in an undisturbed run's life after
    faultlab's first instruction, or in the lab's set-up (0-30 ms after the lease is taken; the
    set-up lasts 15-40 ms), or in the teardown (0-300 ms after it began); returns how it aimed."""
    if where == "anywhere":
        delay = rng.uniform(0.0, lifetime)
        time.sleep(delay)
        return f"{delay:.3f}s after the first instruction"
    delay = rng.uniform(0.0, 0.03 if where == "lab set-up" else 0.3)
    trial.wait_for(where)
    time.sleep(delay)
    return f"{delay:.3f}s into the {where}"


@pytest.mark.timeout(1200)
def test_sigint_and_sigterm_at_any_moment_tear_down_and_exit_with_the_signal(
        profiles: dict[str, Path], lifetimes: dict[str, float],
        tmp_path: Path) -> None:
    """8 runs (emulated and proxied, SIGINT and SIGTERM; seeded moments over the whole run, and
    aimed at the lab's set-up and at the teardown): the exit code is 128 + the signal (0 or 1 only
    when the run had decided and exited before the signal arrived), no traceback, a run cut
    before its teardown is an interrupted ERROR and never a PASS, and nothing the run made is
    left: namespaces, scratch folder, lease, temp folders, processes, host links and rules."""
    rng = random.Random(SEED)
    host = host_network_state()
    phases: Counter[str] = Counter()
    for i in range(SIGNAL_RUNS):
        name = ("emulated", "proxied")[i % 2]
        signum = (signal.SIGINT, signal.SIGTERM)[(i // 2) % 2]
        where = ("anywhere", "lab set-up", "teardown", "anywhere")[(i // 2) % 4]
        namespaces = faultlab_namespaces()
        trial = Trial.start(profiles[name], tmp_path / f"{i:02d}")
        when = aim(trial, rng, where, lifetimes[name])
        sent = trial.send(signum)
        if sent and i % 3 == 0:
            # A second signal, the other one, while the first's teardown runs: it changes
            # nothing (neither the teardown nor the code).
            pause = rng.uniform(0.02, 0.2)
            time.sleep(pause)
            other = signal.SIGTERM if signum == signal.SIGINT else signal.SIGINT
            when += f", then {other.name} {pause:.3f}s later" if trial.send(other) else ""
        code = trial.wait()
        what = (f"run {i} ({name}, {signum.name} {when}, fell in: {trial.phase()}): "
                f"exit {code}\n{trial.output[-3000:]}")
        phases[trial.phase()] += 1
        assert "Traceback" not in trial.output, what
        verdicts = VERDICT.findall(trial.output)
        if sent and code == -signum:
            # In the process's last instant, after faultlab's last look, the signal's default
            # action ends it (a shell says 128 + the signal too).
            assert verdicts and trial.at("run.end") is not None, what
        elif not sent or code != 128 + signum:
            # Only a run that had decided, reported and exited (or was exiting with its
            # signals held) before the signal came.
            assert verdicts and code == VERDICT_CODES[verdicts[-1][1]], what
            if sent:
                end = trial.at("run.end")
                assert end is not None and trial.clock(trial.signal_wall or 0) >= end, what
        else:
            assert f"interrupted by {signum.name}" in trial.output, what
        teardown = trial.at("run.teardown")
        if sent and trial.run_dir is not None and (teardown is None or trial.clock(
                trial.signal_wall or 0) < teardown - 0.05):
            # Cut before its evidence was complete: never a verdict, always said so.
            ends = [e for e in trial.events if e["event"] == "run.end"]
            assert ends and ends[-1]["verdict"] == "ERROR", what
            assert "interrupted" in (trial.run_dir / "summary.md").read_text(), what
            assert not verdicts or verdicts[-1][1] != "PASS", what
        assert trial.leftovers(namespaces, host) == [], what
    print(f"\n{SIGNAL_RUNS} runs; where the signal fell: {dict(phases)}")


@pytest.mark.parametrize(("signum", "at_exit"), [(signal.SIGINT, False), (signal.SIGTERM, True)],
                         ids=["SIGINT at the verdict line", "SIGTERM as the process ends"])
def test_a_signal_after_the_verdict_line_exits_with_its_code(
        profiles: dict[str, Path], tmp_path: Path, signum: signal.Signals, at_exit: bool) -> None:
    """The installed command, sent a signal as the run's verdict line is printed, or after it as
    the process ends (the interpreter's last half second, where it was once ignored and the
    command exited 0): exit 128 + the signal, said on stderr; the verdict and the run's record
    stand, and nothing is left."""
    namespaces, host = faultlab_namespaces(), host_network_state()
    script = signal_at("verdict", signum, at_exit) + console_script()
    trial = Trial.start(profiles["emulated"], tmp_path, ("-c", script))
    code = trial.wait()
    what = f"{signum.name}, at exit: {at_exit}: exit {code}\n{trial.output[-3000:]}"
    assert code == 128 + signum, what
    assert [v for _, v in VERDICT.findall(trial.output)] == ["PASS"], what
    assert (f"faultlab: interrupted by {signum.name}; it came as the command ended; what it "
            "wrote is whole\n") in trial.output, what
    assert "Traceback" not in trial.output, what
    assert [e["verdict"] for e in trial.events if e["event"] == "run.end"] == ["PASS"], what
    assert trial.leftovers(namespaces, host) == [], what


@pytest.mark.timeout(900)
def test_gc_removes_everything_a_sigkilled_run_made(
        profiles: dict[str, Path], lifetimes: dict[str, float], tmp_path: Path) -> None:
    """10 runs (emulated and proxied) SIGKILLed at seeded moments over their whole life, some
    aimed at the lab's set-up and at the teardown; then
    `faultlab lab gc` (with the run's TMPDIR) leaves none of their namespaces, scratch folders,
    leases, temp folders or processes, and the host's links and rules as they were."""
    rng = random.Random(SEED + 1)
    host = host_network_state()
    phases: Counter[str] = Counter()
    for i in range(KILL_RUNS):
        name = ("emulated", "proxied")[i % 2]
        where = ("anywhere", "lab set-up", "anywhere", "teardown", "anywhere")[i % 5]
        namespaces = faultlab_namespaces()
        trial = Trial.start(profiles[name], tmp_path / f"{i:02d}")
        when = aim(trial, rng, where, lifetimes[name])
        trial.send(signal.SIGKILL)
        trial.wait()
        phases[trial.phase()] += 1
        done = gc(trial.tmp)
        what = (f"run {i} ({name}, SIGKILL {when}, fell in: {trial.phase()}):\n"
                f"{done.stdout}{done.stderr}")
        assert done.returncode == 0 and "Traceback" not in done.stderr, what
        assert trial.leftovers(namespaces, host) == [], what
    print(f"\n{KILL_RUNS} runs; where SIGKILL fell: {dict(phases)}")
