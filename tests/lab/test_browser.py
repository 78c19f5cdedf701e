"""A web page in the lab's headless Chromium: its frames on the run's clock, its console and
errors as events, a screenshot, and no browser (or Node) process left after the run or a
SIGKILL."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faultlab.browser.chromium import unavailable

from ..conftest import PROFILES, REPO, faultlab, patience
from .helpers import host_network_state, pid_alive, run_events

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]

PAGE = Path(__file__).parent / "pages" / "live"
PROFILE = """\
name: web-test-page
target:
  emulator: {{personality: gemini-dev-2026-10}}
client:
  browser: {{serve: {page}, path: "{path}", timeout: {timeout}}}
timeout: 40s
"""


def processes_naming(text: str) -> list[int]:
    """The pids of live processes whose command line holds `text` (a browser's profile, a run's
    folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in argv and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_a_page_runs_in_the_lab(tmp_path: Path) -> None:
    """The page, served on the client's loopback (a secure context), reaches the emulator by the
    service's name with the run's CA; its WebSocket frames fall on the run clock between the
    capture's SYN and the emulator's receipt; its own events, console lines and exceptions are
    events; it ends on its done event with a screenshot, and no browser process is left."""
    profile = tmp_path / "page.yaml"
    profile.write_text(PROFILE.format(page=PAGE, path="/", timeout="20s"))
    before = host_network_state()
    done = faultlab("run", "--runs-dir", str(tmp_path / "runs"), str(profile))
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = next((tmp_path / "runs").iterdir())
    events = run_events(run_dir)

    def first(name: str, **fields: object) -> dict[str, object]:
        return next(e for e in events if e["event"] == name
                    and all(e.get(k) == v for k, v in fields.items()))

    assert first("client.page")["secure"] is True
    assert first("browser.console", text="a plain line")["level"] == "log"
    assert "an uncaught one" in str(first("browser.error")["text"])
    syn = first("tcp.connect", k=1)
    sent = first("browser.frame", **{"from": "client", "kind": "setup"})
    heard = first("emulator.frame", **{"from": "client", "kind": "setup"})
    answered = first("emulator.frame", **{"from": "server", "kind": "setup_complete"})
    received = first("browser.frame", **{"from": "server", "kind": "setup_complete"})
    # One clock: cause before effect across the capture, the browser and the emulator.
    times = [float(str(e["t"])) for e in (syn, sent, heard, answered, received)]
    assert times == sorted(times), times
    assert first("browser.end")["why"] == "done"
    for shot in ("browser-end.png", "browser-error.png"):
        assert (run_dir / shot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    start = first("browser.start")
    assert not Path(str(start["profile"])).exists(), "the browser's profile is removed"
    assert not pid_alive(int(str(start["pid"])))
    assert processes_naming(f"--user-data-dir={start['profile']}") == []
    assert host_network_state() == before


def killed_run(tmp_path: Path, profile: Path, running: str) -> Path:
    """The folder of a run of `profile`, SIGKILLed once its events show `running`."""
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "faultlab", "run", "--runs-dir", str(runs),
                             str(profile)], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + patience(30)
    while time.monotonic() < deadline:
        files = list(runs.glob("*/events.jsonl"))
        if files and f'"{running}"' in files[0].read_text():
            proc.kill()
            proc.wait(timeout=patience(5))
            return files[0].parent
        time.sleep(0.1)
    proc.kill()
    proc.wait(timeout=patience(5))
    raise AssertionError(f"no {running} in time")


# Alone: its `lab gc` would collect another test's killed run before that test's own gc looks.
@pytest.mark.alone
def test_no_browser_outlives_a_sigkilled_run(tmp_path: Path) -> None:
    """A run SIGKILLed while its page is open: once `lab gc` has run, none of its browser's
    processes is left, nor its profile folder."""
    profile = tmp_path / "page.yaml"
    profile.write_text(PROFILE.format(page=PAGE, path="/?stay", timeout="60s"))
    run_dir = killed_run(tmp_path, profile, "browser.frame")
    start = next(json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()
                 if '"browser.start"' in line)
    done = faultlab("lab", "gc")
    assert done.returncode == 0, done.stderr
    assert processes_naming(f"--user-data-dir={start['profile']}") == []
    assert not pid_alive(int(start["pid"]))
    assert not Path(start["profile"]).exists(), done.stdout


@pytest.mark.alone
@pytest.mark.skipif(shutil.which("node") is None, reason="no node: make install brings it")
def test_no_node_outlives_a_sigkilled_run(tmp_path: Path) -> None:
    """A run of the Node client SIGKILLed mid-session: node, in the client's namespace, lives on
    until `lab gc`, which ends it."""
    run_dir = killed_run(tmp_path, PROFILES / "web" / "silent-loss-node.yaml", "client.connected")
    assert processes_naming(str(run_dir)), "node is still running"
    done = faultlab("lab", "gc")
    assert done.returncode == 0, done.stderr
    assert processes_naming(str(run_dir)) == []
