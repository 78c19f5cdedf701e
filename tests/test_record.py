"""result.json, JUnit XML and `report merge`: a run told for machines, and runs made elsewhere
joined into one suite."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import junitparser

from faultlab.events import Event
from faultlab.expect import Outcome
from faultlab.profile import parse_profile
from faultlab.report.junit import render_junit
from faultlab.report.record import RESULT_FILE, RunRecord
from faultlab.report.suite import render_suite
from faultlab.result import RunResult

from .conftest import faultlab


def ev(t: float, name: str, **fields: object) -> Event:
    return Event(t, "faultlab", name, dict(fields))


def a_result(tmp_path: Path, name: str = "field-X", held: bool = True,
             error: str | None = None) -> RunResult:
    profile = parse_profile(f"name: {name}\nclient: {{command: [x]}}\n"
                            "field: {detected: 1.8-1.9s}\n")
    events = [ev(1.0, "fault.applied", step="cut", fault="drop", layer="packet", trigger="at 1s",
                 applied_in_ms=1.7),
              ev(2.5, "client.lost"), ev(4.0, "fault.reverted", step="cut", fault="drop")]
    run_dir = tmp_path / name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.md").write_text("# x\n")
    return RunResult(profile, run_dir, datetime(2026, 11, 30, 12, 0, 0), duration_s=5.25,
                     events=events, outcomes=[Outcome("client.lost within 2s", held, "at +1.5s", 2.5)],
                     exit_codes={"client": 0}, error=error)


def test_a_record_tells_the_run(tmp_path: Path) -> None:
    record = RunRecord.of(a_result(tmp_path, held=False))
    assert (record.verdict, record.exit_code, record.duration_s) == ("FAIL", 1, 5.25)
    (fault,) = record.faults
    assert fault == {"step": "cut", "fault": "drop", "layer": "packet", "trigger": "at 1s",
                     "t": 1.0, "applied_in_ms": 1.7, "reverted_t": 4.0}
    assert record.expectations == [{"expectation": "client.lost within 2s", "held": False,
                                    "seen": "at +1.5s", "at": 2.5}]
    assert record.cells["detected"] == 1.5 and record.attachments == ["summary.md"]
    assert record.field_ranges == {"detected": [1.8, 1.9]}
    assert record.faultlab and record.started.startswith("2026-11-30T12:00:00")
    assert datetime.fromisoformat(record.started).tzinfo is not None  # comparable across machines
    again = RunRecord.load(record.write(Path(record.run_dir)))
    assert again == record


def test_a_records_faults_end_where_fault_spans_says(tmp_path: Path) -> None:
    """`reverted_t` is when a fault stopped hurting, by whatever ended it (a thaw names the
    freeze it ended); null for a fault done at once and for one that lasted to the run's end."""
    result = a_result(tmp_path)
    result.events = [
        ev(1.0, "fault.applied", step="ice", fault="freeze", layer="app", trigger="at 1s",
           applied_in_ms=0.5),
        ev(2.0, "fault.applied", step="sun", fault="thaw", layer="app", trigger="at 2s",
           applied_in_ms=0.3, thawed=["ice"], ends=["ice"], for_s=0),
        ev(3.0, "fault.applied", step="cut", fault="drop", layer="packet", trigger="at 3s",
           applied_in_ms=1.0)]
    ends = {f["step"]: f["reverted_t"] for f in RunRecord.of(result).faults}
    assert ends == {"ice": 2.0, "sun": None, "cut": None}


def test_a_record_read_elsewhere_names_the_folder_it_is_in_now(tmp_path: Path) -> None:
    """A CI artefact unpacked in another place: its reports link to the files where they are."""
    record = RunRecord.of(a_result(tmp_path))
    record.write(Path(record.run_dir))
    moved = Path(record.run_dir).rename(tmp_path / "artefact")
    assert RunRecord.load(moved / RESULT_FILE).run_dir == str(moved)


def test_a_suite_table_from_records_equals_one_from_runs(tmp_path: Path) -> None:
    """Cells travel in result.json: the table of loaded records is the table of the runs."""
    records = [RunRecord.of(a_result(tmp_path, "a")), RunRecord.of(a_result(tmp_path, "b"))]
    loaded = []
    for r in records:
        r.write(Path(r.run_dir))
        loaded.append(RunRecord.load(Path(r.run_dir) / RESULT_FILE))
    assert render_suite(loaded) == render_suite(records)


def test_junit_is_valid_and_tells_failures_and_errors(tmp_path: Path) -> None:
    records = [RunRecord.of(a_result(tmp_path, "ok")),
               RunRecord.of(a_result(tmp_path, "bad", held=False)),
               RunRecord.of(a_result(tmp_path, "broken", error="cannot wire the lab"))]
    path = tmp_path / "junit.xml"
    path.write_text(render_junit(records))
    xml = junitparser.JUnitXml.fromfile(str(path))
    (suite,) = list(xml)
    assert (suite.tests, suite.failures, suite.errors) == (3, 1, 1)
    cases = {case.name: case for case in suite}
    assert cases["ok"].is_passed
    (failure,) = cases["bad"].result
    assert isinstance(failure, junitparser.Failure)
    assert "client.lost within 2s (seen: at +1.5s)" in (failure.message or "")
    assert f"summary: {tmp_path / 'bad' / 'summary.md'}" in (failure.text or "")
    (error,) = cases["broken"].result
    assert isinstance(error, junitparser.Error) and error.message == "cannot wire the lab"
    assert f"[[ATTACHMENT|{tmp_path / 'ok' / 'summary.md'}]]" in (cases["ok"].system_out or "")


def test_report_merge_joins_shards(tmp_path: Path) -> None:
    """Records from two shard folders: one table, one JUnit file, the worst exit code; a folder
    with no result, or a broken one, is one line and exit 2."""
    for shard, names in (("s1", ["a", "c"]), ("s2", ["b"])):
        for name in names:
            r = RunRecord.of(a_result(tmp_path / shard, name, held=name != "c"))
            r.write(Path(r.run_dir))
    out, junit = tmp_path / "suite.md", tmp_path / "junit.xml"
    done = faultlab("report", "merge", str(tmp_path / "s1"), str(tmp_path / "s2"),
                    str(tmp_path / "s1" / "a"), "--junit", str(junit), "--out", str(out))
    assert done.returncode == 1, done.stderr
    # s1/a is named twice (as a folder of its own, and inside s1): one run.
    assert "# faultlab suite: 2 of 3 runs passed" in out.read_text()
    rows = [line.split("|")[1].strip() for line in out.read_text().splitlines()
            if line.startswith("| ") and "scenario" not in line and "---" not in line]
    assert sorted(rows) == ["a", "b", "c"]
    assert junitparser.JUnitXml.fromfile(str(junit)).tests == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    done = faultlab("report", "merge", str(empty))
    assert done.returncode == 2 and "no result.json" in done.stderr
    (empty / RESULT_FILE).write_text(json.dumps({"verdict": "PASS"}))
    done = faultlab("report", "merge", str(empty))
    assert done.returncode == 2 and "not a faultlab result" in done.stderr
    assert "Traceback" not in done.stderr
    newer = json.loads(next((tmp_path / "s2").rglob(RESULT_FILE)).read_text()) | {"format": 99}
    (empty / RESULT_FILE).write_text(json.dumps(newer))
    done = faultlab("report", "merge", str(empty))
    assert done.returncode == 2 and "written by a newer faultlab" in done.stderr


def test_a_lone_run_records_every_column(tmp_path: Path) -> None:
    """A run that draws no table (one profile, a CI shard's job) still records the core columns'
    cells, in a fresh interpreter where nothing imported the table's module."""
    import subprocess
    import sys

    code = ("import json, sys; from faultlab.events import Event; "
            "from faultlab.report.columns import columns; "
            "events = [Event(1.0, 'f', 'fault.applied', {}), Event(2.5, 'c', 'client.lost', {})]; "
            "print(json.dumps({c.heading: c.cell(events) for c in columns()}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    cells = json.loads(done.stdout)
    assert cells["detected"] == 1.5 and cells["bookings"] == "0"
    assert {"resumes refused", "resumed", "recovered", "audio ratio"} <= set(cells)


def test_junit_survives_control_characters(tmp_path: Path) -> None:
    """A client's coloured log line in an error stays readable XML."""
    record = RunRecord.of(a_result(tmp_path, "odd", error="boom \x1b[31mred\x00\x07"))
    path = tmp_path / "junit.xml"
    path.write_text(render_junit([record]))
    (case,) = list(next(iter(junitparser.JUnitXml.fromfile(str(path)))))
    (error,) = case.result
    assert error.message.startswith("boom \ufffd[31mred")
