"""Profiles: the YAML that declares a run, validated into models with errors at file:line: field.

A profile names the target and the client, the network, a timeline of faults and the expectations.
Faults (`do: {fault: drop, ...}`) and expectations are validated by the models their own modules
register, so adding either never touches this file.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, ValidationError, field_validator, model_validator

from faultlab.emulator.personality import DEFAULT_PERSONALITY, PERSONALITIES, personality_with
from faultlab.errors import LabError, ProfileError
from faultlab.expect import Expectation, expectation_kinds
from faultlab.faults import FAULTS, FaultParams, Need
from faultlab.frames import FrameMatch
from faultlab.lab import LABS
from faultlab.lab.base import Role
from faultlab.lab.uplink import NETWORK as UPLINK_NETWORK
from faultlab.model import Duration, DurationRange, Model
from faultlab.peers import BUILTINS
from faultlab.plainyaml import load_mapping, read_bounded
from faultlab.problems import Loc, Problems, message_of

# A remote target's `address` for this machine's own 127.0.0.1, through the uplink.
HOST_LOOPBACK = "host-loopback"
STEP_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,23}$")
# A Docker image reference: [registry[:port]/]name[/name...][:tag][@sha256:digest].
IMAGE_REF = re.compile(r"^([A-Za-z0-9.-]+(:\d+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*"
                       r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")


def one_of(what: str, name: str, known: Collection[str]) -> str:
    """`name`, if it is one of `known`; else the error that lists them."""
    if name not in known:
        raise ValueError(f"unknown {what} {name!r}; known: {', '.join(sorted(known))}")
    return name


def host_name(name: str) -> str:
    """`name`, if it is a DNS host name; else the error that says so."""
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?", name):
        raise ValueError(f"{name!r} is not a host name")
    return name


def image_ref(ref: str) -> str:
    """`ref`, if it is a Docker image reference; else the error that says so."""
    if len(ref) > 255 or not IMAGE_REF.match(ref):
        raise ValueError(f"{ref!r} is not an image reference (name[:tag], lowercase)")
    return ref


class Program(Model):
    """A command to run in the lab: either a `command` list or a `builtin` name, plus `args`;
    with `image`, run in a container of that image (whose own command runs when neither is
    given)."""

    command: list[str] | None = Field(default=None, min_length=1)
    builtin: str | None = None
    image: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    # Variables taken from faultlab's own environment when the run starts (a container gets no
    # other): a key such as GOOGLE_API_KEY is then never written in a profile.
    pass_env: list[str] = Field(default_factory=list)

    KINDS: ClassVar[tuple[str, ...]] = ("command", "builtin")

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
        """Neither a command nor a builtin: the image's own ENTRYPOINT runs, `args` its CMD."""
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


class EmulatorTarget(Model):
    """faultlab's Live API emulator as the target (`faultlab emulator serve` in the server ns)."""

    personality: str = DEFAULT_PERSONALITY
    time_scale: float = Field(default=1.0, gt=0)
    utterances: Path | None = None
    seed: int | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)

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


class RemoteTarget(Model):
    """A service outside the lab (the real Live API), reached through the router's uplink: the
    client resolves `host` with DNS, or to `address` when given (`host-loopback`: a service on
    this machine's 127.0.0.1, standing in for a remote one); `ca` is a CA certificate (PEM) that
    issued the service's certificate, trusted beside the system's."""

    host: str
    port: int = Field(default=443, ge=1, le=65535)
    address: str | None = None
    ca: Path | None = None

    @field_validator("host")
    @classmethod
    def _host_name(cls, name: str) -> str:
        return host_name(name)

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is None or value == HOST_LOOPBACK:
            return value
        try:
            address = ipaddress.IPv4Address(value)
        except ValueError:
            raise ValueError(f"{value!r}: an IPv4 address, or {HOST_LOOPBACK!r}") from None
        if address.is_loopback:
            raise ValueError(f"{value}: the lab has its own loopback; a service on this "
                             f"machine's is {HOST_LOOPBACK!r}")
        return value


class Target(Program):
    """The server the client talks to: a command, a builtin or the emulator, run in the server
    namespace (the emulator listens on 443 unless `port` says otherwise), or a `remote` service
    outside the lab."""

    emulator: EmulatorTarget | None = None
    remote: RemoteTarget | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    ready_timeout: Duration = 5.0
    KINDS: ClassVar[tuple[str, ...]] = ("command", "builtin", "emulator", "remote")

    @model_validator(mode="after")
    def _port(self) -> Target:
        if self.port is None and self.emulator is None and self.remote is None:
            raise ValueError("'port' is required: the port the target listens on")
        if self.emulator is not None and self.image is not None:
            raise ValueError("the emulator is faultlab's own program: it takes no 'image'")
        if self.remote is not None:
            extra = [k for k in ("image", "port", "args", "env", "pass_env") if getattr(self, k)]
            if extra:
                raise ValueError(f"a remote target runs nothing in the lab: its port goes in "
                                 f"'remote', and it takes no {extra[0]!r}")
        return self

    @property
    def listen_port(self) -> int:
        """The port the client connects to."""
        if self.remote is not None:
            return self.remote.port
        return self.port or 443


class Client(Program):
    """The user's client, run in the client namespace."""


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


class Trigger(Model):
    """When a step fires: at a time since the client started, after another step, on an event,
    on the k-th connection, or on a WebSocket message (`frame`)."""

    at: Duration | None = None
    step: str | None = None
    event: str | None = None
    where: dict[str, Any] = Field(default_factory=dict)
    connection: int | None = Field(default=None, ge=1)
    frame: FrameMatch | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Trigger:
        kinds = [k for k in ("at", "step", "event", "connection", "frame")
                 if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of 'at', 'step', 'event', 'connection' or 'frame'")
        if self.where and self.event is None:
            raise ValueError("'where' goes with 'event'")
        return self

    def describe(self) -> str:
        if self.at is not None:
            return f"at {self.at:g}s"
        if self.step is not None:
            return f"after step {self.step}"
        if self.event is not None:
            where = ", ".join(f"{k}={v!r}" for k, v in self.where.items())
            return f"on {self.event}" + (f"({where})" if where else "")
        if self.frame is not None:
            return f"on frame {self.frame.describe()}"
        return f"on connection #{self.connection}"


class RawStep(Model):
    """A timeline step as written; `do` is checked by the fault it names."""

    id: str | None = None
    when: Trigger
    after: Duration = 0.0
    do: dict[str, Any]

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str | None) -> str | None:
        if value is not None and not STEP_ID.match(value):
            raise ValueError("a step id is a letter then up to 23 letters, digits, '_' or '-'")
        return value


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


class RawProfile(Model):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)
    description: str = ""
    network: Network = Network()
    target: Target | None = None
    client: Client
    hosts: list[str] = Field(default_factory=list)
    timeline: list[RawStep] = Field(default_factory=list)
    capture: Capture = Capture()
    mic: Mic | None = None
    proxy: bool = False  # also started for any app-level step
    expect: list[dict[str, Any]] = Field(default_factory=list)
    timeout: Duration = 60.0
    settle: Duration = 0.3
    field_ranges: FieldRanges = Field(default=FieldRanges(), alias="field")

    @field_validator("hosts")
    @classmethod
    def _host_names(cls, names: list[str]) -> list[str]:
        return [host_name(name) for name in names]


@dataclass(frozen=True)
class Step:
    """A validated timeline step: when it fires, how long after, and the fault it applies."""

    id: str
    when: Trigger
    after: float
    fault: str
    params: FaultParams

    @property
    def needs(self) -> frozenset[Need]:
        return FAULTS[self.fault].needs


@dataclass(frozen=True)
class Profile:
    """A validated profile."""

    path: Path | None
    name: str
    description: str
    network: Network
    target: Target | None
    client: Client
    hosts: tuple[str, ...]
    timeline: tuple[Step, ...]
    capture: Capture
    mic: Mic | None
    proxy: bool
    expect: tuple[Expectation, ...]
    timeout: float
    settle: float
    field_ranges: FieldRanges

    @property
    def remote(self) -> RemoteTarget | None:
        """The target, when it is a service outside the lab."""
        return None if self.target is None else self.target.remote

    @property
    def backend(self) -> str:
        """The lab backend (decided when the profile is parsed)."""
        return self.network.backend or "netns"

    @property
    def needs(self) -> frozenset[Need]:
        """What the run starts: whatever a step's fault needs, and what the profile asks for."""
        asked: set[Need] = {"proxy"} if self.proxy else set()
        asked |= {"mic"} if self.mic is not None else set()
        return frozenset(asked).union(*(s.needs for s in self.timeline))


# Why a profile cannot give what a fault needs, if it cannot.
PROVIDERS: dict[Need, tuple[str, str]] = {
    "proxy": ("target", "needs the proxy, which stands in front of a target: give the profile a "
                        "'target'"),
    "mic": ("mic", "acts on the lab's microphone: give the profile a 'mic'"),
}


def parse_profile(text: str | bytes, source: str = "<profile>", path: Path | None = None) -> Profile:
    """Validate a profile's YAML; every problem is reported as `source:line: field: message`."""
    data, problems = load_mapping(text, source,
                                  "a profile is a YAML mapping with at least 'name' and 'client'")
    try:
        raw = RawProfile.model_validate(data)
    except ValidationError as exc:
        problems.add_validation((), exc)
        _check_parts(data, problems)
        problems.fail()
    steps = _check_steps(raw.timeline, problems)
    network = _check_backend(raw, problems)
    _check_needs(raw, steps, problems)
    _check_remote(raw, path, problems)
    expectations = _check_expectations(raw.expect, problems)
    problems.raise_if_any()
    return Profile(
        path=path, name=raw.name, description=raw.description.strip(), network=network,
        target=raw.target, client=raw.client, hosts=tuple(raw.hosts), timeline=tuple(steps),
        capture=raw.capture, mic=raw.mic, proxy=raw.proxy, expect=tuple(expectations),
        timeout=raw.timeout,
        settle=raw.settle,
        field_ranges=raw.field_ranges,
    )


def _check_parts(data: dict[str, Any], problems: Problems) -> None:
    """When the outer model fails, still check steps and expectations that parsed as mappings."""
    timeline = data.get("timeline")
    if isinstance(timeline, list):
        for i, step in enumerate(timeline):
            if isinstance(step, dict) and isinstance(step.get("do"), dict):
                _check_fault(i, step["do"], problems)
    expect = data.get("expect")
    if isinstance(expect, list):
        _check_expectations([e for e in expect if isinstance(e, dict)], problems)


def _check_fault(index: int, do: dict[str, Any], problems: Problems) -> tuple[str, FaultParams] | None:
    loc: Loc = ("timeline", index, "do")
    name = do.get("fault")
    if not isinstance(name, str):
        problems.add((*loc, "fault"), f"name a fault: one of {', '.join(sorted(FAULTS))}")
        return None
    fault = FAULTS.get(name)
    if fault is None:
        problems.add((*loc, "fault"), f"unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}")
        return None
    try:
        params = fault.Params.model_validate({k: v for k, v in do.items() if k != "fault"})
    except ValidationError as exc:
        problems.add_validation(loc, exc)
        return None
    return name, params


def _check_steps(raw_steps: Iterable[RawStep], problems: Problems) -> list[Step]:
    steps: list[Step] = []
    raw_list = list(raw_steps)
    ids = [s.id or f"step{i + 1}" for i, s in enumerate(raw_list)]
    for i, step_id in enumerate(ids):
        if ids.index(step_id) != i:
            problems.add(("timeline", i, "id"), f"step id {step_id!r} is used twice")
    for i, raw in enumerate(raw_list):
        if raw.when.step is not None and raw.when.step not in ids:
            problems.add(("timeline", i, "when", "step"), f"no step has the id {raw.when.step!r}")
        if raw.when.step == ids[i]:
            problems.add(("timeline", i, "when", "step"), "a step cannot wait for itself")
        checked = _check_fault(i, raw.do, problems)
        if checked is None:
            continue
        name, params = checked
        frame = raw.when.frame
        if frame is not None and frame.reads_content and "proxy" not in FAULTS[name].needs:
            problems.add(("timeline", i, "when", "frame"),
                         "'forward: before', 'equals' and 'regex' need a fault that lives in the "
                         "proxy (the proxy fires those); others follow a frame's kind only")
        if frame is not None and frame.forward == "before" and raw.after > 0:
            problems.add(("timeline", i, "after"), "'forward: before' acts on the message itself,"
                         " before it is relayed: it cannot wait 'after' it")
        for ref in params.referenced_steps():
            if ref not in ids:
                problems.add(("timeline", i, "do"), f"no step has the id {ref!r}")
        steps.append(Step(ids[i], raw.when, raw.after, name, params))
    return steps


def _check_backend(raw: RawProfile, problems: Problems) -> Network:
    """The network with its backend decided: docker where a member names an image."""
    imaged = [role for role in ("client", "target")
              if getattr(getattr(raw, role), "image", None) is not None]
    backend = raw.network.backend or ("docker" if imaged else "netns")
    if imaged and backend != "docker":
        problems.add(("network", "backend"), f"the {imaged[0]} runs in a container (it names an "
                     "'image'): the lab is then 'docker' (or leave 'backend' out)")
    if backend == "docker" and not imaged:
        problems.add(("network", "backend"), "the docker lab runs a member as a container: give "
                     "the client (or the target) an 'image'")
    return raw.network.model_copy(update={"backend": backend})


def with_client_image(profile: Profile, image: str) -> Profile:
    """`profile` with its client run as a container of `image` (`faultlab run --client-image`):
    the same command or builtin, in the image."""
    client = profile.client.model_copy(update={"image": image_ref(image)})
    return replace(profile, client=client,
                   network=profile.network.model_copy(update={"backend": "docker"}))


def _check_needs(raw: RawProfile, steps: Sequence[Step], problems: Problems) -> None:
    """Every step's needs can be met, and frame triggers have a frame log to follow: the proxy's,
    or else an emulator target's."""
    proxy = raw.proxy or any("proxy" in s.needs for s in steps)
    emulator = raw.target is not None and raw.target.emulator is not None
    if raw.proxy and raw.target is None:
        problems.add(("proxy",), "the proxy stands in front of a target: give the profile a "
                     "'target'")
    for i, step in enumerate(steps):
        for need in sorted(step.needs):
            field, why = PROVIDERS[need]
            if getattr(raw, field) is None:
                problems.add(("timeline", i, "do", "fault"), f"{step.fault} {why}")
        if step.when.frame is not None and not (proxy or emulator):
            problems.add(("timeline", i, "when", "frame"),
                         "a frame trigger follows the proxy's frame log (proxy: true, or a fault "
                         "that lives in the proxy) or an emulator target's")


def _check_remote(raw: RawProfile, path: Path | None, problems: Problems) -> None:
    """A remote target's CA is a readable certificate, and the lab's names and addresses leave
    room for the uplink's."""
    remote = raw.target.remote if raw.target is not None else None
    if remote is None:
        return
    if remote.address is None and raw.hosts:
        problems.add(("hosts",), "the names in 'hosts' resolve to the target's address: give the "
                     "remote target an 'address' (without one, the client asks DNS)")
    if "server" in raw.network.sysctl:
        problems.add(("network", "sysctl", "server"), "a remote target runs outside the lab: "
                     "there is no server namespace to set")
    subnets = raw.network.subnets
    if subnets is not None:
        for side in ("client", "server"):
            if getattr(subnets, side).overlaps(UPLINK_NETWORK):
                problems.add(("network", "subnets", side), f"the uplink to a remote target "
                             f"uses {UPLINK_NETWORK}: pick a subnet outside it")
    if remote.ca is not None:
        from faultlab.tls import ca_certificates

        try:
            ca_certificates((path.parent if path else Path.cwd()) / remote.ca)
        except LabError as exc:
            problems.add(("target", "remote", "ca"), str(exc))


def unset_pass_env(profile: Profile) -> list[str]:
    """One `file: role.pass_env: ...` line for each variable a program takes from faultlab's
    environment that is not set there (checked when a run starts, not when a profile is
    validated: a CI job validates profiles without the keys)."""
    source = str(profile.path or "<profile>")
    return [f"{source}: {role}.pass_env: {name} is not set in faultlab's environment"
            for role, program in (("client", profile.client), ("target", profile.target))
            if program is not None for name in program.pass_env if name not in os.environ]


def _check_expectations(raw: list[dict[str, Any]], problems: Problems) -> list[Expectation]:
    out: list[Expectation] = []
    kinds = expectation_kinds()
    for i, item in enumerate(raw):
        kind = next((k for k in item if k in kinds), None)
        if kind is None:
            problems.add(("expect", i), f"an expectation starts with one of: {', '.join(kinds)}")
            continue
        try:
            out.append(kinds[kind].model_validate(item))
        except ValidationError as exc:
            problems.add_validation(("expect", i), exc)
    return out


def load_profile(path: str | Path) -> Profile:
    """Read and validate one profile file."""
    p = Path(path)
    try:
        content = read_bounded(p)
    except OSError as exc:
        raise ProfileError([f"{p}:0: (profile): cannot read: {exc.strerror or exc}"]) from None
    return parse_profile(content, str(p), p)
