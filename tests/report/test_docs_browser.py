"""The documentation site in headless Chromium, opened from its files as a reader without a
network would: every page renders without a console error, every link inside the site reaches a
page or file of it, and search finds a fault."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from ..conftest import REPO
from .browser import Browser, unavailable

pytestmark = [pytest.mark.lab, pytest.mark.alone]

LINKS = """[...document.querySelectorAll('a[href]')].map((a) => a.href)
  .filter((href) => href.startsWith('file:'))"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
                           cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with Browser() as b:
        yield b


@pytest.mark.timeout(300)
def test_every_page_renders_without_an_error_and_its_links_reach_the_site(
        site: Path, browser: Browser) -> None:
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")
    assert len(pages) >= 12
    broken = []
    for page in pages:
        browser.errors.clear()
        url = page.as_uri()
        browser.open(url)
        browser.wait_for(f"document.URL === {json.dumps(url)} && document.readyState === 'complete'"
                         " && document.querySelector('.md-content') !== null")
        assert not browser.errors, f"{page.relative_to(site)}: {browser.errors}"
        for href in browser.evaluate(LINKS):
            target = Path(unquote(urlsplit(href).path))
            if not (target.is_file() or (target / "index.html").is_file()):
                broken.append(f"{page.relative_to(site)} -> {href}")
            assert site in target.parents or target == site, f"{page}: {href} leaves the site"
    assert not broken, broken


def test_search_finds_a_fault_offline(site: Path, browser: Browser) -> None:
    browser.errors.clear()
    url = (site / "index.html").as_uri()
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
