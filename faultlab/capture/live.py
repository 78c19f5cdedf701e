"""tcpdump on the router's client-side link: the pcap file, and TCP connections seen live; and,
when asked, on its link toward the target (`server.pcap`: what the server sent, dropped or not).

One tcpdump writes the capture to its stdout; this module saves it and decodes each record on the
way to put connections, FINs and RSTs on the event bus (so a step can fire on the k-th connection).
tcpdump inside a namespace with `--immediate-mode -B 8192` kept 16,725 of 16,726 packets in a burst
(scapy's sniffer kept 16%); the capture is drained before tcpdump is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from faultlab.capture.pcap import ACK, FIN, RST, SYN, PcapStream, decode_tcp
from faultlab.connections import ConnectionTable
from faultlab.errors import MechanismError
from faultlab.events import EventBus
from faultlab.interrupt import uncancelled
from faultlab.lab.base import Lab
from faultlab.lab.privilege import in_user_namespace
from faultlab.lab.process import terminate
from faultlab.private import open_private
from faultlab.vocabulary.lab import CaptureStart, CaptureStop
from faultlab.vocabulary.run import TcpConnect, TcpFin, TcpRst

READY_TIMEOUT_S = 5.0
DRAIN_QUIET_S = 0.1
DRAIN_MAX_S = 1.0


class Tcpdump:
    """One tcpdump on a router interface, its pcap stream handed to `on_chunk` as it comes."""

    def __init__(self, lab: Lab, iface: str, snaplen_bytes: int) -> None:
        self.lab = lab
        self.iface = iface
        self.snaplen_bytes = snaplen_bytes
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._last_data = 0.0
        # What tcpdump said at its end: "N packets dropped by kernel" (its ring buffer was full).
        self.dropped_by_kernel: int | None = None

    async def start(self, on_chunk: Callable[[bytes], object]) -> None:
        tcpdump = shutil.which("tcpdump", path="/usr/sbin:/usr/bin:/sbin:/bin")
        if tcpdump is None:
            raise MechanismError("tcpdump is missing: apt-get install tcpdump")
        argv = [tcpdump, "-i", self.iface, "-w", "-", "-U", "--immediate-mode", "-B", "8192",
                "-s", str(self.snaplen_bytes), "-n"]
        if os.geteuid() == 0 and not in_user_namespace():
            # As root, tcpdump drops to the `tcpdump` user, who cannot write the run's files.
            argv += ["-Z", "root"]
        self.proc = await self.lab.spawn("router", argv, os.environ,
                                         stdout=asyncio.subprocess.PIPE,
                                         stderr=asyncio.subprocess.PIPE)
        try:
            await self._wait_listening()
        except BaseException:
            # Not on the run's stack yet (a failed start, or a run cancelled meanwhile): stop it.
            await uncancelled(terminate(self.proc, 1.0))
            raise
        self._reader = asyncio.create_task(self._read(on_chunk))

    async def _wait_listening(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        seen: list[str] = []
        try:
            async with asyncio.timeout(READY_TIMEOUT_S):
                while line := (await self.proc.stderr.readline()).decode(errors="replace"):
                    if "listening on" in line:
                        return
                    seen.append(line.strip())
        except TimeoutError:
            pass
        raise MechanismError(f"tcpdump on {self.iface} did not start: "
                             f"{' '.join(seen) or 'no output'}")

    async def _read(self, on_chunk: Callable[[bytes], object]) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        loop = asyncio.get_running_loop()
        while chunk := await self.proc.stdout.read(1 << 16):
            self._last_data = loop.time()
            on_chunk(chunk)

    async def stop(self) -> None:
        """Let what the kernel still buffers reach the reader (a quiet pipe), then stop."""
        if self.proc is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_MAX_S
        while loop.time() < deadline and loop.time() - self._last_data < DRAIN_QUIET_S:
            await asyncio.sleep(DRAIN_QUIET_S / 2)
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 2.0)
        await terminate(self.proc, 0.5)
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self.proc.stderr is not None:
            said = (await self.proc.stderr.read()).decode(errors="replace")
            if found := re.search(r"(\d+) packets? dropped by kernel", said):
                self.dropped_by_kernel = int(found.group(1))


class LiveCapture:
    """tcpdump on the router's link toward the client, saved to `pcap_path` (or only watched
    when it is None); with `server_pcap_path`, another on its link toward the target (the uplink
    for a remote one), which sees what the server sent even where the router dropped it."""

    def __init__(self, lab: Lab, pcap_path: Path | None, snaplen_bytes: int, bus: EventBus,
                 server_pcap_path: Path | None = None, table: ConnectionTable | None = None
                 ) -> None:
        self.client_side = Tcpdump(lab, lab.client_link, snaplen_bytes)
        self.server_side = (Tcpdump(lab, lab.target_link, snaplen_bytes)
                            if server_pcap_path is not None else None)
        self.pcap_path = pcap_path
        self.server_pcap_path = server_pcap_path
        self.bus = bus
        self.client = str(lab.client_address)
        self.table = table or ConnectionTable()
        self.packets = 0
        self._stream = PcapStream()
        self._files: list[IO[bytes]] = []

    async def __aenter__(self) -> Self:
        try:
            # The capture holds every packet of the run: only its owner may read it.
            out = self._open(self.pcap_path)
            await self.client_side.start(lambda chunk: self._client_chunk(chunk, out))
            if self.server_side is not None:
                server_out = self._open(self.server_pcap_path)
                assert server_out is not None
                await self.server_side.start(server_out.write)
        except BaseException:
            await uncancelled(self._stop())
            raise
        self.bus.announce("capture", CaptureStart(
            self.client_side.iface, self.client_side.proc.pid if self.client_side.proc else None,
            self.server_side.iface if self.server_side else None))
        return self

    def _open(self, path: Path | None) -> IO[bytes] | None:
        if path is None:
            return None
        out = open_private(path, "wb")
        self._files.append(out)
        return out

    def _client_chunk(self, chunk: bytes, out: IO[bytes] | None) -> None:
        if out is not None:
            out.write(chunk)
        stream = self._stream
        for ts, pkt in stream.feed(chunk):
            self.packets += 1
            seg = decode_tcp(stream.linktype, ts, pkt)
            if seg is not None and seg.flags & (SYN | FIN | RST):
                self._observe(seg.ts, seg.src, seg.sport, seg.dst, seg.dport, seg.flags)

    def _observe(self, ts: float, src: str, sport: int, dst: str, dport: int, flags: int) -> None:
        t = self.bus.clock.from_wall(ts)
        from_client = src == self.client
        if from_client and flags & SYN and not flags & ACK:
            conn = self.table.observe_syn(src, sport, dst, dport, t)
            if conn is not None:
                connect = TcpConnect(conn.k, conn.client_port, conn.server, conn.server_port)
                self.bus.record("capture", connect.name, t, connect.fields())
            return
        conn = self.table.lookup(sport, dport) if from_client else self.table.lookup(dport, sport)
        if conn is None:
            return
        side = "client" if from_client else "server"
        if flags & (RST | FIN):
            end = TcpRst(conn.k, side) if flags & RST else TcpFin(conn.k, side)
            self.bus.record("capture", end.name, t, end.fields())

    async def _stop(self) -> None:
        sides = [s for s in (self.client_side, self.server_side) if s is not None]
        await asyncio.gather(*(side.stop() for side in sides))
        for out in self._files:
            out.close()
        self._files.clear()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        started = self.client_side.proc is not None
        await self._stop()
        if started:
            dropped = {side: tcpdump.dropped_by_kernel for side, tcpdump in
                       (("dropped_by_kernel", self.client_side),
                        ("server_dropped_by_kernel", self.server_side)) if tcpdump is not None}
            self.bus.announce("capture", CaptureStop(self.packets, **dropped))
