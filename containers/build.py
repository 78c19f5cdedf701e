"""Builds faultlab's container images with no registry: `faultlab-clients:latest` and `faultlab:latest`.

Run by `make images` with the project's venv (`.venv/bin/python containers/build.py`):

1. base: `faultlab-base:trixie`, a debootstrapped Debian trixie (minbase, with Python 3.13 and the
   lab's packages) imported into the engine; kept and reused until `--force-base` (`FORCE=1`).
2. wheels: faultlab and all its dependencies as wheels in build/wheels, made fresh by this venv's
   pip with the machine's own pip configuration (its Python is 3.13, as trixie's is).
3. images: both Dockerfiles in containers/, each built from a temporary context holding just the
   Dockerfile and the wheels, on the base, with no network (the wheels install with --no-index).

With `--base IMAGE` (e.g. python:3.13-slim-trixie, where the engine can pull) step 1 is skipped
and the builds have the engine's default network, so the Dockerfiles can apt-get what is missing.

Exit codes: 0 built, 1 a step failed, 2 a usage error, 3 the machine is not ready (no engine, no
debootstrap, not root); each failure is one line that says what to do.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors

from faultlab.errors import LabError
from faultlab.lab import engine

ROOT = Path(__file__).resolve().parent.parent
CONTAINERS = ROOT / "containers"
WHEELS = ROOT / "build" / "wheels"
DEBOOTSTRAP_LOG = ROOT / "build" / "debootstrap.log"

BASE_TAG = "faultlab-base:trixie"
SUITE = "trixie"
SUITE_PYTHON = (3, 13)
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "iptables", "iproute2", "tcpdump",
                 "espeak-ng")
# `docker import` gives an image no environment; an empty PATH would make the Dockerfiles'
# `ENV PATH=/opt/faultlab/bin:$PATH` drop the system's.
BASE_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["/bin/bash"]',
)
WHEEL_DATE_EPOCH = "315532800"  # 1980-01-01, the earliest date a zip file can hold
SOURCE_IGNORED = shutil.ignore_patterns(".git", ".venv", "build", "runs", "__pycache__", ".*_cache",
                                        "*.egg-info", "node_modules")
# The legacy builder (the SDK's) ends each step with ` ---> <short id of the step's image>`.
STEP_RESULT = re.compile(r"^ ---> [0-9a-f]{12}$")
# (folder under containers/, tag)
IMAGES = (("clients", engine.CLIENTS_IMAGE), ("lab", engine.LAB_IMAGE))


class NotReady(Exception):
    """The machine lacks something the build needs; the message says how to get it (exit 3)."""


class StepFailed(Exception):
    """A step of the build failed; the message says which and why (exit 1)."""


def progress(step: str, started: float, detail: str) -> None:
    print(f"{step:<34} {time.monotonic() - started:6.1f}s  {detail}", flush=True)


def connect() -> docker.DockerClient:
    """The engine at DOCKER_HOST (default the local socket), or NotReady saying how to start one."""
    try:
        return engine.connect()
    except LabError as error:
        raise NotReady(str(error)) from None


def unmount_below(path: Path) -> None:
    """Unmounts what a failed debootstrap left mounted in `path` (its /proc, /sys, bound /dev)."""
    with open("/proc/self/mountinfo") as mountinfo:
        points = [line.split()[4] for line in mountinfo]
    prefix = str(path) + "/"
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], check=False)


def remove_rootfs(path: Path) -> None:
    unmount_below(path)
    with open("/proc/self/mountinfo") as mountinfo:
        if any(line.split()[4].startswith(str(path) + "/") for line in mountinfo):
            # Deleting through a bind mount of the host's /dev would delete the host's devices.
            print(f"warning: {path} still has mounts in it; left in place", file=sys.stderr)
            return
    shutil.rmtree(path, ignore_errors=True)


def tar_stream(rootfs: Path) -> Iterator[bytes]:
    """The rootfs as a tar stream, so it goes to the engine without a tar file on disk."""
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", "-", "."],
                           stdout=subprocess.PIPE)
    stdout = tar.stdout
    assert stdout is not None
    try:
        yield from iter(lambda: stdout.read(1 << 20), b"")
    finally:
        stdout.close()
        if tar.wait() != 0:
            raise StepFailed(f"base: tar of {rootfs} exited {tar.returncode}")


def build_base(client: docker.DockerClient, mirror: str) -> None:
    """Debootstraps trixie into a temporary folder and imports it as BASE_TAG."""
    if os.geteuid() != 0:
        raise NotReady(f"building {BASE_TAG} runs debootstrap, which needs root: run make images as root")
    if shutil.which("debootstrap") is None:
        raise NotReady("debootstrap is missing: apt-get install debootstrap (make install does it as root)")
    started = time.monotonic()
    rootfs = Path(tempfile.mkdtemp(prefix="faultlab-rootfs-"))
    try:
        DEBOOTSTRAP_LOG.parent.mkdir(parents=True, exist_ok=True)
        with open(DEBOOTSTRAP_LOG, "w") as log:
            done = subprocess.run(
                ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
                 SUITE, str(rootfs), mirror], stdout=log, stderr=subprocess.STDOUT, check=False)
        if done.returncode != 0:
            tail = DEBOOTSTRAP_LOG.read_text(errors="replace").strip().splitlines()[-1:]
            raise StepFailed(f"base: debootstrap exited {done.returncode} ({' '.join(tail)}); "
                             f"see {DEBOOTSTRAP_LOG}")
        progress("[1/4] base: debootstrap", started, f"{SUITE} minbase from {mirror}")
        # Downloaded .debs and package lists are half the rootfs; the host's name and resolver
        # are the engine's to provide.
        for pattern in ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*",
                        "etc/hostname", "etc/resolv.conf"):
            for leftover in rootfs.glob(pattern):
                leftover.unlink()
        client.api.import_image_from_data(tar_stream(rootfs), repository=BASE_TAG.split(":")[0],
                                          tag=BASE_TAG.split(":")[1], changes=list(BASE_CHANGES))
    finally:
        remove_rootfs(rootfs)
    size_mb = client.images.get(BASE_TAG).attrs["Size"] / 1e6
    progress("[1/4] base: import", started, f"{BASE_TAG}, {size_mb:.0f} MB")


def build_wheels() -> list[Path]:
    """faultlab and every dependency as wheels in WHEELS, made fresh so it holds exactly that set."""
    if sys.version_info[:2] != SUITE_PYTHON:
        raise NotReady(f"the wheels must match {SUITE}'s Python {'.'.join(map(str, SUITE_PYTHON))}, "
                       f"but {sys.executable} is {sys.version.split()[0]}: run with such a venv")
    started = time.monotonic()
    shutil.rmtree(WHEELS, ignore_errors=True)
    WHEELS.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="faultlab-source-") as scratch:
        # setuptools builds in the source tree's build/lib and never empties it, so a module
        # deleted from faultlab/ would still ship; a copy of the tree builds from scratch.
        source = Path(scratch) / "faultlab"
        shutil.copytree(ROOT, source, symlinks=True, ignore=SOURCE_IGNORED)
        # A fixed date makes faultlab's wheel the same bytes while its source is, so the images'
        # COPY of the wheels and the install after it come from the engine's cache.
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
             "--wheel-dir", str(WHEELS), str(source)], capture_output=True, text=True, check=False,
            env={**os.environ, "SOURCE_DATE_EPOCH": WHEEL_DATE_EPOCH})
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise StepFailed(f"wheels: pip wheel exited {done.returncode}: {tail}")
    wheels = sorted(WHEELS.glob("*.whl"))
    size_mb = sum(w.stat().st_size for w in wheels) / 1e6
    progress("[2/4] wheels", started, f"{len(wheels)} in {WHEELS.relative_to(ROOT)}, {size_mb:.0f} MB")
    return wheels


def build_image(client: docker.DockerClient, step: str, folder: str, tag: str, base: str,
                wheels: list[Path], network_mode: str | None) -> set[str]:
    """Builds containers/<folder>/Dockerfile as `tag` from a context of the Dockerfile and the wheels;
    returns the short ids of every image its steps made or took from the cache."""
    started = time.monotonic()
    old_id = client.images.get(tag).id if engine.has_image(client, tag) else None
    output: collections.deque[str] = collections.deque(maxlen=25)
    step_ids: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="faultlab-context-") as context:
        shutil.copy(CONTAINERS / folder / "Dockerfile", context)
        (Path(context) / "wheels").mkdir()
        for wheel in wheels:
            target = Path(context) / "wheels" / wheel.name
            try:
                os.link(wheel, target)
            except OSError:
                shutil.copy(wheel, target)
        chunk: dict[str, Any]
        for chunk in client.api.build(path=context, tag=tag,
                                      buildargs={"BASE": base, "CLIENTS": engine.CLIENTS_IMAGE},
                                      network_mode=network_mode, rm=True, forcerm=True, decode=True):
            if "error" in chunk:
                detail = "\n".join(f"    {line}" for line in output)
                raise StepFailed(f"{step}: {chunk['error'].strip()}\n  the build's last lines:\n{detail}")
            for line in filter(str.strip, chunk.get("stream", "").splitlines()):
                output.append(line)
                if STEP_RESULT.match(line):
                    step_ids.add(line.split()[-1])
                if line.startswith("Step "):
                    progress(f"{step}: building", started, line[:90])
    image = client.images.get(tag)
    if old_id is not None and old_id != image.id:
        # The previous build's image, unless a container or another tag still uses it.
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(old_id)
    progress(step, started, f"{tag}, {image.attrs['Size'] / 1e6:.0f} MB")
    return step_ids


def remove_previous(client: docker.DockerClient, used: set[str], old_ids: list[str]) -> None:
    """Removes what earlier builds left: their venv stages (untagged, labelled by the Dockerfiles,
    not among the `used` short ids) and `old_ids` (a replaced base); what a container uses stays."""
    stale = [image.attrs["Id"] for image in client.images.list(filters={"dangling": True,
                                                                         "label": "org.faultlab.stage=venv"})
             if image.attrs["Id"].removeprefix("sha256:")[:12] not in used]
    for image_id in [*stale, *old_ids]:
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(image_id)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force-base", action="store_true",
                        help=f"debootstrap and import {BASE_TAG} again even if the engine has it")
    parser.add_argument("--base", metavar="IMAGE",
                        help=f"build on IMAGE (pulled by the engine if need be) instead of {BASE_TAG}")
    parser.add_argument("--mirror", default="http://deb.debian.org/debian",
                        help="the Debian mirror debootstrap reads (default: %(default)s)")
    args = parser.parse_args()
    started = time.monotonic()
    old_ids: list[str] = []
    used: set[str] = set()
    try:
        client = connect()
        print(f"images: engine {client.version()['Version']} at {engine.engine_url()}", flush=True)
        if args.base:
            base, network_mode = args.base, None
            progress("[1/4] base", started, f"{base} (given; builds have the default network)")
        else:
            base, network_mode = BASE_TAG, "none"
            if args.force_base or not engine.has_image(client, BASE_TAG):
                if engine.has_image(client, BASE_TAG):
                    old_ids.append(client.images.get(BASE_TAG).attrs["Id"])
                build_base(client, args.mirror)
            else:
                progress("[1/4] base", started, f"{BASE_TAG} is there (FORCE=1 makes it again)")
        wheels = build_wheels()
        for number, (folder, tag) in enumerate(IMAGES, start=3):
            used |= build_image(client, f"[{number}/4] image {folder}", folder, tag, base, wheels,
                                network_mode)
        remove_previous(client, used, old_ids)
    except NotReady as error:
        print(f"images: {error}", file=sys.stderr)
        return 3
    except StepFailed as error:
        print(f"images: {error}", file=sys.stderr)
        return 1
    except docker.errors.DockerException as error:
        print(f"images: the engine failed: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("images: interrupted", file=sys.stderr)
        return 130
    print(f"images: done in {time.monotonic() - started:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
