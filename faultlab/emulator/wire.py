"""The Live API's client frames, parsed into typed messages; bad input raises `ProtocolError`.

The SDK camelCases only some levels and passes other sub-objects in snake_case, and raw clients
use either spelling: every key is accepted both ways. Which keys exist, at every level, is the
installed SDK's business (`schema`); an unknown one is refused as the service does, spelled as sent
at a snake_case path. Payloads the model reads as data (function arguments, tool results, schemas)
keep their keys as sent.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from faultlab.emulator.schema import Message, client_message
from faultlab.livewire import kind_of, snake, snake_keys

INVALID_JSON = "Invalid JSON payload received."
CLOSE_REASON_BYTES = 123
# Developer API `models/<id>`; Vertex `publishers/google/models/<id>`, optionally under
# `projects/<p>/locations/<l>/`.
MODEL_NAME = re.compile(
    r"^(models/|(projects/[^/]+/locations/[^/]+/)?publishers/[^/]+/models/)[A-Za-z0-9._-]+$")


class ProtocolError(Exception):
    """A client frame the service rejects: closed with `code` and `reason` (<= 123 bytes)."""

    def __init__(self, reason: str, code: int = 1007) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason.encode()[:CLOSE_REASON_BYTES].decode(errors="ignore")


def _unknown(name: str, where: str) -> ProtocolError:
    at = f" at '{where}'" if where else ""
    return ProtocolError(f'{INVALID_JSON} Unknown name "{name}"{at}: Cannot find field.')


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{INVALID_JSON} Invalid value at '{where}': expected an object.")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError(f"{INVALID_JSON} Invalid value at '{where}'.")
    return value


def _check_fields(value: dict[str, Any], message: Message, where: str) -> None:
    """Every key of `value`, at every depth, names a field of `message` in either spelling, and a
    field of a message type holds an object (or a list of them); leaves are not looked into."""
    for key, sub in value.items():
        name = snake(key)
        spec = message.fields.get(name)
        if spec is None:
            raise _unknown(key, where)
        if spec.message is None or sub is None:
            continue
        path = f"{where}.{name}" if where else name
        if spec.shape == "list":
            for i, item in enumerate(_list(sub, path)):
                _check_fields(_obj(item, f"{path}[{i}]"), spec.message, f"{path}[{i}]")
        elif spec.shape == "object" or isinstance(sub, dict):
            _check_fields(_obj(sub, path), spec.message, path)


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
    parts = _list(_obj(content, where).get("parts", []), f"{where}.parts")
    return " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


def _int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ProtocolError(f"{INVALID_JSON} Invalid value at '{where}' ({value!r}).")
    try:
        return int(value)
    except ValueError:
        raise ProtocolError(f"{INVALID_JSON} Invalid value at '{where}' ({value!r}).") from None


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
            out.append(FunctionDecl(d["name"], None if behavior is None else str(behavior).upper()))
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
    if not MODEL_NAME.match(model):
        raise ProtocolError(f"{model[:60]} is not found for API version v1beta, or is not "
                            "supported for bidiGenerateContent.", code=1008)
    gen = _obj(s.get("generation_config") or {}, "setup.generation_config")
    modalities = gen.get("response_modalities") or ["AUDIO"]
    if not isinstance(modalities, list) or not all(isinstance(m, str) for m in modalities):
        raise ProtocolError(f"{INVALID_JSON} Invalid value at 'setup.generation_config.response_modalities'.")
    functions = _functions(s.get("tools"), "setup.tools")
    resumption_cfg = s.get("session_resumption")
    handle, transparent = None, False
    if resumption_cfg is not None:
        r = _obj(resumption_cfg, "setup.session_resumption")
        handle = r.get("handle")
        if handle is not None and not isinstance(handle, str):
            raise ProtocolError("Request contains an invalid argument.")
        transparent = bool(r.get("transparent", False))
    rt = _obj(s.get("realtime_input_config") or {}, "setup.realtime_input_config")
    aad = _obj(rt.get("automatic_activity_detection") or {},
               "setup.realtime_input_config.automatic_activity_detection")
    where = "setup.realtime_input_config.automatic_activity_detection"
    vad = Vad(
        disabled=bool(aad.get("disabled", False)),
        silence_duration_ms=_int(aad.get("silence_duration_ms"), f"{where}.silence_duration_ms"),
        prefix_padding_ms=_int(aad.get("prefix_padding_ms"), f"{where}.prefix_padding_ms"),
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
    match = re.search(r"rate=(\d+)", mime)
    rate = int(match.group(1)) if match else 16000
    if not 8000 <= rate <= 48000:
        raise ProtocolError(f"Unsupported sample rate: {rate}")
    return rate


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
    for chunk in r.get("media_chunks") or []:
        blob = _obj(chunk, "realtime_input.media_chunks")
        if str(blob.get("mime_type", "audio/pcm")).startswith("audio/"):
            rate = _audio_rate(blob.get("mime_type"))
            audio = (audio or b"") + _b64(blob.get("data"), "realtime_input.media_chunks.data")
    text = r.get("text")
    if text is not None and not isinstance(text, str):
        raise ProtocolError(f"{INVALID_JSON} Invalid value at 'realtime_input.text'.")
    return RealtimeInput(audio=audio, audio_rate=rate,
                         audio_stream_end=bool(r.get("audio_stream_end", False)), text=text,
                         activity_start="activity_start" in r, activity_end="activity_end" in r)


def parse_client_content(body: Any) -> ClientContent:
    c = _obj(body, "client_content")
    turns = []
    for turn in _list(c.get("turns") or [], "client_content.turns"):
        t = _obj(turn, "client_content.turns")
        turns.append((str(t.get("role", "user")), _text_of(t, "client_content.turns")))
    return ClientContent(tuple(turns), bool(c.get("turn_complete", False)))


def parse_tool_response(body: Any) -> ToolResponse:
    t = _obj(body, "tool_response")
    out = []
    for item in _list(t.get("function_responses") or [], "tool_response.function_responses"):
        f = _obj(item, "tool_response.function_responses")
        if not isinstance(f.get("id"), str):
            raise ProtocolError("Request contains an invalid argument.")
        response = f.get("response") or {}
        if not isinstance(response, dict):
            raise ProtocolError(
                f"{INVALID_JSON} Invalid value at 'tool_response.function_responses.response'.")
        out.append(FunctionResponse(f["id"], str(f.get("name", "")), response))
    return ToolResponse(tuple(out))


_PARSERS: dict[str, Callable[[Any], ClientMessage]] = {
    "setup": parse_setup, "realtime_input": parse_realtime, "client_content": parse_client_content,
    "tool_response": parse_tool_response, "context_update": parse_context_update,
}


def parse_frame(frame: str | bytes) -> Parsed:
    """One client frame (text or binary JSON) as a typed message."""
    try:
        data = json.loads(frame)
    except (ValueError, UnicodeDecodeError, RecursionError):  # nested past the parser's depth
        raise ProtocolError(f"{INVALID_JSON} Closing due to a malformed message.") from None
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

