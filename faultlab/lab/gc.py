"""`faultlab lab gc`: remove what SIGKILLed runs left behind, and nothing that is not faultlab's.

A run as root owns a slot through its lease (`/run/faultlab/lab-<slot>.pid`: pid and start time),
taken before anything else of its lab exists (`faultlab.lab.netns`, on which every backend
builds). Everything it makes in the host's view carries the slot: the namespaces
`faultlab-<slot>-<role>` (their veths and iptables rules live inside them), the processes inside
those namespaces, the scratch folder `/run/faultlab/lab-<slot>/` (the proxy's control socket),
the docker lab's containers (labelled with the slot and the run's lease). Each backend says what
it leaves (`Lab.leftovers`); gc asks every registered backend. A slot whose lease names a live
process is spared; any other slot with traces is collected, the lease last, so that no new run
takes the slot while it is being cleaned (a slot with no lease at all is first leased by gc
itself). Outside the slots, folders in the temp dir named with a pid (a spare microphone folder,
a rootless lab's private folder, and what each client kind says it leaves, `ClientKind.pid_folders`:
a browser client's profile) go once that pid is gone. The
host's own network is never changed by a run, and gc touches nothing without faultlab's names.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from faultlab.clients.kind import ClientKind
from faultlab.errors import FaultlabError, PrivilegeError
from faultlab.lab import LABS
from faultlab.lab.base import Leftovers
from faultlab.lab.netns import LEASE_DIR, lab_owner, lease_path, take_lease
from faultlab.lab.privilege import in_user_namespace
from faultlab.lab.process import SPARE_DIR_PREFIX, leftover_dirs
from faultlab.profile.client_kinds import BROWSER, BUILTIN, COMMAND, client_kinds


def _leftovers() -> list[Leftovers]:
    """Each backend's, once: a backend built on another (after it in LABS) goes first, since what
    it adds holds on to what it builds on (a container's network is bound to a namespace's name)."""
    return list(dict.fromkeys(lab.leftovers for lab in reversed(LABS.values())))


def _kinds(report: list[str]) -> list[ClientKind]:
    """Every installed client kind, or faultlab's own when a plugin does not load: a broken
    plugin does not stop the reaping of what faultlab's own kinds left."""
    try:
        return list(client_kinds().values())
    except FaultlabError as exc:
        report.append(f"client kinds of plugins not asked: {exc}")
        return [COMMAND, BUILTIN, BROWSER]


def collect() -> list[str]:
    """Remove leftover faultlab labs; returns one line per thing removed or spared."""
    if os.geteuid() != 0 or in_user_namespace():
        raise PrivilegeError("lab gc needs root (rootless labs vanish with their run)")
    backends = _leftovers()
    report: list[str] = []
    for slot in sorted(set().union(*(b.slots() for b in backends))):
        # A slot with no lease is leased by gc for the cleaning, so that no run starts in it.
        claimed = take_lease(slot)
        owner = None if claimed else lab_owner(slot)
        if owner is not None:
            report.append(f"spared lab {slot}: run {owner} is alive")
            continue
        lease = lease_path(slot)
        if not claimed and not lease.exists():
            continue  # its run has just torn it down, and the slot may be a new run's by now
        for backend in backends:
            report += backend.collect(slot)
        lease.unlink(missing_ok=True)
        if not claimed:
            report.append(f"removed {lease}")
    if LEASE_DIR.is_dir():
        # A lease's draft (`.lab-SLOT.PID.THREAD`) outlives only a run killed while writing it.
        for draft in LEASE_DIR.glob(".lab-*"):
            writer = draft.name.split(".")[2]
            if writer.isdigit() and not Path(f"/proc/{writer}").exists():
                draft.unlink(missing_ok=True)
    for prefix in dict.fromkeys((SPARE_DIR_PREFIX, *(p for b in backends for p in b.pid_folders),
                                 *(p for k in _kinds(report) for p in k.pid_folders))):
        for folder in leftover_dirs(prefix):
            shutil.rmtree(folder, ignore_errors=True)
            report.append(f"removed {folder}")
    return report
