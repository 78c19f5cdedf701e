"""Helpers for lab tests: run a profile in-process, snapshot the host's network, find what is left
of one lab."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from faultlab.events import Event
from faultlab.lab.netns import (
    LAB_NAME,
    NETNS_PREFIX,
    ROLES,
    ROOT_NETNS_DIR,
    lease_path,
    scratch_path,
)
from faultlab.lab.process import running
from faultlab.profile import Profile, parse_profile
from faultlab.result import RunResult
from faultlab.runner import Run

from ..conftest import REPO, faultlab, patience

# The capture's stamps (the kernel's wall clock), the clients' (their own wall clocks) and the
# run's (monotonic, from run.start's wall time) agree within this. A packet counted after
# `fault.applied`, which is stamped once the fault is in force, crossed after it was: a busy
# machine only stamps the run's event later, so it never makes such a count wrong.
CLOCKS_AGREE_S = 0.1


def run_profile(text: str, runs_dir: Path) -> RunResult:
    """Validate `text` as a profile and run it in this process."""
    return run_loaded(parse_profile(text, "<test>"), runs_dir)


def run_loaded(profile: Profile, runs_dir: Path) -> RunResult:
    """Run a validated profile in this process."""
    return asyncio.run(Run(profile, runs_dir).execute())


def first(result: RunResult, name: str, **where: object) -> Event:
    found = [e for e in result.observed if e.matches(name, where)]
    assert found, f"no {name} {where} in {[e.name for e in result.events]}"
    return min(found, key=lambda e: e.t)


def lost_by_its_rule(result: RunResult, since_t: float, not_before_s: float) -> None:
    """The client declared the session lost by its own keepalive rule (the builtin clients: no
    sign of life for their timeout; faultlab's ws-client: a ping unanswered for over its 2 s),
    no sooner than `not_before_s` after `since_t` (a fault's stamp). How much later is the
    machine's load: not judged."""
    lost = first(result, "client.lost")
    assert lost.fields.get("why") == "pings unanswered" or lost.fields["unanswered_s"] > 2.0
    assert lost.t - since_t >= not_before_s


def failed(result: RunResult) -> str:
    """A readable reason for an assertion message."""
    lines = [f"{o.expectation}: {o.seen}" for o in result.outcomes if not o.held]
    return f"error={result.error} failed={lines} dir={result.run_dir}"


def host_network_state() -> str:
    """The host's links, routes, rules and namespaces, as text that a run must leave unchanged.

    Labs' namespaces are left out: other runs on the machine come and go with theirs; a test
    judges its own lab's with `lab_traces`."""
    parts = []
    for argv in (["ip", "-d", "link"], ["ip", "route", "show", "table", "all"],
                 ["ip", "-6", "route", "show", "table", "all"], ["ip", "rule"],
                 ["ip", "netns", "list"], ["iptables-save"], ["ip6tables-save"]):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        # iptables-save stamps the time and packet counters; neither is state.
        text = re.sub(r"^#.*$", "", done.stdout, flags=re.M)
        text = re.sub(r"\[\d+:\d+\]", "[]", text)
        if argv[1:] == ["netns", "list"]:
            text = "\n".join(line for line in text.splitlines()
                              if not LAB_NAME.match(line.split(" ")[0]))
        parts.append(f"$ {' '.join(argv)}\n{text}")
    return "\n".join(parts)


def lab_traces(slot: int, owner: int) -> list[str]:
    """What is on the host of the lab that process `owner` built in `slot`: its namespaces, its
    scratch folder and its lease. Once another run has taken the slot (its lease names another
    pid), nothing there is `owner`'s."""
    lease = lease_path(slot)
    try:
        holder: int | None = int(lease.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        holder = None
    if holder is not None and holder != owner:
        return []
    names = [f"{NETNS_PREFIX}{slot}-{role}" for role in ROLES]
    scratch = scratch_path(slot)
    return ([n for n in names if (ROOT_NETNS_DIR / n).exists()]
            + ([str(scratch)] if scratch.exists() else [])
            + ([str(lease)] if holder == owner else []))


def lab_slot(result: RunResult) -> int:
    """The slot of the lab a run built (its `lab.ready` event)."""
    return int(first(result, "lab.ready").fields["slot"])


PEERS = """\
target: {builtin: ws-echo-server, port: 8765}
client:
  builtin: ws-client
  args: [--duration, {duration}, --ping-interval, 500ms, --lost-after, 2s {extra}]
timeout: 20s
"""


def peers(duration: str = "6s", extra: str = "") -> str:
    """The target/client part of a profile with faultlab's own peers."""
    return PEERS.replace("{duration}", duration).replace("{extra}", extra)


LONG = """\
name: long
target: {builtin: ws-echo-server, port: 8765}
client: {builtin: ws-client, args: [--duration, 30s]}
timeline:
  - id: cut
    when: {event: client.connected, where: {attempt: 1}}
    after: 1s
    do: {fault: drop, direction: to_client, connection: latest}
timeout: 40s
"""


def start_run(tmp_path: Path, *args: str, profile_text: str = LONG
              ) -> tuple[subprocess.Popen[bytes], Path]:
    """Start `faultlab run` on a long profile and wait until its fault is applied."""
    profile = tmp_path / "long.yaml"
    profile.write_text(profile_text)
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "faultlab", "run", "--runs-dir", str(runs),
                             *args, str(profile)], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + patience(20)
    while time.monotonic() < deadline:
        files = list(runs.glob("*/events.jsonl"))
        if files and "fault.applied" in files[0].read_text():
            return proc, files[0].parent
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the run never applied its fault")


def run_events(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]


def run_slot(run_dir: Path) -> int:
    """The slot of the lab the run built."""
    ready = next(e for e in run_events(run_dir) if e["event"] == "lab.ready")
    return int(str(ready["slot"]))


# Running, not a zombie (this machine's init reaps orphans lazily).
pid_alive = running


def suite_table(runs_dir: Path) -> dict[str, dict[str, str]]:
    """The table a `faultlab run` of several profiles wrote in `runs_dir`: each scenario's row,
    its cells by column."""
    (table,) = runs_dir.glob("suite-*.md")
    lines = [line for line in table.read_text().splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].split("|")[1:-1]]
    return {cells[0]: dict(zip(header, cells, strict=True))
            for cells in ([c.strip() for c in line.split("|")[1:-1]] for line in lines[2:])}


def assert_events_known(runs_dir: Path, folders: list[Path] | None = None) -> None:
    """Every event of every run folder in `runs_dir` (or of those `folders` only) matches a
    record of the vocabulary, its fields of their types (`faultlab events check`)."""
    if folders is None:
        folders = sorted(p.parent for p in runs_dir.glob("*/events.jsonl"))
    assert folders, f"no run folder in {runs_dir}"
    done = faultlab("events", "check", *map(str, folders))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
