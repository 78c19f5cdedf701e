"""OpenAI Realtime's client events (the GA protocol of 2025-08) parsed into the core's messages;
bad input raises `ProtocolError`, which the API tells in-band (docs/openai-realtime.md O6)."""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from typing import Any

from faultlab.emulator.messages import (
    Cancel,
    ClientMessage,
    Configure,
    FunctionDecl,
    FunctionResponse,
    FunctionResults,
    Input,
    Other,
    Parsed,
    Respond,
    UserContent,
    Vad,
)
from faultlab.emulator.refusals import ProtocolError
from faultlab.emulator.strictjson import load_frame
from faultlab.protocols.openai import AUDIO_RATE

# What the service answers an event it does not know, and every event it does.
CLIENT_EVENTS = (
    "session.update", "input_audio_buffer.append", "input_audio_buffer.commit",
    "input_audio_buffer.clear", "conversation.item.create", "conversation.item.delete",
    "conversation.item.truncate", "conversation.item.retrieve", "response.create",
    "response.cancel", "output_audio_buffer.clear")
# The session's turn detection by default (O13: server VAD, 500 ms of silence, 300 ms of padding
# documented; a capture of the service in 2025-12 showed 200 ms of silence).
DEFAULT_VAD = Vad(silence_duration_ms=500, prefix_padding_ms=300)

def _error(message: str, param: str | None = None, code: str = "invalid_value") -> ProtocolError:
    return ProtocolError(message, error_code=code, param=param)


def _object(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _error(f"Invalid type for '{param}': expected an object, but got "
                     f"{type(value).__name__} instead.", param, "invalid_type")
    return value


def _string(value: Any, param: str) -> str:
    if not isinstance(value, str):
        raise _error(f"Invalid type for '{param}': expected a string, but got "
                     f"{type(value).__name__} instead.", param, "invalid_type")
    return value


def _required(body: Mapping[str, Any], name: str, where: str) -> Any:
    if name not in body:
        param = f"{where}.{name}" if where else name
        raise _error(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")
    return body[name]


def _vad(value: Any) -> Vad:
    """`audio.input.turn_detection`: null turns it off; semantic VAD is served as server VAD."""
    if value is None:
        return Vad(disabled=True)
    detection = _object(value, "session.audio.input.turn_detection")
    kind = detection.get("type")
    if kind not in ("server_vad", "semantic_vad"):
        raise _error(f"Invalid value: '{kind}'. Supported values are: 'server_vad' and "
                     "'semantic_vad'.", "session.audio.input.turn_detection.type")
    silence, padding = detection.get("silence_duration_ms"), detection.get("prefix_padding_ms")
    for name, number in (("silence_duration_ms", silence), ("prefix_padding_ms", padding)):
        if number is not None and (not isinstance(number, int) or number < 0):
            raise _error(f"Invalid value for 'session.audio.input.turn_detection.{name}'.",
                         f"session.audio.input.turn_detection.{name}")
    return Vad(silence_duration_ms=silence or DEFAULT_VAD.silence_duration_ms,
               prefix_padding_ms=padding or DEFAULT_VAD.prefix_padding_ms)


def _functions(tools: Any) -> tuple[FunctionDecl, ...]:
    if not isinstance(tools, list):
        raise _error("Invalid type for 'session.tools': expected an array.", "session.tools",
                     "invalid_type")
    out = []
    for i, tool in enumerate(tools):
        t = _object(tool, f"session.tools[{i}]")
        if t.get("type", "function") != "function":
            continue  # MCP tools: not emulated
        out.append(FunctionDecl(_string(_required(t, "name", f"session.tools[{i}]"),
                                        f"session.tools[{i}].name"), None, declaration=t))
    return tuple(out)


def parse_session_update(body: dict[str, Any]) -> Configure:
    session = _object(_required(body, "session", ""), "session")
    if _required(session, "type", "session") != "realtime":
        raise _error(f"Invalid value: '{session['type']}'. Supported values are: 'realtime'.",
                     "session.type")
    modalities = None
    if "output_modalities" in session:
        asked = session["output_modalities"]
        if asked not in (["audio"], ["text"]):
            raise _error("Invalid modalities: output_modalities is either ['audio'] or ['text'].",
                         "session.output_modalities")
        modalities = (asked[0].upper(),)
    audio_in = _object(_object(session.get("audio") or {}, "session.audio").get("input") or {},
                       "session.audio.input")
    if "format" in audio_in:
        fmt = _object(audio_in["format"], "session.audio.input.format")
        if fmt.get("type") != "audio/pcm" or fmt.get("rate", AUDIO_RATE) != AUDIO_RATE:
            raise _error("The emulator takes audio/pcm at 24000 Hz only.",
                         "session.audio.input.format", "unsupported_value")
    instructions = session.get("instructions")
    return Configure(
        system_instruction=_string(instructions, "session.instructions") if instructions else "",
        functions=_functions(session["tools"]) if "tools" in session else (),
        replace_functions="tools" in session,
        modalities=modalities,
        vad=_vad(audio_in["turn_detection"]) if "turn_detection" in audio_in else None,
        input_transcription=(audio_in["transcription"] is not None
                             if "transcription" in audio_in else None))


def _audio(data: Any, param: str) -> bytes:
    try:
        # base64.b64decode(validate=True) as its core: the text taken as it is rather than
        # encoded to ASCII bytes first (non-ASCII raises ValueError either way); 100 ms of
        # 24 kHz audio decoded in 19 us rather than 30.
        raw = binascii.a2b_base64(_string(data, param), strict_mode=True)
    except (binascii.Error, ValueError):
        raise _error("Invalid 'audio'. Expected base64-encoded audio bytes.", param) from None
    if len(raw) % 2:
        raise _error("Audio must be 16-bit PCM: an even number of bytes.", param)
    return raw


def _text(content: Any) -> str:
    if not isinstance(content, list):
        raise _error("Invalid type for 'item.content': expected an array.", "item.content",
                     "invalid_type")
    parts = [_object(p, "item.content") for p in content]
    return " ".join(str(p.get("text") or p.get("transcript") or "") for p in parts).strip()


def _result(output: str) -> dict[str, Any]:
    """A function's output (a string, often JSON) as the core keeps results: a JSON object as
    it is (read within the emulator's limits), anything else under `output`."""
    try:
        value = load_frame(output)
    except ProtocolError:
        return {"output": output}
    return value if isinstance(value, dict) else {"output": value}


def parse_item(body: dict[str, Any]) -> ClientMessage:
    item = _object(_required(body, "item", ""), "item")
    if "id" in item:
        _string(item["id"], "item.id")
    kind = _required(item, "type", "item")
    if kind == "message":
        role = _required(item, "role", "item")
        if role not in ("user", "system", "assistant"):
            raise _error(f"Invalid value: '{role}'. Supported values are: 'user', 'assistant', "
                         "and 'system'.", "item.role")
        return UserContent(((role if role != "assistant" else "model",
                             _text(_required(item, "content", "item"))),), turn_complete=False)
    if kind == "function_call_output":
        call_id = _string(_required(item, "call_id", "item"), "item.call_id")
        output = _string(_required(item, "output", "item"), "item.output")
        return FunctionResults((FunctionResponse(call_id, "", _result(output)),), answer=False)
    if kind == "function_call":
        return Other()
    raise _error(f"Invalid value: '{kind}'. Supported values are: 'message', 'function_call', "
                 "and 'function_call_output'.", "item.type")


def parse_event(frame: str | bytes) -> Parsed:
    data = load_frame(frame)
    if not isinstance(data, dict):
        raise _error("Invalid JSON: a client event is an object.", None, "invalid_json")
    event_id = data.get("event_id") if isinstance(data.get("event_id"), str) else None
    kind = data.get("type")
    try:
        if not isinstance(kind, str):
            raise _error("The 'type' field is missing.", "type", "invalid_event")
        message: ClientMessage
        if kind == "session.update":
            message = parse_session_update(data)
        elif kind == "input_audio_buffer.append":
            message = Input(audio=_audio(_required(data, "audio", ""), "audio"),
                            audio_rate=AUDIO_RATE, buffered=True)
        elif kind == "input_audio_buffer.commit":
            message = Input(commit=True)
        elif kind == "input_audio_buffer.clear":
            message = Input(clear=True)
        elif kind == "conversation.item.create":
            message = parse_item(data)
        elif kind == "response.create":
            message = Respond()
        elif kind == "response.cancel":
            message = Cancel()
        elif kind in CLIENT_EVENTS:
            message = Other()
        else:
            raise _error(f"Invalid value: '{kind[:60]}'. Supported values are: "
                         + ", ".join(f"'{k}'" for k in CLIENT_EVENTS) + ".", "type")
    except ProtocolError as exc:
        exc.event_id = event_id
        raise
    return Parsed(message, kind, data=data, event_id=event_id)
