"""`faultlab doctor`: what this machine offers faultlab, and the fix for what is missing."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultlab.capture.tshark import TSHARK_HINT, find_tshark
from faultlab.faults import FAULTS, Fault
from faultlab.lab.netns import leftover_namespaces
from faultlab.lab.privilege import in_user_namespace, userns_available

SBIN_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    optional: bool = False


def _version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr) else ""


def containers() -> Check:
    """Whether the docker lab can run a member as a container here, and why not."""
    from faultlab.errors import LabError
    from faultlab.lab.engine import CLIENTS_IMAGE, LAB_IMAGE, engine_images

    try:
        version, have = engine_images([CLIENTS_IMAGE, LAB_IMAGE])
        missing = [name for name, there in have.items() if not there]
    except LabError as exc:
        return Check("docker", False, f"containers unavailable: {exc}",
                     "containers/engine.sh start (only for the docker lab)", optional=True)
    if os.geteuid() != 0 or in_user_namespace():
        return Check("docker", False, f"engine {version}, but a container in the lab needs root",
                     "run faultlab as root for the docker lab", optional=True)
    detail = f"containers usable: engine {version}" + (
        f"; faultlab's images missing: {', '.join(missing)} (make images)" if missing
        else "; faultlab's images built")
    return Check("docker", True, detail, optional=True)


def uplink() -> Check:
    """Whether a remote target's uplink (slirp4netns and its TAP device) can start here."""
    from faultlab.lab.uplink import SEARCH_PATH, TUN

    path = shutil.which("slirp4netns", path=SEARCH_PATH)
    if path is None:
        return Check("slirp4netns", False, "missing: no remote targets",
                     "apt-get install slirp4netns", optional=True)
    detail = _version([path, "--version"])
    if (os.geteuid() != 0 or in_user_namespace()) and not os.access(TUN, os.R_OK | os.W_OK):
        return Check("slirp4netns", False, f"{detail}, but {TUN} is not usable without root",
                     f"chmod 0666 {TUN} (udev's usual mode), or run as root", optional=True)
    resolvers = host_resolvers()
    if resolvers and all(ipaddress.ip_address(r).is_loopback for r in resolvers):
        # slirp4netns forwards the lab's DNS to the host's resolver; with the host's loopback
        # closed to the lab (the default) it cannot reach one there (slirp4netns issue 93).
        return Check("slirp4netns", False, f"{detail}, but the host's resolver is on its "
                     f"loopback ({resolvers[0]}): the lab cannot ask it",
                     "give remote targets an `address:` (or a resolver off the loopback)",
                     optional=True)
    return Check("slirp4netns", True, f"{detail}: remote targets", optional=True)


def host_resolvers(path: Path = Path("/etc/resolv.conf")) -> list[str]:
    """The host's DNS servers (the lab's DNS, through the uplink, asks them)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            with contextlib.suppress(ValueError):
                out.append(str(ipaddress.ip_address(parts[1].split("%")[0])))
    return out


def impairments() -> Check:
    """Which mechanism each packet impairment uses here, probed in a throwaway namespace."""
    from faultlab.impair.engine import probe

    if os.geteuid() != 0 or in_user_namespace():
        return Check("impairments", False, "not probed: needs root", "run faultlab doctor as root",
                     optional=True)
    found = probe()
    parts = [f"rate: {'tbf' if found.tbf is None else 'unavailable (' + found.tbf + ')'}",
             f"loss: {'iptables statistic' if found.statistic is None else 'unavailable'}",
             "latency, jitter, bursty loss, duplicate, reorder, corrupt: "
             + ("NFQUEUE userspace queue" if found.nfqueue is None
                else f"unavailable ({found.nfqueue})"),
             f"netem {'present' if found.netem else 'absent'} (not used)"]
    broken = [name for name, error in (("tbf", found.tbf), ("statistic", found.statistic),
                                       ("NFQUEUE", found.nfqueue)) if error is not None]
    return Check("impairments", not broken, "; ".join(parts),
                 f"a kernel with {', '.join(broken)} (sch_tbf, xt_statistic, nfnetlink_queue)",
                 optional=True)


def fault_catalogue() -> list[type[Fault[Any]]]:
    """Every fault a profile can name, by name: each says its layer and its mechanism."""
    return [FAULTS[name] for name in sorted(FAULTS)]


def diagnose() -> list[Check]:
    checks = []
    py = sys.version_info
    checks.append(Check("python", py >= (3, 12), f"{sys.version.split()[0]} at {sys.executable}",
                        "use Python >= 3.12 (the repo's .python-version selects pyenv's 3.13)"))
    if os.geteuid() == 0 and not in_user_namespace():
        checks.append(Check("privileges", True, "root: full labs"))
    elif userns_available():
        checks.append(Check("privileges", True, "not root; labs run inside a user namespace"))
    else:
        checks.append(Check("privileges", False, "not root and no user namespaces",
                            "run as root, or allow them: sysctl -w user.max_user_namespaces=15000"))
    for tool, package in (("iptables-restore", "iptables"), ("tcpdump", "tcpdump")):
        path = shutil.which(tool, path=SBIN_PATH)
        checks.append(Check(tool, path is not None,
                            _version([path, "--version"]) if path else "missing",
                            f"apt-get install {package}"))
    try:
        import pyroute2

        checks.append(Check("pyroute2", True, getattr(pyroute2, "__version__", "installed")))
    except ImportError:
        checks.append(Check("pyroute2", False, "missing", "make install"))
    try:
        import mitmproxy.version

        checks.append(Check("mitmproxy", True, mitmproxy.version.VERSION))
    except ImportError:
        checks.append(Check("mitmproxy", False, "missing: no app-level faults", "make install"))
    espeak = shutil.which("espeak-ng")
    checks.append(Check("espeak-ng", espeak is not None,
                        "emulator speech" if espeak else "missing: the emulator speaks a tone",
                        "apt-get install espeak-ng", optional=True))
    turnserver = shutil.which("turnserver")
    checks.append(Check("coturn", turnserver is not None,
                        "the lab's TURN server" if turnserver
                        else "missing: a profile with 'turn' cannot run",
                        "apt-get install coturn", optional=True))
    tshark = find_tshark()
    checks.append(Check("tshark", tshark is not None,
                        _version([tshark, "--version"]) if tshark
                        else "missing: `faultlab pcap` shows no frames inside TLS (wss://)",
                        TSHARK_HINT, optional=True))
    checks.append(uplink())
    checks.append(impairments())
    checks.append(containers())
    left = leftover_namespaces()
    checks.append(Check("leftovers", not left,
                        f"{len(left)} faultlab namespace(s) present" if left else "none",
                        "faultlab lab gc", optional=True))
    return checks
