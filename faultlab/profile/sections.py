"""A profile's sections beside its target and timeline: the client (of an installed kind,
faultlab.profile.client_kinds), the network, the microphone, the TURN server, the capture and the
field study's ranges."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

from faultlab.clients.kind import ClientKind
from faultlab.lab import LABS
from faultlab.lab.base import Role
from faultlab.model import Duration, DurationRange, Model, one_of
from faultlab.profile.client_kinds import client_kinds
from faultlab.targets.program import Runnable


class Client(Runnable):
    """The user's client, run in the client namespace, declared by its kind's key: `command`,
    `builtin`, `browser` (a web page in the lab's headless Chromium) or an installed plugin's
    (faultlab.clients.kind); with only an `image`, the image's own command."""

    kind: str | None = None
    setting: Any = None  # the value of its kind's key, as the kind validated it

    @model_validator(mode="before")
    @classmethod
    def _declared(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        kinds = client_kinds()
        if data.get("kind") in kinds and "setting" in data:  # a validated client's dump
            data = {k: v for k, v in data.items() if k not in ("kind", "setting")} | {
                data["kind"]: data["setting"]}
        given = [key for key in data if key in kinds]
        unknown = [key for key in data if key not in cls.model_fields]
        if not given and unknown:
            raise ValueError(f"unknown client kind {unknown[0]!r}; installed kinds: "
                             f"{', '.join(sorted(kinds))} (faultlab.clients entry points)")
        if len(given) > 1 or (not given and data.get("image") is None):
            raise ValueError(f"give exactly one of {' or '.join(map(repr, kinds))} (or an "
                             "'image' with a command of its own)")
        if not given:
            return data
        rest = {k: v for k, v in data.items() if k != given[0]}
        return {**rest, "kind": given[0], "setting": validated(kinds[given[0]], data[given[0]])}

    @model_validator(mode="after")
    def _fits_its_kind(self) -> Client:
        kind = self.client_kind
        misfit = None if kind is None else kind.misfit(self.setting, self)
        if misfit is not None:
            raise ValueError(misfit)
        return self

    @property
    def client_kind(self) -> ClientKind | None:
        """Its kind (None: an image's own command)."""
        return None if self.kind is None else client_kinds()[self.kind]

    @property
    def runs_image_command(self) -> bool:
        return self.kind is None

    def argv(self, folder: Path) -> list[str]:
        """Its command line; relative paths it names start from the profile's `folder`."""
        kind = self.client_kind
        return list(self.args) if kind is None else kind.argv(self.setting, self, folder)


def validated(kind: ClientKind, value: Any) -> Any:
    """`value` as the kind's type; a ValidationError's places under the kind's key."""
    try:
        return TypeAdapter(kind.setting).validate_python(value)
    except ValidationError as exc:
        raise ValidationError.from_exception_data(exc.title, [
            {"type": e["type"], "loc": (kind.name, *e["loc"]), "input": e["input"],
             **({"ctx": e["ctx"]} if "ctx" in e else {})}  # type: ignore[typeddict-item]
            for e in exc.errors(include_url=False)]) from None


class Subnets(Model):
    """The lab's two links; each at least a /30 (router takes the first host, the end the second)."""

    client: ipaddress.IPv4Network
    """The client link's subnet (`198.19.200.0/30`): the router takes its first host, the client
    the second."""
    server: ipaddress.IPv4Network
    """The server link's subnet: the router takes its first host, the target the second."""

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
    """The lab backend: `netns` (namespaces only) or `docker` (a member runs as a container);
    absent: `docker` where the client or the target names an `image`, else `netns`."""
    subnets: Subnets | None = None
    """The subnets of the lab's two links; absent: picked from 198.18.0.0/15."""
    sysctl: dict[Role, dict[str, str | int]] = Field(default_factory=dict)
    """`net.*` sysctls set in a namespace, by its role (`client`, `router`, `server`):
    `{server: {net.ipv4.tcp_retries2: 5}}`."""

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
    """What the user says, in order, each spoken by espeak-ng (16 kHz)."""
    gap: Duration = 0.5
    """The silence before each utterance."""
    tail: Duration | None = None
    """The silence after the last utterance, then the end of the stream; absent: silence for as
    long as the client listens."""

    @field_validator("utterances")
    @classmethod
    def _spoken(cls, lines: list[str]) -> list[str]:
        if any(not line.strip() for line in lines):
            raise ValueError("an utterance needs words")
        return lines


class Turn(Model):
    """A TURN server (coturn) in the server's namespace, for the client's WebRTC: on the server's
    address, port 3478 for UDP and TCP, 5349 for TLS (its certificate from the run's CA), which
    a target in the lab may not listen on. The client and every target in the lab get its URLs
    and credentials (`FAULTLAB_TURN_URLS`, `FAULTLAB_TURN_USERNAME`, `FAULTLAB_TURN_CREDENTIAL`:
    an app's server hands them to its page); the transports it listens on are these. What it
    logs of its sessions is on the run's timeline: `turn.allocation`, `turn.refused`,
    `turn.closed`."""

    udp: bool = True
    """Listen on UDP (`turn:ADDRESS:3478?transport=udp`)."""
    tcp: bool = True
    """Listen on TCP (`turn:ADDRESS:3478?transport=tcp`): what a client falls back to where UDP
    is blocked."""
    tls: bool = True
    """Listen on TLS (`turns:ADDRESS:5349?transport=tcp`)."""

    @model_validator(mode="after")
    def _listens(self) -> Turn:
        if not (self.udp or self.tcp or self.tls):
            raise ValueError("a TURN server needs at least one of udp, tcp and tls")
        return self


class Capture(Model):
    """What the capture on the router's client-side link keeps (`capture.pcap`), and whether
    the router's link toward the target is captured too (`server.pcap`: what the server sent,
    including what a fault on the router dropped before it reached the client)."""

    pcap: bool = True
    """Keep the capture of the router's link toward the client in `capture.pcap` (`false`: it is
    still watched, for the connections' numbers and TCP events, but not saved)."""
    server_pcap: bool = False
    """Also capture the router's link toward the target (the uplink for a remote one) in
    `server.pcap`: what the server sent, even where a fault on the router dropped it."""
    snaplen_bytes: int = Field(default=262144, ge=96, le=262144)
    """How many bytes of each packet the captures keep: 96 to 262144 (the default: whole
    packets)."""


class FieldRanges(Model):
    """What the field study measured for a scenario, in seconds from the first fault (as the
    suite's columns count): the bands the suite page draws behind each run's value, so that a
    regression is a run outside its band. Not an expectation: a run outside passes or fails by
    its `expect`."""

    detected: DurationRange | None = None
    """When the client detected the loss (`client.lost`), from the first fault: `2.0-2.5s`."""
    resumed: DurationRange | None = None
    """When the session resumed (`resume.ok`), from the first fault: `3.1-3.4s`."""
    recovered: DurationRange | None = None
    """When the model's first output after the loss came (`client.recovered`), from the first
    fault: `6.1-7.1s`."""

    def ranges(self) -> dict[str, tuple[float, float]]:
        """Each stated range by its suite column's heading."""
        return {k: v for k, v in self.model_dump().items() if v is not None}
