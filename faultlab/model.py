"""The base of every declarative model: strict (unknown fields are errors), immutable, with units."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from faultlab.units import parse_duration, parse_duration_range

if TYPE_CHECKING:
    from faultlab.events import Event


class Model(BaseModel):
    """A profile section: unknown fields are errors and a validated value never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def format_seconds(seconds: float) -> str:
    """A duration as a profile writes it, read back as the same value (`0.00001s`, not `1e-05s`)."""
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


# Seconds, written in a profile with a unit: `1.5s`, `200ms`, `2m` (and written back so in JSON).
Duration = Annotated[float, BeforeValidator(parse_duration), Field(ge=0),
                     PlainSerializer(format_seconds, return_type=str, when_used="json")]
# Seconds from low to high: `1.8-1.9s`, `500ms-2s`.
DurationRange = Annotated[tuple[float, float], BeforeValidator(parse_duration_range)]



class EventMatch(Model):
    """Events with this name whose fields equal every value in `where`."""

    event: str = Field(min_length=1)
    where: dict[str, Any] = Field(default_factory=dict)

    def describe(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.where.items())
        return f"{self.event}({fields})" if fields else self.event

    def first(self, events: Iterable[Event]) -> Event | None:
        """The first of `events` that matches."""
        return next((e for e in events if e.matches(self.event, self.where)), None)
