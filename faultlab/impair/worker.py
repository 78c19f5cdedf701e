"""The userspace queue's process, started in the router's namespace for one step:

    python -m faultlab.impair.worker '{"shape": {...}, "lanes": 2, "first_queue": 1000}'

(with `"shapes": [{...}, ...]`, each lane's own shape). It binds `lanes` free queues, prints
`ready Q1 [Q2]` (the run installs the NFQUEUE rules only then, so no packet ever waits on
nobody), gives each packet its verdict when due, and on SIGTERM
lets every waiting packet go, unbinds and prints `done Q:PACKETS:DROPPED ...` (a `QueueTally`
a queue). Duplicates leave through a raw socket: a packet this
process sends crosses OUTPUT, not FORWARD, and carries DUPLICATE_MARK, which the queue rules in
OUTPUT (a proxied connection's legs) let pass, so it is never queued again.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import select
import signal
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

from faultlab.impair.core import DUPLICATE_MARK, Impairer, Shape, Verdict
from faultlab.impair.nfqueue import QueueSocket, verdict_message

PR_SET_TIMERSLACK = 29
# select() sleeps up to the thread's timer slack (50 us by default) past its timeout: 1 us
# keeps a release within ~0.1 ms of its due time.
TIMER_SLACK_NS = 1000


class Link:
    """The worker's two sockets: the kernel queue's and, for duplicates, a raw IP socket."""

    def __init__(self, queue: QueueSocket, duplicates: bool) -> None:
        self.queue = queue
        self.raw = (socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
                    if duplicates else None)
        if self.raw is not None:
            # Needs CAP_NET_ADMIN, which the router's processes have; without it only the
            # queue rules in OUTPUT (a proxied path's) would see the copies again.
            with contextlib.suppress(OSError):
                self.raw.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, DUPLICATE_MARK)

    def deliver(self, verdicts: Sequence[Verdict]) -> None:
        if not verdicts:
            return
        self.queue.send([verdict_message(v.queue, v.packet_id, v.accept, v.payload, v.through)
                         for v in verdicts if v.copy is None])
        if self.raw is not None:
            for v in verdicts:
                if v.copy is not None:
                    self.raw.sendto(v.copy, (socket.inet_ntoa(v.copy[16:20]), 0))


def serve(spec: dict[str, Any]) -> int:
    shape = Shape(**spec["shape"])
    queue = QueueSocket()
    try:
        queues = queue.bind_free(int(spec["first_queue"]), int(spec["lanes"]),
                                 shape.needs_payload, whole_gso=not shape.per_segment)
    except OSError as exc:
        print(f"error {exc}", flush=True)
        return 1
    ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0)
    lane_shapes = [Shape(**one) for one in spec["shapes"]] if "shapes" in spec else None
    core = Impairer(shape, queues, lane_shapes=lane_shapes)
    link = Link(queue, shape.duplicate > 0)
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno())
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    print("ready", *queues, flush=True)
    clock = time.monotonic
    watched = [queue.fileno(), wake_r.fileno()]
    while not stopping:
        due = core.next_due()
        timeout = None if due is None else max(0.0, due - clock())
        readable, _, _ = select.select(watched, [], [], timeout)
        if watched[0] in readable:
            packets = queue.receive()
            # Stamped once read, when every packet read was surely queued: a stamp taken before
            # the read dates a packet queued after it (while this process was descheduled) too
            # early, and releases it early (96.4 ms for 100 ms, seen on a busy 2-core machine).
            now = clock()
            for packet in packets:
                core.receive(packet.queue, packet.packet_id, now, packet.payload)
        link.deliver(core.poll(clock()))
    # The rules are gone: what the kernel still holds for us (not read yet) and what we hold
    # leave now; closing the queue with packets unread would have the kernel drop them.
    now = clock()
    while waiting := queue.receive():
        for packet in waiting:
            core.receive(packet.queue, packet.packet_id, now, packet.payload)
    link.deliver(core.flush())
    queue.close()
    print("done", *core.tally(), flush=True)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m faultlab.impair.worker SPEC_JSON", file=sys.stderr)
        return 2
    return serve(json.loads(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
