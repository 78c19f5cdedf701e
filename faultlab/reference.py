"""The documentation site's reference pages, written from the code they describe (never kept by
hand): every fault from its declaration, every profile field from the profile's JSON Schema,
every event from its record. docs/hooks.py hands them to mkdocs; the command line's page is
mkdocs-click's, from click itself."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from typing import Any

from faultlab.faults import FAULTS
from faultlab.profile.schema import profile_schema
from faultlab.vocabulary.schema import event_schema

Schema = dict[str, Any]

# Where each generated page sits in the site (docs/reference/).
FAULTS_PAGE = "reference/faults.md"
PROFILE_PAGE = "reference/profile.md"
EVENTS_PAGE = "reference/events.md"


def pages() -> dict[str, str]:
    """Every generated page's markdown, by its path in the site."""
    return {page: write() for page, write in WRITERS.items()}


def faults_page() -> str:
    """Each fault: its layer, mechanism, what it needs, what it does, and its parameters."""
    out = ["# Faults", "",
           "Every fault a step's `do` can name, as its declaration in `faultlab/faults/` says: "
           "where it hurts (layer), how (mechanism), what the run starts for it, and its "
           "parameters. A step gives them beside `fault`:", "",
           "```yaml", "do: {fault: drop, direction: both}", "```", ""]
    for name in sorted(FAULTS):
        fault = FAULTS[name]
        needs = ", ".join(sorted(fault.needs)) or "nothing"
        out += [f"## {name}", "", _doc(fault), "",
                f"- layer: {fault.layer}", f"- mechanism: {fault.mechanism}",
                f"- needs: {needs}", f"- reverted at the end: {'yes' if fault.reversible else 'no'}",
                ""]
        schema = fault.Params.model_json_schema(by_alias=True)
        out += _fields(schema, schema.get("$defs", {})) or ["No parameters.", ""]
    return "\n".join(out)


def profile_page() -> str:
    """A profile's fields, section by section, from the schema `faultlab schema` prints."""
    schema = profile_schema()
    defs: dict[str, Schema] = schema["$defs"]
    out = ["# Profile fields", "",
           "Every field of a profile, from its JSON Schema (`faultlab schema`, the same models "
           "the loader validates with). A step's `do` takes a fault's parameters "
           "([faults](faults.md)); an expectation's fields are its kind's.", "",
           "## The profile", "", *_fields(schema, defs)]
    for name in _sections(schema, defs):
        out += [f"## {name}", "", _description(defs[name]), "", *_fields(defs[name], defs)]
    return "\n".join(out)


def events_page() -> str:
    """Every event a run writes, with its fields, by name."""
    out = ["# Events", "",
           "Every event a run's `events.jsonl` (and a client's `FAULTLAB_EVENTS` file) may hold: "
           "one of faultlab's records, named by `event`. Each line also has `t` (seconds on the "
           "run's clock) and `source`. `faultlab events check RUN_DIR` holds a run to them.", ""]
    schema = event_schema()
    defs = schema.get("$defs", {})
    for variant in schema["oneOf"]:
        own = {k: v for k, v in variant["properties"].items()
               if k not in ("event", "t", "source", "ts")}
        out += [f"## {variant['title']}", "", _description(variant), "",
                *(_fields({**variant, "properties": own}, defs) if own else ["No fields.", ""])]
    return "\n".join(out)


def _fields(schema: Schema, defs: dict[str, Schema]) -> list[str]:
    """A table of an object's fields: name, type, default, description."""
    properties: dict[str, Schema] = schema.get("properties", {})
    if not properties:
        return []
    required = set(schema.get("required", ()))
    rows = ["| field | type | default | what |", "|---|---|---|---|"]
    for name, field in properties.items():
        default = "required" if name in required else (
            f"`{json.dumps(field['default'])}`" if "default" in field else "")
        rows.append(f"| `{name}` | {_cell(_type(field, defs))} | {_cell(default)} | "
                    f"{_cell(_description(field))} |")
    return [*rows, ""]


def _sections(schema: Schema, defs: dict[str, Schema]) -> list[str]:
    """The object definitions the profile reaches, in the order a reader meets them."""
    seen: list[str] = []

    def visit(node: Any) -> None:
        for ref in _refs(node):
            name = ref.removeprefix("#/$defs/")
            if name not in seen and "properties" in defs.get(name, {}):
                seen.append(name)
                visit(defs[name])

    visit(schema["properties"])
    return seen


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _type(field: Schema, defs: dict[str, Schema]) -> str:
    """A field's type in a few words."""
    if "$ref" in field:
        name = field["$ref"].removeprefix("#/$defs/")
        return f"[{name}](#{name.lower()})" if "properties" in defs.get(name, {}) else \
            _type(defs.get(name, {}), defs)
    if "const" in field:
        return f"`{json.dumps(field['const'])}`"
    if "enum" in field:
        return " or ".join(f"`{json.dumps(v)}`" for v in field["enum"])
    for key in ("anyOf", "oneOf"):
        if key in field:
            return " or ".join(dict.fromkeys(_type(b, defs) for b in field[key]))
    kind = field.get("type")
    if kind == "array":
        return f"list of {_type(field.get('items', {}), defs)}"
    if kind == "string" and "pattern" in field and "examples" in field:
        return f"duration (`{field['examples'][0]}`)"
    if kind == "object" and "additionalProperties" in field and isinstance(
            field["additionalProperties"], dict):
        return f"mapping to {_type(field['additionalProperties'], defs)}"
    return str(kind or "any")


def _description(node: Schema) -> str:
    return " ".join(str(node.get("description", "")).split())


def _doc(thing: object) -> str:
    return inspect.cleandoc(getattr(thing, "__doc__", None) or "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# Each generated page's writer, by its path in the site.
WRITERS: dict[str, Callable[[], str]] = {FAULTS_PAGE: faults_page, PROFILE_PAGE: profile_page,
                                         EVENTS_PAGE: events_page}
