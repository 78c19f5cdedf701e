"""The lab's resolver (faultlab.resolver): its answers read back with scapy's DNS parser, over a
real UDP socket on loopback, each answer kind a `dns` step sets through the control channel, its
revert, forwarding to an upstream, and the events it writes."""

from __future__ import annotations

import asyncio
import json
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.dns import DNS

from faultlab.errors import MechanismError
from faultlab.events import EventWriter
from faultlab.resolver.answers import (
    NOERROR,
    NXDOMAIN,
    REFUSED,
    SERVFAIL,
    Policy,
    build_query,
    parse_query,
)
from faultlab.resolver.control import Reply, ResolverControl, ResolverSpec
from faultlab.resolver.server import serve

ZONE = {"echo.lab": "198.18.0.6", "generativelanguage.googleapis.com": "198.18.0.6"}
TARGET = ["generativelanguage.googleapis.com"]
TYPE_AAAA = 28


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Lab:
    """A resolver serving on loopback, its control channel and its events file."""

    port: int
    control: ResolverControl
    events: Path

    async def ask(self, name: str, qtype: int = 1, wait_s: float = 1.0,
                  qid: int = 0x4242) -> tuple[DNS | None, float]:
        """The answer to one query for `name` as scapy reads it (None: none came in
        `wait_s`), and how long it took."""
        loop = asyncio.get_running_loop()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.setblocking(False)
            s.connect(("127.0.0.1", self.port))
            started = time.monotonic()
            s.send(build_query(name, qtype, qid))
            try:
                data = await asyncio.wait_for(loop.sock_recv(s, 512), wait_s)
            except TimeoutError:
                return None, time.monotonic() - started
            return DNS(data), time.monotonic() - started

    def queries(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in json.loads(line).items() if k not in ("ts", "event")}
                for line in self.events.read_text().splitlines()]


@asynccontextmanager
async def resolver(upstream_port: int | None = None) -> AsyncIterator[Lab]:
    port = free_udp_port()
    # A short directory of its own: a unix socket's path has a small limit.
    with tempfile.TemporaryDirectory(prefix="fl-") as scratch:
        events_path = Path(scratch) / "events.jsonl"
        spec = ResolverSpec(listen="127.0.0.1", port=port, zone=ZONE, target_names=TARGET,
                            upstream=None if upstream_port is None else "127.0.0.1",
                            upstream_port=upstream_port or 53,
                            control=Path(scratch) / "dns.sock")
        events = EventWriter(events_path)
        task = asyncio.create_task(serve(spec, events))
        while not spec.control.exists():
            await asyncio.sleep(0.01)
        try:
            yield Lab(port, ResolverControl(spec.control), events_path)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            events.close()


def run(scenario: Callable[[Lab], Coroutine[Any, Any, None]],
        upstream_port: int | None = None) -> None:
    async def go() -> None:
        async with resolver(upstream_port) as lab:
            await scenario(lab)

    asyncio.run(go())


def test_a_lab_name_gets_its_address_with_no_ttl() -> None:
    """A query for a lab name is answered with its address, its id and question echoed, TTL 0
    (no cache keeps it past a fault); AAAA gets no record (the lab is IPv4); another name is
    refused when there is no upstream."""
    async def scenario(lab: Lab) -> None:
        reply, _ = await lab.ask("Echo.Lab", qid=0x1234)
        assert reply is not None
        assert (reply.id, reply.qr, reply.rcode, reply.ancount) == (0x1234, 1, NOERROR, 1)
        assert reply.qd[0].qname == b"Echo.Lab."
        assert (reply.an[0].rdata, reply.an[0].ttl) == ("198.18.0.6", 0)
        aaaa, _ = await lab.ask("echo.lab", TYPE_AAAA)
        assert aaaa is not None and (aaaa.rcode, aaaa.ancount) == (NOERROR, 0)
        other, _ = await lab.ask("example.com")
        assert other is not None and (other.rcode, other.ancount) == (REFUSED, 0)

    run(scenario)


@pytest.mark.parametrize(("answer", "rcode"), [("nxdomain", NXDOMAIN), ("servfail", SERVFAIL)])
def test_a_step_fails_the_target_s_names_until_cleared(answer: str, rcode: int) -> None:
    """From the order on, the target's names (the default) get NXDOMAIN or SERVFAIL, A and AAAA
    alike, while the profile's other names still resolve; cleared, the address comes back."""
    async def scenario(lab: Lab) -> None:
        hurt = await lab.control.set_answer("s1", None, answer, 0.0)
        assert hurt == TARGET
        for qtype in (1, TYPE_AAAA):
            reply, _ = await lab.ask(TARGET[0], qtype)
            assert reply is not None and (reply.rcode, reply.ancount) == (rcode, 0)
        spared, _ = await lab.ask("echo.lab")
        assert spared is not None and spared.an[0].rdata == "198.18.0.6"
        await lab.control.clear_answer("s1")
        back, _ = await lab.ask(TARGET[0])
        assert back is not None and back.rcode == NOERROR and back.an[0].rdata == "198.18.0.6"
        assert [q["answer"] for q in lab.queries()] == [answer, answer, "address", "address"]
        assert lab.queries()[0] == {"name": TARGET[0], "type": "A", "answer": answer,
                                    "step": "s1"}

    run(scenario)


def test_no_answer_then_a_slow_one() -> None:
    """`none` answers nothing at all; `slow` answers right, `delay` late; the latest step wins
    for a name two steps name, and clearing it uncovers the earlier one."""
    async def scenario(lab: Lab) -> None:
        await lab.control.set_answer("mute", ["echo.lab"], "none", 0.0)
        reply, waited = await lab.ask("echo.lab", wait_s=0.3)
        assert reply is None and waited >= 0.3
        await lab.control.set_answer("late", ["echo.lab"], "slow", 0.25)
        reply, took = await lab.ask("echo.lab")
        assert reply is not None and reply.an[0].rdata == "198.18.0.6"
        assert took >= 0.25  # never before its delay; how late a loaded machine makes it is not judged
        await lab.control.clear_answer("late")
        reply, _ = await lab.ask("echo.lab", wait_s=0.3)
        assert reply is None
        assert lab.queries()[1] == {"name": "echo.lab", "type": "A", "answer": "slow",
                                    "step": "late", "delay_ms": 250.0}

    run(scenario)


class Upstream(asyncio.DatagramProtocol):
    """A real name server's stand-in: answers every query NOERROR with 203.0.113.9."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.DatagramTransport)
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        from faultlab.resolver.answers import build_answer

        query = parse_query(data)
        assert query is not None and self.transport is not None
        self.asked.append(query.name)
        self.transport.sendto(build_answer(query, NOERROR, "203.0.113.9"), addr)


def test_other_names_go_to_the_upstream_unless_a_step_names_them() -> None:
    """With an upstream, a name outside the lab is asked of it and its answer relayed (the
    client's id kept); a step naming such a name (a remote target's) answers it itself."""
    port = free_udp_port()
    upstream = Upstream()

    async def scenario(lab: Lab) -> None:
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            lambda: upstream, local_addr=("127.0.0.1", port))
        try:
            reply, _ = await lab.ask("api.example.com", qid=0x0BAD)
            assert reply is not None and reply.id == 0x0BAD and reply.an[0].rdata == "203.0.113.9"
            await lab.control.set_answer("s1", ["api.example.com"], "servfail", 0.0)
            reply, _ = await lab.ask("api.example.com")
            assert reply is not None and reply.rcode == SERVFAIL
            assert upstream.asked == ["api.example.com"]
            assert [q["answer"] for q in lab.queries()] == ["forwarded", "servfail"]
        finally:
            transport.close()

    run(scenario, upstream_port=port)


def test_garbage_is_ignored_and_a_bad_order_refused() -> None:
    """A datagram that is no query gets no answer and the resolver keeps answering; an order it
    cannot read is refused saying why; a resolver that is gone fails the step."""
    async def scenario(lab: Lab) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"\x00\x01garbage", ("127.0.0.1", lab.port))
        reply, _ = await lab.ask("echo.lab")
        assert reply is not None and reply.rcode == NOERROR
        reader, writer = await asyncio.open_unix_connection(str(lab.control.path))
        writer.write(b'{"op": "set", "step": "s1", "answer": "maybe"}\n')
        reply = Reply.model_validate_json(await reader.readline())
        writer.close()
        assert not reply.ok and reply.error is not None and "'nxdomain'" in reply.error
        gone = ResolverControl(lab.control.path.with_name("gone.sock"))
        with pytest.raises(MechanismError, match="the lab's resolver did not take clear"):
            await gone.clear_answer("s1")

    run(scenario)


def test_policy_refuses_what_is_not_a_plain_query() -> None:
    """Without sockets: a response, no question or a truncated name is not read as a query;
    another opcode than QUERY is answered NOTIMP."""
    query = build_query("echo.lab")
    assert parse_query(query) is not None
    response = query[:2] + bytes([0x80 | query[2]]) + query[3:]
    assert parse_query(response) is None
    assert parse_query(query[:12]) is None
    assert parse_query(query[:16]) is None
    status = query[:2] + bytes([query[2] | (2 << 3)]) + query[3:]
    parsed = parse_query(status)
    assert parsed is not None
    decision = Policy(ZONE, frozenset(TARGET)).decide(parsed)
    assert decision.answer == "notimp" and decision.reply is not None
    assert DNS(decision.reply).rcode == 4
