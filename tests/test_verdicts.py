"""No test judges how fast something happened: `patience()` bounds waits, never a verdict."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def calls_patience(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id == "patience" for n in ast.walk(node))


def test_no_comparison_rests_on_patience() -> None:
    """A comparison with `patience()` would judge the machine's load (a deadline stretched for
    slow machines is still a deadline); a wait bounded by it (`timeout=patience(5)`, a round
    trip that must come) is no comparison. Each test file is parsed and none compares."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare) and calls_patience(node):
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert found == []
