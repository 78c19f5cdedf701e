"""`faultlab pcap inspect` on a 15-minute Live API audio session over wss:// (goal: under 10 s),
beside the tools a user would otherwise pick, on the same capture.

    python bench/pcap_bench.py [--minutes 15] [--keep DIR] [--json FILE]

The session is synthesised with real TLS in a network namespace of its own
(`faultlab.capture.synthetic`): the client streams 100 ms `realtimeInput` chunks of 16 kHz audio
(10 a second, 9,000 in 15 minutes) and the server answers every 20 s with 5 s of 24 kHz audio in
100 ms `serverContent` chunks and a few text frames, as fast as both can; tcpdump captures it and
both ends write their key logs, so the folder reads as a run folder (a field run's capture, as
long as the field study's 15-minute runs). Then the faultlab command is timed as a user runs it
(a new process each time): inspect with the key logs (tshark), inspect of the bare pcap (the flow
walk alone), and the server report; beside it, tshark alone listing the same WebSocket frames
with the same key logs, and the flow walk with dpkt's and scapy's parsers in-process (none of
the three decrypts TLS in-process: the flows, their counts and their TLS are the work). Needs
root and tshark.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import table
from pcap_peers import (
    PEERS,
    faultlab_command,
    inspect_beside,
    missing,
    tshark_frames,
)
from table import Measure, Row, alone, skipped, versus

from faultlab.capture.synthetic import SessionPlan, record
from faultlab.capture.tshark import find_tshark, merge_keylogs

GOAL_S = 10.0


def frames_in(report: dict[str, object]) -> int:
    flows = report["flows"]
    assert isinstance(flows, list)
    return sum(len(f["websocket_frames"]) for f in flows)


def session_rows(folder: Path, minutes: float, plan: SessionPlan, made_s: float) -> list[Row]:
    """The commands and the peers on the session recorded in `folder`."""
    pcap = folder / "capture.pcap"
    inspect_s, report = faultlab_command("pcap", "inspect", str(folder))
    bare_s, _ = faultlab_command("pcap", "inspect", str(pcap))
    server_s, _ = faultlab_command("pcap", "server", str(folder))
    packets = int(str(report["packets"]))
    frames = frames_in(report)
    print(f"faultlab pcap benchmark ({os.cpu_count()} cores): a {minutes:g}-minute "
          f"session over wss://, {pcap.stat().st_size / 1e6:.1f} MB, synthesised in "
          f"{made_s:.1f} s; {frames} of its {plan.frames} frames listed")
    print(f"{'':<38}{'packets':>9}{'packets/s':>11}{'frames':>8}{'seconds':>9}  goal")
    for name, seconds, shown in (("pcap inspect RUN_DIR (tshark, TLS)", inspect_s, frames),
                                 ("pcap inspect capture.pcap (flows)", bare_s, 0),
                                 ("pcap server RUN_DIR (tshark, TLS)", server_s, frames)):
        verdict = "ok" if seconds < GOAL_S else "MISSED"
        print(f"{name:<38}{packets:>9}{packets / seconds:>11.0f}{shown or '-':>8}"
              f"{seconds:>9.2f}  < {GOAL_S:g} s {verdict}")
    session = f"{minutes:g}-min wss:// session"
    rows = [alone(f"pcap server command, {session}", Measure(packets / server_s, "pkt/s"),
                  "higher", f"< {GOAL_S:g} s", server_s < GOAL_S,
                  note=f"`faultlab pcap server RUN_DIR --json` on the session's {packets:,} "
                       f"packets took {server_s:.2f} s; no peer reports the server's side")]
    figure = f"pcap inspect command, {session}, TLS decrypted"
    tshark = find_tshark()
    if tshark is None:
        rows.insert(0, skipped(figure, "tshark", "tshark is not installed (make install)"))
    else:
        with tempfile.TemporaryDirectory(prefix="faultlab-bench-keys-") as keys:
            keylog = merge_keylogs([Path(k) for k in report["keylogs"]], Path(keys) / "keys.log")
            ts = tshark_frames(tshark, pcap, keylog=keylog)
        print(f"{'tshark alone (TLS, same key logs)':<38}{ts.packets:>9}"
              f"{ts.packets / ts.seconds:>11.0f}{ts.frames:>8}{ts.seconds:>9.2f}")
        rows.insert(0, versus(
            figure, Measure(packets / inspect_s, "pkt/s"), "tshark",
            Measure(ts.packets / ts.seconds, "pkt/s"), "higher", also=inspect_s < GOAL_S,
            goal=f"< {GOAL_S:g} s",
            note=f"{packets:,} packets, as a user runs them: `faultlab pcap inspect RUN_DIR --json` "
                 f"({inspect_s:.2f} s: "
                 f"tshark decrypting with the run's key logs, and faultlab's flow walk; {frames:,} "
                 f"frames) and tshark alone, `-o tls.keylog_file:` the same key logs, TCP and TLS "
                 f"reassembly on, `-T fields -e websocket.opcode -e websocket.payload_length -e "
                 f"websocket.payload.text` ({ts.seconds:.2f} s, {ts.frames:,} frames)"))
    peers = PEERS
    ours, walked = inspect_beside(pcap, {peer: numbered for peer, numbered, _, _ in peers
                                         if missing(peer) is None})
    print(f"{'flows in-process (no keys)':<38}{ours.packets:>9}{ours.rate:>11.0f}{'-':>8}"
          f"{ours.seconds:>9.2f}")
    figure = f"pcap flows, {session}, TLS not decrypted"
    for peer, _, at_least, parse in peers:
        if (why := missing(peer)) is not None:
            rows.append(skipped(figure, peer, why, goal=f">= {at_least:g}x"))
            continue
        theirs = walked[peer]
        print(f"{'  ' + peer + ', flows in-process':<38}{theirs.packets:>9}{theirs.rate:>11.0f}"
              f"{'-':>8}{theirs.seconds:>9.2f}")
        same = (theirs.packets, theirs.flows, theirs.tls_flows) == (ours.packets, ours.flows,
                                                                     ours.tls_flows)
        rows.append(versus(
            figure, Measure(ours.rate, "pkt/s"), peer, Measure(theirs.rate, "pkt/s"), "higher",
            at_least=at_least, also=same,
            note=f"{ours.packets:,} packets, flows in-process, no decryption (neither library "
                 f"decrypts TLS): faultlab's parser and {peer}'s ({parse}) (faultlab and dpkt "
                 f"alternating, 3 and 2 runs, means; scapy once, last), each feeding "
                 f"faultlab's flow walk (flows, per-direction counts, silences, "
                 f"retransmissions; the TLS streams recognised and left undecoded); "
                 f"{theirs.flows} flow(s), {theirs.tls_flows} TLS"
                 + ("" if same else " (DIFFERENT from faultlab's: not the same work)")))
    return rows


def collect(minutes: float = 15.0, keep: Path | None = None) -> list[Row]:
    """Synthesise the session, time the commands and the peers on it; the table's rows."""
    if os.geteuid() != 0:
        return [skipped(f"pcap inspect command, {minutes:g}-min wss:// session", "tshark",
                        "needs root (a network namespace and tcpdump)")]
    plan = SessionPlan(up_frames=round(minutes * 60 * 10), reply_every=200, reply_chunks=50)
    scratch = None if keep else Path(tempfile.mkdtemp(prefix="faultlab-pcap-bench-"))
    folder = keep or scratch
    assert folder is not None
    try:
        started = time.perf_counter()
        record(plan, folder)
        return session_rows(folder, minutes, plan, time.perf_counter() - started)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=15.0, help="session length to synthesise")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="write the session's folder here and keep it")
    table.add_json_option(parser)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("pcap bench: needs root (a network namespace and tcpdump)")
    if shutil.which("tshark") is None:
        sys.exit("pcap bench: needs tshark (apt-get install tshark)")
    # SIGTERM unwinds like Ctrl-C, so that the namespace, processes and folder are removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started, clock, machine = datetime.now(), time.monotonic(), table.machine()
    rows = collect(args.minutes, args.keep)
    table.finish(rows, args.json, machine, started, time.monotonic() - clock)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # what was started is gone by now (record's and main's finally)
        sys.exit("pcap bench: interrupted")
