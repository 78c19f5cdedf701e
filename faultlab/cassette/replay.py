"""A cassette's server side, served again: the emulator's shell (faultlab.emulator.server) drives
a `Replay` exactly as it drives the emulator, and each of its connections is the emulator's
connection core (faultlab.emulator.lifecycle: opened, closed and ended with the same events),
whose server messages come from the recording instead of a brain.

Each connection the client opens plays the next recorded connection of its API, in order; its
first message must start as that one's did (its kind, and whether it resumes a session), else
the next recorded one that does is played. Every recorded server message and close waits for the
client message it followed, then goes out at its recorded delay after it (times the time scale).
Client messages match by kind and order: ids, timestamps, handles and spacing may differ, and a
run of stream chunks (audio, video) is one step however the client cuts it, its delays timed from
its first chunk. A message that does not match, or a connection the cassette does not hold,
diverges: `strict` closes the connection (DIVERGED_CODE, a reason naming both messages) and says
`cassette.diverged`; `fallback` says it too and hands the connection to the emulator, which takes
over from there with the connection's setup (a resumed session opens fresh: the emulator never
issued its handle).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from faultlab.cassette.format import Cassette, Divergence, Recorded, Said, with_stand_ins
from faultlab.emulator.lifecycle import Lifecycle
from faultlab.emulator.outbox import Action
from faultlab.emulator.session import Connection, Emulator
from faultlab.events import Announcement
from faultlab.protocols import DEFAULT_DIALECT
from faultlab.protocols import Protocol as RealtimeApi
from faultlab.vocabulary.run import FrameLogged
from faultlab.vocabulary.server import CassetteDiverged, CassettePlay

# A policy violation: the client sent what the recording's client did not.
DIVERGED_CODE = 1008


@dataclass(frozen=True)
class Step:
    """A client message the replay waits for: one message, or a run of stream chunks (`stream`:
    audio, video, interleaved as the client likes)."""

    kind: str  # its (first) message's
    first: int  # the number of its (first) message
    last: int
    at: float  # when its first message came, in the cassette's time
    stream: bool = False

    def takes(self, kind: str, is_stream: Callable[[str], bool]) -> bool:
        """Whether a client message of `kind` is this step (or, for a run, one more chunk)."""
        return kind == self.kind or (self.stream and is_stream(kind))

    def describe(self, conn: int) -> str:
        span = f"{self.first}" if self.first == self.last else f"{self.first}-{self.last}"
        return f"{self.kind} (client message {span} of recorded connection {conn})"


def steps_of(rec: Recorded, is_stream: Callable[[str], bool]) -> list[Step]:
    """A recorded connection's client messages as the steps a replay waits for."""
    steps: list[Step] = []
    for said in rec.client:
        last = steps[-1] if steps else None
        if last is not None and last.stream and is_stream(said.kind):
            steps[-1] = Step(last.kind, last.first, said.n, last.at, stream=True)
        else:
            steps.append(Step(said.kind, said.n, said.n, said.at, stream=is_stream(said.kind)))
    return steps


def _resumes(described: Mapping[str, Any]) -> bool:
    return bool(described.get("handle"))


class Replay:
    """The cassette's server: what the emulator's shell serves instead of an `Emulator`, which
    it keeps for what every connection shares (its API, events, clock scale) and for fallback."""

    def __init__(self, cassette: Cassette, emulator: Emulator,
                 divergence: Divergence = "strict") -> None:
        self.cassette = cassette
        self.emulator = emulator
        self.divergence = divergence
        self.api = emulator.api
        self.personality = emulator.personality
        self.time_scale = emulator.time_scale
        self._unplayed = list(cassette.connections)
        self._numbers = itertools.count(1)

    def announce(self, what: Announcement) -> None:
        self.emulator.announce(what)

    def next_due(self) -> float | None:
        return self.emulator.next_due()

    def poll(self, now: float) -> None:
        self.emulator.poll(now)

    def connect(self, now: float, api: str = DEFAULT_DIALECT,
                client_port: int | None = None) -> ReplayConnection:
        return ReplayConnection(self, next(self._numbers), now, api, client_port)

    def take(self, dialect: str, first_kind: str | None = None,
             resumes: bool | None = None) -> Recorded | None:
        """The next unplayed recorded connection of this API (that starts so), taken."""
        protocol = self.api.protocol
        for rec in self._unplayed:
            if protocol.dialect_of(rec.path) != dialect:
                continue
            if first_kind is not None:
                first = rec.client[0] if rec.client else None
                if first is None or first.kind != first_kind:
                    continue
                if resumes is not None and _resumes(protocol.describe(first.payload)) != resumes:
                    continue
            self._unplayed.remove(rec)
            return rec
        return None

    def give_back(self, rec: Recorded) -> None:
        """A recorded connection taken for a connection that turned out to start otherwise."""
        order = {id(r): i for i, r in enumerate(self.cassette.connections)}
        self._unplayed.append(rec)
        self._unplayed.sort(key=lambda r: order[id(r)])


class ReplayConnection(Lifecycle):
    """One connection of the replay: a `Lifecycle` as the emulator's connections have, whose
    server messages come from a recorded connection (`recorded`) instead of a brain; once it
    diverged under `fallback`, the emulator's connection (`fallback`) answers in its place."""

    def __init__(self, replay: Replay, number: int, now: float, api: str,
                 client_port: int | None) -> None:
        self._closed = False
        super().__init__(replay, number, now, api, client_port)
        self.replay = replay
        self.recorded: Recorded | None = None
        self.steps: list[Step] = []
        self.step = -1
        self.fallback: Connection | None = None
        self._sent_count = 0
        self._received: list[str | bytes] = []
        self._path = ""
        self._headers: Mapping[str, str] = {}

    @property
    def closed(self) -> bool:
        return self.fallback.closed if self.fallback is not None else self._closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self._closed = value

    @property
    def _protocol(self) -> RealtimeApi:
        return self.replay.api.protocol

    def begin(self, path: str, headers: Mapping[str, str], now: float) -> None:
        self._path, self._headers = path, headers
        rec = self.replay.take(self.api)
        if rec is None:
            self._diverge(now, "no recorded connection is left", "a new connection", None)
            return
        self._play(rec, now)

    def _play(self, rec: Recorded, now: float, opening: bool = True) -> None:
        self.recorded = rec
        self.steps = steps_of(rec, self._protocol.is_stream)
        self.replay.announce(CassettePlay(self.number, rec.conn))
        if opening:
            self._schedule(0, rec.at, now)

    def _schedule(self, after_step: int, anchor_at: float, now: float) -> None:
        """Every server message and close that followed step `after_step` (0: the opening;
        else steps[after_step - 1]), at its delay after `now`."""
        rec = self.recorded
        assert rec is not None
        numbers = (range(0, 1) if after_step == 0 else
                   range(self.steps[after_step - 1].first, self.steps[after_step - 1].last + 1))
        scale = self.replay.time_scale
        for said in rec.server:
            if said.after in numbers:
                self.outbox.send_wire(now + max(0.0, said.at - anchor_at) * scale,
                                      _served(said))
        ending = rec.ending
        if ending is not None and ending.by == "server" and ending.after in numbers:
            # Scheduled, not `close`: the client is answered until the recorded close is sent.
            self.outbox.close(now + max(0.0, ending.at - anchor_at) * scale,
                              ending.code or 1000, ending.reason, "recorded")

    def receive(self, raw: str | bytes, now: float) -> None:
        if self.fallback is not None:
            self.fallback.receive(raw, now)
            return
        if self.closed or self.closing:
            return
        described = self._protocol.describe(raw)
        kind = str(described.get("kind") or ("binary" if isinstance(raw, bytes) else "text"))
        self._received.append(raw)
        expected = self._match(kind, _resumes(described), now)
        if expected is None or self.replay.divergence == "strict":
            # Under fallback the emulator logs the message that diverged, as it takes it.
            self.replay.announce(FrameLogged("emulator", "client", self.number, kind, len(raw)))
        if expected is not None:
            self._diverge(now, expected, kind, raw)

    def _match(self, kind: str, resumes: bool, now: float) -> str | None:
        """Take a client message of `kind` as the recording's next, scheduling what followed
        it; None, or what the recording expected instead."""
        rec = self.recorded
        assert rec is not None
        if self.step == -1:
            return self._first(kind, resumes, now)
        is_stream = self._protocol.is_stream
        current = self.steps[self.step]
        if current.stream and is_stream(kind):
            return None
        following = self.steps[self.step + 1] if self.step + 1 < len(self.steps) else None
        if following is not None and following.takes(kind, is_stream):
            self.step += 1
            self._schedule(self.step + 1, following.at, now)
            return None
        return (following.describe(rec.conn) if following is not None else
                f"nothing more (recorded connection {rec.conn} ends after {current.last} client "
                f"messages)")

    def _first(self, kind: str, resumes: bool, now: float) -> str | None:
        rec = self.recorded
        assert rec is not None
        first = self.steps[0] if self.steps else None
        first_resumes = (first is not None and
                         _resumes(self._protocol.describe(rec.client[0].payload)))
        if first is None or not first.takes(kind, self._protocol.is_stream) or (
                first_resumes != resumes):
            other = self.replay.take(self.api, kind, resumes)
            if other is None:
                return ("nothing (the recorded connection's client sent none)"
                        if first is None else first.describe(rec.conn))
            # The other's opening stands for what went out already (both opened alike).
            self.replay.give_back(rec)
            self.outbox.clear()
            self._play(other, self.opened_at, opening=self._sent_count == 0)
        self.step = 0
        self._schedule(1, self.steps[0].at, now)
        return None

    def _diverge(self, now: float, expected: str, received: str, raw: str | bytes | None) -> None:
        then = self.replay.divergence
        self.replay.announce(CassetteDiverged(
            self.number, None if self.recorded is None else self.recorded.conn, expected,
            received, then))
        self.outbox.clear()
        if then == "fallback":
            self._fall_back(now, raw)
            return
        self.close(now, DIVERGED_CODE,
                   f"cassette diverged: expected {expected}; received {received}",
                   "cassette diverged")

    def _fall_back(self, now: float, raw: str | bytes | None) -> None:
        """The emulator takes the connection over (`Connection.adopt`): its opening and what
        the client said before, then the message that diverged, as any."""
        conn = Connection(self.replay.emulator, self.number, self.opened_at, self.api)
        earlier = self._received if raw is None else self._received[:-1]
        conn.adopt(self._path, self._headers, earlier, now)
        self.fallback = conn
        if raw is not None:
            conn.receive(raw, now)

    def next_due(self) -> float | None:
        if self.fallback is not None:
            return self.fallback.next_due()
        return super().next_due()

    def poll(self, now: float) -> list[Action]:
        if self.fallback is not None:
            return self.fallback.poll(now)
        return super().poll(now)

    def peer_closed(self, now: float, timed_out: bool = False) -> None:
        if self.fallback is not None:
            self.fallback.peer_closed(now, timed_out)
            return
        super().peer_closed(now, timed_out)

    def _sent(self, action: Action) -> None:
        self._sent_count += 1


def _served(said: Said) -> str | bytes:
    """A recorded server message as the replay sends it: each secret's stand-in in its place."""
    if isinstance(said.payload, bytes):
        try:
            return with_stand_ins(said.payload.decode()).encode()
        except UnicodeDecodeError:
            return said.payload
    return with_stand_ins(said.payload)

