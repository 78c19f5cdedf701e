"""The userspace queue's decisions, without sockets or clock: each packet's delay, loss,
duplication, reordering and corruption, and the verdicts due at a given time.

One `Lane` per hurt direction (one kernel queue each, so packet ids rise within a lane). Packets
are released in due order; with `keep_order` a packet is never due before the one ahead of it,
as on a real link where jitter comes from queueing. Verdicts come out in an order the kernel can
take in one datagram: single verdicts first, then one batch verdict for the in-order accepts.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

# A packet held back for reordering waits for `reorder_gap` later packets to leave, but no
# longer than this past its due time: on a quiet flow (a ping every 500 ms) it would else wait
# for the next ping, which is loss, not reordering.
REORDER_HOLD_S = 0.02
# The mark of the duplicates the worker sends itself (through OUTPUT): the queue rules in OUTPUT
# let them pass, or each would be queued, and maybe duplicated, again.
DUPLICATE_MARK = 0xFA17
# A Gilbert-Elliott chain's step in time (GilbertElliott): with runs of 3 packets a fade is
# forgotten after ~100 ms of quiet (0.67 ** 11 = 1 %), the order of a walking user's Wi-Fi fades
# (coherence time ~40 ms at 2.4 GHz and 1.4 m/s), and far below TCP's least retransmission
# timeout (200 ms), so a stalled flow's retransmissions meet independent fades.
FADE_STEP_S = 0.010


@dataclass(frozen=True)
class Shape:
    """What the userspace queue does to each packet of one direction (times in seconds,
    probabilities as fractions)."""

    latency_s: float = 0.0
    jitter_s: float = 0.0
    distribution: Literal["uniform", "normal"] = "uniform"
    keep_order: bool = True
    loss: float = 0.0
    loss_burst: float = 1.0
    duplicate: float = 0.0
    reorder: float = 0.0
    reorder_gap: int = 1
    corrupt: float = 0.0

    @property
    def needs_payload(self) -> bool:
        """Whether the queue must see packets' bytes (to copy or change them)."""
        return self.duplicate > 0 or self.corrupt > 0

    @property
    def per_segment(self) -> bool:
        """Whether decisions are per wire packet (a GSO packet is then split before queueing)."""
        return self.needs_payload or self.loss > 0 or self.reorder > 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def undelayed(self) -> Shape | None:
        """This shape without its delay (for a proxied connection's server leg: the delay is
        the client leg's, once); None when nothing else is left."""
        if not (self.loss or self.duplicate or self.reorder or self.corrupt):
            return None
        return replace(self, latency_s=0.0, jitter_s=0.0)


class GilbertElliott:
    """Bursty loss: a good state that loses nothing and a bad state that loses every packet,
    with a mean bad run of `burst` packets and a long-run loss of `rate`.

    A fade is a span of time, not of packets: the chain steps once per packet and once more per
    tick of a FADE_STEP_S clock passed since the packet before. Packets sent back to back see
    runs of `burst`; a packet after a pause sees a chain that has moved on meanwhile, as a radio
    channel has. A chain stepped per
    packet only held a stalled TCP flow's retransmissions, 0.2-1.6 s apart, in one fade: the
    original segment and every retransmission lost with probability (1 - 1/burst) each, which
    with bursts of 3 killed the lossy-wifi voice session's connection in 2 runs of 15.
    """

    def __init__(self, rate: float, burst: float, rng: random.Random) -> None:
        self.leave_bad = 1.0 / burst
        # The stationary share of the bad state, p / (p + r), is the loss rate.
        self.enter_bad = min(1.0, rate * self.leave_bad / (1.0 - rate)) if rate < 1 else 1.0
        self.rate = self.enter_bad / (self.enter_bad + self.leave_bad)
        # The chain's memory: how much of its state one step keeps (its second eigenvalue).
        self.keep = 1.0 - self.enter_bad - self.leave_bad
        self.bad = False
        self.last: float | None = None
        self.rng = rng

    def lost(self, now: float | None = None) -> bool:
        """Step the chain by one packet arriving at `now` (and by the quiet since the one
        before); whether that packet is lost."""
        steps = 1
        if now is not None:
            if self.last is not None:
                # Ticks of the clock, not whole steps of each gap: packets 5 ms apart see a
                # quiet step every other packet, as the time that passed has it.
                steps += max(0, math.floor(now / FADE_STEP_S) - math.floor(self.last / FADE_STEP_S))
            self.last = now
        # The n-step transition of a two-state chain: its long-run share plus what is left of
        # its present state (for one step: 1 - leave_bad from bad, enter_bad from good). A chain
        # whose step overshoots (keep < 0: loss above 1 - 1/burst) keeps its one step's sign, so
        # quiet only fades it towards the long-run share: keep ** steps would flip back and lengthen
        # its runs after an even count of steps.
        memory = self.keep * abs(self.keep) ** (steps - 1)
        bad_next = self.rate + (1.0 - self.rate) * memory if self.bad else self.rate * (
            1.0 - memory)
        self.bad = self.rng.random() < bad_next
        return self.bad


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to tell the kernel about packet `packet_id` of `queue` (with `through`, about every
    packet of that queue up to it); `payload` replaces the packet's bytes, `copy` is sent again
    after it (a duplicate)."""

    queue: int
    packet_id: int
    accept: bool
    payload: bytes | None = None
    copy: bytes | None = None
    through: bool = False


@dataclass(frozen=True, slots=True)
class QueueTally:
    """What one kernel queue saw: its packets, and those the loss chain dropped (the queue
    loses nothing else: what its process has not read when it leaves is let go)."""

    queue: int
    packets: int
    dropped: int

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.queue}:{self.packets}:{self.dropped}"

    @classmethod
    def parse(cls, word: str) -> QueueTally:
        queue, packets, dropped = (int(n) for n in word.split(":"))
        return cls(queue, packets, dropped)


class _Packet:
    __slots__ = ("copy", "due", "packet_id", "payload", "reordered")

    def __init__(self, packet_id: int, due: float) -> None:
        self.packet_id = packet_id
        self.due = due
        self.payload: bytes | None = None
        self.copy: bytes | None = None
        self.reordered = False


class Lane:
    """The packets of one kernel queue (one direction) waiting for their verdict."""

    def __init__(self, queue: int, shape: Shape, rng: random.Random) -> None:
        self.queue = queue
        self.shape = shape
        self.rng = rng
        self.burst_loss = GilbertElliott(shape.loss, shape.loss_burst, rng) if shape.loss else None
        self.waiting: list[tuple[float, int, _Packet]] = []
        self.held: list[_Packet] = []
        self.dropped: list[int] = []
        self.last_due = -math.inf
        self.highest_released = -1
        # Ids the kernel still holds, in arrival order; settled ones are skipped lazily.
        self.open: deque[int] = deque()
        self.settled: set[int] = set()
        self.packets = 0  # queued to this lane
        self.lost = 0  # dropped by the loss chain

    def delay(self) -> float:
        s = self.shape
        if not s.jitter_s:
            return s.latency_s
        if s.distribution == "normal":
            return max(0.0, self.rng.gauss(s.latency_s, s.jitter_s))
        return max(0.0, s.latency_s + self.rng.uniform(-s.jitter_s, s.jitter_s))

    def receive(self, packet_id: int, now: float, payload: bytes | None) -> None:
        s, rng = self.shape, self.rng
        self.open.append(packet_id)
        self.packets += 1
        if self.burst_loss is not None and self.burst_loss.lost(now):
            self.dropped.append(packet_id)
            self.lost += 1
            return
        due = now + self.delay()
        if s.keep_order:
            due = max(due, self.last_due)
            self.last_due = due
        packet = _Packet(packet_id, due)
        if payload is not None:
            if s.duplicate and rng.random() < s.duplicate:
                packet.copy = payload
            if s.corrupt and rng.random() < s.corrupt:
                packet.payload = corrupted(payload, rng)
        if s.reorder and rng.random() < s.reorder:
            packet.reordered = True
            self.held.append(packet)
        else:
            heapq.heappush(self.waiting, (due, packet_id, packet))

    def next_due(self) -> float | None:
        times = [self.waiting[0][0]] if self.waiting else []
        if self.dropped:
            times.append(-math.inf)
        times += [p.due + REORDER_HOLD_S for p in self.held]
        return min(times) if times else None

    def poll(self, now: float, everything: bool = False) -> list[Verdict]:
        released: list[_Packet] = []
        while self.waiting and (everything or self.waiting[0][0] <= now):
            released.append(heapq.heappop(self.waiting)[2])
        if released:
            self.highest_released = max(self.highest_released, released[-1].packet_id)
        gap = self.shape.reorder_gap
        still = []
        for p in self.held:
            if everything or (p.due <= now and (self.highest_released >= p.packet_id + gap
                                                or now >= p.due + REORDER_HOLD_S)):
                released.append(p)
            else:
                still.append(p)
        self.held = still
        return self._verdicts(released)

    def _verdicts(self, released: list[_Packet]) -> list[Verdict]:
        q = self.queue
        out = [Verdict(q, i, False) for i in self.dropped]
        settled = self.settled
        settled.update(self.dropped)
        settled.update(p.packet_id for p in released)
        self.dropped = []
        while self.open and self.open[0] in settled:
            settled.discard(self.open.popleft())
        lowest_open = self.open[0] if self.open else math.inf
        # A batch verdict settles every packet still queued up to its id, in id order: only the
        # plain accepts below the lowest id still held here qualify, and none when a reordered
        # packet leaves now (it must follow the later ones); the rest get single verdicts first.
        if any(p.reordered for p in released):
            lowest_open = -1
        through = -1
        copies = []
        for p in released:
            if p.payload is None and p.packet_id < lowest_open:
                through = max(through, p.packet_id)
            else:
                out.append(Verdict(q, p.packet_id, True, p.payload))
            if p.copy is not None:
                copies.append(Verdict(q, p.packet_id, True, copy=p.copy))
        if through >= 0:
            out.append(Verdict(q, through, True, through=True))
        return out + copies


class Impairer:
    """Every lane of one step's userspace queue."""

    def __init__(self, shape: Shape, queues: list[int], rng: random.Random | None = None,
                 lane_shapes: Sequence[Shape] | None = None) -> None:
        """`lane_shapes`: each queue's own shape (all `shape` when None)."""
        rng = rng or random.Random()
        shapes = lane_shapes if lane_shapes is not None else [shape] * len(queues)
        self.lanes = {q: Lane(q, s, rng) for q, s in zip(queues, shapes, strict=True)}

    def receive(self, queue: int, packet_id: int, now: float, payload: bytes | None) -> None:
        """A packet the kernel queued at `now`."""
        self.lanes[queue].receive(packet_id, now, payload)

    def next_due(self) -> float | None:
        """When the next verdict is due (-inf: at once), None with nothing waiting."""
        times = [t for lane in self.lanes.values() if (t := lane.next_due()) is not None]
        return min(times) if times else None

    def poll(self, now: float) -> list[Verdict]:
        """The verdicts due by `now`; a `copy` verdict means: send its bytes again."""
        return [v for lane in self.lanes.values() for v in lane.poll(now)]

    def tally(self) -> list[QueueTally]:
        """Each lane's packets and how many of them its loss chain dropped."""
        return [QueueTally(q, lane.packets, lane.lost) for q, lane in self.lanes.items()]

    def flush(self) -> list[Verdict]:
        """Verdicts for every packet still waiting, at once (the queue is being removed)."""
        return [v for lane in self.lanes.values() for v in lane.poll(math.inf, everything=True)]


def corrupted(packet: bytes, rng: random.Random) -> bytes:
    """`packet` (an IPv4 packet) with one bit flipped past its transport header, checksums left
    as they were, so the receiving stack discards it; a packet with no payload gets the flip in
    the last byte of its transport header."""
    if len(packet) < 20:
        return packet
    ip_header = (packet[0] & 0x0F) * 4
    transport = 20 if packet[9] == 6 else 8
    if packet[9] == 6 and len(packet) >= ip_header + 13:
        transport = (packet[ip_header + 12] >> 4) * 4
    start = ip_header + transport
    at = rng.randrange(start, len(packet)) if len(packet) > start else len(packet) - 1
    out = bytearray(packet)
    out[at] ^= 1 << rng.randrange(8)
    return bytes(out)
