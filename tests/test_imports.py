"""The static import graph of faultlab has no cycles."""

from __future__ import annotations

import ast
import itertools
import tomllib
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The modules that import others by name, and why: the graph cannot see those imports.
BY_NAME = {
    "faultlab/faults/base.py": "the fault registry imports a fault's module when a profile names "
                               "it (each imports faultlab.faults.base: lazily, so no cycle)",
    "faultlab/warm.py": "a warm job runs `python -m faultlab` in the forked process (the command "
                        "runs jobs: this module)",
    "faultlab/lab/zygote.py": "a forked lab process runs its module as `python -m` would (the "
                              "emulator's command, the proxy, the peers; the lab runs them)",
}
# importer -> imported -> "file:line" of every statement that makes the edge
Graph = dict[str, dict[str, list[str]]]


def package_modules(root: Path, package: str) -> dict[str, Path]:
    """Every module and package under root/package, by dotted name."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def import_graph(root: Path, package: str) -> Graph:
    """Edges for every import statement (module level, in functions, under `if TYPE_CHECKING:`) between
    modules of the package; `from a.b import c` goes to `a.b.c` if that is a module, else to `a.b`, and
    importing `a.b.c` adds no edge to its parents `a.b` or `a`."""
    modules = package_modules(root, package)
    graph: Graph = {name: {} for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), here)):
            targets: list[str] = []
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    # A module's relative imports start from its package; a package's from itself.
                    base_parts = name.split(".")[: len(name.split(".")) - node.level + is_package]
                    base = ".".join([*base_parts, *([node.module] if node.module else [])])
                else:
                    base = node.module or ""
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            for target in dict.fromkeys(targets):
                if target in modules:
                    graph[name].setdefault(target, []).append(f"{here}:{node.lineno}")
    for loader, target, where in entry_point_imports(root):
        if loader in modules and target in modules:
            graph[loader].setdefault(target, []).append(where)
    return graph


def entry_point_imports(root: Path) -> list[tuple[str, str, str]]:
    """The imports the package's own entry points make: a group named after a module (the
    `faultlab.scenarios` packs) is loaded by that module, which imports each entry's module."""
    path = root / "pyproject.toml"
    if not path.exists():
        return []
    groups = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {}).get(
        "entry-points", {})
    return [(group, value.split(":")[0].strip(), f"pyproject.toml: {group}.{name}")
            for group, entries in groups.items() for name, value in entries.items()]


def strongly_connected_components(graph: Graph) -> list[list[str]]:
    """Tarjan's components, iteratively, each sorted; singletons included."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def _shortest_path(graph: Graph, within: set[str], source: str, target: str) -> list[str]:
    previous: dict[str, str] = {}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        if node == target:
            break
        for succ in sorted(graph[node]):
            if succ in within and succ not in previous and succ != source:
                previous[succ] = node
                queue.append(succ)
    path = [target]
    while path[-1] != source:
        path.append(previous[path[-1]])
    return path[::-1]


def import_cycles(graph: Graph) -> list[str]:
    """Short cycles that together cover every edge inside each cyclic component, each as `a -> b -> a`
    followed by one line per edge with the file:line of the statements that make it."""
    cycles: list[str] = []
    for component in strongly_connected_components(graph):
        members = set(component)
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        covered: set[tuple[str, str]] = set()
        for a in component:
            for b in sorted(graph[a]):
                if b not in members or (a, b) in covered:
                    continue
                nodes = [a] if a == b else [a, *_shortest_path(graph, members, b, a)[:-1]]
                first = nodes.index(min(nodes))
                loop = [*nodes[first:], *nodes[:first], nodes[first]]
                edges = list(itertools.pairwise(loop))
                covered.update(edges)
                cycles.append(" -> ".join(loop) + "".join(
                    f"\n    {u} -> {v}: {', '.join(graph[u][v])}" for u, v in edges))
    return sorted(cycles)


def test_faultlab_has_no_import_cycles() -> None:
    """No faultlab module reaches itself through imports, counting lazy and type-only ones."""
    cycles = import_cycles(import_graph(REPO, "faultlab"))
    assert not cycles, f"{len(cycles)} import cycle(s):\n" + "\n".join(cycles)


def test_the_detector_reports_a_two_module_cycle(tmp_path: Path) -> None:
    """A relative import under TYPE_CHECKING back to a module that imports it is reported with both lines."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from pkg import b\n")
    (tmp_path / "pkg" / "b.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .a import Thing\n")
    assert import_cycles(import_graph(tmp_path, "pkg")) == [
        "pkg.a -> pkg.b -> pkg.a\n    pkg.a -> pkg.b: pkg/a.py:1\n    pkg.b -> pkg.a: pkg/b.py:4"]


def test_an_entry_point_group_named_after_a_module_is_an_import_of_it(tmp_path: Path) -> None:
    """A pack named under the loader's entry point group that imports the loader back is a cycle."""
    (tmp_path / "pkg" / "packs").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "packs" / "__init__.py").write_text("def load() -> None: ...\n")
    (tmp_path / "pkg" / "packs" / "mine.py").write_text("from pkg.packs import load\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project.entry-points."pkg.packs"]\nmine = "pkg.packs.mine:PACK"\n')
    assert import_cycles(import_graph(tmp_path, "pkg")) == [
        "pkg.packs -> pkg.packs.mine -> pkg.packs"
        "\n    pkg.packs -> pkg.packs.mine: pyproject.toml: pkg.packs.mine"
        "\n    pkg.packs.mine -> pkg.packs: pkg/packs/mine.py:1"]


def test_faultlab_names_no_module_by_a_string() -> None:
    """No faultlab module imports by a name the graph cannot see (importlib, runpy, __import__)
    but those BY_NAME says why."""
    for path in sorted((REPO / "faultlab").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "__import__(" not in text, path
        if "import_module(" in text or "run_module(" in text:
            assert path.relative_to(REPO).as_posix() in BY_NAME, path


def test_a_package_importing_its_children_is_not_a_cycle(tmp_path: Path) -> None:
    """A package's `__init__` registering its submodules, which import siblings by full name, is acyclic."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from . import a, b\n")
    (tmp_path / "pkg" / "a.py").write_text("import pkg.b\n")
    (tmp_path / "pkg" / "b.py").write_text("def later() -> None:\n    from pkg.c import d\n")
    (tmp_path / "pkg" / "c.py").write_text("d = 1\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg"] == {"pkg.a": ["pkg/__init__.py:1"], "pkg.b": ["pkg/__init__.py:1"]}
    assert graph["pkg.b"] == {"pkg.c": ["pkg/b.py:2"]}
    assert import_cycles(graph) == []
