"""The proxied path's two legs, where packet faults act when the proxy is in the path.

With the proxy in the path the client's connections to the target are REDIRECTed into the
router's own stack (faultlab.lab.netfilter.redirect): the client leg ends in the proxy (the
router's INPUT and OUTPUT, by the client link) and the proxy opens its own connection to the
server, the server leg (OUTPUT and INPUT again, by the target link). Neither crosses FORWARD, where
the direct path's rules are, so a packet fault adds a chain of its own on the legs, jumped to from
INPUT and OUTPUT (a chain apart from its FORWARD one, whose direct rules would hit the client's
other traffic to the router, DNS say):

- the client leg by conntrack's original tuple, what the client sent before the REDIRECT: every
  redirected flow to the target's port, or the connection's own four-tuple (the client's other
  traffic to the router is not redirected, and never hit);
- the server leg by the original tuple of the proxy's own connections: every one to the target's
  port, or the connection's upstream as the proxy reported it (faultlab.connections.Upstream). A
  step on one connection that fires before the proxy has reported its upstream hurts the client
  leg at once and adds the server leg's rules when the report comes.

Inbound rules (`-i`) take what the far end sends, outbound ones (`-o`) what the proxy sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from faultlab.connections import Connection, ConnectionChoice, Upstream
from faultlab.faults.base import FaultContext
from faultlab.faults.flows import Direction, OneWay, hurt_directions, selected
from faultlab.lab.base import Lab
from faultlab.lab.netfilter import commit, install, uninstall

Leg = Literal["client", "server"]
LEGS: tuple[Leg, ...] = ("client", "server")
HOOKS = ("INPUT", "OUTPUT")


def proxied(ctx: FaultContext) -> bool:
    """Whether the client's connections to the target go through the proxy (it is started
    before the client, and REDIRECTs every one of them)."""
    return ctx.proxy is not None


def legs_chain(step_id: str) -> str:
    """The chain of a step's rules on the legs: `FLP-<step id>` (step ids are at most 24
    characters, so it fits iptables' 28)."""
    return f"FLP-{step_id}"[:28]


@dataclass(frozen=True)
class LegMatch:
    """One hurt direction on one leg; `match` is None for the server leg of a connection whose
    upstream the proxy has not reported yet."""

    leg: Leg
    way: OneWay
    match: str | None

    @property
    def inbound(self) -> bool:
        """Whether it matches what arrives at the router from the far end (INPUT)."""
        return (self.way == "to_server") == (self.leg == "client")


def _interface(lab: Lab, leg: Leg, inbound: bool) -> str:
    link = lab.client_link if leg == "client" else lab.target_link
    return f"-i {link}" if inbound else f"-o {link}"


def _origin(src: str, sport: int, dst: str, dport: int) -> str:
    return (f" -p tcp -m conntrack --ctorigsrc {src} --ctorigsrcport {sport}"
            f" --ctorigdst {dst} --ctorigdstport {dport}")


def server_leg_match(lab: Lab, way: OneWay, upstream: Upstream) -> str:
    """The match of one connection's server leg, one way."""
    return (_interface(lab, "server", way == "to_client")
            + _origin(upstream.address, upstream.port, upstream.server, upstream.server_port))


def leg_matches(ctx: FaultContext, direction: Direction, connection: ConnectionChoice | None,
                legs: Sequence[Leg] = LEGS) -> tuple[list[LegMatch], Connection | None]:
    """The matches of the chosen flows on `legs`, leg by leg, toward the server first; and the
    chosen connection (None: all flows)."""
    conn = selected(ctx, connection)
    port = ctx.connections.port
    to_port = " -p tcp -m conntrack" + (f" --ctorigdstport {port}" if port else "")
    out: list[LegMatch] = []
    for leg in legs:
        for way in hurt_directions(direction):
            inbound = (way == "to_server") == (leg == "client")
            where = _interface(ctx.lab, leg, inbound)
            if leg == "client":
                # --ctstate DNAT: the flows the REDIRECT sent to the proxy, nothing else.
                flow = (_origin(conn.client, conn.client_port, conn.server, conn.server_port)
                        if conn is not None else to_port + " --ctstate DNAT")
                out.append(LegMatch(leg, way, where + flow))
            elif conn is None:
                out.append(LegMatch(leg, way, where + to_port))
            else:
                upstream = ctx.connections.upstreams.get(conn.client_port)
                out.append(LegMatch(leg, way, None if upstream is None
                                    else server_leg_match(ctx.lab, way, upstream)))
    return out, conn


class LegChain:
    """A step's chain on the legs in one table, and the server leg's rules it adds once the
    proxy reports the upstream they wait for."""

    def __init__(self, step_id: str, table: str = "filter") -> None:
        self.chain = legs_chain(step_id)
        self.table = table
        self.installed = False
        # The legs its rules hurt (or will, once the upstream is reported).
        self.legs: set[Leg] = set()
        self._cancel: Callable[[], None] | None = None
        self._adding: asyncio.Task[None] | None = None

    async def install(self, ctx: FaultContext, matches: Sequence[LegMatch],
                      conn: Connection | None, action: Callable[[int], str]) -> None:
        """The chain with a rule per match, `action(i)` the target of `matches[i]`; a match
        still unknown gets its rule when the upstream is reported."""
        router = ctx.lab.router
        await self.install_rules(ctx, [f"{m.match} {action(i)}"
                                       for i, m in enumerate(matches) if m.match],
                                 {m.leg for m in matches})
        waiting = [(i, m) for i, m in enumerate(matches) if m.match is None]
        if not waiting or conn is None:
            return

        def add(upstream: Upstream) -> None:
            batch = [f"-A {self.chain} {server_leg_match(ctx.lab, m.way, upstream)} {action(i)}"
                     for i, m in waiting]
            self._adding = asyncio.get_running_loop().create_task(
                router.run(commit, batch, self.table))

        self._cancel = ctx.connections.when_upstream(conn, add)

    async def install_rules(self, ctx: FaultContext, rules: Sequence[str],
                            legs: Collection[Leg]) -> None:
        """The chain with `rules` as they are (rules that match by headers, not by a flow's
        conntrack tuple), hurting `legs`."""
        await install(ctx.lab.router, HOOKS, self.chain, rules, self.table)
        self.installed = True
        self.legs = set(legs)

    async def uninstall(self, ctx: FaultContext) -> None:
        """Stop waiting, let a late addition finish, and remove the chain."""
        if self._cancel is not None:
            self._cancel()
            self._cancel = None
        if self._adding is not None:
            adding, self._adding = self._adding, None
            await asyncio.gather(adding, return_exceptions=True)
        if self.installed:
            self.installed = False
            await uninstall(ctx.lab.router, HOOKS, self.chain, self.table)
