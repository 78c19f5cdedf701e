"""The namespace lab itself: topology, isolation, concurrency, sysctls, hosts file, cleanup."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
import sys
from pathlib import Path

import pytest

from faultlab.lab.netns import ROOT_NETNS_DIR, NetnsLab, lease_path

from .helpers import failed, first, host_network_state, lab_slot, lab_traces, peers, run_profile

pytestmark = pytest.mark.lab


def _reach(address: str, port: int) -> str:
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect((address, port))
        return "connected"
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return type(exc).__name__
    finally:
        s.close()


def _read(path: str) -> str:
    return Path(path).read_text().strip()


def _netns_inode() -> int:
    """The network namespace the calling thread is in."""
    return os.stat("/proc/thread-self/ns/net").st_ino


def test_client_reaches_server_through_the_router_and_nothing_is_left() -> None:
    """The client's packets cross the router to the server; teardown removes every trace."""

    async def scenario() -> tuple[str, int]:
        async with NetnsLab() as lab:
            names = [ns.name for ns in (lab.client, lab.router, lab.server)]
            assert names == [f"faultlab-{lab.slot}-{role}" for role in ("client", "router", "server")]
            assert all((ROOT_NETNS_DIR / n).exists() for n in names)
            assert lease_path(lab.slot).read_text().split()[0] == str(os.getpid())
            # A RST from the server's kernel proves the SYN crossed the router.
            outcome = await lab.client.run(_reach, str(lab.server_address), 9)
            return outcome, lab.slot

    outcome, slot = asyncio.run(scenario())
    assert outcome == "refused"
    assert lab_traces(slot, os.getpid()) == []


def _operstates() -> dict[str, str]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return {link.get_attr("IFLA_IFNAME"): link.get_attr("IFLA_OPERSTATE")
                for link in ipr.get_links() if link.get_attr("IFLA_IFNAME") != "lo"}


def test_every_link_of_a_lab_is_up_once_it_is_ready() -> None:
    """When a lab is entered, the kernel has handled every link's carrier: each is operationally
    up (a link that is not may drop the first packets; the client's eth0, with the ifindex of its
    peer, was DOWN for a second after every setup)."""

    async def scenario() -> list[dict[str, str]]:
        async with NetnsLab() as lab:
            return [await ns.run(_operstates) for ns in (lab.client, lab.router, lab.server)]

    assert asyncio.run(scenario()) == [{"eth0": "UP"}, {"c0": "UP", "s0": "UP"}, {"eth0": "UP"}]


def test_two_labs_at_once_have_distinct_names_and_subnets() -> None:
    """Labs run side by side: names and addresses come from distinct slots."""

    async def scenario() -> None:
        async with NetnsLab() as a, NetnsLab() as b:
            assert a.slot != b.slot
            assert a.client.name != b.client.name
            assert not a.addressing.client_net.overlaps(b.addressing.client_net)
            assert a.addressing.client_net.subnet_of(ipaddress.ip_network("198.18.0.0/15"))

    asyncio.run(scenario())


def test_sysctls_are_per_namespace() -> None:
    """A profile's sysctl changes its namespace and not the host."""
    host_before = _read("/proc/sys/net/ipv4/tcp_retries2")

    async def scenario() -> tuple[str, str, str]:
        async with NetnsLab(sysctl={"server": {"net.ipv4.tcp_retries2": 5}}) as lab:
            return (await lab.server.run(_read, "/proc/sys/net/ipv4/tcp_retries2"),
                    await lab.client.run(_read, "/proc/sys/net/ipv4/tcp_retries2"),
                    await lab.router.run(_read, "/proc/sys/net/ipv4/ip_forward"))

    server, client, forward = asyncio.run(scenario())
    assert server == "5" and client == host_before and forward == "1"
    assert _read("/proc/sys/net/ipv4/tcp_retries2") == host_before


def test_namespace_thread_runs_in_its_namespace() -> None:
    """Work handed to a namespace runs inside it, not in the host's namespace."""

    async def scenario() -> tuple[str, str, int, int]:
        async with NetnsLab() as lab:
            return (await lab.router.run(_read, "/proc/thread-self/net/dev"),
                    await lab.client.run(_read, "/proc/thread-self/net/dev"),
                    await lab.router.run(_netns_inode), os.stat(lab.router.path).st_ino)

    router, client, router_thread_ns, router_ns = asyncio.run(scenario())
    assert "c0:" in router and "s0:" in router
    assert "eth0:" in client and "c0:" not in client
    # The router's worker thread is in the namespace bound at the router's name, and this
    # thread (the host's) is not.
    assert router_thread_ns == router_ns != _netns_inode()


def test_client_env_and_hosts_file(runs_dir: Path) -> None:
    """The client gets the run's variables and resolves the profile's host names to the target."""
    script = (
        "import os, socket; from faultlab.events import EventWriter; "
        "EventWriter().emit('probe', resolved=socket.gethostbyname('api.example.test'), "
        "target=os.environ['FAULTLAB_TARGET'], run_dir=os.environ['FAULTLAB_RUN_DIR'])"
    )
    text = f"""\
name: env
target: {{builtin: ws-echo-server, port: 8765}}
client: {{command: [python3, -c, "{script}"]}}
hosts: [api.example.test]
expect: [{{exit_code: 0}}]
timeout: 10s
"""
    text = text.replace("python3", sys.executable)
    hosts_before = Path("/etc/hosts").read_text()
    result = run_profile(text, runs_dir)
    assert result.exit_code == 0, failed(result)
    probe = first(result, "probe")
    server = first(result, "lab.ready").fields["server"].split("/")[0]
    assert probe.fields["resolved"] == server
    assert probe.fields["target"] == f"{server}:8765"
    assert probe.fields["run_dir"] == str(result.run_dir)
    # Only the client's own view changed: the host's /etc/hosts is as it was.
    assert Path("/etc/hosts").read_text() == hosts_before


def test_a_run_leaves_the_host_network_byte_identical(runs_dir: Path) -> None:
    """Links, routes, rules, namespaces and iptables of the host are the same after a run."""
    before = host_network_state()
    text = "name: hostcheck\n" + peers("4s") + """\
timeline:
  - {id: pull, when: {at: 1s}, do: {fault: link_down}}
  - {id: cut, when: {at: 1.3s}, do: {fault: drop, at: client}}
  - {id: rst, when: {at: 1.6s}, do: {fault: reject}}
"""
    result = run_profile(text, runs_dir)
    assert result.error is None, failed(result)
    assert [e.fields["step"] for e in result.events if e.name == "fault.applied"] == [
        "pull", "cut", "rst"]
    assert host_network_state() == before
    # Its own lab is gone: namespaces and lease (other runs' labs may come and go meanwhile).
    assert lab_traces(lab_slot(result), os.getpid()) == []


def test_target_that_never_listens_fails_the_lab(runs_dir: Path) -> None:
    """A target that exits before listening is a lab error (exit 3) that names its log."""
    text = """\
name: deadtarget
target: {command: [sh, -c, "echo no luck; exit 4"], port: 8765}
client: {builtin: ws-client}
timeout: 10s
"""
    result = run_profile(text, runs_dir)
    assert result.exit_code == 3
    assert "exited with code 4" in (result.error or "") and "target.log" in (result.error or "")
    assert "no luck" in (result.run_dir / "target.log").read_text()
    summary = (result.run_dir / "summary.md").read_text()
    assert "ERROR" in summary
    events = [json.loads(x) for x in (result.run_dir / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "run.end"


def test_target_that_is_slow_to_listen_fails_at_its_ready_timeout(runs_dir: Path) -> None:
    """A target still alive but not listening at `ready_timeout` is a lab error naming the port,
    the wait and its log."""
    text = """\
name: slowtarget
target: {command: [sleep, "30"], port: 8765, ready_timeout: 0.5s}
client: {builtin: ws-client}
timeout: 10s
"""
    result = run_profile(text, runs_dir)
    assert result.exit_code == 3
    assert "did not listen on port 8765 within 0.5s" in (result.error or ""), result.error
    assert "target.log" in (result.error or "")


def test_timeout_stops_the_client(runs_dir: Path) -> None:
    """A client still running at `timeout` is stopped; the run records it and goes on to judge."""
    text = """\
name: slow
client: {command: [sleep, "30"]}
expect: [{exit_code: 0}]
timeout: 1s
settle: 0s
"""
    result = run_profile(text, runs_dir)
    started = first(result, "process.start", role="client").t
    # The timeout counts from the client's start, as time triggers do.
    timeout = first(result, "run.timeout")
    assert timeout.fields["timeout_s"] == 1.0 and timeout.t - started >= 1.0
    # Stopped by the run (SIGTERM) then, not left to sleep its 30 s: it exited by that signal,
    # which `sleep` dies of.
    (stopped,) = [e for e in result.events if e.matches("process.exit", {"role": "client"})]
    assert stopped.fields["stopped_by_run"] is True and stopped.fields["signal"] == "SIGTERM"
    assert "killed" not in stopped.fields and timeout.t <= stopped.t
    assert result.exit_code == 1
    assert result.outcomes[0].seen == "still running at the end"


def test_emulator_target_serves_an_unmodified_sdk_client(runs_dir: Path) -> None:
    """`target: {emulator: ...}`: the SDK reaches the emulator by the service's own host name
    over TLS (the run's CA), and the emulator's events join the run's."""
    client = Path(__file__).with_name("sdk_client.py")
    text = f"""\
name: emulated
target: {{emulator: {{time_scale: 0.1}}}}
client:
  command: [{sys.executable}, {client}]
  env: {{GOOGLE_API_KEY: not-a-real-key}}
expect:
  - {{exit_code: 0}}
  - {{event: client.reply, where: {{text: "You said: Hello from the lab"}}}}
  - {{count: {{event: emulator.connect}}, equals: 1}}
  - {{event: tcp.connect, where: {{server_port: 443}}}}
timeout: 30s
"""
    result = run_profile(text, runs_dir)
    assert result.exit_code == 0, failed(result) + (result.run_dir / "client.log").read_text()
    assert (result.run_dir / "ca" / "ca.pem").exists()
    assert "CLIENT_TRAFFIC_SECRET" in (result.run_dir / "emulator-keys.log").read_text()
    assert "generativelanguage.googleapis.com" in (result.run_dir / "etc" / "hosts").read_text()
