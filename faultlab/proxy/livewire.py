"""What a Live API WebSocket message is, in a few fields fit for an event (secrets redacted).

Works on both directions and both key spellings; anything that is not Live API JSON is described
by its size only.
"""

from __future__ import annotations

import json
import re
from typing import Any

from faultlab.emulator.wire import snake_keys

_RATE = re.compile(r"rate=(\d+)")


def _audio_seconds(blob: dict[str, Any], default_rate: int) -> float:
    data = blob.get("data")
    if not isinstance(data, str):
        return 0.0
    mime = str(blob.get("mime_type", ""))
    match = _RATE.search(mime)
    rate = int(match.group(1)) if match else default_rate
    size = len(data) * 3 // 4 - data[-2:].count("=")
    return size / 2 / rate


def describe(content: bytes | str) -> dict[str, Any]:
    """`kind` and a few details of one Live API message (empty when it is not one)."""
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(data, dict) or not data:
        return {}
    data = snake_keys(data)
    key = next(iter(data))
    body = data[key] if isinstance(data[key], dict) else {}
    out: dict[str, Any] = {"kind": key}
    if key == "setup":
        resumption = body.get("session_resumption")
        out["model"] = body.get("model")
        if isinstance(resumption, dict) and resumption.get("handle"):
            out["handle"] = resumption["handle"]
    elif key == "realtime_input":
        if isinstance(body.get("audio"), dict):
            out["kind"] = "realtime_input.audio"
            out["audio_s"] = round(_audio_seconds(body["audio"], 16000), 4)
        elif body:
            out["kind"] = f"realtime_input.{next(iter(body))}"
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
        flags = [k for k in ("interrupted", "generation_complete", "turn_complete") if body.get(k)]
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
        subkinds = flags + [k for k in ("model_turn", "input_transcription", "output_transcription")
                            if body.get(k)]
        if subkinds:
            out["kind"] = "server_content." + "+".join(subkinds)
    return out
