"""The base of every declarative model: strict (unknown fields are errors), immutable, with units."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema

from faultlab.units import (
    DURATION_PATTERN,
    DURATION_RANGE_PATTERN,
    parse_duration,
    parse_duration_range,
)

if TYPE_CHECKING:
    from faultlab.events import Event, KindMatch


class Model(BaseModel):
    """A profile section: unknown fields are errors and a validated value never changes. A
    field's docstring (the string right below it) is its description in the profile's JSON
    Schema and the site's reference."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def format_seconds(seconds: float) -> str:
    """A duration as a profile writes it, read back as the same value (`0.00001s`, not `1e-05s`)."""
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


# Seconds, written in a profile with a unit: `1.5s`, `200ms`, `2m` (and written back so in JSON).
DURATION_SCHEMA = {"type": "string", "pattern": DURATION_PATTERN, "examples": ["1.5s", "200ms"]}
Duration = Annotated[float, BeforeValidator(parse_duration), Field(ge=0),
                     PlainSerializer(format_seconds, return_type=str, when_used="json"),
                     WithJsonSchema(DURATION_SCHEMA)]
# Seconds from low to high: `1.8-1.9s`, `500ms-2s`, `[1.8s, 1.9s]`.
DurationRange = Annotated[tuple[float, float], BeforeValidator(parse_duration_range),
                          WithJsonSchema({"anyOf": [
                              {"type": "string", "pattern": DURATION_RANGE_PATTERN},
                              {"type": "array", "items": DURATION_SCHEMA, "minItems": 2,
                               "maxItems": 2}]})]
# A Docker image reference: [registry[:port]/]name[/name...][:tag][@sha256:digest].
IMAGE_REF = re.compile(r"^([A-Za-z0-9.-]+(:\d+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*"
                       r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")


def validate_plain[M: BaseModel](model: type[M], data: Any) -> M:
    """`data` (a profile's plain YAML values) as `model`, read as the profile's JSON Schema reads
    it: strictly as JSON is, so that no string is taken for a number or a boolean (`port: "80"`,
    `proxy: "yes"`), which an editor would flag and a lax pydantic would let through."""
    return model.model_validate_json(json.dumps(data), strict=True)


def enum_of(known: Collection[str]) -> Callable[[dict[str, Any]], None]:
    """A field's JSON Schema `enum`: the names of `known`, a registry read when the schema is made
    (not when the model is defined: a registry may load plugins). A nullable field keeps null."""
    def extra(schema: dict[str, Any]) -> None:
        nullable = any(branch.get("type") == "null" for branch in schema.get("anyOf", ()))
        schema["enum"] = [*sorted(known), *([None] if nullable else [])]
    return extra


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



class EventMatch(Model):
    """Events with this name whose fields equal every value in `where`."""

    event: str = Field(min_length=1)
    """The event's name, e.g. `fault.applied` or `client.connected`."""
    where: dict[str, Any] = Field(default_factory=dict)
    """Fields the event must have with these values; empty: any event of that name."""

    def describe(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.where.items())
        return f"{self.event}({fields})" if fields else self.event

    def first(self, events: Iterable[Event], kinds: KindMatch | None = None) -> Event | None:
        """The first of `events` that matches (`kinds`: as `Event.matches`)."""
        return next((e for e in events if e.matches(self.event, self.where, kinds)), None)
