"""The protocol seam (faultlab.protocols): what every protocol gives, Gemini Live's answers, and
that the seam stays light enough for the proxy's addon and the pcap tools to load."""

from __future__ import annotations

import subprocess
import sys

import pytest

from faultlab.private import CREDENTIAL_HEADERS, CREDENTIAL_PARAMS, SECRET_ENV
from faultlab.protocols import DEFAULT, GEMINI, PROTOCOLS, Protocol
from faultlab.tls import SERVICE_NAMES


@pytest.mark.parametrize("protocol", list(PROTOCOLS.values()), ids=list(PROTOCOLS))
def test_every_protocol_names_its_service_and_its_secrets(protocol: Protocol) -> None:
    """A protocol is registered under its name; its hosts are covered by the lab's certificates,
    and the run folder's redaction knows its credentials and its key's variables."""
    assert PROTOCOLS[protocol.name] is protocol
    assert protocol.service.hosts and protocol.service.base_url_variables
    assert set(protocol.service.certificate_names) <= set(SERVICE_NAMES)
    assert set(protocol.credential_params) <= set(CREDENTIAL_PARAMS)
    assert set(protocol.credential_headers) <= set(CREDENTIAL_HEADERS)
    assert set(protocol.secret_env) <= set(SECRET_ENV)
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
