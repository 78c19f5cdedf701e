"""The suite's page (faultlab.report.suite_page): the table's cells, each run's verdict linking
to its report, and a chart of the times against the field study's ranges."""

from __future__ import annotations

import html
import stat
from html.parser import HTMLParser
from pathlib import Path

from faultlab.report.record import RunRecord
from faultlab.report.suite import table
from faultlab.report.suite_page import render_suite_page, write_suite_page

from .test_sequence import a_record

FIELD = {"detected": [1.8, 2.3], "recovered": [6.1, 7.1]}


class Links(HTMLParser):
    """Every element's attributes, by tag."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def a_suite(root: Path) -> list[RunRecord]:
    """Three runs of a field scenario (the third recovers later than the field study did, and
    ran in another folder), and a run that never got as far as a fault."""
    runs = root / "runs"
    return [
        a_record(run_dir=str(runs / "r1"), cells={"detected": 2.01, "recovered": 6.62},
                 field_ranges=FIELD),
        a_record(run_dir=str(runs / "r2"), cells={"detected": 1.95, "recovered": 6.91},
                 field_ranges=FIELD),
        a_record(run_dir=str(root / "elsewhere" / "r3"), verdict="FAIL",
                 cells={"detected": 2.10, "recovered": 8.40}, field_ranges=FIELD),
        a_record(profile="silent-loss", verdict="ERROR", run_dir=str(runs / "r4"),
                 error="cannot wire the lab"),
    ]


def parse(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Links()
    parser.feed(page)
    return parser.tags


def test_the_page_needs_nothing_but_itself(tmp_path: Path) -> None:
    """No address on the network anywhere (the chart's SVG included), no file but the runs'
    reports linked, and the chart inline."""
    page = render_suite_page(a_suite(tmp_path), tmp_path / "runs" / "suite-x.html")
    assert "http://" not in page and "https://" not in page
    tags = parse(page)
    assert not [a for tag, a in tags if tag in ("script", "img", "link") and
                (a.get("src") or a.get("href") or "").split(":")[0] not in ("data", "")]
    assert page.count("<svg") == 1 and "<?xml" not in page and "<!DOCTYPE svg" not in page


def test_each_verdict_links_to_its_runs_report_relative_to_the_page(tmp_path: Path) -> None:
    """A run beside the page is linked by its folder's name; one elsewhere by a relative path."""
    page = render_suite_page(a_suite(tmp_path), tmp_path / "runs" / "suite-x.html")
    links = {a["href"]: a for tag, a in parse(page) if tag == "a"}
    assert set(links) == {"r1/report.html", "r2/report.html", "../elsewhere/r3/report.html",
                          "r4/report.html"}
    assert "verdict-fail" in (links["../elsewhere/r3/report.html"]["class"] or "")
    assert "verdict-error" in (links["r4/report.html"]["class"] or "")


def test_the_page_has_the_tables_cells_and_headline(tmp_path: Path) -> None:
    """The markdown table's cells, combined the same way, are on the page."""
    records = a_suite(tmp_path)
    page = render_suite_page(records, tmp_path / "runs" / "suite-x.html")
    assert "<h1>faultlab suite: 2 of 4 runs passed</h1>" in page
    _, rows = table(records)
    assert rows[0][3:6] == ["-", "1.95-2.10 s", "-"]
    for row in rows:
        for cell in row:
            assert html.escape(cell) in page, cell


def test_a_run_outside_the_field_studys_range_is_marked(tmp_path: Path) -> None:
    """The run that recovered in 8.4 s (the field: 6.1-7.1 s) is marked, in the table and in
    the chart; the others are not."""
    page = render_suite_page(a_suite(tmp_path), tmp_path / "runs" / "suite-x.html")
    links = {a["href"]: a["class"] or "" for tag, a in parse(page) if tag == "a"}
    assert "outside" in links["../elsewhere/r3/report.html"]
    assert not [href for href, classes in links.items()
                if "outside" in classes and href != "../elsewhere/r3/report.html"]
    outside_cells = [a for tag, a in parse(page) if tag == "td" and "outside" in (a.get("class") or "")]
    assert len(outside_cells) == 1 and "8.40 s" in (outside_cells[0]["title"] or "")
    assert "field 6.10-7.10 s" in page
    assert [a["id"] for tag, a in parse(page) if tag == "g" and (a.get("id") or "").startswith(
        "outside-")] == ["outside-0-recovered"]  # the first scenario's


def test_scenarios_without_times_are_left_out_of_the_chart_and_said_so(tmp_path: Path) -> None:
    """silent-loss measured no time: the page says it is not in the chart; with no times at
    all, there is no chart."""
    records = a_suite(tmp_path)
    page = render_suite_page(records, tmp_path / "suite-x.html")
    (note,) = [line for line in page.splitlines() if "Not in the chart" in line]
    assert "silent-loss" in note and "field-BR1" not in note
    only_errors = render_suite_page(records[3:], tmp_path / "suite-x.html")
    assert "<svg" not in only_errors and "silent-loss" in only_errors


def test_the_page_is_written_privately(tmp_path: Path) -> None:
    """Like the table beside it, the page is readable by its owner only."""
    path = tmp_path / "suite-x.html"
    write_suite_page(a_suite(tmp_path), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().startswith("<!doctype html>")
