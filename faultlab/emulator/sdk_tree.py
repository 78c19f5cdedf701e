"""The client frame's field tree, derived from the installed google-genai SDK's pydantic types.

The real service accepts every field the current SDK sends (S6), so the emulator keeps no list of
its own: the tree is derived from the SDK's pydantic types, starting at `LiveClientMessage` (whose
`setup` is `LiveClientSetup`). The set follows the installed SDK: upgrading google-genai upgrades
the emulator, and a field a new SDK sends is accepted on the day it ships.

A field whose annotation (through Optional, Union, list and Annotated) names one pydantic model is a
nested `Message`; anything else is a `Leaf` of one JSON type, as proto3 JSON spells the SDK's type
(`str`, a `datetime` and base64 `bytes` are strings; an `int` is a number or a string of digits; an
enum is one of its names; a `dict` is an object), whose contents are not looked into. So are the
payloads the model reads as data (`Schema`, `JSONSchema`: function `parameters` and `response`, a
`response_schema`): any object. A recursive type would be one shared `Message` (a graph with a
cycle, walked only as deep as a frame goes); today the only recursive types on the way are those
data payloads.

Where the SDK's converters (`google/genai/_live_converters.py`) put on the wire something the types
do not say, `_ON_THE_WIRE` and `_CONVERTER_FIELDS` below say it, each with its reason.

Importing the SDK takes a second of CPU, the derivation 18 ms: `schema.client_message` keeps the
tree in a cache by SDK version, so that an emulator starts without importing it.
"""

from __future__ import annotations

import datetime
import enum
import types as pytypes
import typing
from typing import Any

import pydantic
from google.genai import types

from faultlab.emulator.frame_tree import ANY, Field, JsonType, Leaf, Message
from faultlab.protocols.gemini import snake

# Annotations that say less than the converters send. Every tool goes through `t_tools`/`t_tool` to
# a `Tool` (the runtime annotation is a bare `list` so that MCP objects pass validation), and every
# content union through `t_content` to a `Content`; raw clients also send a system instruction as
# plain text, which the emulator reads.
_ON_THE_WIRE: tuple[tuple[Any, Any], ...] = (
    (types.ToolListUnion, list[types.Tool]),
    (types.ContentUnion, types.Content | str),
)
# Keys the converters put under a message that its type does not have as a field.
_CONVERTER_FIELDS: dict[type[pydantic.BaseModel], dict[str, Any]] = {
    # `_LiveConnectConfig_to_*` sets `setup.realtimeInputConfig` from LiveConnectConfig, but
    # LiveClientSetup has no such field.
    types.LiveClientSetup: {"realtime_input_config": types.RealtimeInputConfig | None},
    # `_GenerationConfig_to_vertex` renames `model_selection_config` (pydantic reserves
    # `model_config`) to the proto's `modelConfig`; the Developer API path sends it unrenamed.
    types.GenerationConfig: {"model_config": types.ModelSelectionConfig | None},
}
# Models whose contents are the user's data for the model, not protocol fields.
_DATA: tuple[type[pydantic.BaseModel], ...] = (types.Schema, types.JSONSchema)


def client_message() -> Message:
    """`LiveClientMessage`: the top-level keys of a client frame and each one's message tree."""
    return _message(types.LiveClientMessage, {})


def _message(model: type[pydantic.BaseModel], known: dict[type[pydantic.BaseModel], Message]) -> Message:
    if model in known:  # a recursive type: share the node instead of unrolling it
        return known[model]
    node = known[model] = Message(model.__name__)
    for name, info in model.model_fields.items():
        # An explicit alias is the wire name (`TextResponseFormat.jsonSchema` is `schema`), but the
        # SDK dumps by field name: both are names.
        node.fields[snake(name)] = node.fields[snake(info.alias or name)] = _field(info.annotation, known)
    for name, annotation in _CONVERTER_FIELDS.get(model, {}).items():
        node.fields[name] = _field(annotation, known)
    return node


def _field(annotation: Any, known: dict[type[pydantic.BaseModel], Message]) -> Field:
    forms = _forms(annotation)
    models = {model for model, _ in forms if _is_message(model)}
    leaves = {_leaf(form, repeated) for form, repeated in forms if not _is_message(form)}
    leaf = None if not leaves else leaves.pop() if len(leaves) == 1 else ANY
    if len(models) != 1:  # a scalar, or a union of messages whose wire form the converter picks
        return Field(None, leaf=leaf if not models else ANY)
    message = _message(models.pop(), known)
    if all(_is_message(model) and repeated for model, repeated in forms):
        return Field(message, "list", None)
    if all(_is_message(model) and not repeated for model, repeated in forms):
        return Field(message, "object", None)
    return Field(message, "any", leaf)


def _is_message(form: Any) -> bool:
    return isinstance(form, type) and issubclass(form, pydantic.BaseModel) and not issubclass(form, _DATA)


# How proto3 JSON spells the SDK's scalar types.
_JSON_TYPES: tuple[tuple[type, JsonType], ...] = (
    (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (bytes, "string"),
    (datetime.datetime, "string"), (pydantic.BaseModel, "object"),  # a data payload (`_DATA`)
)


def _leaf(form: Any, repeated: bool) -> Leaf:
    origin, args = typing.get_origin(form), typing.get_args(form)
    if origin is typing.Literal:
        return Leaf("enum", repeated, frozenset(str(a).upper() for a in args))
    if isinstance(form, type) and issubclass(form, enum.Enum):
        return Leaf("enum", repeated, frozenset(str(m.value).upper() for m in form))
    if origin is dict or form is dict:
        return Leaf("string_map" if args and args[1] is str else "object", repeated)
    for python, json_type in _JSON_TYPES:
        if isinstance(form, type) and issubclass(form, python):
            return Leaf(json_type, repeated)
    return Leaf("any", repeated)


def _forms(annotation: Any, repeated: bool = False) -> list[tuple[Any, bool]]:
    """The alternatives an annotation allows, as (a model, or a leaf's annotation; is a list), None
    left out."""
    annotation = next((wire for said, wire in _ON_THE_WIRE if annotation in (said, said | None)),
                      annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _forms(args[0], repeated)
    if origin is typing.Union or origin is pytypes.UnionType:
        return [form for arg in args if arg is not type(None) for form in _forms(arg, repeated)]
    if origin is list and len(args) == 1 and not repeated:
        return _forms(args[0], True)
    return [(annotation, repeated)]
