"""The CPU a command and every process it starts spent, by role, sampled from /proc.

A process's CPU (utime + stime of /proc/PID/stat: all its threads, not its children) can be read
only while it lives: one that has exited is gone from /proc, and its figure with it. So the tree,
found by parent pid from its root, is sampled often (every 20 ms in cpu_bench.py) and each process
keeps its last sample; what falls between two samples (a process's last moments, or all of one
that lived less) is missed. Standard library only: the tests load it without faultlab.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
ROLES = ("faultlab", "proxy", "emulator", "client", "server peer", "capture", "other")
# The module a process runs with `python -m`, by its name's start, and the role that makes it
# (the first match wins): the rest of faultlab's own modules are the run's helpers.
MODULE_ROLES = (("faultlab.proxy", "proxy"), ("faultlab.clients.", "client"),
                ("faultlab.peers.ws_client", "client"), ("faultlab.peers.ws_server", "server peer"),
                ("faultlab.", "faultlab"))
CAPTURES = ("tcpdump", "dumpcap")

# A process: its pid and its start time in clock ticks since boot (a pid alone may be reused).
type Key = tuple[int, int]


def role(argv: Sequence[str]) -> str:
    """Whose CPU a process's is, by its command line: `python -m faultlab run` (and its helpers,
    `faultlab.impair.worker`, a suite's warm jobs), the proxy, the emulator (`faultlab emulator
    serve`), the client, the server peer, the capture (tcpdump), or other."""
    if argv and Path(argv[0]).name in CAPTURES:
        return "capture"
    if "-c" in argv[:-1] and argv[argv.index("-c") + 1].startswith("from multiprocessing."):
        return "faultlab"  # a suite's warm server (faultlab.warm), the jobs forked from it
    if "-m" not in argv[:-1]:
        return "other"
    module, *args = argv[argv.index("-m") + 1:]
    if module == "faultlab":
        return "emulator" if args[:2] == ["emulator", "serve"] else "faultlab"
    return next((r for prefix, r in MODULE_ROLES if module.startswith(prefix)), "other")


def parse_stat(text: str) -> tuple[int, int, float]:
    """(parent pid, start time in ticks, own CPU seconds) of a /proc/PID/stat line."""
    # The command name (field 2) is in parentheses and may hold spaces and parentheses itself.
    fields = text.rsplit(")", 1)[1].split()
    # After it: state (field 3), ppid (4), ..., utime (14), stime (15), ..., starttime (22).
    return int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) * TICK_S


@dataclass
class Tree:
    """A process tree's CPU from snapshots of /proc: each process's last CPU seen and its last
    non-empty command line (a zombie's is empty; one caught between fork and exec shows its
    parent's until it execs)."""

    root: int
    cpu_s: dict[Key, float] = field(default_factory=dict)
    argv: dict[Key, tuple[str, ...]] = field(default_factory=dict)
    # The command lines the runs recorded (their `process.start`), by pid (not reused within
    # one sample of a few runs): a process forked without exec (faultlab's emulator, proxy and
    # peers, forked warm) shows its zygote's in /proc, which is the run's.
    recorded: dict[int, tuple[str, ...]] = field(default_factory=dict)

    def update(self, stats: Mapping[int, str], cmdline: Callable[[int], tuple[str, ...]]) -> None:
        """Take one snapshot: `stats` every process's stat line by pid, `cmdline` read only
        for the tree's."""
        parsed = {pid: parse_stat(text) for pid, text in stats.items()}
        children: dict[int, list[int]] = defaultdict(list)
        for pid, (ppid, _, _) in parsed.items():
            children[ppid].append(pid)
        stack = [self.root]
        while stack:
            pid = stack.pop()
            if pid not in parsed:
                continue
            _, started, cpu_s = parsed[pid]
            self.cpu_s[pid, started] = cpu_s
            if argv := cmdline(pid):
                self.argv[pid, started] = argv
            stack += children[pid]

    def by_role(self) -> dict[str, float]:
        """CPU seconds by role, of every role with a process in the tree."""
        out: dict[str, float] = defaultdict(float)
        for key, cpu_s in self.cpu_s.items():
            out[role(self._argv(key))] += cpu_s
        return dict(out)

    def _argv(self, key: Key) -> tuple[str, ...]:
        return self.recorded.get(key[0]) or self.argv.get(key, ())

    def commands(self, of_role: str) -> list[str]:
        """The command lines of the tree's processes of `of_role`."""
        out = []
        for key in self.cpu_s:
            argv = self._argv(key)
            if role(argv) == of_role:
                out.append(" ".join(argv) or "(seen only as a zombie)")
        return out


def recorded_argv(events: Path) -> dict[int, tuple[str, ...]]:
    """The command line of each lab process a run's events.jsonl records, by pid."""
    out = {}
    for line in events.read_text().splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if event.get("event") == "process.start":
                out[int(event["pid"])] = tuple(str(a) for a in event["argv"])
    return out


def read_stats() -> dict[int, str]:
    """Every process's /proc/PID/stat line, by pid."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    stats[int(name)] = f.read()
            except OSError:  # it exited meanwhile
                continue
    return stats


def read_cmdline(pid: int) -> tuple[str, ...]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return ()
    return tuple(arg.decode(errors="replace") for arg in raw.split(b"\0") if arg)
