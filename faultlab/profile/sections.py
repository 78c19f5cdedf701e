"""A profile's sections beside its target and timeline: the client, the network, the microphone,
the capture and the field study's ranges."""

from __future__ import annotations

import ipaddress
import re
import sys
from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from faultlab.browser.spec import BrowserPage
from faultlab.lab import LABS
from faultlab.lab.base import Role
from faultlab.model import Duration, DurationRange, Model, one_of
from faultlab.targets import Program, program_argv


class Client(Program):
    """The user's client, run in the client namespace: a program, or a web page in the lab's
    headless Chromium (`browser`)."""

    browser: BrowserPage | None = None

    KINDS: ClassVar[tuple[str, ...]] = ("command", "builtin", "browser")

    @model_validator(mode="after")
    def _browser_alone(self) -> Client:
        if self.browser is not None and (self.image is not None or self.args):
            raise ValueError("a 'browser' client runs faultlab's Chromium on the host: it takes "
                             "no 'image' or 'args'")
        return self

    def argv(self, folder: Path) -> list[str]:
        """Its command line; a page's `serve` folder is relative to the profile's `folder`."""
        if self.browser is None:
            return program_argv(self)
        return [sys.executable, "-m", "faultlab.browser",
                self.browser.resolved(folder).model_dump_json()]


class Subnets(Model):
    """The lab's two links; each at least a /30 (router takes the first host, the end the second)."""

    client: ipaddress.IPv4Network
    server: ipaddress.IPv4Network

    @field_validator("client", "server")
    @classmethod
    def _room_for_two(cls, net: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
        if net.prefixlen > 30:
            raise ValueError("a link subnet needs room for two hosts: /30 or larger")
        return net


class Network(Model):
    """How the lab is built: `netns` (namespaces only) or `docker` (a member runs as a container
    wired into the same router); by default, docker where the client or the target names an
    image."""

    backend: str | None = None
    subnets: Subnets | None = None
    sysctl: dict[Role, dict[str, str | int]] = Field(default_factory=dict)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, name: str | None) -> str | None:
        return None if name is None else one_of("lab backend", name, LABS)

    @field_validator("sysctl")
    @classmethod
    def _sysctl_names(
        cls, value: dict[Role, dict[str, str | int]]
    ) -> dict[Role, dict[str, str | int]]:
        for settings in value.values():
            for name in settings:
                if not re.fullmatch(r"net\.[A-Za-z0-9_.]+", name):
                    raise ValueError(f"{name!r}: only per-namespace net.* sysctls can be set")
        return value

    def subnets_by_side(self) -> dict[str, ipaddress.IPv4Network]:
        """The subnets the profile gives, by the side of the router they are on."""
        if self.subnets is None:
            return {}
        return {"client": self.subnets.client, "server": self.subnets.server}


class Mic(Model):
    """The client's virtual microphone (`FAULTLAB_MIC`): what the user says, spoken by espeak-ng
    with `gap` of silence before each line; after the last, silence for `tail` then the end, or
    (no `tail`) silence for as long as the client listens."""

    utterances: list[str] = Field(min_length=1)
    gap: Duration = 0.5
    tail: Duration | None = None

    @field_validator("utterances")
    @classmethod
    def _spoken(cls, lines: list[str]) -> list[str]:
        if any(not line.strip() for line in lines):
            raise ValueError("an utterance needs words")
        return lines


class Capture(Model):
    """What the capture on the router's client-side link keeps (`capture.pcap`), and whether
    the router's link toward the target is captured too (`server.pcap`: what the server sent,
    including what a fault on the router dropped before it reached the client)."""

    pcap: bool = True
    server_pcap: bool = False
    snaplen_bytes: int = Field(default=262144, ge=96, le=262144)


class FieldRanges(Model):
    """What the field study measured for a scenario, in seconds from the first fault (as the
    suite's columns count): the bands the suite page draws behind each run's value, so that a
    regression is a run outside its band. Not an expectation: a run outside passes or fails by
    its `expect`."""

    detected: DurationRange | None = None
    resumed: DurationRange | None = None
    recovered: DurationRange | None = None

    def ranges(self) -> dict[str, tuple[float, float]]:
        """Each stated range by its suite column's heading."""
        return {k: v for k, v in self.model_dump().items() if v is not None}
