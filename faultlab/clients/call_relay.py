"""The web page's own server side of its WebRTC call (web-booking `--webrtc`), as an app's server
does it with OpenAI's Realtime calls: the page never holds the key. The page asks `/call/ice` for
its ICE servers (the lab's TURN server when the run has one: `FAULTLAB_TURN_URLS` and its
credentials; never a STUN server outside the lab) and posts its SDP offer to `/call/offer`; the
relay creates the call with the key and the booking's session settings (the openai SDK's
`realtime.calls.create`, at `OPENAI_BASE_URL`) and answers with the SDP answer. A call refused
is answered with the service's status and message, a service that does not answer with 502.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from faultlab.clients.realtime import booking_session
from faultlab.turn_urls import handed

Answer = tuple[int, dict[str, Any]]
PREFIX = "/call/"
BAD_GATEWAY = 502


def ice_servers(env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The lab's TURN server as RTCPeerConnection's `iceServers` take it (none without one)."""
    turn = handed(env)
    if not turn.urls:
        return []
    return [{"urls": turn.urls, "username": turn.username, "credential": turn.credential}]


class CallRelay:
    """The routes under `/call/` (faultlab.browser.serve.Backend), for calls of `model` with
    spoken (`audio`) or written replies, each offer given up after `timeout_s`."""

    def __init__(self, model: str, audio: bool, timeout_s: float) -> None:
        self.model = model
        self.audio = audio
        self.timeout_s = timeout_s

    def answer(self, method: str, route: str, query: Mapping[str, list[str]],
               body: bytes) -> Answer:
        if method == "GET" and route == "ice":
            return 200, {"iceServers": ice_servers(os.environ)}
        if method == "POST" and route == "offer":
            try:
                sdp = json.loads(body)["sdp"]
                if not isinstance(sdp, str):
                    raise TypeError("sdp")
            except (ValueError, KeyError, TypeError):
                return 400, {"error": "the body is not {\"sdp\": OFFER}"}
            return self._call(sdp)
        return 404, {"error": f"no route {method} {PREFIX}{route}"}

    def _call(self, offer: str) -> Answer:
        import openai

        session: Any = {**booking_session(self.audio), "model": self.model}
        try:
            with openai.OpenAI(timeout=self.timeout_s, max_retries=0) as client:
                answer = client.realtime.calls.create(sdp=offer, session=session)
        except openai.APIStatusError as exc:
            return exc.status_code, {"error": exc.message, "status": exc.status_code}
        except openai.APIConnectionError as exc:  # no HTTP answer at all (a timeout too)
            return BAD_GATEWAY, {"error": f"the offer got no answer: {exc}"}
        except openai.OpenAIError as exc:  # no key, or an answer the SDK cannot read
            return BAD_GATEWAY, {"error": f"the offer went wrong: {exc}"}
        call = answer.response.headers.get("location", "").rsplit("/", 1)[-1]
        return 200, {"sdp": answer.text, "call": call}
