"""What the lab's TURN server tells of its sessions, read from its log (`turn.log`: coturn's
`--verbose --simple-log` lines) onto the run's timeline as it is written:

- `turn.allocation`: a client was given a relayed address (`relayed`), over TLS or not (`tls`);
- `turn.refused`: a request with credentials was refused (`code`, `reason`: 401 for a wrong or
  expired credential); coturn's first answer to every client, a 401 that gives it the realm
  and nonce (no user yet), is not one;
- `turn.closed`: a session ended (`client`, `transport`, coturn's `reason`: a TCP or TLS
  client's close, a UDP allocation's expiry), with what it carried (`bytes_from_client`,
  `bytes_to_client`). A UDP session the client released (a refresh to lifetime 0) ends when
  coturn next sweeps its allocations, often after the run.

coturn stamps its lines in whole seconds since it started: each event is stamped when its line
is read (within faultlab.sources.TAIL_POLL_S of its writing). A restarted server (`turn_down`
reverted) numbers its sessions from 1 again: what was known of the first one's is forgotten at
its banner.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from faultlab.events import LineTail
from faultlab.turn_urls import TURNS_PORT

BANNER = "STUN/TURN Server"
RELAY = re.compile(r": IPv4\. Local relay addr: (?P<relayed>\S+)$")
TCP_CLIENT = re.compile(r": IPv4\. tcp or tls connected to: (?P<client>\S+)$")
ALLOCATED = re.compile(r": session (?P<session>\d+): new, .*lifetime=\d+(?P<cipher>, cipher=)?")
REFUSED = re.compile(r": session (?P<session>\d+): realm <[^>]*> user <[^>]+>: "
                     r"incoming packet (?P<request>\S+) processed, error (?P<code>\d+): "
                     r"(?P<reason>.*)$")
USAGE = re.compile(r": session (?P<session>\d+): usage: .*, rb=(?P<rb>\d+), sp=\d+, sb=(?P<sb>\d+)$")
CLOSED = re.compile(r": session (?P<session>\d+): closed \(2nd stage\), .* local \S+:(?P<port>\d+), "
                    r"remote (?P<client>\S+), reason: (?P<reason>.*)$")


class TurnLog:
    """coturn's log lines, one at a time, as events (dicts with `event`); most lines are none."""

    def __init__(self) -> None:
        self._forget()

    def _forget(self) -> None:
        self._relayed: str | None = None  # from the line just before a session's "new"
        self._usage: dict[str, tuple[int, int]] = {}
        self._tcp_clients: set[str] = set()  # coturn names a session's listener by port only

    def read(self, line: str) -> dict[str, Any] | None:
        relayed, self._relayed = self._relayed, None
        if BANNER in line:
            self._forget()
        elif m := RELAY.search(line):
            self._relayed = m["relayed"]
        elif m := TCP_CLIENT.search(line):
            self._tcp_clients.add(m["client"])
        elif m := ALLOCATED.search(line):
            return {"event": "turn.allocation", "session": m["session"], "relayed": relayed,
                    "tls": m["cipher"] is not None}
        elif m := REFUSED.search(line):
            return {"event": "turn.refused", "session": m["session"], "request": m["request"],
                    "code": int(m["code"]), "reason": m["reason"]}
        elif m := USAGE.search(line):
            self._usage[m["session"]] = (int(m["rb"]), int(m["sb"]))
        elif m := CLOSED.search(line):
            received, sent = self._usage.pop(m["session"], (None, None))
            return {"event": "turn.closed", "session": m["session"], "client": m["client"],
                    "transport": self._transport(int(m["port"]), m["client"]),
                    "reason": m["reason"], "bytes_from_client": received,
                    "bytes_to_client": sent}
        return None

    def _transport(self, port: int, client: str) -> str:
        if port == TURNS_PORT:
            return "tls"
        return "tcp" if client in self._tcp_clients else "udp"


class TurnLogTail(LineTail):
    """The events of the TURN server's log file, as its lines arrive."""

    def __init__(self, path: Path, source: str = "turn") -> None:
        super().__init__(path, source)
        self.log = TurnLog()

    def read_new(self) -> Iterator[dict[str, Any]]:
        for raw in self.new_lines():
            event = self.log.read(raw.decode(errors="replace").rstrip("\r"))
            if event is not None:
                yield event
