"""The bench's pure parts (bench/table.py, bench/compare.py), loaded from their files: bench/ is
scripts, not a package, and its folder is kept off sys.path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_module(name: str) -> ModuleType:
    """bench/<name>.py as a module of its own name (`faultlab_bench_<name>`), loaded once."""
    qualified = f"faultlab_bench_{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: dataclasses look their module up by name.
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module
