"""A program the lab runs: a `command`, a `builtin`, or an image's own command; the client is one,
and so is a target of this kind (in the server's namespace, listening on its `port`).

With `image`, the program runs as a container of that image (the docker lab): its argv are the
container's command line, and it gets faultlab's variables and its own, not faultlab's
environment.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from faultlab.model import Model, image_ref, one_of
from faultlab.peers import BUILTINS, builtin_command
from faultlab.targets.base import Surroundings, TargetKind


class Runnable(Model):
    """What the lab runs a program with, whatever says which program it is: `args`, `env`, and
    with `image`, a container of that image (whose own command runs when nothing else is
    given)."""

    image: str | None = None
    """Run the program as a container of this local Docker image (faultlab does not pull), in
    the docker lab; the image's own command runs when nothing else names a program."""
    args: list[str] = Field(default_factory=list)
    """Arguments after the program's command; in a container with no command given, in place of
    the image's CMD (as `docker run IMAGE ARGS`)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Variables added to the program's environment (in a container, over the image's own)."""
    pass_env: list[str] = Field(default_factory=list)
    """Variables taken from faultlab's own environment when the run starts (a container gets no
    other): a key such as `GOOGLE_API_KEY` is then never written in a profile."""

    @field_validator("image")
    @classmethod
    def _image_ref(cls, ref: str | None) -> str | None:
        return None if ref is None else image_ref(ref)

    @field_validator("pass_env")
    @classmethod
    def _variable_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not an environment variable's name")
        return names

    @property
    def runs_image_command(self) -> bool:
        """Nothing names a program: the image's own ENTRYPOINT runs, `args` its CMD."""
        return False


class Program(Runnable):
    """A command to run in the lab: either a `command` list or a `builtin` name, plus `args`;
    with `image`, run in a container of that image (whose own command runs when neither is
    given)."""

    command: list[str] | None = Field(default=None, min_length=1)
    """The command line to run (`[python, server.py]`); with `image`, it replaces the image's
    ENTRYPOINT and CMD."""
    builtin: str | None = None
    """A program faultlab ships, by name (`ws-echo-server`; docs/guide/builtins.md)."""

    KINDS: ClassVar[tuple[str, ...]] = ("command", "builtin")

    @property
    def runs_image_command(self) -> bool:
        return self.image is not None and self.command is None and self.builtin is None

    @model_validator(mode="after")
    def _one_program(self) -> Program:
        given = sum(getattr(self, k) is not None for k in self.KINDS)
        if given > 1 or (given == 0 and self.image is None):
            raise ValueError(f"give exactly one of {' or '.join(map(repr, self.KINDS))} (or an "
                             f"'image' with a command of its own)")
        if self.builtin is not None:
            one_of("builtin", self.builtin, BUILTINS)
        return self


def program_argv(program: Program) -> list[str]:
    """Its command line; in a container, empty or just `args` leaves the image's own command
    (as `docker run IMAGE ARGS` does)."""
    if program.runs_image_command:
        return list(program.args)
    base = list(program.command) if program.command else builtin_command(
        program.builtin or "", in_image=program.image is not None)
    return base + list(program.args)


class ProgramTarget(TargetKind):
    """The user's server (or a builtin peer), as a host process or a container of its image."""

    name: ClassVar[str] = "program"

    def __init__(self, program: Program, port: int | None) -> None:
        self.program = program
        self.port = port

    @property
    def listen_port(self) -> int:
        assert self.port is not None, "a program target's profile gives its port"
        return self.port

    def misfit(self) -> str | None:
        if self.port is None:
            return "'port' is required: the port the target listens on"
        return None

    def argv(self, run: Surroundings) -> list[str]:
        return program_argv(self.program)
