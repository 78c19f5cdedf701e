"""The Docker engine as faultlab meets it: reached through the docker SDK with one-line errors
that say the fix, the labels that tie a container to its run, and what `lab gc` removes.

A container of a run carries `faultlab.slot` (the lab's slot), `faultlab.role`, `faultlab.run`
(the run folder's name) and `faultlab.owner` (the run's pid and start time, as the slot's lease
says them); `lab gc` removes the containers of a slot it collects, whose lease names no live run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from faultlab.errors import LabError

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

# faultlab's own images (`make images`): the reference clients, and the whole lab.
CLIENTS_IMAGE = "faultlab-clients:latest"
LAB_IMAGE = "faultlab:latest"
# Seconds an engine call may take (a container's own wait and log stream have none).
ENGINE_TIMEOUT_S = 30
LABEL_SLOT = "faultlab.slot"
LABEL_OWNER = "faultlab.owner"
LABEL_ROLE = "faultlab.role"
LABEL_RUN = "faultlab.run"
START_ENGINE = ("start one (Debian: apt-get install docker.io, then dockerd; in faultlab's "
                "repository: containers/engine.sh start)")


def engine_url() -> str:
    """Where the engine is asked, as the docker SDK and CLI decide it (`DOCKER_HOST`)."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _socket_missing() -> bool:
    url = engine_url()
    return url.startswith("unix://") and not os.path.exists(url.removeprefix("unix://"))


def connect() -> DockerClient:
    """A client of the engine that answers; a LabError that says why not and the fix."""
    import docker

    url = engine_url()
    if _socket_missing():
        raise LabError(f"no Docker engine at {url}: {START_ENGINE}")
    try:
        client = docker.from_env(timeout=ENGINE_TIMEOUT_S)
        client.ping()
    except engine_exceptions() as exc:
        reason = _reason(exc)
        if reason == "permission denied":
            raise LabError(f"no permission to use the Docker engine at {url}: run faultlab as "
                           f"root") from None
        raise LabError(f"the Docker engine at {url} does not answer ({reason}): "
                       f"{START_ENGINE}") from None
    return client


def engine_exceptions() -> tuple[type[Exception], ...]:
    """What a failing engine raises through the SDK: its own errors, and requests' (a dropped
    connection, a timeout)."""
    import requests
    from docker.errors import DockerException

    return (DockerException, requests.RequestException)


@contextlib.contextmanager
def engine_errors(doing: str) -> Iterator[None]:
    """The engine's failures while `doing`, as one-line LabErrors."""
    from docker.errors import APIError

    try:
        yield
    except APIError as exc:
        raise LabError(f"{doing}: {exc.explanation or exc}") from None
    except engine_exceptions() as exc:
        raise LabError(f"{doing}: the Docker engine failed ({_reason(exc)})") from None


@contextlib.contextmanager
def quietly() -> Iterator[None]:
    """For teardown: an engine failure (the container is gone, the engine down) is no reason to
    stop removing the rest; `lab gc` finds what is left."""
    try:
        yield
    except engine_exceptions():
        pass


def has_image(client: DockerClient, name: str) -> bool:
    """Whether the local engine has the image `name`."""
    from docker.errors import ImageNotFound

    try:
        client.images.get(name)
    except ImageNotFound:
        return False
    return True


def _reason(exc: BaseException) -> str:
    text = str(exc)
    for known in ("Connection refused", "Permission denied", "timed out", "No such file"):
        if known.lower() in text.lower():
            return known.lower()
    return text.splitlines()[0][:120] if text else type(exc).__name__


def engine_images(names: list[str]) -> tuple[str, dict[str, bool]]:
    """The local engine's version, and whether each image is in it (a LabError when no engine
    answers)."""
    client = connect()
    with contextlib.closing(client), engine_errors("cannot list the engine's images"):
        version = str(client.version().get("Version", "?"))
        return version, {name: has_image(client, name) for name in names}


def container_slots() -> set[int]:
    """The slots that faultlab containers on this engine name (none when no engine answers)."""
    try:
        client = connect()
    except LabError:
        return set()
    slots: set[int] = set()
    with contextlib.closing(client), quietly():
        for c in client.containers.list(all=True, filters={"label": LABEL_SLOT}):
            with contextlib.suppress(ValueError):
                slots.add(int(c.labels[LABEL_SLOT]))
    return slots


def remove_containers(slot: int) -> list[str]:
    """Remove the containers of `slot` (`lab gc`'s collector, called for a slot whose lease names
    no live run: a run leases its slot before it makes a container); one line each."""
    if _socket_missing():
        return []
    try:
        client = connect()
    except LabError as exc:
        return [f"containers of lab {slot} not checked: {exc}"]
    report = []
    with contextlib.closing(client):
        try:
            found = client.containers.list(all=True, filters={"label": f"{LABEL_SLOT}={slot}"})
        except engine_exceptions() as exc:
            return [f"containers of lab {slot} not checked: {_reason(exc)}"]
        for c in found:
            try:
                c.remove(force=True)
                report.append(f"removed container {c.name}")
            except engine_exceptions() as exc:
                report.append(f"could not remove container {c.name}: {_reason(exc)}")
    return report


def has_path(container: Container, path: str) -> bool:
    """Whether the container's filesystem has `path`, asked of a created container (no start):
    a HEAD of its archive, which answers with the file's stat only (2 ms; a GET, 60 ms). The
    docker SDK has no call for it; its low-level client builds its versioned URLs with `_url`
    (private, and left out of typeshed): the one private name of the SDK faultlab uses."""
    assert container.client is not None
    api = container.client.api
    url = api._url("/containers/{0}/archive", container.id)  # type: ignore[attr-defined]
    answer = api.head(url, params={"path": path})
    if answer.status_code not in (200, 404):
        answer.raise_for_status()
    return answer.status_code == 200
