"""Starting a run's programs in the lab: the target and the client, with their command lines,
environments, /etc files (hosts, resolv.conf) and event files, and the client's virtual microphone.

Every program gets `FAULTLAB_EVENTS` (a file of its own, followed onto the bus), the run folder,
its role, the run's start and the target's address. With an emulator target, the client resolves
the service's real host names to it and trusts the run's own CA, so an unmodified SDK client
reaches it; the emulator is `faultlab emulator serve` in the server's place. A remote target is
reached through the router's uplink, with the uplink's DNS. The client's TLS session keys go to
`client-keys.log` (`SSLKEYLOGFILE`, which Python's ssl and Node honour), so that its capture can
be decrypted.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path

from faultlab.connections import ConnectionTable
from faultlab.emulator.server import client_environment, trust_environment
from faultlab.events import EventBus
from faultlab.lab import uplink
from faultlab.lab.base import Image, Lab, Role
from faultlab.lab.process import LabProcess, wait_listening
from faultlab.mic import VirtualMic, write_clips
from faultlab.peers import builtin_command
from faultlab.private import PRIVATE_DIR, create_private, remember_env_secrets
from faultlab.profile import HOST_LOOPBACK, EmulatorTarget, Profile, Program, RemoteTarget
from faultlab.sources import EventTails
from faultlab.tls import LabCA, write_trust_bundle

# Names the client resolves to an emulator target, so the SDK's default endpoints reach it.
EMULATED_HOSTS = ["generativelanguage.googleapis.com", "aiplatform.googleapis.com",
                  "us-central1-aiplatform.googleapis.com", "europe-west4-aiplatform.googleapis.com"]


def remote_address(remote: RemoteTarget) -> str | None:
    """The address a remote target's name is pinned to in the lab, if any."""
    if remote.address == HOST_LOOPBACK:
        return str(uplink.HOST_LOOPBACK)
    return remote.address


def program_argv(program: Program) -> list[str]:
    """Its command line; in a container, empty or just `args` leaves the image's own command
    (as `docker run IMAGE ARGS` does)."""
    if program.runs_image_command:
        return list(program.args)
    base = list(program.command) if program.command else builtin_command(
        program.builtin or "", in_image=program.image is not None)
    return base + list(program.args)


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

    @functools.cached_property
    def ca(self) -> LabCA:
        """The run's own CA: the emulator's and the proxy's certificates, the client's trust."""
        return LabCA(self.run_dir / "ca")

    @property
    def speech_dir(self) -> Path:
        """The microphone's clips, also registered with an emulator target."""
        return self.run_dir / "speech"

    async def start_target(self) -> LabProcess:
        """The target in the server's place, once it listens on its port."""
        target = self.profile.target
        assert target is not None
        env = self._environment("target", target)
        if target.emulator is not None:
            argv = self._emulator_argv(target.emulator)
            env["SSLKEYLOGFILE"] = str(create_private(self.run_dir / "emulator-keys.log"))
        else:
            argv = program_argv(target)
        proc = await self._start("target", "server", argv, env, None, target)
        await wait_listening(proc, target.listen_port, target.ready_timeout,
                             self.run_dir / "target.log")
        self.bus.emit("faultlab", "target.ready", port=target.listen_port)
        return proc

    async def start_client(self, proxied: bool) -> LabProcess:
        """The client in the client's place, with the lab's /etc files and, with an emulator
        target, the SDK's trust and base URL; with a remote one, the trust the path needs (the
        proxy's CA when `proxied`, the remote's own)."""
        p = self.profile
        env = self._environment("client", p.client)
        env["SSLKEYLOGFILE"] = str(create_private(self.run_dir / "client-keys.log"))
        names, address = list(p.hosts), self.target_address
        if p.target is not None and p.target.emulator is not None:
            names += EMULATED_HOSTS
            port = p.target.listen_port
            suffix = "" if port == 443 else f":{port}"
            env.update(client_environment(str(self.ca.cert_path),
                                          f"https://{EMULATED_HOSTS[0]}{suffix}"))
        remote = p.remote
        if remote is not None:
            # Names resolve to a remote's pinned address; else the client asks DNS for them.
            names += [remote.host] if address else []
            extra = [self.ca.cert_path] if proxied else []
            extra += [self._profile_path(remote.ca)] if remote.ca is not None else []
            if extra:
                bundle = write_trust_bundle(self.run_dir / "trust.pem", extra)
                env.update(trust_environment(str(bundle)))
        if self.mic_path is not None:
            env["FAULTLAB_MIC"] = str(self.mic_path)
        env.update(p.client.env)
        etc = self.run_dir / "etc"
        etc.mkdir(mode=PRIVATE_DIR, exist_ok=True)
        (etc / "hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n"
                                   + (f"{address}\t{' '.join(names)}\n" if address and names
                                      else ""))
        if remote is not None:
            # The client resolves real names with the uplink's DNS (the host's resolver).
            (etc / "resolv.conf").write_text(f"nameserver {uplink.DNS}\n")
        return await self._start("client", "client", program_argv(p.client), env, etc, p.client)

    async def start_mic(self) -> VirtualMic:
        """The client's virtual microphone, serving the profile's utterances."""
        mic = self.profile.mic
        assert mic is not None
        clips = await asyncio.to_thread(write_clips, mic.utterances, self.speech_dir)
        virtual = VirtualMic(mic.utterances, clips, mic.gap, mic.tail, self.bus)
        self.stack.push_async_callback(virtual.close)
        self.mic_path = await virtual.serve(self.run_dir)
        return virtual

    def _environment(self, role: str, program: Program) -> dict[str, str]:
        """faultlab's variables over this process's environment; a container gets only them
        (and the profile's `env`), its image's own environment beneath."""
        events = self.tails.add(self.run_dir / f"{role}.events.jsonl", role)
        env = dict(os.environ) if program.image is None else {}
        # The run checked that they are set (profile.unset_pass_env) before building the lab.
        env.update({name: os.environ[name] for name in program.pass_env})
        target, remote = self.profile.target, self.profile.remote
        host = remote.host if remote is not None else str(self.lab.server_address)
        env.update({
            "FAULTLAB_EVENTS": str(events), "FAULTLAB_RUN_DIR": str(self.run_dir),
            "FAULTLAB_ROLE": role, "FAULTLAB_T0": f"{self.bus.clock.t0_wall:.6f}",
            "FAULTLAB_TARGET_HOST": host,
        })
        if target is not None:
            env["FAULTLAB_TARGET_PORT"] = str(target.listen_port)
            env["FAULTLAB_TARGET"] = f"{host}:{target.listen_port}"
            if role == "target":
                env.update(target.env)
        return env

    async def _start(self, role: str, where: Role, argv: list[str], env: dict[str, str],
                     etc: Path | None, program: Program) -> LabProcess:
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
        remote = self.profile.remote
        return str(self.lab.server_address) if remote is None else remote_address(remote)

    def connection_table(self) -> ConnectionTable:
        """The client's connections to count: those to the target's port, and its address when
        it is known before the run."""
        target = self.profile.target
        if target is None:
            return ConnectionTable()
        return ConnectionTable(target.listen_port, self.target_address)

    def upstream_ca(self) -> Path | None:
        """What the proxy verifies the target's certificate with: the run's CA for an emulator,
        the system's CAs (and the remote's own `ca`) for a remote service."""
        target, remote = self.profile.target, self.profile.remote
        if target is not None and target.emulator is not None:
            return self.ca.cert_path
        if remote is None:
            return None
        extra = [] if remote.ca is None else [self._profile_path(remote.ca)]
        return write_trust_bundle(self.run_dir / "upstream-trust.pem", extra)

    def _profile_path(self, path: Path) -> Path:
        """A path the profile gives, relative to the profile's folder."""
        return (self.profile.path.parent if self.profile.path else Path.cwd()) / path

    def _shared(self) -> tuple[Path, ...]:
        """The host folders a container sees at the same paths: the run folder (event files,
        the CA, logs) and the microphone's socket's, where that is elsewhere."""
        folders = [self.run_dir]
        if self.mic_path is not None and not self.mic_path.is_relative_to(folders[0]):
            folders.append(self.mic_path.parent)
        return tuple(folders)

    def _emulator_argv(self, emulator: EmulatorTarget) -> list[str]:
        port = self.profile.target.listen_port if self.profile.target else 443
        argv = [sys.executable, "-m", "faultlab", "emulator", "serve", "--host",
                str(self.lab.server_address), "--port", str(port), "--personality",
                emulator.personality, "--time-scale", f"{emulator.time_scale:g}", "--ca-dir",
                str(self.ca.directory)]
        if emulator.utterances is not None:
            argv += ["--utterances", str(self._profile_path(emulator.utterances))]
        if self.profile.mic is not None:
            argv += ["--utterances", str(self.speech_dir)]
        if emulator.seed is not None:
            argv += ["--seed", str(emulator.seed)]
        for key, value in emulator.overrides.items():
            argv += ["--set", f"{key}={json.dumps(value)}"]
        return argv
