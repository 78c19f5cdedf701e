"""OpenAI Realtime over WebSocket (`wss://api.openai.com/v1/realtime?model=...`): its service, its
kinds, its route.

Every message, either way, is a JSON object whose `type` names it (`session.update`,
`response.output_audio.delta`, `error`): that is its kind, as sent. The GA protocol
renamed a few of the beta's server events; a profile may name either, and matches both
(`response.audio.delta` is `response.output_audio.delta`). A kind also matches the kinds it
prefixes at a dot: `response.function_call_arguments` means its `delta` and its `done`.

Audio is base64 PCM16 at 24 kHz both ways unless the session says otherwise (its default).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from faultlab.protocols.base import Protocol, Service, pcm16_seconds
from faultlab.protocols.plugin import ApiPlugin

# The PCM16 sample rate of the session's audio by default, both ways.
AUDIO_RATE = 24000
# Server events the GA protocol renamed: the beta's name (or the start of its names) -> the GA
# one. `response.audio.delta` is `response.output_audio.delta`, `response.audio` its prefix.
BETA_NAMES = {
    "response.text": "response.output_text",
    "response.audio": "response.output_audio",
    "response.audio_transcript": "response.output_audio_transcript",
    "conversation.item.created": "conversation.item.added",
}
ROUTES = ("/v1/realtime",)


def ga_name(kind: str) -> str:
    """A kind (or the start of one) as the GA protocol names it."""
    for beta, ga in BETA_NAMES.items():
        if kind == beta or kind.startswith(beta + "."):
            return ga + kind[len(beta):]
    return kind


def kind_of(message: Mapping[str, Any]) -> str:
    """The kind of one message: its `type` (`untyped` when it has none)."""
    kind = message.get("type")
    return kind if isinstance(kind, str) and kind else "untyped"


def kind_matches(actual: str, wanted: str) -> bool:
    """The same kind in either protocol's name, or one it prefixes at a dot."""
    actual, wanted = ga_name(actual), ga_name(wanted)
    return actual == wanted or actual.startswith(wanted + ".")


def describe(content: bytes | str) -> dict[str, Any]:
    """`kind` and a few details of one message (empty when it is not one)."""
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        return {}
    kind = data["type"]
    out: dict[str, Any] = {"kind": kind}
    ga = ga_name(kind)
    if ga in ("input_audio_buffer.append", "response.output_audio.delta"):
        out["audio_s"] = round(pcm16_seconds(data.get("audio", data.get("delta")), AUDIO_RATE), 4)
    elif ga in ("response.output_text.delta", "response.output_audio_transcript.delta"):
        out["text"] = str(data.get("delta", ""))[:200]
    elif ga in ("session.created", "session.updated", "session.update"):
        session = data.get("session")
        if isinstance(session, dict) and session.get("model"):
            out["model"] = session["model"]
    elif ga == "response.function_call_arguments.done":
        out["ids"], out["names"] = [data.get("call_id")], [data.get("name")]
    elif ga == "conversation.item.create":
        item = data.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            out["ids"] = [item.get("call_id")]
    elif ga == "response.done":
        response = data.get("response")
        if isinstance(response, dict):
            out["status"] = response.get("status")
    elif ga == "error":
        error = data.get("error")
        if isinstance(error, dict):
            out.update({f"error_{k}": error[k] for k in ("type", "code", "param")
                        if error.get(k)})
    return out


def category_of(kind: str) -> str:
    """The colour group of a kind in the swimlanes."""
    ga = ga_name(kind)
    head = ga.partition(".")[0]
    if head == "session":
        return "setup"
    if ga in ("input_audio_buffer.append", "response.output_audio.delta"):
        return "audio"
    if ga.startswith("response.function_call_arguments."):
        return "tool_call"
    if ga == "response.done":
        return "turn_complete"
    if ga == "error":
        return "refused"
    return "content"


def dialect_of(path: str) -> str | None:
    """`realtime` for the service's WebSocket route, None for a path it does not serve."""
    clean = "/" + path.split("?", 1)[0].strip("/")
    return "realtime" if clean in ROUTES else None


class OpenAIRealtime(Protocol):
    name: ClassVar[str] = "openai"
    service: ClassVar[Service] = Service(
        name="openai",
        hosts=("api.openai.com",),
        certificate_names=("api.openai.com",),
        # The official SDKs' (Python, Node): a base URL ending in /v1.
        base_url_variables=("OPENAI_BASE_URL",),
        base_path="/v1",
    )
    credential_params: ClassVar[tuple[str, ...]] = ()
    # Azure OpenAI's key header beside the bearer token.
    credential_headers: ClassVar[tuple[str, ...]] = ("authorization", "api-key")
    # A browser's key, offered as a subprotocol beside "realtime".
    credential_subprotocols: ClassVar[tuple[str, ...]] = ("openai-insecure-api-key.",)
    # What the service chooses of a browser's offer (docs/openai-realtime.md, O1).
    subprotocols: ClassVar[tuple[str, ...]] = ("realtime",)
    dialects: ClassVar[tuple[str, ...]] = ("realtime",)
    secret_env: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)
    reply_kinds: ClassVar[tuple[str, ...]] = (
        "response.output_audio.delta", "response.output_text.delta",
        "response.output_audio_transcript.delta", "response.function_call_arguments.done")
    stream_kinds: ClassVar[tuple[str, ...]] = ("input_audio_buffer.append",)
    # POST /v1/realtime/calls (docs/openai-realtime.md, "WebRTC").
    webrtc: ClassVar[bool] = True

    # The module's functions.
    kind_of = staticmethod(kind_of)
    kind_matches = staticmethod(kind_matches)
    describe = staticmethod(describe)
    category_of = staticmethod(category_of)
    dialect_of = staticmethod(dialect_of)

    def recognises(self, message: Mapping[str, Any]) -> bool:
        return isinstance(message.get("type"), str)

    def normalise(self, data: Any) -> Any:
        # Its fields are snake_case on the wire already.
        return data


OPENAI = OpenAIRealtime()

# OpenAI Realtime as a plugin (pyproject.toml's `faultlab.apis` entry point `openai`).
API = ApiPlugin(
    name="openai", protocol_ref="faultlab.protocols.openai:OPENAI",
    emulated_ref="faultlab.emulator.apis.openai:OPENAI_API",
    personalities_ref="faultlab.emulator.personality:OPENAI_PERSONALITIES",
    default_personality="openai-realtime", probes_ref="faultlab.calibrate:OPENAI_PROBES",
    # Its booking clients are the booking pack's (faultlab.scenarios.booking).
)
