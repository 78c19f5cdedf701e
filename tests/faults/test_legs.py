"""Packet faults on proxied connections (faultlab.faults.legs): with the proxy in the path, drop,
reject, link_down and the impairments add a chain on both legs (INPUT and OUTPUT of the router),
beside their FORWARD chain, which stays exactly the direct path's; the exact batches, the server
leg of one connection once the proxy reports its upstream, and the reverts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from typing import cast

import pytest
from mitmproxy.connection import Client, Server
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

from faultlab.connections import ConnectionTable, Upstream
from faultlab.events import EventBus, RunClock
from faultlab.faults.impairment import Impairment
from faultlab.impair.core import Impairer, Shape
from faultlab.injector import FaultRuntime
from faultlab.lab.netfilter import commit
from faultlab.proxy.framelog import FrameLog
from faultlab.vocabulary.run import ProxyUpstream

from .conftest import (
    CLIENT,
    SERVER,
    SERVER_PORT,
    FakeContext,
    FakeNamespace,
    FakeProxyChannel,
    apply_and_revert,
    build,
    with_connections,
)
from .fake_proxy import Proxy

ROUTER_IP = "10.0.2.1"
ALL_CLIENT_LEG = "-p tcp -m conntrack --ctorigdstport 443 --ctstate DNAT"
ALL_SERVER_LEG = "-p tcp -m conntrack --ctorigdstport 443"
ONE_CLIENT_LEG = (f"-p tcp -m conntrack --ctorigsrc {CLIENT} --ctorigsrcport 40001"
                  f" --ctorigdst {SERVER} --ctorigdstport 443")
ONE_SERVER_LEG = (f"-p tcp -m conntrack --ctorigsrc {ROUTER_IP} --ctorigsrcport 51000"
                  f" --ctorigdst {SERVER} --ctorigdstport 443")
JUMPS = ["-I INPUT 1 -j FLP-cut", "-I OUTPUT 1 -j FLP-cut"]
UNJUMP = ["-D INPUT -j FLP-cut", "-D OUTPUT -j FLP-cut", "-F FLP-cut", "-X FLP-cut"]
UPSTREAM = Upstream(ROUTER_IP, 51000, SERVER, SERVER_PORT)


def proxied_context(*client_ports: int) -> FakeContext:
    """A run with the proxy in front of a target on 443, after the client's SYNs from
    `client_ports`."""
    ctx = FakeContext(connections=ConnectionTable(SERVER_PORT), proxy=FakeProxyChannel())
    return with_connections(ctx, *client_ports)


def batches(ns: FakeNamespace) -> list[tuple[str, list[str]]]:
    """Every iptables-restore batch run in `ns`, with its table."""
    return [(cast(str, args[1]), list(cast(list[str], args[0])))
            for fn, args in ns.calls if fn is commit]


def test_a_drop_with_the_proxy_hurts_both_legs_and_keeps_the_direct_chain() -> None:
    """drop both, all flows: the FORWARD chain is the direct path's, and a chain jumped to from
    INPUT and OUTPUT drops the redirected flows on the client link (by conntrack's original
    destination) and the proxy's flows to the target's port on the server's link; the revert
    removes the legs' chain, then the FORWARD one."""
    ctx = proxied_context()
    details = apply_and_revert(build("drop", step="cut"), ctx)
    assert details == {"direction": "both", "at": "router", "connection": None,
                       "legs": ["client", "server"]}
    assert ctx.lab.ns("router").batches == [
        [":FL-cut - [0:0]", "-A FL-cut -i c0 -j DROP", "-A FL-cut -o c0 -j DROP",
         "-I FORWARD 1 -j FL-cut"],
        [":FLP-cut - [0:0]",
         f"-A FLP-cut -i c0 {ALL_CLIENT_LEG} -j DROP", f"-A FLP-cut -o c0 {ALL_CLIENT_LEG} -j DROP",
         f"-A FLP-cut -o s0 {ALL_SERVER_LEG} -j DROP", f"-A FLP-cut -i s0 {ALL_SERVER_LEG} -j DROP",
         *JUMPS],
        UNJUMP,
        ["-D FORWARD -j FL-cut", "-F FL-cut", "-X FL-cut"],
    ]


def test_one_connection_is_its_original_tuple_and_its_reported_upstream() -> None:
    """drop to_server on connection 1: the client leg by the client's own four-tuple (what it
    sent, before the REDIRECT), the server leg by the upstream the proxy reported for it."""
    ctx = proxied_context(40001)
    ctx.connections.observe_upstream(40001, UPSTREAM)
    apply_and_revert(build("drop", {"direction": "to_server", "connection": 1}, step="cut"), ctx)
    assert ctx.lab.ns("router").batches[1] == [
        ":FLP-cut - [0:0]", f"-A FLP-cut -i c0 {ONE_CLIENT_LEG} -j DROP",
        f"-A FLP-cut -o s0 {ONE_SERVER_LEG} -j DROP", *JUMPS]


def test_a_step_before_the_upstream_hurts_the_client_leg_and_the_upstream_when_reported() -> None:
    """The upstream is not reported yet: the client leg's rules go in at once, the server leg's
    are appended to the same chain when the proxy reports it; the revert removes the chain."""
    ctx = proxied_context(40001)
    fault = build("drop", {"connection": "first"}, step="cut")

    async def go() -> None:
        await fault.apply(ctx)
        ctx.connections.observe_upstream(40001, UPSTREAM)
        await asyncio.sleep(0)
        await fault.revert(ctx)

    asyncio.run(go())
    assert ctx.lab.ns("router").batches[1:3] == [
        [":FLP-cut - [0:0]", f"-A FLP-cut -i c0 {ONE_CLIENT_LEG} -j DROP",
         f"-A FLP-cut -o c0 {ONE_CLIENT_LEG} -j DROP", *JUMPS],
        [f"-A FLP-cut -o s0 {ONE_SERVER_LEG} -j DROP", f"-A FLP-cut -i s0 {ONE_SERVER_LEG} -j DROP"],
    ]
    assert ctx.lab.ns("router").batches[3] == UNJUMP


def test_a_reverted_step_adds_nothing_when_the_upstream_comes_later() -> None:
    """Reverted before the proxy reports the upstream: nothing is added afterwards."""
    ctx = proxied_context(40001)
    apply_and_revert(build("drop", {"connection": 1}, step="cut"), ctx)
    ctx.connections.observe_upstream(40001, UPSTREAM)
    assert len(ctx.lab.ns("router").batches) == 4


def test_drop_at_the_client_leaves_the_server_leg_to_the_router() -> None:
    """`at: client` with the proxy: the client's namespace drops its own leg as without a proxy;
    the router drops the server leg."""
    ctx = proxied_context()
    details = apply_and_revert(build("drop", {"at": "client"}, step="cut"), ctx)
    assert details["legs"] == ["server"]
    assert ctx.lab.ns("client").batches[0] == [
        ":FL-cut - [0:0]", "-A FL-cut -o eth0 -j DROP", "-A FL-cut -i eth0 -j DROP",
        "-I OUTPUT 1 -j FL-cut", "-I INPUT 1 -j FL-cut"]
    assert ctx.lab.ns("router").batches == [
        [":FLP-cut - [0:0]", f"-A FLP-cut -o s0 {ALL_SERVER_LEG} -j DROP",
         f"-A FLP-cut -i s0 {ALL_SERVER_LEG} -j DROP", *JUMPS], UNJUMP]


RESET = "-j REJECT --reject-with tcp-reset"


@pytest.mark.parametrize(("toward", "legs", "rules"), [
    # Only what arrives from the end to reset is rejected: a REJECT of what the proxy sends
    # would reset the proxy's own socket.
    ("client", ["client"], [f"-A FLP-cut -i c0 {ALL_CLIENT_LEG} {RESET}"]),
    ("server", ["server"], [f"-A FLP-cut -i s0 {ALL_SERVER_LEG} {RESET}"]),
    ("both", ["client", "server"], [f"-A FLP-cut -i c0 {ALL_CLIENT_LEG} {RESET}",
                                    f"-A FLP-cut -i s0 {ALL_SERVER_LEG} {RESET}"]),
])
def test_reject_resets_each_end_on_its_own_leg(toward: str, legs: list[str],
                                               rules: list[str]) -> None:
    """reject toward the client rejects what the client sends to the proxy; toward the server,
    what the server sends to the proxy."""
    ctx = proxied_context()
    details = apply_and_revert(build("reject", {"toward": toward}, step="cut"), ctx)
    assert details["legs"] == legs
    assert ctx.lab.ns("router").batches[1] == [":FLP-cut - [0:0]", *rules, *JUMPS]
    assert ctx.lab.ns("router").batches[2] == UNJUMP


def test_link_down_with_the_proxy_silences_the_server_leg_while_down() -> None:
    """The link goes down (the client leg) and the server leg of every proxied flow is dropped
    both ways (the proxy would else answer the server): both legs are hurt; the revert brings the
    link up and removes the chain."""
    ctx = proxied_context()
    details = apply_and_revert(build("link_down", step="cut"), ctx)
    assert details == {"link": "c0", "legs": ["client", "server"]}
    assert ctx.lab.ns("router").links == [("c0", False), ("c0", True)]
    assert ctx.lab.ns("router").batches == [
        [":FLP-cut - [0:0]", f"-A FLP-cut -o s0 {ALL_SERVER_LEG} -j DROP",
         f"-A FLP-cut -i s0 {ALL_SERVER_LEG} -j DROP", *JUMPS], UNJUMP]


def test_link_down_without_the_proxy_is_the_link_alone() -> None:
    """No proxy: no rule at all, as before."""
    ctx = FakeContext()
    assert apply_and_revert(build("link_down", step="cut"), ctx) == {"link": "c0"}
    assert ctx.lab.ns("router").calls == []


def test_loss_with_the_proxy_is_a_statistic_rule_on_every_leg() -> None:
    """Independent loss: the direct chain in FORWARD, and the same `statistic` rule on both
    legs each way."""
    ctx = proxied_context()
    details = apply_and_revert(build("loss", {"loss_percent": 2}, step="cut"), ctx)
    assert details["legs"] == ["client", "server"]
    stat = "-m statistic --mode random --probability 0.020000 -j DROP"
    assert ctx.lab.ns("router").batches[1] == [
        ":FLP-cut - [0:0]", f"-A FLP-cut -i c0 {ALL_CLIENT_LEG} {stat}",
        f"-A FLP-cut -o c0 {ALL_CLIENT_LEG} {stat}", f"-A FLP-cut -o s0 {ALL_SERVER_LEG} {stat}",
        f"-A FLP-cut -i s0 {ALL_SERVER_LEG} {stat}", *JUMPS]
    assert ctx.lab.ns("router").batches[2] == UNJUMP


def fake_worker(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Shape, int, list[Shape] | None]]:
    """Replace the queue's process by a record of what it was asked (shape, lanes, each lane's
    shape); its queues are numbered from 1000."""
    from faultlab.faults import impairment

    started: list[tuple[Shape, int, list[Shape] | None]] = []

    async def start(lab: object, shape: Shape, lanes: int,
                    lane_shapes: list[Shape] | None = None) -> tuple[None, list[int]]:
        started.append((shape, lanes, lane_shapes))
        return None, list(range(1000, 1000 + lanes))

    monkeypatch.setattr(impairment, "start_worker", start)
    return started


def queue_batches(ctx: FakeContext) -> list[list[str]]:
    return [batch for table, batch in batches(ctx.lab.ns("router")) if table == "security"]


def test_latency_with_the_proxy_delays_the_client_leg_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Latency is the client leg's alone (on both legs it would count twice end to end): lanes
    for FORWARD and the client leg; what the proxy sends is queued unless it is the worker's own
    duplicate (marked)."""
    started = fake_worker(monkeypatch)
    ctx = proxied_context()
    details = apply_and_revert(build("latency", {"latency_ms": 50}, step="cut"), ctx)
    assert details["queues"] == [1000, 1001, 1002, 1003] and details["legs"] == ["client"]
    ((shape, lanes, shapes),) = started
    assert shape.latency_s == 0.05 and lanes == 4 and shapes == [shape] * 4
    assert queue_batches(ctx)[1] == [
        ":FLP-cut - [0:0]",
        f"-A FLP-cut -i c0 {ALL_CLIENT_LEG} -j NFQUEUE --queue-num 1002 --queue-bypass",
        f"-A FLP-cut -o c0 {ALL_CLIENT_LEG} -m mark ! --mark 0xfa17 "
        "-j NFQUEUE --queue-num 1003 --queue-bypass", *JUMPS]
    assert queue_batches(ctx)[2] == UNJUMP


def test_a_queue_that_does_more_than_delay_acts_on_the_server_leg_undelayed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Latency and bursty loss to the server: the server leg gets a lane whose shape loses as
    the client leg's does, without the delay."""
    started = fake_worker(monkeypatch)
    ctx = proxied_context()
    apply_and_revert(build("path", {"latency_ms": 50, "loss_percent": 10,
                                    "loss_burst_packets": 3, "direction": "to_server"},
                           step="cut"), ctx)
    ((shape, lanes, shapes),) = started
    undelayed = replace(shape, latency_s=0.0)
    assert lanes == 3 and shapes == [shape, shape, undelayed] and undelayed.loss == 0.1
    assert queue_batches(ctx)[1][1:3] == [
        f"-A FLP-cut -i c0 {ALL_CLIENT_LEG} -j NFQUEUE --queue-num 1001 --queue-bypass",
        f"-A FLP-cut -o s0 {ALL_SERVER_LEG} -m mark ! --mark 0xfa17 "
        "-j NFQUEUE --queue-num 1002 --queue-bypass"]


def test_rate_with_the_proxy_needs_no_leg_rule() -> None:
    """tbf sits on the interface each direction leaves by, which the proxy's own packets leave
    by too: no rule on the legs."""
    ctx = proxied_context()
    fault = build("rate", {"rate_kbps": 1000}, step="cut")
    assert isinstance(fault, Impairment)
    details = apply_and_revert(fault, ctx)
    assert "legs" not in details and batches(ctx.lab.ns("router")) == []


def test_upstreams_are_kept_by_client_port_whichever_report_comes_first() -> None:
    """The proxy's report may come before or after the capture's SYN; a waiter is called once,
    and a cancelled one never."""
    table = ConnectionTable(SERVER_PORT)
    table.observe_upstream(40001, UPSTREAM)
    conn1 = table.observe_syn(CLIENT, 40001, SERVER, SERVER_PORT, 0.1)
    conn2 = table.observe_syn(CLIENT, 40002, SERVER, SERVER_PORT, 0.2)
    assert conn1 is not None and conn2 is not None
    seen: list[Upstream] = []
    table.when_upstream(conn1, seen.append)
    cancel = table.when_upstream(conn2, seen.append)
    later = Upstream(ROUTER_IP, 51001, SERVER, SERVER_PORT)
    waiter: Callable[[Upstream], None] = seen.append
    table.when_upstream(conn2, waiter)
    cancel()
    table.observe_upstream(40002, later)
    assert seen == [UPSTREAM, later]


def test_the_run_keeps_the_upstreams_the_proxy_reports() -> None:
    """A `proxy.upstream` event of the proxy lands in the run's connection table."""
    table = ConnectionTable(SERVER_PORT)
    bus = EventBus(RunClock())
    FaultRuntime(proxied_context().lab, table, bus, None, None, [], lambda error: None)
    bus.announce("proxy", ProxyUpstream(40001, ROUTER_IP, 51000, SERVER, SERVER_PORT))
    bus.emit("client", "proxy.upstream", client_port=40002)  # not the proxy's: ignored
    assert table.upstreams == {40001: UPSTREAM}


def test_the_proxy_reports_each_upstream_as_it_connects(proxy: Proxy) -> None:
    """mitmproxy's `server_connected` hook: the client's port, the proxy's own socket, the
    server's address, as one `proxy.upstream` event."""
    data = ServerConnectionHookData(
        client=Client(peername=(CLIENT, 40001), sockname=(SERVER, 443), timestamp_start=0.0),
        server=Server(address=(SERVER, 443), peername=(SERVER, 443),
                      sockname=(ROUTER_IP, 51000)))
    FrameLog(proxy.state).server_connected(data)
    proxy.state.events.close()
    (line,) = [json.loads(x) for x in proxy.events_path.read_text().splitlines()]
    assert {k: v for k, v in line.items() if k not in ("t", "ts", "source")} == {
        "event": "proxy.upstream", "client_port": 40001, "upstream": ROUTER_IP,
        "upstream_port": 51000, "server": SERVER, "server_port": 443}


def test_lanes_may_have_shapes_of_their_own() -> None:
    """The queue's core gives each lane its own shape when told: a delayed lane holds its
    packet, an undelayed one releases it at once."""
    imp = Impairer(Shape(latency_s=1.0), [1, 2], lane_shapes=[Shape(latency_s=1.0), Shape()])
    imp.receive(1, 7, 0.0, None)
    imp.receive(2, 8, 0.0, None)
    assert [(v.queue, v.packet_id) for v in imp.poll(0.0)] == [(2, 8)]


def test_a_shape_without_delay_is_none_when_nothing_else_is_left() -> None:
    assert Shape(latency_s=0.1, jitter_s=0.01).undelayed() is None
    assert Shape(latency_s=0.1, corrupt=0.01).undelayed() == Shape(corrupt=0.01)

