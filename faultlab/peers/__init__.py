"""faultlab's own programs a profile can name as `builtin`: WebSocket peers, and the reference
clients of Gemini Live (on the Python SDK, and on the JavaScript one in Node) and OpenAI Realtime."""

from __future__ import annotations

import sys

# Builtin programs a profile can name instead of a command: the module each runs.
BUILTINS: dict[str, str] = {
    "ws-echo-server": "faultlab.peers.ws_server",
    "ws-client": "faultlab.peers.ws_client",
    "live-probe": "faultlab.clients.probe",
    "naive": "faultlab.clients.naive",
    "field-recovery": "faultlab.clients.recovery",
    "racing-recovery": "faultlab.clients.racing",
    "openai-naive": "faultlab.clients.openai_naive",
    "openai-recovery": "faultlab.clients.openai_recovery",
    "node-booking": "faultlab.clients.node",
    "web-booking": "faultlab.clients.web",
}


# The interpreter with faultlab installed in faultlab's images (containers/clients/Dockerfile).
IMAGE_PYTHON = "python3"


def builtin_command(name: str, in_image: bool = False) -> list[str]:
    """The command line of a builtin program, run by the interpreter running faultlab, or in a
    container by the image's (faultlab-clients has faultlab on its PATH)."""
    return [IMAGE_PYTHON if in_image else sys.executable, "-m", BUILTINS[name]]
