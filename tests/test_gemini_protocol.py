import base64
import json

import pytest

from faultlab.events import redact
from faultlab.protocols.gemini import describe, kind_matches, kind_of


def test_setup_and_audio_are_described() -> None:
    """Client frames: setup (model, handle) and audio with its seconds, in either spelling."""
    assert describe(json.dumps({"setup": {"model": "models/x"}})) == {"kind": "setup",
                                                                      "model": "models/x"}
    audio = base64.b64encode(b"\0" * 3200).decode()
    got = describe(json.dumps({"realtime_input": {"audio": {"data": audio,
                                                            "mime_type": "audio/pcm;rate=16000"}}}))
    assert got == {"kind": "realtime_input.audio", "audio_s": 0.1}


def test_server_frames_are_described() -> None:
    """Server frames: tool calls with ids and names, content flags, audio seconds, handles."""
    call = describe(json.dumps({"toolCall": {"functionCalls": [{"id": "c1", "name": "book_slot",
                                                                "args": {}}]}}))
    assert call == {"kind": "tool_call", "ids": ["c1"], "names": ["book_slot"]}
    audio = base64.b64encode(b"\0" * 4800).decode()
    turn = describe(json.dumps({"serverContent": {"modelTurn": {"parts": [{"inlineData": {
        "mimeType": "audio/pcm;rate=24000", "data": audio}}]}}}))
    assert turn == {"kind": "server_content.model_turn", "audio_s": 0.1}
    done = describe(json.dumps({"serverContent": {"generationComplete": True,
                                                  "turnComplete": True}}))
    assert done["kind"] == "server_content.generation_complete+turn_complete"
    update = describe(json.dumps({"sessionResumptionUpdate": {"newHandle": "h" * 36,
                                                              "resumable": True}}))
    assert "hhhh" not in json.dumps(redact(update))


def test_other_payloads_have_no_kind() -> None:
    """Non-JSON or non-object payloads get no Live API description."""
    assert describe(b"\x00\x01binary") == {} and describe("hello 3") == {}


@pytest.mark.parametrize(("actual", "wanted", "hit"), [
    ("tool_call", "toolCall", True),
    ("tool_call", "tool_call", True),
    ("realtime_input.audio", "realtimeInput", True),
    ("server_content.generation_complete+turn_complete", "serverContent.turnComplete", True),
    ("server_content.model_turn", "serverContent.turnComplete", False),
    ("setup_complete", "setup", False),
])
def test_kinds_match_in_either_spelling(actual: str, wanted: str, hit: bool) -> None:
    """Kinds are compared in snake_case; a serverContent flag matches messages carrying it."""
    assert kind_matches(actual, wanted) is hit


@pytest.mark.parametrize(("message", "kind"), [
    ({"setup": {"model": "models/x"}}, "setup"),
    ({"realtimeInput": {"audio": {"data": ""}}}, "realtime_input.audio"),
    ({"realtime_input": {"audio_stream_end": True}}, "realtime_input.audio_stream_end"),
    ({"toolCall": {"functionCalls": []}}, "tool_call"),
    ({"serverContent": {"turnComplete": True, "generationComplete": True}},
     "server_content.generation_complete+turn_complete"),
    ({"server_content": {"output_transcription": {"text": "hi"}, "model_turn": {"parts": []},
                         "interrupted": False}}, "server_content.model_turn+output_transcription"),
    ({"serverContent": {"turnComplete": True}, "usageMetadata": {"totalTokenCount": 3}},
     "server_content.turn_complete"),
    ({"usageMetadata": {"totalTokenCount": 3}}, "usage_metadata"),
    ({}, "empty"),
])
def test_one_kind_for_every_spelling_and_order(message: dict[str, object], kind: str) -> None:
    """A message has one kind whatever its key spelling and order: parts in a fixed order, false
    flags left out, usage metadata named only when alone."""
    assert kind_of(message) == kind
    assert kind_of(dict(reversed(list(message.items())))) == kind


def test_sdk_messages_get_the_same_kind_as_their_wire_form() -> None:
    """A google-genai message, dumped, has the kind of the JSON the server sent."""
    from google.genai import types

    wire = {"serverContent": {"modelTurn": {"parts": [{"text": "hi"}]}, "turnComplete": True}}
    message = types.LiveServerMessage.model_validate(wire)
    assert kind_of(message.model_dump(exclude_none=True)) == kind_of(wire)
