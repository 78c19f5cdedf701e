"""The one numbering of a run's connections, and the one way to choose among them.

Connection k is the k-th TCP connection the client opened toward the target, counted from 1 in the
order the router first saw its SYN (a retransmitted SYN is the same connection). The run's
`ConnectionTable` holds them: the capture (faultlab.capture.live) feeds it the SYNs it sees and
records the numbers (`tcp.connect` k), and every other part takes them by the client's port: packet faults
(`connection: k`), the proxy (the run tells it each number as the SYN is seen) and frame triggers
(the proxy's and the emulator's frames are mapped by port). A connection whose SYN the path
dropped still has its number, though no server ever saw it.

With the proxy in the path a connection has two legs: the client's, which ends in the proxy, and
the proxy's own connection to the server (`Upstream`), which the proxy reports once connected
(`proxy.upstream`) and the table keeps by the client's port, for the packet faults that hurt both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

ConnectionChoice = Literal["first", "latest"] | Annotated[int, Field(ge=1, strict=True)]
# A flow's transport protocol (a packet fault's `protocol`, a listening socket's).
Transport = Literal["tcp", "udp"]


def choose[T](connections: Sequence[T], which: ConnectionChoice) -> T | None:
    """`first`, `latest`, or the k-th (1-based) of `connections`, in the order seen; None when
    there is no such connection (yet)."""
    if not connections:
        return None
    if which == "first":
        return connections[0]
    if which == "latest":
        return connections[-1]
    if isinstance(which, int) and 1 <= which <= len(connections):
        return connections[which - 1]
    return None


@dataclass(frozen=True)
class Connection:
    """A TCP connection from the client to the target, numbered as this module says."""

    k: int
    client: str
    client_port: int
    server: str
    server_port: int
    t: float


@dataclass(frozen=True)
class Upstream:
    """The proxy's connection to the server for one client connection: its own address and
    port, and the server's."""

    address: str
    port: int
    server: str
    server_port: int


class ConnectionTable:
    """The client's connections to the target, as the capture saw their SYNs: to `port` and
    `address` when given (a remote target's client may open others, for a token or telemetry;
    one resolved by DNS has no address known beforehand)."""

    def __init__(self, port: int | None = None, address: str | None = None) -> None:
        self.port = port
        self.address = address
        self.connections: list[Connection] = []
        self._by_ports: dict[tuple[int, int], Connection] = {}
        # The proxy's upstream of each client connection, and who waits for one, by client port.
        self.upstreams: dict[int, Upstream] = {}
        self._awaiting: dict[int, list[Callable[[Upstream], None]]] = {}

    def observe_syn(self, client: str, client_port: int, server: str, server_port: int,
                    t: float) -> Connection | None:
        """Record a client SYN; None when it is a retransmission of a known one, or not toward
        the target."""
        if (client_port, server_port) in self._by_ports:
            return None
        if server_port != (self.port or server_port) or server != (self.address or server):
            return None
        # The address the SYN went to: the lab's server, or a remote service's (from DNS).
        conn = Connection(len(self.connections) + 1, client, client_port, server,
                          server_port, t)
        self.connections.append(conn)
        self._by_ports[(client_port, server_port)] = conn
        return conn

    def lookup(self, client_port: int, server_port: int) -> Connection | None:
        return self._by_ports.get((client_port, server_port))

    def select(self, which: ConnectionChoice) -> Connection | None:
        """`first`, `latest`, or connection k; None if not seen yet."""
        return choose(self.connections, which)

    def observe_upstream(self, client_port: int, upstream: Upstream) -> None:
        """The proxy connected upstream for the client's connection from `client_port` (before
        or after the capture numbered it: the two reports travel apart)."""
        self.upstreams[client_port] = upstream
        for callback in self._awaiting.pop(client_port, []):
            callback(upstream)

    def when_upstream(self, conn: Connection, callback: Callable[[Upstream], None]
                      ) -> Callable[[], None]:
        """Call `callback` with `conn`'s upstream once the proxy reports it (at once when it
        has); returns what cancels the wait."""
        known = self.upstreams.get(conn.client_port)
        if known is not None:
            callback(known)
            return lambda: None
        waiting = self._awaiting.setdefault(conn.client_port, [])
        waiting.append(callback)

        def cancel() -> None:
            if callback in waiting:
                waiting.remove(callback)
        return cancel
