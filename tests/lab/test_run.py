"""The shipped profiles, run through the CLI as a user would."""

from __future__ import annotations

import difflib
import json
import re
import threading
from pathlib import Path

import pytest

from faultlab.capture.pcap import read_segments

from ..conftest import PROFILES, faultlab, patience
from .helpers import assert_events_known, host_network_state

pytestmark = pytest.mark.lab


def only_run_dir(runs_dir: Path) -> Path:
    (run_dir,) = list(runs_dir.iterdir())
    return run_dir


def events(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def test_silent_loss_demo(tmp_path: Path) -> None:
    """`faultlab run profiles/silent-loss.yaml`: exit 0, the run folder holds the artifacts, loss
    is declared by the client's rule no sooner than 2 s after the fault, and the capture shows
    the server's silence, from the fault on, with no FIN or RST from it."""
    runs_dir = tmp_path / "runs"
    done = faultlab("run", "--runs-dir", str(runs_dir), str(PROFILES / "silent-loss.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = only_run_dir(runs_dir)
    for name in ("events.jsonl", "capture.pcap", "summary.md"):
        assert (run_dir / name).stat().st_size > 0
    evs = events(run_dir)
    fault = next(e for e in evs if e["event"] == "fault.applied")
    lost = next(e for e in evs if e["event"] == "client.lost")
    fault_t, lost_t = float(fault["t"]), float(lost["t"])  # type: ignore[arg-type]
    # A ping unanswered for over --lost-after 2s (one is sent every 500 ms), sent once the fault
    # was in (or a round trip before its stamp).
    assert lost["unanswered_s"] > 2.0  # type: ignore[operator]
    assert lost_t - fault_t >= 2.0 - 0.05
    assert "PASS" in (run_dir / "summary.md").read_text()

    inspect = faultlab("pcap", "inspect", "--json", str(run_dir / "capture.pcap"))
    assert inspect.returncode == 0, inspect.stderr
    report = json.loads(inspect.stdout)
    (flow,) = report["flows"]
    down = flow["server_to_client"]
    assert down["fin"] == 0 and down["rst"] == 0
    # The capture's clock is the run's clock plus unix_time: the first packet (the SYN) is the
    # run's tcp.connect.
    t0 = float(next(e for e in evs if e["event"] == "run.start")["unix_time"])  # type: ignore[arg-type]
    first_packet_t = min(s.ts for s in read_segments(run_dir / "capture.pcap")) - t0
    connect = next(e for e in evs if e["event"] == "tcp.connect")
    assert abs(first_packet_t - float(connect["t"])) < 1e-3  # type: ignore[arg-type]
    # The server's silence starts by the fault (at its last packet before it) and lasts to the
    # end of the capture, while the client's TCP retransmits into it (200, 400, 800 ms apart:
    # the capture's last packet is the client's).
    silence_from = first_packet_t + down["longest_silence_from_t"]
    assert silence_from <= fault_t + 0.01
    assert down["longest_silence_from_t"] + down["longest_silence_s"] == pytest.approx(
        report["duration_s"], abs=1e-5)
    assert flow["client_to_server"]["retransmissions"] >= 3
    assert down["longest_silence_s"] >= 1.4
    frames = flow["websocket_frames"]
    assert any(f["opcode"] == "ping" for f in frames) and any(f["opcode"] == "pong" for f in frames)
    text = faultlab("pcap", "inspect", str(run_dir / "capture.pcap"))
    assert "server->client" in text.stdout and "longest silence" in text.stdout


SHIPPED = ["silent-loss-restore", "reset", "cable-pull", "app-freeze", "clean-close", "drop-pongs",
           "slow-server", "abort-on-toolcall", "dns-fails-on-reconnect", "middlebox-reset",
           "mtu-blackhole", "nat-idle-timeout", "nat-rebind", "tls-stall-on-reconnect"]


# The host's sysctls the lab's faults set in their own namespaces (nat_timeout's conntrack
# settings, the router's forwarding): the host's must never change.
HOST_SYSCTLS = ["net/ipv4/ip_forward", "net/netfilter/nf_conntrack_tcp_loose",
                "net/netfilter/nf_conntrack_tcp_be_liberal",
                "net/netfilter/nf_conntrack_tcp_timeout_established"]


def host_state() -> str:
    """The host's network (links, routes, rules, namespaces but the labs') and sysctls."""
    sysctls = [f"{name} = {path.read_text().strip() if path.exists() else '(none)'}"
               for name in HOST_SYSCTLS for path in [Path("/proc/sys", name)]]
    return host_network_state() + "\n".join(sysctls)


@pytest.mark.alone
def test_shipped_profiles_pass(tmp_path: Path) -> None:
    """Each shipped profile's expectations hold (run seven at a time, as a user's suite would:
    22 s, where four at a time took 31 s, the machine 60 % busy instead of 46 %), and the
    host's links, routes, rules and sysctls are as before all the while (sampled every half
    second)."""
    before, changed, over = host_state(), [], threading.Event()

    def watch() -> None:
        while not over.wait(0.5):
            if (now := host_state()) != before:
                changed.append(now)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        # No timeline.png (tests/report draws it).
        done = faultlab("run", "-q", "--jobs", "7", "--no-timeline", "--runs-dir", str(tmp_path),
                        *(str(PROFILES / f"{name}.yaml") for name in SHIPPED), timeout=patience(180))
    finally:
        over.set()
        watcher.join()
    verdicts = dict(re.findall(r"^== (\S+): (\w+)", done.stdout, re.M))
    assert verdicts == dict.fromkeys(SHIPPED, "PASS"), done.stdout[-4000:] + done.stderr
    assert done.returncode == 0
    assert_events_known(tmp_path)
    assert not changed, "".join(difflib.unified_diff(before.splitlines(True),
                                                     changed[0].splitlines(True)))
    assert host_state() == before


def test_failed_expectation_exits_1(tmp_path: Path) -> None:
    """A profile whose expectation does not hold exits 1 and says which."""
    profile = tmp_path / "wrong.yaml"
    profile.write_text((PROFILES / "silent-loss.yaml").read_text()
                       .replace("- {exit_code: 1}", "- {exit_code: 0}"))
    done = faultlab("run", "-q", "--runs-dir", str(tmp_path / "runs"), str(profile))
    assert done.returncode == 1
    assert "FAIL client exits with 0  (seen: exit code 1)" in done.stdout
