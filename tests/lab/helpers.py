"""Helpers for lab tests: run a profile in-process, snapshot the host's network, find what is left
of one lab."""

from __future__ import annotations

import asyncio
import re
import subprocess
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
from faultlab.profile import parse_profile
from faultlab.result import RunResult
from faultlab.runner import Run


def run_profile(text: str, runs_dir: Path) -> RunResult:
    """Validate `text` as a profile and run it in this process."""
    profile = parse_profile(text, "<test>")
    return asyncio.run(Run(profile, runs_dir).execute())


def first(result: RunResult, name: str, **where: object) -> Event:
    found = [e for e in result.observed if e.matches(name, where)]
    assert found, f"no {name} {where} in {[e.name for e in result.events]}"
    return min(found, key=lambda e: e.t)


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
