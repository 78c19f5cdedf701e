"""Every third-party package that faultlab imports is declared in `[project].dependencies`."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "faultlab"


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_dependencies(pyproject: Path = REPO / "pyproject.toml") -> set[str]:
    """The normalised names in `[project].dependencies`, without versions, extras or markers."""
    with pyproject.open("rb") as f:
        requirements = tomllib.load(f)["project"]["dependencies"]
    names = set()
    for requirement in requirements:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        assert match, f"pyproject.toml: unreadable requirement {requirement!r}"
        names.add(normalise(match[1]))
    return names


def imported_modules(source: str, filename: str) -> list[tuple[int, str, str]]:
    """(line, dotted module, statement) for every absolute import anywhere in the source: module level,
    in functions, under `if TYPE_CHECKING:`; `from a import b` gives `a.b`, which may be an attribute."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, f"import {alias.name}") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module if alias.name == "*" else f"{node.module}.{alias.name}",
                       f"from {node.module} import {alias.name}") for alias in node.names]
    return sorted(found)


@cache
def _packages_distributions() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


@cache
def _files(distribution: str) -> frozenset[str]:
    files = importlib.metadata.distribution(distribution).files or []
    return frozenset(f.as_posix() for f in files)


def distributions_of(module: str) -> list[str]:
    """The installed distributions that provide a dotted module, from `packages_distributions()`.

    A namespace package (`google`) is shared by several distributions; the deepest part of the dotted
    name that some of them ship (`google/genai/`) says which one the import really needs."""
    parts = module.split(".")
    candidates = _packages_distributions().get(parts[0], [])
    for depth in range(len(parts), 1, -1):
        prefix = "/".join(parts[:depth])
        shipping = [d for d in candidates
                    if any(f.startswith((f"{prefix}/", f"{prefix}.")) for f in _files(d))]
        if shipping:
            return sorted(set(shipping))
    return sorted(set(candidates))


def undeclared_imports(sources: Iterable[tuple[str, str]], declared: set[str]) -> list[str]:
    """One problem per third-party import, in (label, source) pairs, whose distribution is not declared."""
    problems = []
    for label, source in sources:
        for line, module, statement in imported_modules(source, label):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top in ("__future__", PACKAGE):
                continue
            distributions = distributions_of(module)
            if not distributions:
                problems.append(f"{label}:{line}: {statement}: no installed distribution provides it")
            elif not declared & {normalise(d) for d in distributions}:
                problems.append(f"{label}:{line}: {statement}: distribution {' or '.join(distributions)} "
                                "is not in [project].dependencies")
    return problems


# Modules that only their host program loads, and so may import it undeclared: the pytest plugin
# is loaded by pytest itself (the `pytest11` entry point).
HOSTED = {"faultlab/pytest_plugin.py"}


def package_sources() -> Iterator[tuple[str, str]]:
    for path in sorted((REPO / PACKAGE).rglob("*.py")):
        label = path.relative_to(REPO).as_posix()
        if label not in HOSTED:
            yield label, path.read_text(encoding="utf-8")


def test_every_third_party_import_is_a_declared_dependency() -> None:
    """Each third-party import in faultlab/, type-only and function-local ones too, has its distribution
    in `[project].dependencies`."""
    problems = undeclared_imports(package_sources(), declared_dependencies())
    assert not problems, "\n".join(problems)


def test_the_checker_reports_undeclared_and_missing_packages() -> None:
    """An installed but undeclared package, a type-only import of one and a missing package are each
    reported with their line."""
    source = ("import os\n"
              "import pytest\n"
              "from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n"
              "    from _pytest.fixtures import FixtureRequest\n"
              "def later() -> None:\n"
              "    import requests_oauthlib_nonexistent\n")
    problems = undeclared_imports([("synthetic.py", source)], declared_dependencies())
    assert problems == [
        "synthetic.py:2: import pytest: distribution pytest is not in [project].dependencies",
        "synthetic.py:5: from _pytest.fixtures import FixtureRequest: distribution pytest "
        "is not in [project].dependencies",
        "synthetic.py:7: import requests_oauthlib_nonexistent: no installed distribution provides it",
    ]


def test_a_namespace_package_maps_to_the_distribution_that_ships_the_submodule() -> None:
    """`google.genai` is google-genai's even though google-auth also ships under `google`."""
    assert distributions_of("google.genai.types") == ["google-genai"]
