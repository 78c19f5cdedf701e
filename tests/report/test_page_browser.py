"""report.html in a real browser (headless Chromium in a network namespace of its own, so it
needs root): a field run's page draws its lanes, its fault, the moments its expectations were
judged on and the refused resumes without an error, and the page answers the reader (a link to
an expectation shows its moment, a hover shows a mark's fields)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultlab.profile import load_profile
from faultlab.report.page import write_run_page
from faultlab.report.record import PAGE_FILE

from ..conftest import PROFILES
from ..lab.helpers import failed, run_loaded
from .browser import Browser, png_size, unavailable
from .test_page import a_view

pytestmark = [pytest.mark.lab, pytest.mark.alone]

VIEWPORT = (1400, 900)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with Browser(*VIEWPORT) as b:
        yield b


@pytest.fixture
def page(browser: Browser) -> Iterator[Browser]:
    """The browser, with only this test's page errors."""
    browser.errors.clear()
    yield browser


def count(b: Browser, selector: str) -> int:
    return int(b.evaluate(f"document.querySelectorAll({json.dumps(selector)}).length"))


@pytest.mark.timeout(180)
def test_a_field_run_s_report_shows_the_drop_the_refusals_and_the_judged_moments(
        page: Browser, runs_dir: Path) -> None:
    """The runner's report.html of BR1 renders with no console error: lanes, the wifi-gone band,
    a marker per expectation judged at a moment, the three refused resumes and the new session's
    audio; the screenshot is kept in the run folder."""
    result = run_loaded(load_profile(PROFILES / "field" / "BR1.yaml"), runs_dir)
    assert result.verdict == "PASS", failed(result)
    run_dir = result.run_dir
    report = run_dir / PAGE_FILE
    assert report.is_file() and (run_dir / "timeline.png").is_file()

    page.open_rendered(report.as_uri())
    for lane in ("client", "router", "server"):
        assert count(page, f"#timeline g.lane[data-lane={lane}]") == 1, lane
    assert count(page, ".fault-band[data-step=wifi-gone]") == 1
    judged = [e for e in json.loads((run_dir / "result.json").read_text())["expectations"]
              if e["at"] is not None]
    assert count(page, ".judgement") == len(judged) > 0
    assert count(page, ".judgement[data-held=true]") == len(judged)
    assert count(page, '.item[data-name="resume.refused"]') >= 3
    recovered_at = min(e.t for e in result.events if e.name == "recovery.new_session")
    first_audio = page.evaluate(
        "Math.min(...[...document.querySelectorAll('.item.span[data-category=audio]')]"
        ".map((el) => JSON.parse(document.getElementById('view-data').textContent)"
        ".items[+el.dataset.i].t))")
    assert first_audio > recovered_at
    assert page.errors == []

    shot = run_dir / "report-screenshot.png"
    shot.write_bytes(page.screenshot())
    assert png_size(shot.read_bytes()) == VIEWPORT


def test_a_link_to_an_expectation_shows_its_moment_and_a_hover_shows_a_mark(
        page: Browser, tmp_path: Path) -> None:
    """Clicking an expectation's time zooms the timeline onto it and emphasises its marker and
    row; the pointer over a mark shows its fields; no console error on the way."""
    path = write_run_page(a_view(), tmp_path / PAGE_FILE)
    page.open_rendered(path.as_uri())
    assert count(page, ".judgement") == 2 and count(page, ".judgement[data-held=false]") == 1

    page.evaluate("document.querySelector('a.goto[data-index=\"1\"]').click()")
    page.wait_for("!!document.querySelector('.judgement.focus[data-index=\"1\"]')"
                  " && !!document.querySelector('tr.expectation.focus[data-index=\"1\"]')")
    page.wait_for("(() => { const m = /([\\d.]+) s to ([\\d.]+) s/.exec("
                  "document.getElementById('window-label').textContent);"
                  " return +m[1] < 7.5 && 7.5 < +m[2] && +m[2] - +m[1] < 2; })()")
    time.sleep(0.4)  # the zoom is animated over 280 ms

    x, y = page.evaluate(
        "(() => { const r = document.querySelector('.item[data-name=\"recovery.new_session\"]')"
        ".getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    page.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
    tip = page.wait_for("!document.getElementById('tooltip').hidden"
                        " && document.getElementById('tooltip').textContent")
    assert "recovery.new_session" in tip and "7.500 s" in tip
    assert page.errors == []


def test_a_run_that_never_started_still_draws(page: Browser, tmp_path: Path) -> None:
    """A lab that failed before any event: its lanes, no marks, the error, no console error."""
    view = a_view(verdict="ERROR", error="the target never listened", expectations=[])
    empty = type(view)(**{**view.__dict__, "items": [], "bands": [], "t_end": 0.0})
    path = write_run_page(empty, tmp_path / PAGE_FILE)
    page.open_rendered(path.as_uri())
    assert count(page, "#timeline g.lane") == 3 and count(page, ".item") == 0
    assert "never listened" in page.evaluate("document.querySelector('.error').textContent")
    assert page.errors == []


def test_markup_in_a_client_s_events_is_drawn_as_text(page: Browser, tmp_path: Path) -> None:
    """A step id, a marker's text and a message kind that carry markup add no element and run
    nothing: the page shows them as text."""
    from faultlab.report.sequence import build_view

    from .test_page import ev
    from .test_sequence import a_record

    evil = "<img src=x onerror=\"document.title='pwned'\">"
    events = [ev(1.0, "client", "client.ask", text=evil),
              ev(1.5, "target", "emulator.frame", conn=1, **{"from": "server"}, kind=evil),
              ev(2.0, "faultlab", "fault.applied", step=evil, fault="drop", layer="packet"),
              ev(3.0, "client", "client.lost", why=evil)]
    path = write_run_page(build_view(events, a_record(profile="x")), tmp_path / PAGE_FILE)
    page.open_rendered(path.as_uri())
    time.sleep(0.2)
    assert count(page, "img") == 0 and page.evaluate("document.title") != "pwned"
    assert "<img" in page.evaluate("document.getElementById('timeline').textContent")
    assert page.errors == []


def test_a_client_s_audio_stats_are_drawn_under_the_lanes(page: Browser, tmp_path: Path) -> None:
    """A WebRTC client's audio stats: a strip per gauge under the lanes, a dot per reading, and
    the pointer over a dot tells its value and time."""
    from faultlab.report.sequence import build_view

    from .test_sequence import a_record, stats

    events = [stats(t, 0.9 * t, 0.1 * t + (0.5 if t >= 3 else 0.0), 2 * t) for t in range(1, 6)]
    path = write_run_page(build_view(events, a_record(profile="call")), tmp_path / PAGE_FILE)
    page.open_rendered(path.as_uri())
    for name in ("concealed", "packets lost", "jitter"):
        assert count(page, f'g.series[data-series="{name}"] .series-point') == 5, name
    x, y = page.evaluate(
        "(() => { const r = document.querySelector('g.series[data-series=\"concealed\"]"
        " .series-point[data-p=\"0:0\"]').getBoundingClientRect();"
        " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    page.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
    tip = page.wait_for("!document.getElementById('tooltip').hidden"
                        " && document.getElementById('tooltip').textContent")
    assert "concealed: 10 %" in tip and "1.000 s" in tip
    assert page.errors == []
