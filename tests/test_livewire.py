import base64
import json

from faultlab.events import redact
from faultlab.proxy.livewire import describe


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
