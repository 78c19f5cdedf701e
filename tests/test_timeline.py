from faultlab.connections import ConnectionTable
from faultlab.events import Event
from faultlab.frames import Frame
from faultlab.profile import parse_profile
from faultlab.sources import FrameSource
from faultlab.timeline import Timeline, in_proxy

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


def test_time_triggers_are_due_from_the_clients_start() -> None:
    """A time trigger is due at its time plus `after`, counted from the client's start."""
    t = timeline()
    (due,) = t.start(client_started=0.75)
    assert due.step.id == "a" and due.t == 2.25 and due.cause == "at 1s"
    assert [s.id for s in t.waiting] == ["b", "c", "d"]


def test_step_trigger_follows_the_applied_event() -> None:
    """`when: {step: a}` fires when a's fault has been applied, then waits `after`."""
    t = timeline()
    t.start(0.0)
    assert t.observe(Event(1.6, "faultlab", "fault.applied", {"step": "x"})) == []
    (due,) = t.observe(Event(1.6, "faultlab", "fault.applied", {"step": "a"}))
    assert due.step.id == "b" and due.t == 3.6


def test_event_trigger_matches_name_and_fields() -> None:
    """An event trigger needs the name and every `where` field to match."""
    t = timeline()
    assert t.observe(Event(1.0, "client", "client.connected", {"attempt": 1})) == []
    (due,) = t.observe(Event(3.0, "client", "client.connected", {"attempt": 2}))
    assert due.step.id == "c" and due.t == 3.0


def test_an_event_trigger_reads_a_message_kind_in_the_run_s_protocol() -> None:
    """`when: {event: emulator.frame, where: {kind: toolCall}}` fires on the logged `tool_call`
    given the run's protocol, as a frame trigger would."""
    profile = parse_profile(PROFILE.replace(
        "when: {event: client.connected, where: {attempt: 2}}",
        "when: {event: emulator.frame, where: {from: server, kind: toolCall}}"))
    t = Timeline(profile.timeline, profile.protocol.kind_matches)
    assert t.observe(Event(1.0, "target", "emulator.frame",
                           {"from": "server", "kind": "setup_complete"})) == []
    (due,) = t.observe(Event(2.0, "target", "emulator.frame",
                             {"from": "server", "kind": "tool_call"}))
    assert due.step.id == "c"


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
target: {emulator: {}}
timeline:
  - {id: on-call, when: {frame: {from: server, kind: toolCall, nth: 2}}, after: 1s, do: {fault: drop}}
"""


def test_frame_trigger_fires_on_the_nth_matching_frame() -> None:
    """A packet fault on a frame fires on the n-th frame that matches sender and kind."""
    t = Timeline(parse_profile(FRAMES).timeline)
    assert t.observe_frame(Frame("client", 1, "tool_call"), 1.0) == []
    assert t.observe_frame(Frame("server", 1, "tool_call"), 1.1) == []
    (due,) = t.observe_frame(Frame("server", 1, "tool_call"), 2.0)
    assert due.step.id == "on-call" and due.t == 3.0


def test_one_frame_log_per_run_so_nth_counts_messages_not_log_lines() -> None:
    """With a proxy and an emulator both logging, `nth: 2` fires on the second message: the run
    follows the proxy's log only, its frames numbered by the client's port as the capture saw it."""
    t = Timeline(parse_profile(FRAMES.replace("nth: 2", "nth: 2, connection: 1")).timeline)
    table = ConnectionTable()
    table.observe_syn("198.18.0.2", 40001, "198.18.0.6", 443, 0.0)
    source = FrameSource.for_run(True, "emulator.connect", table, 443)
    assert source is not None
    assert source.frame(Event(0.5, "proxy", "proxy.ws_start",
                              {"conn": "f1", "k": 0, "client_port": 40001})) is None
    fired = []
    for n, (proxy_t, emulator_t) in enumerate([(1.0, 1.01), (2.0, 2.01), (3.0, 3.01)], 1):
        for event in (Event(emulator_t, "target", "emulator.frame",
                            {"conn": 1, "from": "server", "kind": "tool_call"}),
                      Event(proxy_t, "proxy", "proxy.frame",
                            {"conn": "f1", "from": "server", "kind": "tool_call"})):
            frame = source.frame(event)
            assert frame is None or frame == Frame("server", 1, "tool_call")
            if frame is not None:
                fired += [(n, due.t) for due in t.observe_frame(frame, event.t)]
    assert fired == [(2, 3.0)]


def test_emulator_frames_are_numbered_as_the_router_saw_the_connections() -> None:
    """An emulator connection is numbered by the client's SYN order, so a connection whose SYN
    the path dropped (never reaching the emulator) still counts."""
    table = ConnectionTable()
    for port in (40001, 40002, 40003):
        table.observe_syn("198.18.0.2", port, "198.18.0.6", 443, 0.0)
    source = FrameSource.for_run(False, "emulator.connect", table, 443)
    assert source is not None
    source.frame(Event(0.1, "target", "emulator.connect", {"conn": 1, "client_port": 40001}))
    source.frame(Event(0.5, "target", "emulator.connect", {"conn": 2, "client_port": 40003}))
    frame = source.frame(Event(0.6, "target", "emulator.frame",
                               {"conn": 2, "from": "client", "kind": "setup"}))
    assert frame == Frame("client", 3, "setup")


def test_frame_steps_with_proxy_faults_are_armed_in_the_proxy() -> None:
    """A frame-triggered step whose fault lives in the proxy fires there; others in the run."""
    profile = parse_profile(FRAMES.replace("{fault: drop}", "{fault: freeze}"))
    assert [in_proxy(s) for s in profile.timeline] == [True]
    assert [in_proxy(s) for s in parse_profile(FRAMES).timeline] == [False]


def test_the_timeline_holds_the_steps_the_proxy_fires_and_tells_which_never_fired() -> None:
    """A proxy-fired step is `armed`, never fired by the timeline itself, and unfired until its
    `fault.applied` comes back; a step whose trigger never came is unfired too."""
    profile = parse_profile(FRAMES.replace("{fault: drop}", "{fault: freeze}") + (
        "  - {id: later, when: {event: never.seen}, do: {fault: drop}}\n"))
    t = Timeline(profile.timeline)
    assert [s.id for s in t.armed] == [profile.timeline[0].id]
    assert [s.id for s in t.steps] == ["later"]
    frozen = profile.timeline[0].id
    assert t.unfired([]) == [frozen, "later"]
    assert t.unfired([Event(2.0, "proxy", "fault.applied", {"step": frozen})]) == ["later"]
