"""Starting a run's programs in the lab: the target and the client, with their command lines,
environments, /etc files (hosts, resolv.conf) and event files, and the client's virtual microphone.

Every program gets `FAULTLAB_EVENTS` (a file of its own, followed onto the bus), the run folder,
its role, the run's start and the target's address. What else a target and its client need (a
command line, names to resolve, trust, a base URL, a name server) the target's kind says
(`faultlab.targets`): an unmodified SDK client reaches an emulator target by the service's real
names, a remote target through the router's uplink. The client's TLS session keys go to
`client-keys.log` (`SSLKEYLOGFILE`, which Python's ssl honours; Node only through
`--tls-keylog`), so that its capture can be decrypted. A run with a `dns` step has the client
ask the lab's resolver in the router (faultlab.resolver) for the names /etc/hosts would have
held; a target outside the lab gives its name server (the uplink's); otherwise no name server
answers and names outside /etc/hosts fail at once. Either way names are looked up in the files,
then by DNS only (nsswitch.conf), never through a host's resolver daemon outside the lab. A run
with `turn` has the lab's TURN server (faultlab.turn); every program started gets its URLs and
credentials (an app's server hands them to its page).
"""

from __future__ import annotations

import asyncio
import functools
import os
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from faultlab.cassette.build import TAPES
from faultlab.connections import ConnectionTable
from faultlab.events import EventBus
from faultlab.lab.base import Image, Lab, Role
from faultlab.lab.process import LabProcess, wait_listening
from faultlab.private import PRIVATE_DIR, create_private, remember_env_secrets
from faultlab.profile import Profile
from faultlab.resolver.control import ResolverControl
from faultlab.sources import EventTails
from faultlab.targets import Runnable
from faultlab.tls import LabCA
from faultlab.vocabulary.lab import TargetReady

if TYPE_CHECKING:
    from faultlab.mic import VirtualMic
    from faultlab.turn import TurnAccess, TurnServer

# The client's resolver with the lab's: glibc's default (5 s, twice over) would have a lookup
# that meets no answer take 10 s; a lab's answer comes in a millisecond, so 1 s per try, two
# tries, bounds a silent resolver at about 2 s.
RESOLVER_OPTIONS = "options timeout:1 attempts:2"
NSSWITCH = Path("/etc/nsswitch.conf")
MIC_WAV = "mic.wav"


class Launcher:
    """Starts the profile's programs in `lab`; `stack` stops each of them at teardown."""

    def __init__(self, profile: Profile, lab: Lab, run_dir: Path, bus: EventBus,
                 tails: EventTails, stack: AsyncExitStack) -> None:
        self.profile = profile
        self.lab = lab
        # Absolute: a container sees the run folder at the same path, from another cwd.
        self.run_dir = run_dir.absolute()
        self.bus = bus
        self.tails = tails
        self.stack = stack
        self.mic_path: Path | None = None
        # Where the client asks for the lab's names, once the lab's resolver runs.
        self.resolver_address: str | None = None
        # How the client reaches the lab's TURN server, once it runs.
        self.turn: TurnAccess | None = None

    @functools.cached_property
    def ca(self) -> LabCA:
        """The run's own CA: the emulator's and the proxy's certificates, the client's trust."""
        return LabCA(self.run_dir / "ca")

    @property
    def speech_dir(self) -> Path:
        """The microphone's clips, also registered with an emulator target."""
        return self.run_dir / "speech"

    @property
    def speech(self) -> Path | None:
        """The microphone's clips, when the run has a microphone."""
        return self.speech_dir if self.profile.mic is not None else None

    async def start_target(self) -> LabProcess:
        """The target in the server's place, once it listens on its port."""
        target = self.profile.target
        assert target is not None
        kind = target.kind
        env = self._environment("target", target)
        env.update(kind.env(self))
        proc = await self._start("target", "server", kind.argv(self), env, None, target)
        await wait_listening(proc, kind.listen_port, target.ready_timeout,
                             self.run_dir / "target.log")
        self.bus.announce("faultlab", TargetReady(kind.listen_port))
        return proc

    async def start_client(self, proxied: bool) -> LabProcess:
        """The client in the client's place, with the lab's /etc files and what its target's
        kind needs of it: the names it resolves to the target, its trust (the proxy's CA when
        `proxied`), a base URL, a name server."""
        p = self.profile
        env = self._environment("client", p.client)
        env["SSLKEYLOGFILE"] = str(create_private(self.run_dir / "client-keys.log"))
        names, address = self.lab_names()
        kind = p.target_kind
        env.update(kind.client_env(self, proxied))
        client_kind = p.client.client_kind
        if client_kind is not None:
            env.update(client_kind.env(p.client.setting, self))
        if self.mic_path is not None:
            env["FAULTLAB_MIC"] = str(self.mic_path)
            env["FAULTLAB_MIC_WAV"] = str(self.run_dir / MIC_WAV)
        env.update(p.client.env)
        etc = self.run_dir / "etc"
        etc.mkdir(mode=PRIVATE_DIR, exist_ok=True)
        by_dns = self.resolver_address is not None
        (etc / "hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n"
                                   + (f"{address}\t{' '.join(names)}\n"
                                      if address and names and not by_dns else ""))
        if by_dns:
            server, options = self.resolver_address, RESOLVER_OPTIONS + "\n"
        elif (resolver := kind.resolver()) is not None:
            server, options = str(resolver), ""
        else:
            # No name server in the lab: a name it does not hold (a page's fonts, its analytics)
            # is refused at once on the client's own loopback. The host's resolv.conf sent the
            # queries to the host's name server, an address outside the lab (the router refused
            # them), and a host's resolver daemon (nss-resolve) would answer past the lab.
            server, options = "127.0.0.1", ""
        (etc / "resolv.conf").write_text(f"nameserver {server}\n{options}")
        if p.client.image is None and NSSWITCH.exists():
            (etc / "nsswitch.conf").write_text(files_then_dns(NSSWITCH.read_text()))
        return await self._start("client", "client", p.client.argv(self.profile_path(Path())),
                                 env, etc, p.client)

    async def start_resolver(self) -> ResolverControl:
        """The lab's resolver in the router, answering the lab's names with the address the
        client's /etc/hosts would have held, and other names with the target kind's name server
        (or refusing them); a step names the target's names, or its own."""
        from faultlab.resolver.launch import launch_resolver

        names, address = self.lab_names()
        kind = self.profile.target_kind
        target_names = list(self.profile.hosts) + kind.dns_names()
        control = await launch_resolver(
            self.lab, {n.lower(): address for n in names} if address else {},
            [n.lower() for n in target_names], kind.resolver(),
            self.run_dir, self.tails.add(self.run_dir / "resolver.events.jsonl", "resolver"),
            self.bus, self.stack)
        self.resolver_address = str(self.lab.router_address)
        return control

    def prepare_turn(self) -> TurnServer:
        """The lab's TURN server in the server's place (the profile's `turn`), to be started; the
        programs started after this (the target, the client) are given its URLs and
        credentials."""
        from faultlab.turn import prepare_turn
        from faultlab.turn_log import TurnLogTail

        assert self.profile.turn is not None
        server, self.turn = prepare_turn(self.lab, self.profile.turn, self.ca, self.run_dir,
                                         self.bus, self.stack)
        self.tails.add_log(TurnLogTail(server.log))
        return server

    def lab_names(self) -> tuple[list[str], str | None]:
        """The names the client resolves to the target (the profile's `hosts` and those its
        kind gives), and the address they resolve to (None: the client asks DNS)."""
        kind = self.profile.target_kind
        names = list(self.profile.hosts) + kind.client_names()
        return names, self.target_address

    async def start_mic(self) -> VirtualMic:
        """The client's virtual microphone, serving the profile's utterances."""
        # numpy: only a run with a microphone imports it.
        from faultlab.mic import VirtualMic
        from faultlab.speech import RATE_IN, write_clips, write_wav

        mic = self.profile.mic
        assert mic is not None
        clips = await asyncio.to_thread(write_clips, mic.utterances, self.speech_dir)
        virtual = VirtualMic(mic.utterances, clips, mic.gap, mic.tail, self.bus)
        # The same speech as a file, for a client that plays one (a browser's fake microphone).
        (self.run_dir / MIC_WAV).write_bytes(write_wav(virtual.samples, RATE_IN))
        self.stack.push_async_callback(virtual.close)
        self.mic_path = await virtual.serve(self.run_dir)
        return virtual

    def _environment(self, role: str, program: Runnable) -> dict[str, str]:
        """faultlab's variables over this process's environment; a container gets only them
        (and the profile's `env`), its image's own environment beneath."""
        events = self.tails.add(self.run_dir / f"{role}.events.jsonl", role)
        env = dict(os.environ) if program.image is None else {}
        # The run checked that they are set (profile.unset_pass_env) before building the lab.
        env.update({name: os.environ[name] for name in program.pass_env})
        kind = self.profile.target_kind
        host = kind.host(self.lab)
        env.update({
            "FAULTLAB_EVENTS": str(events), "FAULTLAB_RUN_DIR": str(self.run_dir),
            "FAULTLAB_ROLE": role, "FAULTLAB_T0": f"{self.bus.clock.t0_wall:.6f}",
            "FAULTLAB_TARGET_HOST": host, **kind.target_env(host),
        })
        if self.turn is not None:
            env.update(self.turn.env())
        if role == "target":
            env.update(program.env)
        return env

    async def _start(self, role: str, where: Role, argv: list[str], env: dict[str, str],
                     etc: Path | None, program: Runnable) -> LabProcess:
        # Whatever key the process is given is redacted wherever the run meets it.
        remember_env_secrets(env)
        log = create_private(self.run_dir / f"{role}.log")
        image = None if program.image is None else Image(
            program.image, self._shared(), own_command=program.runs_image_command)
        member = await self.lab.start(where, argv, env, etc, log, image)
        proc = LabProcess.started(role, member, argv, self.bus)
        self.stack.push_async_callback(proc.stop)
        return proc

    @property
    def target_address(self) -> str | None:
        """The address the target's names resolve to in the lab: the lab's server, a remote's
        pinned address, or None (the client asks DNS)."""
        return self.profile.target_kind.address(self.lab)

    def connection_table(self) -> ConnectionTable:
        """The client's connections to count: those to the target's port, and its address when
        it is known before the run."""
        return self.profile.target_kind.connections(self.target_address)

    def upstream_ca(self) -> Path | None:
        """What the proxy verifies the target's certificate with (the run's CA for an emulator,
        the system's CAs and a remote's own `ca` for a remote service)."""
        return self.profile.target_kind.upstream_ca(self)

    def profile_path(self, path: Path) -> Path:
        """A path the profile gives, relative to the profile's folder."""
        return (self.profile.path.parent if self.profile.path else Path.cwd()) / path

    @property
    def tape(self) -> Path | None:
        """Where a target that records itself writes its tape, when the run records."""
        kind = self.profile.target_kind
        if not self.profile.record or not kind.records:
            return None
        return self.run_dir / TAPES[0]

    @property
    def proxy_tape(self) -> Path | None:
        """Where the proxy writes its tape, when the run records a target that does not."""
        kind = self.profile.target_kind
        if not self.profile.record or kind.records:
            return None
        return self.run_dir / TAPES[1]

    def _shared(self) -> tuple[Path, ...]:
        """The host folders a container sees at the same paths: the run folder (event files,
        the CA, logs) and the microphone's socket's, where that is elsewhere."""
        folders = [self.run_dir]
        if self.mic_path is not None and not self.mic_path.is_relative_to(folders[0]):
            folders.append(self.mic_path.parent)
        return tuple(folders)


def files_then_dns(nsswitch: str) -> str:
    """The host's nsswitch.conf with host names looked up in /etc/hosts, then by DNS only: a
    host whose `hosts:` line asks systemd-resolved (nss-resolve, over a unix socket) or mDNS
    would answer beside the lab's resolver, past its faults."""
    lines = [line for line in nsswitch.splitlines() if not line.lstrip().startswith("hosts:")]
    return "\n".join([*lines, "hosts: files dns"]) + "\n"
