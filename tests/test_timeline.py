from faultlab.events import Event
from faultlab.profile import parse_profile
from faultlab.timeline import Timeline

PROFILE = """\
name: t
client: {command: [sleep, "1"]}
timeline:
  - {id: a, when: {at: 1s}, after: 500ms, do: {fault: drop}}
  - {id: b, when: {step: a}, after: 2s, do: {fault: restore}}
  - {id: c, when: {event: client.connected, where: {attempt: 2}}, do: {fault: drop}}
  - {id: d, when: {connection: 2}, after: 100ms, do: {fault: reject}}
"""


def timeline() -> Timeline:
    return Timeline(parse_profile(PROFILE).timeline)


def test_time_triggers_are_due_from_the_start() -> None:
    """A time trigger is due at its time plus `after`."""
    t = timeline()
    (due,) = t.start()
    assert due.step.id == "a" and due.t == 1.5 and due.cause == "at 1s"
    assert [s.id for s in t.waiting] == ["b", "c", "d"]


def test_step_trigger_follows_the_applied_event() -> None:
    """`when: {step: a}` fires when a's fault has been applied, then waits `after`."""
    t = timeline()
    t.start()
    assert t.observe(Event(1.6, "faultlab", "fault.applied", {"step": "x"})) == []
    (due,) = t.observe(Event(1.6, "faultlab", "fault.applied", {"step": "a"}))
    assert due.step.id == "b" and due.t == 3.6


def test_event_trigger_matches_name_and_fields() -> None:
    """An event trigger needs the name and every `where` field to match."""
    t = timeline()
    assert t.observe(Event(1.0, "client", "client.connected", {"attempt": 1})) == []
    (due,) = t.observe(Event(3.0, "client", "client.connected", {"attempt": 2}))
    assert due.step.id == "c" and due.t == 3.0


def test_connection_trigger_counts_tcp_connections() -> None:
    """`when: {connection: 2}` fires on the second TCP connection the capture sees."""
    t = timeline()
    assert t.observe(Event(0.5, "capture", "tcp.connect", {"k": 1})) == []
    (due,) = t.observe(Event(4.0, "capture", "tcp.connect", {"k": 2}))
    assert due.step.id == "d" and abs(due.t - 4.1) < 1e-9


def test_each_step_fires_once() -> None:
    """A trigger that happens again does not fire its step again."""
    t = timeline()
    ev = Event(3.0, "client", "client.connected", {"attempt": 2})
    assert len(t.observe(ev)) == 1
    assert t.observe(ev) == []


FRAMES = """\
name: f
client: {command: [sleep, "1"]}
timeline:
  - {id: on-call, when: {frame: {from: server, kind: toolCall, nth: 2}}, after: 1s, do: {fault: drop}}
"""


def test_frame_trigger_follows_the_frame_log_of_proxy_or_emulator() -> None:
    """A packet fault on a frame fires on the n-th matching frame event, from either log."""
    t = Timeline(parse_profile(FRAMES).timeline)
    assert t.observe(Event(1.0, "proxy", "proxy.frame", {"dir": "client->server",
                                                         "kind": "tool_call"})) == []
    assert t.observe(Event(1.1, "proxy", "proxy.frame", {"dir": "server->client",
                                                         "kind": "tool_call"})) == []
    (due,) = t.observe(Event(2.0, "target", "emulator.frame", {"dir": "out", "kind": "tool_call"}))
    assert due.step.id == "on-call" and due.t == 3.0
