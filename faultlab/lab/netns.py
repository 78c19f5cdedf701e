"""The namespace lab: client ns ─ router ns ─ server ns, the router forwarding between them.

Each veth is created from inside the router with its peer placed directly in the end's namespace
(moving a veth afterwards costs ~20 ms each). Names carry faultlab's prefix and a slot number; the
slot also picks the addresses, from 198.18.0.0/15 (RFC 2544's benchmarking range, never a LAN), so
several labs run at once. A lab built as root takes its slot's lease before anything else, then
its scratch folder next to the lease, then the namespaces; teardown removes them in reverse, the
lease last, and `lab gc` does the same for a run that was SIGKILLed. A lab built without root
lives in the user namespace of its run and vanishes with it, but for its private folder in the
temp dir (`faultlab-netns-<pid>-*`, which `lab gc` removes once that pid is gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

from faultlab.errors import LabError
from faultlab.interrupt import uncancelled
from faultlab.lab.base import Lab, LabSpec, Leftovers, Role
from faultlab.lab.links import configure_end, wait_links_up, wire_router
from faultlab.lab.namespace import Namespace, remove_namespace, write_sysctl
from faultlab.lab.privilege import in_user_namespace
from faultlab.lab.uplink import Uplink, UplinkSpec

NETNS_PREFIX = "faultlab-"
ROOT_NETNS_DIR = Path("/run/netns")
# A lab built as root leaves `lab-<slot>.pid` here, naming the run that owns it, and its scratch
# folder `lab-<slot>/`; `lab gc` spares the labs of live runs.
LEASE_DIR = Path("/run/faultlab")
PRIVATE_DIR_PREFIX = "faultlab-netns-"
ADDRESS_POOL = IPv4Network("198.18.0.0/15")
SLOTS = ADDRESS_POOL.num_addresses // 8
ROLES = ("router", "client", "server")
LAB_NAME = re.compile(rf"^{re.escape(NETNS_PREFIX)}(\d+)-(client|router|server)$")
LEASE_NAME = re.compile(r"^lab-(\d+)(?:\.pid)?$")
# How long `lab gc` waits for the processes it killed to leave a slot's namespaces.
KILL_WAIT_S = 2.0


@dataclass(frozen=True)
class Addressing:
    """The two links' subnets: the router takes the first host of each, the end the second."""

    client_net: IPv4Network
    server_net: IPv4Network

    @classmethod
    def for_slot(cls, slot: int) -> Addressing:
        base = ADDRESS_POOL.network_address + 8 * slot
        return cls(IPv4Network(f"{base}/30"), IPv4Network(f"{base + 4}/30"))

    def _host(self, net: IPv4Network, n: int) -> IPv4Interface:
        return IPv4Interface(f"{net.network_address + n}/{net.prefixlen}")

    @property
    def router_client(self) -> IPv4Interface:
        return self._host(self.client_net, 1)

    @property
    def client(self) -> IPv4Interface:
        return self._host(self.client_net, 2)

    @property
    def router_server(self) -> IPv4Interface:
        return self._host(self.server_net, 1)

    @property
    def server(self) -> IPv4Interface:
        return self._host(self.server_net, 2)


class NetnsLab(Lab):
    """Three namespaces wired in a line; an async context manager that always tears down."""

    backend: ClassVar[str] = "netns"
    client_link: ClassVar[str] = "c0"
    server_link: ClassVar[str] = "s0"
    client_iface: ClassVar[str] = "eth0"
    server_iface: ClassVar[str] = "eth0"

    def __init__(
        self,
        addressing: Addressing | None = None,
        sysctl: Mapping[Role, Mapping[str, str | int]] | None = None,
        uplink: UplinkSpec | None = None,
    ) -> None:
        self._fixed_addressing = addressing
        self.sysctl = sysctl or {}
        self.uplink_spec = uplink
        self.uplink: Uplink | None = None
        self.slot = -1
        self.addressing = addressing or Addressing.for_slot(0)
        self.namespaces: dict[str, Namespace] = {}
        self._paths: list[Path] = []
        self._private_dir: Path | None = None
        self._scratch: Path | None = None

    @classmethod
    def build(cls, spec: LabSpec) -> Self:
        return cls(Addressing(*spec.subnets) if spec.subnets else None, spec.sysctl, spec.uplink)

    def place(self, role: Role) -> Namespace:
        return self.namespaces[role]

    @property
    def scratch(self) -> Path:
        """`/run/faultlab/lab-<slot>/` as root (under the slot's lease), the private folder
        without root."""
        assert self._scratch is not None, "the lab is not built"
        return self._scratch

    @property
    def target_link(self) -> str:
        return self.uplink.iface if self.uplink is not None else self.server_link

    def describe(self) -> dict[str, Any]:
        uplink = self.uplink.describe() if self.uplink is not None else {}
        return {**super().describe(), "slot": self.slot, **uplink}

    @property
    def client_address(self) -> IPv4Address:
        return self.addressing.client.ip

    @property
    def server_address(self) -> IPv4Address:
        return self.addressing.server.ip

    @property
    def router_address(self) -> IPv4Address:
        return self.addressing.router_client.ip

    async def __aenter__(self) -> Self:
        # A thread cannot be stopped: a run cancelled meanwhile waits for the build to end, so
        # that the teardown undoes all of it.
        try:
            await uncancelled(asyncio.to_thread(self._build))
        except BaseException:
            await uncancelled(asyncio.to_thread(self._teardown))
            raise
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await uncancelled(asyncio.to_thread(self._teardown))

    def _netns_dir(self) -> Path:
        if in_user_namespace():
            # /run/netns belongs to the host's root; a rootless lab keeps its own, private one.
            self._private_dir = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_DIR_PREFIX}{os.getpid()}-"))
            self._scratch = self._private_dir
            return self._private_dir
        return ROOT_NETNS_DIR

    def _create_namespaces(self) -> None:
        directory = self._netns_dir()
        start = random.randrange(SLOTS)
        for attempt in range(64):
            slot = (start + attempt) % SLOTS
            paths = {role: directory / netns_name(slot, role) for role in ROLES}
            if any(p.exists() for p in paths.values()):
                continue
            if self._private_dir is None and not take_lease(slot):
                continue
            self.slot = slot
            try:
                if self._private_dir is None:
                    self._scratch = make_scratch(slot)
                # A name taken all the same (a rootless run's, a leftover's) fails with EEXIST.
                for role in ROLES:
                    self.namespaces[role] = Namespace.create(role, paths[role])
                    self._paths.append(paths[role])
            except FileExistsError:
                self._release()
                continue
            except OSError as exc:
                self._release()
                raise LabError(f"cannot create network namespaces: {exc}") from None
            if self._fixed_addressing is None:
                self.addressing = Addressing.for_slot(slot)
            return
        raise LabError("no free lab slot: too many faultlab labs (see `faultlab lab gc`)")

    def _build(self) -> None:
        self._create_namespaces()
        a = self.addressing
        try:
            self.router.call(wire_router, ((self.client_link, self.client.path, a.router_client),
                                           (self.server_link, self.server.path, a.router_server)))
            self.client.call(configure_end, self.client_iface, a.client, a.router_client.ip)
            self.server.call(configure_end, self.server_iface, a.server, a.router_server.ip)
            self.router.call(wait_links_up, (self.client_link, self.server_link))
            self.client.call(wait_links_up, (self.client_iface,))
            self.server.call(wait_links_up, (self.server_iface,))
            for role, settings in self.sysctl.items():
                for name, value in settings.items():
                    self.namespaces[role].call(write_sysctl, name, value)
        except OSError as exc:
            raise LabError(f"cannot wire the lab: {exc}") from None
        except Exception as exc:  # pyroute2 raises its own NetlinkError (an OSError) or others
            raise LabError(f"cannot wire the lab: {exc}") from None
        if self.uplink_spec is not None:
            self.uplink = Uplink(self.router, self.uplink_spec, self.scratch / "uplink.log")
            self.uplink.start()

    def _remove_namespaces(self) -> None:
        for ns in self.namespaces.values():
            ns.close()
        self.namespaces = {}
        for path in self._paths:
            with contextlib.suppress(OSError):
                remove_namespace(path)
        self._paths.clear()

    def _release(self) -> None:
        """Remove the namespaces and the scratch folder, then give the slot's lease back."""
        self._remove_namespaces()
        if self.slot >= 0 and self._private_dir is None:
            shutil.rmtree(scratch_path(self.slot), ignore_errors=True)
            self._scratch = None
            lease_path(self.slot).unlink(missing_ok=True)
        self.slot = -1

    def _teardown(self) -> None:
        if self.uplink is not None:
            self.uplink.stop()
            self.uplink = None
        self._release()
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)
            self._private_dir = self._scratch = None


def netns_name(slot: int, role: str) -> str:
    """The name of a lab's namespace: `faultlab-<slot>-<role>`."""
    return f"{NETNS_PREFIX}{slot}-{role}"


def lease_path(slot: int) -> Path:
    return LEASE_DIR / f"lab-{slot}.pid"


def scratch_path(slot: int) -> Path:
    return LEASE_DIR / f"lab-{slot}"


def make_scratch(slot: int) -> Path:
    """The scratch folder of a slot whose lease this process holds (one found there is a
    leftover: the lease says nobody else has the slot)."""
    path = scratch_path(slot)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(mode=0o700)
    return path


def take_lease(slot: int) -> bool:
    """Claim a slot for this process before any of its namespaces exist, so that `lab gc` never
    takes a lab being built for a leftover. The lease appears whole or not at all (written aside,
    then linked into place, which fails if another run holds the slot)."""
    LEASE_DIR.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    draft = LEASE_DIR / f".lab-{slot}.{pid}.{threading.get_ident()}"
    draft.write_text(f"{owner_text(pid)}\n")
    try:
        os.link(draft, lease_path(slot))
        return True
    except FileExistsError:
        return False
    finally:
        draft.unlink(missing_ok=True)


def owner_text(pid: int) -> str:
    """How a lease (and a container's owner label) names process `pid`: its pid and start
    time."""
    return f"{pid} {process_start_time(pid)}"


def lab_owner(slot: int) -> int | None:
    """The pid of the live process that holds this slot's lease, if any."""
    try:
        pid_text, started = lease_path(slot).read_text().split()
        pid = int(pid_text)
        return pid if process_start_time(pid) == int(started) else None
    except (OSError, ValueError):
        return None


def leftover_namespaces() -> list[str]:
    """faultlab's namespaces on this host whose run is gone."""
    if not ROOT_NETNS_DIR.is_dir():
        return []
    out = []
    for name in sorted(os.listdir(ROOT_NETNS_DIR)):
        match = LAB_NAME.match(name)
        if match is not None and lab_owner(int(match.group(1))) is None:
            out.append(name)
    return out


def process_start_time(pid: int) -> int:
    """The start time of a process in clock ticks since boot: with the pid, a process's identity
    (a pid alone may have been reused)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19])


def leftover_slots() -> set[int]:
    """The slots with a namespace or a lease on this host (`lab gc`)."""
    slots: set[int] = set()
    for folder, pattern in ((ROOT_NETNS_DIR, LAB_NAME), (LEASE_DIR, LEASE_NAME)):
        for name in os.listdir(folder) if folder.is_dir() else []:
            match = pattern.match(name)
            if match is not None:
                slots.add(int(match.group(1)))
    return slots


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


def collect_slot(slot: int) -> list[str]:
    """Remove what a dead run left in its slot: the processes in its namespaces, the namespaces,
    its scratch folder (the lease is `lab gc`'s to remove, last)."""
    return kill_processes(slot) + remove_namespaces(slot) + remove_scratch(slot)


NetnsLab.leftovers = Leftovers(leftover_slots, collect_slot, (PRIVATE_DIR_PREFIX,))
