"""Frame triggers in a real run: one frame log per run, one numbering of connections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..conftest import faultlab

pytestmark = pytest.mark.lab

BOTH_LOGS = """\
name: nth-both-logs
description: A proxy and an emulator both log every frame; the step follows the proxy's only.
target:
  emulator: {time_scale: 0.1}
client:
  builtin: live-probe
  args: [--say, "Hello there.", --say, "How are you?", --listen, 2s]
  env: {GOOGLE_API_KEY: not-a-real-key}
proxy: true
timeline:
  - id: second
    when: {frame: {from: server, kind: serverContent.turnComplete, nth: 2}}
    do: {fault: restore}
expect:
  - {exit_code: 0}
timeout: 30s
"""


def events(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def test_nth_counts_messages_not_log_lines(tmp_path: Path) -> None:
    """With both a proxy and an emulator logging frames, `nth: 2` fires on the second matching
    message (after the proxy relays it), not on the first message logged twice; frames carry
    the connection number of the capture's `tcp.connect`."""
    profile = tmp_path / "p.yaml"
    profile.write_text(BOTH_LOGS)
    runs = tmp_path / "runs"
    done = faultlab("run", "-q", "--runs-dir", str(runs), str(profile))
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = runs.iterdir()
    evs = events(run_dir)
    turn_ends = [e["t"] for e in evs if e["event"] == "proxy.frame"
                 and e["from"] == "server" and "turn_complete" in str(e.get("kind"))]
    emulated = [e["t"] for e in evs if e["event"] == "emulator.frame"
                and e["from"] == "server" and "turn_complete" in str(e.get("kind"))]
    assert len(turn_ends) == 2 and len(emulated) == 2
    (applied,) = [e for e in evs if e["event"] == "fault.applied"]
    assert applied["step"] == "second" and applied["trigger"].startswith("on frame")
    # On the second message, once the proxy relayed it: not on the first one, logged twice (and
    # no later frame matches: the session has two turns).
    assert turn_ends[1] <= float(applied["t"])  # type: ignore[arg-type, operator]
    (syn,) = [e for e in evs if e["event"] == "tcp.connect"]
    assert {e["k"] for e in evs if e["event"] == "proxy.frame"} == {syn["k"]} == {1}
