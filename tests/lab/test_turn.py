"""The lab's TURN server (coturn): started when a profile has `turn`, on the transports it asks
for, with credentials a real TURN client (aioice's) allocates with; its relay carries a datagram
through the lab; its log's sessions are the run's events; nothing of it is left after the run."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from .helpers import failed, first, lab_traces, run_profile

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(shutil.which("turnserver") is None,
                                 reason="no coturn: make install brings it")]

CLIENT = Path(__file__).with_name("turn_client.py")


def profile(name: str, turn: str, args: str = "", steps: str = "") -> str:
    return f"""\
name: {name}
turn: {turn}
client:
  command: [{sys.executable}, {CLIENT}{args}]
timeout: 30s
{steps}"""


def test_a_client_allocates_on_each_transport_and_the_relay_carries_its_datagram(
        runs_dir: Path) -> None:
    """UDP, TCP and TLS (the run's CA trusted): each allocation is relayed from the server's
    address, and a datagram sent through it reaches the client's own socket from that relayed
    address. The credentials are the TURN REST API's, the secret never on the command line."""
    result = run_profile(profile("turn-all", "{udp: true, tcp: true, tls: true}"), runs_dir)
    assert result.error is None, failed(result) + (result.run_dir / "client.log").read_text()
    ready = first(result, "turn.ready").fields
    server = ready["address"]
    assert ready["transports"] == ["udp", "tcp", "tls"]
    assert ready["urls"] == [f"turn:{server}:3478?transport=udp",
                             f"turn:{server}:3478?transport=tcp",
                             f"turns:{server}:5349?transport=tcp"]
    failures = [e.fields for e in result.observed if e.name == "client.turn_failed"]
    assert failures == []
    allocated = {e.fields["url"]: e.fields["relayed"] for e in result.observed
                 if e.name == "client.turn_allocated"}
    relayed = {e.fields["url"]: e.fields["came_from"] for e in result.observed
               if e.name == "client.turn_relayed"}
    assert sorted(allocated) == sorted(ready["urls"]) and relayed == allocated
    assert all(address.split(":")[0] == server for address in allocated.values())
    # The TURN server's log says as much: an allocation each (one over TLS), with the address
    # the client was given, and the end of the TCP and TLS sessions.
    logged = [e.fields for e in result.observed if e.name == "turn.allocation"]
    assert sorted(a["relayed"] for a in logged) == sorted(allocated.values())
    assert sum(a["tls"] for a in logged) == 1
    ended = [e.fields for e in result.observed
             if e.name == "turn.closed" and e.fields["transport"] != "udp"]  # UDP's: its expiry
    assert sorted(e["transport"] for e in ended) == ["tcp", "tls"], ended
    assert all(int(e["bytes_from_client"]) > 0 for e in ended)
    start = first(result, "process.start", role="turn").fields
    secret = (result.run_dir / "turnserver.conf").read_text().split("=", 1)[1].strip()
    assert secret and secret not in " ".join(start["argv"])
    assert (result.run_dir / "turnserver.conf").stat().st_mode & 0o077 == 0
    assert lab_traces(int(first(result, "lab.ready").fields["slot"]), os.getpid()) == []
    with pytest.raises(ProcessLookupError):
        os.kill(int(start["pid"]), 0)


def test_only_the_transports_asked_for_listen(runs_dir: Path) -> None:
    """TCP alone (as where a network lets only TCP through): the client is given that URL only,
    and its allocation relays."""
    result = run_profile(profile("turn-tcp", "{udp: false, tcp: true, tls: false}"), runs_dir)
    assert result.error is None, failed(result) + (result.run_dir / "client.log").read_text()
    ready = first(result, "turn.ready").fields
    assert ready["transports"] == ["tcp"]
    tcp = [f"turn:{ready['address']}:3478?transport=tcp"]
    assert ready["urls"] == tcp
    assert [e.fields["url"] for e in result.observed if e.name == "client.turn_relayed"] == tcp


def test_with_udp_blocked_toward_the_server_tcp_and_tls_still_relay(runs_dir: Path) -> None:
    """`drop` of UDP toward the server (an egress firewall that lets only TCP out), in force
    before the client's first allocation: the UDP allocation meets silence and fails, the TCP and
    TLS ones relay (their relay's datagram comes back toward the client, which the rule lets
    through)."""
    block = """\
timeline:
  - id: no-udp
    when: {at: 0s}
    do: {fault: drop, protocol: udp, direction: to_server}
"""
    result = run_profile(profile("turn-udp-blocked", "{}",
                                 ", --round, fault.applied, --wait, '1.5'", block), runs_dir)
    assert result.error is None, failed(result) + (result.run_dir / "client.log").read_text()
    assert first(result, "fault.applied", step="no-udp").fields["protocol"] == "udp"
    urls = first(result, "turn.ready").fields["urls"]
    failures = {e.fields["url"]: e.fields["error"] for e in result.observed
                if e.name == "client.turn_failed"}
    assert list(failures) == [urls[0]] and "Timeout" in failures[urls[0]], failures
    relayed = [e.fields["url"] for e in result.observed if e.name == "client.turn_relayed"]
    assert relayed == urls[1:]


def test_a_turn_server_that_dies_refuses_until_it_is_restored(runs_dir: Path) -> None:
    """turn_down kills coturn (SIGKILL) once the client has relayed on each URL: an allocation
    while it is down fails (TCP and TLS: refused at once), one after the restore relays again
    with the same credentials; a new server is ready in between, and none is left after the
    run."""
    steps = """\
timeline:
  - id: down
    when: {event: client.turn_round, where: {round: 0}}
    do: {fault: turn_down}
  - id: up
    when: {event: client.turn_round, where: {round: 1}}
    do: {fault: restore, faults: [down]}
"""
    result = run_profile(profile("turn-dies", "{udp: false}",
                                 ", --round, start, --round, fault.applied, --round, fault.reverted,"
                                 " --wait, '2'", steps), runs_dir)
    assert result.error is None, failed(result) + (result.run_dir / "client.log").read_text()
    killed = first(result, "fault.applied", step="down")
    pid = killed.fields["pid"]
    exits = [e for e in result.observed if e.name == "process.exit" and e.fields["role"] == "turn"]
    assert exits and exits[0].fields["code"] == -9 and exits[0].t >= killed.began
    starts = [e.fields["pid"] for e in result.events
              if e.name == "process.start" and e.fields["role"] == "turn"]
    assert starts[0] == pid and len(starts) == 2
    ready = [e.t for e in result.observed if e.name == "turn.ready"]
    assert len(ready) == 2 and killed.t < ready[1] <= first(result, "fault.reverted", step="down").t
    outcome = {(e.fields["round"], e.fields["url"].split(":")[0]): e.name.rsplit("_", 1)[1]
               for e in result.observed if e.name in ("client.turn_relayed", "client.turn_failed")}
    assert outcome == {(0, "turn"): "relayed", (0, "turns"): "relayed",
                       (1, "turn"): "failed", (1, "turns"): "failed",
                       (2, "turn"): "relayed", (2, "turns"): "relayed"}, outcome
    refused = [e.fields["error"] for e in result.observed if e.name == "client.turn_failed"]
    assert all("ConnectionRefused" in error for error in refused), refused
    for start in starts:
        with pytest.raises(ProcessLookupError):
            os.kill(int(start), 0)
