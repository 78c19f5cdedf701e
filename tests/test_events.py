import json
from pathlib import Path

from faultlab.events import Event, EventBus, EventFileTail, EventWriter, RunClock, redact


def test_secrets_are_redacted_at_any_depth() -> None:
    """API keys and resumption handles become a length and a short hash."""
    out = redact({"setup": {"sessionResumption": {"handle": "h" * 36}},
                  "headers": [{"x-goog-api-key": "AIzaSECRET"}], "other": "kept"})
    handle = out["setup"]["sessionResumption"]["handle"]
    assert handle.startswith("<redacted len=36 sha256=") and "hhhh" not in handle
    assert "SECRET" not in json.dumps(out)
    assert out["other"] == "kept"


def test_same_secret_gets_the_same_redaction() -> None:
    """Two occurrences of one handle can still be told equal."""
    assert redact({"handle": "abc"}) == redact({"handle": "abc"})
    assert redact({"handle": "abc"}) != redact({"handle": "abd"})


def test_bus_writes_redacted_jsonl_and_notifies(tmp_path: Path) -> None:
    """Every emitted event reaches subscribers and one JSON line in the file."""
    seen: list[Event] = []
    bus = EventBus(RunClock(), tmp_path / "events.jsonl")
    bus.subscribe(seen.append)
    bus.emit("client", "resume.refused", code=1011, handle="secret-handle")
    bus.close()
    line = json.loads((tmp_path / "events.jsonl").read_text())
    assert line["event"] == "resume.refused" and line["code"] == 1011
    assert "secret-handle" not in json.dumps(line)
    assert Event.from_json(json.dumps(line)).matches("resume.refused", {"code": 1011})
    assert len(seen) == 1


def test_tail_returns_only_complete_lines(tmp_path: Path) -> None:
    """A line being written is held back until its newline arrives; junk is reported."""
    path = tmp_path / "client.events.jsonl"
    tail = EventFileTail(path, "client")
    assert list(tail.read_new()) == []
    with path.open("a") as f:
        f.write('{"event": "a", "x": 1}\n{"event": "b"')
    assert [e["event"] for e in tail.read_new()] == ["a"]
    with path.open("a") as f:
        f.write(', "y": 2}\nnot json\n{"event": "c", "source": "10.0.0.1:5"}\n')
    got = list(tail.read_new())
    assert got[0] == {"event": "b", "y": 2}
    assert got[1]["event"] == "bad_line"
    # A field named as the log's own would be lost in it, and the event's process with it.
    assert got[2]["event"] == "bad_line" and "'source'" in got[2]["error"]


def test_writer_appends_timestamped_lines(tmp_path: Path) -> None:
    """What a client writes to FAULTLAB_EVENTS carries its own unix time."""
    path = tmp_path / "events.jsonl"
    writer = EventWriter(path)
    writer.emit("client.connected", attempt=1)
    writer.close()
    data = json.loads(path.read_text())
    assert data["event"] == "client.connected" and data["attempt"] == 1
    assert isinstance(data["ts"], float)


def test_run_clock_converts_unix_times() -> None:
    """A unix time written by another process lands on the run clock."""
    clock = RunClock()
    assert abs(clock.from_wall(clock.t0_wall + 2.5) - 2.5) < 1e-9


def test_redaction_is_idempotent() -> None:
    """A secret redacted by a client's writer is not redacted again by the bus."""
    once = redact({"handle": "x" * 36})
    assert redact(once) == once and "len=36" in once["handle"]
