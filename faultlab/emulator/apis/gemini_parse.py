"""Gemini Live's client frames, parsed into the core's messages; bad input raises `ProtocolError`.

The SDK camelCases only some levels and passes other sub-objects in snake_case, and raw clients
use either spelling: every key is accepted both ways. A frame is first read as strict JSON within
the emulator's limits (`strictjson`), then its fields are checked against the installed SDK's
(`conformance`), then the message is read into its type here. Every input error is a
`ProtocolError` (1007, or 1008 for a model not served: `refusals`), never another exception.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from faultlab.emulator.conformance import check_fields
from faultlab.emulator.messages import (
    ClientMessage,
    Configure,
    FunctionDecl,
    FunctionResponse,
    FunctionResults,
    Input,
    Parsed,
    Setup,
    UserContent,
    Vad,
)
from faultlab.emulator.refusals import (
    INVALID_JSON,
    ProtocolError,
    invalid_value,
    list_at,
    object_at,
    unknown_name,
)
from faultlab.emulator.schema import client_message
from faultlab.emulator.strictjson import load_frame
from faultlab.protocols.gemini import RATE, kind_of, snake, snake_keys


def _text_of(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = list_at(object_at(content, where).get("parts") or [], f"{where}.parts")
    return " ".join(p.get("text") or "" for p in parts if isinstance(p, dict))


def _int32(value: Any, where: str) -> int | None:
    """An int32 field (checked by `_check_fields` as a 64-bit integer, maybe a string)."""
    if value is None:
        return None
    number = int(value)
    if not -(2**31) <= number < 2**31:
        raise invalid_value(where, "TYPE_INT32", value)
    return number


def _functions(tools: Any, where: str) -> tuple[FunctionDecl, ...]:
    if tools is None:
        return ()
    out = []
    for tool in list_at(tools, where):
        for decl in object_at(tool, where).get("function_declarations") or []:
            d = object_at(decl, f"{where}.function_declarations")
            if not isinstance(d.get("name"), str):
                raise ProtocolError("Request contains an invalid argument.")
            behavior = d.get("behavior")
            out.append(FunctionDecl(d["name"], None if behavior is None else behavior.upper()))
    return tuple(out)


def parse_context_update(body: Any) -> Configure:
    c = object_at(body, "context_update")
    tools = object_at(c.get("tools") or {}, "context_update.tools")
    return Configure(_text_of(c.get("system_instruction"), "context_update.system_instruction"),
                         _functions(tools.get("tools"), "context_update.tools.tools"))


def parse_setup(body: Any) -> Setup:
    s = object_at(body, "setup")
    model = s.get("model")
    if not isinstance(model, str) or not model:
        raise ProtocolError("Request contains an invalid argument.")
    gen = object_at(s.get("generation_config") or {}, "setup.generation_config")
    modalities = gen.get("response_modalities") or ["AUDIO"]
    functions = _functions(s.get("tools"), "setup.tools")
    resumption_cfg = s.get("session_resumption")
    handle, transparent = None, False
    if resumption_cfg is not None:
        r = object_at(resumption_cfg, "setup.session_resumption")
        handle = r.get("handle")
        transparent = bool(r.get("transparent"))
    rt = object_at(s.get("realtime_input_config") or {}, "setup.realtime_input_config")
    aad = object_at(rt.get("automatic_activity_detection") or {},
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


def parse_realtime(body: Any) -> Input:
    r = object_at(body, "realtime_input")
    audio = None
    rate = 16000
    if "audio" in r:
        blob = object_at(r["audio"], "realtime_input.audio")
        rate = _audio_rate(blob.get("mime_type"))
        audio = _b64(blob.get("data"), "realtime_input.audio.data")
    for i, chunk in enumerate(r.get("media_chunks") or []):
        blob = object_at(chunk, f"realtime_input.media_chunks[{i}]")
        if (blob.get("mime_type") or "audio/pcm").startswith("audio/"):
            rate = _audio_rate(blob.get("mime_type"))
            audio = (audio or b"") + _b64(blob.get("data"), f"realtime_input.media_chunks[{i}].data")
    return Input(audio=audio, audio_rate=rate,
                         audio_stream_end=bool(r.get("audio_stream_end")), text=r.get("text"),
                         activity_start=r.get("activity_start") is not None,
                         activity_end=r.get("activity_end") is not None)


def parse_client_content(body: Any) -> UserContent:
    c = object_at(body, "client_content")
    turns = []
    for i, turn in enumerate(list_at(c.get("turns") or [], "client_content.turns")):
        t = object_at(turn, f"client_content.turns[{i}]")
        turns.append((t.get("role") or "user", _text_of(t, f"client_content.turns[{i}]")))
    return UserContent(tuple(turns), bool(c.get("turn_complete")))


def parse_tool_response(body: Any) -> FunctionResults:
    t = object_at(body, "tool_response")
    out = []
    for i, item in enumerate(list_at(t.get("function_responses") or [], "tool_response.function_responses")):
        f = object_at(item, f"tool_response.function_responses[{i}]")
        if not isinstance(f.get("id"), str):
            raise ProtocolError("Request contains an invalid argument.")
        out.append(FunctionResponse(f["id"], f.get("name") or "", f.get("response") or {}))
    return FunctionResults(tuple(out))


_PARSERS: dict[str, Callable[[Any], ClientMessage]] = {
    "setup": parse_setup, "realtime_input": parse_realtime, "client_content": parse_client_content,
    "tool_response": parse_tool_response, "context_update": parse_context_update,
}


def parse_frame(frame: str | bytes) -> Parsed:
    """One client frame (text or binary JSON) as a typed message."""
    data = load_frame(frame)
    if not isinstance(data, dict) or len(data) != 1:
        raise ProtocolError(f"{INVALID_JSON} A message has exactly one of: setup, clientContent, "
                            "realtimeInput, toolResponse.")
    ((key, body),) = data.items()
    parse = _PARSERS.get(snake(key))
    if parse is None:
        raise unknown_name(key, "")
    # Checked as sent, before snake_keys, so that a refusal spells the name as the client did.
    check_fields(data, client_message(), "")
    return Parsed(parse(snake_keys(body)), kind_of(data))
