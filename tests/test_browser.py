"""A browser client's profile section, its command line, and how a page's console lines and
URLs become events (pure: no browser)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from faultlab.browser.page import _page_event, _redacted_url
from faultlab.browser.spec import BrowserPage
from faultlab.clients.web import parser, query
from faultlab.errors import ProfileError
from faultlab.profile import parse_profile

PROFILE = """\
name: web-x
target:
  emulator: {{personality: gemini-dev-2026-10}}
client:
  browser: {browser}
"""


def load(browser: str) -> object:
    return parse_profile(PROFILE.format(browser=browser), Path("/p/web/x.yaml"))


def test_a_page_is_served_from_the_profiles_folder() -> None:
    """`serve` is relative to the profile's folder; the client's command line carries the
    section as JSON."""
    profile = load("{serve: dist, path: /?mic=1, start: [go()], timeout: 5s}")
    argv = profile.client.argv(Path("/p/web"))  # type: ignore[attr-defined]
    assert argv[:3] == [sys.executable, "-m", "faultlab.browser"]
    spec = BrowserPage.model_validate_json(argv[3])
    assert (spec.serve, spec.path, spec.start, spec.timeout) == (
        Path("/p/web/dist"), "/?mic=1", ["go()"], 5.0)


@pytest.mark.parametrize(("browser", "says"), [
    ("{}", "give the page's 'url' or a folder to 'serve'"),
    ("{serve: d, url: 'http://a.test/'}", "give the page's 'url' or a folder to 'serve'"),
    ("{url: 'ftp://a.test/'}", "starts with http:// or https://"),
    ("{serve: d, path: index.html}", "starts with '/'"),
    ("{url: 'http://a.test/', path: /x}", "with 'url', put it in the url"),
    ("{serve: d, timeout_exit: 300}", "timeout_exit"),
    ("{serve: d, colour: red}", "colour"),
])
def test_a_bad_page_is_told_at_its_line(browser: str, says: str) -> None:
    """Every mistake in the section names the file, the line and the field."""
    with pytest.raises(ProfileError) as caught:
        load(browser)
    assert "x.yaml:5" in str(caught.value) and says in str(caught.value), str(caught.value)


def test_a_browser_takes_no_image_or_args() -> None:
    with pytest.raises(ProfileError, match="no 'image' or 'args'"):
        parse_profile(PROFILE.format(browser="{serve: d}") + "  args: [--x]\n", Path("x.yaml"))


def test_a_console_line_of_one_json_object_with_an_event_is_the_pages_event() -> None:
    line = {"type": "string", "value": json.dumps({"event": "client.lost", "why": "closed",
                                                   "ts": 1.0})}
    assert _page_event([line]) == ("client.lost", {"why": "closed"})
    assert _page_event([{"type": "string", "value": "plain"}]) is None
    assert _page_event([{"type": "string", "value": '{"no": "event"}'}]) is None
    assert _page_event([{"type": "string", "value": "{broken"}]) is None
    assert _page_event([line, line]) is None  # two arguments: a line, not an event


def test_a_sockets_url_is_logged_without_its_querys_values() -> None:
    assert _redacted_url("wss://h/ws?key=secret&alt=sse") == "wss://h/ws?key=...&alt=..."
    assert _redacted_url("wss://h/ws") == "wss://h/ws"


def test_web_booking_options_become_the_pages_query() -> None:
    args = parser().parse_args(["--commit", "2s", "--say", "Book 3pm", "--lost-after", "2500ms",
                                "--mic", "--no-status-note"])
    assert args.commit == 2.0
    assert query(args) == "say=Book+3pm&lostAfter=2.5s&mic=1&statusNote=0"
