"""pipecat's OpenAIRealtimeLLMService (pipecat-ai/pipecat acead05, services/openai/realtime/llm.py
and events.py), reproduced: the events it sends, in its order and with its fields, and what of
the server's events would stop its receive loop."""

from __future__ import annotations

import uuid
from typing import Any

from .events import (
    BOOK_INSTRUCTIONS,
    MISSING,
    Event,
    field_at,
    read_until,
)

PIPECAT_MODEL = "gpt-realtime-2.1"  # llm.py:292, in the URL's ?model= (llm.py:334)
# adapters/services/open_ai_realtime_adapter.py:217-226: a tool as the service sends it.
PIPECAT_TOOL = {"type": "function", "name": "book_slot", "description": "Book an appointment slot.",
                "parameters": {"type": "object",
                               "properties": {"slot": {"type": "string", "description": "When"}},
                               "required": ["slot"]}}
# events.py:1106-1138: the events it parses; anything else raises in parse_server_event
# (events.py:1156-1157), out of the receive loop (llm.py:836-837), which ends. And each model's
# fields without a default (events.py:346-1103): a missing one raises there too.
_IDS = ("response_id", "item_id", "output_index", "content_index")
_RESPONSE = ("response.id", "response.object", "response.status", "response.output")
PIPECAT_REQUIRED: dict[str, tuple[str, ...]] = {
    "error": ("error.type", "error.message"),
    "session.created": ("session",), "session.updated": ("session",),
    "conversation.created": ("conversation.id", "conversation.object"),
    "input_audio_buffer.committed": ("item_id",), "input_audio_buffer.cleared": (),
    "input_audio_buffer.speech_started": ("audio_start_ms", "item_id"),
    "input_audio_buffer.speech_stopped": ("audio_end_ms", "item_id"),
    "conversation.item.added": ("item.type",), "conversation.item.done": ("item.type",),
    "conversation.item.input_audio_transcription.delta": ("item_id", "content_index", "delta"),
    "conversation.item.input_audio_transcription.completed": (
        "item_id", "content_index", "transcript"),
    "conversation.item.input_audio_transcription.failed": (
        "item_id", "content_index", "error.type", "error.message"),
    "conversation.item.truncated": ("item_id", "content_index", "audio_end_ms"),
    "conversation.item.deleted": ("item_id",), "conversation.item.retrieved": ("item.type",),
    "response.created": _RESPONSE, "response.done": _RESPONSE,
    "response.output_item.added": ("response_id", "output_index", "item.type"),
    "response.output_item.done": ("response_id", "output_index", "item.type"),
    "response.content_part.added": (*_IDS, "part.type"),
    "response.content_part.done": (*_IDS, "part.type"),
    "response.output_text.delta": (*_IDS, "delta"), "response.output_text.done": (*_IDS, "text"),
    "response.output_audio_transcript.delta": (*_IDS, "delta"),
    "response.output_audio_transcript.done": (*_IDS, "transcript"),
    "response.output_audio.delta": (*_IDS, "delta"), "response.output_audio.done": _IDS,
    "response.function_call_arguments.delta": (
        "response_id", "item_id", "output_index", "call_id", "delta"),
    "response.function_call_arguments.done": (
        "response_id", "item_id", "output_index", "call_id", "arguments"),
    "rate_limits.updated": ("rate_limits",),
}
_ITEM_TYPES = ("message", "function_call", "function_call_output")  # events.py:297
_CONTENT_TYPES = ("text", "audio", "input_text", "input_audio", "input_image", "output_text",
                  "output_audio")  # events.py:269-271
# events.py:1066-1070: a usage has all of these.
_USAGE = ("total_tokens", "input_tokens", "output_tokens", "input_token_details",
          "output_token_details")
# llm.py:866-876: any other error is "fatal": the receive loop returns.
# Errors its receive loop handles: a cancel or a response too many, and a retrieve of an item
# that is gone (llm.py:1131-1149, matched by the event_id it gave).
PIPECAT_TOLERATED = ("response_cancel_not_active", "conversation_already_has_active_response",
                     "item_retrieve_invalid_item_id")


def pipecat_problems(events: list[Event]) -> list[str]:
    """What would stop pipecat's receive loop: an event it cannot parse, or a fatal error."""
    out = []
    for e in events:
        kind = e["type"]
        if kind not in PIPECAT_REQUIRED:
            out.append(f"{kind}: a type pipecat does not parse (events.py:1156-1157)")
            continue
        for path in ("event_id", *PIPECAT_REQUIRED[kind]):
            if field_at(e, path) in (None, MISSING):
                out.append(f"{kind}: no {path} (events.py)")
        items = [e.get("item"), *(e["response"]["output"] if "response" in e else [])]
        for item in (i for i in items if isinstance(i, dict)):
            if item.get("type") not in _ITEM_TYPES:
                out.append(f"{kind}: an item of type {item.get('type')} (events.py:297)")
            for part in item.get("content") or []:
                if part.get("type") not in _CONTENT_TYPES:
                    out.append(f"{kind}: content of type {part.get('type')} (events.py:269)")
        if "response" in e:
            if "status_details" not in e["response"]:
                out.append(f"{kind}: no response.status_details (events.py:1095)")
            usage = e["response"].get("usage")
            for field in _USAGE if usage is not None else ():
                if usage.get(field) is None:
                    out.append(f"{kind}: no response.usage.{field} (events.py:1066-1070)")
        if kind == "response.done" and e["response"].get("usage") is None:
            # llm.py:1013-1016 reads usage.input_tokens of every response.done, cancelled too.
            out.append(f"response.done ({e['response']['status']}): usage is null "
                       "(llm.py:1013-1016 reads response.usage.input_tokens: AttributeError)")
        if kind == "error" and e["error"].get("code") not in PIPECAT_TOLERATED:
            out.append(f"error {e['error'].get('code')}: fatal to pipecat (llm.py:866-876)")
    return list(dict.fromkeys(out))


def pipecat(kind: str, **fields: Any) -> Event:
    """A client event as pipecat sends it: model_dump(exclude_none=True) of its model, the
    event_id (a uuid4) first (events.py:369-376; llm.py:700-706)."""
    return {"event_id": str(uuid.uuid4()), "type": kind, **fields}


def pipecat_session(**session: Any) -> Event:
    """llm.py:797-826: the session properties, with the model and instructions kept in sync
    with the service's settings (llm.py:116-125)."""
    return pipecat("session.update", session={"type": "realtime", "model": PIPECAT_MODEL,
                                               "instructions": BOOK_INSTRUCTIONS, **session})


def pipecat_user_text(text: str) -> tuple[str, Event]:
    """The context's user message (open_ai_realtime_adapter.py:192-196), its id made by the
    client (events.py:295)."""
    item_id = uuid.uuid4().hex
    return item_id, pipecat("conversation.item.create", item={
        "id": item_id, "type": "message", "role": "user",
        "content": [{"type": "input_text", "text": text}]})


# llm.py:1210-1214 (ResponseProperties: output_modalities defaults to ["audio"]).
PIPECAT_RESPONSE = {"output_modalities": ["audio"]}


async def pipecat_setup(conn: Any, seen: list[Event], session: Event, context: str) -> str:
    """session.created → session.update (llm.py:838-839, 879-882); session.updated → the
    context's message, the settings again, response.create (llm.py:884-890, 1176-1214).
    Returns the context message's id."""
    await read_until(conn, "session.created", seen)
    await conn.send(session)
    await read_until(conn, "session.updated", seen)
    item_id, item = pipecat_user_text(context)
    await conn.send(item)
    await conn.send({**session, "event_id": str(uuid.uuid4())})
    await conn.send(pipecat("response.create", response=PIPECAT_RESPONSE))
    return item_id
