"""faultlab as a real non-root user: the lab lives in a user namespace of its own.

The test runs as root only to make an unprivileged user's view: pyenv's Python, the venv and the
repo may sit under /root, which other users cannot traverse, so they are bind-mounted (in a
private mount namespace) under a temporary folder the user can read. faultlab itself then runs as
`nobody`, with no capability on the host.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultlab.lab.privilege import userns_available

from ..conftest import REPO, patience
from .remote import remote_echo

pytestmark = [pytest.mark.rootless, pytest.mark.alone]

USER = "nobody"


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temporary folder other users can reach (pytest's own is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="faultlab-rootless-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def owned_by(directory: Path, uid: int) -> list[str]:
    """The names in `directory` that belong to `uid`."""
    names = []
    for path in directory.iterdir() if directory.is_dir() else []:
        with contextlib.suppress(FileNotFoundError):  # another run's lab, gone meanwhile
            if path.stat().st_uid == uid:
                names.append(path.name)
    return names


def as_unprivileged_user(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    view = tmp_path / "view"
    work = tmp_path / "work"
    mounts = {view / "python": Path(sys.base_prefix), view / "venv": Path(sys.prefix),
              view / "repo": REPO}
    for target in mounts:
        target.mkdir(parents=True, exist_ok=True)
    work.mkdir(exist_ok=True)
    shutil.chown(work, USER)
    # The user's temporary files (a rootless lab's private namespace folder) land in the test's
    # own folder, where the test can tell they are its own.
    (work / "tmp").mkdir(exist_ok=True)
    shutil.chown(work / "tmp", USER)
    view.chmod(0o755)
    site = Path(sysconfig.get_paths()["purelib"]).relative_to(sys.prefix)
    python = view / "python" / "bin" / Path(sys.executable).name
    if not python.name.startswith("python3."):
        python = view / "python" / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    env = (f"PATH=/usr/bin:/bin HOME={work} TMPDIR={work / 'tmp'} "
           f"LD_LIBRARY_PATH={view / 'python' / 'lib'} "
           f"PYTHONPATH={view / 'repo'}:{view / 'venv' / site}")
    binds = " && ".join(f"mount --bind {src} {dst}" for dst, src in mounts.items())
    # The user may open /dev/net/tun (the uplink's TAP), as udev's default rule (0666) allows on
    # a typical machine; this one's is 0600, so the user's view gets a node of its own.
    (tmp_path / "dev").mkdir(exist_ok=True)
    binds += (f" && mount -t tmpfs none {tmp_path / 'dev'} && mknod -m 0666 "
              f"{tmp_path / 'dev' / 'tun'} c 10 200 && mount --bind {tmp_path / 'dev' / 'tun'} "
              "/dev/net/tun")
    command = " ".join(f"'{a}'" for a in args)
    script = (f"{binds} && cd {work} && exec runuser -u {USER} -- env -i {env} "
              f"{python} -m faultlab {command}")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=patience(60), check=False)


@pytest.fixture(autouse=True)
def _needs_setup() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to set up the unprivileged user's view")
    done = subprocess.run(["runuser", "-u", USER, "--", "unshare", "--user", "--map-current-user",
                           "--keep-caps", "--net", "--mount", "true"], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"unprivileged user namespaces are unavailable: {done.stderr!r}")
    assert userns_available()


def test_silent_loss_runs_without_root(shared_tmp: Path) -> None:
    """The demo profile passes as `nobody`, with a capture, and no namespace appears on the host:
    the lab's names lived in a private folder that went with the run."""
    done = as_unprivileged_user(shared_tmp, "run", str(shared_tmp / "view/repo/profiles/silent-loss.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = list((shared_tmp / "work" / "runs").iterdir())
    assert run_dir.stat().st_uid != 0
    assert (run_dir / "capture.pcap").stat().st_size > 0
    evs = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "client.lost" for e in evs)
    # Other runs' labs may come and go in /run/netns; none there is the user's.
    assert owned_by(Path("/run/netns"), pwd.getpwnam(USER).pw_uid) == []
    assert list((shared_tmp / "work" / "tmp").iterdir()) == []


def test_gc_and_doctor_without_root(shared_tmp: Path) -> None:
    """doctor reports the rootless mode; gc explains in one line that it needs root."""
    doctor = as_unprivileged_user(shared_tmp, "doctor")
    assert "labs run inside a user namespace" in doctor.stdout, doctor.stdout + doctor.stderr
    gc = as_unprivileged_user(shared_tmp, "lab", "gc")
    assert gc.returncode == 3
    assert gc.stderr.strip() == ("faultlab: lab gc needs root "
                                 "(rootless labs vanish with their run)")


def test_remote_target_runs_without_root(shared_tmp: Path) -> None:
    """A remote target's uplink works as `nobody`: slirp4netns opens its sockets in the host's
    network namespace, where faultlab stays (with no capability there), and a drop on the
    router is felt on the real path."""
    with remote_echo(shared_tmp / "remote") as remote:
        profile = shared_tmp / "remote.yaml"
        profile.write_text(remote.profile("remote-rootless", f"""\
client:
  builtin: ws-client
  args: [--url, "{remote.url}", --duration, 6s, --ping-interval, 500ms, --lost-after, 2s]
timeline:
  - {{id: gone, when: {{at: 2s}}, do: {{fault: drop}}}}
expect:
  - {{count: {{event: client.lost}}, equals: 1}}
  - {{exit_code: 1}}
timeout: 20s
"""))
        profile.chmod(0o644)
        done = as_unprivileged_user(shared_tmp, "run", str(profile))
        served = remote.events.read_text()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout
    assert "server.connected" in served
    assert list((shared_tmp / "work" / "tmp").iterdir()) == []
