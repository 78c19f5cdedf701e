"""A "remote" service for lab tests: faultlab's echo server over TLS on this machine's loopback,
reached from the lab through the uplink under a test host name (never any other address)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from faultlab.tls import LabCA

from ..conftest import patience

HOST = "live.faultlab.test"


@dataclass(frozen=True)
class RemoteEcho:
    port: int
    ca: Path  # the CA that issued its certificate
    events: Path

    def profile(self, name: str, body: str, target_extra: str = "") -> str:
        """A profile whose target is this service, as a remote one."""
        return (f"name: {name}\n"
                f"target:\n  remote: {{host: {HOST}, port: {self.port}, address: host-loopback,"
                f" ca: {self.ca}{target_extra}}}\n{body}")

    @property
    def url(self) -> str:
        return f"wss://{HOST}:{self.port}/"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def remote_echo(folder: Path) -> Iterator[RemoteEcho]:
    """The echo server on 127.0.0.1 with a certificate for `HOST`, until the block ends."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # a rootless run's user reads the CA
    ca = LabCA(folder / "ca")
    (folder / "ca").chmod(0o755)
    cert, key = ca.issue([HOST], [])
    port = free_port()
    events = folder / "remote.events.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultlab.peers.ws_server", "--host", "127.0.0.1", "--port",
         str(port), "--tick", "200ms", "--tls-cert", str(cert), "--tls-key", str(key)],
        env=dict(os.environ, FAULTLAB_EVENTS=str(events)), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + patience(10)
        while "server.listening" not in (events.read_text() if events.exists() else ""):
            assert proc.poll() is None and time.monotonic() < deadline, "the echo did not start"
            time.sleep(0.05)
        yield RemoteEcho(port, ca.cert_path, events)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
