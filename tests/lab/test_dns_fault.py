"""dns in a real lab: a client that reconnects by name (tests/lab/dns_client.py, glibc's
resolver) meets each answer kind from the lab's resolver while the step holds, resolves again
after the restore, keeps its open connection throughout; the run's teardown, and `lab gc` after
a SIGKILL, leave no resolver process, socket or namespace."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from faultlab.lab import uplink
from faultlab.result import RunResult

from ..conftest import faultlab, patience
from .helpers import (
    LONG,
    failed,
    first,
    lab_slot,
    lab_traces,
    pid_alive,
    run_events,
    run_profile,
    run_slot,
    start_run,
)
from .remote import HOST, remote_echo

pytestmark = pytest.mark.lab

CLIENT = Path(__file__).with_name("dns_client.py")


ECHO = "target: {builtin: ws-echo-server, port: 8765}\nhosts: [echo.lab]\n"


def steps(answer: str, extra: str = "", hold: str = "1.2s") -> str:
    return f"""\
timeline:
  - id: dns
    when: {{event: client.connected, where: {{attempt: 1}}}}
    after: 800ms
    do: {{fault: dns, answer: {answer}{extra}}}
  - {{id: heal, when: {{step: dns}}, after: {hold}, do: {{fault: restore}}}}
timeout: 20s
"""


def client(url: str, duration_s: float, *names: str) -> str:
    more = "".join(f', "{name}"' for name in names)
    return f'client: {{command: [{sys.executable}, {CLIENT}, "{url}", "{duration_s}"{more}]}}\n'


def lookups(result: RunResult) -> list[dict[str, Any]]:
    """The client's lookups, each with `start` and `end` on the run clock."""
    t0 = first(result, "run.start").fields["unix_time"]
    out = []
    for e in result.observed:
        if e.source == "client" and e.name == "lookup":
            start = e.fields["started"] - t0
            out.append({**e.fields, "start": start, "end": start + e.fields["ms"] / 1000})
    return out


@pytest.mark.parametrize(("answer", "extra", "hold", "duration_s", "error", "ms"), [
    ("nxdomain", "", "1.2s", 3.5, "EAI_NONAME", (0, 100)),
    ("servfail", "", "1.2s", 3.5, "EAI_AGAIN", (0, 100)),
    # resolv.conf's timeout:1 attempts:2: glibc asks twice, a second each.
    ("none", "", "3s", 5.5, "EAI_AGAIN", (1950, 2300)),
    ("slow", ", delay: 600ms", "1.4s", 3.5, None, (600, 750)),
])
def test_reconnects_meet_the_answer_until_restored(runs_dir: Path, answer: str, extra: str,
                                                    hold: str, duration_s: float,
                                                    error: str | None,
                                                    ms: tuple[float, float]) -> None:
    """Every lookup begun while the step holds meets its answer (the lookup fails with the
    EAI code glibc gives it, or succeeds late), every lookup begun after the restore resolves
    at once, the WebSocket opened before answers a ping at the end, and the resolver's events
    say what it answered; teardown leaves no resolver process and nothing of the lab."""
    result = run_profile(f"name: dns-{answer}\n{ECHO}" + client("ws://echo.lab:8765/", duration_s)
                         + steps(answer, extra, hold), runs_dir)
    assert result.error is None, failed(result)
    assert first(result, "fault.applied", step="dns").fields["names"] == ["echo.lab"]
    assert_met(result, error, ms)
    started = first(result, "process.start", role="resolver")
    assert not pid_alive(int(started.fields["pid"]))
    assert lab_traces(lab_slot(result), os.getpid()) == []


def test_a_remote_target_s_name_fails_through_the_uplink(runs_dir: Path, tmp_path: Path) -> None:
    """A remote service (on this machine's loopback, pinned to `host-loopback`) is looked up by
    its host name with the lab's resolver, which answers the pinned address; a dns step fails
    the name until restored, over TLS through the uplink as in the lab."""
    with remote_echo(tmp_path / "remote") as remote:
        result = run_profile(remote.profile("dns-remote", client(remote.url, 3.5)
                                            + steps("nxdomain")), runs_dir)
    assert result.error is None, failed(result)
    assert first(result, "fault.applied", step="dns").fields["names"] == [HOST]
    assert first(result, "lookup").fields["address"] == str(uplink.HOST_LOOPBACK)
    assert_met(result, "EAI_NONAME", (0, 100))


def test_without_a_resolver_no_lookup_leaves_the_client(runs_dir: Path) -> None:
    """With no name server in the lab (a target in it, no dns step), a name the lab does not hold
    (a page's font host) fails at once, refused on the client's own loopback: no query leaves
    the client (the host's resolv.conf had them go to the host's name server, an address outside
    the lab, which the router could only refuse); the lab's own names resolve from its hosts."""
    result = run_profile("name: no-resolver\n" + ECHO
                         + client("ws://echo.lab:8765/", 0.5, "fonts.googleapis.com")
                         + "timeout: 20s\n", runs_dir)
    assert result.error is None, failed(result)
    outside = first(result, "lookup", host="fonts.googleapis.com").fields
    assert outside["ok"] is False, outside
    assert all(x["ok"] for x in lookups(result) if x["host"] == "echo.lab")
    tshark = shutil.which("tshark")
    assert tshark, "make install brings tshark"
    queries = subprocess.run([tshark, "-n", "-r", str(result.run_dir / "capture.pcap"), "-Y",
                              "udp.port == 53", "-T", "fields", "-e", "ip.dst"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert queries == []
    assert result.exit_codes["client"] == 0


def assert_met(result: RunResult, error: str | None, ms: tuple[float, float]) -> None:
    """Every lookup begun while the step held met its answer (`error`, None: resolved, in `ms`:
    never sooner), those begun before and after it resolved, the resolver decided by the step
    only the queries that came while it held, and the open WebSocket lived through."""
    applied = first(result, "fault.applied", step="dns")
    reverted = first(result, "fault.reverted", step="dns").t
    seen = lookups(result)
    before = [x for x in seen if x["end"] < applied.t]
    # Begun once the resolver had the rule (it is stamped after the resolver's reply), and with
    # time to meet it whole before the restore: a lookup whose retry comes after the restore is
    # answered (a silent first try, then the address: 1 s).
    during = [x for x in seen if applied.t < x["start"] < reverted - ms[1] / 1000]
    after = [x for x in seen if x["start"] > reverted + 0.01]  # the client's clock and the run's
    assert before and during and after, seen
    assert all(x["ok"] for x in before + after), seen
    for x in during:
        assert x["ok"] is (error is None) and x.get("error") == error, x
        assert x["ms"] >= ms[0], x
    # The step decided (its answer, its delay) only what came between its rule and its removal.
    queries = [e for e in result.observed if e.name == "dns.query"]
    decided = [e for e in queries if e.fields.get("step") == "dns"]
    assert decided and all(applied.began <= e.t <= reverted for e in decided), queries
    assert first(result, "existing").fields["ok"] is True
    assert first(result, "dns.query", answer=applied.fields["answer"]).source == "resolver"
    assert result.exit_codes["client"] == 0


# helpers' long run with a dns step in place of its drop (its ws-client connects by address,
# so the step hurts nothing: it only has to be applied while the run is killed).
WITH_DNS = LONG.replace("name: long\n", "name: long\nhosts: [echo.lab]\n").replace(
    "do: {fault: drop, direction: to_client, connection: latest}", "do: {fault: dns, answer: none}")


def test_sigkill_while_applied_then_gc_leaves_nothing(tmp_path: Path) -> None:
    """SIGKILL of `faultlab run` while a dns step holds: the resolver dies with it (or with
    gc), and `lab gc` removes the namespaces and the scratch folder with its control socket."""
    proc, run_dir = start_run(tmp_path, profile_text=WITH_DNS)
    slot = run_slot(run_dir)
    resolver = next(e for e in run_events(run_dir)
                    if e["event"] == "process.start" and e["role"] == "resolver")
    assert pid_alive(int(str(resolver["pid"])))
    proc.kill()
    proc.wait(timeout=patience(5))
    done = faultlab("lab", "gc")
    assert done.returncode == 0, done.stderr
    assert not pid_alive(int(str(resolver["pid"])))
    assert lab_traces(slot, proc.pid) == []
