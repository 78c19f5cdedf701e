"""The tools a user would otherwise pick to inspect a capture, doing the same work as
`faultlab pcap inspect` on the same file: dpkt and scapy (in-process, as libraries) and tshark
(a process, as a user runs it).

The in-process peers parse every packet with their own library, down to the TCP payload (dpkt:
`pcap.Reader` and the link type's class; scapy: `rdpcap`, then the `IP` and `TCP` layers), and
hand the segments to faultlab's own flow walk (`faultlab.capture.flows.analyse`, its parser
swapped for theirs): the same flows, statistics, reassembly and WebSocket frames come out, so a
ratio is the cost of the packet parsing alone, inside the whole inspection. `inspect` times all
three the same way (faultlab's own parser included).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from faultlab.capture import flows
from faultlab.capture.pcap import Segment, numbered_segments
from faultlab.capture.tshark import PREFERENCES

type Numbered = Callable[[Path], Iterator[tuple[int, Segment]]]
BENCH_EXTRA = "pip install -e '.[bench]' (make bench does)"
_FLAGS = 0x3F  # FIN..URG, as faultlab's decoder keeps them


@dataclass
class Walked:
    """What an inspection found: TCP packets, flows, WebSocket frames, flows that opened with
    TLS, and the seconds it took."""

    packets: int
    flows: int
    frames: int
    tls_flows: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.packets / self.seconds if self.seconds > 0 else 0.0


def missing(library: str) -> str | None:
    """Why a peer library cannot be used (None: it can)."""
    if importlib.util.find_spec(library) is None:
        return f"{library} is not installed: {BENCH_EXTRA}"
    return None


def inspect(path: Path, numbered: Numbered = numbered_segments) -> Walked:
    """faultlab's inspection of `path` (its flow walk) on the segments `numbered` parses."""
    with mock.patch.object(flows, "numbered_segments", numbered):
        started = time.perf_counter()
        report = flows.analyse(path)
        seconds = time.perf_counter() - started
    return Walked(report.packets, len(report.flows), sum(len(f.frames) for f in report.flows),
                  sum(1 for f in report.flows if f.tls), seconds)


def inspect_beside(path: Path, peers: dict[str, Numbered],
                   rounds: int = 2) -> tuple[Walked, dict[str, Walked]]:
    """faultlab's inspection of `path` and each peer's: faultlab and the first peer alternate
    `rounds` times and faultlab closes (each figure the mean of its runs: the machine's load
    drifts), then the other peers run once, last, because scapy, after freeing its millions of
    objects, slows the next inspection in the process by seconds."""
    names = list(peers)
    ours = [inspect(path)]
    theirs: dict[str, list[Walked]] = {name: [] for name in names}
    for _ in range(rounds if names else 0):
        theirs[names[0]].append(inspect(path, peers[names[0]]))
        ours.append(inspect(path))
    for name in names[1:]:
        theirs[name].append(inspect(path, peers[name]))
    return _mean(ours), {name: _mean(runs) for name, runs in theirs.items()}


def _mean(runs: list[Walked]) -> Walked:
    first = runs[0]
    return Walked(first.packets, first.flows, first.frames, first.tls_flows,
                  sum(r.seconds for r in runs) / len(runs))


def dpkt_segments(path: Path) -> Iterator[tuple[int, Segment]]:
    """dpkt's parse: `pcap.Reader`, each record through the link type's class to `tcp.data`."""
    import dpkt

    with path.open("rb") as f:
        reader = dpkt.pcap.Reader(f)
        link = {dpkt.pcap.DLT_EN10MB: dpkt.ethernet.Ethernet,
                dpkt.pcap.DLT_LINUX_SLL: dpkt.sll.SLL}.get(reader.datalink(), dpkt.ip.IP)
        ntoa = socket.inet_ntoa
        for number, (ts, buf) in enumerate(reader, 1):
            ip = link(buf)
            if not isinstance(ip, dpkt.ip.IP):
                ip = ip.data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            yield number, Segment(ts, ntoa(ip.src), tcp.sport, ntoa(ip.dst), tcp.dport, tcp.seq,
                                  tcp.ack, tcp.flags & _FLAGS, bytes(tcp.data))


def scapy_segments(path: Path) -> Iterator[tuple[int, Segment]]:
    """scapy's parse: `rdpcap` (every packet dissected), then each one's `IP` and `TCP` layers and
    the payload's bytes (trimmed to the IP length: scapy keeps Ethernet padding after it)."""
    import scapy.layers.l2  # noqa: F401  (registers Ethernet and SLL for rdpcap)
    from scapy.layers.inet import IP, TCP
    from scapy.utils import rdpcap

    for number, pkt in enumerate(rdpcap(str(path)), 1):
        ip = pkt.getlayer(IP)
        if ip is None or (tcp := ip.getlayer(TCP)) is None:
            continue
        data = bytes(tcp.payload)[: max(0, ip.len - ip.ihl * 4 - tcp.dataofs * 4)]
        yield number, Segment(float(pkt.time), ip.src, tcp.sport, ip.dst, tcp.dport, tcp.seq,
                              tcp.ack, int(tcp.flags) & _FLAGS, data)


# The in-process peers: name, their parse, the goal (times faultlab's rate), and what they do.
PEERS: tuple[tuple[str, Numbered, float, str], ...] = (
    ("dpkt", dpkt_segments, 2.0, "pcap.Reader + ethernet.Ethernet"),
    ("scapy", scapy_segments, 5.0, "rdpcap, then the IP and TCP layers"))


def decode_rate(numbered: Numbered, path: Path) -> tuple[int, float]:
    """Packets a parser turns into TCP segments, and the seconds it takes (nothing else done)."""
    started = time.perf_counter()
    n = sum(1 for _ in numbered(path))
    return n, time.perf_counter() - started


@dataclass
class TsharkRun:
    """tshark's packets (all it read) and WebSocket frames, and its wall time as a process."""

    packets: int
    frames: int
    seconds: float


def tshark_frames(tshark: str, pcap: Path, *, keylog: Path | None = None,
                  http_port: int | None = None) -> TsharkRun:
    """`tshark -r PCAP` listing every packet, and in it every WebSocket frame's opcode, length and
    text (what a user needs to tell the messages apart, as faultlab names their kinds), with TCP
    (and, with a key log, TLS) reassembly on as faultlab sets it, from an empty configuration
    folder; `http_port` decodes a plain ws:// port as HTTP (tshark only guesses HTTP on its usual
    ports)."""
    with tempfile.TemporaryDirectory(prefix="faultlab-bench-tshark-") as config:
        argv = [tshark, "-r", str(pcap), "-n"]
        for pref in PREFERENCES:
            argv += ["-o", pref]
        if keylog is not None:
            argv += ["-o", f"tls.keylog_file:{keylog}"]
        if http_port is not None:
            argv += ["-d", f"tcp.port=={http_port},http"]
        argv += ["-T", "fields", "-e", "frame.number", "-e", "websocket.opcode",
                 "-e", "websocket.payload_length", "-e", "websocket.payload.text"]
        env = {**os.environ, "WIRESHARK_CONFIG_DIR": config}
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, env=env, check=False)
        seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"tshark exited {done.returncode}: "
                           f"{done.stderr.decode(errors='replace').strip()[:200]}")
    packets = frames = 0
    for line in done.stdout.split(b"\n"):
        number, _, rest = line.partition(b"\t")
        if not number.isdigit():  # a line break inside a message's text
            continue
        packets += 1
        opcodes = rest.partition(b"\t")[0]
        frames += len(opcodes.split(b",")) if opcodes else 0
    return TsharkRun(packets, frames, seconds)


def faultlab_command(*args: str) -> tuple[float, dict[str, Any]]:
    """Seconds that `faultlab ARGS --json` took as a process of its own, as a user runs it, and
    its output."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "faultlab", *args, "--json"], check=True,
                          capture_output=True, text=True)
    return time.perf_counter() - started, json.loads(done.stdout)
