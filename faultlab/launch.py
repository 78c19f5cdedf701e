"""Starting a run's programs in the lab: the target and the client, with their command lines,
environments, hosts file and event files, and the client's virtual microphone.

Every program gets `FAULTLAB_EVENTS` (a file of its own, followed onto the bus), the run folder,
its role, the run's start and the target's address. With an emulator target, the client resolves
the service's real host names to it and trusts the run's own CA, so an unmodified SDK client
reaches it; the emulator is `faultlab emulator serve` in the server's place.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path

from faultlab.emulator.server import client_environment
from faultlab.events import EventBus
from faultlab.lab.base import Image, Lab, Role
from faultlab.lab.process import LabProcess, wait_listening
from faultlab.mic import VirtualMic, write_clips
from faultlab.peers import builtin_command
from faultlab.private import create_private, remember_env_secrets
from faultlab.profile import EmulatorTarget, Profile, Program
from faultlab.sources import EventTails
from faultlab.tls import LabCA

# Names the client resolves to an emulator target, so the SDK's default endpoints reach it.
EMULATED_HOSTS = ["generativelanguage.googleapis.com", "aiplatform.googleapis.com",
                  "us-central1-aiplatform.googleapis.com", "europe-west4-aiplatform.googleapis.com"]


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

    async def start_client(self) -> LabProcess:
        """The client in the client's place, with the hosts file and, with an emulator target,
        the SDK's trust and base URL."""
        p = self.profile
        env = self._environment("client", p.client)
        names = list(p.hosts)
        if p.target is not None and p.target.emulator is not None:
            names += EMULATED_HOSTS
            port = p.target.listen_port
            suffix = "" if port == 443 else f":{port}"
            env.update(client_environment(str(self.ca.cert_path),
                                          f"https://{EMULATED_HOSTS[0]}{suffix}"))
        if self.mic_path is not None:
            env["FAULTLAB_MIC"] = str(self.mic_path)
        env.update(p.client.env)
        hosts = self.run_dir / "hosts"
        hosts.write_text("127.0.0.1\tlocalhost\n::1\tlocalhost\n"
                         + (f"{self.lab.server_address}\t{' '.join(names)}\n" if names else ""))
        return await self._start("client", "client", program_argv(p.client), env, hosts,
                                 p.client)

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
        env.update({
            "FAULTLAB_EVENTS": str(events), "FAULTLAB_RUN_DIR": str(self.run_dir),
            "FAULTLAB_ROLE": role, "FAULTLAB_T0": f"{self.bus.clock.t0_wall:.6f}",
            "FAULTLAB_TARGET_HOST": str(self.lab.server_address),
        })
        target = self.profile.target
        if target is not None:
            env["FAULTLAB_TARGET_PORT"] = str(target.listen_port)
            env["FAULTLAB_TARGET"] = f"{self.lab.server_address}:{target.listen_port}"
            if role == "target":
                env.update(target.env)
        return env

    async def _start(self, role: str, where: Role, argv: list[str], env: dict[str, str],
                     hosts: Path | None, program: Program) -> LabProcess:
        # Whatever key the process is given is redacted wherever the run meets it.
        remember_env_secrets(env)
        log = create_private(self.run_dir / f"{role}.log")
        image = None if program.image is None else Image(
            program.image, self._shared(), own_command=program.runs_image_command)
        member = await self.lab.start(where, argv, env, hosts, log, image)
        proc = LabProcess.started(role, member, argv, self.bus)
        self.stack.push_async_callback(proc.stop)
        return proc

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
            base = self.profile.path.parent if self.profile.path else Path.cwd()
            argv += ["--utterances", str(base / emulator.utterances)]
        if self.profile.mic is not None:
            argv += ["--utterances", str(self.speech_dir)]
        if emulator.seed is not None:
            argv += ["--seed", str(emulator.seed)]
        for key, value in emulator.overrides.items():
            argv += ["--set", f"{key}={json.dumps(value)}"]
        return argv
