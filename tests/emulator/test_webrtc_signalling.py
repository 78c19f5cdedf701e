"""OpenAI Realtime's WebRTC signalling in the emulator (faultlab.emulator.webrtc), on the
WebSocket's port, as the unmodified `openai` SDK drives it over TLS: a call's offer answered (the
SDK's multipart form, the session beside it), a client secret's flow, a hangup, and every refusal
with its HTTP status and an event. Media needs a lab (tests/lab/test_webrtc_suite.py): the offers here
carry no candidate, so the emulator's ICE sends nothing anywhere."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from faultlab.emulator.webrtc import offer_of
from faultlab.emulator.wsinternals import MAX_BODY
from faultlab.webrtc import peer_connection

from .conftest import RunningEmulator
from .test_refused import exchange

MODEL = "gpt-realtime"
Start = Callable[..., RunningEmulator]


async def offer(channel: bool = True) -> str:
    """An aiortc offer (a data channel, a microphone track), its candidates taken out."""
    from faultlab.webrtc import SpeakerTrack

    pc = peer_connection()
    try:
        if channel:
            pc.createDataChannel("oai-events")
        pc.addTrack(SpeakerTrack())
        await pc.setLocalDescription(await pc.createOffer())
        return "".join(line + "\r\n" for line in pc.localDescription.sdp.splitlines()
                       if line and not line.startswith("a=candidate"))
    finally:
        await pc.close()


def events_of(emulator: RunningEmulator, name: str, count: int = 1,
              last: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The emulator's events of `name`, once there are `count` of them (and, with `last`, one
    with those fields)."""
    deadline = time.monotonic() + 5
    while True:
        found = [e for line in emulator.events.read_text().splitlines()
                 if (e := json.loads(line))["event"] == name]
        done = last is None or any(last.items() <= e.items() for e in found)
        if (len(found) >= count and done) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_a_call_is_answered_and_hung_up(start_emulator: Start) -> None:
    """The SDK's `realtime.calls.create` (multipart: sdp, session): 201 with an SDP answer (a
    data channel, an audio track, the emulator's ICE credentials) and a Location naming the
    call; the session is the WebSocket's, its model the session's; the hangup ends the call."""
    emulator = start_emulator("openai-realtime", 0.1)

    async def call() -> tuple[Any, str]:
        client = AsyncOpenAI()
        answer = await client.realtime.calls.create(
            sdp=await offer(), session={"type": "realtime", "model": MODEL})
        call_id = answer.response.headers["location"].rsplit("/", 1)[-1]
        await client.realtime.calls.hangup(call_id)
        return answer, call_id

    answer, call_id = asyncio.run(call())
    assert answer.response.status_code == 201
    assert answer.response.headers["content-type"] == "application/sdp"
    assert answer.response.headers["location"] == f"/v1/realtime/calls/{call_id}"
    sdp = answer.text
    assert "m=application" in sdp and "m=audio" in sdp and "a=ice-ufrag:" in sdp
    assert "opus/48000" in sdp.lower()
    states = [e["state"] for e in events_of(emulator, "emulator.call", last={"state": "ended"})]
    assert states[0] == "answered" and states[-1] == "ended"
    assert {e["call"] for e in events_of(emulator, "emulator.call")} == {call_id}
    (connect,) = events_of(emulator, "emulator.connect")
    assert connect["api"] == "realtime"
    assert events_of(emulator, "emulator.disconnect") != []


def test_a_client_secret_opens_a_call_until_it_is_unknown(start_emulator: Start) -> None:
    """`client_secrets.create` gives an `ek_` secret with the session asked for; a call with
    it is answered; an unknown secret is refused 401, as is a call with no key at all."""
    emulator = start_emulator("openai-realtime", 0.1)

    async def flow() -> tuple[Any, Any, int, int]:
        secret = await AsyncOpenAI().realtime.client_secrets.create(
            session={"type": "realtime", "model": MODEL, "instructions": "Be brief."})
        sdp = await offer()
        answered = await AsyncOpenAI(api_key=secret.value).realtime.calls.create(sdp=sdp)
        with pytest.raises(openai.AuthenticationError) as unknown:
            await AsyncOpenAI(api_key="ek_0123").realtime.calls.create(sdp=sdp)
        raw = exchange(emulator, "POST /v1/realtime/calls HTTP/1.1\r\nHost: localhost\r\n"
                       f"Content-Type: application/sdp\r\nContent-Length: {len(sdp)}\r\n\r\n{sdp}")
        return secret, answered, unknown.value.status_code, int(raw.split()[1])

    secret, answered, unknown, anonymous = asyncio.run(flow())
    assert secret.value.startswith("ek_") and secret.expires_at > time.time()
    assert secret.session.instructions == "Be brief."
    assert answered.response.status_code == 201
    assert (unknown, anonymous) == (401, 401)
    reasons = [e["reason"] for e in events_of(emulator, "emulator.refused", 2)]
    assert reasons == ["client secret unknown or expired", "no key"]
    logged = emulator.events.read_text()
    assert secret.value not in logged and os.environ["OPENAI_API_KEY"] not in logged


@pytest.mark.parametrize(("request_text", "status", "reason"), [
    pytest.param("POST /v1/realtime/calls HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k"
                 "\r\nContent-Type: application/sdp\r\nContent-Length: 4\r\n\r\nv=0\n",
                 400, "offer without a data channel", id="no-data-channel"),
    pytest.param("POST /v1/realtime/calls HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer k"
                 "\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 57\r\n\r\n"
                 "--b\r\nContent-Disposition: form-data; name=x\r\n\r\n1\r\n--b--\r\n",
                 400, "The form has no sdp field.", id="form-without-sdp"),
    pytest.param("POST /v1/realtime/sessions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer"
                 " k\r\nContent-Length: 2\r\n\r\n{}", 404, "Not Found", id="unserved-route"),
    pytest.param("POST /v1/realtime/calls HTTP/1.1\r\nHost: localhost\r\nContent-Length: "
                 f"{MAX_BODY + 1}\r\n\r\n", 413, f"a body of {MAX_BODY + 1} bytes: at most "
                 f"{MAX_BODY}", id="body-too-large"),
    pytest.param("POST /v1/realtime/calls HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: "
                 "chunked\r\n\r\n3\r\nv=0\r\n0\r\n\r\n", 501, "a body in chunks is not read",
                 id="chunked-body"),
    pytest.param("POST /v1/realtime/calls HTTP/1.1\r\nHost: localhost\r\nContent-Length: +3"
                 "\r\n\r\nv=0", 400, "Content-Length is not one number", id="odd-length"),
    pytest.param(f"POST /v1/realtime/calls HTTP/1.1\r\nX: {'y' * 9000}\r\n\r\n", 431,
                 "the headers are too large", id="header-too-long"),
])
def test_a_refused_post_is_answered_with_its_status(start_emulator: Start, request_text: str,
                                                    status: int, reason: str) -> None:
    """No data channel, a form without its sdp (400), a route the service does not have
    (404), and what the POST reader answers before any route: a body over MAX_BODY (413), in
    chunks (501), a length that is no number (400), a header line too long (431). Each is
    answered and told by one event, and no call is made."""
    emulator = start_emulator("openai-realtime", 0.1)
    answer = exchange(emulator, request_text)
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:200]
    refused = events_of(emulator, "emulator.refused")
    assert [e["reason"] for e in refused] == [reason]
    assert refused[0]["status"] == status
    assert events_of(emulator, "emulator.call", 0) == []  # told before the answer, if at all


def test_the_gemini_emulator_takes_no_call(start_emulator: Start) -> None:
    """Gemini Live has no WebRTC: a POST on the OpenAI route is a 404, told as any refusal."""
    emulator = start_emulator()
    answer = exchange(emulator, "POST /v1/realtime/calls HTTP/1.1\r\nHost: localhost\r\n"
                                "Content-Length: 3\r\n\r\nv=0")
    assert answer.startswith(b"HTTP/1.1 404 ")
    (refused,) = events_of(emulator, "emulator.refused")
    assert refused["status"] == 404 and refused["path"] == "/v1/realtime/calls"


def test_an_offer_is_the_body_or_the_sdks_form() -> None:
    """`offer_of`: a bare `application/sdp` body; the SDK's multipart form (sdp, session as
    JSON); a form without sdp or with a session that is no object refused."""
    assert offer_of("application/sdp", b"v=0\r\n") == ("v=0\r\n", {})
    form = (b"--B\r\nContent-Disposition: form-data; name=\"sdp\"\r\nContent-Type: application/sdp"
            b"\r\n\r\nv=0\r\n\r\n--B\r\nContent-Disposition: form-data; name=\"session\"\r\n"
            b"Content-Type: application/json\r\n\r\n{\"model\": \"m\"}\r\n--B--\r\n")
    assert offer_of("multipart/form-data; boundary=B", form) == ("v=0\r\n", {"model": "m"})
    with pytest.raises(ValueError, match="no sdp"):
        offer_of("multipart/form-data; boundary=B", form.replace(b'"sdp"', b'"x"'))
    with pytest.raises(ValueError, match="not an object"):
        offer_of("multipart/form-data; boundary=B", form.replace(b'{"model": "m"}', b"[1]  "))


def test_the_page_s_server_creates_its_call_and_hands_it_the_turn_server(
        start_emulator: Start) -> None:
    """web-booking --webrtc's server side (faultlab/clients/call_relay.py): the page's offer
    becomes a call with the booking's session (the emulator's emulator.call); the page gets the
    lab's TURN server as its only ICE server, none without one; a body that is no offer and a
    call the service refuses are answered with their status, never a traceback."""
    from faultlab.clients.call_relay import CallRelay, ice_servers

    emulator = start_emulator("openai-realtime", 0.1)
    relay = CallRelay(MODEL, audio=False, timeout_s=5.0)
    status, answer = relay.answer("POST", "offer", {},
                                  json.dumps({"sdp": asyncio.run(offer())}).encode())
    assert status == 200 and "m=application" in answer["sdp"], answer
    assert answer["call"].startswith("rtc_")
    assert events_of(emulator, "emulator.call", last={"call": answer["call"]}) != []

    assert relay.answer("POST", "offer", {}, b"{}")[0] == 400
    status, refused = relay.answer("POST", "offer", {},
                                   json.dumps({"sdp": asyncio.run(offer(channel=False))}).encode())
    assert status == 400 and "data channel" in refused["error"]
    assert relay.answer("GET", "nothing", {}, b"")[0] == 404

    assert relay.answer("GET", "ice", {}, b"") == (200, {"iceServers": []})
    lab = {"FAULTLAB_TURN_URLS": "turn:10.0.0.1:3478?transport=udp turns:10.0.0.1:5349",
           "FAULTLAB_TURN_USERNAME": "1700000000:faultlab", "FAULTLAB_TURN_CREDENTIAL": "c2VjcmV0"}
    assert ice_servers(lab) == [{"urls": ["turn:10.0.0.1:3478?transport=udp",
                                          "turns:10.0.0.1:5349"],
                                 "username": "1700000000:faultlab", "credential": "c2VjcmV0"}]
