"""faultlab explore on real runs: the booking conversation against the emulator, with the path
dropped after the server's messages. The naive client's failing windows are found without being
told where, shrunk to a profile that `faultlab run` fails, and confirmed; the recovering client
is clean on the same space; an exploration cut by Ctrl-C keeps what it measured, leaves nothing
behind, and goes on where it stopped. Small spaces and short client timers, so that each
exploration takes well under a minute; tests/test_explore.py checks each decision exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ..conftest import REPO, faultlab, patience
from .helpers import host_network_state, lab_traces

# In the first lane, beside other tests: an exploration's verdicts are its runs' outcomes (the
# booking, what the user is told, the exit code), not deadlines, and it changes nothing of the
# host's. Four labs at once (`--jobs auto` would be 16 on 2 cores), as a lane's worker may add
# beside the others. Alone, with 16, the two whole-space explorations kept the machine 24-28 %
# busy for 67 s (2026-12-06): they mostly wait on their runs' timers.
pytestmark = pytest.mark.lab

# The booking conversation with short timers: a client that cannot resume gives up after 3 s.
BASE = """\
name: {name}
target:
  emulator: {{personality: gemini-dev-2026-10}}
client:
  builtin: {client}
  args: [--commit, 2s, --retry-after, 1s, {give_up}]
  env: {{GOOGLE_API_KEY: not-a-real-key}}
expect:
  - {{bookings: 1}}
  - {{truthful: true}}
  - {{exit_code: 0}}
explore:
  at: {{from: server, kinds: [{kinds}]}}
  after: [{after}]
  faults:
    - {{fault: drop, connection: first}}
  refine: 0s
  confirm: 3
timeout: 30s
"""
NAIVE = {"client": "naive", "give_up": "--give-up-after, 3s"}
RECOVERY = {"client": "field-recovery", "give_up": "--window, 2s"}


def base(tmp: Path, name: str, client: dict[str, str], kinds: str, after: str) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(BASE.format(name=name, kinds=kinds, after=after, **client))
    return path


def explore(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return faultlab("explore", *args, timeout=patience(timeout))


def runs_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line)["run"] for line in
            (folder / "journal.jsonl").read_text().splitlines()[1:]]


def leftovers(folder: Path) -> list[str]:
    """What the exploration's runs built that is still there: their labs (namespaces, scratch,
    lease) and processes (the jobs' faultlab, their targets and clients)."""
    found = []
    for events in folder.glob("runs/*/events.jsonl"):
        lines = [json.loads(line) for line in events.read_text().splitlines() if line.endswith("}")]
        start = next(e for e in lines if e["event"] == "run.start")
        ready = next((e for e in lines if e["event"] == "lab.ready"), None)
        if ready is not None:
            found += lab_traces(int(ready["slot"]), int(start["pid"]))
        for pid in [start["pid"], *(e["pid"] for e in lines if e["event"] == "process.start")]:
            try:
                os.kill(int(pid), 0)
                found.append(f"pid {pid} ({events.parent.name}) still runs")
            except ProcessLookupError:
                pass
    return found


@pytest.mark.timeout(patience(400))
def test_the_naive_clients_windows_are_found_shrunk_and_confirmed(tmp_path: Path) -> None:
    host = host_network_state()
    # (Lost right after set-up, this client waits for its timeout: 30 s a run, left out here.)
    profile = base(tmp_path, "explore-naive", NAIVE, "toolCall, serverContent.turnComplete",
                   "0s")
    out = tmp_path / "x"
    done = explore("--jobs", "4", "--out", str(out), str(profile))
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads((out / "explore.json").read_text())
    assert data["complete"] and data["unhurt"]["outcome"] == "pass"
    assert [b["kind"] for b in data["boundaries"]][:2] == ["tool_call",
                                                           "server_content.turn_complete"]
    outcomes = {p["describe"]: p["outcome"] for p in data["points"]}
    # Lost after the tool call: the booking commits and the user is never told.
    assert outcomes['drop (connection: "first") 0s after server tool_call'] == (
        "fail: the user is told the truth & client exits with 0"), outcomes
    # Lost once the last turn is over: nothing left to tell, the run passes.
    last = f"server server_content.turn_complete #{data['boundaries'][-1]['nth']}"
    assert outcomes[f'drop (connection: "first") 0s after {last}'] == "pass", outcomes
    failures = {f["outcome"]: f for f in data["failures"]}
    untold = failures["fail: the user is told the truth & client exits with 0"]
    assert untold["confirmed"] == "3 of 3" and not untold["flaky"]
    # Shrunk to the earliest trigger that fails so, with no delay.
    assert untold["minimal"]["steps"][0]["after"] == 0
    minimal = out / untold["profile"]
    text = minimal.read_text()
    assert text.startswith("# Found by `faultlab explore`") and "explore:" not in text
    # The committed profile fails with `faultlab run`, as the exploration said.
    rerun = faultlab("run", "-q", "--runs-dir", str(tmp_path / "rerun"), str(minimal),
                     timeout=patience(90))
    assert rerun.returncode == 1, rerun.stdout
    assert "FAIL the user is told the truth" in rerun.stdout
    # Each run's report is where the map links.
    page = (out / "explore.html").read_text()
    first = data["runs"][untold["minimal"]["key"]][0]["run_dir"]
    assert f'href="{first}/report.html"' in page and (out / first / "report.html").exists()
    assert leftovers(out) == []
    assert not list(Path("/tmp").glob(f"faultlab-job-*{os.getpid()}*"))
    assert host_network_state() == host


@pytest.mark.timeout(patience(300))
def test_the_recovering_client_is_clean_on_the_same_space(tmp_path: Path) -> None:
    # Lost at once after set-up (no handle yet: a new session must be restored) and half a
    # second later (the request sent, its tool call lost: the restored turn must be answered):
    # the two windows exploring found in this client.
    profile = base(tmp_path, "explore-recovery", RECOVERY, "setupComplete, toolCall",
                   "0s, 500ms")
    done = explore("--jobs", "4", "-q", "--out", str(tmp_path / "x"), str(profile))
    data = json.loads((tmp_path / "x" / "explore.json").read_text())
    assert done.returncode == 0, done.stdout + done.stderr + json.dumps(data["points"])
    assert data["failures"] == [] and data["counts"] == {"pass": 4}


@pytest.mark.timeout(patience(500))
def test_an_exploration_cut_by_ctrl_c_keeps_its_runs_and_goes_on(tmp_path: Path) -> None:
    host = host_network_state()
    profile = base(tmp_path, "explore-cut", NAIVE, "toolCall", "0s, 1s, 2s")
    out = tmp_path / "x"
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultlab", "explore", "--jobs", "2", "--confirm", "1", "-q",
         "--out", str(out), str(profile)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    journal = out / "journal.jsonl"
    deadline = time.monotonic() + patience(120)
    # The head, the unhurt run, and a point: another is running when the signal comes.
    while time.monotonic() < deadline and (
            not journal.exists() or len(journal.read_text().splitlines()) < 3):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=patience(60))
    assert proc.returncode == 130, output
    measured = runs_of(out)
    assert 2 <= len(measured) < 4 and all(r["verdict"] != "ERROR" for r in measured), measured
    data = json.loads((out / "explore.json").read_text())
    assert not data["complete"] and data["stopped"] == "interrupted"
    assert leftovers(out) == [] and host_network_state() == host
    # Going on: what was measured is not run again, and it ends as one exploration would.
    done = explore("--jobs", "2", "-q", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    again = runs_of(out)
    assert again[:len(measured)] == measured
    firsts = [(r["key"], r["purpose"], r["repeat"]) for r in again]
    assert len(firsts) == len(set(firsts))
    data = json.loads((out / "explore.json").read_text())
    assert data["complete"] and data["failures"]
    assert leftovers(out) == []
