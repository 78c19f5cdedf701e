"""The documentation site in headless Chromium, opened from its files as a reader without a
network would: every page renders without a console error, every link inside the site reaches a
page or file of it, and search finds a fault."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from .browser import Browser, unavailable

pytestmark = [pytest.mark.lab, pytest.mark.alone]

LINKS = """[...document.querySelectorAll('a[href]')].map((a) => a.href)
  .filter((href) => href.startsWith('file:'))"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with Browser() as b:
        yield b


@pytest.mark.timeout(300)
def test_every_page_renders_without_an_error_and_its_links_reach_the_site(
        docs_site: Path, browser: Browser) -> None:
    pages = sorted(p for p in docs_site.rglob("*.html") if p.name != "404.html")
    assert len(pages) >= 12
    broken = []
    for page in pages:
        browser.errors.clear()
        url = page.as_uri()
        browser.open(url)
        browser.wait_for(f"document.URL === {json.dumps(url)} && document.readyState === 'complete'"
                         " && document.querySelector('.md-content') !== null")
        assert not browser.errors, f"{page.relative_to(docs_site)}: {browser.errors}"
        for href in browser.evaluate(LINKS):
            target = Path(unquote(urlsplit(href).path))
            if not (target.is_file() or (target / "index.html").is_file()):
                broken.append(f"{page.relative_to(docs_site)} -> {href}")
            assert docs_site in target.parents or target == docs_site, f"{page}: {href} leaves the site"
    assert not broken, broken


def test_search_finds_a_fault_offline(docs_site: Path, browser: Browser) -> None:
    browser.errors.clear()
    url = (docs_site / "index.html").as_uri()
    browser.open(url)
    browser.wait_for(f"document.URL === {json.dumps(url)} && document.readyState === 'complete'")
    browser.evaluate("""(() => {
        const input = document.querySelector('input.md-search__input');
        input.focus();
        input.value = 'mtu_blackhole';
        input.dispatchEvent(new Event('input', {bubbles: true}));
        input.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true, key: 'e'}));
    })()""")
    found = browser.wait_for("""(() => {
        const items = [...document.querySelectorAll('.md-search-result__item a')];
        return items.length && items.map((a) => a.href);
    })()""", timeout_s=20)
    assert any("reference/faults.html" in href for href in found), found
    assert not browser.errors, browser.errors
