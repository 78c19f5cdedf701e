"""The lab's TURN server, for a client's WebRTC: coturn's `turnserver` (Debian's package) in the
server's namespace, started when a profile has `turn:`, on the server's address: UDP and TCP on
3478, TLS on 5349 with a certificate from the run's CA.

It takes the time-limited credentials of the TURN REST API (coturn's `--use-auth-secret`): the
username is `EXPIRY:faultlab`, the credential the base64 HMAC-SHA1 of the username under the run's
own secret: what a browser's or aiortc's `iceServers` take as they are. The client gets them with
the URLs (`FAULTLAB_TURN_URLS`, space-separated), and the CA that signed the TLS listener's
certificate (`FAULTLAB_TURN_CA`); so does every target in the lab (an app's server hands them to
its page). It listens before the target starts (the page's server may be the target), after it
for a target in an image, whose container takes the server's network with its link. The secret
is in the server's configuration file (private to the run), not on its command line, which the
run's events show. What it logs of its sessions becomes the run's events (faultlab.turn_log).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import shutil
import signal
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from faultlab.errors import LabError
from faultlab.events import EventBus
from faultlab.lab.base import Lab
from faultlab.lab.process import LabProcess, wait_listening
from faultlab.private import create_private, remember_secrets, write_private
from faultlab.profile import Turn
from faultlab.tls import LabCA
from faultlab.turn_urls import (
    CA_VAR,
    CREDENTIAL_VAR,
    LISTENERS,
    TURN_PORT,
    TURNS_PORT,
    URLS_VAR,
    USERNAME_VAR,
    url,
)
from faultlab.vocabulary.lab import TurnReady

REALM = "faultlab"
USER = "faultlab"
# The credentials outlive any run: a run is bounded by its timeout, far shorter.
CREDENTIALS_S = 24 * 3600
# coturn starts its listeners in ~0.1 s here.
READY_S = 10.0


@dataclass(frozen=True)
class TurnAccess:
    """What the client is given to reach the lab's TURN server."""

    urls: list[str]
    username: str
    credential: str
    ca: Path

    def env(self) -> dict[str, str]:
        return {URLS_VAR: " ".join(self.urls), USERNAME_VAR: self.username,
                CREDENTIAL_VAR: self.credential, CA_VAR: str(self.ca)}


def credentials(secret: str, expiry: int, user: str = USER) -> tuple[str, str]:
    """The TURN REST API's username and credential for `user` until `expiry` (unix time)."""
    username = f"{expiry}:{user}"
    digest = hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()
    return username, base64.b64encode(digest).decode()


def transports(turn: Turn) -> list[str]:
    """The listeners `turn` asks for, as LISTENERS names them."""
    return [name for name in LISTENERS if getattr(turn, name)]


def turn_urls(address: str, turn: Turn) -> list[str]:
    """The URLs of the transports `turn` listens on, as `iceServers` write them."""
    return [url(address, name) for name in transports(turn)]


def turnserver() -> str:
    """coturn's program; a clear error where it is not installed."""
    found = shutil.which("turnserver")
    if found is None:
        raise LabError("a profile with 'turn' needs coturn's turnserver: make install brings it "
                       "(Debian's package coturn)")
    return found


def turnserver_argv(program: str, address: str, turn: Turn, config: Path, work_dir: Path,
                    certificate: tuple[Path, Path] | None) -> list[str]:
    """coturn's command line: its configuration `config` (which `-n` would have it ignore), in
    the foreground, logging to stdout with each session's allocation, refreshes and end
    (`--verbose`), its pid file and user database in `work_dir` (not /var), only the transports
    asked for, no DTLS listener."""
    tls = ([f"--tls-listening-port={TURNS_PORT}", f"--cert={certificate[0]}",
            f"--pkey={certificate[1]}"] if certificate is not None else ["--no-tls"])
    return [program, "-c", str(config), "--no-cli", "--log-file=stdout", "--simple-log",
            "--verbose", "--use-auth-secret", f"--realm={REALM}", f"--listening-ip={address}",
            f"--relay-ip={address}", f"--listening-port={TURN_PORT}", *tls, "--no-dtls",
            *([] if turn.udp else ["--no-udp"]), *([] if turn.tcp else ["--no-tcp"]),
            f"--pidfile={work_dir / 'turn.pid'}", f"--userdb={work_dir / 'turndb'}"]


class TurnServer:
    """The lab's TURN server process: started, killed by a `turn_down` step, started again with
    the same configuration (the credentials the client holds stay valid). Once the run retires it
    (its teardown), it is not started again: a `turn_down` reverted then stays down."""

    def __init__(self, lab: Lab, turn: Turn, argv: list[str], log: Path, bus: EventBus) -> None:
        self.lab = lab
        self.turn = turn
        self.argv = argv
        self.log = log
        self.bus = bus
        self.process: LabProcess | None = None
        self.retired = False

    async def start(self) -> None:
        """Start it, unless it runs or is retired; return once each of its listeners is up."""
        if self.retired or (self.process is not None and self.process.alive):
            return
        member = await self.lab.start("server", self.argv, {}, None, self.log)
        self.process = server = LabProcess.started("turn", member, self.argv, self.bus)
        for name in transports(self.turn):
            _, port, carrier = LISTENERS[name]
            await wait_listening(server, port, READY_S, self.log, carrier)
        address = str(self.lab.server_address)
        self.bus.announce("faultlab", TurnReady(address, transports(self.turn),
                                                turn_urls(address, self.turn)))

    async def kill(self) -> int:
        """SIGKILL, as a crash: the kernel closes its sockets; the pid it had (one already dead
        stays so)."""
        assert self.process is not None
        pid = self.process.member.pid
        if self.process.alive:
            with contextlib.suppress(ProcessLookupError):  # reaped meanwhile
                os.kill(pid, signal.SIGKILL)
        await self.process.wait()
        return pid

    def retire(self) -> None:
        self.retired = True

    async def stop(self) -> None:
        self.retired = True
        if self.process is not None:
            await self.process.stop()


def prepare_turn(lab: Lab, turn: Turn, ca: LabCA, run_dir: Path, bus: EventBus,
                 stack: AsyncExitStack) -> tuple[TurnServer, TurnAccess]:
    """The TURN server in the server's namespace, not yet started, and what the client is given
    to reach it; `stack` stops it (and `lab gc` after a SIGKILL: a process in the lab's
    namespace)."""
    program = turnserver()
    address = str(lab.server_address)
    secret = secrets.token_urlsafe(24)
    config = run_dir / "turnserver.conf"
    write_private(config, f"static-auth-secret={secret}\n")
    certificate = ca.issue((), [address]) if turn.tls else None
    argv = turnserver_argv(program, address, turn, config, lab.scratch, certificate)
    server = TurnServer(lab, turn, argv, create_private(run_dir / "turn.log"), bus)
    stack.push_async_callback(server.stop)
    username, credential = credentials(secret, int(time.time()) + CREDENTIALS_S)
    remember_secrets([secret, credential])  # redacted wherever the run meets them (client.log)
    return server, TurnAccess(turn_urls(address, turn), username, credential, ca.cert_path)
