"""The proxy's control channel: typed requests, checked at both ends."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from faultlab.errors import MechanismError
from faultlab.events import EventWriter
from faultlab.proxy.control import ProxyControl, Revert
from faultlab.proxy.state import ProxyState


def state(tmp_path: Path, numbered: bool = True) -> ProxyState:
    return ProxyState(server=None, events=EventWriter(tmp_path / "events.jsonl"),  # type: ignore[arg-type]
                      numbered=numbered)


@pytest.mark.parametrize(("line", "why"), [
    (b"not json\n", "bad request"),
    (b'{"id": 1, "body": {"op": "explode"}}\n', "bad request"),
    (b'{"id": 1, "body": {"op": "revert", "steps": "all"}}\n', "bad request"),
    (b'{"id": 1, "body": {"op": "number", "k": 0, "client_port": 40000}}\n', "bad request"),
    (b'{"id": 1, "body": {"op": "apply", "order": {"step": "s", "fault": "nosuch"}}}\n',
     "unknown fault 'nosuch'"),
    (b'{"id": 1, "body": {"op": "apply", "order": {"step": "s", "fault": "drop"}}}\n',
     "drop is not a fault the proxy applies"),
    (b'{"id": 1, "body": {"op": "apply", "order": {"step": "s", "fault": "freeze", '
     b'"params": {"mode": "melt"}}}}\n', "mode"),
    (b'{"id": 1, "body": {"op": "apply", "order": {"step": "s", "fault": "freeze", '
     b'"params": {"connection": "latest"}}}}\n', "no live WebSocket on connection 'latest'"),
    (b'{"id": 1, "body": {"op": "arm", "steps": [{"step": "s", "fault": "close", '
     b'"params": {"code": 1006}, "match": {"kind": "toolCall"}}]}}\n', "cannot be sent"),
])
def test_the_proxy_refuses_what_it_cannot_do(tmp_path: Path, line: bytes, why: str) -> None:
    """A malformed request, an unknown or non-proxy fault, bad parameters, or a connection with
    no WebSocket is refused with the reason, and nothing is engaged or armed."""
    s = state(tmp_path)
    reply = s.answer(line)
    assert not reply.ok and why in (reply.error or "")
    assert s.active == {} and s.armed == []


def test_numbers_come_from_the_run(tmp_path: Path) -> None:
    """`number` records the run's number of a client connection by its port."""
    s = state(tmp_path)
    reply = s.answer(b'{"id": 4, "body": {"op": "number", "k": 3, "client_port": 40001}}\n')
    assert reply.ok and reply.id == 4 and s.numbers == {40001: 3}


def test_a_websocket_opened_before_its_number_waits_for_it(tmp_path: Path) -> None:
    """A connection the run numbers after its WebSocket opened (the capture's SYN came late)
    gets its number as it is told; one never told gets 0 once the wait is over."""
    s = state(tmp_path)
    late = SimpleNamespace(client_conn=SimpleNamespace(peername=("10.0.0.2", 40001)))
    never = SimpleNamespace(client_conn=SimpleNamespace(peername=("10.0.0.2", 40002)))

    async def scenario() -> tuple[int, int, int]:
        waiting = asyncio.create_task(s.number_told(late, 5.0))  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        assert not waiting.done()
        s.answer(b'{"id": 1, "body": {"op": "number", "k": 2, "client_port": 40001}}\n')
        told = await asyncio.wait_for(waiting, 1.0)
        again = await s.number_told(late, 0.0)  # type: ignore[arg-type]
        return told, again, await s.number_told(never, 0.01)  # type: ignore[arg-type]

    assert asyncio.run(scenario()) == (2, 2, 0)
    assert s.told == {}


def test_without_a_run_numbering_them_no_websocket_waits(tmp_path: Path) -> None:
    """A proxy whose connections no capture numbers (a bench's) lets each WebSocket go at once."""
    s = state(tmp_path, numbered=False)
    flow = SimpleNamespace(client_conn=SimpleNamespace(peername=("10.0.0.2", 40001)))
    assert asyncio.run(asyncio.wait_for(s.number_told(flow, 5.0), 1.0)) == 0  # type: ignore[arg-type]


def test_the_run_refuses_a_reply_to_another_request(tmp_path: Path) -> None:
    """A reply whose id is not the request's (one left unread by a cancelled call) fails the
    call instead of answering it."""

    async def scenario() -> str:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while line := await reader.readline():
                request = json.loads(line)
                writer.write(json.dumps({"id": request["id"] + 1, "ok": True}).encode() + b"\n")
                await writer.drain()

        path = tmp_path / "c.sock"
        server = await asyncio.start_unix_server(answer, str(path))
        control = ProxyControl(path)
        await control.connect(1.0)
        try:
            await control.call(Revert(steps=None))
        except MechanismError as exc:
            return str(exc)
        finally:
            await control.close()
            server.close()
        return "answered"

    assert asyncio.run(scenario()) == "the proxy answered request 2, not 1"
