"""The bench's table: ratios that read one way, goals judged, skipped rows with their reason."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from .conftest import bench_module

table = bench_module("table")
MACHINE = {"cores": 2, "cpu": "test", "memory_gib": 1.0, "kernel": "6.1", "python": "3.13.0",
           "load_average": [0.5, 0.5, 0.5], "versions": {"faultlab": "0.1.0", "dpkt": None}}


def test_skipped_row_is_rendered_with_its_reason() -> None:
    """A row that was not measured shows its figure, its peer and `skipped:` with the reason."""
    rows = [table.skipped("fault latency applied", "tc qdisc add netem",
                          "this kernel has no netem qdisc (tc: Error: Specified qdisc kind is "
                          "unknown.)")]
    text = table.render(rows, MACHINE)
    line = next(ln for ln in text.splitlines() if "fault latency applied" in ln)
    assert "tc qdisc add netem" in line
    assert line.endswith("skipped: this kernel has no netem qdisc (tc: Error: Specified qdisc "
                         "kind is unknown.)")
    assert "1 skipped" in text


def test_ratio_reads_higher_is_better_both_ways() -> None:
    """A time's ratio is the peer's over faultlab's, a rate's faultlab's over the peer's."""
    faster = table.versus("lab", table.Measure(10, "ms"), "ip", table.Measure(30, "ms"), "lower")
    busier = table.versus("pcap", table.Measure(60_000, "pkt/s"), "dpkt",
                          table.Measure(30_000, "pkt/s"), "higher")
    assert faster.ratio == 3.0
    assert busier.ratio == 2.0


def test_a_ratio_goal_or_another_goal_missed_is_missed() -> None:
    """A row is ok only when its ratio goal and its other goal both hold."""
    ok = table.versus("a", table.Measure(10, "ms"), "p", table.Measure(40, "ms"), "lower",
                      at_least=3, also=True, goal="<= 15 ms")
    short = table.versus("b", table.Measure(10, "ms"), "p", table.Measure(20, "ms"), "lower",
                         at_least=3, also=True, goal="<= 15 ms")
    slow = table.versus("c", table.Measure(20, "ms"), "p", table.Measure(80, "ms"), "lower",
                        at_least=3, also=False, goal="<= 15 ms")
    assert (ok.verdict, short.verdict, slow.verdict) == ("ok", "MISSED", "MISSED")
    assert ok.goal == ">= 3x, <= 15 ms"
    lines = table.render([ok, short, slow]).splitlines()
    assert [ln.split()[-1] for ln in lines[2:5]] == ["ok", "MISSED", "MISSED"]


def test_a_row_without_a_goal_is_neither_ok_nor_missed() -> None:
    """A ratio shown for information has no verdict."""
    row = table.versus("pcap command", table.Measure(1, "pkt/s"), "tshark",
                       table.Measure(2, "pkt/s"), "higher")
    assert row.ok is None and row.verdict == "-"


def test_json_holds_the_rows_and_the_machine(tmp_path: Path) -> None:
    """--json FILE writes every row with its key and verdict, and the machine."""
    rows = [table.versus("lab", table.Measure(10, "ms"), "ip", table.Measure(30, "ms"), "lower",
                         at_least=1),
            table.skipped("lab", "docker run --rm", "no Docker engine")]
    path = tmp_path / "bench.json"
    table.write_json(path, rows, MACHINE, datetime(2026, 12, 1), 12.5)
    data = json.loads(path.read_text())
    assert data["machine"]["cores"] == 2 and data["wall_s"] == 12.5
    assert [r["key"] for r in data["rows"]] == ["lab | ip", "lab | docker run --rm"]
    assert [r["verdict"] for r in data["rows"]] == ["ok", "skipped"]
    assert data["rows"][1]["skipped"] == "no Docker engine"
    assert data["rows"][0]["faultlab"] == {"value": 10, "unit": "ms"}
