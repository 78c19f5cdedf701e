"""A cassette as the target: its recorded server side, served by `faultlab emulator serve
--cassette` in the server's namespace, where the emulator would be (faultlab.cassette.replay).

Everything else is the emulator's: the service's names resolve to it, the run's CA issued its
certificate, it writes the emulator's frame log (frame triggers follow the recorded kinds), and
under `divergence: fallback` the personality takes over where the client diverges.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from ipaddress import IPv4Network
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, GetJsonSchemaHandler, field_validator, model_validator
from pydantic.json_schema import JsonSchemaValue

from faultlab.cassette.format import CassetteError, Divergence, read_cassette, read_header
from faultlab.emulator.personality import PERSONALITIES
from faultlab.model import Model, enum_of, one_of
from faultlab.protocols import DEFAULT, PROTOCOLS, Protocol
from faultlab.targets.base import Surroundings
from faultlab.targets.emulator import Emulator, EmulatorTarget

if TYPE_CHECKING:
    from faultlab.problems import Loc


class CassetteTarget(Model):
    """A cassette's recorded server side as the target: `cassette: FILE`, or its fields."""

    file: Path
    """The cassette (`NAME.cassette.jsonl`), relative to the profile's folder; it names the
    run's API."""
    divergence: Divergence = "strict"
    """What a replay does when the client departs from the recording (after `cassette.diverged`):
    `strict` closes the connection 1008, `fallback` hands it to the emulator's personality."""
    time_scale: float = Field(default=1.0, gt=0)
    """A factor on the recorded delays, and on the fallback personality's timers."""
    personality: str | None = Field(default=None, json_schema_extra=enum_of(PERSONALITIES))
    """The personality that takes over under `fallback`; absent: the one it was recorded with,
    or its API's. It must speak the cassette's API."""

    @model_validator(mode="before")
    @classmethod
    def _file_alone(cls, value: Any) -> Any:
        return {"file": value} if isinstance(value, str | Path) else value

    @classmethod
    def __get_pydantic_json_schema__(cls, core: Any,  # pydantic_core's CoreSchema
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """What a profile may write: the file alone, or the fields."""
        fields = handler.resolve_ref_schema(handler(core))
        return {"anyOf": [{"type": "string", "description": "The cassette's file alone."}, fields]}

    @field_validator("personality")
    @classmethod
    def _known(cls, name: str | None) -> str | None:
        return None if name is None else one_of("personality", name, PERSONALITIES)

    def anchored(self, folder: Path) -> CassetteTarget:
        """The same, its file relative to `folder` (the profile's) when it is relative."""
        return self.model_copy(update={"file": (folder / self.file).absolute()})


class Replayed(Emulator):
    """A cassette replayed where the emulator would listen (443 unless `port` says otherwise)."""

    name: ClassVar[str] = "cassette"

    def __init__(self, cassette: CassetteTarget, port: int | None, image: str | None) -> None:
        super().__init__(EmulatorTarget(time_scale=cassette.time_scale), port, image)
        self.cassette = cassette

    @property
    def protocol(self) -> Protocol:
        """The API the cassette speaks (Gemini Live's while it cannot be read: the profile's
        check says why)."""
        return PROTOCOLS.get(_protocol_of(self.cassette.file) or "", DEFAULT)

    def misfit(self) -> str | None:
        if self.image is not None:
            return "a cassette is served by faultlab's own program: it takes no 'image'"
        return None

    def argv(self, run: Surroundings) -> list[str]:
        c = self.cassette
        personality = ["--personality", c.personality] if c.personality is not None else []
        return self.serve_argv(run, "--cassette", str(run.profile_path(c.file)), "--divergence",
                               c.divergence, "--time-scale", f"{c.time_scale:g}", *personality)

    def profile_problems(self, hosts: Sequence[str], sysctl: Collection[str],
                         subnets: Mapping[str, IPv4Network], folder: Path) -> list[tuple[Loc, str]]:
        try:  # read whole, so that a run does not start to find it broken
            recorded = read_cassette(folder / self.cassette.file)
        except CassetteError as exc:
            return [(("target", "cassette", "file"), line) for line in exc.problems]
        personality = self.cassette.personality
        if personality is not None and PERSONALITIES[personality].protocol != recorded.protocol:
            return [(("target", "cassette", "personality"),
                     f"{personality} speaks {PERSONALITIES[personality].protocol}; the cassette "
                     f"{recorded.protocol}")]
        return []


@functools.lru_cache(maxsize=64)
def _protocol_of(path: Path) -> str | None:
    """The protocol a cassette's header names (None: it cannot be read), read once a file:
    a run asks its target's protocol many times."""
    try:
        return read_header(path).protocol
    except CassetteError:
        return None
