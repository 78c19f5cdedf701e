"""LiveKit Agents' RealtimeModel (livekit/agents da6af86, livekit-plugins-openai
.../realtime/realtime_model.py and utils.py), reproduced: the events it sends, in its order and
with its fields, and what its handlers need of one response's events."""

from __future__ import annotations

import uuid
from typing import Any

from .events import (
    BOOK_INSTRUCTIONS,
    MODEL,
    RATE,
    Event,
    index,
    kind_is,
    of,
    read_until,
)


def shortuuid(prefix: str) -> str:
    """livekit.agents.utils.shortuuid: the prefix and 12 characters."""
    return prefix + uuid.uuid4().hex[:12]


def livekit_session_update() -> Event:
    """realtime_model.py:1308-1344, as _send_task dumps it (by_alias, exclude_unset:
    :1116-1118) with the defaults of RealtimeModel() (:388, :123, :477, :535; utils.py:36-47)."""
    pcm = {"rate": RATE, "type": "audio/pcm"}
    return {"session": {
        "type": "realtime", "model": MODEL, "output_modalities": ["audio"],
        "audio": {"input": {"format": pcm, "noise_reduction": None,
                            "transcription": {"model": "gpt-4o-mini-transcribe"},
                            "turn_detection": {"type": "semantic_vad", "create_response": True,
                                               "eagerness": "medium",
                                               "interrupt_response": True}},
                  "output": {"format": pcm, "speed": 1.0, "voice": "marin"}},
        "max_output_tokens": "inf", "tool_choice": "auto", "tracing": None},
        "type": "session.update", "event_id": shortuuid("session_update_")}


# llm.utils.build_legacy_openai_schema(internally_tagged=True), validated as RealtimeFunctionTool
# (realtime_model.py:1597-1627).
LIVEKIT_TOOL = {"type": "function", "name": "book_slot", "description": "Book an appointment slot.",
                "parameters": {"type": "object", "properties": {"slot": {"type": "string"}},
                               "required": ["slot"]}}


async def livekit_start(conn: Any, tools: list[Event]) -> None:
    """RealtimeSession.__init__ queues the session.update (:908), sent first once the socket is
    open (:1111-1126), session.created or not; the agent's activity then sets the instructions
    (agent_activity.py:577 → :1644-1653) and the tools (agent_activity.py:604 → :1575-1579,
    :1629-1642)."""
    await conn.send(livekit_session_update())
    await conn.send({"session": {"type": "realtime", "instructions": BOOK_INSTRUCTIONS},
                     "type": "session.update", "event_id": shortuuid("instructions_update_")})
    if tools:
        await conn.send({"session": {"type": "realtime", "model": MODEL, "tools": tools},
                         "type": "session.update", "event_id": shortuuid("tools_update_")})


async def livekit_add_item(conn: Any, seen: list[Event], item: Event, previous: str) -> None:
    """update_chat_ctx (:1459-1550): conversation.item.create with the item's own id, then the
    wait (5 s at most, :1489-1493) for its conversation.item.added (:1967-1971)."""
    await conn.send({"type": "conversation.item.create", "item": item,
                     "previous_item_id": previous, "event_id": shortuuid("chat_ctx_create_")})
    await read_until(conn, kind_is("conversation.item.added", **{"item.id": item["id"]}), seen)


async def livekit_generate_reply(conn: Any, seen: list[Event]) -> tuple[str, list[Event]]:
    """generate_reply (:1691-1740), tool_choice given per response (agent_activity.py:3807-3811):
    its future is resolved by the response.created whose response.metadata.client_event_id is
    its event_id (:1865-1901), else it fails after 10 s (:1720-1727)."""
    event_id = shortuuid("response_create_")
    await conn.send({"type": "response.create", "event_id": event_id, "response": {
        "instructions": None, "metadata": {"client_event_id": event_id}, "tool_choice": "auto"}})
    return event_id, await read_until(conn, "response.done", seen)


def livekit_problems(response: list[Event], event_id: str | None) -> list[str]:
    """What LiveKit's handlers need of one response's events (:1865-2248)."""
    out = []
    (created,) = of(response, "response.created")
    metadata = created["response"].get("metadata") or {}
    if event_id is not None and metadata.get("client_event_id") != event_id:
        out.append(f"response.created has metadata {metadata}, not the client_event_id "
                   f"{event_id}: generate_reply's future is never resolved (:1869, :1898-1901) "
                   "and fails after 10 s (:1720-1727)")
    messages: set[str] = set()
    for e in response[response.index(created):]:
        kind = e["type"]
        if kind == "response.output_item.added" and e["item"]["type"] == "message":
            messages.add(e["item"]["id"])  # :1914-1933
        elif kind in ("response.output_text.delta", "response.output_audio_transcript.delta",
                      "response.output_audio.delta", "response.content_part.added"):
            if e["item_id"] not in messages:  # :2069, :2096, :2104, :1947-1950
                out.append(f"{kind} for {e['item_id']}, not a message announced by "
                           "response.output_item.added (KeyError)")
        elif kind == "response.output_item.done" and e["item"]["type"] == "function_call":
            item = e["item"]  # :2146-2163
            out += [f"function call item without {f}" for f in ("id", "call_id", "name",
                                                                 "arguments")
                    if item.get(f) is None]
        elif kind == "conversation.item.added":
            item = e["item"]  # utils.py:248-301
            need = {"function_call": ("call_id", "name", "arguments"),
                    "function_call_output": ("call_id", "output"),
                    "message": ("role", "content")}.get(item["type"], ())
            out += [f"conversation.item.added: a {item['type']} without {f}" for f in need
                    if item.get(f) is None]
    # The order the plugin's comment gives for a response (:106-117), of the events that came
    # (at response.done it closes whatever is open: :2178-2188).
    for message in messages:
        order = [index(response, kind_is("response.output_item.added", **{"item.id": message})),
                 index(response, kind_is("conversation.item.added", **{"item.id": message})),
                 index(response, kind_is("response.content_part.added", item_id=message)),
                 index(response, lambda e, m=message: e["type"].endswith(".delta")
                       and e.get("item_id") == m),
                 index(response, kind_is("response.content_part.done", item_id=message)),
                 index(response, kind_is("response.output_item.done", **{"item.id": message})),
                 len(response) - 1]
        came = [i for i in order if i < len(response)]
        if came != sorted(came) or response[-1]["type"] != "response.done":
            out.append(f"message {message}: events out of the order of :106-117 ({order})")
    return out
