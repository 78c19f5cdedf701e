"""A run's reports written in order after its verdict, with every secret redacted, and drawn
again from a run folder, a suite's file or a folder of runs by `faultlab report PATH`."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from faultlab.expect import Outcome
from faultlab.profile import parse_profile
from faultlab.report.build import rebuild, write_run_reports, write_suite_reports
from faultlab.report.record import RunRecord
from faultlab.report.sequence import View
from faultlab.result import RunResult

from ..conftest import faultlab
from .test_png import a_loss, pixels

KEY = "AIzaSyNotARealKeyButLongEnough0123456789"


def a_run(folder: Path, name: str = "field-X", error: str | None = None) -> RunResult:
    """A finished run's folder: its events.jsonl and result.json, as the runner leaves them."""
    folder.mkdir(parents=True)
    events = a_loss()
    (folder / "events.jsonl").write_text("".join(e.to_json() + "\n" for e in events))
    result = RunResult(parse_profile(f"name: {name}\nclient: {{command: [x]}}\n"), folder,
                       datetime(2026, 12, 1, 9, 0), duration_s=8.0, events=events,
                       outcomes=[Outcome("client.lost occurs", True, "at +2s", 4.5)],
                       exit_codes={"client": 0}, error=error)
    RunRecord.of(result).write(folder)
    return result


def test_the_picture_then_the_summary_that_shows_it_then_the_page_that_links_both(
        tmp_path: Path) -> None:
    """The runner's order: timeline.png, summary.md with the picture, report.html linking both."""
    result = a_run(tmp_path / "run")
    names = write_run_reports(result.run_dir, result.events, RunRecord.of(result), result)
    assert names == ["timeline.png", "summary.md", "report.html"]
    assert "](timeline.png)" in (result.run_dir / "summary.md").read_text()
    page = (result.run_dir / "report.html").read_text()
    assert 'href="timeline.png"' in page and 'href="summary.md"' in page


def test_a_picture_that_cannot_be_drawn_is_said_and_the_rest_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A failing PNG is one stderr line; the summary then shows no picture, the page is written."""
    import faultlab.report.png

    def broken(*_: object) -> None:
        raise ValueError("no room to draw")

    monkeypatch.setattr(faultlab.report.png, "write_timeline_png", broken)
    result = a_run(tmp_path / "run")
    names = write_run_reports(result.run_dir, result.events, RunRecord.of(result), result)
    assert names == ["summary.md", "report.html"]
    assert "timeline.png" not in (result.run_dir / "summary.md").read_text()
    assert "timeline.png not drawn: ValueError: no room to draw" in capsys.readouterr().err


def test_the_picture_shows_no_secret_and_takes_text_as_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error with an API key in it reaches the picture redacted, as result.json holds it, and
    dollar signs in it are text, not TeX (which would garble or refuse them)."""
    import faultlab.report.png

    drawn: list[View] = []
    draw = faultlab.report.png.write_timeline_png
    monkeypatch.setattr(faultlab.report.png, "write_timeline_png",
                        lambda view, path: (drawn.append(view), draw(view, path)))
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    result = a_run(tmp_path / "run", error=f"price $5 and $x^$ with key {KEY}")
    names = write_run_reports(result.run_dir, result.events, RunRecord.of(result))
    assert names == ["timeline.png", "report.html"]
    (view,) = drawn
    assert view.error is not None and view.error.startswith("price $5 and $x^$ with key <redacted")
    assert KEY not in json.dumps(view.to_dict())
    assert pixels(result.run_dir / "timeline.png").std() > 0.05


def test_faultlab_report_draws_a_run_folder_a_suite_and_a_folder_of_runs(tmp_path: Path) -> None:
    """Each form of PATH, the files it prints, and the suite's list of runs read back."""
    runs = tmp_path / "runs"
    records = [RunRecord.load(a_run(runs / n, n).run_dir / "result.json") for n in ("a", "b")]
    text, drawn = write_suite_reports(records, runs / "suite-20261201-090000.md")
    assert drawn and "2 of 2 runs passed" in text
    assert json.loads((runs / "suite-20261201-090000.json").read_text()) == {
        "runs": ["a/result.json", "b/result.json"]}

    done = faultlab("report", str(runs / "a"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(runs / "a" / "timeline.png"), str(runs / "a" / "report.html")]
    done = faultlab("report", str(runs / "suite-20261201-090000.html"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == [str(runs / "suite-20261201-090000.md"),
                                        str(runs / "suite-20261201-090000.html")]
    written, failed = rebuild([runs])
    assert not failed and len([p for p in written if p.name == "report.html"]) == 2
    assert any(p.name.startswith("suite-") and p.suffix == ".html" and
               p.name != "suite-20261201-090000.html" for p in written)


def test_faultlab_report_refuses_what_is_not_a_run_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    for path, said in ((tmp_path / "notes.txt", "not a run folder"),
                       (tmp_path / "empty", "no run folder (result.json) under it")):
        done = faultlab("report", str(path))
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
