"""One connection's life as the server sees it, whoever says what the server says: the emulator's
connections (faultlab.emulator.session: a brain and its turns) and a cassette's
(faultlab.cassette.replay: a recording) share it.

A connection opens (`ServerConnect`); what the server says is scheduled in its `outbox` and
handed to the shell by `poll` when due; the server closes it at most once (`close`), and the
close is told as it is sent (`ServerClose`), not when it was decided, nor at all if the peer left
first; the peer's end (`peer_closed`: a close frame, FIN, RST, or the server's own close) is
told once (`ServerDisconnect`). Sans-I/O, as the rest of the core: `now` is the shell's clock.
What differs between the two, where the server's messages come from and the timers of its own,
is the subclass's, through the hooks at the end.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from faultlab.emulator.outbox import Action, Outbox
from faultlab.emulator.refusals import close_reason
from faultlab.events import Announcement
from faultlab.vocabulary.server import ServerClose, ServerConnect, ServerDisconnect


class Teller(Protocol):
    """Where a connection's events go (the emulator's `announce`)."""

    def announce(self, what: Announcement) -> None: ...


class Lifecycle:
    """One WebSocket connection's life: number `number`, in the API's dialect `api`, opened at
    `opened_at`. `closing`: the server's close is scheduled (what the client sends is not
    answered); `closed`: sent, or the connection is gone."""

    def __init__(self, teller: Teller, number: int, now: float, api: str,
                 client_port: int | None = None) -> None:
        self.teller = teller
        self.number = number
        self.api = api
        self.opened_at = now
        self.outbox = Outbox()
        self.closing = False
        self.closed = False
        self._gone = False
        teller.announce(ServerConnect(number, api, client_port))

    def close(self, at: float, code: int, reason: str, why: str, **detail: Any) -> None:
        """The server closes the connection at `at` (its first close only); `why` and
        `detail` are for its `ServerClose`."""
        if self.closing:
            return
        self.closing = True
        self.outbox.close(at, code, close_reason(reason), why, detail)

    def next_due(self) -> float | None:
        """When the next frame, close or timer is due (None: nothing scheduled)."""
        if self.closed:
            return None
        times = [self.outbox.next_at(), *self._timers()]
        return min((t for t in times if t is not None), default=None)

    def poll(self, now: float) -> list[Action]:
        """The frames and closes due by `now`, in order; after a close, nothing more."""
        out: list[Action] = []
        self._due(now, out)
        return out

    def _due(self, now: float, out: list[Action]) -> None:
        self._fire(now)
        while not self.closed and (action := self.outbox.pop_due(now)) is not None:
            if action.think:
                self._think(action.at)
                continue
            out.append(action)
            if action.closes:
                self.closed = True
                self.teller.announce(ServerClose(self.number, action.code, action.reason,
                                                 action.why, dict(action.detail)))
                self._closed_by_server(now)
                self.drop_scheduled()
            else:
                self._sent(action)

    def peer_closed(self, now: float, timed_out: bool = False) -> None:
        """The connection is gone from the server's view (close frame, FIN, RST, or ours);
        `timed_out`: its TCP gave up retransmitting."""
        if self._gone:
            return
        self._gone = True
        if not self.closed:
            self.closed = True
            self.drop_scheduled()
            self._lost(now, timed_out)
        self.teller.announce(ServerDisconnect.of(self.number, timed_out))

    def drop_scheduled(self) -> None:
        """Nothing scheduled is sent any more: a close came first, or the connection is gone."""
        self.outbox.clear()

    # The hooks: what a connection's server does besides sending what it scheduled.

    def _timers(self) -> Iterable[float | None]:
        """When its own timers fall due (reaping, a lifetime), besides the outbox."""
        return ()

    def _fire(self, now: float) -> None:
        """Its timers due by `now` (they may close the connection)."""

    def _think(self, at: float) -> None:
        """A moment to think it scheduled (`Outbox.think`) fell due."""

    def _sent(self, action: Action) -> None:
        """A frame was handed to the shell."""

    def _closed_by_server(self, now: float) -> None:
        """Its close was sent."""

    def _lost(self, now: float, timed_out: bool) -> None:
        """The peer ended the connection before the server closed it."""
