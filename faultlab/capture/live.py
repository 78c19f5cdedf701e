"""tcpdump on the router's client-side link: the pcap file, and TCP connections seen live.

One tcpdump writes the capture to its stdout; this module saves it and decodes each record on the
way to put connections, FINs and RSTs on the event bus (so a step can fire on the k-th connection).
tcpdump inside a namespace with `--immediate-mode -B 8192` kept 16,725 of 16,726 packets in a burst
(scapy's sniffer kept 16%); the capture is drained before tcpdump is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from faultlab.capture.pcap import ACK, FIN, RST, SYN, PcapStream, decode_tcp
from faultlab.connections import ConnectionChoice, choose
from faultlab.errors import MechanismError
from faultlab.events import EventBus
from faultlab.interrupt import uncancelled
from faultlab.lab.base import Lab
from faultlab.lab.privilege import in_user_namespace
from faultlab.lab.process import terminate
from faultlab.private import open_private

READY_TIMEOUT_S = 5.0
DRAIN_QUIET_S = 0.1
DRAIN_MAX_S = 1.0


@dataclass(frozen=True)
class Connection:
    """A TCP connection from the client to the target, numbered as faultlab.connections says."""

    k: int
    client: str
    client_port: int
    server: str
    server_port: int
    t: float


class ConnectionTable:
    """The client's connections to the target, as the capture saw their SYNs."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.connections: list[Connection] = []
        self._by_ports: dict[tuple[int, int], Connection] = {}

    def observe_syn(self, client: str, client_port: int, server_port: int, t: float) -> Connection | None:
        """Record a client SYN; None when it is a retransmission of a known one."""
        if (client_port, server_port) in self._by_ports:
            return None
        conn = Connection(len(self.connections) + 1, client, client_port, self.target,
                          server_port, t)
        self.connections.append(conn)
        self._by_ports[(client_port, server_port)] = conn
        return conn

    def lookup(self, client_port: int, server_port: int) -> Connection | None:
        return self._by_ports.get((client_port, server_port))

    def select(self, which: ConnectionChoice) -> Connection | None:
        """`first`, `latest`, or connection k; None if not seen yet."""
        return choose(self.connections, which)


class LiveCapture:
    """tcpdump on the router's link toward the client, saved to `pcap_path` (or only watched
    when it is None)."""

    def __init__(self, lab: Lab, pcap_path: Path | None, snaplen_bytes: int, bus: EventBus) -> None:
        self.lab = lab
        self.iface = lab.client_link
        self.pcap_path = pcap_path
        self.snaplen_bytes = snaplen_bytes
        self.bus = bus
        self.client = str(lab.client_address)
        self.table = ConnectionTable(str(lab.server_address))
        self.packets = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._last_data = 0.0

    async def __aenter__(self) -> Self:
        tcpdump = shutil.which("tcpdump", path="/usr/sbin:/usr/bin:/sbin:/bin")
        if tcpdump is None:
            raise MechanismError("tcpdump is missing: apt-get install tcpdump")
        argv = [tcpdump, "-i", self.iface, "-w", "-", "-U", "--immediate-mode", "-B", "8192",
                "-s", str(self.snaplen_bytes), "-n"]
        if os.geteuid() == 0 and not in_user_namespace():
            # As root, tcpdump drops to the `tcpdump` user, who cannot write the run's files.
            argv += ["-Z", "root"]
        self._proc = await self.lab.spawn("router", argv, os.environ, stdout=asyncio.subprocess.PIPE,
                                 stderr=asyncio.subprocess.PIPE)
        try:
            await self._wait_listening()
        except BaseException:
            # Not on the run's stack yet (a failed start, or a run cancelled meanwhile): stop it.
            await uncancelled(terminate(self._proc, 1.0))
            raise
        self._reader = asyncio.create_task(self._read())
        self.bus.emit("capture", "capture.start", iface=self.iface, pid=self._proc.pid)
        return self

    async def _wait_listening(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        seen: list[str] = []
        try:
            async with asyncio.timeout(READY_TIMEOUT_S):
                while line := (await self._proc.stderr.readline()).decode(errors="replace"):
                    if "listening on" in line:
                        return
                    seen.append(line.strip())
        except TimeoutError:
            pass
        raise MechanismError(f"tcpdump did not start: {' '.join(seen) or 'no output'}")

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stream = PcapStream()
        loop = asyncio.get_running_loop()
        # The capture holds every packet of the run: only its owner may read it.
        out = open_private(self.pcap_path, "wb") if self.pcap_path else None
        try:
            while chunk := await self._proc.stdout.read(1 << 16):
                self._last_data = loop.time()
                if out is not None:
                    out.write(chunk)
                for ts, pkt in stream.feed(chunk):
                    self.packets += 1
                    seg = decode_tcp(stream.linktype, ts, pkt)
                    if seg is not None and seg.flags & (SYN | FIN | RST):
                        self._observe(seg.ts, seg.src, seg.sport, seg.dport, seg.flags)
        finally:
            if out is not None:
                out.close()

    def _observe(self, ts: float, src: str, sport: int, dport: int, flags: int) -> None:
        t = self.bus.clock.from_wall(ts)
        from_client = src == self.client
        if from_client and flags & SYN and not flags & ACK:
            conn = self.table.observe_syn(src, sport, dport, t)
            if conn is not None:
                self.bus.record("capture", "tcp.connect", t, {
                    "k": conn.k, "client_port": conn.client_port, "server": conn.server,
                    "server_port": conn.server_port})
            return
        conn = self.table.lookup(sport, dport) if from_client else self.table.lookup(dport, sport)
        if conn is None:
            return
        side = "client" if from_client else "server"
        if flags & RST:
            self.bus.record("capture", "tcp.rst", t, {"k": conn.k, "from": side})
        elif flags & FIN:
            self.bus.record("capture", "tcp.fin", t, {"k": conn.k, "from": side})

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._proc is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_MAX_S
        # Let what the kernel still buffers reach the file: wait for a quiet pipe, then stop.
        while loop.time() < deadline and loop.time() - self._last_data < DRAIN_QUIET_S:
            await asyncio.sleep(DRAIN_QUIET_S / 2)
        with contextlib.suppress(ProcessLookupError):
            self._proc.send_signal(signal.SIGINT)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._proc.wait(), 2.0)
        await terminate(self._proc, 0.5)
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        self.bus.emit("capture", "capture.stop", packets=self.packets)
