"""Compare two `make bench` results and name every figure that got worse.

    python bench/compare.py OLD.json NEW.json [--threshold 0.2] [--absolute]

Each file is what `bench/all.py --json FILE` wrote. Rows are matched by figure and peer. A ratio
(how many times better faultlab did than its peer, measured side by side in one run) that fell by
more than the threshold, as a share of the old ratio, is a regression: the command names each one
and exits 1; with none it exits 0 (2 for a file it cannot read). Ratios always read "higher is
better", so no figure needs its own rule. A row with no peer has only an absolute value, which moves
with the machine's load; it is compared (in the direction its row says is better) only with
`--absolute`. Rows that went from ok to MISSED, became skipped, or disappeared are listed too, as
notes that do not fail the comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Regression:
    key: str
    what: str  # "ratio" or the unit of an absolute value
    old: float
    new: float
    worse_by: float  # share of the old value

    def line(self) -> str:
        if self.what == "ratio":
            return (f"WORSE  {self.key}: ratio {self.old:.2f}x -> {self.new:.2f}x "
                    f"({self.worse_by:.0%} worse)")
        return (f"WORSE  {self.key}: {self.old:g} -> {self.new:g} {self.what} "
                f"({self.worse_by:.0%} worse)")


def load(path: Path) -> dict[str, dict[str, Any]]:
    """The rows of a result file by key; a ValueError that names the file if it is not one."""
    try:
        data = json.loads(path.read_text())
        rows = data["rows"]
        return {row["key"]: row for row in rows}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a bench result ({exc})") from None


def _worse_by(old: float, new: float, better: str) -> float:
    """How much worse `new` is than `old`, as a share of `old` (0 or less: not worse)."""
    if old == 0:
        return 0.0
    change = (new - old) / abs(old)
    return -change if better == "higher" else change


def regressions(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]],
                threshold: float, absolute: bool = False) -> list[Regression]:
    """The rows of both files whose ratio (or, with `absolute`, peerless value) got worse by
    more than `threshold`."""
    out = []
    for key, now in new.items():
        was = old.get(key)
        if was is None or now.get("skipped") or was.get("skipped"):
            continue
        if was.get("ratio") is not None and now.get("ratio") is None:
            # A figure that no longer gives a ratio (faultlab's value or the peer's was none)
            # measured nothing: as bad as it gets.
            out.append(Regression(key, "ratio", was["ratio"], 0.0, 1.0))
        elif was.get("ratio") is not None:
            worse = _worse_by(was["ratio"], now["ratio"], "higher")
            if worse > threshold:
                out.append(Regression(key, "ratio", was["ratio"], now["ratio"], worse))
        elif absolute and was.get("peer") is None and was.get("faultlab") and now.get("faultlab"):
            before, after = was["faultlab"]["value"], now["faultlab"]["value"]
            worse = _worse_by(before, after, now.get("better", "lower"))
            if worse > threshold:
                out.append(Regression(key, now["faultlab"]["unit"], before, after, worse))
    return out


def notes(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]) -> list[str]:
    """What changed that is no regression of a ratio: goals newly missed, rows now skipped or
    gone, rows new."""
    out = []
    for key, was in old.items():
        now = new.get(key)
        if now is None:
            out.append(f"note   {key}: no longer in the results")
        elif now.get("skipped") and not was.get("skipped"):
            out.append(f"note   {key}: now skipped ({now['skipped']})")
        elif was.get("verdict") == "ok" and now.get("verdict") == "MISSED":
            out.append(f"note   {key}: goal {now.get('goal')} now MISSED")
    out += [f"note   {key}: new" for key in new if key not in old]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--threshold", type=float, default=0.2,
                        help="how much worse, as a share of the old ratio (default 0.2: 20 %%)")
    parser.add_argument("--absolute", action="store_true",
                        help="also compare the absolute values of rows with no peer")
    args = parser.parse_args(argv)
    try:
        old, new = load(args.old), load(args.new)
    except ValueError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    found = regressions(old, new, args.threshold, args.absolute)
    for line in [r.line() for r in found] + notes(old, new):
        print(line)
    compared = sum(1 for k, r in new.items()
                   if k in old and not r.get("skipped") and old[k].get("ratio") is not None)
    print(f"{len(found)} of {compared} ratios worse by more than {args.threshold:.0%}"
          + ("" if not found else ": " + "; ".join(r.key for r in found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
