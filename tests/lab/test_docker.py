"""The docker lab: the client (or the target) as a container of an image, wired into the same
router, with every fault, the capture, the hosts file, the CA and the event file working as for
a namespace member; nothing left behind, and one-line errors for what a user gets wrong."""

from __future__ import annotations

import io
import json
import re
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from faultlab.lab.engine import LABEL_SLOT
from faultlab.profile import load_profile, with_client_image

from ..conftest import PROFILES, faultlab, need_image, patience
from .helpers import (
    LONG,
    failed,
    first,
    host_network_state,
    lab_traces,
    pid_alive,
    run_events,
    run_loaded,
    run_profile,
    run_slot,
    start_run,
)

if TYPE_CHECKING:
    from docker import DockerClient

pytestmark = [pytest.mark.lab, pytest.mark.docker, pytest.mark.alone]


def containers_of(engine: DockerClient, slot: int) -> list[str]:
    return [c.name or "" for c in engine.containers.list(
        all=True, filters={"label": f"{LABEL_SLOT}={slot}"})]


def test_silent_loss_with_a_container_client(
    clients_image: str, docker_engine: DockerClient, runs_dir: Path
) -> None:
    """The demo profile with its ws-client in a container: the same expectations hold (the drop
    on the router is silent for the container as for a namespace), its events and output reach
    the run folder, and its container is gone after the run."""
    profile = with_client_image(load_profile(PROFILES / "silent-loss.yaml"), clients_image)
    result = run_loaded(profile, runs_dir)
    assert result.verdict == "PASS", failed(result)
    start = first(result, "process.start", role="client")
    assert start.fields["image"] == clients_image and start.fields["container"]
    assert first(result, "lab.ready").fields["backend"] == "docker"
    assert "client.connected" in (result.run_dir / "client.events.jsonl").read_text()
    slot = int(first(result, "lab.ready").fields["slot"])
    assert containers_of(docker_engine, slot) == []


AT_CLIENT = """\
name: drop-in-container
target: {builtin: ws-echo-server, port: 8765}
client:
  image: IMAGE
  builtin: ws-client
  args: [--duration, 8s, --ping-interval, 500ms, --lost-after, 2s, --close-timeout, 500ms]
hosts: [echo.faultlab.test]
network:
  sysctl: {client: {net.ipv4.tcp_retries2: 4}}
timeline:
  - {id: cut, when: {at: 1500ms}, do: {fault: drop, at: client}}
expect:
  - {event: client.lost, after: {event: fault.applied, where: {step: cut}}, not_before: 2s}
  - {count: {event: tcp.fin, where: {from: server}}, equals: 0}
timeout: 15s
"""


def test_drop_at_client_inside_the_container(clients_image: str, runs_dir: Path) -> None:
    """`drop` with `at: client` puts its rules in the container's own network (the field study's
    round 3), and a client sysctl is set there: the container's TCP drops locally, the server
    is never told."""
    result = run_profile(AT_CLIENT.replace("IMAGE", clients_image), runs_dir)
    assert result.verdict == "PASS", failed(result)
    assert first(result, "fault.applied", step="cut").fields["at"] == "client"


CONTAINER_TARGET = """\
name: container-target
target: {image: IMAGE, builtin: ws-echo-server, port: 8765}
client:
  builtin: ws-client
  args: [--duration, 3s, --ping-interval, 500ms, --lost-after, 2s]
hosts: [echo.faultlab.test]
expect:
  - {event: client.connected}
  - {exit_code: 0}
  - {alive: target}
timeout: 15s
"""


def test_the_target_as_a_container(clients_image: str, runs_dir: Path) -> None:
    """The target runs in the server's place as a container of the image: the lab waits until it
    listens (in the container's network), and the client reaches it through the router."""
    result = run_profile(CONTAINER_TARGET.replace("IMAGE", clients_image), runs_dir)
    assert result.verdict == "PASS", failed(result)
    assert first(result, "process.start", role="target").fields["image"] == clients_image


CONTAINER_TARGET_TURN = f"""\
name: container-target-turn
target: {{image: IMAGE, builtin: ws-echo-server, port: 8765}}
turn: {{udp: true, tcp: true, tls: false}}
client:
  command: [{sys.executable}, {Path(__file__).with_name("turn_client.py")}]
expect:
  - {{count: {{event: client.turn_relayed}}, equals: 2}}
  - {{count: {{event: client.turn_failed}}, equals: 0}}
timeout: 20s
"""


def test_the_turn_server_listens_in_a_container_targets_network(
        clients_image: str, runs_dir: Path) -> None:
    """The container takes the server's network along with its link: the TURN server starts
    after it, in its network, and the client's allocations are relayed from there."""
    result = run_profile(CONTAINER_TARGET_TURN.replace("IMAGE", clients_image), runs_dir)
    assert result.verdict == "PASS", failed(result) + (result.run_dir / "turn.log").read_text()[-3000:]
    order = [e.fields["role"] for e in result.observed if e.name == "process.start"]
    assert order.index("target") < order.index("turn")


def test_field_profiles_with_the_containerised_client(clients_image: str, tmp_path: Path) -> None:
    """BR1 (an emulator over TLS, the run's CA, the hosts file, the booking ledger), A1 (the
    virtual microphone's socket) and dns-fails-on-reconnect (the lab's resolver in the
    container's resolv.conf) with their client in the image: all PASS, the field's outcome in the
    suite table."""
    done = faultlab("run", "-q", "--client-image", clients_image, "--runs-dir", str(tmp_path),
                    "field/BR1", "field/A1", "dns-fails-on-reconnect", timeout=patience(240))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    (table,) = tmp_path.glob("suite-*.md")
    row = next(line for line in table.read_text().splitlines() if "field-BR1 " in line)
    assert re.search(r"\|\s*1\s*\|\s*truth\s*\|", row), row
    for run_dir in tmp_path.glob("*-field-*"):
        events = run_events(run_dir)
        starts = [e for e in events if e["event"] == "process.start" and e["role"] == "client"]
        assert starts and starts[0]["image"] == clients_image


def test_sigkill_then_gc_removes_the_container(
    clients_image: str, docker_engine: DockerClient, tmp_path: Path
) -> None:
    """SIGKILL of a run whose client is a container leaves the container running; `lab gc`
    removes it with the namespaces, and the host is as before."""
    before = host_network_state()
    proc, run_dir = start_run(tmp_path, "--client-image", clients_image)
    proc.kill()
    proc.wait(timeout=patience(5))
    slot = run_slot(run_dir)
    assert containers_of(docker_engine, slot) == [f"faultlab-{slot}-client"]
    done = faultlab("lab", "gc")
    assert done.returncode == 0, done.stderr
    assert f"removed container faultlab-{slot}-client" in done.stdout.splitlines(), done.stdout
    assert containers_of(docker_engine, slot) == []
    pids = [int(e["pid"]) for e in run_events(run_dir)  # type: ignore[call-overload]
            if e["event"] == "process.start"]
    assert pids and not any(pid_alive(p) for p in pids)
    assert lab_traces(slot, proc.pid) == []
    assert host_network_state() == before


def test_teardown_removes_the_container_on_sigterm(
    clients_image: str, docker_engine: DockerClient, tmp_path: Path
) -> None:
    """SIGTERM mid-run: exit 143, and the container is gone with the lab."""
    import signal

    proc, run_dir = start_run(tmp_path, "--client-image", clients_image)
    slot = run_slot(run_dir)
    assert containers_of(docker_engine, slot)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=patience(15))
    assert proc.returncode == 143
    assert containers_of(docker_engine, slot) == []
    assert lab_traces(slot, proc.pid) == []


@pytest.fixture
def shell_less_image(docker_engine: DockerClient) -> Iterator[str]:
    """An image of one text file: no shell, no Python."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        body = b"nothing to run\n"
        info = tarfile.TarInfo("readme.txt")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    name = "faultlab-test-no-shell:latest"
    docker_engine.api.import_image_from_data(data.getvalue(), repository=name.split(":")[0],
                                             tag="latest", changes=['CMD ["/agent"]'])
    yield name
    docker_engine.images.remove(name, force=True)


ONE_CLIENT = """\
name: bad-image
client: {image: IMAGE}
timeout: 10s
"""
BAD_IMAGES = {
    "missing": ("faultlab-test-absent:1", "make images"),
    "no-shell": ("shell_less_image", "neither /bin/sh nor python3"),
    "no-program": ("clients_image", "has no 'my-agent' on its PATH"),
}


@pytest.mark.parametrize("case", ["missing", "no-shell", "no-program"])
def test_a_bad_image_is_one_line_and_exit_3(
    case: str, request: pytest.FixtureRequest, docker_engine: DockerClient, tmp_path: Path
) -> None:
    """An image that is not there, has neither a shell nor Python, or lacks the program: one
    line that says the fix, exit 3, no traceback, the lab torn down."""
    image, want = BAD_IMAGES[case]
    if case != "missing":
        image = request.getfixturevalue(image)
    profile = tmp_path / "bad.yaml"
    text = ONE_CLIENT.replace("IMAGE", image)
    if case == "no-program":
        text = text.replace("}", ", command: [my-agent, --fast]}")
    profile.write_text(text)
    done = faultlab("run", "-q", "--runs-dir", str(tmp_path / "runs"), str(profile))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    (error,) = [line for line in done.stdout.splitlines() if line.startswith("  ERROR")]
    assert want in error, error
    (run_dir,) = (tmp_path / "runs").glob("*-bad-image")
    slot = run_slot(run_dir)
    assert lab_traces(slot, -1) == [] and containers_of(docker_engine, slot) == []


@pytest.mark.parametrize("case", ["absent", "down"])
def test_no_engine_is_one_line_and_exit_3(case: str, tmp_path: Path) -> None:
    """No engine where DOCKER_HOST points, or one that is down (its socket refuses): a one-line
    error with the fix, exit 3, nothing built (needs no engine at all)."""
    import os
    import socket
    import subprocess
    import sys

    from ..conftest import REPO

    profile = tmp_path / "p.yaml"
    profile.write_text(LONG.replace("client: {", "client: {image: faultlab-clients, "))
    path = tmp_path / "engine.sock"
    if case == "down":  # a socket file that nobody listens on any more
        with socket.socket(socket.AF_UNIX) as dead:
            dead.bind(str(path))
    env = dict(os.environ, DOCKER_HOST=f"unix://{path}")
    done = subprocess.run([sys.executable, "-m", "faultlab", "run", "-q", "--runs-dir",
                           str(tmp_path / "runs"), str(profile)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    (error,) = [line for line in done.stdout.splitlines() if line.startswith("  ERROR")]
    want = "no Docker engine at unix://" if case == "absent" else "connection refused"
    assert want in error and "start one" in error, error
    assert not list((tmp_path / "runs").glob("*/capture.pcap")), "the lab was built"


# Linux's capabilities by number (linux/capability.h), for those a host's root may lack.
CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE",
    "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
    "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
)


def privileged() -> dict[str, object]:
    """`--privileged`; where this host's root lacks a capability (a sandbox: docker 20.10 then
    fails with "unable to apply caps"), every capability it has, with no seccomp or AppArmor
    (and, by the caller, no masked /proc paths): the same rights, bar the missing ones."""
    status = Path("/proc/self/status").read_text()
    bounding = int(re.search(r"^CapBnd:\s*([0-9a-f]+)", status, re.M).group(1), 16)  # type: ignore[union-attr]
    missing = [name for bit, name in enumerate(CAPABILITIES) if not bounding >> bit & 1]
    if not missing:
        return {"privileged": True}
    return {"cap_add": ["ALL"], "cap_drop": missing, "security_opt": [
        "seccomp=unconfined", "apparmor=unconfined"]}


def test_the_lab_image_runs_the_demo(docker_engine: DockerClient, tmp_path: Path) -> None:
    """The whole lab inside one privileged container (for a machine without a usable Linux
    kernel): `faultlab run silent-loss` PASSes there, and nothing of it is left on the host."""
    from faultlab.lab.engine import LAB_IMAGE

    need_image(docker_engine, LAB_IMAGE)
    before = host_network_state()
    work = tmp_path / "work"
    work.mkdir()
    api = docker_engine.api
    host = api.create_host_config(network_mode="none", binds={str(work): {"bind": "/work"}},
                                  **privileged())
    if not host.get("Privileged"):
        host.update(MaskedPaths=[], ReadonlyPaths=[])  # the CLI's systempaths=unconfined
    created = api.create_container(LAB_IMAGE, ["run", "-q", "silent-loss"], working_dir="/work",
                                   host_config=host, labels={"faultlab.test": "lab-image"})
    try:
        api.start(created["Id"])
        code = api.wait(created["Id"], timeout=patience(120))["StatusCode"]
        out = api.logs(created["Id"]).decode()
    finally:
        api.remove_container(created["Id"], force=True)
    assert code == 0 and "== silent-loss: PASS" in out, out
    assert list(work.glob("runs/*-silent-loss/summary.md"))
    assert host_network_state() == before


@pytest.fixture
def entrypoint_image(docker_engine: DockerClient, clients_image: str) -> Iterator[str]:
    """faultlab-clients with an ENTRYPOINT that writes its arguments to an event and a CMD."""
    script = 'printf \'{"event": "entry", "args": "%s"}\\n\' "$*" >> "$FAULTLAB_EVENTS"'
    base = docker_engine.containers.create(clients_image, command=["true"])
    name = "faultlab-test-entrypoint:latest"
    try:
        base.commit(repository=name.split(":")[0], tag="latest", changes=[
            f'ENTRYPOINT ["/bin/sh", "-c", {json.dumps(script)}, "agent"]', 'CMD ["default"]'])
    finally:
        base.remove(force=True)
    yield name
    docker_engine.images.remove(name, force=True)


def test_an_image_keeps_its_entrypoint_unless_given_a_command(
    entrypoint_image: str, runs_dir: Path
) -> None:
    """With no command, the image's ENTRYPOINT runs with the profile's `args` in place of its
    CMD (as `docker run IMAGE ARGS`), or with its CMD; a command replaces both."""
    own = "name: entry\nclient: {image: IMAGE, args: [a, b]}\nexpect: [{exit_code: 0}]\n"
    result = run_profile(own.replace("IMAGE", entrypoint_image), runs_dir)
    assert first(result, "entry").fields["args"] == "a b", failed(result)
    result = run_profile(own.replace("IMAGE", entrypoint_image).replace(", args: [a, b]", ""),
                         runs_dir)
    assert first(result, "entry").fields["args"] == "default", failed(result)
    given = own.replace("args: [a, b]", "command: [sh, -c, 'exit 4']").replace("0}", "4}")
    result = run_profile(given.replace("IMAGE", entrypoint_image), runs_dir)
    assert result.verdict == "PASS" and not [e for e in result.events if e.name == "entry"], \
        failed(result)
