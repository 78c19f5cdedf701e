"""faultlab.interrupt: what SIGINT and SIGTERM do at each moment of a command. Each case runs in
a Python of its own, since it takes the process's signals over."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import tomllib

import pytest

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
            interrupt.announce()
        interrupt.finish(0)
    """)
    assert (done.returncode, done.stdout) == (130, "interrupted 2\n")
    assert done.stderr == "faultlab: interrupted by SIGINT\n"  # once


def test_a_signal_noted_before_raise_mode_raises_when_it_begins() -> None:
    """A signal that came while only noting (the imports) is raised as soon as raising begins."""
    done = python("""
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        try:
            interrupt.raise_from_now()
        except interrupt.Interrupted:
            print("raised")
        interrupt.finish(0)
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
        interrupt.finish(0)
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
        interrupt.finish(0)
    """)
    assert (done.returncode, done.stdout) == (143, "report written\n")


def test_a_signal_as_the_process_ends_gives_its_code_also_from_another_thread() -> None:
    """After `finish`, while Python's exit callbacks run, a signal delivered to another thread
    (numpy's BLAS starts its own) neither kills the process nor is lost: exit 143, said once."""
    done = python("""
        import atexit
        go = threading.Event()

        def worker():
            go.wait()
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

        thread = threading.Thread(target=worker, daemon=True)
        thread.start()
        atexit.register(lambda: (go.set(), thread.join()))
        print("written")
        interrupt.finish(0)
    """)
    assert (done.returncode, done.stdout) == (143, "written\n")
    assert done.stderr == ("faultlab: interrupted by SIGTERM; it came as the command ended; what it "
                           "wrote is whole\n")


def test_finish_exits_with_the_code_it_is_given_when_no_signal_came() -> None:
    """Without a signal, `finish` exits with its code as `sys.exit` would (None 0, a message 1)."""
    for code, expected in (("3", 3), ("None", 0), ("'no good'", 1)):
        done = python(f"print('written')\ninterrupt.finish({code})\n")
        assert (done.returncode, done.stdout) == (expected, "written\n"), done.stderr
        assert done.stderr == ("no good\n" if expected == 1 else "")


def console_script() -> str:
    """The code of the installed `faultlab` command, as pip writes it from pyproject's
    [project.scripts] (the venv's own script runs the checkout it was installed from)."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["faultlab"].split(":")
    return f"import sys\nfrom {module} import {function}\nsys.exit({function}())\n"


def signal_at(moment: str, signum: int, at_exit: bool = False) -> str:
    """Code to run before the command that sends `signum` to its process at `moment`: "import"
    (as the CLI begins to import click, its first heavy import) or "verdict" (as a run's verdict
    line is printed); with `at_exit`, at the process's end instead (by an exit callback registered
    then: after faultlab's own, so called before its last)."""
    return textwrap.dedent(f"""\
        import atexit, os, re, sys

        def send():
            if {at_exit!r}:
                atexit.register(os.kill, os.getpid(), {int(signum)})
            else:
                os.kill(os.getpid(), {int(signum)})

        class AtImport:
            def find_spec(self, name, path=None, target=None):
                if name == "click":
                    sys.meta_path.remove(self)
                    send()

        class AtVerdict:
            def __init__(self, stream):
                self.stream = stream

            def write(self, text):
                written = self.stream.write(text)
                if re.match(r"== \\S+: (PASS|FAIL|ERROR) in ", text):
                    self.stream.flush()
                    send()
                return written

            def __getattr__(self, name):
                return getattr(self.stream, name)

        if {moment!r} == "import":
            sys.meta_path.insert(0, AtImport())
        else:
            sys.stdout = AtVerdict(sys.stdout)
        """)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
@pytest.mark.parametrize("at_exit", [False, True], ids=["as the CLI is imported", "at the end"])
def test_the_installed_command_exits_with_the_signals_code_from_start_to_end(
        signum: signal.Signals, at_exit: bool) -> None:
    """The `faultlab` console script takes the signals over before it imports click (one that
    comes then unwinds it at once: no output, no traceback), and keeps them to the process's
    very end (one that comes after the command, as the interpreter ends, still counts): exit
    128 + the signal, said once."""
    script = signal_at("import", signum, at_exit) + console_script()
    done = subprocess.run([sys.executable, "-c", script, "--version"], cwd=REPO,
                          capture_output=True, text=True, timeout=30, check=False)
    said = f"faultlab: interrupted by {signum.name}"
    if at_exit:
        assert done.stdout.startswith("faultlab, version ")
        said += "; it came as the command ended; what it wrote is whole"
    else:
        assert done.stdout == ""
    assert (done.returncode, done.stderr) == (128 + signum, said + "\n")
