"""The benchmark's table: every figure beside its peer, measured in the same run on the same work.

Absolute times on a shared 2-core machine move from run to run; a ratio measured side by side
holds. So a row is one figure against one peer (a figure with several peers takes one row each):
faultlab's value, the peer's, the ratio, the goal and whether it held, and what each side did. A
figure no peer can measure stands alone with its absolute goal; a row that could not be measured
says why instead (a peer not installed, no Docker engine, a qdisc the kernel lacks).

`ratio` always reads the same way: how many times better faultlab did than the peer (above 1:
faultlab faster, or with more throughput; below 1: the peer did better), so that `bench/compare.py`
can tell a ratio that got worse without knowing the figure. `render` prints the table and the
machine; `write_json` writes the same for CI's history. Standard library only: the tests and
compare.py load it without faultlab.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

FORMAT = 1
Better = Literal["higher", "lower"]


# Why a figure that builds namespaces was not measured by a user who is not root.
NEEDS_ROOT = "needs root (network namespaces)"


@dataclass(frozen=True)
class Measure:
    """A measured value and its unit (`ms`, `s`, `pkt/s`, `msg/s`, `sessions`, ...)."""

    value: float
    unit: str

    def text(self) -> str:
        v, size = self.value, abs(self.value)
        if size >= 100 or (size >= 1 and float(v).is_integer()):
            number = f"{v:,.0f}"
        else:
            number = f"{v:.1f}" if size >= 10 else f"{v:.2f}" if size >= 1 else f"{v:.3f}"
        return f"{number} {self.unit}"


@dataclass
class Row:
    """One figure against one peer (`peer` None: no peer measures it), or why it was skipped."""

    figure: str
    faultlab: Measure | None
    peer: str | None = None
    peer_value: Measure | None = None
    # How many times better faultlab did than the peer: above 1, faultlab is ahead.
    ratio: float | None = None
    goal: str = ""
    ok: bool | None = None
    # Which way faultlab's own value is better: for the rows with no peer, which compare.py
    # then judges on the value itself.
    better: Better = "lower"
    note: str = ""
    skipped: str | None = None

    @property
    def key(self) -> str:
        """What names the row across runs (compare.py matches rows by it)."""
        return f"{self.figure} | {self.peer or '-'}"

    @property
    def verdict(self) -> str:
        if self.skipped is not None:
            return "skipped"
        return "-" if self.ok is None else "ok" if self.ok else "MISSED"


def versus(figure: str, faultlab: Measure, peer: str, theirs: Measure, better: Better, *,
           at_least: float | None = None, also: bool | None = None, goal: str = "",
           note: str = "") -> Row:
    """A row of faultlab against a peer on the same work. The ratio is the peer's value over
    faultlab's when lower is better (times), faultlab's over the peer's when higher is (rates).
    `at_least` is the ratio goal; `also` any other goal that must hold too (its text in `goal`,
    after the ratio's)."""
    if faultlab.value <= 0 or theirs.value <= 0:
        ratio = None
    elif better == "lower":
        ratio = theirs.value / faultlab.value
    else:
        ratio = faultlab.value / theirs.value
    goals = ([f">= {at_least:g}x"] if at_least is not None else []) + ([goal] if goal else [])
    checks = ([ratio is not None and ratio >= at_least] if at_least is not None else [])
    checks += [also] if also is not None else []
    return Row(figure, faultlab, peer, theirs, ratio, ", ".join(goals),
               all(checks) if checks else None, better, note)


def alone(figure: str, faultlab: Measure, better: Better, goal: str, ok: bool | None,
          note: str = "") -> Row:
    """A figure no peer measures, against its absolute goal."""
    return Row(figure, faultlab, goal=goal, ok=ok, better=better, note=note)


def skipped(figure: str, peer: str | None, reason: str, goal: str = "", note: str = "") -> Row:
    """A row that was not measured, and why."""
    return Row(figure, None, peer, goal=goal, note=note, skipped=reason)


def print_figure(name: str, value: float, unit: str, goal: str, ok: bool) -> None:
    """A figure as it is measured, before the table: its value and whether its goal held."""
    print(f"{name:<44} {value:>10.2f} {unit:<8} goal {goal:<10} {'ok' if ok else 'MISSED'}")


def print_beside(name: str, value: float, unit: str) -> None:
    """A peer's figure, printed under faultlab's."""
    print(f"{'  ' + name:<44} {value:>10.2f} {unit}")


def _first_line(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if lines else None


def _package(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def machine() -> dict[str, Any]:
    """What the figures were measured on: cores, CPU, memory, kernel, Python, load when asked,
    and the versions of faultlab and of every peer (None: not installed)."""
    return {
        "cores": os.cpu_count(), "cpu": _cpu_model(), "memory_gib": _memory_gib(),
        "kernel": platform.release(), "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "versions": {
            "faultlab": _package("faultlab"), "mitmproxy": _package("mitmproxy"),
            "dpkt": _package("dpkt"), "scapy": _package("scapy"),
            "tshark": _first_line(["tshark", "--version"]),
            "iptables": _first_line(["iptables", "--version"]),
            "iproute2": _first_line(["ip", "-V"]),
            "docker": _first_line(["docker", "--version"]),
        },
    }


def describe_machine(m: dict[str, Any]) -> str:
    load = m.get("load_average") or []
    return (f"machine: {m.get('cores')} cores ({m.get('cpu')}), "
            f"{m.get('memory_gib')} GiB, Linux {m.get('kernel')}, Python {m.get('python')}, "
            f"load average {' '.join(str(x) for x in load)} at the start")


def _cells(row: Row) -> list[str]:
    ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "-"
    if row.skipped is not None:
        return [row.figure, "-", row.peer or "-", "-", row.goal or "-", f"skipped: {row.skipped}"]
    peer = "-" if row.peer is None else (
        f"{row.peer} {row.peer_value.text()}" if row.peer_value is not None else row.peer)
    return [row.figure, row.faultlab.text() if row.faultlab else "-", peer, ratio,
            row.goal or "-", row.verdict]


def render(rows: list[Row], m: dict[str, Any] | None = None, wall_s: float | None = None) -> str:
    """The table (figure, faultlab, peer, ratio, goal, ok/MISSED or skipped with its reason),
    then what each row measured, and the machine."""
    headings = ["#", "figure", "faultlab", "peer", "ratio", "goal", "result"]
    body = [[str(i), *_cells(r)] for i, r in enumerate(rows, 1)]
    # The last column is left unpadded: a skip reason may be long.
    widths = [max([len(h), *(len(b[i]) for b in body)]) for i, h in enumerate(headings[:-1])]

    def line(cells: list[str]) -> str:
        return "  ".join([*(c.ljust(w) for c, w in zip(cells, widths, strict=False)),
                          cells[-1]]).rstrip()

    missed = sum(1 for r in rows if r.verdict == "MISSED")
    skips = sum(1 for r in rows if r.skipped is not None)
    out = [line(headings), line(["-" * w for w in widths] + ["-" * 6]), *(line(b) for b in body)]
    out += ["", f"{len(rows)} rows: {len(rows) - missed - skips} measured and ok or without a "
            f"goal, {missed} MISSED, {skips} skipped. Ratio: how many times better faultlab did "
            "than the peer (above 1: faultlab ahead)."]
    notes = [f"  {i:>2}. {r.note}" for i, r in enumerate(rows, 1) if r.note]
    if notes:
        out += ["", "What each row measured:", *notes]
    if m is not None:
        out += ["", describe_machine(m)]
        versions = ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items() if v)
        if versions:
            out.append(f"versions: {versions}")
    if wall_s is not None:
        out.append(f"bench wall time: {wall_s:.0f} s")
    return "\n".join(out)


@dataclass
class Report:
    """What `--json FILE` holds: the rows, the machine, when and how long."""

    rows: list[Row]
    machine: dict[str, Any] = field(default_factory=dict)
    started: str = ""
    wall_s: float = 0.0
    format: int = FORMAT

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "started": self.started, "wall_s": round(self.wall_s, 1),
                "machine": self.machine,
                "rows": [{"key": r.key, **asdict(r), "verdict": r.verdict} for r in self.rows]}


def write_json(path: Path, rows: list[Row], m: dict[str, Any], started: datetime,
               wall_s: float) -> None:
    report = Report(rows, m, started.astimezone().isoformat(timespec="seconds"), wall_s)
    path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, default=None, metavar="FILE",
                        help="also write the table and the machine to FILE as JSON "
                             "(bench/compare.py compares two)")


def finish(rows: list[Row], json_path: Path | None, m: dict[str, Any], started: datetime,
           wall_s: float) -> None:
    """Print the table with the machine `m` (described when the bench started) and write it to
    `json_path` when given."""
    print()
    print(render(rows, m, wall_s))
    if json_path is not None:
        write_json(json_path, rows, m, started, wall_s)
        print(f"written: {json_path}")
