"""faultlab's own programs a profile can name as `builtin`: WebSocket peers and Live API clients."""

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
}


def builtin_command(name: str) -> list[str]:
    """The command line of a builtin program, run by the interpreter running faultlab."""
    return [sys.executable, "-m", BUILTINS[name]]
