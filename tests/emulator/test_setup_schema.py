"""Setup fields: every field the installed SDK can send is accepted; unknown names are refused as sent."""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import os
import re
import subprocess
import sys
import traceback
import types as pytypes
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from google.genai import _common, _live_converters, live, types
from google.genai import _transformers as t
from google.genai.client import Client

from faultlab.emulator import frame_tree, schema, sdk_tree
from faultlab.emulator.apis.gemini_parse import parse_frame
from faultlab.emulator.messages import Setup
from faultlab.emulator.refusals import ProtocolError

MODEL = "gemini-3.8-live"
DEPTH = 12
# A converter's refusal of a field the other API has, and a transformer's of one Live lacks.
REFUSED = re.compile(r"^(\w+) (parameter is only supported in |is not supported in the live API)")
CONVERTER = re.compile(r"_(\w+)_to_(mldev|vertex)")
Converter = Callable[..., dict[str, Any]]


def sample(annotation: Any, stack: tuple[type, ...] = ()) -> Any:
    """A value for `annotation`; a model gets every field set, a recursive one stops at itself."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation == types.ToolListUnion:  # a bare `list` at runtime; on the wire, `Tool`s
        return [sample(types.Tool, stack)]
    if origin is typing.Annotated:
        return sample(args[0], stack)
    if origin is typing.Literal:
        return args[0]
    if origin is typing.Union or origin is pytypes.UnionType:
        options = [a for a in args if a is not type(None)]
        models = [a for a in options if isinstance(a, type) and issubclass(a, pydantic.BaseModel)]
        return sample((models or options)[0], stack)
    if origin is list:
        item = sample(args[0], stack) if args else None
        return [] if item is None else [item]
    if origin is dict or annotation in (dict, Any):
        return {}
    if isinstance(annotation, type):
        if issubclass(annotation, pydantic.BaseModel):
            if annotation in stack or len(stack) >= DEPTH:
                return None
            return annotation(**{name: sample(info.annotation, (*stack, annotation))
                                 for name, info in annotation.model_fields.items()
                                 if name != "http_options"})
        if issubclass(annotation, enum.Enum):
            return next(iter(annotation))
        for kind, value in ((bool, True), (int, 1), (float, 0.5), (str, "x"), (bytes, b"x"),
                            (datetime.datetime, datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))):
            if issubclass(annotation, kind):
                return value
    raise TypeError(f"no sample for {annotation!r}")


def without(model: pydantic.BaseModel, field: str, type_name: str | None) -> None:
    """Unset `field` on every instance of the SDK type `type_name` (any type, if None) in `model`."""
    if type(model).__name__ == type_name or (type_name is None and field in type(model).model_fields):
        setattr(model, field, None)
    for name in type(model).model_fields:
        value = getattr(model, name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, pydantic.BaseModel):
                without(item, field, type_name)


def setup_as_sent(client: Client, convert: Converter,
                  config: types.LiveConnectConfig) -> tuple[str, list[str]]:
    """The setup frame live.py would send for `config`, and the fields the converter refused for
    this API (dropped one by one, each where its type's converter raised)."""
    api = client._api_client
    dropped = []
    while True:
        params = asyncio.run(live._t_live_connect_config(api, config.model_copy(deep=True)))
        model = t.t_model(api, MODEL)
        try:
            request = _common.convert_to_dict(convert(api_client=api, from_object=types.LiveConnectParameters(
                model=model, config=params).model_dump(exclude_none=True)))
        except ValueError as exc:
            refused = REFUSED.match(str(exc))
            assert refused, exc
            # Raised in `_<Type>_to_<api>`: that type's field; in a transformer: wherever it is.
            where = CONVERTER.fullmatch(traceback.extract_tb(exc.__traceback__)[-1].name)
            type_name = where.group(1) if where else None
            without(config, refused.group(1), type_name)
            dropped.append(f"{type_name or '*'}.{refused.group(1)}")
            continue
        del request["config"]
        request = _common.encode_unserializable_types(request)
        request["setup"]["model"] = model
        return json.dumps(request), dropped


def everything() -> types.LiveConnectConfig:
    config = sample(types.LiveConnectConfig)
    assert isinstance(config, types.LiveConnectConfig)
    return config


def keys(obj: Any, prefix: str = "") -> set[str]:
    """Every dotted key path in a JSON object, list indices left out."""
    out: set[str] = set()
    if isinstance(obj, dict):
        for key, value in obj.items():
            out |= {f"{prefix}{key}"} | keys(value, f"{prefix}{key}.")
    elif isinstance(obj, list):
        for value in obj:
            out |= keys(value, prefix)
    return out


@pytest.mark.filterwarnings("ignore:Setting `LiveConnectConfig.generation_config` is deprecated")
@pytest.mark.parametrize(("client", "convert"), [
    (lambda: Client(api_key="k"), _live_converters._LiveConnectParameters_to_mldev),
    (lambda: Client(vertexai=True, project="p", location="us-central1"),
     _live_converters._LiveConnectParameters_to_vertex),
], ids=["developer", "vertex"])
def test_every_field_the_sdk_sends_is_accepted(client: Callable[[], Client],
                                               convert: Converter) -> None:
    """A LiveConnectConfig with every field set, converted as live.py does for each API, parses."""
    frame, dropped = setup_as_sent(client(), convert, everything())
    parsed = parse_frame(frame)
    assert isinstance(parsed.message, Setup)
    sent = keys(json.loads(frame)["setup"])
    assert {"historyConfig", "avatarConfig", "safetySettings", "labels", "proactivity",
            "generationConfig.translationConfig", "contextWindowCompression", "realtimeInputConfig",
            "sessionResumption", "tools.functionDeclarations", "systemInstruction.parts"} <= sent
    if convert is _live_converters._LiveConnectParameters_to_mldev:
        assert "SessionResumptionConfig.transparent" in dropped  # the parser would accept it anyway
        assert "LiveConnectConfig.explicit_vad_signal" in dropped
    else:  # and the one key that is no field name: `model_selection_config` renamed
        assert {"explicitVadSignal", "generationConfig.modelConfig"} <= sent


def test_the_tree_holds_what_the_converters_send_under_setup() -> None:
    """The derived tree has the SDK's setup fields, the converters' extra keys and data leaves."""
    setup = sdk_tree.client_message().fields["setup"].message
    assert setup is not None
    assert {"history_config", "avatar_config", "safety_settings", "labels", "explicit_vad_signal",
            "proactivity", "context_window_compression", "realtime_input_config"} <= set(setup.fields)
    generation = setup.fields["generation_config"].message
    assert generation is not None
    assert {"translation_config", "model_config", "model_selection_config"} <= set(generation.fields)
    tool = setup.fields["tools"].message
    assert tool is not None and setup.fields["tools"].shape == "list"
    declaration = tool.fields["function_declarations"].message
    assert declaration is not None and declaration.fields["parameters"].message is None


@pytest.mark.parametrize(("setup", "name", "where"), [
    ({"historyConfigg": {}}, "historyConfigg", "setup"),
    ({"generationConfig": {"speechConfigg": {}}}, "speechConfigg", "setup.generation_config"),
    ({"generation_config": {"speech_config": {"voice_configg": {}}}}, "voice_configg",
     "setup.generation_config.speech_config"),
    ({"tools": [{"functionDeclarations": [{"name": "f", "behaviour": "NON_BLOCKING"}]}]},
     "behaviour", "setup.tools[0].function_declarations[0]"),
])
def test_an_unknown_name_is_refused_as_sent(setup: dict[str, Any], name: str, where: str) -> None:
    """S6: 1007 `Unknown name "<as sent>" at '<snake path>'`, at any depth, in either spelling."""
    with pytest.raises(ProtocolError) as info:
        parse_frame(json.dumps({"setup": {"model": f"models/{MODEL}", **setup}}))
    assert info.value.code == 1007
    assert info.value.reason == (f'Invalid JSON payload received. Unknown name "{name}" at '
                                 f"'{where}': Cannot find field.")


def test_data_payloads_are_not_checked_and_objects_are_required() -> None:
    """Function parameters and labels keep any keys; a scalar where a message belongs is refused."""
    parsed = parse_frame(json.dumps({"setup": {
        "model": f"models/{MODEL}", "labels": {"anyKey": "v"},
        "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"madeUp": {"x": 1}}}]}]}}))
    assert isinstance(parsed.message, Setup) and parsed.message.functions[0].name == "f"
    with pytest.raises(ProtocolError) as info:
        parse_frame(json.dumps({"setup": {"model": f"models/{MODEL}", "historyConfig": 5}}))
    assert info.value.code == 1007 and "Invalid value at 'setup.history_config'" in info.value.reason


def test_an_unknown_message_is_refused_as_sent() -> None:
    """A top-level key that is no client message is named as sent, with no path."""
    with pytest.raises(ProtocolError) as info:
        parse_frame(json.dumps({"realtimeInputs": {}}))
    assert info.value.reason == ('Invalid JSON payload received. Unknown name "realtimeInputs": '
                                 "Cannot find field.")


def canonical(tree: frame_tree.Message) -> str:
    return json.dumps(schema.tree_to_json(tree), sort_keys=True)


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty user cache, and no tree read yet in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    schema.client_message.cache_clear()
    yield tmp_path / "faultlab"
    schema.client_message.cache_clear()


def test_the_tree_is_cached_and_read_back_as_derived(cache_home: Path) -> None:
    """The first emulator derives the tree and writes it; the next reads the same tree back."""
    derived = canonical(sdk_tree.client_message())
    assert canonical(schema.client_message()) == derived
    [cached] = cache_home.glob("emulator-sdk-tree-*.json")
    assert cached == schema.cache_path()
    schema.client_message.cache_clear()
    cached.write_text(cached.read_text().replace('"LiveClientSetup"', '"FromTheCache"'))
    assert schema.client_message().fields["setup"].message.name == "FromTheCache"  # type: ignore[union-attr]


@pytest.mark.parametrize("content", ["{", '{"format": 99, "messages": []}', '{"format": 1}'])
def test_a_bad_cache_is_derived_again_and_replaced(cache_home: Path, content: str) -> None:
    path = schema.cache_path()
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert canonical(schema.client_message()) == canonical(sdk_tree.client_message())
    assert json.loads(path.read_text())["format"] == schema.CACHE_FORMAT


def test_a_cache_folder_that_cannot_be_made_still_gives_the_tree(cache_home: Path) -> None:
    cache_home.write_text("a file where the folder would be")
    assert canonical(schema.client_message()) == canonical(sdk_tree.client_message())
    assert cache_home.read_text() == "a file where the folder would be"


def test_with_the_tree_cached_an_emulator_never_imports_the_sdk(cache_home: Path) -> None:
    """Importing google-genai took 1.08 s of CPU at every emulator's start; with the tree cached,
    a Gemini emulator made ready to parse has not imported it."""
    schema.client_message()
    probe = ("import sys; import faultlab.emulator.run; "
             "from faultlab.emulator.apis import APIS; APIS['gemini'].prepare(); "
             "print(sorted(m for m in sys.modules if m.startswith('google.genai')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env=dict(os.environ))
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
