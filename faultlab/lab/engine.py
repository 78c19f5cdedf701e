"""The Docker engine as faultlab meets it: reached through the docker SDK with one-line errors
that say the fix, the labels that tie a container to its run, and what `lab gc` removes.

A container of a run carries `faultlab.slot` (the lab's slot) and `faultlab.owner` (the run's pid
and start time, as the slot's lease says them); `lab gc` removes a container only when its slot is
being collected and its owner is gone.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from faultlab.errors import LabError

if TYPE_CHECKING:
    from docker import DockerClient

# faultlab's own images (`make images`): the reference clients, and the whole lab.
CLIENTS_IMAGE = "faultlab-clients:latest"
LAB_IMAGE = "faultlab:latest"
# Seconds an engine call may take (a container's own wait and log stream have none).
ENGINE_TIMEOUT_S = 30
LABEL_SLOT = "faultlab.slot"
LABEL_OWNER = "faultlab.owner"
LABEL_ROLE = "faultlab.role"
START_ENGINE = ("start one: apt-get install docker.io && containers/engine.sh start "
                "(or your platform's Docker)")


def engine_url() -> str:
    """Where the engine is asked, as the docker SDK and CLI decide it (`DOCKER_HOST`)."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _socket_missing() -> bool:
    url = engine_url()
    return url.startswith("unix://") and not os.path.exists(url.removeprefix("unix://"))


def connect() -> DockerClient:
    """A client of the engine that answers; a LabError that says why not and the fix."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError:
        raise LabError("the docker SDK is missing: make install (or pip install docker)") from None
    url = engine_url()
    if _socket_missing():
        raise LabError(f"no Docker engine at {url}: {START_ENGINE}")
    try:
        client = docker.from_env(timeout=ENGINE_TIMEOUT_S)
        client.ping()
    except DockerException as exc:
        raise LabError(f"the Docker engine at {url} does not answer ({_reason(exc)}): "
                       f"{START_ENGINE}") from None
    return client


def _reason(exc: BaseException) -> str:
    text = str(exc)
    for known in ("Connection refused", "Permission denied", "timed out", "No such file"):
        if known.lower() in text.lower():
            return known.lower()
    return text.splitlines()[0][:120] if text else type(exc).__name__


def owner_label(pid: int, start_time: int) -> str:
    return f"{pid} {start_time}"


def engine_version() -> tuple[str | None, str]:
    """The engine's version, or None and why it cannot be used (for `doctor`)."""
    try:
        client = connect()
    except LabError as exc:
        return None, str(exc)
    with contextlib.closing(client):
        return str(client.version().get("Version", "?")), ""


def engine_images(names: list[str]) -> dict[str, bool]:
    """Whether each image is in the local engine."""
    from docker.errors import ImageNotFound

    client = connect()
    found = {}
    with contextlib.closing(client):
        for name in names:
            try:
                client.images.get(name)
                found[name] = True
            except ImageNotFound:
                found[name] = False
    return found


def container_slots() -> set[int]:
    """The slots that faultlab containers on this engine name (none when no engine answers)."""
    if _socket_missing():
        return set()
    try:
        client = connect()
    except LabError:
        return set()
    with contextlib.closing(client):
        slots = set()
        for c in client.containers.list(all=True, filters={"label": LABEL_SLOT}):
            with contextlib.suppress(ValueError):
                slots.add(int(c.labels[LABEL_SLOT]))
        return slots


def remove_containers(slot: int) -> list[str]:
    """Remove the containers of `slot` whose run is gone (`lab gc`'s collector); one line each."""
    from faultlab.lab.netns import process_start_time

    if _socket_missing():
        return []
    try:
        client = connect()
    except LabError as exc:
        return [f"containers of lab {slot} not checked: {exc}"]
    report = []
    with contextlib.closing(client):
        for c in client.containers.list(all=True, filters={"label": f"{LABEL_SLOT}={slot}"}):
            owner = c.labels.get(LABEL_OWNER, "").split()
            with contextlib.suppress(OSError, ValueError, IndexError):
                if process_start_time(int(owner[0])) == int(owner[1]):
                    report.append(f"spared container {c.name}: run {owner[0]} is alive")
                    continue
            c.remove(force=True)
            report.append(f"removed container {c.name}")
    return report
