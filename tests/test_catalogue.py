"""The fault catalogue (docs/guide/faults.md) names exactly the registered faults."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from faultlab.faults import FAULTS

from .conftest import REPO

HEADING = re.compile(r"^(#{2,4}) (.+?)\s*$")
PAGE = REPO / "docs" / "guide" / "faults.md"


def catalogue_headings(page: str) -> list[str]:
    """The one-word `##`, `###` and `####` headings of the page, outside code blocks; headings of
    several words (`## App-level faults (through the proxy)`) group faults and name none."""
    names: list[str] = []
    fenced = False
    for line in page.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else HEADING.match(line)
        if match is not None and " " not in match.group(2):
            names.append(match.group(2).strip("`"))
    return names


def test_the_parser_reads_only_fault_headings() -> None:
    """Only one-word headings count; code blocks, the title and group headings do not."""
    page = ("# Fault catalogue\n## drop\n## Client-side faults\n"
            "```\n## not_a_heading\n### inside_code\n```\n### `mic_stall`\n")
    assert catalogue_headings(page) == ["drop", "mic_stall"]


@pytest.fixture(scope="module")
def catalogue() -> list[str]:
    names = catalogue_headings(PAGE.read_text(encoding="utf-8"))
    assert names, f"{PAGE} has no fault headings"
    return names


def test_every_fault_is_in_the_catalogue(catalogue: list[str]) -> None:
    """Every registered fault has its heading in the catalogue."""
    assert sorted(set(FAULTS) - set(catalogue)) == [], "faults missing from the catalogue"


def test_every_catalogue_heading_is_a_fault(catalogue: list[str]) -> None:
    """Every fault heading in the catalogue names a registered fault."""
    assert sorted(set(catalogue) - set(FAULTS)) == [], "catalogue headings that are no fault"


def test_each_fault_has_one_heading(catalogue: list[str]) -> None:
    """No fault is described twice."""
    assert sorted({n for n in catalogue if catalogue.count(n) > 1}) == []


def test_each_fault_lives_in_the_module_named_after_it() -> None:
    """The registry finds a fault by its module's name: every registered fault is in
    faultlab/faults/<name>.py."""
    assert {name: cls.__module__ for name, cls in FAULTS.items()} == {
        name: f"faultlab.faults.{name}" for name in FAULTS}


def test_naming_a_fault_imports_its_module_alone() -> None:
    """A process that names one fault imports that fault's module, not the other faults' (the
    proxy imported all 27, and pyroute2 through them, to apply one); an unknown name is no
    fault, a helper module's name neither."""
    done = subprocess.run([sys.executable, "-c", (
        "import json, sys\nfrom faultlab.faults import FAULTS\n"
        "assert FAULTS['freeze'].name == 'freeze'\n"
        "assert 'nothing' not in FAULTS and 'legs' not in FAULTS and 'a.b' not in FAULTS\n"
        "assert '__init__' not in FAULTS and FAULTS.get(None) is None and 3 not in FAULTS\n"
        "assert 'faultlab.faults.__init__' not in sys.modules\n"
        "print(json.dumps([m for m in sys.modules if m.startswith('faultlab.faults.')]))")],
        capture_output=True, text=True, check=True)
    imported = json.loads(done.stdout)
    assert "faultlab.faults.freeze" in imported
    assert not {"faultlab.faults.drop", "faultlab.faults.path", "faultlab.faults.nat_timeout",
                "faultlab.faults.abort"} & set(imported)


def test_the_proxy_process_loads_neither_the_lab_nor_pyroute2() -> None:
    """The proxy imports its addon and the app faults it applies, and nothing of the lab: the
    faults' `Transport` type lived in faultlab.lab.process, whose package imports pyroute2 and
    the backends (0.13 s of the proxy's 0.48 s of imports, each run)."""
    app = sorted(name for name, fault in FAULTS.items() if fault.layer == "app")
    assert {"freeze", "abort", "rewrite"} <= set(app)
    done = subprocess.run([sys.executable, "-c", (
        "import json, sys\nfrom faultlab.proxy.__main__ import bare_addons_package\n"
        "bare_addons_package()\nimport faultlab.proxy.process\n"
        "from faultlab.faults import FAULTS\n"
        f"assert all(FAULTS[name].layer == 'app' for name in {app!r})\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'pyroute2' or "
        "m.startswith('faultlab.lab'))))")], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
