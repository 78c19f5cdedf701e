"""The vocabulary as a registry, one JSON Schema and a check of run folders; the JavaScript
clients' constants generated from it."""

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner

from faultlab.cli import cli
from faultlab.events import Event, EventWriter
from faultlab.report.sequence import PALETTE, build_view
from faultlab.vocabulary import Drawing, Record, record_of, register, vocabulary
from faultlab.vocabulary.audio import UplinkStart
from faultlab.vocabulary.js import EVENTS_MJS, REGENERATE, render
from faultlab.vocabulary.lab import DnsQuery, ProxyRewrote, ProxyWsEnd, ProxyWsStart, ResolverReady
from faultlab.vocabulary.registry import unregister
from faultlab.vocabulary.schema import event_schema, problems_of
from faultlab.vocabulary.session import (
    Answer,
    Ask,
    AudioEnd,
    AudioStart,
    ClientConnected,
    ClientError,
    ClientLost,
    ClientOldClosed,
    ClientReceived,
    ClientRecovered,
    ClientRefused,
    RecoveryAttempt,
    RecoveryFailed,
    RecoveryNewSession,
    RecoveryRace,
    RecoveryRestored,
    RecoveryStandby,
    ResumeAttempt,
    ResumeGaveUp,
    ResumeOk,
    ResumeRefused,
    StatusNote,
    ToolCall,
    ToolResponse,
)

from .report.test_sequence import a_record

# Lines of real runs' events.jsonl (silent-loss, abort-on-toolcall, dns-fails-on-reconnect).
REAL = [
    '{"t": 0.000979, "source": "faultlab", "event": "run.start", "profile": "abort-on-toolcall", '
    '"path": "profiles/abort-on-toolcall.yaml", "pid": 18107, "unix_time": 1796398778.821379}',
    '{"t": 0.065229, "source": "faultlab", "event": "lab.ready", "backend": "netns", '
    '"client": "198.18.188.106", "server": "198.18.188.110", "slot": 6029, "setup_ms": 64.0}',
    '{"t": 1.129989, "source": "faultlab", "event": "target.ready", "port": 443}',
    '{"t": 2.673313, "source": "capture", "event": "capture.start", "iface": "c0", "pid": 18338}',
    '{"t": 3.622871, "source": "proxy", "event": "proxy.ws_start", "conn": "57de3f6b", "k": 1, '
    '"client_port": 50210, "path": "/ws/x", "client": "198.18.188.106:50210", '
    '"server": "198.18.188.110:443"}',
    '{"t": 3.681451, "source": "client", "event": "client.connected"}',
    '{"t": 3.78439, "source": "proxy", "event": "fault.applied", "step": "cut", "fault": "abort", '
    '"layer": "app", "trigger": "on frame tool_call", "applied_in_ms": 0.147, "legs": "both", '
    '"reset": ["client", "server"], "for_s": 0.0}',
    '{"t": 3.786039, "source": "proxy", "event": "proxy.ws_end", "conn": "57de3f6b", "k": 1, '
    '"code": 1006, "reason": null, "closed_by_client": true}',
    '{"t": 3.787487, "source": "client", "event": "client.error", "type": "APIError", '
    '"code": 1006, "message": "1006 None. abnormal closure [internal]"}',
    '{"t": 3.784752, "source": "capture", "event": "tcp.rst", "k": 1, "from": "server"}',
    '{"t": 1.718119, "source": "faultlab", "event": "resolver.ready", "address": "198.19.87.97", '
    '"names": ["generativelanguage.googleapis.com"], "upstream": null}',
    '{"t": 2.962633, "source": "resolver", "event": "dns.query", '
    '"name": "generativelanguage.googleapis.com", "type": "A", "answer": "address"}',
    '{"t": 3.181311, "source": "client", "event": "client.tool_call", "id": "function-call-c5f7", '
    '"name": "book_slot", "args": {"slot": "tomorrow at 3pm"}}',
    '{"t": 3.182606, "source": "client", "event": "client.received", "kind": "tool_call"}',
    '{"t": 4.187417, "source": "client", "event": "client.lost", "why": "1006 abnormal closure"}',
    '{"t": 4.188639, "source": "client", "event": "resume.attempt", "n": 1, "since_loss_s": 0.001}',
    '{"t": 4.190648, "source": "client", "event": "resume.refused", "n": 1, "code": null, '
    '"error": "gaierror", "latency_ms": 2.0}',
    '{"t": 7.189759, "source": "client", "event": "resume.gave_up", "attempts": 3}',
    '{"t": 0.948101, "source": "client", "event": "client.connecting", "attempt": 1, '
    '"url": "ws://198.19.74.142:8765/"}',
    '{"t": 5.970318, "source": "client", "event": "client.closed", "code": 1006, "reason": "", '
    '"by": "self"}',
    '{"ts": 1796398780.5, "event": "client.done", "outcome": "lost"}',
]


@dataclass(frozen=True)
class Toy(Record):
    """A plugin's own event, drawn as a loss on the server's lane."""

    NAME: ClassVar[str] = "toy.tripped"
    DRAWN: ClassVar[Drawing] = Drawing("server", "loss")
    wire: int


@pytest.fixture
def toy() -> Iterator[type[Toy]]:
    register(Toy)
    yield Toy
    unregister(Toy)


def test_the_vocabulary_finds_its_own_modules_records_by_name() -> None:
    """Every module of the vocabulary is searched: the session's, the lab's, the run's."""
    found = vocabulary()
    assert found["client.lost"].__module__ == "faultlab.vocabulary.session"
    assert found["dns.query"] is DnsQuery and found["tcp.fin"].__module__ == "faultlab.vocabulary.run"
    assert {"proxy.frame", "emulator.frame", "browser.frame"} <= set(found)
    assert record_of("no.such") is None


def test_a_registered_record_joins_the_vocabulary_and_the_report_draws_it(toy: type[Toy]) -> None:
    """A plugin's record is found by its name, and the report draws it as it declares."""
    assert record_of("toy.tripped") is toy
    view = build_view([Event(1.0, "client", "toy.tripped", {"wire": 3})], a_record())
    assert [(i.name, i.lane, i.category) for i in view.items] == [("toy.tripped", "server", "loss")]


def test_every_declared_colour_is_in_the_report_s_palette() -> None:
    """A record's drawing names a category the page, the picture and the legend can colour."""
    for record in set(vocabulary().values()):
        assert record.DRAWN.category in PALETTE, record


def test_two_records_of_one_name_are_refused(toy: type[Toy]) -> None:
    """A second record of a name already taken is named, not silently preferred."""

    @dataclass(frozen=True)
    class Twin(Record):
        NAME: ClassVar[str] = "toy.tripped"

    register(Twin)
    try:
        with pytest.raises(RuntimeError, match=r"two records of the event 'toy\.tripped'"):
            vocabulary()
    finally:
        unregister(Twin)


def test_no_field_hides_what_every_record_has() -> None:
    """A field named `name`, `names` or `fields` would shadow the record's own: such fields are
    renamed and written under their name (`WIRE_NAMES`)."""
    own = set(dir(Record))
    for record in set(vocabulary().values()):
        assert not {f.name for f in dataclasses.fields(record)} & own, record  # type: ignore[arg-type]
    assert ToolCall("c1", "book_slot", {"slot": "3pm"}).fields() == {
        "id": "c1", "name": "book_slot", "args": {"slot": "3pm"}}


def test_none_is_written_only_where_the_writers_always_wrote_it() -> None:
    """A refused resume without a WebSocket says `code: null`; an absent `why` is not written."""
    assert ResumeRefused(1, None, "gaierror", 2.0).fields() == {
        "n": 1, "code": None, "error": "gaierror", "latency_ms": 2.0}
    assert ClientOldClosed(None, 3.0).fields() == {"echoed": None, "echo_ms": 3.0}
    assert "closed_by_client" in ProxyWsEnd("c", 1, 1000, "", None).fields()


def test_the_schema_has_every_record_keyed_on_its_event_name() -> None:
    """One schema: one variant per event name, each naming it as `event`'s constant."""
    schema = event_schema()
    names = [v["properties"]["event"]["const"] for v in schema["oneOf"]]
    assert sorted(names) == sorted(vocabulary()) and len(names) == len(set(names))
    lost = next(v for v in schema["oneOf"] if v["title"] == "client.lost")
    assert lost["properties"]["why"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    call = next(v for v in schema["oneOf"] if v["title"] == "client.tool_call")
    assert {"event", "id", "name"} <= set(call["required"])
    json.dumps(schema)  # printable as it is


@pytest.mark.parametrize("line", REAL, ids=lambda line: json.loads(line)["event"])
def test_real_events_hold_to_the_schema(line: str) -> None:
    """A line real runs wrote has every required field of its event's variant, and no field of
    the wrong type."""
    data = json.loads(line)
    variant = next(v for v in event_schema()["oneOf"] if v["title"] == data["event"])
    assert set(variant["required"]) <= set(data)
    assert list(problems_of(line)) == []


def _run_dir(tmp_path: Path, *lines: str) -> Path:
    (tmp_path / "events.jsonl").write_text("".join(line + "\n" for line in lines))
    return tmp_path


def test_check_names_unknown_events_and_type_errors_with_file_and_line(tmp_path: Path) -> None:
    """An unknown event and a field of the wrong type are named FILE:LINE; the exit code is 1."""
    run = _run_dir(tmp_path, REAL[5], '{"t": 1, "source": "client", "event": "client.lots"}')
    writer = EventWriter(run / "client.events.jsonl")
    writer.emit("resume.refused", n="two", code=1011)
    writer.close()
    result = CliRunner().invoke(cli, ["events", "check", str(run)])
    assert result.exit_code == 1
    assert f"{run / 'events.jsonl'}:2: unknown event 'client.lots'" in result.output
    assert f"{run / 'client.events.jsonl'}:1: resume.refused: n: Input should be a valid " \
           "integer" in result.output


def test_check_passes_a_clean_run_folder(tmp_path: Path) -> None:
    """A folder whose every event is a record with the right types passes with 0."""
    result = CliRunner().invoke(cli, ["events", "check", str(_run_dir(tmp_path, *REAL))])
    assert result.exit_code == 0, result.output
    assert result.output.strip().startswith("0 problem(s)")


def test_check_refuses_what_is_not_a_run_folder(tmp_path: Path) -> None:
    """No folder, or one without events, is a user's error: one line, exit 2."""
    for arg in (tmp_path / "none", tmp_path):
        result = CliRunner().invoke(cli, ["events", "check", str(arg)])
        assert result.exit_code == 2 and "Traceback" not in result.output


def test_events_schema_prints_the_schema_with_the_packs_records() -> None:
    """`faultlab events schema` prints JSON naming the booking pack's events too."""
    result = CliRunner().invoke(cli, ["events", "schema"])
    assert result.exit_code == 0
    titles = {v["title"] for v in json.loads(result.output)["oneOf"]}
    assert {"backend.job", "client.lost", "uplink.start"} <= titles


def test_the_javascript_constants_are_the_vocabulary_s() -> None:
    """faultlab/clients/js/events.mjs is what the vocabulary generates now."""
    assert EVENTS_MJS.read_text() == render(), (
        f"{EVENTS_MJS} is out of date with faultlab/vocabulary/: run `{REGENERATE}` and commit it")
    assert "export const CLIENT_LOST = 'client.lost';" in render()


def test_the_lab_s_records_write_the_lines_their_parts_always_wrote() -> None:
    """A query's step and delay appear only when a step decided it; a proxied socket's unknown
    ends are null; a rewrite says `fields`; the resolver its `names`."""
    assert DnsQuery("a.test", "A", "address").fields() == {
        "name": "a.test", "type": "A", "answer": "address"}
    assert DnsQuery("a.test", "A", "slow", "dns", 500.0).fields() == {
        "name": "a.test", "type": "A", "answer": "slow", "step": "dns", "delay_ms": 500.0}
    assert ProxyWsStart("f1", None, path="/ws").fields() == {
        "conn": "f1", "k": None, "client_port": None, "path": "/ws", "client": None,
        "server": None}
    assert ProxyRewrote("rw", "setup", ["model"]).fields() == {
        "step": "rw", "kind": "setup", "fields": ["model"]}
    assert ResolverReady("10.0.0.53", ["a.test"], None).fields() == {
        "address": "10.0.0.53", "names": ["a.test"], "upstream": None}
    assert UplinkStart(None).fields() == {"keep_alive": None}


# Each record as the reference clients (clients/driver.py, racing.py, the booking conversation)
# build it, beside the fields their `emit("name", ...)` wrote before, in the order written.
CLIENT_LINES: list[tuple[Record, dict[str, object]]] = [
    (ClientConnected(), {}),
    (ClientRefused(1008, "policy"), {"code": 1008, "reason": "policy"}),
    (ClientRefused(None, "OSError: unreachable"), {"code": None, "reason": "OSError: unreachable"}),
    (ClientRefused("session_expired", "expired"), {"code": "session_expired", "reason": "expired"}),
    (ClientLost("pings"), {"why": "pings"}),
    (ClientRecovered(2.5, "server_content"), {"since_loss_s": 2.5, "kind": "server_content"}),
    (ToolCall(None, "book_slot", {}), {"id": None, "name": "book_slot", "args": {}}),
    (AudioStart(), {}),
    (ClientError(code=None, message="boom"), {"code": None, "message": "boom"}),
    (ClientReceived("tool_call"), {"kind": "tool_call"}),
    (AudioEnd(1.25), {"audio_s": 1.25}),
    (Answer("booked"), {"text": "booked"}),
    (ResumeAttempt(2, 0.5), {"n": 2, "since_loss_s": 0.5}),
    (ResumeRefused(2, 1011, latency_ms=3.5), {"n": 2, "code": 1011, "latency_ms": 3.5}),
    (ResumeRefused(2, "session_expired", latency_ms=3.5),
     {"n": 2, "code": "session_expired", "latency_ms": 3.5}),
    (ResumeOk(3, 40.0, 1.5), {"n": 3, "latency_ms": 40.0, "since_loss_s": 1.5}),
    (ResumeGaveUp(4), {"attempts": 4}),
    (RecoveryAttempt(1, 4.0), {"n": 1, "since_loss_s": 4.0}),
    (RecoveryFailed(1, error="Refused: no"), {"n": 1, "error": "Refused: no"}),
    (RecoveryNewSession(4.2), {"since_loss_s": 4.2}),
    (RecoveryRestored(0, False), {"lines": 0, "asked": False}),
    (RecoveryStandby(1.1), {"quiet_s": 1.1}),
    (RecoveryRace("resume", 0.3), {"winner": "resume", "since_loss_s": 0.3}),
    (ToolResponse("c1", "B-1"), {"id": "c1", "booking": "B-1"}),
    (StatusNote("B-1", "committed"), {"booking": "B-1", "status": "committed"}),
    (Ask("and the time?"), {"text": "and the time?"}),
]


@pytest.mark.parametrize(("record", "written"), CLIENT_LINES,
                         ids=[record.name for record, _ in CLIENT_LINES])
def test_the_clients_records_write_the_lines_the_clients_always_wrote(
        record: Record, written: dict[str, object]) -> None:
    """A client's record has the fields, nulls and order its old `emit` wrote, and that line
    holds to the schema (an API's refusal code is a string)."""
    assert list(record.fields().items()) == list(written.items())
    line = json.dumps({"event": record.name, "ts": 1.0, **written})
    assert list(problems_of(line)) == []
