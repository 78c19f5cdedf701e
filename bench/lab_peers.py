"""What a user would otherwise do to get faultlab's lab: the same three namespaces wired with the
`ip` CLI (a shell script), or a container started with `docker run --rm`.

The script builds exactly the netns lab's topology (client ─ router ─ server, each end's veth
made from the router with its peer placed in the end's namespace, the same addresses, loopbacks
up, forwarding on, default routes) and tears it down, one `ip` process per step. Its namespaces
are named `flbench-<pid>-<n>-<role>`, outside faultlab's `faultlab-<slot>-<role>` names, and are
deleted by name however the script ends.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from faultlab.errors import LabError
from faultlab.lab.engine import CLIENTS_IMAGE, engine_images
from faultlab.lab.netns import ROLES, Addressing, NetnsLab

NETNS_DIR = Path("/run/netns")
# The smallest image faultlab's `make images` leaves in the engine, then the clients image.
DOCKER_IMAGES = ["faultlab-base:trixie", CLIENTS_IMAGE]


def ip_script() -> str:
    """The lab's set-up and teardown as `ip` commands; $1 is the namespaces' name prefix."""
    a = Addressing.for_slot(0)
    r, c, s = '"$1-router"', '"$1-client"', '"$1-server"'
    lines = ["set -e", f"ip netns add {r}", f"ip netns add {c}", f"ip netns add {s}",
             f"ip -n {r} link set lo up"]
    for link, end, address in ((NetnsLab.client_link, c, a.router_client),
                               (NetnsLab.server_link, s, a.router_server)):
        lines += [f"ip -n {r} link add {link} type veth peer name eth0 netns {end}",
                  f"ip -n {r} addr add {address} dev {link}", f"ip -n {r} link set {link} up"]
    lines.append(f"ip netns exec {r} sysctl -qw net.ipv4.ip_forward=1")
    for end, address, gateway in ((c, a.client, a.router_client.ip),
                                  (s, a.server, a.router_server.ip)):
        lines += [f"ip -n {end} link set lo up", f"ip -n {end} addr add {address} dev eth0",
                  f"ip -n {end} link set eth0 up", f"ip -n {end} route add default via {gateway}"]
    lines += [f"ip netns del {r}", f"ip netns del {c}", f"ip netns del {s}"]
    return "\n".join(lines) + "\n"


class IpScript:
    """The script in a file of its own; `once()` runs it and returns its milliseconds."""

    def __init__(self, pid: int) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="faultlab-bench-ip-"))
        self.path = self._folder / "lab.sh"
        self.path.write_text(ip_script())
        self.commands = sum(1 for line in ip_script().splitlines() if line.startswith("ip "))
        self._pid = pid
        self._n = 0

    def once(self) -> float:
        self._n += 1
        prefix = f"flbench-{self._pid}-{self._n}"
        started = time.perf_counter()
        try:
            done = subprocess.run(["sh", str(self.path), prefix], capture_output=True, text=True,
                                  check=False)
            elapsed = (time.perf_counter() - started) * 1000
        finally:
            for role in ROLES:
                if (NETNS_DIR / f"{prefix}-{role}").exists():
                    subprocess.run(["ip", "netns", "del", f"{prefix}-{role}"], check=False,
                                   capture_output=True)
        if done.returncode != 0:
            raise RuntimeError(f"the ip script failed: {done.stderr.strip()[:200]}")
        return elapsed

    def close(self) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)


def docker_image() -> tuple[str | None, str]:
    """An image of the local engine to `docker run`, or None and why not."""
    if shutil.which("docker") is None:
        return None, "no docker CLI (apt-get install docker.io)"
    try:
        _, have = engine_images(DOCKER_IMAGES)
    except LabError as exc:
        return None, str(exc)
    for name in DOCKER_IMAGES:
        if have[name]:
            return name, ""
    return None, f"none of {', '.join(DOCKER_IMAGES)} in the local engine (make images)"


def docker_run(image: str) -> float:
    """`docker run --rm --network none IMAGE true`: milliseconds until it has exited and is
    removed."""
    started = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True,
                   capture_output=True)
    return (time.perf_counter() - started) * 1000
