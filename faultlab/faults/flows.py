"""Which packets a packet fault hits: a direction, and all flows or one connection by order."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from faultlab.connections import Connection, ConnectionChoice, Transport
from faultlab.errors import MechanismError
from faultlab.faults.base import FaultContext, FaultParams

Direction = Literal["both", "to_server", "to_client"]
OneWay = Literal["to_server", "to_client"]


def hurt_directions(direction: Direction) -> list[OneWay]:
    """The one-way directions a `direction` hurts, toward the server first."""
    return ["to_server", "to_client"] if direction == "both" else [direction]


class FlowParams(FaultParams):
    """Parameters shared by the faults that select packets by connection."""

    connection: ConnectionChoice | None = None
    """One TCP connection to hurt: `first`, `latest` or `k` (the k-th seen, from 1), chosen when
    the step fires (it must have been seen by then: an unseen one fails the run); absent: all
    flows, later ones included."""

    @model_validator(mode="after")
    def _a_connection_is_tcp(self) -> Self:
        # A fault whose parameters choose a `protocol` (drop, nat_rebind) hurts UDP by flows.
        if getattr(self, "protocol", None) == "udp" and self.connection is not None:
            raise ValueError("a connection is a TCP connection: 'protocol: udp' takes no "
                             "'connection'")
        return self


def selected(ctx: FaultContext, connection: ConnectionChoice | None) -> Connection | None:
    """The chosen connection (None: all flows); one not seen yet fails the fault."""
    if connection is None:
        return None
    conn = ctx.connections.select(connection)
    if conn is None:
        raise MechanismError(
            f"no TCP connection {connection!r} from client to target has been seen yet"
        )
    return conn


def iptables_matches(
    ctx: FaultContext, direction: Direction, connection: ConnectionChoice | None, at_client: bool,
    protocol: Transport | None = None,
) -> list[str]:
    """iptables match clauses, one per hurt direction, for the chosen flows at the router or client
    (all packets, or only those of `protocol`)."""
    lab = ctx.lab
    to_server = f"-o {lab.client_iface}" if at_client else f"-i {lab.client_link}"
    to_client = f"-i {lab.client_iface}" if at_client else f"-o {lab.client_link}"
    flow_up = flow_down = f" -p {protocol}" if protocol else ""
    conn = selected(ctx, connection)
    if conn is not None:
        flow_up = (f" -p tcp -s {conn.client} --sport {conn.client_port}"
                   f" -d {conn.server} --dport {conn.server_port}")
        flow_down = (f" -p tcp -s {conn.server} --sport {conn.server_port}"
                     f" -d {conn.client} --dport {conn.client_port}")
    return [to_server + flow_up if way == "to_server" else to_client + flow_down
            for way in hurt_directions(direction)]
