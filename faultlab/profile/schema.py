"""The profile as a JSON Schema, for editors (`# yaml-language-server: $schema=...`) and for
`faultlab schema`: built from the models the loader validates with, so that the two cannot
drift. The loader's own checks that span sections (a fault's needs, unique step ids, a
target's kind fitting its fields) stay the loader's; the schema holds each field's shape.

Three parts of a profile are not one model each but chosen by a key, and the schema says so:
a client by its kind's key (`command`, `builtin`, `browser`, a plugin's), a step's `do` by its
`fault`, an expectation by the key it starts with."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from importlib.resources import files
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from faultlab.expect import expectation_kinds
from faultlab.faults import FAULTS
from faultlab.model import DURATION_SCHEMA, format_seconds
from faultlab.profile.client_kinds import client_kinds
from faultlab.profile.load import RawProfile

# The schema's file among the shipped profiles (faultlab/profiles/), which name it in their
# first line; a test holds it to `profile_schema()` (`make schema` writes it anew).
SCHEMA_FILE = "profile.schema.json"
REF = "#/$defs/{model}"
DESCRIPTION = ("One scenario: the lab's network, the target and the client, the faults of its "
               "timeline and what is expected of the run (faultlab validate checks it all).")

Schema = dict[str, Any]


def profile_schema() -> Schema:
    """The JSON Schema (draft 2020-12) of a profile as written."""
    faults = {name: FAULTS[name] for name in sorted(FAULTS)}
    expectations = expectation_kinds()
    kinds = client_kinds()
    models: list[type[BaseModel]] = [RawProfile, *(f.Params for f in faults.values()),
                                     *expectations.values(),
                                     *(k.setting for k in kinds.values() if _is_model(k.setting))]
    names, top = models_json_schema([(m, "validation") for m in models], by_alias=True,
                                    ref_template=REF)
    defs: dict[str, Schema] = top["$defs"]
    ref = {model: names[(model, "validation")]["$ref"] for model in models}

    defs["RawStep"]["properties"]["do"] = _chosen_by_fault(
        {name: (_doc(fault), _def(defs, ref[fault.Params])) for name, fault in faults.items()})
    root = defs.pop(ref[RawProfile].removeprefix("#/$defs/"))
    root["properties"]["expect"]["items"] = _chosen_by_key(
        {key: ref[kind] for key, kind in expectations.items()})
    defs["Client"] = _client(defs["Client"], {
        name: (_doc(kind), kind.schema() or (
            ref[kind.setting] if _is_model(kind.setting) else _inline(kind.setting)))
        for name, kind in kinds.items()})

    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **root,
              "title": "faultlab profile", "description": DESCRIPTION, "$defs": defs}
    for node in _nodes(schema):
        _duration_default(node)
    return schema


def schema_text() -> str:
    """The schema as the repo's file holds it."""
    return json.dumps(profile_schema(), indent=2, sort_keys=True) + "\n"


def shipped_schema() -> str:
    """The schema file the package ships, beside the shipped profiles."""
    return files("faultlab").joinpath("profiles", SCHEMA_FILE).read_text()


def _chosen_by_fault(faults: dict[str, tuple[str, Schema]]) -> Schema:
    """`do`: a `fault` and that fault's parameters, nothing else."""
    return {
        "type": "object",
        "description": "The fault to apply and its parameters.",
        "required": ["fault"],
        "properties": {"fault": {"enum": list(faults), "description": "The fault's name."}},
        "allOf": [{"if": {"properties": {"fault": {"const": name}}, "required": ["fault"]},
                   "then": {**params, "description": doc,
                            "properties": {"fault": {"const": name}, **params.get("properties", {})}}}
                  for name, (doc, params) in faults.items()],
    }


def _chosen_by_key(kinds: dict[str, str]) -> Schema:
    """An expectation: a mapping that starts with one kind's key, validated by that kind."""
    return {
        "type": "object",
        "anyOf": [{"required": [key]} for key in kinds],
        "allOf": [{"if": {"required": [key]}, "then": {"$ref": target}}
                  for key, target in kinds.items()],
    }


def _client(generated: Schema, kinds: dict[str, tuple[str, Schema | str]]) -> Schema:
    """The client: its kind's key with its setting (or an `image` alone), and the run's fields."""
    properties = {k: v for k, v in generated["properties"].items() if k not in ("kind", "setting")}
    for name, (doc, setting) in kinds.items():
        shape = {"$ref": setting} if isinstance(setting, str) else setting
        properties[name] = {**shape, "description": doc}
    any_kind = [{"required": [name]} for name in kinds]
    return {**generated, "properties": properties,
            "oneOf": [*any_kind, {"required": ["image"], "not": {"anyOf": any_kind}}]}


def _def(defs: dict[str, Schema], ref: str) -> Schema:
    return defs[ref.removeprefix("#/$defs/")]


def _inline(setting: Any) -> Schema:
    return TypeAdapter(setting).json_schema(by_alias=True, ref_template=REF)


def _is_model(setting: Any) -> bool:
    return inspect.isclass(setting) and issubclass(setting, BaseModel)


def _doc(thing: object) -> str:
    """A class's docstring, or its instance's class's."""
    cls = thing if inspect.isclass(thing) else type(thing)
    return inspect.cleandoc(cls.__doc__ or "")


def _duration_default(node: Schema) -> None:
    """A duration's default as a profile writes it (`60s`), not the seconds it holds."""
    if node.get("pattern") == DURATION_SCHEMA["pattern"] and isinstance(node.get("default"),
                                                                          int | float):
        node["default"] = format_seconds(node["default"])


def _nodes(value: Any) -> Iterator[Schema]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _nodes(item)
    elif isinstance(value, list):
        for item in value:
            yield from _nodes(item)
