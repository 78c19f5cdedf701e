"""Every packet fault against a real WebSocket client and server in a real lab."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultlab.capture.pcap import read_segments
from faultlab.result import RunResult

from .helpers import CLOCKS_AGREE_S, failed, first, lost_by_its_rule, peers, run_profile

pytestmark = pytest.mark.lab


# A step's trigger: 1 s into the client's first WebSocket session, so the fault always finds a
# healthy connection, however long the client took to start and connect.
CONNECTED = "when: {event: client.connected, where: {attempt: 1}}, after: 1s"


def packets_after(result: RunResult, t: float, src_role: str) -> int:
    """Packets captured on the router's client-side link from `src_role` after run time `t`,
    up to the end of what the run judges (teardown then reverts the faults, and the capture
    records what that lets through)."""
    t0 = first(result, "run.start").fields["unix_time"]
    lab = first(result, "lab.ready").fields
    src = lab[src_role].split("/")[0]
    return sum(1 for s in read_segments(result.run_dir / "capture.pcap")
               if s.src == src and t < s.ts - t0 <= result.observed_until)


def run(runs_dir: Path, name: str, timeline: str, duration: str = "6s", extra: str = "") -> RunResult:
    result = run_profile(f"name: {name}\n" + peers(duration, extra) + "timeline:\n" + timeline,
                         runs_dir)
    assert result.error is None, failed(result)
    return result


def after_connected(result: RunResult, step: str) -> float:
    """How long after the client's first connection the step's fault was applied: never less than
    its `after` (how much more is the machine's load; when a step is due, tests/test_timeline.py
    pins)."""
    return (first(result, "fault.applied", step=step).t
            - first(result, "client.connected", attempt=1).t)


@pytest.mark.parametrize("direction", ["both", "to_server", "to_client"])
def test_drop_silences_the_chosen_direction(runs_dir: Path, direction: str) -> None:
    """drop: the client's pings go unanswered, it declares loss 2.0-2.5 s later; the server is
    never told; packets of the dropped direction stop crossing the router."""
    result = run(runs_dir, f"drop-{direction}",
                 f"  - {{id: cut, {CONNECTED}, do: {{fault: drop, direction: {direction}}}}}\n")
    assert after_connected(result, "cut") >= 1.0
    lost_by_its_rule(result, first(result, "fault.applied", step="cut").t, 2.0 - CLOCKS_AGREE_S)
    assert result.exit_codes["client"] == 1
    assert not [e for e in result.observed if e.name == "server.closed"]
    applied = first(result, "fault.applied", step="cut").t
    from_server = packets_after(result, applied + CLOCKS_AGREE_S, "server")
    assert packets_after(result, 0.0, "server") > from_server  # it did send before
    if direction == "to_server":
        assert from_server > 0  # the server's ticks still reach the client's link
    else:
        assert from_server == 0


def test_drop_at_the_client_keeps_its_packets_home(runs_dir: Path) -> None:
    """drop at: client discards in the client's own namespace: none of its packets reach the
    router's link, and the client still only learns through its pings."""
    result = run(runs_dir, "drop-at-client",
                 f"  - {{id: cut, {CONNECTED}, do: {{fault: drop, at: client}}}}\n")
    lost_by_its_rule(result, first(result, "fault.applied", step="cut").t, 2.0 - CLOCKS_AGREE_S)
    applied = first(result, "fault.applied", step="cut").t
    assert packets_after(result, 0.0, "client") > 0  # it did send before
    assert packets_after(result, applied + CLOCKS_AGREE_S, "client") == 0


def test_drop_of_one_connection_spares_the_next(runs_dir: Path) -> None:
    """drop connection: first hurts only the first connection; the client's reconnection
    (a new connection) works while that fault is still applied."""
    result = run(runs_dir, "drop-first",
                 "  - {id: cut, when: {connection: 1}, after: 1s, "
                 "do: {fault: drop, connection: first}}\n",
                 duration="7s", extra=", --reconnect")
    applied = first(result, "fault.applied", step="cut")
    assert applied.fields["connection"] == "first"
    # The drop holds until the run ends (teardown reverts it, after what is judged)...
    assert not [e for e in result.observed if e.name == "fault.reverted"]
    assert [e.name for e in result.events if e.name == "fault.reverted"] == ["fault.reverted"]
    # ...and the second connection is made and lives under it.
    connected = [e for e in result.observed if e.name == "client.connected"]
    assert [e.fields["attempt"] for e in connected] == [1, 2]
    assert applied.t < first(result, "client.lost").t < first(result, "tcp.connect", k=2).t
    assert result.exit_codes["client"] == 0  # the second connection lasted to the end


def test_drop_of_an_unseen_connection_is_a_lab_error(runs_dir: Path) -> None:
    """Selecting a connection that does not exist yet fails the run with exit 3 and a reason."""
    result = run_profile("name: noconn\n" + peers("4s") +
                         "timeline:\n  - {when: {at: 1s}, do: {fault: drop, connection: 3}}\n",
                         runs_dir)
    assert result.exit_code == 3
    assert "no TCP connection 3" in (result.error or "")


def test_reject_toward_the_client_resets_it(runs_dir: Path) -> None:
    """reject toward client: the client's next packet is answered with a RST: abnormal 1006."""
    result = run(runs_dir, "reject-client",
                 "  - {id: rst, when: {event: client.connected, where: {attempt: 1}}, after: 1s,"
                 " do: {fault: reject, toward: client}}\n")
    applied = first(result, "fault.applied", step="rst")
    assert applied.t - first(result, "client.connected").t >= 1.0 - 1e-3
    closed = first(result, "client.closed")
    assert closed.fields["code"] == 1006 and closed.fields["by"] == "peer"
    # The RST, in the server's name, came once the fault was being applied, and closed the client.
    assert applied.began <= first(result, "tcp.rst", **{"from": "server"}).t < closed.t
    assert result.exit_codes["client"] == 2


def test_reject_toward_the_server_resets_it_first(runs_dir: Path) -> None:
    """reject toward server: the server's next tick is answered with a RST; it sees 1006 before
    the client learns anything."""
    result = run(runs_dir, "reject-server",
                 f"  - {{id: rst, {CONNECTED}, do: {{fault: reject, toward: server}}}}\n")
    server = first(result, "server.closed")
    assert server.fields["code"] == 1006 and server.fields["received_close"] is False
    assert first(result, "fault.applied", step="rst").began <= server.t
    client = first(result, "client.closed")
    assert client.t >= server.t


def test_link_down_then_restore(runs_dir: Path) -> None:
    """link_down: the client loses carrier and its pings die; restore brings the link back and
    the client's reconnection succeeds."""
    result = run(runs_dir, "cable",
                 f"  - {{id: pull, {CONNECTED}, do: {{fault: link_down}}}}\n"
                 "  - {id: plug, when: {step: pull}, after: 3s, do: {fault: restore}}\n",
                 duration="7s", extra=", --reconnect")
    lost_by_its_rule(result, first(result, "fault.applied", step="pull").t, 2.0 - CLOCKS_AGREE_S)
    reverted = first(result, "fault.reverted", step="pull")
    plug = first(result, "fault.applied", step="plug")
    assert plug.fields["reverted"] == ["pull"]
    # The link is up from when the restore began; its events are stamped once it is done.
    assert first(result, "client.lost").t < reverted.t
    assert plug.began < first(result, "tcp.connect", k=2).t
    assert result.exit_codes["client"] == 0


def test_short_drop_is_survived_and_restore_reverts(runs_dir: Path) -> None:
    """A drop restored after 300 ms goes unnoticed: TCP retransmits, pings are answered in time."""
    result = run(runs_dir, "blip",
                 f"  - {{id: blip, {CONNECTED}, do: {{fault: drop}}}}\n"
                 "  - {when: {step: blip}, after: 300ms, do: {fault: restore, faults: [blip]}}\n",
                 duration="4s")
    assert not [e for e in result.observed if e.name == "client.lost"]
    gap = first(result, "fault.reverted", step="blip").t - first(result, "fault.applied", step="blip").t
    assert gap >= 0.3
    assert result.exit_codes["client"] == 0


def test_faults_record_their_apply_time_and_fire_no_sooner_than_due(runs_dir: Path) -> None:
    """Each fault records how long it took from trigger to kernel commit; a time trigger
    (`at`) fires no sooner than that long after the client's start. (How few milliseconds each
    takes, and how late a fault fires: `make bench`.)"""
    result = run(runs_dir, "quick",
                 "  - {id: a, when: {at: 1s}, do: {fault: drop, direction: to_client}}\n"
                 "  - {id: b, when: {at: 1.2s}, do: {fault: link_down}}\n", duration="2s")
    client_started = first(result, "process.start", role="client").t
    for step, at in (("a", 1.0), ("b", 1.2)):
        applied = first(result, "fault.applied", step=step)
        ms = applied.fields["applied_in_ms"]
        assert ms > 0
        fired = applied.t - ms / 1000
        # Event times are rounded to the microsecond; never early (late only on a busy machine,
        # by how much `make bench` measures).
        assert fired - client_started >= at - 1e-5
        assert applied.fields["trigger"] == f"at {at:g}s"
