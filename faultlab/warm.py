"""Warm interpreters for a suite's jobs: each job's `faultlab run` is forked from a server that
has imported a run's modules once (multiprocessing's forkserver), instead of a new Python that
imports them again.

A cold `faultlab run` spends ~0.7 s of CPU importing (the profile's models, the lab, pyroute2,
the report, Pillow for timeline.png), for a run that mostly waits on its client's timers. Forked
warm, a job starts with all of it imported. The server is a child of this process, started by the first job;
it stays for the next ones and leaves when this process does (when this process's end of its pipe
closes, however it ends), its jobs then being stopped or ended already.

A warm job is still a process of its own (its own lab, event loop and signals: SIGTERM tears its
lab down as `faultlab run`'s), writing its output to a file the caller reads once it has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import runpy
import sys
from multiprocessing.process import BaseProcess
from pathlib import Path

from faultlab.lab.zygote import close_zygote, fork_zygote, preloaded

# What `faultlab run` imports before and during a run (found with `python -X importtime`); a
# module missing here is imported by the job itself, as a cold run would.
PRELOAD = [
    "faultlab.cli", "faultlab.jobs", "faultlab.runner", "faultlab.profile", "faultlab.expect",
    "faultlab.lab.netns", "faultlab.capture.live", "faultlab.report.page",
    "faultlab.report.png", "PIL.Image", "PIL.ImageDraw", "PIL.ImageFont",
    # What the emulator, the peers and the proxy import, for each job's zygote to fork them
    # warm: 0.27 s more of CPU once a suite, as much as one of them cold.
    *preloaded(),
]
_context: multiprocessing.context.ForkServerContext | None = None


def _forkserver() -> multiprocessing.context.ForkServerContext:
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def _job(args: list[str], output: str, env: dict[str, str]) -> None:
    """In the forked job: the caller's environment (the server has the one it started with),
    stdin from /dev/null, stdout and stderr to `output`, then the `faultlab` command with
    `args`, as `python -m faultlab ARGS` runs it."""
    os.environ.clear()
    os.environ.update(env)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sink = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    os.close(sink)
    sys.argv = ["faultlab", *args]
    # While this is one thread with no event loop: the run's emulator, proxy and peers are
    # forked from a copy of it, with what the server imported.
    fork_zygote()
    try:
        # As `python -m faultlab ARGS` runs it (whose command imports the jobs, and so this
        # module).
        runpy.run_module("faultlab", run_name="__main__", alter_sys=True)
    finally:
        close_zygote()  # a forked job ends by os._exit: its exit handlers do not run


class WarmJob:
    """One `faultlab ARGS` forked warm; its output is in `output` once it has ended."""

    def __init__(self, args: list[str], output: Path) -> None:
        self.output = output
        self._process: BaseProcess = _forkserver().Process(
            target=_job, args=(args, str(output), dict(os.environ)), name="faultlab-job")

    @property
    def started(self) -> bool:
        return self._process.pid is not None

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def start(self) -> None:
        self._process.start()

    async def wait(self) -> int:
        """Its exit code once it has ended (negative: killed by that signal)."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        sentinel = self._process.sentinel

        def readable() -> None:
            if not ended.done():
                ended.set_result(None)

        loop.add_reader(sentinel, readable)
        try:
            await ended
        finally:
            loop.remove_reader(sentinel)
        self._process.join()
        code = self._process.exitcode
        assert code is not None
        return code

    def send_signal(self, signum: int) -> None:
        pid = self._process.pid
        if pid is not None and self._process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def read_output(self) -> bytes:
        try:
            return self.output.read_bytes()
        except OSError:
            return b""
