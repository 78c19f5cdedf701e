"""OpenAI Realtime's server events (the GA protocol of 2025-08, docs/openai-realtime.md): the
emulator core's moves spelled as one connection's events, with the ids, items and responses the
service keeps.

A response is `response.created`, its output items (a message with its content part and deltas,
or a function call with its arguments), and `response.done` once it is all generated (its audio
may still be playing at the client, O11); an error is an `error` event (whether it closes is the
API's: faultlab.emulator.apis.openai).
"""

from __future__ import annotations

import base64
import json
import string
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from random import Random
from typing import Any

from faultlab.emulator.messages import Call, Encoder, Frame, Parsed, Setup, Usage
from faultlab.emulator.personality import Personality
from faultlab.protocols.openai import AUDIO_RATE

ERROR_TYPE = "invalid_request_error"
ID_CHARS = string.ascii_letters + string.digits
# Two base62 digits at once, the low one first (an id is its number's digits, lowest first).
ID_PAIRS = [ID_CHARS[n % 62] + ID_CHARS[n // 62] for n in range(62 * 62)]
# Items conversation.item.retrieve finds: the conversation's latest.
ITEMS_KEPT = 256
# What an item keeps of each of its texts (a user's item may be a 16 MiB frame).
ITEM_TEXT_KEPT = 4096
# What rate_limits.updated says as a response starts: a guess of the shape the service sends
# (requests and tokens per minute), with the tokens going down as responses are made.
RATE_LIMIT_TOKENS = 40_000


@dataclass
class _Response:
    id: str
    metadata: Any = None  # as response.create gave it: clients find their response by it
    output: list[Frame] = field(default_factory=list)
    # The assistant message under way: its item, and its content part's text or transcript.
    message: Frame | None = None
    kind: str = "audio"  # its content part's: audio (with a transcript) or text
    said: str = ""


class OpenAIEncoder(Encoder):
    """One connection's server events. Frames are built when the core schedules them: the
    response under way is the one the core's latest moves belong to."""

    def __init__(self, rng: Random, personality: Personality) -> None:
        self.rng = rng
        self.personality = personality
        self.conversation = self._id("conv")
        self.last_item: str | None = None
        self.speech_item: str | None = None  # the user's audio item the VAD opened
        self.response: _Response | None = None
        self.last_response: _Response | None = None
        self.instructions = ""
        self.modalities = ["audio"]
        self.items: OrderedDict[str, Frame] = OrderedDict()  # the conversation's last ITEMS_KEPT
        self.session_id = ""
        self.created = int(time.time())  # session.created's expires_at counts from it
        self.tokens_used = 0

    def _id(self, prefix: str) -> str:
        """An id as the service's look: the prefix and 21 base62 characters (from one draw: a
        draw per character cost 70 us an event, a tenth of an audio chunk's budget; two digits a
        division, 3.8 us rather than 4.6)."""
        n = self.rng.getrandbits(126)
        pairs = []
        for _ in range(10):
            n, low = divmod(n, 3844)
            pairs.append(ID_PAIRS[low])
        return f"{prefix}_{''.join(pairs)}{ID_CHARS[n % 62]}"

    def _event(self, kind: str, **fields: Any) -> Frame:
        """An event as of now: the items and responses it carries go on changing after it."""
        return {"type": kind, "event_id": self._id("event"),
                **{k: _copied(v) if isinstance(v, dict | list) else v
                   for k, v in fields.items()}}

    def call_id(self, bits: int) -> str:
        chars = []
        for _ in range(10):
            bits, digit = divmod(bits, 62)
            chars.append(ID_CHARS[digit])
        return f"call_{''.join(chars)}"

    def session(self, setup: Setup) -> Frame:
        audio = setup.modalities == ("AUDIO",)
        vad = setup.vad
        detection = None if vad.disabled else {
            "type": "server_vad", "threshold": 0.5,
            "prefix_padding_ms": vad.prefix_padding_ms or self.personality.vad_prefix_padding_ms,
            "silence_duration_ms": vad.silence_duration_ms or self.personality.vad_silence_ms,
            "idle_timeout_ms": None, "create_response": True, "interrupt_response": True}
        pcm = {"type": "audio/pcm", "rate": AUDIO_RATE}
        return {
            "type": "realtime", "object": "realtime.session", "id": self.session_id,
            "model": setup.model, "output_modalities": ["audio" if audio else "text"],
            "instructions": self.instructions,
            "tools": [dict(f.declaration or {"type": "function", "name": f.name})
                      for f in setup.functions],
            "tool_choice": "auto", "max_output_tokens": "inf", "tracing": None,
            "truncation": "auto", "prompt": None,
            "expires_at": self.created + int(self.personality.connection_lifetime_s or 3600),
            "audio": {"input": {"format": pcm, "transcription": (
                          {"model": "gpt-4o-transcribe"} if setup.input_transcription else None),
                                "noise_reduction": None, "turn_detection": detection},
                      "output": {"format": pcm, "voice": "alloy", "speed": 1.0}},
            "include": None}

    def setup_complete(self, session_id: str, setup: Setup) -> list[Frame]:
        self.session_id = f"sess_{session_id}"
        self.modalities = [m.lower() for m in setup.modalities]
        return [self._event("session.created", session=self.session(setup))]

    def resumption_update(self, handle: str, consumed: int | None) -> list[Frame]:
        return []

    def go_away(self, time_left_s: float) -> list[Frame]:
        return []

    def acknowledge(self, parsed: Parsed, setup: Setup | None) -> list[Frame]:
        kind, data = parsed.raw_kind, parsed.data
        if kind == "session.update" and setup is not None:
            if "instructions" in data["session"]:
                self.instructions = str(data["session"]["instructions"] or "")
            self.modalities = [m.lower() for m in setup.modalities]
            return [self._event("session.updated", session=self.session(setup))]
        if kind == "conversation.item.create":
            item = {"id": self._id("item"), **data["item"], "status": "completed"}
            return [self._item_added(item), self._item_done(item)]
        if kind == "response.create":
            asked = data.get("response")
            metadata = asked.get("metadata") if isinstance(asked, dict) else None
            return self._response(metadata)[1]
        if kind == "input_audio_buffer.clear":
            return [self._event("input_audio_buffer.cleared")]
        if kind == "conversation.item.retrieve":
            kept = self.items.get(str(data.get("item_id")))
            if kept is None:
                return self.error(f"Item with item_id not found: {data.get('item_id')}",
                                  "item_retrieve_invalid_item_id", "item_id",
                                  parsed.event_id)
            return [self._event("conversation.item.retrieved", item=kept)]
        if kind == "conversation.item.delete":
            self.items.pop(str(data.get("item_id")), None)
            return [self._event("conversation.item.deleted", item_id=data.get("item_id"))]
        if kind == "conversation.item.truncate":
            return [self._event("conversation.item.truncated", item_id=data.get("item_id"),
                                content_index=data.get("content_index", 0),
                                audio_end_ms=data.get("audio_end_ms", 0))]
        return []

    def error(self, message: str, code: str, param: str | None,
              event_id: str | None) -> list[Frame]:
        return [self._event("error", error={"type": ERROR_TYPE, "code": code, "message": message,
                                            "param": param, "event_id": event_id})]

    def expired(self, message: str) -> list[Frame]:
        return self.error(message, "session_expired", None, None)

    def _item_added(self, item: Frame) -> Frame:
        frame = self._event("conversation.item.added", previous_item_id=self.last_item, item=item)
        self.last_item = item["id"]
        self.items[item["id"]] = _kept(item)
        if len(self.items) > ITEMS_KEPT:
            self.items.popitem(last=False)
        return frame

    def _item_done(self, item: Frame) -> Frame:
        return self._event("conversation.item.done", previous_item_id=None, item=item)

    def speech_started(self) -> list[Frame]:
        self.speech_item = self._id("item")
        return [self._event("input_audio_buffer.speech_started", audio_start_ms=0,
                            item_id=self.speech_item)]

    def speech_stopped(self) -> list[Frame]:
        item_id, self.speech_item = self.speech_item, None
        frames = []
        if item_id is not None:
            frames.append(self._event("input_audio_buffer.speech_stopped", audio_end_ms=0,
                                      item_id=item_id))
        item = {"id": item_id or self._id("item"), "type": "message", "status": "completed",
                "role": "user", "content": [{"type": "input_audio", "transcript": None}]}
        frames.append(self._event("input_audio_buffer.committed", previous_item_id=self.last_item,
                                  item_id=item["id"]))
        return [*frames, self._item_added(item), self._item_done(item)]

    def input_transcription(self, text: str) -> list[Frame]:
        return [self._event("conversation.item.input_audio_transcription.completed",
                            item_id=self.last_item, content_index=0, transcript=text,
                            usage={"type": "duration", "seconds": 0})]

    # The response under way.

    def _response(self, metadata: Any = None) -> tuple[_Response, list[Frame]]:
        """The response the next output belongs to, opened (`response.created`) if none is."""
        if self.response is not None:
            return self.response, []
        self.response = _Response(self._id("resp"), metadata)
        self.tokens_used += 100
        return self.response, [
            self._event("response.created", response=self._body(
                self.response, "in_progress", None, None)),
            self._event("rate_limits.updated", rate_limits=[
                {"name": "requests", "limit": 5000, "remaining": 4999, "reset_seconds": 0.012},
                {"name": "tokens", "limit": RATE_LIMIT_TOKENS,
                 "remaining": max(0, RATE_LIMIT_TOKENS - self.tokens_used),
                 "reset_seconds": 0.15}])]

    def _body(self, response: _Response, status: str, details: Frame | None,
              usage: Usage | None) -> Frame:
        return {"object": "realtime.response", "id": response.id, "status": status,
                "status_details": details, "output": response.output,
                "conversation_id": self.conversation, "output_modalities": self.modalities,
                "max_output_tokens": "inf",
                "audio": {"output": {"format": {"type": "audio/pcm", "rate": AUDIO_RATE},
                                     "voice": "alloy"}},
                "usage": None if usage is None else _usage(usage, self.modalities),
                "metadata": response.metadata}

    def _ids(self, response: _Response, item: Frame) -> dict[str, Any]:
        return {"response_id": response.id, "item_id": item["id"],
                "output_index": len(response.output) - 1}

    def _add_output(self, response: _Response, item: Frame) -> list[Frame]:
        response.output.append(item)
        return [self._event("response.output_item.added", response_id=response.id,
                            output_index=len(response.output) - 1, item=item),
                self._item_added(item)]

    def function_calls(self, calls: list[Call]) -> list[Frame]:
        response, frames = self._response()
        for call in calls:
            arguments = json.dumps(dict(call.args))
            item = {"id": self._id("item"), "type": "function_call", "status": "in_progress",
                    "name": call.name, "call_id": call.id, "arguments": ""}
            frames += self._add_output(response, item)
            ids = self._ids(response, item)
            frames.append(self._event("response.function_call_arguments.delta", **ids,
                                      call_id=call.id, delta=arguments))
            frames.append(self._event("response.function_call_arguments.done", **ids,
                                      call_id=call.id, name=call.name, arguments=arguments))
            item.update(status="completed", arguments=arguments)
            frames += self._close_item(response, item)
        return frames

    def _close_item(self, response: _Response, item: Frame) -> list[Frame]:
        return [self._event("response.output_item.done", response_id=response.id,
                            output_index=response.output.index(item), item=item),
                self._item_done(item)]

    def _message(self, kind: str) -> tuple[_Response, Frame, list[Frame]]:
        """The assistant message under way, opened with a content part of `kind` if none is."""
        response, frames = self._response()
        if response.message is None:
            item = {"id": self._id("item"), "type": "message", "status": "in_progress",
                    "role": "assistant", "content": []}
            response.message, response.kind = item, kind
            frames += self._add_output(response, item)
            part = {"type": kind, "transcript": ""} if kind == "audio" else {"type": kind, "text": ""}
            frames.append(self._event("response.content_part.added", **self._ids(response, item),
                                      content_index=0, part=part))
        return response, response.message, frames

    def text(self, text: str) -> list[Frame]:
        response, item, frames = self._message("text")
        ids = {**self._ids(response, item), "content_index": 0}
        response.said += text
        return [*frames, self._event("response.output_text.delta", **ids, delta=text),
                self._event("response.output_text.done", **ids, text=response.said)]

    def output_transcription(self, text: str) -> list[Frame]:
        response, item, frames = self._message("audio")
        response.said += text
        return [*frames, self._event("response.output_audio_transcript.delta",
                                     **self._ids(response, item), content_index=0, delta=text)]

    def audio(self, pcm: bytes, rate: int) -> list[Frame]:
        response, item, frames = self._message("audio")
        # Most of what the emulator says: spelled out as _event and _ids would (their keys in
        # their order), without their merged dicts (18.5 us rather than 20.4, 12 of them the
        # base64).
        frames.append({"type": "response.output_audio.delta", "event_id": self._id("event"),
                       "response_id": response.id, "item_id": item["id"],
                       "output_index": len(response.output) - 1, "content_index": 0,
                       "delta": base64.b64encode(pcm).decode()})
        return frames

    def generation_complete(self, usage: Usage) -> list[Frame]:
        response, frames = self._response()
        frames += self._end_message(response, "completed")
        self.response, self.last_response = None, response
        return [*frames, self._event("response.done", response=self._body(
            response, "completed", None, usage))]

    def _end_message(self, response: _Response, status: str) -> list[Frame]:
        item = response.message
        if item is None:
            return []
        response.message = None
        ids = {"response_id": response.id, "item_id": item["id"],
               "output_index": response.output.index(item), "content_index": 0}
        frames = []
        if response.kind == "audio":
            part = {"type": "audio", "transcript": response.said}
            content = {"type": "output_audio", "transcript": response.said}
            frames += [self._event("response.output_audio.done", **ids),
                       self._event("response.output_audio_transcript.done", **ids,
                                   transcript=response.said)]
        else:
            part = {"type": "text", "text": response.said}
            content = {"type": "output_text", "text": response.said}
        item.update(status=status, content=[content])
        return [*frames, self._event("response.content_part.done", **ids, part=part),
                *self._close_item(response, item)]

    def turn_complete(self, usage: Usage | None) -> list[Frame]:
        return []

    def nothing_to_say(self) -> list[Frame]:
        if self.response is None:
            return []
        response, self.response = self.response, None
        return [self._event("response.done", response=self._body(
            response, "completed", None, Usage(0, 0)))]

    @property
    def responding(self) -> bool:
        return self.response is not None

    def withdrawn(self, by_client: bool) -> list[Frame]:
        """The answer due was dropped before it began: the response response.create opened is
        cancelled; a cancel with none opened gets one, cancelled (the client waits for its
        response.done)."""
        if self.response is None and not by_client:
            return []
        response, frames = self._response()
        self.response = None
        reason = "client_cancelled" if by_client else "turn_detected"
        return [*frames, self._event("response.done", response=self._body(
            response, "cancelled", {"type": "cancelled", "reason": reason}, Usage(0, 0)))]

    def interrupted(self, generated: bool, by_client: bool) -> list[Frame]:
        """The turn under way was cut: its response (the last one scheduled) is cancelled, if
        it was still being generated; one all generated has had its response.done (the client
        truncates what it played)."""
        response = self.response or self.last_response
        if generated or response is None:
            return []
        self.response, self.last_response = None, None
        # The message being said was cut: incomplete (its end, built whole when it was
        # scheduled, was never sent). A function call's item was done at once.
        frames = []
        for item in response.output:
            if item["type"] == "message":
                item["status"] = "incomplete"
                frames += self._close_item(response, item)
        reason = "client_cancelled" if by_client else "turn_detected"
        return [*frames, self._event("response.done", response=self._body(
            response, "cancelled", {"type": "cancelled", "reason": reason}, Usage(0, 0)))]


def _usage(usage: Usage, modalities: list[str]) -> Frame:
    """A response's usage as the service counts it: totals and their text and audio shares."""
    audio_out = usage.response if "audio" in modalities else 0
    return {"total_tokens": usage.prompt + usage.response, "input_tokens": usage.prompt,
            "output_tokens": usage.response,
            "input_token_details": {"text_tokens": usage.prompt, "audio_tokens": 0,
                                    "image_tokens": 0, "cached_tokens": 0,
                                    "cached_tokens_details": {"text_tokens": 0, "audio_tokens": 0,
                                                              "image_tokens": 0}},
            "output_token_details": {"text_tokens": usage.response - audio_out,
                                     "audio_tokens": audio_out}}


def _copied(value: Any) -> Any:
    """A copy of a JSON value (dicts, lists and scalars, as events hold): copy.deepcopy's
    result without its memo and its look-up of how to copy each value (a response's body in
    12 us rather than 19; a response closed and the next opened, with its first audio delta,
    in 117 us rather than 213)."""
    if isinstance(value, dict):
        return {k: _copied(v) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) if isinstance(v, dict | list) else v for v in value]
    return value


def _kept(item: Frame) -> Frame:
    """An item as conversation.item.retrieve answers it: its texts cut at ITEM_TEXT_KEPT."""
    def cut(value: Any) -> Any:
        if isinstance(value, str):
            return value[:ITEM_TEXT_KEPT]
        if isinstance(value, dict):
            return {k: cut(v) for k, v in value.items()}
        if isinstance(value, list):
            return [cut(v) for v in value[:64]]
        return value

    kept: Frame = cut(item)
    return kept
