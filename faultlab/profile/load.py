"""A profile as written and as validated, and the checks that span its sections; every problem is
reported at once as `file:line: field: message`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from faultlab.errors import ProfileError
from faultlab.expect import Expectation, expectation_kinds
from faultlab.explore.space import Space, variants
from faultlab.faults import FAULTS, Need
from faultlab.lab import LABS, backend_for
from faultlab.model import Duration, Model, host_name, image_ref, validate_plain
from faultlab.plainyaml import load_mapping, read_bounded
from faultlab.problems import Problems
from faultlab.profile.sections import Capture, Client, FieldRanges, Mic, Network, Turn
from faultlab.profile.steps import RawStep, Step, check_fault, check_steps
from faultlab.protocols import Protocol as RealtimeApi
from faultlab.targets import NoTarget, RemoteTarget, Target, TargetKind
from faultlab.turn_urls import LISTENERS


class ProfileBase(Model):
    """The sections a profile gives that are taken as written: declared once, for the profile as
    written (`RawProfile`) and as validated (`Profile`)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)
    """The scenario's name: a letter or digit, then letters, digits, `.`, `_` or `-` (64 at
    most); it names the run folder."""
    description: str = ""
    """What the scenario is, in free text, shown in the run's summary."""
    network: Network = Network()
    """How the lab is built: its backend, the subnets of its links, sysctls per namespace."""
    target: Target | None = None
    """The server the client talks to; absent: the client talks to nothing faultlab starts."""
    client: Client
    """The program under test, run in the client namespace (or as a container of its `image`)."""
    hosts: list[str] = Field(default_factory=list)
    """Host names the client resolves to the target, beside the names the target's kind brings
    (an emulator's service names, a remote target's `host`)."""
    capture: Capture = Capture()
    """What the packet capture on the router's links keeps."""
    mic: Mic | None = None
    """The client's virtual microphone (`FAULTLAB_MIC`); absent: the client has none."""
    turn: Turn | None = None
    """A TURN server in the lab for the client's WebRTC (coturn), on the transports given;
    absent: none."""
    proxy: bool = False
    """Put mitmproxy in the router, in front of the target; it is started anyway for any
    app-level step (and to record the cassette of a target that records none itself)."""
    record: bool = False
    """Record the run's sessions as a cassette (`session.cassette.jsonl`): the target's own
    tape (the emulator's), else the proxy's."""
    timeout: Duration = 60.0
    """How long the client may run: it is stopped this long after it started (`run.timeout`)."""
    settle: Duration = 0.3
    """How long the run goes on after the client exits, so that the target and the capture report
    what its end caused, before expectations are judged and the lab is torn down."""
    field_ranges: FieldRanges = Field(default=FieldRanges(), alias="field")
    """What the field study measured for this scenario: the bands the suite page draws behind each
    run's times (not an expectation)."""
    explore: Space | None = None
    """What `faultlab explore` searches: where to place which faults; a run leaves it aside."""

    @field_validator("description")
    @classmethod
    def _stripped(cls, text: str) -> str:
        return text.strip()

    @field_validator("hosts")
    @classmethod
    def _host_names(cls, names: list[str]) -> list[str]:
        return [host_name(name) for name in names]


class RawProfile(ProfileBase):
    """A profile as written: its steps and expectations still to be checked by their faults and
    expectations."""

    timeline: list[RawStep] = Field(default_factory=list)
    """The steps: each fires at most once, when its trigger (`when`) does, and applies its fault
    (`do`)."""
    expect: list[dict[str, Any]] = Field(default_factory=list)
    """What the run must show to pass, each a mapping that starts with its kind's key
    (`exit_code`, `event`, `count`, ...), judged on what happened before teardown began."""


class Profile(ProfileBase):
    """A validated profile, with its lab backend decided."""

    path: Path | None = None
    timeline: tuple[Step, ...] = ()
    expect: tuple[Expectation, ...] = ()

    @property
    def remote(self) -> RemoteTarget | None:
        """The target, when it is a service outside the lab."""
        return None if self.target is None else self.target.remote

    @property
    def target_kind(self) -> TargetKind:
        """What the run needs of its target (`NoTarget` when it has none)."""
        return NoTarget() if self.target is None else self.target.kind

    @property
    def protocol(self) -> RealtimeApi:
        """The realtime API of the run: its target's (Gemini Live when it has none)."""
        return self.target_kind.protocol

    @property
    def backend(self) -> str:
        """The lab backend (decided when the profile is parsed)."""
        return self.network.backend or backend_for(images=False)

    @property
    def _proxy_records(self) -> bool:
        """Whether the proxy records the run's cassette: the target does not record itself."""
        return self.record and self.target is not None and not self.target.kind.records

    @property
    def needs(self) -> frozenset[Need]:
        """What the run starts: whatever a step's fault needs, and what the profile asks for."""
        asked: set[Need] = {"proxy"} if self.proxy or self._proxy_records else set()
        asked |= {"mic"} if self.mic is not None else set()
        asked |= {"turn"} if self.turn is not None else set()
        return frozenset(asked).union(*(s.needs for s in self.timeline))


# Why a profile cannot give what a fault needs, if it cannot.
PROVIDERS: dict[Need, tuple[str, str]] = {
    "proxy": ("target", "needs the proxy, which stands in front of a target: give the profile a "
                        "'target'"),
    "mic": ("mic", "acts on the lab's microphone: give the profile a 'mic'"),
    "dns": ("target", "answers for the target's names with the lab's resolver: give the profile "
                      "a 'target'"),
    "turn": ("turn", "acts on the lab's TURN server: give the profile a 'turn'"),
}


def parse_profile(text: str | bytes, source: str = "<profile>", path: Path | None = None) -> Profile:
    """Validate a profile's YAML; every problem is reported as `source:line: field: message`."""
    data, problems = load_mapping(text, source,
                                  "a profile is a YAML mapping with at least 'name' and 'client'")
    try:
        raw = validate_plain(RawProfile, data)
    except ValidationError as exc:
        problems.add_validation((), exc, data)
        _check_parts(data, problems)
        problems.fail()
    if raw.target is not None:  # the files it names, from the profile's folder
        raw = raw.model_copy(update={"target": raw.target.anchored(
            path.parent if path else Path.cwd())})
    steps = check_steps(raw.timeline, problems)
    if raw.explore is not None:
        variants(raw.explore.faults, problems)
    network = _check_backend(raw, problems)
    _check_needs(raw, steps, problems)
    _check_target(raw, path, problems)
    expectations = _check_expectations(raw.expect, problems)
    problems.raise_if_any()
    # Its parts are validated: taken as they are, not validated again.
    return Profile.model_construct(**{
        **{name: getattr(raw, name) for name in ProfileBase.model_fields},
        "network": network, "path": path, "timeline": tuple(steps), "expect": tuple(expectations),
    })


def _check_parts(data: dict[str, Any], problems: Problems) -> None:
    """When the outer model fails, still check steps and expectations that parsed as mappings."""
    timeline = data.get("timeline")
    if isinstance(timeline, list):
        for i, step in enumerate(timeline):
            if isinstance(step, dict) and isinstance(step.get("do"), dict):
                check_fault(i, step["do"], problems)
    expect = data.get("expect")
    if isinstance(expect, list):
        _check_expectations([e for e in expect if isinstance(e, dict)], problems)


def _check_backend(raw: RawProfile, problems: Problems) -> Network:
    """The network with its backend decided: the backend that runs containers where a member
    names an image, else the one that runs none."""
    imaged = [role for role, program in (("client", raw.client), ("target", raw.target))
              if program is not None and program.image is not None]
    backend = raw.network.backend or backend_for(images=bool(imaged))
    if imaged and not LABS[backend].runs_images:
        problems.add(("network", "backend"), f"the {imaged[0]} runs in a container (it names an "
                     f"'image'): the lab is then {backend_for(images=True)!r} (or leave 'backend' "
                     f"out)")
    if LABS[backend].runs_images and not imaged:
        problems.add(("network", "backend"), f"the {backend} lab runs a member as a container: "
                     "give the client (or the target) an 'image'")
    return raw.network.model_copy(update={"backend": backend})


def recording(profile: Profile) -> Profile:
    """`profile` recording its sessions as a cassette (`faultlab run --record`); ProfileError
    when it has no target to record."""
    if profile.target is None:
        raise ProfileError([f"{profile.path or '<profile>'}: record: a cassette records a "
                            "target's side of the session: this profile has no 'target'"])
    return profile.model_copy(update={"record": True})


def with_client_image(profile: Profile, image: str) -> Profile:
    """`profile` with its client run as a container of `image` (`faultlab run --client-image`):
    the same command or builtin, in the image."""
    client = profile.client.model_copy(update={"image": image_ref(image)})
    network = profile.network.model_copy(update={"backend": backend_for(images=True)})
    return profile.model_copy(update={"client": client, "network": network})


def _check_needs(raw: RawProfile, steps: Sequence[Step], problems: Problems) -> None:
    """Every step's needs can be met, and frame triggers have a frame log to follow: the proxy's,
    or else the target's own (the emulator's)."""
    proxy = raw.proxy or any("proxy" in s.needs for s in steps)
    target_log = raw.target is not None and raw.target.kind.frame_log is not None
    if raw.proxy and raw.target is None:
        problems.add(("proxy",), "the proxy stands in front of a target: give the profile a "
                     "'target'")
    if raw.record and raw.target is None:
        problems.add(("record",), "a cassette records a target's side of the session: give "
                     "the profile a 'target'")
    proxy = proxy or (raw.record and raw.target is not None and not raw.target.kind.records)
    for i, step in enumerate(steps):
        for need in sorted(step.needs):
            field, why = PROVIDERS[need]
            if getattr(raw, field) is None:
                problems.add(("timeline", i, "do", "fault"), f"{step.fault} {why}")
            elif need == "dns" and not (raw.hosts or (raw.target and raw.target.kind.dns_names())):
                problems.add(("timeline", i, "do", "fault"), f"{step.fault} acts on the names the "
                             "client looks the target up by, and this client reaches it by its "
                             "address: give the profile 'hosts' (names that resolve to the "
                             "target) and have the client use them")
        unworkable = FAULTS[step.fault].proxy_problem(step.params) if proxy else None
        if unworkable is not None:
            problems.add(("timeline", i, "do", "fault"), f"{step.fault} {unworkable}")
        if step.when.frame is not None and not (proxy or target_log):
            problems.add(("timeline", i, "when", "frame"),
                         "a frame trigger follows the proxy's frame log (proxy: true, or a fault "
                         "that lives in the proxy) or an emulator target's")


def _check_target(raw: RawProfile, path: Path | None, problems: Problems) -> None:
    """What the target's kind finds that does not go with it in the rest of the profile."""
    if raw.target is None:
        return
    folder = path.parent if path else Path.cwd()
    for loc, message in raw.target.kind.profile_problems(
            raw.hosts, raw.network.sysctl, raw.network.subnets_by_side(), folder):
        problems.add(loc, message)
    if raw.turn is not None and raw.target.kind.in_lab:
        # Both listen on the server's address over TCP: one of them could not, or the target's
        # readiness would be the TURN server's.
        taken = {port for name, (_, port, carrier) in LISTENERS.items()
                 if getattr(raw.turn, name) and carrier == "tcp"}
        if raw.target.listen_port in taken:
            problems.add(("target", "port"), f"{raw.target.listen_port} is the lab's TURN "
                         f"server's port (the profile's 'turn'): give the target another one")


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
            out.append(validate_plain(kinds[kind], item))
        except ValidationError as exc:
            problems.add_validation(("expect", i), exc, item)
    return out


def load_profile(path: str | Path) -> Profile:
    """Read and validate one profile file."""
    p = Path(path)
    try:
        content = read_bounded(p)
    except OSError as exc:
        raise ProfileError([f"{p}:0: (profile): cannot read: {exc.strerror or exc}"]) from None
    return parse_profile(content, str(p), p)
