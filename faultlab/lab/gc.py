"""`faultlab lab gc`: remove what SIGKILLed runs left behind, and nothing that is not faultlab's.

Only namespaces named with faultlab's prefix (and spare microphone folders in the temp dir,
`faultlab-mic-<pid>-*`, once that pid is gone) are touched; a lab whose lease names a live
faultlab process belongs to a running run and is spared. Processes still inside a leftover namespace are
killed by PID before it is removed. Veths and iptables rules live inside the namespaces and go
with them; the host's own network is never changed by a run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from pathlib import Path

from faultlab.errors import PrivilegeError
from faultlab.lab.namespace import remove_namespace
from faultlab.lab.netns import LAB_NAME, LEASE_DIR, ROOT_NETNS_DIR, lab_owner, lease_path
from faultlab.lab.privilege import in_user_namespace
from faultlab.mic import leftover_mic_dirs


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
        match = LAB_NAME.match(name)
        if match is None:
            continue
        slot = int(match.group(1))
        owner = lab_owner(slot)
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
        match = LAB_NAME.match(name)
        if match is not None:
            lease_path(int(match.group(1))).unlink(missing_ok=True)
    for folder in leftover_mic_dirs():
        shutil.rmtree(folder, ignore_errors=True)
        report.append(f"removed {folder}")
    if LEASE_DIR.is_dir():
        for lease in LEASE_DIR.glob("lab-*.pid"):
            slot = int(lease.stem.removeprefix("lab-"))
            if slot not in slots and lab_owner(slot) is None:
                lease.unlink(missing_ok=True)
        # A lease's draft (`.lab-SLOT.PID.THREAD`) outlives only a run killed while writing it.
        for draft in LEASE_DIR.glob(".lab-*"):
            writer = draft.name.split(".")[2]
            if writer.isdigit() and not Path(f"/proc/{writer}").exists():
                draft.unlink(missing_ok=True)
    return report
