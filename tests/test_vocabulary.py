"""The event vocabulary: records announced on the bus read back as themselves, the one frame
format of both logs, what a fault says of its own end, and `fault_spans`."""

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from mitmproxy.addons.proxyserver import Proxyserver

import faultlab.vocabulary
from faultlab.events import Event, EventBus, EventWriter, RunClock, read_events
from faultlab.faults import FAULTS
from faultlab.frames import FrameMatch, sender_of
from faultlab.proxy.control import Apply, Arm, ArmedStep, FaultOrder
from faultlab.proxy.state import ProxyState
from faultlab.vocabulary import Record
from faultlab.vocabulary.registry import declared_in, record_modules
from faultlab.vocabulary.run import (
    FaultApplied,
    FaultFailed,
    FaultReverted,
    FaultRevertFailed,
    FrameLogged,
    LabReady,
    ProcessExit,
    ProcessStart,
    ProxyUpstream,
    RunEnd,
    RunError,
    RunInterrupted,
    RunStart,
    RunTeardown,
    RunTimeout,
    TcpConnect,
    TcpFin,
    TcpRst,
    fault_spans,
)

from .faults.conftest import build
from .faults.fake_proxy import FakeServer, Proxy

RECORDS: list[Record] = [
    FaultApplied("cut", "drop", "packet", "at 2s", 1.9, details={"direction": "both"}),
    FaultApplied("heal", "restore", "packet", "at 4s", 0.4, ends=["cut"], for_s=0.0,
                 details={"reverted": ["cut"]}),
    FaultReverted("cut", "drop"), FaultReverted("frz", "freeze", by="proxy"),
    FaultFailed("cut", "drop", "iptables said no"), FaultRevertFailed("tc said no"),
    LabReady(41.5, {"backend": "netns", "client": "198.18.0.2", "server": "198.18.0.6"}),
    FrameLogged("proxy", "client", "f1e2d3c4", "setup", 300, 1, {"opcode": "text"}),
    FrameLogged("emulator", "server", 2, "tool_call", 120),
    TcpConnect(1, 40001, "198.18.0.6", 443), TcpFin(1, "client"), TcpRst(2, "server"),
    ProxyUpstream(40001, "198.18.0.5", 51000, "198.18.0.6", 443),
    ProcessStart("client", 4242, ["python", "-m", "client"], {"ns": "fl-client"}),
    ProcessExit("client", 0), ProcessExit("target", -15, "SIGTERM", True, 0.12),
    RunStart("p", "profiles/p.yaml", 7, 1_700_000_000.5), RunTimeout(30.0), RunError("no lab"),
    RunInterrupted("run"), RunTeardown(), RunEnd("PASS", 12.5),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_a_record_announced_reads_back_as_itself(record: Record, tmp_path: Path) -> None:
    """What the bus writes to events.jsonl is read back, by the record's type, as the same record."""
    bus = EventBus(RunClock(), tmp_path / "events.jsonl")
    bus.announce("faultlab", record)
    bus.close()
    (event,) = read_events(tmp_path / "events.jsonl")
    assert event.name == record.name and type(record).read(event) == record


def test_a_record_reads_none_from_another_event_or_a_malformed_one() -> None:
    """Another name is not the record; nor is a line another process wrote without its fields."""
    assert FaultReverted.read(Event(1.0, "faultlab", "fault.applied", {"step": "x"})) is None
    assert FaultFailed.read(Event(1.0, "proxy", "fault.failed", {"step": "x"})) is None


def test_every_record_has_its_own_name() -> None:
    """No two records are read from one event name."""
    names = [n for r in {type(r) for r in RECORDS} for n in r.names()]
    assert len(names) == len(set(names))


def test_the_vocabulary_reads_every_module_of_records() -> None:
    """`record_modules` has every module of the package that declares records: the vocabulary
    imports those (its package imports none), so one left out would go unread."""
    package = Path(faultlab.vocabulary.__file__).parent
    declaring = set()
    for path in package.glob("*.py"):
        module = importlib.import_module(f"faultlab.vocabulary.{path.stem}")
        if any(r.__module__ == module.__name__ for r in declared_in(vars(module).values())):
            declaring.add(path.stem)
    assert declaring == {m.__name__.rsplit('.', 1)[1] for m in record_modules()}


def test_a_process_loads_only_the_records_it_writes() -> None:
    """A peer, a client, the emulator and the proxy import the modules of the records they
    write, not the whole vocabulary (~45 ms of each one's start)."""
    # What each process imports as it starts (the proxy's entry point first empties mitmproxy's
    # addons package).
    starts = {"peer": "import faultlab.peers.ws_client", "client": "import faultlab.clients.naive",
              "emulator": "import faultlab.emulator.run",
              "proxy": "from faultlab.proxy.__main__ import bare_addons_package\n"
                       "bare_addons_package()\nimport faultlab.proxy.process"}
    listed = ("import sys\n{}\nprint(' '.join(sorted(m.rsplit('.', 1)[1] for m in sys.modules "
              "if m.startswith('faultlab.vocabulary.'))))")
    loaded = {process: subprocess.run([sys.executable, "-c", listed.format(start)], check=True,
                                      capture_output=True, text=True).stdout.split()
              for process, start in starts.items()}
    assert loaded == {"peer": ["base", "registry", "session"],
                      "client": ["audio", "base", "registry", "session"],
                      "emulator": ["base", "registry", "run", "server"],
                      "proxy": ["base", "lab", "registry", "run"]}


def test_the_jsonl_keeps_its_field_names() -> None:
    """The events keep the fields their readers know: `fault.applied` carries the fault's own
    details beside its step, and TCP events say `from`."""
    assert RECORDS[1].fields() == {"step": "heal", "fault": "restore", "layer": "packet",
                                   "trigger": "at 4s", "applied_in_ms": 0.4, "ends": ["cut"],
                                   "for_s": 0.0, "reverted": ["cut"]}
    assert TcpFin(3, "server").fields() == {"k": 3, "from": "server"}
    assert "ends" not in RECORDS[0].fields() and "for_s" not in RECORDS[0].fields()


def test_the_proxy_and_the_emulator_write_one_frame_format(tmp_path: Path) -> None:
    """Both logs say who sent a message in `from` and key its connection in `conn`; only the
    log's name tells them apart."""
    writer = EventWriter(tmp_path / "proxy.events.jsonl")
    writer.announce(FrameLogged("proxy", "server", "f1", "go_away", 40, 2, {"injected": True}))
    writer.close()
    line = json.loads((tmp_path / "proxy.events.jsonl").read_text())
    assert {k: line[k] for k in ("event", "from", "conn", "k", "kind", "bytes", "injected")} == {
        "event": "proxy.frame", "from": "server", "conn": "f1", "k": 2, "kind": "go_away",
        "bytes": 40, "injected": True}
    emulated = Event(1.0, "target", "emulator.frame",
                     {"conn": 1, "from": "client", "kind": "setup", "bytes": 300})
    assert sender_of(emulated) == "client" and "k" not in FrameLogged.read(emulated).fields()


def test_a_fault_says_which_steps_it_ends_and_how_long_it_lasts() -> None:
    """restore and thaw name the steps they end; a fault with nothing to undo lasts 0 s, a
    mic_stall its `for`, a drop until reverted; the fault's name plays no part."""
    restore = FaultApplied.of(build("restore", step="heal"), "at 4s", 0.41234,
                              {"reverted": ["cut"]})
    assert (restore.ends, restore.for_s, restore.applied_in_ms) == (["cut"], 0.0, 0.412)
    thaw = FaultApplied.of(build("thaw", step="sun"), "at 5s", 0.1,
                           {"thawed": ["ice"], "held_messages": 2, "discarded": False})
    assert (thaw.ends, thaw.for_s, thaw.layer) == (["ice"], 0.0, "app")
    assert FaultApplied.of(build("mic_stall", {"for": "2s"}), "at 1s", 0.1, {}).for_s == 2.0
    drop = FaultApplied.of(build("drop", step="cut"), "at 1s", 1.0, {})
    assert (drop.ends, drop.for_s) == ([], None)
    abort = FaultApplied.of(build("abort", step="kill"), "at 1s", 0.2, {})
    assert (abort.ends, abort.for_s) == ([], 0.0) and not FAULTS["abort"].reversible


def applied(t: float, step: str, fault: str, **more: object) -> Event:
    return Event(t, "faultlab", "fault.applied",
                 {"step": step, "fault": fault, "layer": "packet", "trigger": "at 1s",
                  "applied_in_ms": 2.0, **more})


def test_fault_spans_end_where_the_events_say() -> None:
    """A drop ends at its revert, a freeze at the thaw that names it, a stall after its `for_s`,
    an abort is an instant, and a fault never reverted lasts to the run's end (None)."""
    events = [
        applied(1.0, "cut", "drop"),
        applied(2.0, "ice", "freeze"),
        applied(2.5, "hush", "mic_stall", for_s=1.5),
        Event(3.0, "faultlab", "fault.reverted", {"step": "cut", "fault": "drop"}),
        applied(4.0, "sun", "thaw", ends=["ice"], thawed=["ice"], for_s=0),
        applied(5.0, "kill", "abort", for_s=0),
        applied(6.0, "loss", "loss"),
        applied(7.0, "heal", "restore", ends=["loss"], for_s=0),
        applied(8.0, "gone", "link_down"),
    ]
    spans = {s.step: s for s in fault_spans(events)}
    assert list(spans) == ["cut", "ice", "hush", "sun", "kill", "loss", "heal", "gone"]
    assert (spans["cut"].began, spans["cut"].t, spans["cut"].end) == (0.998, 1.0, 3.0)
    assert spans["ice"].end == 4.0 and not spans["ice"].instant
    assert spans["hush"].end == 4.0 and not spans["hush"].instant
    assert spans["kill"].end == 5.0 and spans["kill"].instant and spans["sun"].instant
    assert spans["loss"].end == 7.0
    assert spans["gone"].end is None and not spans["gone"].instant


def test_the_first_end_of_a_step_counts() -> None:
    """A step reverted by a restore and later reverted again at teardown ended at the restore."""
    events = [applied(1.0, "cut", "drop"),
              applied(2.0, "heal", "restore", ends=["cut"], for_s=0),
              Event(2.0, "faultlab", "fault.reverted", {"step": "cut"}),
              Event(9.0, "faultlab", "fault.reverted", {"step": "cut"})]
    assert fault_spans(events)[0].end == 2.0


def test_a_step_the_proxy_fires_announces_itself_as_any_step_does(tmp_path: Path) -> None:
    """A thaw armed in the proxy (`forward: before`) fires inside the message hook and announces,
    as the run would, the freeze it ends: the freeze's span ends there."""
    path = tmp_path / "proxy-events.jsonl"
    path.touch()
    server = FakeServer()
    writer = EventWriter(path)
    proxy = Proxy(ProxyState(server=cast(Proxyserver, server), events=writer), server, path)
    flow = proxy.open_flow()
    assert proxy.ask(Apply(order=FaultOrder(step="ice", fault="freeze",
                                            params={"mode": "stall"}))).ok
    match = FrameMatch.model_validate({"from": "server", "kind": "toolCall", "forward": "before"})
    assert proxy.ask(Arm(steps=[ArmedStep(step="sun", fault="thaw", match=match)])).ok
    proxy.send(flow, {"toolCall": {"functionCalls": []}}, from_client=False)
    writer.close()
    (announced,) = proxy.events()
    assert {k: announced[k] for k in ("event", "step", "fault", "layer", "trigger", "ends",
                                      "for_s", "thawed")} == {
        "event": "fault.applied", "step": "sun", "fault": "thaw", "layer": "app",
        "trigger": "on frame tool_call", "ends": ["ice"], "for_s": 0.0, "thawed": ["ice"]}
    events = [applied(1.0, "ice", "freeze"),
              Event(2.0, "proxy", "fault.applied", {k: v for k, v in announced.items()
                                                     if k != "event"})]
    assert [(s.step, s.end, s.instant) for s in fault_spans(events)] == [
        ("ice", 2.0, False), ("sun", 2.0, True)]
