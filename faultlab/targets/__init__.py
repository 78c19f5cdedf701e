"""Target kinds: what the client talks to, behind one interface (`faultlab.targets.base`).

A profile's `target` is a program the lab runs in the server's namespace (`program`: a command, a
builtin, or an image's own command in a container), faultlab's Live API emulator (`emulator`), a
recorded session's server side (`cassette`), or a service outside the lab reached through an
uplink (`remote`); a profile without a target has `NoTarget` (`none`). Each kind is one module;
a new kind is its module, its field below and its line in `Target.kind`.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, model_validator

from faultlab.model import Duration
from faultlab.targets.base import Surroundings, TargetKind
from faultlab.targets.cassette import CassetteTarget, Replayed
from faultlab.targets.emulator import Emulator, EmulatorTarget
from faultlab.targets.none import NoTarget
from faultlab.targets.program import Program, ProgramTarget, Runnable, program_argv
from faultlab.targets.remote import HOST_LOOPBACK_NAME, Remote, RemoteTarget


class Target(Program):
    """The server the client talks to: a command, a builtin or the emulator, run in the server
    namespace (the emulator listens on 443 unless `port` says otherwise), or a `remote` service
    outside the lab."""

    emulator: EmulatorTarget | None = None
    """faultlab's Live API emulator as the target, with its settings (`{}`: the defaults)."""
    cassette: CassetteTarget | None = None
    """A recorded session's server side as the target, replayed where the emulator would be:
    the cassette's file, or its settings."""
    remote: RemoteTarget | None = None
    """A service outside the lab (the real Live API), reached through the router's uplink."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """The port the target listens on, which the client connects to: required for a `command`
    or a `builtin`, 443 by default for the emulator and a cassette (a remote's goes in `remote`)."""
    # A target that exits is reported at once, so a long wait costs nothing when it works;
    # measured: the emulator imports google-genai in 1.5 s on an idle 2-core machine and took
    # over 5 s on a fresh CI machine with eight labs starting at once.
    ready_timeout: Duration = 30.0
    """How long the target may take to listen on its port before the run fails."""
    KINDS: ClassVar[tuple[str, ...]] = ("command", "builtin", "emulator", "cassette", "remote")

    @model_validator(mode="after")
    def _fits_its_kind(self) -> Target:
        misfit = self.kind.misfit()
        if misfit is not None:
            raise ValueError(misfit)
        return self

    @property
    def kind(self) -> TargetKind:
        """What the run needs of it, by its kind."""
        if self.emulator is not None:
            return Emulator(self.emulator, self.port, self.image)
        if self.cassette is not None:
            return Replayed(self.cassette, self.port, self.image)
        if self.remote is not None:
            return Remote(self.remote, {k: getattr(self, k)
                                        for k in ("image", "port", "args", "env", "pass_env")})
        return ProgramTarget(self, self.port)

    @property
    def listen_port(self) -> int:
        """The port the client connects to."""
        return self.kind.listen_port

    def anchored(self, folder: Path) -> Target:
        """The same target, the files it names relative to `folder` (the profile's) when they
        are relative: a cassette's file, which names the run's protocol."""
        if self.cassette is None:
            return self
        return self.model_copy(update={"cassette": self.cassette.anchored(folder)})


__all__ = ["HOST_LOOPBACK_NAME", "CassetteTarget", "Emulator", "EmulatorTarget", "NoTarget", "Program",
           "ProgramTarget", "Remote", "RemoteTarget", "Replayed", "Runnable", "Surroundings", "Target",
           "TargetKind", "program_argv"]
