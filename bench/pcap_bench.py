"""`faultlab pcap inspect` on a 15-minute Live API audio session over wss:// (goal: under 10 s).

    python bench/pcap_bench.py [--minutes 15] [--keep DIR]

The session is synthesised with real TLS in a network namespace of its own
(`faultlab.capture.synthetic`): the client streams 100 ms `realtimeInput` chunks of 16 kHz audio
(10 a second, 9,000 in 15 minutes) and the server answers every 20 s with 5 s of 24 kHz audio in
100 ms `serverContent` chunks and a few text frames, as fast as both can; tcpdump captures it and
both ends write their key logs, so the folder reads as a run folder. Then the faultlab command is
timed as a user runs it (a new process each time): inspect with the key logs (tshark), inspect of
the bare pcap (the flow walk alone), and the server report. Needs root and tshark.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from faultlab.capture.synthetic import SessionPlan, record

GOAL_S = 10.0


def timed(*args: str) -> tuple[float, dict[str, object]]:
    """Seconds that `faultlab ARGS --json` took, and its output."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "faultlab", *args, "--json"], check=True,
                          capture_output=True, text=True)
    return time.perf_counter() - started, json.loads(done.stdout)


def frames_in(report: dict[str, object]) -> int:
    flows = report["flows"]
    assert isinstance(flows, list)
    return sum(len(f["websocket_frames"]) for f in flows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=15.0, help="session length to synthesise")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="write the session's folder here and keep it")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("pcap bench: needs root (a network namespace and tcpdump)")
    if shutil.which("tshark") is None:
        sys.exit("pcap bench: needs tshark (apt-get install tshark)")
    # SIGTERM unwinds like Ctrl-C, so that the namespace, processes and folder are removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    plan = SessionPlan(up_frames=round(args.minutes * 60 * 10), reply_every=200,
                       reply_chunks=50)
    scratch = None if args.keep else Path(tempfile.mkdtemp(prefix="faultlab-pcap-bench-"))
    folder = args.keep or scratch
    assert folder is not None
    try:
        started = time.perf_counter()
        record(plan, folder)
        made_s = time.perf_counter() - started
        pcap = folder / "capture.pcap"
        inspect_s, report = timed("pcap", "inspect", str(folder))
        bare_s, _ = timed("pcap", "inspect", str(pcap))
        server_s, _ = timed("pcap", "server", str(folder))
        packets = int(str(report["packets"]))
        frames = frames_in(report)
        print(f"faultlab pcap benchmark ({os.cpu_count()} cores): a {args.minutes:g}-minute "
              f"session over wss://, {pcap.stat().st_size / 1e6:.1f} MB, synthesised in "
              f"{made_s:.1f} s; {frames} of its {plan.frames} frames listed")
        print(f"{'':<38}{'packets':>9}{'packets/s':>11}{'frames':>8}{'seconds':>9}  goal")
        for name, seconds, shown in (("pcap inspect RUN_DIR (tshark, TLS)", inspect_s, frames),
                                     ("pcap inspect capture.pcap (flows)", bare_s, 0),
                                     ("pcap server RUN_DIR (tshark, TLS)", server_s, frames)):
            verdict = "ok" if seconds < GOAL_S else "MISSED"
            print(f"{name:<38}{packets:>9}{packets / seconds:>11.0f}{shown or '-':>8}"
                  f"{seconds:>9.2f}  < {GOAL_S:g} s {verdict}")
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # what was started is gone by now (record's and main's finally)
        sys.exit("pcap bench: interrupted")
