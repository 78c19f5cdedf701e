"""bench/compare.py: a figure that got worse by more than the threshold is named and fails."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from .conftest import bench_module

table = bench_module("table")
compare = bench_module("compare")
MACHINE = {"cores": 2, "kernel": "6.1", "python": "3.13.0", "versions": {}}


def result(path: Path, lab_ms: float = 15.0, pcap_pps: float = 60_000.0,
           emulator: float = 50.0) -> Path:
    """A bench result with a time figure, a rate figure (both beside a peer that did not
    change) and a figure with no peer."""
    rows = [
        table.versus("lab set-up + teardown", table.Measure(lab_ms, "ms"), "ip CLI script",
                     table.Measure(35.0, "ms"), "lower", at_least=1),
        table.versus("pcap inspect", table.Measure(pcap_pps, "pkt/s"), "dpkt",
                     table.Measure(40_000.0, "pkt/s"), "higher", at_least=2),
        table.alone("emulator sessions", table.Measure(emulator, "sessions"), "higher",
                    ">= 50 sessions", emulator >= 50),
        table.skipped("lab set-up + teardown", "docker run --rm", "no Docker engine"),
    ]
    table.write_json(path, rows, MACHINE, datetime(2026, 12, 1), 60.0)
    return path


def test_a_deliberately_slowed_figure_is_flagged(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The lab twice as slow beside an unchanged peer halves its ratio: named, exit 1."""
    old = result(tmp_path / "old.json")
    new = result(tmp_path / "new.json", lab_ms=30.0)
    assert compare.main([str(old), str(new)]) == 1
    out = capsys.readouterr().out
    flagged = [ln for ln in out.splitlines() if ln.startswith("WORSE")]
    assert len(flagged) == 1
    assert "lab set-up + teardown | ip CLI script" in flagged[0]
    assert "2.33x -> 1.17x" in flagged[0]


def test_an_unchanged_pair_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same figures twice: nothing named, exit 0."""
    old = result(tmp_path / "old.json")
    new = result(tmp_path / "new.json")
    assert compare.main([str(old), str(new)]) == 0
    assert "WORSE" not in capsys.readouterr().out


def test_which_way_is_better_follows_the_figure(tmp_path: Path) -> None:
    """A rate that fell is worse, a rate that rose and a time that fell are not."""
    old = result(tmp_path / "old.json")
    slower = result(tmp_path / "slower.json", pcap_pps=30_000.0)
    faster = result(tmp_path / "faster.json", lab_ms=5.0, pcap_pps=120_000.0)
    assert compare.main([str(old), str(slower)]) == 1
    assert compare.main([str(old), str(faster)]) == 0


def test_the_threshold_decides(tmp_path: Path) -> None:
    """Ten percent worse passes the default 20 % and fails a 5 % threshold."""
    old = result(tmp_path / "old.json")
    new = result(tmp_path / "new.json", pcap_pps=54_000.0)
    assert compare.main([str(old), str(new)]) == 0
    assert compare.main([str(old), str(new), "--threshold", "0.05"]) == 1


def test_a_figure_with_no_peer_is_compared_only_when_asked(tmp_path: Path) -> None:
    """An absolute value moves with the machine: judged only with --absolute."""
    old = result(tmp_path / "old.json")
    new = result(tmp_path / "new.json", emulator=25.0)
    assert compare.main([str(old), str(new)]) == 0
    assert compare.main([str(old), str(new), "--absolute"]) == 1


def test_a_file_that_is_no_result_exits_2(tmp_path: Path) -> None:
    """A file that is not a bench result is an error of its own, not a comparison."""
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert compare.main([str(bad), str(result(tmp_path / "new.json"))]) == 2


def test_a_figure_that_no_longer_gives_a_ratio_is_flagged(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A rate of 0 (the inspection read nothing) has no ratio: that is a regression, not a
    silence."""
    old = result(tmp_path / "old.json")
    new = result(tmp_path / "new.json", pcap_pps=0.0)
    assert compare.main([str(old), str(new)]) == 1
    assert "WORSE  pcap inspect | dpkt" in capsys.readouterr().out
