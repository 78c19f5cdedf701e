"""A remote target through the router's uplink (slirp4netns): packet faults on the real path,
app faults through the proxy, the host's network untouched, nothing left behind.

The "remote" service is faultlab's echo server over TLS on this machine's loopback, reached as
`live.faultlab.test` through the uplink (`address: host-loopback`): no other address, ever.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from faultlab.lab.uplink import DNS

from ..conftest import faultlab, patience
from .helpers import (
    failed,
    first,
    host_network_state,
    lab_traces,
    pid_alive,
    run_events,
    run_profile,
    start_run,
)
from .remote import remote_echo

pytestmark = pytest.mark.lab


def test_remote_target_survives_a_drop_through_the_uplink(tmp_path: Path) -> None:
    """A 3 s silent drop on the router cuts the real path: the client declares the connection
    lost, connects again once the path is back, and the run passes; the host is untouched."""
    before = host_network_state()
    with remote_echo(tmp_path / "remote") as remote:
        body = f"""\
client:
  builtin: ws-client
  args: [--url, "{remote.url}", --duration, 9s, --ping-interval, 500ms, --lost-after, 2s,
         --reconnect]
timeline:
  - {{id: gone, when: {{at: 2s}}, do: {{fault: drop}}}}
  - {{id: back, when: {{step: gone}}, after: 3s, do: {{fault: restore, faults: [gone]}}}}
capture: {{server_pcap: true}}
expect:
  - {{count: {{event: client.lost}}, equals: 1}}
  - {{event: client.lost, after: {{event: fault.applied, where: {{step: gone}}}}, not_before: 1s}}
  - {{count: {{event: tcp.connect}}, at_least: 2}}
  - {{exit_code: 0}}
timeout: 25s
"""
        result = run_profile(remote.profile("remote-drop", body), tmp_path / "runs")
        served = remote.events.read_text()
    assert result.verdict == "PASS", failed(result)
    ready = first(result, "lab.ready")
    assert ready.fields["uplink"] == "slirp4netns" and ready.fields["host_loopback"] == "10.0.2.2"
    # The client reached the service on 10.0.2.2 (the host's loopback), resolved by the hosts file.
    connect = first(result, "tcp.connect")
    assert connect.fields["server"] == "10.0.2.2"
    assert '"peer": "127.0.0.1:' in served  # seen by the service as from this machine
    run_dir = result.run_dir
    assert (run_dir / "etc" / "resolv.conf").read_text() == f"nameserver {DNS}\n"
    assert (run_dir / "client-keys.log").stat().st_size > 0
    assert (run_dir / "server.pcap").stat().st_size > 0
    assert not pid_alive(int(ready.fields["uplink_pid"]))
    assert host_network_state() == before
    # The capture decrypts with the client's key log: the last connection's frames, its close.
    done = faultlab("pcap", "inspect", "--json", str(run_dir))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["keylogs"] == [str(run_dir / "client-keys.log")]
    last = report["flows"][-1]
    assert last["tls"] and last["decrypted"]
    closes = [(f["direction"], f["close_code"], f["close_reason"])
              for f in last["websocket_frames"] if f["opcode"] == "close"]
    assert closes == [("client->server", 1000, "done"), ("server->client", 1000, "done")]
    assert sum(f["opcode"] == "text" for f in last["websocket_frames"]) > 10
    # server.pcap, on the uplink, is told to hold slirp4netns's TCP, not the service's.
    server = faultlab("pcap", "server", "--json", str(run_dir))
    assert server.returncode == 0, server.stderr
    assert any("the uplink's own stack" in note for note in json.loads(server.stdout)["notes"])


def test_app_fault_through_the_proxy_against_a_remote_target(tmp_path: Path) -> None:
    """The proxy stands between the client and the remote service, verifying the service's
    certificate with the system's CAs and the remote's `ca`; its close reaches the client."""
    with remote_echo(tmp_path / "remote") as remote:
        body = f"""\
client:
  builtin: ws-client
  args: [--url, "{remote.url}", --duration, 5s]
timeline:
  - id: bye
    when: {{connection: 1}}
    after: 1s
    do: {{fault: close, code: 4001, reason: remote bye, to: client}}
expect:
  - event: client.closed
    where: {{code: 4001, reason: remote bye, by: peer}}
    after: {{event: fault.applied, where: {{step: bye}}}}
  - {{exit_code: 2}}
timeout: 20s
"""
        result = run_profile(remote.profile("remote-close", body), tmp_path / "runs")
        served = remote.events.read_text()
    assert result.verdict == "PASS", failed(result)
    assert '"received_close": true' in served  # the client's answer, relayed to the service
    trust = (result.run_dir / "trust.pem").read_text()
    assert trust.count("BEGIN CERTIFICATE") > 2  # the system's, the lab's and the remote's CA


def test_a_remote_target_without_the_host_loopback_cannot_reach_it(tmp_path: Path) -> None:
    """Unless a remote target asks for `host-loopback`, the uplink refuses this machine's own
    services: a client aimed at 10.0.2.2 fails to connect."""
    with remote_echo(tmp_path / "remote") as remote:
        body = f"""\
name: no-loopback
target:
  remote: {{host: live.faultlab.test, port: {remote.port}, address: 10.0.2.2, ca: {remote.ca}}}
client:
  builtin: ws-client
  args: [--url, "{remote.url}", --duration, 2s]
expect:
  - {{exit_code: 3}}
timeout: 15s
"""
        result = run_profile(body, tmp_path / "runs")
        served = remote.events.read_text()
    assert result.verdict == "PASS", failed(result)
    assert "server.connected" not in served


def test_sigkill_ends_the_uplink_and_gc_clears_the_lab(tmp_path: Path) -> None:
    """A SIGKILLed remote run's slirp4netns ends with it (its exit pipe closes); `lab gc`
    removes the namespaces, and the host is as before."""
    before = host_network_state()
    with remote_echo(tmp_path / "remote") as remote:
        text = remote.profile("remote-long", f"""\
client: {{builtin: ws-client, args: [--url, "{remote.url}", --duration, 30s]}}
timeline:
  - {{id: cut, when: {{connection: 1}}, after: 500ms, do: {{fault: drop}}}}
timeout: 40s
""")
        proc, run_dir = start_run(tmp_path, "--jobs", "1", profile_text=text)
        ready = next(e for e in run_events(run_dir) if e["event"] == "lab.ready")
        uplink = int(str(ready["uplink_pid"]))
        assert pid_alive(uplink)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=patience(5))
        deadline = time.monotonic() + patience(3)
        while pid_alive(uplink) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(uplink)
    done = faultlab("lab", "gc")
    assert done.returncode == 0, done.stderr
    assert lab_traces(int(str(ready["slot"])), proc.pid) == []
    assert host_network_state() == before


# Docker changes the host's own network (its bridge, its rules), which other lab tests compare
# before and after: alone, as tests/lab/test_docker.py.
@pytest.mark.docker
@pytest.mark.alone
def test_a_container_client_reaches_a_remote_target(clients_image: str, tmp_path: Path) -> None:
    """A client container, wired into the same router, resolves and reaches the remote service
    through the uplink with the lab's hosts, resolv.conf and trust, and writes its TLS keys."""
    with remote_echo(tmp_path / "remote") as remote:
        body = f"""\
client:
  builtin: ws-client
  image: {clients_image}
  args: [--url, "{remote.url}", --duration, 3s]
expect:
  - {{count: {{event: client.connected}}, equals: 1}}
  - {{exit_code: 0}}
timeout: 30s
"""
        result = run_profile(remote.profile("remote-container", body), tmp_path / "runs")
        served = remote.events.read_text()
    assert result.verdict == "PASS", failed(result)
    assert first(result, "process.start", role="client").fields["image"] == clients_image
    assert "server.connected" in served
    assert (result.run_dir / "client-keys.log").stat().st_size > 0
