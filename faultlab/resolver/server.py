"""The lab resolver's process, started in the router's namespace for a run with a `dns` step:

    python -m faultlab.resolver SPEC_JSON      (faultlab.resolver.control.ResolverSpec)

It answers UDP queries on the router's address toward the client (the client's resolv.conf
names it) as its `Policy` decides, forwards other names to the upstream (a remote target's:
the uplink's DNS), takes orders on its control socket, writes a `dns.query` event per query to
FAULTLAB_EVENTS, and exits on SIGTERM. It listens before its control socket appears, so the run
takes the socket for readiness.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import Any

from pydantic import ValidationError

from faultlab.events import EventWriter
from faultlab.resolver.answers import Decision, Policy, Query, parse_query
from faultlab.resolver.control import ORDER, Reply, ResolverSpec, SetAnswer
from faultlab.vocabulary.lab import DnsQuery

# How long a forwarded query waits for the upstream; a stub resolver has given up long before.
FORWARD_TIMEOUT_S = 5.0
QTYPES = {1: "A", 28: "AAAA", 5: "CNAME", 12: "PTR", 15: "MX", 16: "TXT", 33: "SRV", 65: "HTTPS"}


class Upstream(asyncio.DatagramProtocol):
    """One forwarded query's socket: the first datagram back is its answer."""

    def __init__(self, answer: asyncio.Future[bytes]) -> None:
        self.answer = answer

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        if not self.answer.done():
            self.answer.set_result(data)


class LabResolver(asyncio.DatagramProtocol):
    """Answers each query as the policy decides, late or not at all when a rule says so."""

    def __init__(self, policy: Policy, upstream: tuple[str, int] | None,
                 events: EventWriter) -> None:
        self.policy = policy
        self.upstream = upstream
        self.events = events
        self.transport: asyncio.DatagramTransport | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.DatagramTransport)
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        query = parse_query(data)
        if query is None:
            return
        decision = self.policy.decide(query)
        self._record(query, decision)
        if decision.forward or (decision.reply is not None and decision.delay_s > 0):
            task = asyncio.create_task(self._later(data, addr, decision))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif decision.reply is not None:
            self._send(decision.reply, addr)

    async def _later(self, data: bytes, addr: tuple[str | Any, int], decision: Decision) -> None:
        await asyncio.sleep(decision.delay_s)
        reply = await self._ask_upstream(data) if decision.forward else decision.reply
        if reply is not None:
            self._send(reply, addr)

    async def _ask_upstream(self, data: bytes) -> bytes | None:
        """The upstream's answer to the query as it came (its id is the client's), or None when
        it does not answer in time (the client's resolver then times out, as it would)."""
        assert self.upstream is not None
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[bytes] = loop.create_future()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: Upstream(answer), remote_addr=self.upstream)
        try:
            transport.sendto(data)
            return await asyncio.wait_for(answer, FORWARD_TIMEOUT_S)
        except TimeoutError:
            return None
        finally:
            transport.close()

    def _send(self, reply: bytes, addr: tuple[str | Any, int]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.sendto(reply, addr)

    def _record(self, query: Query, decision: Decision) -> None:
        self.events.announce(DnsQuery(
            query.name, QTYPES.get(query.qtype, str(query.qtype)), decision.answer, decision.step,
            round(decision.delay_s * 1000, 1) if decision.delay_s else None))

    def obey(self, line: bytes) -> Reply:
        """One order from the control socket, and its reply."""
        try:
            order = ORDER.validate_json(line)
        except ValidationError as exc:
            return Reply(ok=False, error=str(exc.errors()[0]["msg"]))
        if isinstance(order, SetAnswer):
            names = self.policy.set_rule(order.step, order.names, order.answer, order.delay_s)
            return Reply(names=names)
        self.policy.clear_rule(order.step)
        return Reply()

    async def control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                writer.write(self.obey(line).model_dump_json().encode() + b"\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.transport is not None:
            self.transport.close()


async def serve(spec: ResolverSpec, events: EventWriter) -> None:
    """Answer until SIGTERM."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    policy = Policy(spec.zone, frozenset(spec.target_names), upstream=spec.upstream is not None)
    upstream = None if spec.upstream is None else (spec.upstream, spec.upstream_port)
    resolver = LabResolver(policy, upstream, events)
    await loop.create_datagram_endpoint(lambda: resolver, local_addr=(spec.listen, spec.port))
    control = await asyncio.start_unix_server(resolver.control, str(spec.control))
    try:
        await stop.wait()
    finally:
        control.close()
        await resolver.close()
        with contextlib.suppress(OSError):
            spec.control.unlink()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m faultlab.resolver SPEC_JSON", file=sys.stderr)
        return 2
    spec = ResolverSpec.model_validate_json(argv[0])
    events = EventWriter()
    try:
        asyncio.run(serve(spec, events))
    except OSError as exc:
        print(f"the lab's resolver cannot listen on {spec.listen}:{spec.port}: {exc}",
              file=sys.stderr)
        return 1
    finally:
        events.close()
    return 0
