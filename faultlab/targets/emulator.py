"""faultlab's emulator as the target: `faultlab emulator serve` in the server's namespace, speaking
its personality's API (Gemini Live, OpenAI Realtime).

The client resolves the service's real host names to it and trusts the run's own CA, which
issued its certificate, so an unmodified SDK client reaches it; it writes a frame log of its own,
which frame triggers follow without the proxy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, ValidationError, field_validator, model_validator

from faultlab.emulator.personality import DEFAULT_PERSONALITY, PERSONALITIES, personality_with
from faultlab.model import Model, enum_of, one_of
from faultlab.private import create_private
from faultlab.problems import message_of
from faultlab.protocols import PROTOCOLS, Protocol
from faultlab.targets.base import Surroundings, TargetKind
from faultlab.vocabulary.server import ServerConnect

# The port it listens on when the profile gives none: the service's.
DEFAULT_PORT = 443


class EmulatorTarget(Model):
    """faultlab's Live API emulator as the target (`faultlab emulator serve` in the server ns)."""

    personality: str = Field(default=DEFAULT_PERSONALITY, json_schema_extra=enum_of(PERSONALITIES))
    """The service it plays: the API it speaks, its models and every timing and switch of its
    behaviour (faultlab/emulator/personality.py); default: Gemini's Developer API."""
    time_scale: float = Field(default=1.0, gt=0)
    """A factor on every server timer: `0.01` turns the 480 s reaping of a silent connection
    into 4.8 s."""
    utterances: Path | None = None
    """A folder of `NAME.wav` + `NAME.txt`: speech it recognises as those words, however it is
    chunked (other speech is heard as `[speech 2.3s]`); relative to the profile's folder."""
    seed: int | None = None
    """The seed of its random draws (timings within their ranges, handles); absent: a fresh
    one each run."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """The personality's fields to change, by name:
    `{models: [{pattern: "my-model-*", modalities: [AUDIO]}]}`."""

    @field_validator("personality")
    @classmethod
    def _known(cls, name: str) -> str:
        return one_of("personality", name, PERSONALITIES)

    @model_validator(mode="after")
    def _valid_overrides(self) -> EmulatorTarget:
        try:
            personality_with(self.personality, self.overrides)
        except ValidationError as exc:
            raise ValueError("; ".join(
                f"overrides.{'.'.join(map(str, e['loc']))}: {message_of(e)}" for e in exc.errors()
            )) from None
        return self


class Emulator(TargetKind):
    """The emulator, listening on `port` (443 when the profile gives none)."""

    name: ClassVar[str] = "emulator"
    frame_log: ClassVar[str | None] = ServerConnect.NAME
    records: ClassVar[bool] = True

    def __init__(self, settings: EmulatorTarget, port: int | None, image: str | None) -> None:
        self.settings = settings
        self.port = port
        self.image = image

    @property
    def protocol(self) -> Protocol:
        """The API its personality speaks."""
        return PROTOCOLS[personality_with(self.settings.personality,
                                          self.settings.overrides).protocol]

    @property
    def listen_port(self) -> int:
        return self.port or DEFAULT_PORT

    def misfit(self) -> str | None:
        if self.image is not None:
            return "the emulator is faultlab's own program: it takes no 'image'"
        return None

    def serve_argv(self, run: Surroundings, *options: str) -> list[str]:
        """`faultlab emulator serve` on the server's address with the run's CA, with `options`,
        recording its tape when the run records."""
        argv = [sys.executable, "-m", "faultlab", "emulator", "serve", "--host",
                str(run.lab.server_address), "--port", str(self.listen_port), "--ca-dir",
                str(run.ca.directory), *options]
        return argv + (["--record", str(run.tape)] if run.tape is not None else [])

    def argv(self, run: Surroundings) -> list[str]:
        emulator = self.settings
        argv = ["--personality", emulator.personality, "--time-scale",
                f"{emulator.time_scale:g}"]
        if emulator.utterances is not None:
            argv += ["--utterances", str(run.profile_path(emulator.utterances))]
        if run.speech is not None:
            argv += ["--utterances", str(run.speech)]
        if emulator.seed is not None:
            argv += ["--seed", str(emulator.seed)]
        for key, value in emulator.overrides.items():
            argv += ["--set", f"{key}={json.dumps(value)}"]
        return self.serve_argv(run, *argv)

    def env(self, run: Surroundings) -> dict[str, str]:
        return {"SSLKEYLOGFILE": str(create_private(run.run_dir / "emulator-keys.log"))}

    def client_names(self) -> list[str]:
        # So that the SDK's default endpoints reach it.
        return list(self.protocol.service.hosts)

    def client_env(self, run: Surroundings, proxied: bool) -> dict[str, str]:
        from faultlab.tls import client_environment  # the TLS stack loads when a run starts

        port = self.listen_port
        suffix = "" if port == DEFAULT_PORT else f":{port}"
        service = self.protocol.service
        return client_environment(str(run.ca.cert_path), f"https://{service.endpoint}{suffix}",
                                  service)

    def upstream_ca(self, run: Surroundings) -> Path | None:
        return run.ca.cert_path
