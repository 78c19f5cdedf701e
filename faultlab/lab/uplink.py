"""The router's uplink to the world outside the lab, for a target that is not in it.

slirp4netns (a user-mode TCP/IP stack, Debian's `slirp4netns`) puts a TAP device in the router's
namespace and carries what the router sends there through ordinary sockets of its own process,
which lives in faultlab's network namespace (the host's). So the host's links, routes and
iptables stay exactly as they were, no NAT rule is added on the host, and it works without root
(in faultlab's user namespace). Its network is 10.0.2.0/24: the router is 10.0.2.100, the gateway
10.0.2.2, which is also the host's loopback when asked for (else refused), and 10.0.2.3 answers
DNS with the host's resolver. slirp answers only its own network's addresses, so the router
masquerades the client's packets behind its own, in its own iptables.

Every packet fault on the router still cuts the client off the real path (its packets cross the
router's FORWARD chain before they reach the uplink); the service, whose TCP talks to slirp's
sockets, meets it as silence, not as loss. slirp4netns is given an exit pipe whose other
end only faultlab holds, so it ends with faultlab, even when faultlab is SIGKILLed.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any

from faultlab.errors import LabError, MechanismError
from faultlab.lab.namespace import Namespace, write_sysctl
from faultlab.lab.netfilter import masquerade

IFACE = "up0"
NETWORK = IPv4Network("10.0.2.0/24")
ROUTER = IPv4Address("10.0.2.100")
GATEWAY = IPv4Address("10.0.2.2")
DNS = IPv4Address("10.0.2.3")
# The host's 127.0.0.1 as the lab sees it, when the uplink lets it through.
HOST_LOOPBACK = GATEWAY
# slirp4netns's own advice: a large MTU on the TAP saves it work per packet; the lab's veths keep
# 1500, so what the client sees does not change.
MTU = 65520
READY_TIMEOUT_S = 5.0
TUN = "/dev/net/tun"
SEARCH_PATH = "/usr/bin:/usr/sbin:/bin:/sbin"


@dataclass(frozen=True)
class UplinkSpec:
    """What a run asks of the uplink: whether the lab may reach the host's own loopback (a
    service on this machine standing in for a remote one), which is refused otherwise."""

    host_loopback: bool = False


class Uplink:
    """slirp4netns attached to the router's namespace; `start` and `stop` run outside the event
    loop (in the lab's build and teardown)."""

    def __init__(self, router: Namespace, spec: UplinkSpec, log: Path) -> None:
        self.router = router
        self.spec = spec
        self.log = log
        self._process: subprocess.Popen[bytes] | None = None
        self._exit_w: int | None = None

    iface = IFACE

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def describe(self) -> dict[str, Any]:
        """The fields the run's `lab.ready` event gives the uplink."""
        return {"uplink": "slirp4netns", "uplink_address": str(ROUTER),
                "uplink_dns": str(DNS), "uplink_pid": self.pid,
                "host_loopback": str(HOST_LOOPBACK) if self.spec.host_loopback else None}

    def start(self) -> None:
        binary = shutil.which("slirp4netns", path=SEARCH_PATH)
        if binary is None:
            raise MechanismError("a remote target needs slirp4netns: apt-get install slirp4netns")
        ready_r, ready_w = os.pipe()
        exit_r, self._exit_w = os.pipe()
        argv = [binary, "--configure", f"--mtu={MTU}", "--netns-type=path",
                f"--ready-fd={ready_w}", f"--exit-fd={exit_r}"]
        if not self.spec.host_loopback:
            argv.append("--disable-host-loopback")
        argv += [str(self.router.path), IFACE]
        try:
            with self.log.open("ab") as out:
                self._process = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                    pass_fds=(ready_w, exit_r), start_new_session=True)
        except OSError as exc:
            raise MechanismError(f"cannot start slirp4netns: {exc}") from None
        finally:
            os.close(ready_w)
            os.close(exit_r)
        try:
            self._wait_ready(ready_r)
        finally:
            os.close(ready_r)
        self.router.call(_route_out)

    def _wait_ready(self, ready_r: int) -> None:
        readable, _, _ = select.select([ready_r], [], [], READY_TIMEOUT_S)
        if readable and os.read(ready_r, 1) == b"1":
            return
        assert self._process is not None
        code = self._process.poll()
        said = self.log.read_text(errors="replace")
        if TUN in said and "Permission denied" in said:
            raise LabError(f"the uplink needs {TUN}, which this user may not open: run as root, "
                           f"or make it 0666 as udev's usual rule does (chmod 0666 {TUN})")
        last = said.strip().splitlines()[-1:] or ["no output"]
        raise LabError(f"the uplink (slirp4netns) did not come up"
                       f"{'' if code is None else f' (exit code {code})'}: {last[0]}")

    def stop(self) -> None:
        """End slirp4netns: it exits when its exit pipe closes; after a second, it is killed."""
        if self._exit_w is not None:
            os.close(self._exit_w)
            self._exit_w = None
        if self._process is not None:
            try:
                self._process.wait(1.0)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self._process.kill()
                self._process.wait()
            self._process = None


def _route_out() -> None:
    """In the router: the client's packets leave behind the router's uplink address."""
    masquerade(IFACE)
    # A connection's packets that conntrack finds out of its window (after a long drop, say) would
    # be marked INVALID and leave un-NATed, which slirp drops: let the ends' TCP judge them.
    write_sysctl("net.netfilter.nf_conntrack_tcp_be_liberal", 1)
