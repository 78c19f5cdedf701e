"""pcap records and TCP segments, decoded by hand with `struct`.

A hand decoder reads several hundred thousand packets a second (dpkt with full decoding manages
~55k/s, scapy ~8k/s); faultlab only needs Ethernet/IPv4/TCP and the timestamps.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}


class PcapFormatError(ValueError):
    """The bytes are not a pcap capture faultlab can read."""


# Not frozen: a frozen dataclass sets each field through object.__setattr__, and a Segment took
# 2.2 us to make against 0.4 us (Python 3.13), a tenth of the flow walk's time a packet. Nothing
# changes a segment once made.
@dataclass(slots=True)
class Segment:
    """One TCP segment: time (unix seconds), endpoints, sequence numbers, flags, payload."""

    ts: float
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes


class PcapStream:
    """Incremental pcap reader: feed bytes as they arrive, get whole records back."""

    def __init__(self) -> None:
        self._rest = b""
        self._rec: struct.Struct | None = None
        self._tick = 1e-6
        self.linktype = -1

    def feed(self, data: bytes) -> list[tuple[float, bytes]]:
        """Records (unix time, packet bytes) completed by `data`."""
        # The records are sliced from one bytes object, each packet copied once (slicing a
        # bytearray, then making it bytes, copied it twice), and returned as a list rather than
        # yielded: the 100,000 records of the benchmark's capture in 0.08 s where it took 0.15.
        buf = self._rest + data if self._rest else bytes(data)
        if self._rec is None:
            if len(buf) < 24:
                self._rest = buf
                return []
            magic = buf[:4]
            if magic not in _MAGICS:
                raise PcapFormatError("not a pcap file (pcapng is not supported)")
            order, self._tick = _MAGICS[magic]
            self.linktype = struct.unpack_from(order + "I", buf, 20)[0] & 0x0FFFFFFF
            self._rec = struct.Struct(order + "IIII")
            buf = buf[24:]
        unpack, tick = self._rec.unpack_from, self._tick
        records: list[tuple[float, bytes]] = []
        append = records.append
        pos, end = 0, len(buf)
        while end - pos >= 16:
            sec, frac, caplen, _ = unpack(buf, pos)
            start = pos + 16
            pos = start + caplen
            if pos > end:
                pos = start - 16
                break
            append((sec + frac * tick, buf[start:pos]))
        self._rest = buf[pos:]
        return records


def decode_tcp(linktype: int, ts: float, pkt: bytes) -> Segment | None:
    """The TCP segment in a packet, or None for anything that is not TCP over IPv4."""
    size = len(pkt)
    if linktype == LINKTYPE_ETHERNET:
        ethertype, off = pkt[12:14], 14
        if ethertype == b"\x81\x00" and size >= 18:  # one VLAN tag
            ethertype, off = pkt[16:18], 18
        if ethertype != b"\x08\x00":
            return None
    elif linktype == LINKTYPE_RAW:
        off = 0
    elif linktype == LINKTYPE_LINUX_SLL:
        if size < 16 or pkt[14:16] != b"\x08\x00":
            return None
        off = 16
    else:
        return None
    if size < off + 20:
        return None
    version_ihl, total, protocol, src, dst = _IPV4.unpack_from(pkt, off)
    if version_ihl >> 4 != 4 or protocol != 6:
        return None
    t = off + (version_ihl & 0x0F) * 4
    if size < t + 20:
        return None
    sport, dport, seq, ack, off_flags = _TCP.unpack_from(pkt, t)
    payload_end = min(size, off + total) if total else size
    return Segment(ts, _dotted.get(src) or _dot(src), sport, _dotted.get(dst) or _dot(dst), dport,
                   seq, ack, off_flags & 0x3F, pkt[t + (off_flags >> 12) * 4 : payload_end])


# IPv4's version and header length, total length, protocol and addresses; TCP's ports, sequence
# numbers, data offset and flags. One unpack each: 2.4 us a packet where reading the fields byte
# by byte took 3.9.
_IPV4 = struct.Struct("!BxH5xB2xII")
_TCP = struct.Struct("!HHIIH")

# Addresses in dotted form by their 32-bit value: a capture names a few hosts over and over, and
# a look-up here is cheaper than inet_ntoa (a C printf, and a new string whose hash the walk's
# flow table computes again): 5% of the instructions of a 20,000-packet walk (callgrind).
_dotted: dict[int, str] = {}
_MAX_DOTTED = 65536  # a scan of many hosts must not grow it for ever


def _dot(address: int) -> str:
    if len(_dotted) >= _MAX_DOTTED:
        _dotted.clear()
    name = _dotted[address] = socket.inet_ntoa(address.to_bytes(4))
    return name


def read_segments(path: Path, chunk_bytes: int = 1 << 20) -> Iterator[Segment]:
    """Every TCP segment in a pcap file, in capture order."""
    for _, seg in numbered_segments(path, chunk_bytes):
        yield seg


def numbered_segments(path: Path, chunk_bytes: int = 1 << 20) -> Iterator[tuple[int, Segment]]:
    """Every TCP segment in a pcap file with its record's number (from 1, counting every record,
    as Wireshark numbers frames)."""
    stream = PcapStream()
    number = 0
    with path.open("rb") as f:
        while chunk := f.read(chunk_bytes):
            for ts, pkt in stream.feed(chunk):
                number += 1
                seg = decode_tcp(stream.linktype, ts, pkt)
                if seg is not None:
                    yield number, seg
    if stream.linktype == -1:
        raise PcapFormatError("empty or truncated pcap file")


def write_header(f: BinaryIO, linktype: int = LINKTYPE_ETHERNET, snaplen: int = 262144) -> None:
    """A microsecond pcap file header (for tests and the benchmark's generated captures)."""
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype))


def write_record(f: BinaryIO, ts: float, pkt: bytes) -> None:
    """One pcap record: the packet at unix time `ts`, captured whole."""
    sec = int(ts)
    f.write(struct.pack("<IIII", sec, round((ts - sec) * 1e6), len(pkt), len(pkt)))
    f.write(pkt)


def build_tcp_packet(
    src: str, sport: int, dst: str, dport: int, seq: int, ack: int, flags: int, payload: bytes = b""
) -> bytes:
    """An Ethernet/IPv4/TCP packet (checksums left zero: readers here do not check them)."""
    tcp = struct.pack("!HHIIHHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      (5 << 12) | flags, 65535, 0, 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0,
                     bytes(int(x) for x in src.split(".")), bytes(int(x) for x in dst.split(".")))
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
    return eth + ip + tcp
