"""The middlebox faults on real traffic between sockets in a lab's client and server namespaces:
an MTU black hole passes small messages and swallows large ones, a TLS stall hangs new handshakes
while an old connection goes on, a NAT timeout kills an idle flow and spares a kept-alive one;
and each revert leaves no rule, route or sysctl change behind."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyroute2 import IPRoute

from faultlab.connections import ConnectionTable
from faultlab.faults.nat_timeout import LIBERAL, LOOSE, TIMEOUT, _read_sysctls
from faultlab.lab.netns import NetnsLab
from faultlab.tls import LabCA

from ..bench.conftest import bench_module
from ..conftest import patience
from .helpers import lab_traces

pytestmark = pytest.mark.lab
measure = bench_module("measure")

PORT = 9443


@dataclass
class EchoPath:
    """A lab with an echo server (TLS or not) in its server namespace and a way to open
    connections to it from the client namespace."""

    lab: NetnsLab
    ctx: Any  # measure.LabContext, its connection table recording the SYNs of `connect`
    server_tls: ssl.SSLContext | None

    async def connect(self, tls: bool = False, timeout_s: float = 2.0
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        sock = await self.lab.client.run(measure.tcp_socket)
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.sock_connect(sock, (str(self.lab.server_address), PORT)),
                               timeout_s)
        self.ctx.connections.observe_syn(str(self.lab.client_address), sock.getsockname()[1],
                                         str(self.lab.server_address), PORT, loop.time())
        client_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT) if tls else None
        if client_tls is not None:
            client_tls.check_hostname = False
            client_tls.verify_mode = ssl.CERT_NONE
        return await asyncio.wait_for(asyncio.open_connection(
            sock=sock, ssl=client_tls, server_hostname="" if tls else None,
            ssl_handshake_timeout=60 if tls else None), timeout_s)

    def router_state(self) -> str:
        """The router's rules and routes, to compare before and after a fault."""
        def state() -> str:
            out = subprocess.run(["iptables-save"], capture_output=True, text=True,
                                 check=True).stdout
            # Only rules: a table the fault touched is listed afterwards, empty.
            rules = [line for line in out.splitlines() if line.startswith("-")]
            routes = subprocess.run(["ip", "route"], capture_output=True, text=True,
                                    check=True).stdout
            return "\n".join(rules) + "\n" + routes
        return self.lab.router.call(state)


@asynccontextmanager
async def lab_path(tmp_path: Path, tls: bool = False) -> AsyncIterator[EchoPath]:
    async with NetnsLab() as lab:
        server_tls = LabCA(tmp_path / "ca").server_context() if tls else None
        listener = await lab.server.run(measure.tcp_socket, PORT)
        server = await asyncio.start_server(measure.echo, sock=listener, ssl=server_tls)
        try:
            yield EchoPath(lab, measure.LabContext(lab, ConnectionTable()), server_tls)
        finally:
            server.close()
    # Teardown leaves nothing of the lab: its namespaces (with their conntrack tables and
    # sysctls), scratch folder and lease are gone.
    assert lab_traces(lab.slot, os.getpid()) == []


async def round_trip(conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], size: int,
                     timeout_s: float) -> bool:
    """Whether `size` bytes sent on `conn` come back whole within `timeout_s`."""
    reader, writer = conn
    writer.write(b"x" * size)
    try:
        await asyncio.wait_for(reader.readexactly(size), timeout_s)
    except TimeoutError:
        return False
    return True


def run(coro: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(coro())


def test_mtu_blackhole_passes_small_messages_and_swallows_large_ones(tmp_path: Path) -> None:
    """Toward the server at 1200 bytes: a 1,000-byte message makes its round trip, a 4,000-byte
    one never arrives (its 1,448-byte segments are dropped, and the router's ICMP
    "fragmentation needed" with them, so the client never learns a smaller MTU); the other way a
    large message still passes. After revert the stuck message arrives at the client's next
    retransmission and the router is as before."""
    async def go() -> None:
        async with lab_path(tmp_path) as path:
            before = path.router_state()
            conn = await path.connect()
            hole = measure.fault_of("mtu_blackhole", "mtu", mtu=1200, direction="to_server")
            details = await hole.apply(path.ctx)
            assert details["links"] == {"to_server": "s0"}
            assert await round_trip(conn, 1000, patience(1.0))
            reader, writer = conn
            writer.write(b"y" * 4000)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(reader.readexactly(4000), patience(1.5))
            dropped = path.lab.router.call(measure.chain_packets, "FL-mtu")
            assert dropped > 0, "the router sent no fragmentation-needed to filter"
            assert path.lab.client.call(_learned_mtu, str(path.lab.server_address)) is None
            await hole.revert(path.ctx)
            assert path.router_state() == before
            # The next retransmission, ~1 s of backoff later, goes through whole.
            await asyncio.wait_for(reader.readexactly(4000), patience(8.0))
            assert path.lab.client.call(_learned_mtu, str(path.lab.server_address)) is None

    run(go)


def _learned_mtu(address: str) -> int | None:
    """The path MTU the calling thread's namespace has cached toward `address`, if any."""
    with IPRoute() as ipr:
        (route,) = ipr.route("get", dst=address)
        metrics = route.get_attr("RTA_METRICS")
        return None if metrics is None else metrics.get_attr("RTAX_MTU")


def test_mtu_blackhole_to_the_client_spares_the_servers_way(tmp_path: Path) -> None:
    """Toward the client only: a small message makes its round trip; a large one reaches the
    server, whose echo of it never comes back."""
    async def go() -> None:
        async with lab_path(tmp_path) as path:
            conn = await path.connect()
            hole = measure.fault_of("mtu_blackhole", "mtu", mtu=1200, direction="to_client")
            await hole.apply(path.ctx)
            assert await round_trip(conn, 800, patience(1.0))
            assert not await round_trip(conn, 4000, patience(1.0))
            await hole.revert(path.ctx)

    run(go)


def test_tls_stall_hangs_new_handshakes_and_spares_an_open_connection(tmp_path: Path) -> None:
    """A TLS connection opened before the fault goes on echoing; one opened after completes its
    TCP handshake but never its TLS handshake; after revert a new one handshakes at once."""
    async def go() -> None:
        async with lab_path(tmp_path, tls=True) as path:
            before = path.router_state()
            old = await path.connect(tls=True)
            stall = measure.fault_of("tls_stall", "tls")
            await stall.apply(path.ctx)
            with pytest.raises(TimeoutError):
                await path.connect(tls=True, timeout_s=patience(1.5))
            assert await round_trip(old, 5000, patience(1.0))
            await stall.revert(path.ctx)
            assert path.router_state() == before
            await path.connect(tls=True, timeout_s=patience(1.0))

    run(go)


@pytest.mark.parametrize("then", ["drop", "reset"])
def test_nat_timeout_kills_an_idle_flow_and_spares_a_kept_alive_one(tmp_path: Path,
                                                                    then: str) -> None:
    """With `idle: 1s`: of two flows opened before the fault, the one sending every 300 ms lives,
    the one silent for 2.5 s is forgotten, so its next message is dropped (or reset); a flow
    opened after apply and left idle dies too. Revert restores the router's sysctls exactly and
    removes its rule; the host's own conntrack settings never change."""
    names = [TIMEOUT, LIBERAL, LOOSE]

    async def go() -> None:
        host = _read_sysctls(names)
        async with lab_path(tmp_path) as path:
            before, sysctls = path.router_state(), path.lab.router.call(_read_sysctls, names)
            kept, idle = await path.connect(), await path.connect()
            nat = measure.fault_of("nat_timeout", "nat", idle="1s", then=then)
            details = await nat.apply(path.ctx)
            assert details["adopted"] == 2
            late = await path.connect()
            assert _read_sysctls(names) == host
            for _ in range(8):
                assert await round_trip(kept, 100, patience(0.5))
                await asyncio.sleep(0.3)
            assert await round_trip(kept, 100, patience(0.5))
            for conn in (idle, late):
                if then == "drop":
                    assert not await round_trip(conn, 100, patience(1.0))
                else:
                    with pytest.raises(ConnectionResetError):
                        await round_trip(conn, 100, patience(1.0))
            await nat.revert(path.ctx)
            assert path.lab.router.call(_read_sysctls, names) == sysctls
            assert path.router_state() == before
        assert _read_sysctls(names) == host

    run(go)


def _legs_rules() -> list[str]:
    """The router's rules in the chains on the proxied legs (in the router's namespace)."""
    out = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line.startswith("-A FLP-")]


@pytest.mark.parametrize(("name", "params"), [
    ("mtu_blackhole", {"mtu": 1200}),
    ("tls_stall", {}),
    ("nat_timeout", {"idle": "1s", "then": "reset"}),
])
def test_with_the_proxy_a_middlebox_fault_acts_on_the_legs_and_reverts_clean(
        tmp_path: Path, name: str, params: dict[str, Any]) -> None:
    """With the proxy in the path each of these faults puts its rules on the legs (INPUT and
    OUTPUT, by the client's and the target's links: the redirected connections never cross
    FORWARD), says which legs in its details, and its revert leaves the router's rules, routes and
    sysctls as before. Their effect on proxied sessions is judged by the profiles run through the
    proxy (test_proxied_packet_faults)."""
    names = [TIMEOUT, LIBERAL, LOOSE]

    async def go() -> None:
        async with lab_path(tmp_path) as path:
            path.ctx.proxy = object()
            path.ctx.connections.port = PORT
            before, sysctls = path.router_state(), path.lab.router.call(_read_sysctls, names)
            hurt = measure.fault_of(name, "mb", **params)
            details = await hurt.apply(path.ctx)
            rules = path.lab.router.call(_legs_rules)
            links = {path.lab.client_link, path.lab.target_link}
            assert rules and all(any(link in r for link in links) for r in rules), rules
            assert details["legs"], details
            if name == "mtu_blackhole":
                # No route shrinks: the proxy, a local sender, would adapt to it.
                assert "mtu" not in path.router_state()
            await hurt.revert(path.ctx)
            assert path.lab.router.call(_legs_rules) == []
            assert path.router_state() == before
            assert path.lab.router.call(_read_sysctls, names) == sysctls

    run(go)
