"""Personalities: the measured behaviour of one real service, as data.

Every timing is a range `(low, high)` in seconds of the real service (the emulator draws uniformly
from it and multiplies by its time scale); every behaviour is a named switch. Numbers come from
`docs/live-server-behaviour.md` (its item ids are quoted); change them when the service changes.

A personality file (YAML) changes a built-in one: `base: NAME`, then the fields it changes, as
`faultlab calibrate --out` writes them from what it measured; `emulator serve --personality FILE`
serves it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from faultlab.model import Model
from faultlab.plainyaml import load_mapping, read_bounded
from faultlab.plugins import View
from faultlab.problems import Problems, message_of
from faultlab.protocols import DEFAULT, DEFAULT_API, api_named, apis
from faultlab.scenarios import pack_named


def _ordered(span: tuple[float, float]) -> tuple[float, float]:
    if span[0] > span[1]:
        raise ValueError(f"the low end {span[0]:g} is above the high end {span[1]:g}")
    return span


def _installed(scenario: str | None) -> str | None:
    if scenario is not None:
        pack_named(scenario)  # ValueError: not installed
    return scenario


Seconds = Annotated[float, Field(ge=0)]
Range = Annotated[tuple[Seconds, Seconds], AfterValidator(_ordered)]
INTERNAL_ERROR = "Internal error encountered."
INVALID_ARGUMENT = "Request contains an invalid argument."


class ServedModel(Model):
    """A family of model names the service serves (or has retired), and how they behave."""

    pattern: str  # an fnmatch glob on the model's id, the part after the last "models/"
    modalities: tuple[Literal["AUDIO", "TEXT"], ...] = ("AUDIO", "TEXT")
    # How a function declaration without `behavior` is treated.
    default_behavior: Literal["BLOCKING", "NON_BLOCKING"] = "BLOCKING"
    retired: bool = False  # once served: closed 1008 like an unknown name (S6)


# The Live models of 2026, by family; first match wins. Retired names get the same 1008 as
# names that never existed (S6).
LIVE_MODELS = (
    ServedModel(pattern="gemini-2.0-flash-live*", retired=True),
    ServedModel(pattern="gemini-*native-audio*", modalities=("AUDIO",)),  # S4: speaks only
    ServedModel(pattern="gemini-live-*"),
    ServedModel(pattern="gemini-*-live*"),
)


class Personality(Model):
    """How one flavour of a realtime API behaves. Its defaults are Gemini Live's Developer API's
    measured figures, the baseline every other personality states its differences from."""

    name: str
    # The API it speaks (an installed `faultlab.apis` plugin), and which of that API's flavours
    # (its dialect, one of `Protocol.dialects`: the routes it serves, what differs on the wire).
    protocol: str = DEFAULT.name
    api: str
    setup_complete_s: Range = (0.246, 0.351)  # S1, fresh session
    resumed_setup_complete_s: Range = (0.507, 0.668)  # S2
    resumption_update_s: Range = (0.110, 0.150)  # U1, after setupComplete (fresh)
    resumed_resumption_update_s: Range = (0.0, 0.002)  # U1, resumed
    transparent_resumption: bool = False  # S3: the Developer API refuses it with 1007
    invalid_argument_s: Range = (0.040, 0.050)  # S3: 1007 about 44 ms after setup
    refusal_s: Range = (0.472, 0.704)  # R1, L2: a refused resume closes 1011 after this
    # R1/R2: a resume within this long of a drop is refused when the model was idle and had been
    # active shortly before the drop (`release_after_activity_s`); R3: never while speaking.
    release_window_s: float = 1.5
    release_after_activity_s: float = 10.0
    tcp_timeout_keeps_lock: bool = True  # L8: the server's TCP gave up; the session stays locked
    reap_after_s: float = 480.0  # L7: a connection silent this long is closed 1011, handle dead
    # S5: a resume of a reaped or expired session's handle is refused 1011, or (this share of the
    # attempts; 4 of 18 in P4) never answered. A handle that never existed: 1007 (a guess).
    dead_handle_silent: float = Field(default=0.22, ge=0.0, le=1.0)
    handle_ttl_s: float = 7200.0  # documented: 2 hours after the last session ends
    connection_lifetime_s: float | None = None  # None: no goAway, ever (L9)
    go_away_before_s: float = 60.0
    models: tuple[ServedModel, ...] = LIVE_MODELS  # S4, S6: anything else is closed 1008
    unknown_model: str = ("{model} is not found for API version v1beta, or is not supported for "
                          "bidiGenerateContent.")
    audio_stream_end_ends_turn: bool = True  # A2 measured on Vertex: it does not
    activity_start_s: Range = (0.139, 0.261)  # T1, after the first speech chunk
    vad_silence_ms: int = 800  # server default silenceDurationMs
    vad_prefix_padding_ms: int = 20
    turn_end_s: Range = (0.3, 0.5)  # T1: end of turn 1.1-1.3 s after the last speech
    # T7: a reply starts this long after a text turn (`clientContent` or `realtimeInput.text`);
    # after speech it starts at the end of the turn (`turn_end_s`).
    reply_s: Range = (0.5, 1.1)
    tool_reply_s: Range = (0.5, 0.8)  # T2: speech after a tool response
    turn_tail_s: Range = (0.0, 0.002)  # T2: generationComplete/turnComplete after a toolCall
    audio_speedup: float = 5.3  # T3: 4.7 s of audio in 0.88 s
    audio_chunk_ms: int = Field(default=100, ge=20, le=100)
    voice_activity_events: bool = False
    # The scenario pack whose model answers (faultlab.scenarios): None, the default scenario's;
    # a profile picks another with `overrides: {scenario: NAME}`.
    scenario: Annotated[str | None, AfterValidator(_installed)] = None
    # The API's own fields, which only its emulated API reads, as its plugin's `quirks_ref` model
    # validates them (its defaults filled in): Gemini Live's `session_id_in_setup_complete`.
    quirks: dict[str, Any] = Field(default_factory=dict, validate_default=True)

    @field_validator("quirks")
    @classmethod
    def _the_apis_own(cls, quirks: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        protocol = info.data.get("protocol")
        if protocol is None:  # already refused
            return quirks
        api = api_named(protocol)
        model = api.part(api.quirks_ref, type)
        if model is None:
            if quirks:
                raise ValueError(f"the {protocol} API has no fields of its own")
            return quirks
        dumped: dict[str, Any] = model.model_validate(quirks).model_dump()
        return dumped

    @model_validator(mode="after")
    def _dialect_of_its_api(self) -> Personality:
        dialects = api_named(self.protocol).protocol.dialects
        if self.api not in dialects:
            raise ValueError(f"api: {self.api!r} is not a dialect of {self.protocol}; one of: "
                             f"{', '.join(dialects)}")
        return self


# Gemini Live's (its plugin, faultlab.protocols.gemini.API, names them).
GEMINI_PERSONALITIES = (
    Personality(name="gemini-dev-2026-10", api="developer"),
    Personality(
        name="vertex-2026", api="vertex", transparent_resumption=True,
        quirks={"session_id_in_setup_complete": True}, audio_stream_end_ends_turn=False,
        voice_activity_events=True,
        unknown_model="Publisher Model `{model}` was not found or your project does not have "
                      "access to it.",
    ),
)
# OpenAI Realtime's GA protocol of 2025-08 (docs/openai-realtime.md, whose O-items these fields
# follow). No figures of its timings are public: every range is a guess of the same order as the
# Live API's measured ones.
OPENAI_REALTIME = Personality(
    name="openai-realtime-2025-08", protocol="openai", api="realtime",
    setup_complete_s=(0.05, 0.15),  # guess: session.created soon after the upgrade
    invalid_argument_s=(0.0, 0.01),  # guess: an in-band error at once
    connection_lifetime_s=3600.0, go_away_before_s=0.0,  # O8: a 60-minute cap, no warning
    reap_after_s=3600.0,  # guess: no idle reaping is documented
    models=(ServedModel(pattern="gpt-realtime*", modalities=("AUDIO", "TEXT")),
            ServedModel(pattern="gpt-4o-realtime-preview*"),
            ServedModel(pattern="gpt-4o-mini-realtime-preview*")),
    unknown_model="The model `{model}` does not exist or you do not have access to it.",
    voice_activity_events=True, activity_start_s=(0.05, 0.15),  # guess
    vad_silence_ms=500, vad_prefix_padding_ms=300,  # O13: server VAD's documented defaults
    turn_end_s=(0.1, 0.3), reply_s=(0.3, 0.7), tool_reply_s=(0.3, 0.7),  # guesses
    audio_speedup=4.0,  # guess: audio is streamed faster than real time
)
# OpenAI Realtime's (faultlab.protocols.openai.API): the newest also by the name without a date.
OPENAI_PERSONALITIES = (OPENAI_REALTIME,
                        OPENAI_REALTIME.model_copy(update={"name": "openai-realtime"}))


def _personalities() -> dict[str, Personality]:
    found: dict[str, Personality] = {}
    for api in apis().values():
        for personality in api.part(api.personalities_ref, tuple) or ():
            if not isinstance(personality, Personality) or personality.protocol != api.name:
                raise TypeError(f"API {api.name}: {api.personalities_ref} holds "
                                f"{personality!r}, not a Personality of protocol {api.name!r}")
            found[personality.name] = personality
    return found


# Every installed API's personalities, by name.
PERSONALITIES: Mapping[str, Personality] = View(_personalities)
# The personality of an emulator that names none: the default API's default.
DEFAULT_PERSONALITY: str = DEFAULT_API.default_personality or ""
# Each API's personality when nothing names one (a cassette recorded off a capture).
PROTOCOL_DEFAULTS: Mapping[str, str] = View(lambda: {
    name: api.default_personality for name, api in apis().items() if api.default_personality})
# A personality file's field naming the built-in personality it changes.
BASE_FIELD = "base"


def personality_with(name: str, overrides: dict[str, object] | None = None) -> Personality:
    """A known personality with some fields changed (validated: unknown fields are errors)."""
    base = PERSONALITIES[name]
    if not overrides:
        return base
    return Personality.model_validate({**base.model_dump(), **overrides})


def read_personality_file(path: Path) -> tuple[str, dict[str, Any]]:
    """The built-in personality a personality file names (`base: NAME`) and the fields it changes
    (`name` defaults to the file's stem), validated; every problem a ProfileError line
    `file:line: field: message`."""
    source = str(path)
    problems = Problems(source, {})
    try:
        content = read_bounded(path)
    except OSError as exc:
        problems.add((), f"cannot read it: {exc.strerror or exc}")
        problems.fail()
    data, problems = load_mapping(content, source, f"a personality file is a mapping: "
                                  f"{BASE_FIELD}: NAME, then the fields it changes")
    changes = {"name": path.stem, **data}
    base = changes.pop(BASE_FIELD, None)
    if not isinstance(base, str) or base not in PERSONALITIES:
        known = ", ".join(sorted(PERSONALITIES))
        problems.add((BASE_FIELD,), "required field is missing; one of: " + known if base is None
                     else f"unknown personality {base!r}; one of: {known}")
        base = DEFAULT_PERSONALITY  # every personality has the same fields: check them too
    try:
        personality_with(base, changes)
    except ValidationError as exc:
        problems.add_validation((), exc, changes)
    problems.raise_if_any()
    return base, changes


def personality_source(spec: str) -> tuple[str, dict[str, Any]]:
    """The built-in personality `spec` is (a name) or changes (a personality file), and the
    changes; ProfileError for a file's problems, ValueError for an unknown name."""
    if spec in PERSONALITIES:
        return spec, {}
    if spec.endswith((".yaml", ".yml")) or Path(spec).is_file():
        return read_personality_file(Path(spec))
    raise ValueError(f"unknown personality {spec!r}; known: {', '.join(sorted(PERSONALITIES))}, "
                     "or a personality file (YAML)")


def personality_from(spec: str, overrides: dict[str, object] | None = None) -> Personality:
    """A built-in personality by name, or a personality file's, with `overrides` on top;
    ProfileError for a file's problems, ValueError for an unknown name or a bad override."""
    base, changes = personality_source(spec)
    try:
        return personality_with(base, {**changes, **(overrides or {})})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {message_of(e)}"
                             for e in exc.errors())
        raise ValueError(f"bad personality setting: {problems}") from None


def personality_file_text(base: str, changes: dict[str, Any], heading: str = "") -> str:
    """A personality file (`read_personality_file` reads it back): `heading` as comment lines,
    then the base's name and the changed fields, ranges written `[low, high]`."""
    comments = "".join(f"# {line}\n" if line else "#\n" for line in heading.splitlines())
    body = yaml.safe_dump({BASE_FIELD: base, **changes}, sort_keys=False, default_flow_style=None,
                          allow_unicode=True)
    return comments + body


def served_model(personality: Personality, name: str | None) -> ServedModel | None:
    """What the model of id `name` (EmulatedApi.model_id) is on this service; None: the service
    does not serve it (unknown, retired, or no model name at all)."""
    if name is None:
        return None
    for served in personality.models:
        if fnmatch.fnmatchcase(name, served.pattern):
            return None if served.retired else served
    return None
