"""The CPU bench's process tree: whose each process is, and what the samples add up to."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import bench_module

process_tree = bench_module("process_tree")
PY = "/srv/faultlab/.venv/bin/python"


def stat(pid: int, ppid: int, ticks: int, started: int = 1000, name: str = "python") -> str:
    """A /proc/PID/stat line: `ticks` of CPU split between user and system time."""
    fields = ["S", str(ppid), *["0"] * 9, str(ticks - ticks // 3), str(ticks // 3),
              *["0"] * 6, str(started), "0"]
    return f"{pid} ({name}) {' '.join(fields)}\n"


@pytest.mark.parametrize(("argv", "role"), [
    ([PY, "-m", "faultlab", "run", "-q", "profiles/silent-loss.yaml"], "faultlab"),
    ([PY, "-m", "faultlab.impair.worker", "--queue", "q"], "faultlab"),
    ([PY, "-m", "faultlab", "emulator", "serve", "--host", "198.19.0.2"], "emulator"),
    ([PY, "-m", "faultlab.proxy", "--port", "8080"], "proxy"),
    ([PY, "-m", "faultlab.clients.naive"], "client"),
    ([PY, "-m", "faultlab.peers.ws_client", "--duration", "10s"], "client"),
    ([PY, "-m", "faultlab.peers.ws_server"], "server peer"),
    (["/usr/bin/tcpdump", "-i", "c0", "-w", "-"], "capture"),
    # Between enter.py's start and its exec, a lab process shows the command it will become.
    ([PY, "-I", "-S", "/x/faultlab/lab/enter.py", "1", "/run/netns/c", "-", "--", PY, "-m",
      "faultlab.clients.naive"], "client"),
    # A suite's warm server and the jobs forked from it (faultlab.warm).
    ([PY, "-B", "-c", "from multiprocessing.forkserver import main; main(8, 10, ...)"],
     "faultlab"),
    ([PY, "-c", "print(1)"], "other"),
    (["/usr/sbin/iptables-restore", "--noflush"], "other"),
    ([PY, "-m"], "other"),
    ([], "other"),
])
def test_a_process_is_attributed_by_its_command_line(argv: list[str], role: str) -> None:
    """The run and its helpers are faultlab's; the peers, proxy, emulator and capture their own."""
    assert process_tree.role(argv) == role


def test_a_stat_line_is_read_past_a_command_name_with_parentheses() -> None:
    """The parent, start time and utime + stime are read after the last `)` of the name."""
    ppid, started, cpu_s = process_tree.parse_stat(stat(7, 3, 250, 4242, name="a) (b c"))
    assert (ppid, started) == (3, 4242)
    assert cpu_s == pytest.approx(250 * process_tree.TICK_S)


def test_every_process_of_the_tree_keeps_its_last_sample() -> None:
    """Descendants are found by parent pid; one that exited keeps its last CPU and the command
    line it had before it became a zombie; a reused pid is another process; others are ignored."""
    tree = process_tree.Tree(10)
    argvs = {10: (PY, "-m", "faultlab", "run"), 11: (PY, "-m", "faultlab.proxy"),
             12: ("/usr/bin/tcpdump", "-i", "c0"), 99: ("/bin/sh",)}
    tree.update({10: stat(10, 1, 50), 11: stat(11, 10, 20), 12: stat(12, 11, 3),
                 99: stat(99, 1, 500)}, lambda pid: argvs[pid])
    # The capture has exited and is gone; the proxy is a zombie (no command line) with more CPU;
    # pid 12 is now a client, started later, under the run.
    argvs.update({11: (), 12: (PY, "-m", "faultlab.clients.naive")})
    tree.update({10: stat(10, 1, 80), 11: stat(11, 10, 30), 12: stat(12, 10, 40, started=2000),
                 99: stat(99, 1, 900)}, lambda pid: argvs[pid])
    tick = process_tree.TICK_S
    assert tree.by_role() == pytest.approx(
        {"faultlab": 80 * tick, "proxy": 30 * tick, "capture": 3 * tick, "client": 40 * tick})
    assert sum(tree.cpu_s.values()) == pytest.approx(153 * tick)
    assert tree.commands("proxy") == [f"{PY} -m faultlab.proxy"]


def test_a_process_seen_only_as_a_zombie_is_other() -> None:
    """With no command line ever read, a process's CPU is still counted, as other."""
    tree = process_tree.Tree(10)
    tree.update({10: stat(10, 1, 5), 13: stat(13, 10, 2)},
                lambda pid: (PY, "-m", "faultlab", "run") if pid == 10 else ())
    assert tree.by_role() == pytest.approx({"faultlab": 5 * process_tree.TICK_S,
                                            "other": 2 * process_tree.TICK_S})
    assert tree.commands("other") == ["(seen only as a zombie)"]


def test_a_process_forked_without_exec_is_attributed_by_the_run_s_record(tmp_path: Path) -> None:
    """A warm job's emulator shows the job's command line in /proc; the run's `process.start`
    names what it runs, and that decides its role."""
    job = (PY, "-c", "from multiprocessing.forkserver import main; main(8, 10)")
    events = tmp_path / "events.jsonl"
    events.write_text(
        '{"t": 0.1, "source": "faultlab", "event": "process.start", "role": "target", "pid": 11,'
        f' "argv": ["{PY}", "-m", "faultlab", "emulator", "serve"], "forked": true}}\n'
        '{"t": 0.2, "source": "faultlab", "event": "run.end"}\n{"t": 0.3, "sour')
    assert process_tree.recorded_argv(events) == {11: (PY, "-m", "faultlab", "emulator", "serve")}
    tree = process_tree.Tree(10)
    tree.update({10: stat(10, 1, 5), 11: stat(11, 10, 2)}, lambda pid: job)
    assert tree.by_role() == pytest.approx({"faultlab": 7 * process_tree.TICK_S})
    tree.recorded.update(process_tree.recorded_argv(events))
    assert tree.by_role() == pytest.approx({"faultlab": 5 * process_tree.TICK_S,
                                            "emulator": 2 * process_tree.TICK_S})
