"""Real traffic through a lab's router, for the benches (impair_bench.py, mtu_bench.py) and lab
tests (tests/lab/test_impairments.py, test_middlebox_ipt.py, which load it from this file): one-way
delays of timestamped datagrams, a counted stream, a bulk transfer, a TCP echo; and a fault
applied to a bare lab.

The sockets are made in the client's and server's namespaces (each by that namespace's thread)
and used from this process, which reads one monotonic clock on both ends: a one-way delay is
measured directly, with no clock offset to estimate.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from pyroute2 import IPRoute

from faultlab.connections import ConnectionTable
from faultlab.errors import MechanismError
from faultlab.faults import FAULTS
from faultlab.faults.base import Fault, FaultContext
from faultlab.impair.core import GilbertElliott
from faultlab.lab.base import Lab

PORT = 9
SO_RCVBUFFORCE = 33
BULK_PORT = 19
_STAMP = struct.Struct("!Id")


def _udp(port: int | None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Beyond net.core.rmem_max (208 KiB here: 270 small datagrams) as root, so that a receiver
    # a busy core holds back loses nothing the path delivered.
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    if port is not None:
        sock.bind(("0.0.0.0", port))
    return sock


@contextlib.contextmanager
def cpu_hog(processes: int | None = None) -> Iterator[None]:
    """One busy process per core (or `processes`) for the block, as a suite's parallel labs
    keep every core busy; each is ended by its pid after."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(processes or os.cpu_count() or 1)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def loss_interval(rate: float, burst: float, packets: int, z: float) -> tuple[float, float]:
    """The shares of `packets` a Gilbert-Elliott chain (long-run `rate`, runs of `burst`
    packets) loses within `z` standard deviations (2.576: 99 %). The count's variance is
    n p (1 - p) (1 + k) / (1 - k), k the chain's memory per step; a stream with pauses steps it
    more than once a packet, which only narrows the spread, so this interval is the wider one."""
    chain = GilbertElliott(rate, burst, random.Random())
    p, k = chain.rate, chain.keep
    spread = z * math.sqrt(p * (1 - p) * (1 + k) / (1 - k) / packets)
    return p - spread, p + spread


@dataclass
class Stream:
    """What the server received of `sent` numbered datagrams: each number in arrival order, and
    each arrival's one-way delay in seconds."""

    sent: int
    numbers: list[int]
    delays_s: list[float]

    @property
    def lost(self) -> int:
        return self.sent - len(set(self.numbers))

    @property
    def duplicated(self) -> int:
        return len(self.numbers) - len(set(self.numbers))

    @property
    def late(self) -> int:
        """Arrivals after a higher number had arrived (overtaken packets)."""
        highest, out = -1, 0
        for n in self.numbers:
            if n < highest:
                out += 1
            highest = max(highest, n)
        return out

    def loss_runs(self) -> list[int]:
        """The lengths of the runs of consecutive lost numbers."""
        got = set(self.numbers)
        runs, run = [], 0
        for n in range(self.sent):
            if n in got:
                if run:
                    runs.append(run)
                run = 0
            else:
                run += 1
        return runs + ([run] if run else [])


def stream(lab: Lab, count: int, interval_s: float, settle_s: float = 0.3,
           size: int = 64, reverse: bool = False) -> Stream:
    """Send `count` numbered, timestamped datagrams from the client to the server (the server
    to the client with `reverse`), one every `interval_s`, and collect them."""
    sender_ns, receiver_ns = (lab.server, lab.client) if reverse else (lab.client, lab.server)
    to = str(lab.client_address if reverse else lab.server_address)
    rx = receiver_ns.call(_udp, PORT)
    tx = sender_ns.call(_udp, None)
    numbers: list[int] = []
    delays: list[float] = []
    done = threading.Event()

    def receive() -> None:
        rx.settimeout(0.05)
        while not done.is_set():
            try:
                data = rx.recv(65536)
            except TimeoutError:
                continue
            arrived = time.monotonic()
            n, sent_at = _STAMP.unpack_from(data)
            numbers.append(n)
            delays.append(arrived - sent_at)

    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    pad = b"\0" * max(0, size - _STAMP.size)
    start = time.monotonic()
    try:
        for n in range(count):
            wait = start + n * interval_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            tx.sendto(_STAMP.pack(n, time.monotonic()) + pad, (to, PORT))
        time.sleep(settle_s)
    finally:
        done.set()
        reader.join()
        rx.close()
        tx.close()
    return Stream(count, numbers, delays)


def flood(lab: Lab, seconds: float, size: int = 64) -> tuple[int, int]:
    """Send datagrams from the client to the server as fast as one thread can for `seconds`;
    (sent, received)."""
    rx = lab.server.call(_udp, PORT)
    tx = lab.client.call(_udp, None)
    received = 0
    done = threading.Event()

    def receive() -> None:
        nonlocal received
        rx.settimeout(0.05)
        while not done.is_set():
            try:
                rx.recv(65536)
                received += 1
            except TimeoutError:
                continue

    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    payload, to, sent = b"x" * size, (str(lab.server_address), PORT), 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            for _ in range(64):
                try:
                    tx.sendto(payload, to)
                    sent += 1
                except OSError:  # ENOBUFS: the router's queue is full; retry later
                    time.sleep(0.0005)
        time.sleep(0.3)
    finally:
        done.set()
        reader.join()
        rx.close()
        tx.close()
    return sent, received


@dataclass
class Transfer:
    """A bulk transfer's rate: the receiver's goodput, and the Ethernet frames' bytes that left
    the router toward it, per second."""

    goodput_bytes_s: float
    wire_bytes_s: float


def bulk(lab: Lab, seconds: float, reverse: bool = False) -> Transfer:
    """A TCP transfer from the client to the server (the other way with `reverse`) for
    `seconds` after a 0.3 s ramp, measured over those seconds."""
    sender_ns, receiver_ns = (lab.server, lab.client) if reverse else (lab.client, lab.server)
    to = str(lab.client_address if reverse else lab.server_address)
    egress = lab.client_link if reverse else lab.target_link
    listener = receiver_ns.call(_listen, BULK_PORT)
    tx = sender_ns.call(socket.socket, socket.AF_INET, socket.SOCK_STREAM)
    stop = threading.Event()
    received = 0

    def receive() -> None:
        nonlocal received
        conn, _ = listener.accept()
        conn.settimeout(0.2)
        with conn:
            while not stop.is_set():
                try:
                    data = conn.recv(1 << 16)
                except TimeoutError:
                    continue
                if not data:
                    break
                received += len(data)

    def send() -> None:
        chunk = b"\0" * (1 << 14)
        tx.settimeout(0.2)
        while not stop.is_set():
            try:
                tx.send(chunk)
            except TimeoutError:
                continue
            except OSError:
                break

    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    tx.connect((to, BULK_PORT))
    writer = threading.Thread(target=send, daemon=True)
    writer.start()
    time.sleep(0.3)
    t0, got0, wire0 = time.monotonic(), received, lab.router.call(sent_bytes, egress)
    time.sleep(seconds)
    t1, got1, wire1 = time.monotonic(), received, lab.router.call(sent_bytes, egress)
    stop.set()
    writer.join()
    reader.join()
    tx.close()
    listener.close()
    return Transfer((got1 - got0) / (t1 - t0), (wire1 - wire0) / (t1 - t0))


def transfer(lab: Lab, payload: bytes) -> bytes:
    """Send `payload` over one TCP connection from the client to the server; what the server
    read before the client closed."""
    listener = lab.server.call(_listen, BULK_PORT)
    tx = lab.client.call(socket.socket, socket.AF_INET, socket.SOCK_STREAM)
    chunks: list[bytes] = []

    def receive() -> None:
        conn, _ = listener.accept()
        with conn:
            while data := conn.recv(1 << 16):
                chunks.append(data)

    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    with tx:
        tx.connect((str(lab.server_address), BULK_PORT))
        tx.sendall(payload)
    reader.join(timeout=30)
    listener.close()
    return b"".join(chunks)


def sent_bytes(link: str) -> int:
    """In the router's thread: the bytes `link`'s root qdisc has sent when it keeps count (tbf
    counts each segment's headers; the link's own counter sees a GSO packet's headers once),
    else the bytes the link has sent."""
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=link)[0]
        for qdisc in ipr.get_qdiscs(index=index):
            stats = qdisc.get_attr("TCA_STATS2")
            if qdisc.get_attr("TCA_KIND") == "tbf" and stats is not None:
                return int(stats.get_attr("TCA_STATS_BASIC")["bytes"])
        (info,) = ipr.get_links(index)
        return int(info.get_attr("IFLA_STATS64")["tx_bytes"])


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", port))
    sock.listen(1)
    return sock


def fault_of(name: str, step: str = "probe", **params: Any) -> Fault[Any]:
    """Fault `name` for step `step`, its parameters validated as a profile's are."""
    return FAULTS[name](step, FAULTS[name].Params.model_validate(params))


async def while_applied[L: Lab, T](lab: L, fault: Fault[Any], probe: Callable[[L], T]) -> T:
    """`probe(lab)`, in a worker thread, while `fault` is applied to `lab`; reverted after."""
    ctx = context(lab)
    await fault.apply(ctx)
    try:
        return await asyncio.to_thread(probe, lab)
    finally:
        await fault.revert(ctx)


class LabContext:
    """A FaultContext over a bare lab, for applying faults outside a run: no microphone, no
    proxy unless one is said to be in the path (`proxy`: anything but None), and the connection
    table given, if any (a test records its connections' SYNs in it, as the capture would)."""

    def __init__(self, lab: Lab, connections: ConnectionTable | None = None) -> None:
        self.lab = lab
        self.proxy: Any = None
        self.mic = None
        self._connections = connections

    @property
    def connections(self) -> ConnectionTable:
        if self._connections is None:
            raise MechanismError("no connection table outside a run: leave `connection` out")
        return self._connections

    async def revert(self, step_ids: Any) -> list[str]:
        return []


def context(lab: Lab) -> FaultContext:
    """`lab` as the context a fault is applied in."""
    return cast(FaultContext, LabContext(lab))


def tcp_socket(listen_port: int | None = None) -> socket.socket:
    """A non-blocking TCP socket (no Nagle) of the calling thread's namespace, listening on
    `listen_port` when given."""
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if listen_port is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("0.0.0.0", listen_port))
        sock.listen(64)
    sock.setblocking(False)
    return sock


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Send back whatever arrives, until the peer closes (an asyncio server's handler)."""
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


def chain_packets(chain: str) -> int:
    """The packets the rules of an iptables chain matched, in the calling thread's namespace."""
    out = subprocess.run(["iptables", "-L", chain, "-v", "-x", "-n"], capture_output=True,
                         text=True, check=True).stdout
    return sum(int(line.split()[0]) for line in out.splitlines()[2:] if line.strip())


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile (0-1) of `values`, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]

