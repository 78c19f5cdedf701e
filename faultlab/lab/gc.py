"""`faultlab lab gc`: remove what SIGKILLed runs left behind, and nothing that is not faultlab's.

Only namespaces named with faultlab's prefix are touched; a lab whose lease names a live faultlab
process belongs to a running run and is spared. Processes still inside a leftover namespace are
killed by PID before it is removed. Veths and iptables rules live inside the namespaces and go
with them; the host's own network is never changed by a run.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path

from faultlab.errors import PrivilegeError
from faultlab.lab.namespace import remove_namespace
from faultlab.lab.netns import (
    LEASE_DIR,
    NETNS_PREFIX,
    ROOT_NETNS_DIR,
    lease_path,
    process_start_time,
)
from faultlab.lab.privilege import in_user_namespace

_NAME = re.compile(rf"^{re.escape(NETNS_PREFIX)}(\d+)-(client|router|server)$")


def _owner_alive(slot: int) -> int | None:
    """The pid of the live process that holds this slot's lease, if any."""
    try:
        pid_text, started = lease_path(slot).read_text().split()
        pid = int(pid_text)
        return pid if process_start_time(pid) == int(started) else None
    except (OSError, ValueError):
        return None


def _pids_in(inodes: dict[tuple[int, int], str]) -> dict[int, str]:
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            st = os.stat(f"/proc/{entry}/ns/net")
            name = inodes.get((st.st_dev, st.st_ino))
            if name is not None:
                found[int(entry)] = name
    return found


def collect() -> list[str]:
    """Remove leftover faultlab labs; returns one line per thing removed or spared."""
    if os.geteuid() != 0 or in_user_namespace():
        raise PrivilegeError("lab gc needs root (rootless labs vanish with their run)")
    report: list[str] = []
    leftovers: dict[tuple[int, int], str] = {}
    slots: set[int] = set()
    names = sorted(os.listdir(ROOT_NETNS_DIR)) if ROOT_NETNS_DIR.is_dir() else []
    for name in names:
        match = _NAME.match(name)
        if match is None:
            continue
        slot = int(match.group(1))
        owner = _owner_alive(slot)
        if owner is not None:
            if slot not in slots:
                report.append(f"spared lab {slot}: run {owner} is alive")
            slots.add(slot)
            continue
        with contextlib.suppress(OSError):
            st = os.stat(ROOT_NETNS_DIR / name)
            leftovers[(st.st_dev, st.st_ino)] = name
    victims = _pids_in(leftovers)
    for pid, name in sorted(victims.items()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            report.append(f"killed process {pid} in {name}")
    deadline = time.monotonic() + 2.0
    while victims and time.monotonic() < deadline:
        victims = {p: n for p, n in victims.items() if Path(f"/proc/{p}").exists()}
        time.sleep(0.02)
    for name in sorted(leftovers.values()):
        remove_namespace(ROOT_NETNS_DIR / name)
        report.append(f"removed namespace {name}")
        match = _NAME.match(name)
        if match is not None:
            lease_path(int(match.group(1))).unlink(missing_ok=True)
    if LEASE_DIR.is_dir():
        for lease in LEASE_DIR.glob("lab-*.pid"):
            slot = int(lease.stem.removeprefix("lab-"))
            if slot not in slots and _owner_alive(slot) is None:
                lease.unlink(missing_ok=True)
    return report
