"""report.html (faultlab.report.page): a page that needs nothing but itself, with the run's
verdict, its expectations linked to their moments, its files, and the view's data for the
script that draws the timeline."""

from __future__ import annotations

import json
import re
import stat
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from faultlab.events import Event
from faultlab.report.page import render_run_page, write_run_page
from faultlab.report.record import RunRecord
from faultlab.report.sequence import PALETTE, View, build_view

EVIL = "</script><script>alert('x')</script>"


def ev(t: float, source: str, event: str, **fields: object) -> Event:
    return Event(t, source, event, dict(fields))


def a_view(**record: object) -> View:
    """A short run: a setup, a tool call, a drop, two refused resumes and a new session's audio;
    three expectations, one failed, one judged on no one moment."""
    events = [
        ev(1.0, "capture", "tcp.connect", k=1, client_port=40000, server="s", server_port=443),
        ev(1.1, "target", "emulator.frame", conn=1, **{"from": "client"}, kind="setup", bytes=300),
        ev(1.3, "target", "emulator.frame", conn=1, **{"from": "server"}, kind="setup_complete", bytes=20),
        ev(2.0, "target", "emulator.frame", conn=1, **{"from": "server"}, kind="tool_call", bytes=120),
        ev(2.0, "client", "client.tool_call", name="book_slot", args={"slot": EVIL}),
        ev(3.0, "faultlab", "fault.applied", step="wifi-gone", fault="drop", layer="packet",
           applied_in_ms=4.0),
        ev(5.0, "client", "client.lost", why="pings unanswered"),
        *[ev(5.1 + n, "client", "resume.refused", n=n + 1, code=1011) for n in range(2)],
        ev(7.5, "client", "recovery.new_session"),
        *[ev(8.0 + i * 0.02, "target", "emulator.frame", conn=2, **{"from": "server"},
             kind="server_content.model_turn", bytes=6500, audio_s=0.1) for i in range(15)],
        ev(9.0, "faultlab", "fault.reverted", step="wifi-gone", fault="drop"),
    ]
    base: dict[str, object] = {
        "profile": "field-BR1", "verdict": "FAIL", "exit_code": 3, "run_dir": "/tmp/x",
        "started": "2026-12-01T00:00:00+00:00", "duration_s": 10.0,
        "description": "A drop <after> the toolCall.",
        "expectations": [
            {"expectation": "client.lost occurs", "held": True, "seen": "at +2s", "at": 5.0},
            {"expectation": "recovered within 3s", "held": False, "seen": "+4.5s", "at": 7.5},
            {"expectation": "the <user> is told the truth", "held": True, "seen": "yes",
             "at": None}],
        "attachments": ["report.html", "summary.md", "events.jsonl", "capture.pcap"]}
    run = RunRecord(**(base | record))  # type: ignore[arg-type]
    return build_view(events, run, description=run.description)


def embedded(page: str) -> object:
    match = re.search(r'<script type="application/json" id="view-data">(.*?)</script>', page, re.S)
    assert match, "no view data in the page"
    return json.loads(match.group(1))


def test_the_page_needs_nothing_but_itself() -> None:
    """No address outside the page: scripts and styles inline, a policy that forbids fetching."""
    page = render_run_page(a_view())
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert not re.search(r"<script[^>]*\bsrc=", page)
    assert not re.search(r"<link[^>]*stylesheet", page)
    assert "default-src 'none'" in page
    # report.css, timeline.js (the drawing) and controls.js (what moves it)
    assert "#timeline" in page and "function drawTimeline(" in page and "tl.render()" in page


def test_the_view_s_data_round_trips_and_a_closing_tag_in_a_field_cannot_end_it() -> None:
    """The embedded JSON is the view's, a `</script>` in a field included: it stays data."""
    view = a_view()
    page = render_run_page(view)
    assert embedded(page) == json.loads(json.dumps(view.to_dict()))
    assert page.count("</script>") == 3  # the data's and the two scripts' own
    assert EVIL not in page


def test_each_expectation_is_a_row_linked_to_its_moment() -> None:
    """A row per expectation, with its verdict; one judged at a moment links to it, one judged
    on the whole run does not; text is escaped."""
    page = render_run_page(a_view())
    rows = re.findall(r'<tr class="expectation (held|failed)" data-index="(\d)"(?: data-at="([\d.]+)")?',
                      page)
    assert rows == [("held", "0", "5.0"), ("failed", "1", "7.5"), ("held", "2", "")]
    assert re.findall(r'<a class="goto" href="#t=([\d.]+)" data-index="(\d)"', page) == [
        ("5.000", "0"), ("7.500", "1")]
    assert "the &lt;user&gt; is told the truth" in page
    assert "A drop &lt;after&gt; the toolCall." in page
    assert '<span class="verdict">FAIL</span>' in page


def test_the_run_s_files_are_linked_relatively_and_the_legend_lists_what_is_drawn() -> None:
    """The run folder's files by their names (the page itself left out); a colour per category
    the run has, and none for one it does not."""
    page = render_run_page(a_view())
    links = re.findall(r'<a class="file" href="([^"]+)">', page)
    assert links == ["summary.md", "events.jsonl", "capture.pcap"]
    legend = re.findall(r'<span class="swatch" style="background: (#[0-9A-Fa-f]{6})"></span>([a-z ]+)<',
                        page)
    assert (PALETTE["refused"], "refused") in legend and (PALETTE["audio"], "audio") in legend
    assert "conversation" not in {name for _, name in legend}


def test_a_lab_error_is_shown() -> None:
    """A run whose lab failed says why, and its page says ERROR."""
    page = render_run_page(a_view(verdict="ERROR", error="the target never listened"))
    assert "<strong>The lab failed:</strong> the target never listened" in page
    assert 'class="verdict-error"' in page


def test_the_written_page_is_private_and_redacted(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """report.html is the owner's alone, and an API key the run met is not in it."""
    key = "AIzaSyNotARealKeyButLongEnough0123456789"
    monkeypatch.setenv("GOOGLE_API_KEY", key)
    view = a_view(error=f"the client said: bad key {key}")
    path = write_run_page(view, tmp_path / "report.html")
    text = path.read_text()
    assert key not in text
    assert f"the client said: bad key &lt;redacted len={len(key)} sha256=" in text  # as text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_field_json_cannot_spell_is_embedded_as_its_text() -> None:
    """An in-process event's field may be a path or a timestamp: the page shows its text."""
    view = a_view()
    item = view.items[0]
    odd = replace(item, fields={**item.fields, "where": Path("/run/x"), "when": datetime(2026, 12, 1)})
    data = embedded(render_run_page(replace(view, items=[odd, *view.items[1:]])))
    assert isinstance(data, dict)
    fields = data["items"][0]["fields"]
    assert (fields["where"], fields["when"]) == ("/run/x", "2026-12-01 00:00:00")

