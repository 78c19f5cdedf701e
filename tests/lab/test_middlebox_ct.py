"""forge_rst and nat_rebind on real traffic: faultlab's own peers (the client sends every 200 ms,
the server ticks every 200 ms), what each end reports and what the captures show; the router's
rules and addresses before the fault and after its revert; forge_rst's thread and sockets, which
live in faultlab's own process, gone once the run is over."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyroute2 import IPRoute

from faultlab.capture.pcap import RST, read_segments
from faultlab.faults import forge_rst
from faultlab.faults.base import FaultContext
from faultlab.faults.nat_rebind import NatRebind
from faultlab.result import RunResult

from .helpers import failed, first, lab_slot, lab_traces, peers, run_profile

pytestmark = pytest.mark.lab

CONNECTED = "when: {event: client.connected, where: {attempt: 1}}, after: 1s"
# A reset ends the run at once; the peers' duration only bounds a slow forge (under load a forge
# through the proxy once took longer than a 3 s run, which ended cleanly, 1000, before it).
FORGE_DURATION = "10s"


def run(runs_dir: Path, name: str, step: str, duration: str = "3s", extra: str = "",
        more: str = "", steps: str = "") -> RunResult:
    text = (f"name: {name}\n" + peers(duration, extra) + more
            + f"timeline:\n  - {{id: f, {CONNECTED}, do: {step}}}\n" + steps)
    result = run_profile(text, runs_dir)
    assert result.error is None, failed(result)
    return result


def lab_addresses(result: RunResult) -> tuple[str, str]:
    lab = first(result, "lab.ready").fields
    return lab["client"].split("/")[0], lab["server"].split("/")[0]


def rsts(pcap: Path, src: str) -> list[Any]:
    return [s for s in read_segments(pcap) if s.src == src and s.flags & RST]


def raw_sockets() -> set[str]:
    """This process's packet and raw sockets (forge_rst listens on one, sends on the other), by
    inode."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            inode = os.readlink(f"/proc/self/fd/{fd}")
            if not inode.startswith("socket:"):
                continue
            with socket.socket(fileno=os.dup(int(fd))) as sock:
                if sock.family == socket.AF_PACKET or sock.type == socket.SOCK_RAW:
                    found.add(inode)
        except OSError:  # closed meanwhile
            continue
    return found


LeftBehind = Callable[[RunResult], list[str]]


@pytest.fixture
def forge_left_behind(monkeypatch: pytest.MonkeyPatch) -> LeftBehind:
    """What a run's forge_rst left once the run is over: a thread of this process that watched a
    flow and is still alive, a packet or raw socket opened since the test began, and whatever of
    the run's lab is still on the host."""
    threads: list[threading.Thread] = []
    before = raw_sockets()
    exchange = forge_rst.exchange

    def watched(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        threads.append(threading.current_thread())
        return exchange(*args, **kwargs)

    monkeypatch.setattr(forge_rst, "exchange", watched)

    def left(result: RunResult) -> list[str]:
        assert threads, "forge_rst never watched the flow"
        return ([f"thread {t.name}" for t in threads if t.is_alive()]
                + sorted(raw_sockets() - before)
                + lab_traces(lab_slot(result), os.getpid()))

    return left


@pytest.mark.parametrize("toward", ["client", "server", "both"])
def test_a_forged_rst_resets_the_chosen_end(runs_dir: Path, toward: str,
                                            forge_left_behind: LeftBehind) -> None:
    """The RST leaves the router (at the peers' next segment; a silent end is probed after 50 ms)
    with exactly the target's rcv_nxt: the capture shows it, and the target reports an abnormal
    closure (1006); the other end learns at its next send, from the target's kernel's own RST,
    which the captures show after the forged one. Its thread, its sockets and the lab are gone
    after teardown. (How many milliseconds the RST takes: `rst_after_ms`, measured by
    `make bench`.)"""
    result = run(runs_dir, f"forge-{toward}", f"{{fault: forge_rst, toward: {toward}}}",
                 FORGE_DURATION, more="capture: {server_pcap: true}\n")
    applied = first(result, "fault.applied", step="f")
    sent = applied.fields["sent"]
    rst_to = [entry for entry in sent if entry["flags"] == "R"]
    ends = ["client", "server"] if toward == "both" else [toward]
    assert sorted({entry["to"] for entry in rst_to}) == ends, sent
    client, server = lab_addresses(result)
    forged = {(s.src, s.seq) for s in read_segments(result.run_dir / "capture.pcap")
              if s.flags & RST}
    address = {"client": server, "server": client}  # a RST toward one end comes from the other
    for entry in rst_to:
        if entry["to"] == "client":  # the client link carries only what goes to the client
            assert (address["client"], entry["seq"]) in forged
    code_of = {"client": first(result, "client.closed"), "server": first(result, "server.closed")}
    for end in ends:
        assert code_of[end].fields["code"] == 1006
        assert applied.began <= code_of[end].t
    if toward != "both":
        # The target first, by the forged RST; the other end at its next send, from the target's
        # kernel (no socket left there): on the target's link, the forged RST (from the other
        # end's address) comes before the target's own. Read off one capture, in the kernel's
        # order: the ends' events are stamped by two processes, whose turns a busy machine
        # decides (under load the other end once stamped its closure 12 ms first).
        link = result.run_dir / ("capture.pcap" if toward == "client" else "server.pcap")
        own, other = (client, server) if toward == "client" else (server, client)
        exact = {entry["seq"] for entry in rst_to}
        forged = [s.ts for s in rsts(link, other) if s.seq in exact]
        answered = [s.ts for s in rsts(link, own)]
        assert forged and answered and min(forged) < min(answered), (
            f"{toward} was not reset by the forged RST")
    assert code_of["client"].fields["by"] == "peer"
    assert code_of["server"].fields["received_close"] is False
    assert result.exit_codes["client"] == 2
    assert forge_left_behind(result) == []


# Alone: a race of the forger's retry with the server's sends, which a loaded machine (three tests
# on two cores) once lost every time (no exact RST; the run's clean end, 1000).
@pytest.mark.alone
def test_an_inexact_rst_is_challenged_and_the_challenge_names_rcv_nxt(
        runs_dir: Path, monkeypatch: pytest.MonkeyPatch, forge_left_behind: LeftBehind) -> None:
    """RFC 5961 measured: a first RST one past rcv_nxt (in the window, not exact) does not reset
    the client, which answers with a challenge ACK; the next RST, at that ACK's number (or past
    what the server sent since), does. The retry leaves nothing behind either."""
    see = forge_rst.Forger.see

    def off_by_one(self: forge_rst.Forger, seg: Any, now: float) -> list[forge_rst.Forged]:
        out = see(self, seg, now)
        if out and len(self.sent[out[0].to]) == 1:
            wrong = forge_rst.Forged(out[0].to, out[0].seq + 1, 0, RST)
            self.sent[out[0].to][-1] = wrong.seq
            return [self._forge(wrong)]
        return out

    monkeypatch.setattr(forge_rst.Forger, "see", off_by_one)
    result = run(runs_dir, "forge-challenged", "{fault: forge_rst, toward: client}",
                 FORGE_DURATION)
    sent = first(result, "fault.applied", step="f").fields["sent"]
    resets = [e["seq"] for e in sent if e["flags"] == "R"]
    # The first was not the one: the client stayed and challenged it; a retry at the challenge's
    # number was exact (one more if the server's sends moved rcv_nxt meanwhile, as under load).
    assert len(resets) >= 2 and resets[0] not in resets[1:], sent
    assert first(result, "client.closed").fields["code"] == 1006
    assert forge_left_behind(result) == []


def test_forge_rst_toward_the_client_works_through_the_proxy(
        runs_dir: Path, forge_left_behind: LeftBehind) -> None:
    """With the proxy in the path (proxy: true) the client's leg is the one the router sees:
    the forged RST resets the client (1006), and nothing is left behind."""
    result = run(runs_dir, "forge-proxied", "{fault: forge_rst, toward: client}",
                 FORGE_DURATION, more="proxy: true\n")
    closed = first(result, "client.closed")
    assert closed.fields["code"] == 1006
    assert first(result, "fault.applied", step="f").began <= closed.t
    assert forge_left_behind(result) == []


@pytest.fixture
def router_snapshots(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The router's iptables (filter and nat) and addresses just before nat_rebind applies, just
    after it applies and just after it reverts."""
    snaps: list[str] = []
    apply, revert = NatRebind.apply, NatRebind.revert

    async def snapshot(ctx: FaultContext) -> None:
        snaps.append(await ctx.lab.router.run(router_state))

    async def applying(self: NatRebind, ctx: FaultContext) -> dict[str, Any]:
        await snapshot(ctx)
        details = await apply(self, ctx)
        await snapshot(ctx)
        return details

    async def reverting(self: NatRebind, ctx: FaultContext) -> None:
        await revert(self, ctx)
        await snapshot(ctx)

    monkeypatch.setattr(NatRebind, "apply", applying)
    monkeypatch.setattr(NatRebind, "revert", reverting)
    yield snaps


def router_state() -> str:
    rules = "".join(subprocess.run(["iptables-save", "-t", table], capture_output=True, text=True,
                                   check=True).stdout for table in ("filter", "nat"))
    rules = re.sub(r"^#.*$|\[\d+:\d+\]", "", rules, flags=re.M)
    with IPRoute() as ipr:
        addresses = sorted(str(a.get_attr("IFA_ADDRESS")) for a in ipr.get_addr())
    return rules + "\n".join(addresses)


@pytest.mark.parametrize("address", [None, "203.0.113.7"])
def test_nat_rebind_resets_the_client_and_the_server_meets_a_stranger(
        runs_dir: Path, router_snapshots: list[str], address: str | None) -> None:
    """After the rebind the client's next segment reaches the server from a new port (and
    address): the server's kernel answers it with a RST, which the router maps back to the
    client's own port, exactly at its rcv_nxt: the client sees 1006 at its next send.
    The server's own connection hears nothing until the revert (at teardown: the client leaves
    once reset), which leaves the router's rules and addresses as they were."""
    extra = f", address: {address}" if address else ""
    result = run(runs_dir, "rebind", f"{{fault: nat_rebind, connection: latest{extra}}}",
                 more="capture: {server_pcap: true}\n")
    applied = first(result, "fault.applied", step="f")
    old_port = applied.fields["client_port"]
    client, server = lab_addresses(result)
    closed = first(result, "client.closed")
    assert closed.fields["code"] == 1006 and closed.fields["by"] == "peer"
    assert applied.began <= closed.t
    # The rebind holds from its rules' commit, up to applied_in_ms before `fault.applied`.
    fired = applied.t - applied.fields["applied_in_ms"] / 1000
    t0 = first(result, "run.start").fields["unix_time"]
    source = address or client
    after = [s for s in read_segments(result.run_dir / "server.pcap") if s.ts - t0 > fired]
    strangers = [s for s in after if s.src == source and (s.src, s.sport) != (client, old_port)]
    assert strangers, "the server never saw the client from a new source"
    new_port = strangers[0].sport
    assert new_port != old_port
    answered = [s for s in after if s.src == server and s.dport == new_port and s.flags & RST]
    assert answered and answered[0].dst == source, "the server did not reset the stranger"
    # On the client's side the RST arrives on its own port, from the server.
    assert [s for s in rsts(result.run_dir / "capture.pcap", server)
            if s.dport == old_port and s.ts - t0 > fired]
    # The server's connection hears nothing while the rebind lasts (its packets to the old
    # mapping are dropped); once reverted, its next retransmission meets the client's kernel,
    # whose RST closes it.
    (teardown,) = [e.t for e in result.events if e.name == "run.teardown"]
    (restored,) = [e.t for e in result.events if e.matches("fault.reverted", {"step": "f"})]
    (server_closed,) = [e for e in result.events if e.name == "server.closed"]
    assert closed.t < teardown < server_closed.t and teardown < restored
    assert server_closed.fields["code"] == 1006  # reset by the client's kernel, not stopped
    before, during, reverted = router_snapshots
    assert "SNAT" in during and "SNAT" not in before
    assert (address in during and address not in before) if address else True
    assert reverted == before


def test_nat_rebind_of_every_flow_gives_the_reconnection_a_new_source(runs_dir: Path) -> None:
    """With every flow rebound and a client that reconnects, the server meets the new
    connection from the rebound address: `server.connected` names it."""
    result = run(runs_dir, "rebind-all", "{fault: nat_rebind, address: 203.0.113.9}",
                 extra=", --reconnect")
    assert first(result, "server.connected", n=2).fields["peer"].startswith("203.0.113.9:")
