"""faultlab.interrupt: what SIGINT and SIGTERM do at each moment of a command. Each case runs in
a Python of its own, since it takes the process's signals over."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from .conftest import REPO

PRELUDE = """\
import asyncio, os, signal, sys, threading, time
from faultlab import interrupt
interrupt.catch()
"""


def python(body: str) -> subprocess.CompletedProcess[str]:
    script = PRELUDE + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=30, check=False)


def test_before_the_loop_a_signal_raises_interrupted_and_exits_with_its_code() -> None:
    """Raise mode: SIGINT unwinds as Interrupted (not KeyboardInterrupt); exit 130."""
    done = python("""
        try:
            interrupt.raise_from_now()
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
            print("not interrupted")
        except interrupt.Interrupted as exc:
            print("interrupted", exc.signum)
        sys.exit(interrupt.exit_code(0))
    """)
    assert (done.returncode, done.stdout, done.stderr) == (130, "interrupted 2\n", "")


def test_a_signal_noted_before_raise_mode_raises_when_it_begins() -> None:
    """A signal that came while only noting (the imports) is raised as soon as raising begins."""
    done = python("""
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        try:
            interrupt.raise_from_now()
        except interrupt.Interrupted:
            print("raised")
        sys.exit(interrupt.exit_code(0))
    """)
    assert (done.returncode, done.stdout) == (143, "raised\n")


def test_in_the_loop_the_first_signal_cancels_once_and_teardown_runs_whole() -> None:
    """Cancel mode: SIGTERM cancels the task once; a SIGINT during the uncancelled teardown
    neither cuts it nor changes the exit code (143, the first signal's)."""
    done = python("""
        async def teardown():
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(0.2)
            print("teardown ran whole")

        async def run():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                await asyncio.sleep(5)
                print("not cancelled")
            finally:
                await interrupt.uncancelled(teardown())

        try:
            asyncio.run(interrupt.cancel_on_signal(run()))
        except asyncio.CancelledError:
            print("cancelled")
        sys.exit(interrupt.exit_code(0))
    """)
    assert (done.returncode, done.stdout) == (143, "teardown ran whole\ncancelled\n"), done.stderr


def test_uncancelled_work_ends_before_the_cancellation_is_raised() -> None:
    """A task cancelled while it awaits `uncancelled(work)` sees the work end, then the
    cancellation (here, a thread that cannot be stopped)."""
    done = python("""
        async def main():
            async def build():
                await asyncio.to_thread(time.sleep, 0.2)
                print("built")
            task = asyncio.create_task(interrupt.uncancelled(build()))
            await asyncio.sleep(0.05)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                print("then cancelled")
        asyncio.run(main())
    """)
    assert done.stdout == "built\nthen cancelled\n", done.stderr


def test_after_the_loop_a_signal_only_changes_the_exit_code() -> None:
    """Note mode: the report is written whole, and the exit code is the signal's."""
    done = python("""
        interrupt.note_only()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        print("report written")
        sys.exit(interrupt.exit_code(0))
    """)
    assert (done.returncode, done.stdout) == (143, "report written\n")


def test_after_the_exit_code_is_decided_no_thread_lets_a_signal_kill_the_process() -> None:
    """From `exit_code` on both signals are ignored process-wide: one delivered to another
    thread (numpy's BLAS starts its own) while Python finalizes does not kill the process."""
    done = python("""
        worker = threading.Thread(target=time.sleep, args=(0.3,))
        worker.start()
        code = interrupt.exit_code(0)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        signal.pthread_kill(worker.ident, signal.SIGTERM)
        signal.pthread_kill(worker.ident, signal.SIGINT)
        worker.join()
        sys.exit(code)
    """)
    assert (done.returncode, done.stderr) == (0, "")
