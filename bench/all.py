"""`make bench`: every figure of faultlab beside the tool a user would otherwise pick, measured in
the same run on the same work, in one table.

    python bench/all.py [--json FILE] [--only PART ...] [-n 30] [--no-full-suite]

Runs the benchmark's parts one after another in this process (each prints its figures as it
measures them; `--only PART` runs some alone), then prints one table of all their rows (figure,
faultlab, peer, ratio, goal, ok/MISSED or skipped with the reason) and the machine; `--json FILE`
writes the same for CI's history, and `bench/compare.py OLD.json NEW.json` names every ratio that
got worse. A part that fails is a row saying so, and the command then exits 1; missed goals are
reported, not failures.

Parts, in order, each a module of bench/ (some also run alone as scripts): lab (set-up +
teardown, a container client's start-up: lab_bench.py), faults (fault_bench.py), middlebox (a
forged RST's time from trigger to the wire: middlebox_bench.py), pcap (the 100k-packet ws://
capture: ws_capture_bench.py; the 15-minute wss:// session: pcap_bench.py), proxy
(proxy_bench.py), impair (impair_bench.py), emulator (emulator_bench.py), recovery
(recovery_bench.py), suite (suite_bench.py), report (report.html of a 15-minute run in headless
Chromium, and its timeline.png: report_bench.py), mtu (an MTU black hole: what size passes,
what stalls: mtu_bench.py), explore (points per minute beside a baseline commit's exploration
and beside one `faultlab run` a point: explore_bench.py), cpu (CPU seconds per run, by process,
beside a baseline commit's measured in the same run: cpu_bench.py), webrtc (the emulator's
real-time WebRTC calls, the lab's added one-way latency: webrtc_bench.py); the baseline
commit's checkout is bench/baseline.py's.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime

import baseline
import cpu_bench
import emulator_bench
import explore_bench
import fault_bench
import impair_bench
import lab_bench
import middlebox_bench
import mtu_bench
import pcap_bench
import proxy_bench
import recovery_bench
import report_bench
import suite_bench
import table
import webrtc_bench
import ws_capture_bench
from table import NEEDS_ROOT, Row, skipped

type Part = Callable[[argparse.Namespace], list[Row]]


def _root_only(figure: str, collect: Part) -> Part:
    def part(args: argparse.Namespace) -> list[Row]:
        if os.geteuid() != 0:
            return [skipped(figure, None, NEEDS_ROOT)]
        return collect(args)

    return part


PARTS: dict[str, tuple[str, Part]] = {
    "lab": ("bench/lab_bench.py", _root_only("lab set-up + teardown",
                                             lambda a: lab_bench.collect(a.n))),
    "faults": ("bench/fault_bench.py", _root_only("fault applied",
                                                  lambda a: fault_bench.collect(a.n))),
    "middlebox": ("bench/middlebox_bench.py", _root_only(
        "forged RST on the wire", lambda a: middlebox_bench.collect(max(a.n // 2, 5)))),
    "pcap": ("bench/ws_capture_bench.py, bench/pcap_bench.py",
             lambda a: [*ws_capture_bench.collect(a.packets), *pcap_bench.collect(a.minutes)]),
    "proxy": ("bench/proxy_bench.py", lambda a: proxy_bench.collect()),
    "impair": ("bench/impair_bench.py", lambda a: impair_bench.collect()),
    "emulator": ("bench/emulator_bench.py", lambda a: emulator_bench.collect(a.sessions, a.seconds)),
    "recovery": ("bench/recovery_bench.py", lambda a: recovery_bench.collect(a.runs)),
    "suite": ("bench/suite_bench.py", lambda a: suite_bench.collect(a.jobs,
                                                                    full=a.full_suite)),
    "report": ("bench/report_bench.py", lambda a: report_bench.collect()),
    "mtu": ("bench/mtu_bench.py", _root_only("MTU black hole", lambda a: mtu_bench.collect())),
    "explore": ("bench/explore_bench.py", _root_only(
        "explore points per minute", lambda a: explore_bench.collect(a.jobs, a.baseline))),
    "cpu": ("bench/cpu_bench.py", _root_only(
        "CPU per run", lambda a: cpu_bench.collect(a.runs, a.baseline))),
    "webrtc": ("bench/webrtc_bench.py", _root_only(
        "emulator WebRTC calls with no chunk late", lambda a: webrtc_bench.collect())),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=list(PARTS), metavar="PART",
                        help=f"run only these parts ({', '.join(PARTS)})")
    parser.add_argument("-n", type=int, default=30, help="repetitions for the lab and faults")
    parser.add_argument("--packets", type=int, default=100_000, help="the ws:// capture's size")
    parser.add_argument("--minutes", type=float, default=15.0,
                        help="the wss:// session's length")
    parser.add_argument("--sessions", type=int, nargs="+", default=[25, 50, 75, 100],
                        help="emulator session counts to try")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each emulator load")
    parser.add_argument("--runs", type=int, default=3,
                        help="recovery runs per client; cpu runs of each profile on each side")
    parser.add_argument("--baseline", default=baseline.BASELINE, metavar="REV",
                        help="the commit the cpu and explore parts compare with (default: the "
                             "code before issue #36's cuts)")
    parser.add_argument("--jobs", default="auto", help="runs at once for the parallel suite")
    parser.add_argument("--no-full-suite", dest="full_suite", action="store_false",
                        help="skip the whole field suite against the field study")
    table.add_json_option(parser)
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so that every lab, process and folder is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started, clock, machine = datetime.now(), time.monotonic(), table.machine()
    print(f"faultlab benchmark: {table.describe_machine(machine)}", flush=True)
    rows: list[Row] = []
    failed = []
    for name, (where, part) in PARTS.items():
        if args.only and name not in args.only:
            continue
        print(f"\n== {name} ({where})", flush=True)
        part_started = time.monotonic()
        try:
            rows += part(args)
        except Exception as exc:  # one part's failure is a row; the others still run
            traceback.print_exc()
            failed.append(name)
            rows.append(skipped(name, None, f"the part failed: {exc!r}"))
        print(f"== {name}: {time.monotonic() - part_started:.0f} s", flush=True)
    print("\n== the table")
    table.finish(rows, args.json, machine, started, time.monotonic() - clock)
    if failed:
        print(f"failed parts: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("bench: interrupted")
