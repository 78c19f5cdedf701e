"""The Live API's client frames, parsed into typed messages; bad input raises `ProtocolError`.

The SDK camelCases only some levels and passes other sub-objects in snake_case, and raw clients
use either spelling: every key is accepted both ways. Which keys exist, at every level, and what
JSON type each holds, is the installed SDK's business (`schema`); an unknown name or a value of the
wrong type is refused as the service does, with the snake_case path of the field. Payloads the
model reads as data (function arguments, tool results, schemas) keep their keys as sent.

Every input error is a `ProtocolError` (1007, or 1008 for a model not served), never another
exception: beside the types, a frame is refused if it is not strict JSON (`NaN`, `Infinity`, a
number out of a double's range), holds a string with a lone UTF-16 surrogate (`"\\ud800"`: JSON
allows the escape, UTF-8 cannot encode it), nests deeper than `MAX_DEPTH`, or holds more than
`MAX_VALUES` values. Those two limits are the emulator's own, to bound the time and memory one
frame costs; the service's are not measured.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from faultlab.emulator.schema import Leaf, Message, client_message
from faultlab.livewire import RATE, kind_of, snake, snake_keys

INVALID_JSON = "Invalid JSON payload received."
MALFORMED = f"{INVALID_JSON} Closing due to a malformed message."
CLOSE_REASON_BYTES = 123
# Objects and lists nested deeper than this are refused before anything walks them: the SDK's own
# setup nests 9 levels, a function's parameters schema 2 more per level of the schema it describes.
MAX_DEPTH = 64
# Parsed, a frame of tiny values costs about 22 bytes of memory per byte (16 MiB of `{},` took
# 357 MiB and 1.5 s to parse); the values are counted before parsing, as the commas and opening
# brackets outside strings (those inside are only looked for past the limit: 0.02-0.45 s for 16 MiB).
MAX_VALUES = 250_000
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_SURROGATE = re.compile("[\ud800-\udfff]")
_INTEGER = re.compile(r"-?\d{1,20}")  # proto3 JSON: a 64-bit integer may come as a string
_NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|NaN|-?Infinity")
_WIRE_TYPES = {"string": "TYPE_STRING", "integer": "TYPE_INT64", "number": "TYPE_DOUBLE",
               "boolean": "TYPE_BOOL", "enum": "TYPE_ENUM", "object": "TYPE_MESSAGE",
               "string_map": "TYPE_MESSAGE"}


class ProtocolError(Exception):
    """A client frame the service rejects: closed with `code` and `reason` (<= 123 bytes)."""

    def __init__(self, reason: str, code: int = 1007) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = close_reason(reason)


def close_reason(text: str) -> str:
    """`text` as a close frame can carry it: UTF-8, at most 123 bytes, cut between characters."""
    return text.encode(errors="replace")[:CLOSE_REASON_BYTES].decode(errors="ignore")


def _unknown(name: str, where: str) -> ProtocolError:
    at = f" at '{where}'" if where else ""
    return ProtocolError(f'{INVALID_JSON} Unknown name "{name}"{at}: Cannot find field.')


def _invalid(where: str, wire_type: str, value: Any) -> ProtocolError:
    """The service's refusal of a value of the wrong type, quoting a scalar value (cut short)."""
    if isinstance(value, dict | list):
        shown = "{...}" if isinstance(value, dict) else "[...]"
    else:
        shown = json.dumps(value if not isinstance(value, str) else value[:40])
    return ProtocolError(f"{INVALID_JSON} Invalid value at '{where}' ({wire_type}), {shown}")


def _holds(leaf: Leaf, value: Any) -> bool:
    """Whether one (not repeated) value is of the leaf's JSON type."""
    match leaf.type:
        case "string":
            return isinstance(value, str)
        case "integer":
            if isinstance(value, str):
                return _INTEGER.fullmatch(value) is not None and -(2**63) <= int(value) < 2**64
            return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**64
        case "number":
            if isinstance(value, str):
                return _NUMBER.fullmatch(value) is not None
            return isinstance(value, int | float) and not isinstance(value, bool)
        case "boolean":
            return isinstance(value, bool)
        case "enum":
            return isinstance(value, str) and value.upper() in leaf.names
        case "object":
            return isinstance(value, dict)
        case "string_map":
            return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    return True


def _wire_type(leaf: Leaf) -> str:
    """The service's name for a leaf's type, as its refusals quote it (asked only to refuse)."""
    return _WIRE_TYPES.get(leaf.type, "TYPE_MESSAGE")


def _check_leaf(value: Any, leaf: Leaf, where: str) -> None:
    if not leaf.repeated:
        if not _holds(leaf, value):
            raise _invalid(where, _wire_type(leaf), value)
        return
    if not isinstance(value, list):
        raise _invalid(where, _wire_type(leaf), value)
    for i, item in enumerate(value):
        if not _holds(leaf, item):
            raise _invalid(f"{where}[{i}]", _wire_type(leaf), item)


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{INVALID_JSON} Invalid value at '{where}': expected an object.")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError(f"{INVALID_JSON} Invalid value at '{where}'.")
    return value


def _check_fields(value: dict[str, Any], message: Message, where: str) -> None:
    """Every key of `value`, at every depth, names a field of `message` in either spelling; a
    field of a message type holds an object (or a list of them), and any other value is of its
    field's JSON type (null is an unset field). Leaves are not looked into."""
    for key, sub in value.items():
        name = snake(key)
        spec = message.fields.get(name)
        if spec is None:
            raise _unknown(key, where)
        if sub is None:
            continue
        path = f"{where}.{name}" if where else name
        if spec.message is not None and spec.shape == "list":
            for i, item in enumerate(_list(sub, path)):
                _check_fields(_obj(item, f"{path}[{i}]"), spec.message, f"{path}[{i}]")
        elif spec.message is not None and (spec.shape == "object" or isinstance(sub, dict)):
            _check_fields(_obj(sub, path), spec.message, path)
        elif spec.leaf is not None:
            _check_leaf(sub, spec.leaf, path)
        else:
            raise _invalid(path, "TYPE_MESSAGE", sub)


@dataclass(frozen=True)
class FunctionDecl:
    name: str
    behavior: str | None  # BLOCKING, NON_BLOCKING; None: the model's default


@dataclass(frozen=True)
class Vad:
    disabled: bool = False
    silence_duration_ms: int | None = None
    prefix_padding_ms: int | None = None
    start_sensitivity: str | None = None
    end_sensitivity: str | None = None


@dataclass(frozen=True)
class Setup:
    model: str
    modalities: tuple[str, ...]
    functions: tuple[FunctionDecl, ...]
    resumption: bool
    handle: str | None
    transparent: bool
    vad: Vad
    input_transcription: bool
    output_transcription: bool
    system_instruction: str


@dataclass(frozen=True)
class ClientContent:
    turns: tuple[tuple[str, str], ...]
    turn_complete: bool


@dataclass(frozen=True)
class RealtimeInput:
    audio: bytes | None = None
    audio_rate: int = 16000
    audio_stream_end: bool = False
    text: str | None = None
    activity_start: bool = False
    activity_end: bool = False


@dataclass(frozen=True)
class FunctionResponse:
    id: str
    name: str
    response: dict[str, Any]


@dataclass(frozen=True)
class ToolResponse:
    responses: tuple[FunctionResponse, ...]


@dataclass(frozen=True)
class ContextUpdate:
    system_instruction: str
    functions: tuple[FunctionDecl, ...]


ClientMessage = Setup | ClientContent | RealtimeInput | ToolResponse | ContextUpdate


@dataclass(frozen=True)
class Parsed:
    message: ClientMessage
    raw_kind: str


def _text_of(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = _list(_obj(content, where).get("parts") or [], f"{where}.parts")
    return " ".join(p.get("text") or "" for p in parts if isinstance(p, dict))


def _int32(value: Any, where: str) -> int | None:
    """An int32 field (checked by `_check_fields` as a 64-bit integer, maybe a string)."""
    if value is None:
        return None
    number = int(value)
    if not -(2**31) <= number < 2**31:
        raise _invalid(where, "TYPE_INT32", value)
    return number


def _functions(tools: Any, where: str) -> tuple[FunctionDecl, ...]:
    if tools is None:
        return ()
    out = []
    for tool in _list(tools, where):
        for decl in _obj(tool, where).get("function_declarations") or []:
            d = _obj(decl, f"{where}.function_declarations")
            if not isinstance(d.get("name"), str):
                raise ProtocolError("Request contains an invalid argument.")
            behavior = d.get("behavior")
            out.append(FunctionDecl(d["name"], None if behavior is None else behavior.upper()))
    return tuple(out)


def parse_context_update(body: Any) -> ContextUpdate:
    c = _obj(body, "context_update")
    tools = _obj(c.get("tools") or {}, "context_update.tools")
    return ContextUpdate(_text_of(c.get("system_instruction"), "context_update.system_instruction"),
                         _functions(tools.get("tools"), "context_update.tools.tools"))


def parse_setup(body: Any) -> Setup:
    s = _obj(body, "setup")
    model = s.get("model")
    if not isinstance(model, str) or not model:
        raise ProtocolError("Request contains an invalid argument.")
    gen = _obj(s.get("generation_config") or {}, "setup.generation_config")
    modalities = gen.get("response_modalities") or ["AUDIO"]
    functions = _functions(s.get("tools"), "setup.tools")
    resumption_cfg = s.get("session_resumption")
    handle, transparent = None, False
    if resumption_cfg is not None:
        r = _obj(resumption_cfg, "setup.session_resumption")
        handle = r.get("handle")
        transparent = bool(r.get("transparent"))
    rt = _obj(s.get("realtime_input_config") or {}, "setup.realtime_input_config")
    aad = _obj(rt.get("automatic_activity_detection") or {},
               "setup.realtime_input_config.automatic_activity_detection")
    where = "setup.realtime_input_config.automatic_activity_detection"
    vad = Vad(
        disabled=bool(aad.get("disabled")),
        silence_duration_ms=_int32(aad.get("silence_duration_ms"), f"{where}.silence_duration_ms"),
        prefix_padding_ms=_int32(aad.get("prefix_padding_ms"), f"{where}.prefix_padding_ms"),
        start_sensitivity=aad.get("start_of_speech_sensitivity"),
        end_sensitivity=aad.get("end_of_speech_sensitivity"),
    )
    return Setup(
        model=model, modalities=tuple(m.upper() for m in modalities), functions=functions,
        resumption=resumption_cfg is not None, handle=handle, transparent=transparent, vad=vad,
        input_transcription=s.get("input_audio_transcription") is not None,
        output_transcription=s.get("output_audio_transcription") is not None,
        system_instruction=_text_of(s.get("system_instruction"), "setup.system_instruction"),
    )


def _audio_rate(mime: Any) -> int:
    if mime is None:
        return 16000
    if not isinstance(mime, str) or not mime.startswith("audio/pcm"):
        raise ProtocolError(f"Unsupported mime type: {str(mime)[:60]}")
    match = RATE.search(mime)
    if match is None:
        return 16000
    digits = match.group(1)
    if len(digits) > 5 or not 8000 <= int(digits) <= 48000:
        raise ProtocolError(f"Unsupported sample rate: {digits[:20]}")
    return int(digits)


def _b64(data: Any, where: str) -> bytes:
    if not isinstance(data, str):
        raise ProtocolError(f"{INVALID_JSON} Invalid value at '{where}'.")
    try:
        # The SDK sends the URL-safe alphabet, raw clients the standard one: accept both.
        raw = base64.b64decode(data.replace("-", "+").replace("_", "/") + "=" * (-len(data) % 4),
                               validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError(f"{INVALID_JSON} Invalid value at '{where}' (TYPE_BYTES), "
                            "Base64 decoding failed.") from None
    if len(raw) % 2:
        raise ProtocolError("Audio data must be 16-bit PCM: an even number of bytes.")
    return raw


def parse_realtime(body: Any) -> RealtimeInput:
    r = _obj(body, "realtime_input")
    audio = None
    rate = 16000
    if "audio" in r:
        blob = _obj(r["audio"], "realtime_input.audio")
        rate = _audio_rate(blob.get("mime_type"))
        audio = _b64(blob.get("data"), "realtime_input.audio.data")
    for i, chunk in enumerate(r.get("media_chunks") or []):
        blob = _obj(chunk, f"realtime_input.media_chunks[{i}]")
        if (blob.get("mime_type") or "audio/pcm").startswith("audio/"):
            rate = _audio_rate(blob.get("mime_type"))
            audio = (audio or b"") + _b64(blob.get("data"), f"realtime_input.media_chunks[{i}].data")
    return RealtimeInput(audio=audio, audio_rate=rate,
                         audio_stream_end=bool(r.get("audio_stream_end")), text=r.get("text"),
                         activity_start=r.get("activity_start") is not None,
                         activity_end=r.get("activity_end") is not None)


def parse_client_content(body: Any) -> ClientContent:
    c = _obj(body, "client_content")
    turns = []
    for i, turn in enumerate(_list(c.get("turns") or [], "client_content.turns")):
        t = _obj(turn, f"client_content.turns[{i}]")
        turns.append((t.get("role") or "user", _text_of(t, f"client_content.turns[{i}]")))
    return ClientContent(tuple(turns), bool(c.get("turn_complete")))


def parse_tool_response(body: Any) -> ToolResponse:
    t = _obj(body, "tool_response")
    out = []
    for i, item in enumerate(_list(t.get("function_responses") or [], "tool_response.function_responses")):
        f = _obj(item, f"tool_response.function_responses[{i}]")
        if not isinstance(f.get("id"), str):
            raise ProtocolError("Request contains an invalid argument.")
        out.append(FunctionResponse(f["id"], f.get("name") or "", f.get("response") or {}))
    return ToolResponse(tuple(out))


_PARSERS: dict[str, Callable[[Any], ClientMessage]] = {
    "setup": parse_setup, "realtime_input": parse_realtime, "client_content": parse_client_content,
    "tool_response": parse_tool_response, "context_update": parse_context_update,
}


def _no_constant(token: str) -> Any:
    raise ProtocolError(f"{INVALID_JSON} Unexpected token: {token}.")


def _integer(token: str) -> int:
    if len(token) > 4000:  # int() refuses 4,300 digits (sys.get_int_max_str_digits) with a ValueError
        raise ProtocolError(f"{INVALID_JSON} Number out of range: {token[:40]}...")
    return int(token)


def _finite(token: str) -> float:
    number = float(token)
    if not math.isfinite(number):
        raise ProtocolError(f"{INVALID_JSON} Number out of range: {token[:40]}.")
    return number


class _Nested(Exception):
    """What `_check_tree` found wrong (a reason with `{path}` in it), and where: the keys and
    indices on the way, innermost first."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.trail: list[str | int] = []


LONE_SURROGATE = f"{INVALID_JSON} Invalid value at '{{path}}' (TYPE_STRING): a lone surrogate, not UTF-8."
TOO_DEEP = f"{INVALID_JSON} Nested deeper than {MAX_DEPTH} levels at '{{path}}'."


def _check_tree(value: Any, depth: int = 1) -> None:
    """No object or list deeper than MAX_DEPTH, and no string or key with a lone surrogate. Pure
    ASCII strings (base64 audio, most text) are skipped in O(1)."""
    if isinstance(value, str):
        if not value.isascii() and _SURROGATE.search(value):
            raise _Nested(LONE_SURROGATE)
        return
    if not isinstance(value, dict | list):
        return
    if depth > MAX_DEPTH:
        raise _Nested(TOO_DEEP)
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, sub in items:
        try:
            if isinstance(key, str):
                _check_tree(key)
            _check_tree(sub, depth + 1)
        except _Nested as exc:
            exc.trail.append(snake(key) if isinstance(key, str) else key)
            raise


def _path(trail: list[str | int]) -> str:
    """A snake_case field path, `setup.tools[0].function_declarations`, from innermost-first keys."""
    path = ""
    for key in reversed(trail):
        if isinstance(key, str):  # a key with a lone surrogate is shown escaped
            key = key.encode(errors="backslashreplace").decode()
        path += f"[{key}]" if isinstance(key, int) else f".{key}" if path else key
    return path


def _values(text: str) -> int:
    """How many values a JSON text holds, give or take one (exact past MAX_VALUES)."""
    count = text.count(",") + text.count("{") + text.count("[")
    if count <= MAX_VALUES:
        return count
    bare = _STRING.sub("", text)
    return bare.count(",") + bare.count("{") + bare.count("[")


def parse_frame(frame: str | bytes) -> Parsed:
    """One client frame (text or binary JSON) as a typed message."""
    try:
        # JSON between systems is UTF-8 (RFC 8259); json.loads would also guess UTF-16 or 32.
        text = frame if isinstance(frame, str) else frame.decode()
    except UnicodeDecodeError:
        raise ProtocolError(MALFORMED) from None
    if _values(text) > MAX_VALUES:
        raise ProtocolError(f"{INVALID_JSON} More than {MAX_VALUES} values in one message.")
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_int=_integer, parse_float=_finite)
    except (ValueError, RecursionError):  # nested past the parser's depth
        raise ProtocolError(MALFORMED) from None
    try:
        _check_tree(data)
    except _Nested as exc:
        raise ProtocolError(exc.problem.format(path=_path(exc.trail))) from None
    if not isinstance(data, dict) or len(data) != 1:
        raise ProtocolError(f"{INVALID_JSON} A message has exactly one of: setup, clientContent, "
                            "realtimeInput, toolResponse.")
    ((key, body),) = data.items()
    parse = _PARSERS.get(snake(key))
    if parse is None:
        raise _unknown(key, "")
    # Checked as sent, before snake_keys, so that a refusal spells the name as the client did.
    _check_fields(data, client_message(), "")
    return Parsed(parse(snake_keys(body)), kind_of(data))

