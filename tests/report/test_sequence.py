"""The run as a sequence diagram (faultlab.report.sequence): lanes, collapsed runs of alike
messages, faults as bands, and the moments expectations were judged on."""

from __future__ import annotations

from pathlib import Path

from faultlab.events import Event
from faultlab.protocols import GEMINI
from faultlab.report.bursts import BURST_GAP_S, bursts
from faultlab.report.record import RunRecord
from faultlab.report.sequence import build_view
from faultlab.vocabulary.webrtc import ClientAudioStats


def ev(t: float, source: str, name: str, **fields: object) -> Event:
    return Event(t, source, name, dict(fields))


def a_record(**changes: object) -> RunRecord:
    base: dict[str, object] = {
        "profile": "field-BR1", "verdict": "PASS", "exit_code": 0, "run_dir": "/tmp/x",
        "started": "2026-12-01T00:00:00+00:00", "duration_s": 20.0,
        "expectations": [{"expectation": "client.lost occurs", "held": True, "seen": "at +2s",
                          "at": 5.6},
                         {"expectation": "client exits with 0", "held": False,
                          "seen": "exit code 1", "at": None}]}
    return RunRecord(**(base | changes))  # type: ignore[arg-type]


def audio(t: float, conn: int = 1) -> Event:
    return ev(t, "target", "emulator.frame", conn=conn, **{"from": "client"}, kind="realtime_input.audio",
              bytes=3200, audio_s=0.1)


def test_alike_events_in_a_row_are_one_run_and_a_pause_starts_another() -> None:
    """Audio every 100 ms is one run until a pause longer than the gap; a pair stays two."""
    frames = [audio(1 + i * 0.1) for i in range(10)]
    frames += [audio(1.9 + BURST_GAP_S + 0.5 + i * 0.1) for i in range(2)]
    runs = bursts(frames)
    assert [r.count for r in runs] == [10, 1, 1]
    assert abs(runs[0].audio_s - 1.0) < 1e-9 and runs[0].last.t == frames[9].t


def test_other_events_interleave_with_a_run_without_breaking_it() -> None:
    """A resumption update among a model turn's chunks does not split the turn."""
    turn = [ev(2 + i * 0.02, "target", "emulator.frame", conn=1, **{"from": "server"},
               kind="server_content.model_turn", audio_s=0.1) for i in range(15)]
    update = ev(2.1, "target", "emulator.frame", conn=1, **{"from": "server"},
                kind="session_resumption_update")
    view = build_view([*turn[:5], update, *turn[5:]], a_record())
    messages = [i for i in view.items if i.to is not None]
    assert [(i.label, i.count) for i in messages] == [
        ("model_turn x15 (1.50 s audio)", 15),
        ("session_resumption_update", 1)]
    assert messages[0].t_end == turn[-1].t and messages[0].lane == "server"
    assert view.frames == 16


def test_a_fifteen_minute_stream_is_a_handful_of_items() -> None:
    """Nine thousand audio chunks with a pause every minute are fifteen items."""
    frames = [audio(minute * 60 + i * 0.1) for minute in range(15) for i in range(590)]
    view = build_view(frames, a_record())
    assert len(view.items) == 15 and view.frames == len(frames)


def test_the_proxy_log_is_the_messages_when_the_run_has_one() -> None:
    """With a proxy, its frames are the messages (not the emulator's too), and it has a lane."""
    events = [ev(1.0, "proxy", "proxy.frame", k=1, **{"from": "client"}, kind="setup"),
              ev(1.01, "target", "emulator.frame", conn=1, **{"from": "client"}, kind="setup"),
              ev(1.3, "proxy", "proxy.ws_end", k=1, code=1011, closed_by_client=False)]
    view = build_view(events, a_record())
    assert [lane.id for lane in view.lanes] == ["client", "proxy", "router", "server"]
    assert [(i.name, i.label, i.lane, i.to) for i in view.items] == [
        ("proxy.frame", "setup", "client", "server"),
        ("proxy.ws_end", "close 1011", "server", "client")]


def test_faults_are_bands_until_their_revert_and_instants_when_done_once_applied() -> None:
    """A drop lasts until reverted; a freeze until the step that says it `ends` it; an abort
    (`for_s: 0`) is an instant; a stall lasts its `for_s`; a fault never reverted lasts to the end
    of the run; applied_in_ms moves the start back."""
    events = [
        ev(1.0, "faultlab", "fault.applied", step="cut", fault="drop", layer="packet",
           applied_in_ms=2.0),
        ev(3.0, "faultlab", "fault.reverted", step="cut", fault="drop"),
        ev(4.0, "proxy", "fault.applied", step="ice", fault="freeze", layer="app"),
        ev(6.0, "proxy", "fault.applied", step="sun", fault="thaw", layer="app", thawed=["ice"],
           ends=["ice"], for_s=0),
        ev(6.5, "faultlab", "fault.applied", step="hush", fault="mic_stall", layer="client",
           for_s=1.5),
        ev(7.0, "faultlab", "fault.applied", step="kill", fault="abort", layer="app", for_s=0),
        ev(8.0, "faultlab", "fault.applied", step="loss", fault="loss", layer="packet"),
        ev(9.0, "proxy", "proxy.start")]
    bands = {b.step: b for b in build_view(events, a_record()).bands}
    assert (bands["cut"].t, bands["cut"].t_end, bands["cut"].lane) == (0.998, 3.0, "router")
    assert (bands["ice"].t_end, bands["ice"].lane) == (6.0, "proxy")
    assert bands["sun"].t_end == bands["sun"].t == 6.0 and bands["sun"].instant
    assert (bands["hush"].t_end, bands["hush"].lane, bands["hush"].instant) == (8.0, "client", False)
    assert bands["kill"].t_end == 7.0 and bands["kill"].instant and not bands["cut"].instant
    assert (bands["loss"].t_end, bands["loss"].reverted) == (9.0, False)


def test_markers_sit_on_the_lane_of_who_saw_them() -> None:
    """Loss and refusals on the client's lane, TCP on the router's, the emulator's account on
    the server's; a received message is not a marker (it is a message)."""
    events = [ev(1.0, "capture", "tcp.connect", k=2, client_port=1, server="x", server_port=443),
              ev(1.1, "client", "resume.refused", n=1, code=1011),
              ev(1.1, "target", "emulator.resume_refused", conn=2),
              ev(1.2, "capture", "tcp.rst", k=2, **{"from": "server"}),
              ev(1.3, "client", "client.received", kind="tool_call")]
    items = build_view(events, a_record()).items
    assert [(i.lane, i.label, i.category) for i in items if i.to is None] == [
        ("router", "SYN #2", "tcp"), ("client", "refused 1011", "refused"),
        ("server", "resume_refused", "note"), ("router", "RST #2 from server", "tcp")]


def test_without_a_frame_log_what_the_client_received_is_drawn() -> None:
    """A remote target without the proxy: the client's own account of the messages."""
    items = build_view([ev(1.0, "client", "client.received", kind="tool_call")], a_record()).items
    assert [(i.lane, i.to, i.category) for i in items] == [("server", "client", "tool_call")]


def test_judgements_carry_their_moment() -> None:
    """Each expectation keeps its verdict and the moment it was judged on (or none)."""
    view = build_view([], a_record())
    assert [(j.held, j.at) for j in view.judgements] == [(True, 5.6), (False, None)]


def test_kinds_fall_into_the_legend_s_categories() -> None:
    assert [GEMINI.category_of(k) for k in (
        "setup", "setup_complete", "realtime_input.audio", "server_content.model_turn",
        "tool_call", "tool_response", "server_content.turn_complete",
        "session_resumption_update", "go_away", "client_content")] == [
        "setup", "setup", "audio", "audio", "tool_call", "tool_response", "turn_complete",
        "resumption", "close", "content"]


def test_a_connection_s_two_fins_are_one_mark_and_a_scoped_fault_says_its_scope() -> None:
    """FINs of one connection from both sides at once are "both ways"; a drop of the first
    connection only says so, since its band spans every connection."""
    events = [ev(1.0, "capture", "tcp.fin", k=2, **{"from": "client"}),
              ev(1.01, "capture", "tcp.fin", k=2, **{"from": "server"}),
              ev(2.0, "capture", "tcp.fin", k=3, **{"from": "client"}),
              ev(3.0, "capture", "tcp.fin", k=3, **{"from": "server"}),
              ev(0.5, "faultlab", "fault.applied", step="cut", fault="drop", layer="packet",
                 connection="first", direction="up")]
    view = build_view(events, a_record())
    assert [i.label for i in view.items] == ["FIN #2 both ways", "FIN #3 from client",
                                             "FIN #3 from server"]
    assert view.bands[0].label == "cut: drop (first connection only, client to server)"


def test_events_that_say_different_things_are_never_folded_together() -> None:
    """Three processes exiting at once stay three (the target's -11 is not hidden); alike frames
    that differ only in what they measure fold."""
    exits = [ev(9.0 + i * 0.01, "faultlab", "process.exit", role=role, code=code)
             for i, (role, code) in enumerate([("client", 0), ("target", -11), ("proxy", 0)])]
    assert [b.count for b in bursts(exits)] == [1, 1, 1]
    sizes = [ev(1 + i * 0.02, "target", "emulator.frame", conn=1, **{"from": "server"},
                kind="server_content.model_turn", bytes=100 + i, audio_s=0.1) for i in range(5)]
    (burst,) = bursts(sizes)
    assert burst.count == 5 and "bytes" not in burst.fields and "audio_s" not in burst.fields


def test_a_client_s_odd_fields_and_times_are_drawn_or_left_out_never_a_crash() -> None:
    """Unhashable values, an audio_s that is text or NaN, and a time that is not a number: the
    view is still built, the odd event without a place on the clock left out."""
    events = [ev(1.0 + i * 0.1, "client", "client.received", kind=["tool_call"],
                 audio_s=odd) for i, odd in enumerate(["1.0s", float("nan"), {"x": 1}])]
    events.append(ev(float("nan"), "client", "client.lost"))
    view = build_view(events, a_record())
    assert [(i.count, i.audio_s) for i in view.items] == [(3, 0.0)]


def test_messages_are_coloured_and_labelled_in_the_runs_protocol(tmp_path: Path) -> None:
    """The record names the run's protocol: OpenAI Realtime's `response.done` ends a turn, its
    audio deltas are audio, its error is a refusal; read as Gemini Live they are plain content.
    A record from before protocols were recorded reads as Gemini Live."""
    frames = [ev(1.0, "proxy", "proxy.frame", k=1, **{"from": "server"},
                 kind="response.output_audio.delta", audio_s=0.1),
              ev(2.0, "proxy", "proxy.frame", k=1, **{"from": "server"}, kind="response.done"),
              ev(3.0, "proxy", "proxy.frame", k=1, **{"from": "server"}, kind="error")]

    def categories(record: RunRecord) -> list[str]:
        return [i.category for i in build_view(frames, record).items if i.to is not None]

    assert categories(a_record(protocol="openai")) == ["audio", "turn_complete", "refused"]
    assert categories(a_record()) == ["content", "content", "content"]
    assert a_record().protocol == "gemini"
    (tmp_path / "result.json").write_text(a_record(protocol="openai").to_json())
    assert RunRecord.load(tmp_path / "result.json").protocol == "openai"


def test_a_browser_clients_own_frames_are_the_runs_messages() -> None:
    """With a browser client, its DevTools account of the frames is drawn (its sends when it
    sent them), not the emulator's; its socket's end is a mark on the client's lane."""
    events = [ev(1.0, "client", "browser.frame", conn=1, **{"from": "client"}, kind="setup"),
              ev(1.05, "target", "emulator.frame", conn=1, **{"from": "client"}, kind="setup"),
              ev(1.2, "target", "emulator.frame", conn=1, **{"from": "server"},
                 kind="setup_complete"),
              ev(1.21, "client", "browser.frame", conn=1, **{"from": "server"},
                 kind="setup_complete"),
              ev(3.0, "client", "browser.ws_closed", conn=1)]
    view = build_view(events, a_record())
    messages = [(i.t, i.lane, i.name) for i in view.items if i.to is not None]
    assert messages == [(1.0, "client", "browser.frame"), (1.21, "server", "browser.frame")]
    assert [(i.t, i.lane, i.category) for i in view.items if i.name == "browser.ws_closed"] == [
        (3.0, "client", "close")]


def stats(t: float, received_s: float, concealed_s: float, lost: int,
          jitter_ms: float = 4.0, source: str = "client") -> Event:
    return ev(t, source, "client.audio_stats", received_s=received_s, concealed_s=concealed_s,
              concealed=concealed_s / max(received_s + concealed_s, 1e-9),
              packets_received=int(received_s * 50), packets_lost=lost, jitter_ms=jitter_ms)


def test_a_client_s_audio_stats_are_series_of_each_second_not_of_the_call() -> None:
    """The concealed share and the packets lost are those of each second (the counters run from
    the call's start, and from 0 again in a new call); the jitter is as read; another client's
    counters never mix in: its series are its own."""
    view = build_view([
        stats(1.0, 0.9, 0.1, 5),
        stats(2.0, 1.9, 0.1, 5, jitter_ms=9.0),
        stats(2.5, 0.5, 0.0, 0, source="other"),
        stats(3.0, 2.4, 0.6, 30),
        stats(3.5, 2.4, 0.6, 30),  # no audio came: no share concealed, a gap
        stats(4.0, 0.8, 0.2, 10),  # a new call
    ], a_record())
    by_name = {s.name: s for s in view.series}
    assert list(by_name) == ["concealed (client)", "packets lost (client)", "jitter (client)",
                             "concealed (other)", "packets lost (other)", "jitter (other)"]
    assert [(t, round(v, 6)) for t, v in by_name["concealed (client)"].points] == [
        (1.0, 10.0), (2.0, 0.0), (3.0, 50.0), (4.0, 20.0)]
    assert [v for _, v in by_name["packets lost (client)"].points] == [5.0, 0.0, 25.0, 0.0, 10.0]
    assert by_name["jitter (client)"].points[1] == (2.0, 9.0)
    assert by_name["jitter (client)"].unit == "ms"
    alone = build_view([stats(1.0, 0.9, 0.1, 5)], a_record())
    assert [s.name for s in alone.series] == ["concealed", "packets lost", "jitter"]
    assert build_view([ev(1.0, "client", "client.lost", why="x")], a_record()).series == []


def test_a_new_call_is_told_by_its_packets_too() -> None:
    """A new call that has already played more than the last one had is told by its RTP
    packets, which count from 0 again."""
    before = ClientAudioStats(received_s=1.0, concealed_s=0.0, concealed=0.0,
                              packets_received=50, packets_lost=4, jitter_ms=1.0)
    after = ClientAudioStats(received_s=1.5, concealed_s=0.5, concealed=0.25,
                             packets_received=10, packets_lost=3, jitter_ms=1.0)
    assert after.readings(before) == {"concealed": 25.0, "packets lost": 3.0, "jitter": 1.0}
