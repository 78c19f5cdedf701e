"""The protocol seam (faultlab.protocols): what every protocol gives, Gemini Live's answers and
OpenAI Realtime's, and that the seam stays light enough for the proxy's addon and the pcap tools
to load."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from faultlab.capture.websocket import message_kind
from faultlab.private import credential_places, credentials, secrets_in_env
from faultlab.protocols import DEFAULT, GEMINI, OPENAI, PROTOCOLS, Protocol, recognising
from faultlab.tls import SERVICE_NAMES


@pytest.mark.parametrize("protocol", list(PROTOCOLS.values()), ids=list(PROTOCOLS))
def test_every_protocol_names_its_service_and_its_secrets(protocol: Protocol) -> None:
    """A protocol is registered under its name; its hosts are covered by the lab's certificates,
    and the run folder's redaction knows its credentials and its key's variables."""
    assert PROTOCOLS[protocol.name] is protocol
    assert protocol.service.hosts and protocol.service.base_url_variables
    assert set(protocol.service.certificate_names) <= set(SERVICE_NAMES)
    places = credential_places()
    assert set(protocol.credential_params) <= set(places.params)
    assert set(protocol.credential_headers) <= set(places.headers)
    assert set(protocol.secret_env) <= set(places.env)
    assert all(h == h.lower() for h in protocol.credential_headers)


def test_a_run_speaks_gemini_live_by_default() -> None:
    assert DEFAULT is GEMINI and GEMINI.name == "gemini"


@pytest.mark.parametrize(("kind", "reply"), [
    ("server_content.model_turn", True),
    ("server_content.generation_complete+model_turn", True),
    ("tool_call", True),
    ("server_content.turn_complete", False),
    ("session_resumption_update", False),
    ("tool_call_cancellation", False),
])
def test_a_reply_is_the_model_speaking_or_calling_a_tool(kind: str, reply: bool) -> None:
    assert GEMINI.is_reply(kind) is reply


@pytest.mark.parametrize(("headers", "query", "shown"), [
    ({"x-goog-api-key": "k"}, {}, True),
    ({"authorization": "Bearer t"}, {}, True),
    ({}, {"key": ["k"]}, True),
    ({}, {"access_token": ["t"]}, True),
    ({"x-goog-api-key": ""}, {}, False),
    ({"user-agent": "sdk"}, {"alt": ["json"]}, False),
])
def test_gemini_asks_for_a_key_or_a_token(headers: dict[str, str], query: dict[str, list[str]],
                                          shown: bool) -> None:
    """A request shows its identity by the key's header, a bearer token, or either in the
    query; an empty one shows nothing."""
    assert GEMINI.authorised(headers, query) is shown


def test_the_swimlanes_label_server_content_by_its_parts() -> None:
    assert GEMINI.label_of("server_content.turn_complete") == "turn_complete"
    assert GEMINI.label_of("tool_call") == "tool_call"


def test_the_seam_loads_no_sdk_tls_stack_or_proxy() -> None:
    """Importing the protocols loads neither google-genai, numpy, cryptography nor mitmproxy:
    the proxy's addon and the pcap tools read kinds through it."""
    code = ("import sys, faultlab.protocols; "
            "print(sorted(m for m in ('google.genai', 'numpy', 'cryptography', 'mitmproxy') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


# OpenAI Realtime: its messages as the GA protocol and the beta send them.
AUDIO_20MS = "A" * 1280  # 960 bytes of base64 PCM16: 480 samples, 20 ms at 24 kHz


@pytest.mark.parametrize(("message", "kind"), [
    ({"type": "session.update", "session": {}}, "session.update"),
    ({"type": "response.output_audio.delta", "delta": ""}, "response.output_audio.delta"),
    ({"type": "response.audio.delta", "delta": ""}, "response.audio.delta"),
    ({"event_id": "e1"}, "untyped"),
])
def test_an_openai_message_is_named_by_its_type_as_sent(message: dict[str, object],
                                                        kind: str) -> None:
    assert OPENAI.kind_of(message) == kind


@pytest.mark.parametrize(("actual", "wanted", "matches"), [
    ("response.output_audio.delta", "response.output_audio.delta", True),
    ("response.audio.delta", "response.output_audio.delta", True),  # the beta's name
    ("response.output_audio.delta", "response.audio.delta", True),
    ("response.function_call_arguments.done", "response.function_call_arguments", True),
    ("response.output_audio_transcript.delta", "response.output_audio", False),
    ("response.done", "response", True),
    ("error", "response.done", False),
    ("conversation.item.created", "conversation.item.added", True),
    ("response.audio.delta", "response.audio", True),  # a beta prefix
    ("response.output_audio_transcript.done", "response.audio_transcript", True),
    ("response.audio_transcript.delta", "response.audio", False),
])
def test_an_openai_kind_matches_either_protocols_name_and_its_dotted_prefixes(
        actual: str, wanted: str, matches: bool) -> None:
    """A prefix matches at a dot only: `response.output_audio` is not the transcript's."""
    assert OPENAI.kind_matches(actual, wanted) is matches


def test_openai_messages_are_described_for_the_frame_log() -> None:
    """Audio in seconds at 24 kHz either way, text deltas, the model, a call's id and name and
    its output's id, a response's status, an error's type, code and param; not a message of this
    protocol: nothing."""
    def about(message: dict[str, object]) -> dict[str, object]:
        return OPENAI.describe(json.dumps(message))

    assert about({"type": "input_audio_buffer.append", "audio": AUDIO_20MS}) == {
        "kind": "input_audio_buffer.append", "audio_s": 0.02}
    assert about({"type": "response.audio.delta", "delta": AUDIO_20MS})["audio_s"] == 0.02
    assert about({"type": "response.output_text.delta", "delta": "Hi"})["text"] == "Hi"
    assert about({"type": "session.created", "session": {"model": "gpt-realtime"}})[
        "model"] == "gpt-realtime"
    assert about({"type": "response.function_call_arguments.done", "call_id": "c1",
                  "name": "book_slot", "arguments": "{}"}) == {
        "kind": "response.function_call_arguments.done", "ids": ["c1"], "names": ["book_slot"]}
    assert about({"type": "conversation.item.create", "item": {
        "type": "function_call_output", "call_id": "c1", "output": "{}"}})["ids"] == ["c1"]
    assert about({"type": "response.done", "response": {"status": "cancelled"}})[
        "status"] == "cancelled"
    assert about({"type": "error", "error": {"type": "invalid_request_error",
                                             "code": "unknown_parameter", "param": "x"}}) == {
        "kind": "error", "error_type": "invalid_request_error",
        "error_code": "unknown_parameter", "error_param": "x"}
    assert OPENAI.describe(json.dumps({"setupComplete": {}})) == {}
    assert OPENAI.describe(b"\x00binary") == {}


@pytest.mark.parametrize(("kind", "category"), [
    ("session.updated", "setup"), ("input_audio_buffer.append", "audio"),
    ("response.audio.delta", "audio"), ("response.function_call_arguments.done", "tool_call"),
    ("response.done", "turn_complete"), ("error", "refused"),
    ("input_audio_buffer.speech_started", "content"),
])
def test_openai_kinds_have_swimlane_colours(kind: str, category: str) -> None:
    assert OPENAI.category_of(kind) == category


def test_openai_replies_and_its_one_route() -> None:
    """A reply is audio, text, a transcript or a finished call; the WebSocket route is
    /v1/realtime, with its model in the query."""
    assert OPENAI.is_reply("response.audio.delta") and OPENAI.is_reply(
        "response.function_call_arguments.done")
    assert not OPENAI.is_reply("response.created")
    assert OPENAI.dialect_of("/v1/realtime?model=gpt-realtime") == "realtime"
    assert OPENAI.dialect_of("/v1/realtime/") == "realtime"
    assert OPENAI.dialect_of("/v1/chat/completions") is None


def test_an_openai_key_is_a_credential_wherever_it_goes() -> None:
    """OPENAI_API_KEY is a secret of the environment; a bearer token or Azure's api-key header
    is a request's credential."""
    assert secrets_in_env({"OPENAI_API_KEY": "sk-test-0123456789"}) == ["sk-test-0123456789"]
    assert credentials("/v1/realtime?model=gpt-realtime",
                       {"authorization": "Bearer sk-test-0123456789"}) == ["sk-test-0123456789"]
    assert credentials("/openai/realtime", {"api-key": "azure-key-0123"}) == ["azure-key-0123"]
    assert OPENAI.authorised({"authorization": "Bearer k"}, {})
    assert not OPENAI.authorised({}, {"key": ["k"]})


def test_each_service_chooses_its_own_subprotocols_and_refuses_no_offer() -> None:
    """OpenAI's server answers a browser's offer with `realtime` (O1); Gemini Live's chooses
    none; a client offering nothing, or nothing the service knows, gets none."""
    browser = ["realtime", "openai-insecure-api-key.k"]
    assert OPENAI.subprotocol_for(browser) == "realtime"
    assert OPENAI.subprotocol_for(["openai-insecure-api-key.k"]) is None
    assert OPENAI.subprotocol_for([]) is None
    assert GEMINI.subprotocol_for(browser) is None


@pytest.mark.parametrize(("message", "protocol"), [
    ({"setupComplete": {}}, GEMINI),
    ({"serverContent": {"turnComplete": True}, "usageMetadata": {}}, GEMINI),
    ({"type": "session.created", "event_id": "e1", "session": {}}, OPENAI),
    ({"tick": 3}, GEMINI),  # nobody's: the default names it
])
def test_a_capture_names_each_message_in_its_own_protocol(message: dict[str, object],
                                                          protocol: Protocol) -> None:
    """A capture says nothing of its protocol: each message is named by the protocol whose
    shape it has (`pcap inspect` on an OpenAI session names `response.output_audio.delta`)."""
    assert recognising(message) is protocol
    assert message_kind(json.dumps(message)) == protocol.kind_of(message)
