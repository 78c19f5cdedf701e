"""faultlab's own programs a profile can name as `builtin`: its WebSocket peers here, and the
builtin clients each realtime API's plugin brings (`ApiPlugin.builtins`: Gemini Live's probe) and
each scenario pack brings (`ScenarioPack.clients`: the booking pack's reference clients on Gemini
Live, in Python, Node and a page, and on OpenAI Realtime)."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from faultlab.plugins import View

# The peers' own: the module each runs.
PEERS: dict[str, str] = {
    "ws-echo-server": "faultlab.peers.ws_server",
    "ws-client": "faultlab.peers.ws_client",
}


def _builtins() -> dict[str, str]:
    from faultlab.protocols import apis
    from faultlab.scenarios import packs

    found = dict(PEERS)
    for owner, programs in [*((f"API {a.name}", a.builtins) for a in apis().values()),
                            *((f"scenario pack {p.name}", p.clients) for p in packs().values())]:
        for name, module in programs.items():
            if found.setdefault(name, module) != module:
                raise ValueError(f"{owner} brings a builtin named {name!r}, which is already "
                                 f"{found[name]}")
    return found


# Builtin programs a profile can name instead of a command: the module each runs with `-m`.
BUILTINS: Mapping[str, str] = View(_builtins)


# The interpreter with faultlab installed in faultlab's images (containers/clients/Dockerfile).
IMAGE_PYTHON = "python3"


def builtin_command(name: str, in_image: bool = False) -> list[str]:
    """The command line of a builtin program, run by the interpreter running faultlab, or in a
    container by the image's (faultlab-clients has faultlab on its PATH)."""
    return [IMAGE_PYTHON if in_image else sys.executable, "-m", BUILTINS[name]]
