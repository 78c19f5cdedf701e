"""Gemini Live (BidiGenerateContent, the Developer API's and Vertex AI's): its service, its kinds,
its routes.

A kind is the message's top-level key in snake_case (`tool_call`, `setup_complete`), refined for
two keys: `realtime_input.<part>` (`realtime_input.audio`), and `server_content.<parts>` with the
parts it carries joined by `+` in one fixed order (`server_content.generation_complete+turn_complete`).
The proxy, the emulator, the reference clients and the pcap inspector all spell kinds so, and
profiles match them in either spelling (`toolCall`, `serverContent.turnComplete`).

The emulator, the reference clients and `calibrate` speak this API only and use the module's
functions directly; everything else asks the run's protocol (faultlab.protocols).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from faultlab.protocols.base import Protocol, Service, pcm16_seconds
from faultlab.protocols.plugin import ApiPlugin

# The sample rate in an audio MIME type, `audio/pcm;rate=16000`.
RATE = re.compile(r"rate=(\d+)")
# Sub-objects whose keys are the user's data, not protocol fields.
OPAQUE = frozenset({"args", "response", "parameters", "parameters_json_schema", "response_schema",
                    "response_json_schema", "data"})
# serverContent's parts in the order a kind names them; parts not listed follow, sorted.
SERVER_CONTENT_PARTS = ("interrupted", "generation_complete", "turn_complete", "model_turn",
                        "input_transcription", "output_transcription")
_ORDERED_PARTS = frozenset(SERVER_CONTENT_PARTS)


@functools.lru_cache(maxsize=1024)  # a frame's few key names, met on every frame
def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def snake_keys(obj: Any) -> Any:
    """`obj` with every protocol key in snake_case (data payloads untouched)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            key = snake(k) if isinstance(k, str) else k
            out[key] = v if key in OPAQUE else snake_keys(v)
        return out
    if isinstance(obj, list):
        return [snake_keys(v) for v in obj]
    return obj


def kind_of(message: Mapping[str, Any]) -> str:
    """The kind of one Live API message, a JSON object in either key spelling (`empty` for {});
    `usage_metadata` names a message only when it carries nothing else."""
    # Written for speed (the pcap inspector names every frame): loops that stop at the first key,
    # and one part's kind without the ordering: 1.2 us a `serverContent.modelTurn` where it was 3.8.
    for first in message:
        key = snake(first)
        if key != "usage_metadata":
            break
    else:
        if not message:
            return "empty"
        first = next(iter(message))
        key = snake(first)
    body = message[first]
    # A dict is told without the ABC's check, 0.26 us a message (as in `recognises`).
    if type(body) is not dict and not isinstance(body, Mapping):
        return key
    if key == "realtime_input" and body:
        return f"{key}.{snake(next(iter(body)))}"
    if key == "server_content":
        present = {snake(k) for k, v in body.items() if v}
        if len(present) == 1:
            return f"{key}.{next(iter(present))}"
        parts = [p for p in SERVER_CONTENT_PARTS if p in present]
        parts += sorted(present - _ORDERED_PARTS)
        if parts:
            return f"{key}.{'+'.join(parts)}"
    return key


def kind_matches(actual: str, wanted: str) -> bool:
    """`toolCall` matches `tool_call`; `serverContent.turnComplete` matches a server_content
    message carrying turn_complete among other things."""
    want = ".".join(snake(part) for part in wanted.split("."))
    if actual == want or actual.startswith(want + "."):
        return True
    head, _, sub = want.partition(".")
    a_head, _, a_sub = actual.partition(".")
    return bool(sub) and head == a_head and sub in a_sub.split("+")


def _audio_seconds(blob: dict[str, Any], default_rate: int) -> float:
    match = RATE.search(str(blob.get("mime_type", "")))
    return pcm16_seconds(blob.get("data"), int(match.group(1)) if match else default_rate)


def describe(content: bytes | str) -> dict[str, Any]:
    """`kind` and a few details of one Live API message (empty when it is not one)."""
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(data, dict) or not data:
        return {}
    out: dict[str, Any] = {"kind": kind_of(data)}
    data = {snake(k): v for k, v in data.items()}
    key = out["kind"].partition(".")[0]
    body = snake_keys(data.get(key)) if isinstance(data.get(key), dict) else {}
    if key == "setup":
        resumption = body.get("session_resumption")
        out["model"] = body.get("model")
        if isinstance(resumption, dict) and resumption.get("handle"):
            out["handle"] = resumption["handle"]
    elif key == "realtime_input":
        if isinstance(body.get("audio"), dict):
            out["audio_s"] = round(_audio_seconds(body["audio"], 16000), 4)
    elif key == "tool_call":
        calls = body.get("function_calls") or []
        out["ids"] = [c.get("id") for c in calls if isinstance(c, dict)]
        out["names"] = [c.get("name") for c in calls if isinstance(c, dict)]
    elif key == "tool_response":
        responses = body.get("function_responses") or []
        out["ids"] = [r.get("id") for r in responses if isinstance(r, dict)]
    elif key == "session_resumption_update":
        out["handle"] = body.get("new_handle")
        out["resumable"] = body.get("resumable")
    elif key == "go_away":
        out["time_left"] = body.get("time_left")
    elif key == "server_content":
        parts = (body.get("model_turn") or {}).get("parts") or []
        audio = sum(_audio_seconds(p["inline_data"], 24000) for p in parts
                    if isinstance(p, dict) and isinstance(p.get("inline_data"), dict))
        texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if audio:
            out["audio_s"] = round(audio, 4)
        if texts:
            out["text"] = " ".join(texts)[:200]
        for field in ("input_transcription", "output_transcription"):
            if isinstance(body.get(field), dict):
                out[field] = str(body[field].get("text", ""))[:200]
    return out


def category_of(kind: str) -> str:
    """The colour group of a kind in the swimlanes."""
    head, _, parts = kind.partition(".")
    if head in ("setup", "setup_complete"):
        return "setup"
    if head == "realtime_input" or (head == "server_content" and "model_turn" in parts):
        return "audio"
    if head in ("tool_call", "tool_call_cancellation"):
        return "tool_call"
    if head == "tool_response":
        return "tool_response"
    if head == "server_content" and ("turn_complete" in parts or "generation_complete" in parts):
        return "turn_complete"
    if head == "session_resumption_update":
        return "resumption"
    if head == "go_away":
        return "close"
    return "content"


DEVELOPER_PATH = re.compile(
    r"/ws/google\.ai\.generativelanguage\.v1(alpha|beta)?\.GenerativeService\."
    r"BidiGenerateContent(Constrained)?$")
VERTEX_PATH = re.compile(r"/ws/google\.cloud\.aiplatform\.v1(beta1)?\.LlmBidiService/BidiGenerateContent$")


def dialect_of(path: str) -> str | None:
    """`developer`, `vertex`, or None for a path the service does not serve."""
    # Collapse slashes first: urlsplit reads a leading "//ws" as a host name.
    clean = re.sub(r"/{2,}", "/", path.split("?", 1)[0])
    if DEVELOPER_PATH.search(clean):
        return "developer"
    if VERTEX_PATH.search(clean):
        return "vertex"
    return None


class GeminiLive(Protocol):
    name: ClassVar[str] = "gemini"
    service: ClassVar[Service] = Service(
        name="gemini",
        hosts=("generativelanguage.googleapis.com", "aiplatform.googleapis.com",
               "us-central1-aiplatform.googleapis.com", "europe-west4-aiplatform.googleapis.com"),
        certificate_names=("generativelanguage.googleapis.com", "aiplatform.googleapis.com",
                           "*.aiplatform.googleapis.com"),
        base_url_variables=("GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL"),
    )
    credential_params: ClassVar[tuple[str, ...]] = ("key", "access_token")
    credential_headers: ClassVar[tuple[str, ...]] = ("x-goog-api-key", "authorization")
    dialects: ClassVar[tuple[str, ...]] = ("developer", "vertex")
    secret_env: ClassVar[tuple[str, ...]] = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
    reply_kinds: ClassVar[tuple[str, ...]] = ("serverContent.modelTurn", "toolCall")
    stream_kinds: ClassVar[tuple[str, ...]] = ("realtimeInput.audio", "realtimeInput.video",
                                               "realtimeInput.mediaChunks")

    # The module's functions, which the Gemini-only code (emulator, clients) calls directly.
    kind_of = staticmethod(kind_of)
    kind_matches = staticmethod(kind_matches)
    describe = staticmethod(describe)
    category_of = staticmethod(category_of)
    dialect_of = staticmethod(dialect_of)

    def recognises(self, message: Mapping[str, Any]) -> bool:
        # One message kind per object: every top-level value an object (`setupComplete: {}`).
        if not message:
            return False
        for value in message.values():
            # A dict is told without the ABC's check: 0.2 us a message where `all` took 0.8.
            if type(value) is not dict and not isinstance(value, Mapping):
                return False
        return True

    def normalise(self, data: Any) -> Any:
        # Profiles address fields in snake_case, whichever spelling the client sent.
        return snake_keys(data)

    def label_of(self, kind: str) -> str:
        return kind.removeprefix("server_content.")


GEMINI = GeminiLive()

# Gemini Live as a plugin (pyproject.toml's `faultlab.apis` entry point `gemini`).
API = ApiPlugin(
    name="gemini", protocol_ref="faultlab.protocols.gemini:GEMINI",
    emulated_ref="faultlab.emulator.apis.gemini:GEMINI_API",
    personalities_ref="faultlab.emulator.personality:GEMINI_PERSONALITIES",
    default_personality="gemini-dev-2026-10",
    quirks_ref="faultlab.emulator.apis.gemini_quirks:GeminiQuirks",
    probes_ref="faultlab.calibrate:GEMINI_PROBES",
    # Its booking clients are the booking pack's (faultlab.scenarios.booking).
    builtins={"live-probe": "faultlab.clients.probe"},
)
