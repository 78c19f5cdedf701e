"""The kernel's nfnetlink_queue protocol over a raw netlink socket: bind queues, read queued
packets, give verdicts.

Numbers from include/uapi/linux/netfilter/nfnetlink_queue.h and nfnetlink.h. Attribute values
are big-endian; netlink headers are host-endian. Several verdicts go in one `send` (the kernel
walks every message of a datagram), and a batch verdict settles every queued packet up to an id.
"""

from __future__ import annotations

import errno
import socket
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

NETLINK_NETFILTER = 12
SOL_NETLINK = 270
NETLINK_NO_ENOBUFS = 5
SO_RCVBUFFORCE = 33
NFNL_SUBSYS_QUEUE = 3
MSG_PACKET, MSG_VERDICT, MSG_CONFIG, MSG_VERDICT_BATCH = 0, 1, 2, 3
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR = 2
CFG_CMD, CFG_PARAMS, CFG_QUEUE_MAXLEN, CFG_MASK, CFG_FLAGS = 1, 2, 3, 4, 5
CMD_BIND, CMD_UNBIND = 1, 2
COPY_META, COPY_PACKET = 1, 2
# Without F_GSO the kernel segments a GSO packet before queueing it and, in copy-packet mode,
# completes a CHECKSUM_PARTIAL checksum first, so userspace sees wire packets with valid sums.
F_GSO = 0x4
ATTR_PACKET_HDR, ATTR_VERDICT_HDR, ATTR_PAYLOAD = 1, 2, 10
NF_DROP, NF_ACCEPT = 0, 1
NLA_TYPE_MASK = 0x3FFF
# 2 ** 16 packets may wait in each queue (the kernel's default is 1024: 50 ms of 20k pkt/s).
QUEUE_MAXLEN = 65536
# Enough socket buffer for a burst of full-size packets while the consumer is busy.
RCVBUF_BYTES = 16 << 20

_NLMSGHDR = struct.Struct("=IHHII")
_NFGENMSG = struct.Struct(">BBH")
_NLA = struct.Struct("=HH")
_PACKET_HDR = struct.Struct(">IHB")
_VERDICT_HDR = struct.Struct(">II")
_HEADERS = _NLMSGHDR.size + _NFGENMSG.size


@dataclass(frozen=True, slots=True)
class QueuedPacket:
    """A packet the kernel holds for a verdict: its queue, its id there, and (in copy-packet
    mode) its bytes from the IP header on."""

    queue: int
    packet_id: int
    payload: bytes | None


def attribute(kind: int, value: bytes) -> bytes:
    """One netlink attribute, padded to 4 bytes."""
    size = _NLA.size + len(value)
    return _NLA.pack(size, kind) + value + b"\0" * (-size % 4)


def message(kind: int, queue: int, attrs: bytes, flags: int = 0, seq: int = 0) -> bytes:
    """One nfnetlink_queue message to the kernel."""
    size = _HEADERS + len(attrs)
    return (_NLMSGHDR.pack(size, NFNL_SUBSYS_QUEUE << 8 | kind, NLM_F_REQUEST | flags, seq, 0)
            + _NFGENMSG.pack(socket.AF_UNSPEC, 0, queue) + attrs)


def bind_message(queue: int, copy_payload: bool, whole_gso: bool, seq: int) -> bytes:
    """Bind `queue` to this socket, copying each packet's bytes (or only its metadata), with
    room for QUEUE_MAXLEN packets; the kernel acknowledges it."""
    params = struct.pack(">IB", 0xFFFF, COPY_PACKET) if copy_payload else struct.pack(
        ">IB", 0, COPY_META)
    flags = F_GSO if whole_gso else 0
    attrs = (attribute(CFG_CMD, struct.pack(">BBH", CMD_BIND, 0, socket.AF_INET))
             + attribute(CFG_PARAMS, params)
             + attribute(CFG_QUEUE_MAXLEN, struct.pack(">I", QUEUE_MAXLEN))
             + attribute(CFG_FLAGS, struct.pack(">I", flags))
             + attribute(CFG_MASK, struct.pack(">I", F_GSO)))
    return message(MSG_CONFIG, queue, attrs, NLM_F_ACK, seq)


def verdict_message(queue: int, packet_id: int, accept: bool, payload: bytes | None = None,
                    through: bool = False) -> bytes:
    """A verdict on one packet (with its bytes replaced by `payload`), or with `through` on every
    packet of the queue up to `packet_id`."""
    attrs = attribute(ATTR_VERDICT_HDR,
                      _VERDICT_HDR.pack(NF_ACCEPT if accept else NF_DROP, packet_id))
    if payload is not None:
        attrs += attribute(ATTR_PAYLOAD, payload)
    return message(MSG_VERDICT_BATCH if through else MSG_VERDICT, queue, attrs)


def parse(data: bytes | memoryview) -> Iterator[QueuedPacket | int]:
    """The packets in one datagram from the kernel, and the error code of each acknowledgement
    (0 for success, else a positive errno)."""
    view = memoryview(data)
    offset = 0
    while offset + _NLMSGHDR.size <= len(view):
        size, kind, _flags, _seq, _pid = _NLMSGHDR.unpack_from(view, offset)
        if size < _NLMSGHDR.size:
            return
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", view, offset + _NLMSGHDR.size)
            yield -code
        elif kind == NFNL_SUBSYS_QUEUE << 8 | MSG_PACKET:
            yield _packet(view, offset, size)
        offset += (size + 3) & ~3


def _packet(view: memoryview, offset: int, size: int) -> QueuedPacket:
    _family, _version, queue = _NFGENMSG.unpack_from(view, offset + _NLMSGHDR.size)
    at, end = offset + _HEADERS, offset + size
    packet_id, payload = -1, None
    while at + _NLA.size <= end:
        length, kind = _NLA.unpack_from(view, at)
        if length < _NLA.size:
            break
        kind &= NLA_TYPE_MASK
        if kind == ATTR_PACKET_HDR:
            packet_id = _PACKET_HDR.unpack_from(view, at + _NLA.size)[0]
        elif kind == ATTR_PAYLOAD:
            payload = bytes(view[at + _NLA.size:at + length])
        at += (length + 3) & ~3
    return QueuedPacket(queue, packet_id, payload)


class QueueSocket:
    """A netlink socket bound to one nfnetlink queue per lane, reading without blocking."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.bind((0, 0))
        self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
        # An overrun drops packets (the kernel's verdict for them) instead of failing recv.
        self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        self._buffer = bytearray(1 << 17)
        self._seq = 0
        self.queues: list[int] = []

    def fileno(self) -> int:
        return self.sock.fileno()

    def bind_free(self, first: int, count: int, copy_payload: bool, whole_gso: bool,
                  tries: int = 256) -> list[int]:
        """Bind `count` free queues numbered from `first` up (a queue another socket holds
        answers EPERM, measured on 6.x, or EBUSY, and is skipped); returns their numbers."""
        number = first
        while len(self.queues) < count:
            if number >= first + tries:
                raise OSError(errno.EBUSY, f"no NFQUEUE number in {first}-{number - 1} could "
                              "be bound (taken, or no CAP_NET_ADMIN)")
            self._seq += 1
            self.sock.send(bind_message(number, copy_payload, whole_gso, self._seq))
            code = self._ack()
            if code == 0:
                self.queues.append(number)
            elif code not in (errno.EPERM, errno.EBUSY):
                raise OSError(code, f"cannot bind NFQUEUE {number}: {errno.errorcode.get(code)}")
            number += 1
        return list(self.queues)

    def _ack(self) -> int:
        while True:
            for item in parse(self.sock.recv(65536)):
                if isinstance(item, int):
                    return item

    def receive(self, limit: int = 512) -> list[QueuedPacket]:
        """The packets waiting on the socket, up to `limit` (one datagram per packet)."""
        out: list[QueuedPacket] = []
        buffer, recv_into = self._buffer, self.sock.recv_into
        while len(out) < limit:
            try:
                n = recv_into(buffer, len(buffer), socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            out.extend(item for item in parse(memoryview(buffer)[:n])
                       if isinstance(item, QueuedPacket))
        return out

    def send(self, messages: Sequence[bytes]) -> None:
        """Send verdicts, as many per datagram as fit."""
        chunk: list[bytes] = []
        size = 0
        for m in messages:
            if size + len(m) > 1 << 16 and chunk:
                self.sock.send(b"".join(chunk))
                chunk, size = [], 0
            chunk.append(m)
            size += len(m)
        if chunk:
            self.sock.send(b"".join(chunk))

    def close(self) -> None:
        for queue in self.queues:
            attrs = attribute(CFG_CMD, struct.pack(">BBH", CMD_UNBIND, 0, socket.AF_INET))
            try:
                self.sock.send(message(MSG_CONFIG, queue, attrs))
            except OSError:
                break
        self.sock.close()
