"""Where a run's events come from besides the run itself: the files other processes append to,
and the one frame log that frame triggers follow.

Clients, targets and the proxy append JSON lines to their own event files (`FAULTLAB_EVENTS`);
`EventTails` puts them on the bus, their `ts` converted to the run clock, and the events of a
program's own log that faultlab reads (the TURN server's, faultlab.turn_log) as they come.
`FrameSource` reads the run's one frame log (the proxy's, else the emulator's) as frames
numbered on the run's connections (faultlab.connections), so a frame is never counted twice.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

from faultlab.connections import ConnectionTable
from faultlab.events import Event, EventBus, EventFileTail, LineTail
from faultlab.frames import Frame
from faultlab.private import create_private
from faultlab.protocols import DEFAULT
from faultlab.protocols import Protocol as RealtimeApi
from faultlab.vocabulary.lab import ProxyWsStart
from faultlab.vocabulary.run import FrameLogged

TAIL_POLL_S = 0.01


class EventTails:
    """The event files of the run's processes, and the logs read as events, put on the bus as
    their lines arrive."""

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus
        self._tails: list[LineTail] = []

    def add(self, path: Path, source: str) -> Path:
        """Follow `path` (created empty) as the events of `source`; returns the path."""
        create_private(path)
        self._tails.append(EventFileTail(path, source))
        return path

    def add_log(self, tail: LineTail) -> None:
        """Follow a program's own log, its lines read as events by `tail`."""
        self._tails.append(tail)

    def drain(self) -> None:
        """Put every complete line written so far on the bus."""
        for tail in self._tails:
            for data in tail.read_new():
                name = str(data.pop("event"))
                ts = data.pop("ts", None)
                t = (self.bus.clock.from_wall(ts) if isinstance(ts, int | float) and math.isfinite(ts)
                     else None)  # no time, or no real one: when it arrived
                self.bus.record(tail.source, name, t, data)

    async def follow(self) -> None:
        """Drain every `TAIL_POLL_S` until cancelled."""
        while True:
            self.drain()
            await asyncio.sleep(TAIL_POLL_S)


# The event by which the proxy's frame log tells a connection's client port, under the key
# (`conn`) its frames name the connection by; a target's log names its own (TargetKind.frame_log).
PROXY_LOG_OPENS = ProxyWsStart.NAME


class FrameSource:
    """The run's one frame log, read as frames on the run's connection numbering: each log keys
    its connections its own way (`conn`), and tells their client ports, which the capture
    numbered."""

    def __init__(self, source: str, opened: str, connections: ConnectionTable,
                 target_port: int, protocol: RealtimeApi = DEFAULT) -> None:
        self.source = source
        self.protocol = protocol
        self._opened = opened
        self._connections = connections
        self._target_port = target_port
        self._client_ports: dict[object, int] = {}

    @classmethod
    def for_run(cls, proxy: bool, target_log: str | None, connections: ConnectionTable,
                target_port: int, protocol: RealtimeApi = DEFAULT) -> FrameSource | None:
        """The proxy's log when the run has a proxy, else the target's own (`target_log`: the
        event by which it tells a connection's client port), else none."""
        if proxy:
            return cls("proxy", PROXY_LOG_OPENS, connections, target_port, protocol)
        if target_log is not None:
            return cls("target", target_log, connections, target_port, protocol)
        return None

    def frame(self, event: Event) -> Frame | None:
        """The frame `event` logs, if it is one of this log's."""
        if event.source != self.source:
            return None
        if event.name == self._opened and event.fields.get("client_port") is not None:
            self._client_ports[event.fields.get("conn")] = int(event.fields["client_port"])
        logged = FrameLogged.read(event)
        if logged is None:
            return None
        return Frame(logged.sender, self._number(logged.conn), logged.kind, None, self.protocol)

    def _number(self, key: object) -> int:
        port = self._client_ports.get(key)
        conn = None if port is None else self._connections.lookup(port, self._target_port)
        return conn.k if conn is not None else 0
