"""Shared test set-up: lab tests need root; waits scale with FAULTLAB_TEST_TIME_SCALE."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from docker import DockerClient

REPO = Path(__file__).resolve().parents[1]
PROFILES = REPO / "profiles"
# Multiply every wait for what should come (a process's exit, a run's end) by this on a slow machine.
TIME_SCALE = float(os.environ.get("FAULTLAB_TEST_TIME_SCALE", "1"))


def faultlab(*args: str, cwd: Path = REPO, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the faultlab command as a user would; past `timeout` it is stopped as a user would
    (SIGTERM, so the lab is torn down) and the test fails."""
    argv = [sys.executable, "-m", "faultlab", *args]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          cwd=cwd) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"faultlab {' '.join(args)} ran over {timeout:g}s:\n{out[-3000:]}{err}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def patience(seconds: float) -> float:
    """How long to wait for what should come before calling the test hung, scaled for slow
    machines. A guard, never a verdict: no test judges how fast something happened, which a busy
    machine decides (`make bench` measures speed); tests judge the order of events, what the
    components logged of their decisions, and bounds that only an early event could break."""
    return seconds * TIME_SCALE


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (CI runs these as root)")
    for item in items:
        if "lab" in item.keywords or "rootless" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tests' own user cache (the emulator's SDK field tree), for this process and the runs
    and emulators it starts: the tests neither write the user's ~/.cache nor read a tree from it
    that the derivation did not make in this session."""
    path = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(path))
        yield path


@pytest.fixture(scope="session", autouse=True)
def lab_zygote(user_cache: Path) -> None:
    """The lab's own programs (emulator, proxy, peers) of the runs made in this process are
    forked from a zygote, as those of `faultlab run` and of a suite's jobs are; a spawned one,
    as a pytest-xdist worker is no process to fork (it has an I/O thread)."""
    if os.geteuid() == 0:
        from faultlab.lab.zygote import spawn_zygote

        spawn_zygote()


@pytest.fixture
def runs_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "runs"
    path.mkdir()
    yield path


@pytest.fixture(scope="session")
def docs_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documentation site, built as `make docs` builds it (--strict: a broken link fails)."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
                           cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr
    return out


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[DockerClient]:
    """The Docker engine; tests that need it are skipped, with the reason, where none answers
    (and fail instead where FAULTLAB_REQUIRE_DOCKER=1, as in CI)."""
    from faultlab.errors import LabError
    from faultlab.lab.engine import connect

    try:
        client = connect()
    except LabError as exc:
        no_docker(str(exc))
    yield client
    client.close()


@pytest.fixture(scope="session")
def clients_image(docker_engine: DockerClient) -> str:
    """faultlab's reference clients as an image (`make images`)."""
    from faultlab.lab.engine import CLIENTS_IMAGE

    return need_image(docker_engine, CLIENTS_IMAGE)


def need_image(engine: DockerClient, name: str) -> str:
    """`name`, if the engine has it; else the test is skipped (or fails, in CI)."""
    from faultlab.lab.engine import has_image

    if not has_image(engine, name):
        no_docker(f"no {name} image: make images")
    return name


def no_docker(reason: str) -> NoReturn:
    if os.environ.get("FAULTLAB_REQUIRE_DOCKER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)
