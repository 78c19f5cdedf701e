"""The lab's TURN listeners and their URLs, as `iceServers` write them: what the TURN server
(faultlab.turn) listens on, and how a client tells its URLs apart (faultlab/clients/webrtc.py).
A leaf: a client reads it without the lab's imports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple

TURN_PORT = 3478
TURNS_PORT = 5349
# Each listener a profile's `turn` may ask for: its URL's scheme, its port and what carries it.
LISTENERS: dict[str, tuple[str, int, Literal["tcp", "udp"]]] = {
    "udp": ("turn", TURN_PORT, "udp"), "tcp": ("turn", TURN_PORT, "tcp"),
    "tls": ("turns", TURNS_PORT, "tcp")}
# What the lab hands the client in its environment (faultlab.turn.TurnAccess.env).
URLS_VAR = "FAULTLAB_TURN_URLS"  # space-separated
USERNAME_VAR = "FAULTLAB_TURN_USERNAME"
CREDENTIAL_VAR = "FAULTLAB_TURN_CREDENTIAL"
CA_VAR = "FAULTLAB_TURN_CA"


class Handed(NamedTuple):
    """The lab's TURN server as a client was handed it: no URLs without one."""

    urls: list[str]
    username: str
    credential: str


def handed(env: Mapping[str, str]) -> Handed:
    """What `env` (a client's environment) says of the lab's TURN server."""
    return Handed(env.get(URLS_VAR, "").split(), env.get(USERNAME_VAR, ""),
                  env.get(CREDENTIAL_VAR, ""))


def url(address: str, listener: str) -> str:
    """The URL of one listener on `address`."""
    scheme, port, carrier = LISTENERS[listener]
    return f"{scheme}:{address}:{port}?transport={carrier}"


def listener_of(turn_url: str) -> str | None:
    """Which listener a URL names (udp, tcp, tls), None for another."""
    return next((name for name, (scheme, _, carrier) in LISTENERS.items()
                 if turn_url.startswith(f"{scheme}:")
                 and turn_url.endswith(f"transport={carrier}")), None)
