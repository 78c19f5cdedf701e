"""nat_timeout: its parameters, the order of its steps in the router (rule, sysctls, adoption of
open flows, pickup off) and a revert that restores each sysctl exactly."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

import pytest

from faultlab.connections import ConnectionTable, Upstream
from faultlab.errors import MechanismError
from faultlab.faults.nat_timeout import (
    LIBERAL,
    LOOSE,
    TIMEOUT,
    _adopt,
    _read_sysctls,
    _shorten,
    _write_sysctls,
)
from faultlab.lab.netfilter import commit

from .conftest import (
    SERVER_PORT,
    FakeContext,
    FakeNamespace,
    FakeProxyChannel,
    apply_and_revert,
    assert_a_packet_fault_the_run_holds,
    build,
    params_of,
    refusal,
    with_connections,
)

# The router's values before the fault: the kernel's defaults.
BEFORE = {TIMEOUT: "432000", LIBERAL: "0", LOOSE: "1"}


@pytest.fixture(autouse=True)
def router_sysctls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake places answer a sysctl read with the kernel's defaults (and record it)."""
    record = FakeNamespace.run

    async def run(self: FakeNamespace, fn: Callable[..., Any], *args: object) -> Any:
        await record(self, fn, *args)
        return dict(BEFORE) if fn is _read_sysctls else None

    monkeypatch.setattr(FakeNamespace, "run", run)


def test_defaults_drop_both_ways_on_every_flow() -> None:
    """Only `idle` is required; a forgotten flow's packets are dropped both ways."""
    assert params_of("nat_timeout", {"idle": "30s"}).model_dump() == {
        "connection": None, "idle": 30.0, "then": "drop", "direction": "both"}


@pytest.mark.parametrize(("params", "field"), [
    ({}, "idle"),
    ({"idle": 30}, "idle"),
    ({"idle": "500ms"}, "idle"),
    ({"idle": "1.5s"}, "idle"),
    ({"idle": "6d"}, "idle"),
    ({"idle": "30s", "then": "reject"}, "then"),
    ({"idle": "30s", "direction": "up"}, "direction"),
    ({"idle": "30s", "connection": 0}, "connection"),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object], field: str) -> None:
    """A missing idle time, a bare number, one below a second or not whole (conntrack counts
    whole seconds), or a bad choice is refused naming that field."""
    assert list(refusal("nat_timeout", params)) == [field]


def test_apply_tracks_then_shortens_then_adopts_then_stops_pickup() -> None:
    """The INVALID rule goes in first (tracking starts while pickup is on), then the timeout and
    liberal window, then the flows the capture saw are adopted, the flows tracked already get the
    new timeout as what they have left, then pickup goes off; revert
    restores pickup first, every sysctl to its value before, and removes the chain."""
    ctx = with_connections(FakeContext(), 40001)
    details = apply_and_revert(build("nat_timeout", {"idle": "3s"}, step="nat"), ctx)
    assert details == {"idle_s": 3, "then": "drop", "direction": "both", "connection": None,
                       "adopted": None, "shortened": None}
    calls = ctx.lab.ns("router").calls
    assert calls[0] == (commit, ([
        ":FL-nat - [0:0]",
        "-A FL-nat -i c0 -p tcp -m conntrack --ctstate INVALID -j DROP",
        "-A FL-nat -o c0 -p tcp -m conntrack --ctstate INVALID -j DROP",
        "-I FORWARD 1 -j FL-nat"], "filter"))
    assert calls[1] == (_read_sysctls, ([TIMEOUT, LIBERAL, LOOSE],))
    assert calls[2] == (_write_sysctls, ({TIMEOUT: 3, LIBERAL: 1},))
    fn, (flows, idle_s) = calls[3]
    assert fn is _adopt and idle_s == 3
    assert [f.client_port for f in cast(list[Any], flows)] == [40001]
    assert calls[4] == (_shorten, (3,))
    assert calls[5] == (_write_sysctls, ({LOOSE: 0},))
    restored = cast(dict[str, str], calls[6][1][0])
    assert calls[6][0] is _write_sysctls and list(restored) == [LOOSE, LIBERAL, TIMEOUT]
    assert restored == BEFORE
    assert calls[7] == (commit, (["-D FORWARD -j FL-nat", "-F FL-nat", "-X FL-nat"], "filter"))
    assert len(calls) == 8
    assert ctx.lab.ns("client").calls == [] and ctx.lab.ns("server").calls == []


def test_reset_rejects_one_connection_toward_the_server() -> None:
    """`then: reset` answers with a TCP reset; `connection` and `direction` narrow the rule as
    drop's do."""
    ctx = with_connections(FakeContext(), 40001, 40002)
    apply_and_revert(build("nat_timeout", {"idle": "1m", "then": "reset", "connection": 2,
                                           "direction": "to_server"}, step="nat"), ctx)
    assert ctx.lab.ns("router").calls[0][1][0] == [
        ":FL-nat - [0:0]",
        "-A FL-nat -i c0 -p tcp -s 10.0.1.2 --sport 40002 -d 10.0.2.2 --dport 443 "
        "-m conntrack --ctstate INVALID -j REJECT --reject-with tcp-reset",
        "-I FORWARD 1 -j FL-nat"]
    assert ctx.lab.ns("router").calls[2] == (_write_sysctls, ({TIMEOUT: 60, LIBERAL: 1},))


def test_nat_timeout_is_a_packet_fault_the_run_holds() -> None:
    """The run starts nothing for it, holds it, and a restore reverts it."""
    _, lab = assert_a_packet_fault_the_run_holds("nat_timeout", {"idle": "5s"})
    assert lab.ns("router").calls[-1][0] is commit


INVALID = "-m conntrack --ctstate INVALID"
SENT = f"! --tcp-flags RST RST {INVALID} -j DROP"


def test_with_the_proxy_the_forgotten_legs_are_judged_by_their_headers() -> None:
    """With the proxy: the FORWARD rule is the direct path's (a forgotten client leg's packets are
    not redirected any more and cross FORWARD); on the legs, by headers (an INVALID packet has no
    conntrack entry), what the proxy sends on a forgotten leg is dropped but resets (REJECT's
    leave by OUTPUT too) and what the server sends meets `then`; the revert removes both
    chains."""
    ctx = with_connections(FakeContext(connections=ConnectionTable(SERVER_PORT),
                                       proxy=FakeProxyChannel()), 40001)
    details = apply_and_revert(build("nat_timeout", {"idle": "2s", "then": "reset"},
                                     step="nat"), ctx)
    assert details["legs"] == ["client", "server"]
    batches = [args[0] for fn, args in ctx.lab.ns("router").calls if fn is commit]
    assert batches[1] == [
        ":FLP-nat - [0:0]",
        f"-A FLP-nat -o s0 -p tcp --dport 443 {SENT}",
        f"-A FLP-nat -i s0 -p tcp --sport 443 {INVALID} -j REJECT --reject-with tcp-reset",
        f"-A FLP-nat -o c0 -p tcp {SENT}",
        "-I INPUT 1 -j FLP-nat", "-I OUTPUT 1 -j FLP-nat"]
    assert batches[-2:] == [
        ["-D FORWARD -j FL-nat", "-F FL-nat", "-X FL-nat"],
        ["-D INPUT -j FLP-nat", "-D OUTPUT -j FLP-nat", "-F FLP-nat", "-X FLP-nat"]]


def test_with_the_proxy_one_connection_is_its_own_and_its_upstreams_headers() -> None:
    """One connection: the proxy's packets toward that client port, and the server leg by the
    upstream the proxy reported; with no upstream reported yet the fault fails, leaving nothing."""
    ctx = with_connections(FakeContext(connections=ConnectionTable(SERVER_PORT),
                                       proxy=FakeProxyChannel()), 40001)
    step = build("nat_timeout", {"idle": "2s", "connection": 1, "direction": "to_client"},
                 step="nat")
    with pytest.raises(MechanismError, match="not reported the server leg"):
        asyncio.run(step.apply(ctx))
    batches = [args[0] for fn, args in ctx.lab.ns("router").calls if fn is commit]
    assert batches[-1] == ["-D FORWARD -j FL-nat", "-F FL-nat", "-X FL-nat"]
    ctx.connections.observe_upstream(40001, Upstream("10.0.2.1", 51000, "10.0.2.2", 443))
    apply_and_revert(step, ctx)
    batches = [args[0] for fn, args in ctx.lab.ns("router").calls if fn is commit]
    assert batches[-3][1:3] == [
        "-A FLP-nat -i s0 -p tcp -s 10.0.2.2 --sport 443 -d 10.0.2.1 --dport 51000 "
        f"{INVALID} -j DROP",
        f"-A FLP-nat -o c0 -p tcp --dport 40001 -d 10.0.1.2 {SENT}"]


def test_one_nat_timeout_at_a_time_per_router() -> None:
    """The conntrack settings are the router's (one NAT per path): a second step while one holds
    them fails naming it, touching nothing; once the first is reverted another may apply."""
    ctx = FakeContext()
    first = build("nat_timeout", {"idle": "2s"}, step="nat")
    asyncio.run(first.apply(ctx))
    calls = len(ctx.lab.ns("router").calls)
    with pytest.raises(MechanismError, match="step 'nat' already sets the router's NAT timeout"):
        asyncio.run(build("nat_timeout", {"idle": "5s"}, step="other").apply(ctx))
    assert len(ctx.lab.ns("router").calls) == calls
    asyncio.run(first.revert(ctx))
    apply_and_revert(build("nat_timeout", {"idle": "5s"}, step="other"), ctx)


def test_a_failure_midway_puts_the_router_back() -> None:
    """A step that fails after changing the router's settings (here, adopting the flows)
    restores them and removes its rule before the error goes on."""
    ctx = with_connections(FakeContext(), 40001)
    record = FakeNamespace.run

    async def failing(self: FakeNamespace, fn: Callable[..., Any], *args: object) -> Any:
        if fn is _adopt:
            raise OSError("netlink refused")
        return await record(self, fn, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FakeNamespace, "run", failing)
        with pytest.raises(OSError):
            asyncio.run(build("nat_timeout", {"idle": "3s"}, step="nat").apply(ctx))
    calls = ctx.lab.ns("router").calls
    assert calls[-2] == (_write_sysctls, (dict(reversed(BEFORE.items())),))
    assert calls[-1] == (commit, (["-D FORWARD -j FL-nat", "-F FL-nat", "-X FL-nat"], "filter"))
    apply_and_revert(build("nat_timeout", {"idle": "3s"}, step="nat"), ctx)
