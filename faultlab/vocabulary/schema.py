"""The vocabulary as one JSON Schema, and a run folder's events held to it (`faultlab events
schema`, `faultlab events check`).

Each record's fields, as the JSONL writes them (`Record.wire_fields`), become a pydantic model,
strict as JSON is (a count written "3" is a type error): what the schema prints and what the check
validates are one thing. Fields no record declares are allowed (a fault's own details, a frame's
extras). This module imports pydantic's models at its top: only those commands import it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from faultlab.events import BUS_FIELDS
from faultlab.vocabulary.base import Record
from faultlab.vocabulary.registry import vocabulary

SCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"
# What every line has besides its record's fields: the bus's (`t`, `source`) or a writer's (`ts`).
ENVELOPE = (*BUS_FIELDS, "ts", "event")
RUN_EVENTS = "events.jsonl"
OWN_EVENTS = "*.events.jsonl"


_models: dict[type[Record], type[BaseModel]] = {}


def model_of(record: type[Record]) -> type[BaseModel]:
    """The pydantic model of a record's fields as written (every name by its alias: `from`,
    `name` and `fields` are names no Python attribute may take)."""
    if record in _models:
        return _models[record]
    fields: dict[str, Any] = {
        f"field_{i}": (Annotated[kind, Field(alias=wire)], default)
        for i, (wire, (kind, default)) in enumerate(record.wire_fields().items())}
    model: type[BaseModel] = create_model(
        record.__name__, __config__=ConfigDict(strict=True, extra="allow"),
        __doc__=record.__doc__, **fields)
    _models[record] = model
    return model


def event_schema() -> dict[str, Any]:
    """One JSON Schema of every event of the vocabulary: one of its records, by `event`."""
    defs: dict[str, Any] = {}
    variants = []
    for name, record in sorted(vocabulary().items()):
        schema = model_of(record).model_json_schema(ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        schema["title"] = name
        schema["properties"] = {
            "event": {"const": name}, "t": {"type": "number"}, "source": {"type": "string"},
            "ts": {"type": "number"}, **schema.get("properties", {})}
        schema["required"] = ["event", *schema.get("required", [])]
        variants.append(schema)
    return {"$schema": SCHEMA_DRAFT, "title": "faultlab event",
            "description": "One line of a run's events.jsonl, or of a client's FAULTLAB_EVENTS "
                           "file: one of faultlab's event records, named by `event`.",
            "oneOf": variants, **({"$defs": defs} if defs else {})}


def event_files(run_dir: Path) -> list[Path]:
    """A run folder's event logs: events.jsonl and its processes' own *.events.jsonl."""
    own = sorted(p for p in run_dir.glob(OWN_EVENTS) if p.is_file())
    run = run_dir / RUN_EVENTS
    return ([run] if run.is_file() else []) + own


def problems_of(line: str) -> Iterator[str]:
    """What is wrong with one line against the vocabulary: not JSON, an event no record has,
    or a field of the wrong type."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        yield f"not JSON ({exc})"
        return
    name = data.get("event") if isinstance(data, dict) else None
    if not isinstance(name, str):
        yield "not an event (an object with an 'event' name)"
        return
    record = vocabulary().get(name)
    if record is None:
        yield f"unknown event {name!r}: no record of the vocabulary has it"
        return
    fields = {k: v for k, v in data.items() if k not in ENVELOPE}
    try:
        model_of(record).model_validate_json(json.dumps(fields))
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            where = ".".join(str(part) for part in error["loc"])
            yield f"{name}: {where}: {error['msg']} (got {json.dumps(error.get('input'))[:60]})"


def check_file(path: Path, shown: str) -> Iterator[str]:
    """Every problem of an event log, as `FILE:LINE: problem` (`shown`: the file's name)."""
    with path.open() as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                for problem in problems_of(line):
                    yield f"{shown}:{number}: {problem}"
