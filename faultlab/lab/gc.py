"""`faultlab lab gc`: remove what SIGKILLed runs left behind, and nothing that is not faultlab's.

A run as root owns a slot through its lease (`/run/faultlab/lab-<slot>.pid`: pid and start time),
taken before anything else of its lab exists. Everything it makes in the host's view carries the
slot: the namespaces `faultlab-<slot>-<role>` (their veths and iptables rules live inside them),
the processes inside those namespaces, the scratch folder `/run/faultlab/lab-<slot>/` (the proxy's
control socket), the docker lab's containers (labelled with the slot and the run's lease). A slot
whose lease names a live process is spared; any other slot with traces is collected, the lease
last, so that no new run takes the slot while it is being cleaned (a slot with no lease at all is
first leased by gc itself). Outside the slots, folders in the temp dir named
with a pid (a spare microphone folder, a rootless lab's private folder) go once that pid is gone.
The host's own network is never changed by a run, and gc touches nothing without faultlab's names.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from faultlab.errors import PrivilegeError
from faultlab.lab.engine import container_slots, remove_containers
from faultlab.lab.namespace import remove_namespace
from faultlab.lab.netns import (
    LAB_NAME,
    LEASE_DIR,
    PRIVATE_DIR_PREFIX,
    ROLES,
    ROOT_NETNS_DIR,
    lab_owner,
    lease_path,
    netns_name,
    scratch_path,
    take_lease,
)
from faultlab.lab.privilege import in_user_namespace
from faultlab.lab.process import SPARE_DIR_PREFIX, leftover_dirs

LEASE_NAME = re.compile(r"^lab-(\d+)(?:\.pid)?$")
KILL_WAIT_S = 2.0


def _netns_ids(slot: int) -> dict[tuple[int, int], str]:
    """The slot's namespaces, by the (device, inode) that a process's /proc/PID/ns/net shows."""
    found = {}
    for role in ROLES:
        with contextlib.suppress(OSError):
            st = os.stat(ROOT_NETNS_DIR / netns_name(slot, role))
            found[(st.st_dev, st.st_ino)] = netns_name(slot, role)
    return found


def _pids_in(netns: dict[tuple[int, int], str]) -> dict[int, str]:
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            st = os.stat(f"/proc/{entry}/ns/net")
            name = netns.get((st.st_dev, st.st_ino))
            if name is not None:
                found[int(entry)] = name
    return found


def kill_processes(slot: int) -> list[str]:
    """SIGKILL, by PID, every process inside the slot's namespaces, and wait until none holds
    them (a zombie holds no namespace)."""
    netns = _netns_ids(slot)
    victims = _pids_in(netns) if netns else {}
    report = []
    for pid, name in sorted(victims.items()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            report.append(f"killed process {pid} in {name}")
    deadline = time.monotonic() + KILL_WAIT_S
    while victims and time.monotonic() < deadline:
        time.sleep(0.02)
        victims = _pids_in(netns)
    return report


def remove_namespaces(slot: int) -> list[str]:
    report = []
    for role in ROLES:
        path = ROOT_NETNS_DIR / netns_name(slot, role)
        if path.exists():
            remove_namespace(path)
            report.append(f"removed namespace {path.name}")
    return report


def remove_scratch(slot: int) -> list[str]:
    path = scratch_path(slot)
    if not path.exists():
        return []
    shutil.rmtree(path, ignore_errors=True)
    return [f"removed {path}"]


# What a run leaves in its slot, removed in this order while the slot's lease keeps new runs out:
# containers first (a container's network is bound to one of the slot's namespace names).
SLOT_COLLECTORS: list[Callable[[int], list[str]]] = [
    remove_containers, kill_processes, remove_namespaces, remove_scratch,
]
# Folders in the temp dir named `<prefix><pid>-*`, removed once that pid is gone.
PID_FOLDER_PREFIXES = (SPARE_DIR_PREFIX, PRIVATE_DIR_PREFIX)


def _slots_with_traces() -> set[int]:
    slots = container_slots()
    names = os.listdir(ROOT_NETNS_DIR) if ROOT_NETNS_DIR.is_dir() else []
    for name in names:
        match = LAB_NAME.match(name)
        if match is not None:
            slots.add(int(match.group(1)))
    names = os.listdir(LEASE_DIR) if LEASE_DIR.is_dir() else []
    for name in names:
        match = LEASE_NAME.match(name)
        if match is not None:
            slots.add(int(match.group(1)))
    return slots


def collect() -> list[str]:
    """Remove leftover faultlab labs; returns one line per thing removed or spared."""
    if os.geteuid() != 0 or in_user_namespace():
        raise PrivilegeError("lab gc needs root (rootless labs vanish with their run)")
    report: list[str] = []
    for slot in sorted(_slots_with_traces()):
        # A slot with no lease is leased by gc for the cleaning, so that no run starts in it.
        claimed = take_lease(slot)
        owner = None if claimed else lab_owner(slot)
        if owner is not None:
            report.append(f"spared lab {slot}: run {owner} is alive")
            continue
        lease = lease_path(slot)
        if not claimed and not lease.exists():
            continue  # its run has just torn it down, and the slot may be a new run's by now
        for collector in SLOT_COLLECTORS:
            report += collector(slot)
        lease.unlink(missing_ok=True)
        if not claimed:
            report.append(f"removed {lease}")
    if LEASE_DIR.is_dir():
        # A lease's draft (`.lab-SLOT.PID.THREAD`) outlives only a run killed while writing it.
        for draft in LEASE_DIR.glob(".lab-*"):
            writer = draft.name.split(".")[2]
            if writer.isdigit() and not Path(f"/proc/{writer}").exists():
                draft.unlink(missing_ok=True)
    for prefix in PID_FOLDER_PREFIXES:
        for folder in leftover_dirs(prefix):
            shutil.rmtree(folder, ignore_errors=True)
            report.append(f"removed {folder}")
    return report
