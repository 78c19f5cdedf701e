"""Warm jobs (faultlab.warm): a `faultlab` command forked from a server that has imported a
run's modules, behaving as `python -m faultlab` would: its output, its exit code, the caller's
environment at the job's start, SIGTERM."""

from __future__ import annotations

import asyncio
import importlib.util
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from faultlab.warm import PRELOAD, WarmJob


def run_warm(args: list[str], output: Path) -> tuple[int, str]:
    async def go() -> int:
        job = WarmJob(args, output)
        await asyncio.to_thread(job.start)
        return await job.wait()

    code = asyncio.run(go())
    return code, output.read_text()


def test_a_warm_job_gives_the_command_s_output_and_exit_code(tmp_path: Path) -> None:
    """`faultlab --version` exits 0 with the version; a run of a missing profile exits 2 with
    the CLI's error, both in the job's output file."""
    code, out = run_warm(["--version"], tmp_path / "version")
    assert code == 0 and "faultlab" in out
    code, out = run_warm(["run", str(tmp_path / "missing.yaml")], tmp_path / "missing")
    assert code == 2 and "missing.yaml" in out


def test_a_warm_job_sees_the_environment_of_its_start_not_the_server_s(tmp_path: Path) -> None:
    """The server keeps the environment it started with; a job gets the caller's at the job's
    start: a variable unset since then is unset in the job (a profile's pass_env says so), in
    a Python of its own so that the server starts here, with the variable."""
    profile = tmp_path / "p.yaml"
    profile.write_text("name: p\ntarget: {command: [sleep, '1'], port: 9}\n"
                       "client: {command: ['true'], pass_env: [FAULTLAB_WARM_PROBE]}\n")
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_warm import run_warm
        from pathlib import Path
        os.environ["FAULTLAB_WARM_PROBE"] = "1"
        assert run_warm(["--version"], Path({str(tmp_path / "first")!r}))[0] == 0
        del os.environ["FAULTLAB_WARM_PROBE"]
        code, out = run_warm(["run", {str(profile)!r}], Path({str(tmp_path / "second")!r}))
        print(code, out)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=60)
    assert "client.pass_env: FAULTLAB_WARM_PROBE is not set" in done.stdout, done.stdout


def test_sigterm_ends_a_warm_job_as_it_ends_the_command(tmp_path: Path) -> None:
    """SIGTERM to a job that serves until stopped (an emulator on loopback) ends it as it ends
    `faultlab emulator serve` (exit 0; `faultlab run`'s 143 and torn-down lab are
    tests/lab/test_signals.py's, whose suites run warm jobs)."""

    async def go() -> int:
        job = WarmJob(["emulator", "serve", "--host", "127.0.0.1", "--port", "0", "--ca-dir",
                       str(tmp_path / "ca")], tmp_path / "out")
        await asyncio.to_thread(job.start)
        # Once it serves (its SIGTERM handler is installed by then): a fixed second was not
        # enough on a busy machine, where the default action ended it with 143.
        out = tmp_path / "out"
        async with asyncio.timeout(30):
            while "listening on port" not in (out.read_text() if out.exists() else ""):
                await asyncio.sleep(0.05)
        job.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(job.wait(), 30)

    assert asyncio.run(go()) == 0
    assert "listening on port" in (tmp_path / "out").read_text()


def test_every_module_the_server_preloads_exists() -> None:
    """The forkserver skips a preload it cannot import without a word: a renamed module would
    leave every job to import it cold."""
    assert [name for name in PRELOAD if importlib.util.find_spec(name) is None] == []
