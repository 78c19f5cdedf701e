"""Suites in CI: labs at once that never interfere, shards that merge into the whole suite, and
profiles as pytest tests (with pytest-xdist)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import junitparser
import pytest

from faultlab.report.record import RunRecord

from ..conftest import PROFILES, REPO, faultlab, patience
from .helpers import lab_traces, run_events, run_slot

# Each test that runs several labs at once is marked `alone`; the fixture's test runs one lab at a
# time and goes in the first lane.
pytestmark = pytest.mark.lab

# Eight labs, each its own cut at its own time with its own expectations: a lab that saw another's
# fault (or packets) would fail its own (it would lose its client before its own cut, or twice).
# No expectation has a deadline: on two cores, eight labs are as late as the machine makes them.
ONE_OF_EIGHT = """\
name: eight-{i}
target: {{builtin: ws-echo-server, port: {port}}}
client:
  builtin: ws-client
  args: [--duration, 6s, --ping-interval, 250ms, --lost-after, 1s, --close-timeout, 300ms]
hosts: [echo.faultlab.test]
timeline:
  - id: cut-{i}
    when: {{event: client.connected}}
    after: {at}ms
    do: {{fault: drop, direction: both}}
expect:
  - {{event: client.connected}}
  - event: fault.applied
    where: {{step: cut-{i}}}
    after: {{event: client.connected}}
    not_before: {at}ms
  - event: client.lost
    after: {{event: fault.applied, where: {{step: cut-{i}}}}}
    not_before: 1s
  - {{count: {{event: fault.applied}}, equals: 1}}
  - {{count: {{event: tcp.fin, where: {{from: server}}}}, equals: 0}}
  - {{exit_code: 1}}
timeout: 12s
"""


@pytest.mark.alone
def test_eight_labs_at_once_never_interfere(tmp_path: Path) -> None:
    """`--jobs 8`: eight labs run together (distinct slots, subnets, ports, fault times), every
    profile PASSes as alone, and the suite table has their eight rows."""
    folder = tmp_path / "eight"
    folder.mkdir()
    for i in range(8):
        # Each fault its own moment after its client connected (a client's start takes over a
        # second when eight labs start at once on two cores).
        at = 300 + 300 * i
        (folder / f"eight-{i}.yaml").write_text(ONE_OF_EIGHT.format(
            i=i, port=8700 + i, at=at))
    runs = tmp_path / "runs"
    done = faultlab("run", "--jobs", "8", "-q", "--runs-dir", str(runs), str(folder),
                    timeout=patience(120))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
    assert "# faultlab suite: 8 of 8 runs passed" in done.stdout
    records = [RunRecord.load(p) for p in runs.glob("*/result.json")]
    assert sorted(r.profile for r in records) == [f"eight-{i}" for i in range(8)]
    slots = {run_slot(Path(r.run_dir)) for r in records}
    assert len(slots) == 8
    # Together: at some moment at least half of them were running (`started` is to the
    # second, so each counts from a second after it).
    spans = [(datetime.fromisoformat(r.started).timestamp() + 1, r.duration_s - 1)
             for r in records]
    assert max(sum(s <= t <= s + d for s, d in spans) for t, _ in spans) >= 4, spans


def suite_rows(text: str) -> dict[str, list[str]]:
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines()
            if line.startswith("| ")]
    return {cells[0]: cells[:3] for cells in rows[2:]}


QUICK = ["silent-loss", "reset", "clean-close", "cable-pull"]


@pytest.mark.alone
def test_two_shards_merged_equal_the_whole_suite(tmp_path: Path) -> None:
    """Shards 1/2 and 2/2 (as two CI machines would run them) merged: the same scenarios with the
    same verdicts as the suite run whole, and one JUnit file with every run (the worst exit code
    is judged in tests/test_record.py)."""
    def whole() -> subprocess.CompletedProcess[str]:
        return faultlab("run", "--jobs", "4", "-q", "--runs-dir", str(tmp_path / "whole"), *QUICK,
                        timeout=patience(120))

    def shard(k: int) -> subprocess.CompletedProcess[str]:
        return faultlab("run", "--shard", f"{k}/2", "--jobs", "2", "-q", "--runs-dir",
                        str(tmp_path / f"shard{k}"), "--junit", str(tmp_path / f"junit{k}.xml"),
                        *QUICK, timeout=patience(120))

    # The shards at the same time, as two CI machines would run them, and the whole beside them.
    with ThreadPoolExecutor(3) as machines:
        running = machines.submit(whole)
        done = list(machines.map(shard, (1, 2)))
        whole_run = running.result()
    assert whole_run.returncode == 0, whole_run.stdout[-3000:]
    shards = []
    for k, ran in zip((1, 2), done, strict=True):
        assert ran.returncode == 0, ran.stdout[-3000:]
        shards.append({r.profile for r in map(RunRecord.load,
                                                (tmp_path / f"shard{k}").glob("*/result.json"))})
    assert shards[0] and shards[1] and not shards[0] & shards[1]
    merged = faultlab("report", "merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"),
                      "--junit", str(tmp_path / "junit.xml"), "--out", str(tmp_path / "m.md"))
    assert merged.returncode == 0, merged.stderr
    (table,) = (tmp_path / "whole").glob("suite-*.md")
    assert suite_rows((tmp_path / "m.md").read_text()) == suite_rows(table.read_text())
    assert junitparser.JUnitXml.fromfile(str(tmp_path / "junit.xml")).tests == len(QUICK)


@pytest.mark.alone
def test_sigterm_stops_every_job_and_their_labs(tmp_path: Path) -> None:
    """SIGTERM to a `--jobs` suite: each running job tears its lab down, the table and the JUnit
    file tell the interrupted runs; exit 143."""
    folder = tmp_path / "long"
    folder.mkdir()
    for i in range(3):
        (folder / f"long-{i}.yaml").write_text(ONE_OF_EIGHT.format(
            i=i, port=8800 + i, at=8000, late=9000).replace("--duration, 6s", "--duration, 30s")
            .replace("timeout: 12s", "timeout: 40s"))
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "faultlab", "run", "--jobs", "3", "-q",
                             "--runs-dir", str(runs), "--junit", str(tmp_path / "junit.xml"),
                             str(folder)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + patience(30)
    while time.monotonic() < deadline:
        ready = [f for f in runs.glob("*/events.jsonl") if "client.connected" in f.read_text()]
        if len(ready) == 3:
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the three jobs never all connected")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=patience(60))
    assert proc.returncode == 143
    # The reports of what ran are written all the same: three runs, interrupted.
    assert "# faultlab suite: 0 of 3 runs passed" in out.decode()
    assert junitparser.JUnitXml.fromfile(str(tmp_path / "junit.xml")).errors == 3
    for events in runs.glob("*/events.jsonl"):
        names = [e["event"] for e in run_events(events.parent)]
        assert names[-1] == "run.end" and "run.interrupted" in names
        starts = [e for e in run_events(events.parent) if e["event"] == "run.start"]
        assert lab_traces(run_slot(events.parent), int(starts[0]["pid"])) == []  # type: ignore[call-overload]


@pytest.mark.alone
def test_pytest_collects_profiles_and_runs_them_with_xdist(tmp_path: Path) -> None:
    """`pytest --collect-only profiles/` lists every profile by name; `pytest -n 2` runs two
    profiles (the two shortest), one per worker, each with its own labs, and both pass."""
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                             "-p", "no:cacheprovider", str(PROFILES)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, check=False)
    names = set(re.findall(r"::(\S+)$", listed.stdout, re.M))
    assert {"silent-loss", "field-BR1", "field-A4-no-keepalive"} <= names, listed.stdout[-2000:]
    assert len(names) == len(list(PROFILES.rglob("*.yaml"))), listed.stdout[-2000:]
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-q", "-p",
                           "no:cacheprovider", "--faultlab-runs-dir", str(tmp_path / "runs"),
                           str(PROFILES / "clean-close.yaml"), str(PROFILES / "reset.yaml")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=patience(180),
                          check=False)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout[-3000:]
    assert len(list((tmp_path / "runs").glob("*/result.json"))) == 2


FIXTURE_TEST = '''
def test_inline(faultlab):
    result = faultlab.run("""
name: fixture-inline
target: {builtin: ws-echo-server, port: 8765}
client: {builtin: ws-client, args: [--duration, 2s]}
hosts: [echo.faultlab.test]
expect: [{exit_code: 0}, {count: {event: client.lost}, equals: 1}]
""")
    assert result.verdict == "FAIL"
    (failed,) = result.failed_expectations
    assert failed["seen"] == "0"
'''


def test_the_fixture_runs_an_inline_profile_and_a_failure_is_told(tmp_path: Path) -> None:
    """The `faultlab` fixture returns the run's record for the test's own assertions; a profile
    that FAILs as a collected test shows its failed expectation and its run folder."""
    (tmp_path / "test_mine.py").write_text(FIXTURE_TEST)
    (tmp_path / "failing.yaml").write_text(
        "name: failing\ntarget: {builtin: ws-echo-server, port: 8765}\n"
        "client: {builtin: ws-client, args: [--duration, 1s]}\nhosts: [echo.faultlab.test]\n"
        "expect: [{exit_code: 7}]\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--faultlab-runs-dir", str(tmp_path / "runs"), str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=patience(120),
                          check=False)
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
    assert "FAIL client exits with 7  (seen: exit code 0)" in done.stdout, done.stdout[-3000:]
    assert f"run folder: {tmp_path / 'runs'}" in done.stdout
    assert json.loads(next((tmp_path / "runs").glob("*-failing/result.json")).read_text())[
        "verdict"] == "FAIL"
