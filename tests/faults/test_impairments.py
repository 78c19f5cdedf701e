"""The packet impairments (path, latency, loss, rate, duplicate, reorder, corrupt): their
parameters, which mechanism each uses, and what they install at the router without a queue."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

import pytest

from faultlab.faults.impairment import Impairment
from faultlab.impair import nfqueue
from faultlab.impair.engine import Plan, add_tbf, remove_tbf
from faultlab.lab.netfilter import commit

from .conftest import FakeContext, apply_and_revert, build, params_of, refusal, with_connections

SINGLE = {"latency": "latency_ms", "loss": "loss_percent", "rate": "rate_kbps",
          "duplicate": "duplicate_percent", "reorder": "reorder_percent",
          "corrupt": "corrupt_percent"}


def plan(name: str, params: dict[str, Any]) -> Plan:
    fault = build(name, params)
    assert isinstance(fault, Impairment)
    return fault.plan


@pytest.mark.parametrize(("name", "field"), SINGLE.items())
def test_each_single_fault_needs_its_own_field(name: str, field: str) -> None:
    """`loss` without `loss_percent` (and so on) is refused, naming the field."""
    with pytest.raises(ValueError, match=f"{field} must be given"):
        params_of(name, {})


@pytest.mark.parametrize(("name", "params", "field"), [
    ("loss", {"loss_percent": 101}, "loss_percent"),
    ("duplicate", {"duplicate_percent": -1}, "duplicate_percent"),
    ("latency", {"latency_ms": 10, "rate_kbps": 5}, "rate_kbps"),
    ("rate", {"rate_kbps": 0}, "rate_kbps"),
    ("reorder", {"reorder_percent": 5, "reorder_gap": 0}, "reorder_gap"),
    ("path", {"distribution": "pareto", "latency_ms": 5}, "distribution"),
])
def test_values_out_of_range_or_of_another_fault_are_refused_by_name(
        name: str, params: dict[str, Any], field: str) -> None:
    """A percentage outside 0-100, a zero rate, a field of another impairment: refused by name."""
    assert field in refusal(name, params)


@pytest.mark.parametrize(("params", "message"), [
    ({"latency_ms": 10, "jitter_ms": 20}, "jitter_ms must not exceed latency_ms"),
    ({"loss_burst_packets": 3}, "loss_burst_packets needs loss_percent"),
    ({"loss_percent": 80, "loss_burst_packets": 3}, "cannot come in runs of 3 packets: at most 75"),
    ({"queue_ms": 50, "latency_ms": 1}, "queue_ms needs rate_kbps"),
    ({"rate_kbps": 64, "connection": "first"}, "rate shapes a whole link"),
    ({"direction": "to_server"}, "path needs at least one impairment"),
])
def test_inconsistent_combinations_are_refused_with_the_reason(params: dict[str, Any],
                                                              message: str) -> None:
    """Jitter beyond the latency, a burst without loss, a queue without a rate, a per-connection
    rate, an empty path: each refused with a sentence saying why."""
    with pytest.raises(ValueError, match=message):
        params_of("path", params)


def test_a_single_fault_is_the_path_with_only_its_fields() -> None:
    """`latency` reads as a `path` with the fields the step gave (others stay unset)."""
    fault = build("latency", {"latency_ms": 30, "jitter_ms": 5, "direction": "to_client"})
    assert isinstance(fault, Impairment)
    path = fault.path
    assert path.model_fields_set == {"latency_ms", "jitter_ms", "direction"}
    assert (path.latency_ms, path.jitter_ms, path.direction) == (30, 5, "to_client")


@pytest.mark.parametrize(("name", "params", "mechanisms"), [
    ("loss", {"loss_percent": 2}, ["statistic"]),
    ("loss", {"loss_percent": 2, "loss_burst_packets": 4}, ["nfqueue"]),
    ("latency", {"latency_ms": 0}, ["nfqueue"]),
    ("rate", {"rate_kbps": 384}, ["tbf"]),
    ("duplicate", {"duplicate_percent": 1}, ["nfqueue"]),
    ("path", {"rate_kbps": 384, "loss_percent": 2, "latency_ms": 80, "jitter_ms": 30},
     ["tbf", "statistic", "nfqueue"]),
    ("path", {"rate_kbps": 384, "loss_percent": 2}, ["tbf", "statistic"]),
])
def test_each_impairment_uses_the_cheapest_mechanism_that_does_it(
        name: str, params: dict[str, Any], mechanisms: list[str]) -> None:
    """Independent loss is a kernel rule and rate a qdisc; only what needs per-packet timing or
    bytes starts the userspace queue (latency even at 0 ms: the bench's overhead probe)."""
    assert plan(name, params).mechanisms() == mechanisms


def test_rate_sizes_the_queue_from_queue_ms() -> None:
    """384 kbps with 250 ms of queue: 48,000 bytes/s and a 12,000-byte queue; the bucket holds
    at least two full frames."""
    p = plan("rate", {"rate_kbps": 384, "queue_ms": 250})
    assert (p.rate_bytes_s, p.queue_bytes, p.burst_bytes) == (48_000, 12_000, 3028)


def test_plain_loss_is_a_statistic_rule_per_direction_reverted_with_its_chain() -> None:
    """loss 2 % both ways: one chain of two `statistic` DROP rules (in from, out to the client
    link), jumped to from FORWARD; revert removes it."""
    ctx = FakeContext()
    details = apply_and_revert(build("loss", {"loss_percent": 2}, step="lossy"), ctx)
    assert details["mechanisms"] == ["statistic"] and details["loss_percent"] == 2
    stat = "-m statistic --mode random --probability 0.020000 -j DROP"
    assert ctx.lab.ns("router").batches == [
        [":FL-lossy - [0:0]", f"-A FL-lossy -i c0 {stat}", f"-A FL-lossy -o c0 {stat}",
         "-I FORWARD 1 -j FL-lossy"],
        ["-D FORWARD -j FL-lossy", "-F FL-lossy", "-X FL-lossy"],
    ]


@pytest.mark.parametrize(("direction", "links"), [
    ("to_server", ["s0"]), ("to_client", ["c0"]), ("both", ["s0", "c0"]),
])
def test_rate_shapes_the_link_each_hurt_direction_leaves_by(direction: str,
                                                            links: list[str]) -> None:
    """to_server packets leave by the target link, to_client ones by the client link: tbf goes
    there, and revert removes it from exactly those links."""
    ctx = FakeContext()
    apply_and_revert(build("rate", {"rate_kbps": 1000, "direction": direction}), ctx)
    calls = ctx.lab.ns("router").calls
    assert [(fn, args[0]) for fn, args in calls] == [(add_tbf, links), (remove_tbf, links)]
    assert all(fn is not commit for fn, _ in calls)


def nlmsg(data: bytes) -> tuple[int, int, int, int, int]:
    return struct.unpack_from("=IHHII", data)


def test_bind_message_is_a_config_with_copy_mode_and_queue_length() -> None:
    """Binding is one acknowledged NFQNL_MSG_CONFIG for the queue: the BIND command, copy-packet
    mode for a queue that edits bytes (meta-only otherwise), QUEUE_MAXLEN and the GSO flag."""
    data = nfqueue.bind_message(1001, copy_payload=True, whole_gso=False, seq=5)
    size, kind, flags, seq, _ = nlmsg(data)
    assert (size, kind, flags, seq) == (len(data), 3 << 8 | 2, 0x1 | 0x4, 5)
    assert struct.unpack_from(">BBH", data, 16) == (socket.AF_UNSPEC, 0, 1001)
    attrs = dict(attributes(data[20:]))
    assert attrs[nfqueue.CFG_CMD] == struct.pack(">BBH", nfqueue.CMD_BIND, 0, socket.AF_INET)
    assert attrs[nfqueue.CFG_PARAMS] == struct.pack(">IB", 0xFFFF, nfqueue.COPY_PACKET)
    assert attrs[nfqueue.CFG_QUEUE_MAXLEN] == struct.pack(">I", nfqueue.QUEUE_MAXLEN)
    assert attrs[nfqueue.CFG_FLAGS] == struct.pack(">I", 0)
    meta = dict(attributes(nfqueue.bind_message(7, False, True, 1)[20:]))
    assert meta[nfqueue.CFG_PARAMS][4] == nfqueue.COPY_META
    assert meta[nfqueue.CFG_FLAGS] == struct.pack(">I", nfqueue.F_GSO)


def attributes(data: bytes) -> list[tuple[int, bytes]]:
    out, at = [], 0
    while at < len(data):
        length, kind = struct.unpack_from("=HH", data, at)
        out.append((kind, data[at + 4:at + length]))
        at += (length + 3) & ~3
    return out


def test_verdicts_single_batch_and_with_new_bytes() -> None:
    """A verdict names its packet id (big-endian); a batch verdict is NFQNL_MSG_VERDICT_BATCH;
    changed bytes ride in NFQA_PAYLOAD."""
    single = nfqueue.verdict_message(1000, 42, accept=False)
    assert nlmsg(single)[1] == 3 << 8 | 1
    assert attributes(single[20:]) == [(2, struct.pack(">II", 0, 42))]
    batch = nfqueue.verdict_message(1000, 42, accept=True, through=True)
    assert nlmsg(batch)[1] == 3 << 8 | 3
    changed = nfqueue.verdict_message(1000, 43, True, payload=b"abcde")
    assert attributes(changed[20:]) == [(2, struct.pack(">II", 1, 43)), (10, b"abcde")]
    assert len(changed) % 4 == 0


def test_parse_reads_each_packet_and_ack_of_a_datagram() -> None:
    """Two queued packets and an error ack in one datagram: queue, id and bytes of each, then
    the ack's errno (EBUSY: the queue is another socket's)."""
    def packet(queue: int, pid: int, payload: bytes) -> bytes:
        attrs = (nfqueue.attribute(1, struct.pack(">IHB", pid, 0x0800, 2))
                 + nfqueue.attribute(10, payload))
        return nfqueue.message(0, queue, attrs)

    error = struct.pack("=IHHII", 36, 2, 0, 0, 0) + struct.pack("=i", -16) + bytes(16)
    items = list(nfqueue.parse(packet(1000, 5, b"\x45xyz") + packet(1001, 6, b"") + error))
    assert items == [nfqueue.QueuedPacket(1000, 5, b"\x45xyz"),
                     nfqueue.QueuedPacket(1001, 6, b""), 16]


def test_a_connection_not_seen_yet_fails_before_anything_is_installed() -> None:
    """A per-connection impairment with no such connection fails before anything is installed,
    and leaves nothing to revert."""
    ctx = FakeContext()
    fault = build("loss", {"loss_percent": 5, "connection": 2})
    with pytest.raises(Exception, match="no TCP connection 2"):
        asyncio.run(fault.apply(ctx))
    assert ctx.lab.ns("router").calls == []


def test_an_apply_that_fails_midway_removes_what_it_installed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rate and loss installed, then the queue's worker fails to start: the loss rules and the
    tbf are removed again, and the direction is free for another step's queue."""
    from faultlab.errors import MechanismError
    from faultlab.faults import impairment

    async def no_worker(*_: object) -> None:
        raise MechanismError("the packet queue did not start: test")

    monkeypatch.setattr(impairment, "start_worker", no_worker)
    ctx = FakeContext()
    fault = build("path", {"rate_kbps": 500, "loss_percent": 1, "latency_ms": 5,
                           "direction": "to_server"}, step="midway")
    with pytest.raises(MechanismError, match="did not start"):
        asyncio.run(fault.apply(ctx))
    calls = ctx.lab.ns("router").calls
    assert [fn for fn, _ in calls] == [add_tbf, commit, commit, remove_tbf]
    assert calls[2][1][0] == ["-D FORWARD -j FL-midway", "-F FL-midway", "-X FL-midway"]
    again = build("latency", {"latency_ms": 5, "direction": "to_server"}, step="again")
    with pytest.raises(MechanismError, match="did not start"):  # not "already queues"
        asyncio.run(again.apply(ctx))


def test_loss_of_one_connection_matches_its_four_tuple() -> None:
    """loss on connection 1 matches that TCP connection's addresses and ports, each way."""
    ctx = with_connections(FakeContext(), 40001)
    apply_and_revert(build("loss", {"loss_percent": 3, "connection": 1}, step="c1"), ctx)
    rules = [line for line in ctx.lab.ns("router").batches[0] if line.startswith("-A")]
    assert rules == [
        "-A FL-c1 -i c0 -p tcp -s 10.0.1.2 --sport 40001 -d 10.0.2.2 --dport 443 "
        "-m statistic --mode random --probability 0.030000 -j DROP",
        "-A FL-c1 -o c0 -p tcp -s 10.0.2.2 --sport 443 -d 10.0.1.2 --dport 40001 "
        "-m statistic --mode random --probability 0.030000 -j DROP",
    ]
