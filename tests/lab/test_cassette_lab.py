"""Cassettes in the lab: a run records its sessions (`faultlab run --record`), and the cassette,
served with no emulator behind it under the same faults, gives the client the same session and
the suite table the same row; the proxy records a target that records nothing itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from faultlab.cassette.format import RUN_CASSETTE, read_cassette
from faultlab.report.record import RESULT_FILE, RunRecord
from faultlab.report.suite import table
from faultlab.vocabulary.server import CassetteWritten

from ..conftest import PROFILES, faultlab
from .helpers import assert_events_known, failed, run_profile
from .remote import remote_echo

pytestmark = pytest.mark.lab

# Two field scenarios (an abort after a reply; one after a toolCall, its booking made on the
# resumed connection), an OpenAI one whose client reconnects, and an OpenAI one whose path drops
# every packet after the function call (a packet fault on the replay's path).
RECORDED = ["field/R0", "field/R1", "openai/abort-recovery", "openai/silent-loss-naive"]
# The table's columns that a replay must give as the emulator did; the latency columns must be
# measured in the replay where they were in the recording (their values are the machine's: a
# recorded delay is served after the message it followed, tests/test_cassette.py pins when).
SAME = ("runs", "verdicts", "resumes refused", "bookings", "user told")
LATENCY = ("detected", "resumed", "recovered")


def runs_of(runs_dir: Path) -> dict[str, Path]:
    return {RunRecord.load(p).profile: p.parent for p in runs_dir.glob(f"*/{RESULT_FILE}")}


def rows(run_dirs: list[Path]) -> dict[str, dict[str, str]]:
    header, body = table([RunRecord.load(d / RESULT_FILE) for d in run_dirs])
    return {row[0]: dict(zip(header, row, strict=True)) for row in body}


def client_events(run_dir: Path) -> list[str]:
    """The client's events in order, by name (what it did and saw)."""
    lines = (json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines())
    return [e["event"] for e in lines if e["source"] == "client"]


def replaying(profile: Path, cassette: Path, folder: Path, prefix: str = "replay-") -> Path:
    """`profile` with the cassette as its target, its checks of the emulator's own events left
    out (a replay writes none of them), named `prefix` + its name."""
    data: dict[str, Any] = yaml.safe_load(profile.read_text())
    data["name"] = prefix + data["name"]
    data["target"] = {"cassette": str(cassette)}
    data["expect"] = [e for e in data["expect"] if "emulator." not in json.dumps(e)]
    data["expect"].append({"count": {"event": "cassette.diverged"}, "equals": 0})
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def seconds(cell: str) -> float | None:
    return None if cell == "-" else float(cell.removesuffix(" s"))


@pytest.mark.alone  # four labs at once, each run judged by its timings
def test_recorded_sessions_replay_to_the_same_client_events_and_table_row(tmp_path: Path) -> None:
    """Record two field scenarios and two OpenAI ones against the emulator; replay each cassette
    under the same faults, beside the shipped cassettes' profiles (R0 and R1 as recorded once, R0
    as made of a run's capture) and a cassette made of R0's capture here (`cassette from-pcap` of
    its folder: the capture of the client's wss:// through the proxy and the run's TLS key logs,
    message for message the conversation the target recorded):
    every replay passes, the client's events are the recorded run's, kind for kind and in order,
    and the suite table's row is the emulator's (the same latencies measured)."""
    # Four at once (two took 97 s where four take about 60).
    recorded = faultlab("run", "-q", "--jobs", "4", "--record", "--no-timeline", "--runs-dir",
                        str(tmp_path / "recorded"), *(str(PROFILES / f"{p}.yaml") for p in RECORDED),
                        timeout=300)
    assert recorded.returncode == 0, recorded.stdout
    originals = runs_of(tmp_path / "recorded")
    replays = []
    for name, run_dir in originals.items():
        cassette = read_cassette(run_dir / RUN_CASSETTE)  # readable, and a real conversation
        assert cassette.connections and all(rec.said for rec in cassette.connections), name
        assert not list(run_dir.glob("*.tape.jsonl"))  # the tape went into the cassette
        source = next(PROFILES / f"{p}.yaml" for p in RECORDED
                      if yaml.safe_load((PROFILES / f"{p}.yaml").read_text())["name"] == name)
        replays.append(replaying(source, run_dir / RUN_CASSETTE, tmp_path))
    captured = from_pcap(originals["field-R0"], tmp_path / "R0.cassette.jsonl")
    from_capture = replaying(PROFILES / "field" / "R0.yaml", captured, tmp_path,
                             "replay-capture-")
    # The eight replays at once (a replay mostly waits on the recorded timings).
    replayed = faultlab("run", "-q", "--jobs", "8", "--no-timeline", "--runs-dir",
                        str(tmp_path / "replayed"), *map(str, replays), str(from_capture),
                        str(PROFILES / "cassettes"), timeout=300)
    assert replayed.returncode == 0, replayed.stdout
    assert_events_known(tmp_path / "recorded")
    assert_events_known(tmp_path / "replayed")
    again = runs_of(tmp_path / "replayed")
    assert sorted(again) == sorted([f"replay-{n}" for n in originals] + [
        "replay-capture-field-R0", "cassettes-R0", "cassettes-R1", "cassettes-R0-from-pcap"])
    for name, run_dir in originals.items():
        assert client_events(again[f"replay-{name}"]) == client_events(run_dir), name
    assert client_events(again["replay-capture-field-R0"]) == client_events(originals["field-R0"])
    before, after = rows(list(originals.values())), rows(list(again.values()))
    pairs = [(name, f"replay-{name}") for name in originals]
    pairs += [("field-R0", "cassettes-R0"), ("field-R1", "cassettes-R1"),
              ("field-R0", "cassettes-R0-from-pcap")]
    for emulated, served in pairs:
        row, replay_row = before[emulated], after[served]
        assert [row[c] for c in SAME] == [replay_row[c] for c in SAME], (row, replay_row)
        for column in LATENCY:
            a, b = seconds(row[column]), seconds(replay_row[column])
            assert (a is None) == (b is None), (column, row, replay_row)


def test_the_proxy_records_a_target_that_records_nothing(tmp_path: Path) -> None:
    """Against a remote service, the proxy in the path writes the tape: the client's messages
    and the service's, each tied to the message it followed, and the client's close."""
    with remote_echo(tmp_path / "remote") as remote:
        body = f"""\
record: true
client:
  builtin: ws-client
  args: [--url, "{remote.url}", --duration, 2s]
expect:
  - {{exit_code: 0}}
timeout: 20s
"""
        result = run_profile(remote.profile("remote-record", body), tmp_path / "runs")
    assert result.verdict == "PASS", failed(result)
    assert any(CassetteWritten.is_one(e) for e in result.events)
    cassette = read_cassette(result.run_dir / RUN_CASSETTE)
    assert cassette.source == "proxy"
    (conn,) = cassette.connections
    sides = {s.sender for s in conn.said}
    assert sides == {"client", "server"}
    answered = [s for s in conn.server if s.after > 0]
    assert answered, "no server message followed a client one"
    assert conn.ending is not None and conn.ending.by == "client"
    shown = faultlab("cassette", "show", str(result.run_dir))
    assert shown.returncode == 0 and "connection 1" in shown.stdout


def conversation(path: Path) -> list[list[tuple[str, str, Any]]]:
    """Each connection's messages: side, kind and content (JSON as data: its spacing aside)."""
    def content(payload: str | bytes) -> Any:
        try:
            return json.loads(payload)
        except ValueError:
            return payload

    return [[(s.sender, s.kind, content(s.payload)) for s in rec.said]
            for rec in read_cassette(path).connections]


def from_pcap(run_dir: Path, made: Path) -> Path:
    """`cassette from-pcap` of a recorded run's folder: a cassette of the capture's conversation,
    message for message the one the target recorded."""
    built = faultlab("cassette", "from-pcap", str(run_dir), "--out", str(made))
    assert built.returncode == 0, built.stderr
    assert read_cassette(made).source == "capture"
    assert conversation(made) == conversation(run_dir / RUN_CASSETTE)
    return made
