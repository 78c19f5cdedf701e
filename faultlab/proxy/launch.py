"""Starting the proxy for a lab: the REDIRECT, the mitmproxy process, its control channel."""

from __future__ import annotations

import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path

from faultlab.events import EventBus
from faultlab.lab.base import Lab
from faultlab.lab.netfilter import redirect
from faultlab.lab.process import LabProcess, wait_listening
from faultlab.private import create_private
from faultlab.protocols import Protocol as RealtimeApi
from faultlab.proxy.control import ProxyControl
from faultlab.tls import LabCA
from faultlab.vocabulary.lab import ProxyReady

PROXY_PORT = 8080
# mitmproxy takes ~0.7 s to import and start here (several seconds on a loaded machine).
READY_S = 15.0


async def launch_proxy(lab: Lab, target_port: int, ca: LabCA, work_dir: Path, events_file: Path,
                       bus: EventBus, stack: AsyncExitStack, upstream_ca: Path | None,
                       protocol: RealtimeApi, tape: Path | None = None, *,
                       numbered: bool = True) -> ProxyControl:
    """mitmproxy in the router, fed the client's connections to `target_port` by a REDIRECT,
    verifying the target's certificate with `upstream_ca` (a PEM bundle; None: mitmproxy's
    default), naming messages in `protocol`'s words, recording the sessions on `tape` if
    given; everything it leaves is stopped and removed by `stack`. `numbered`: a run's capture
    numbers the connections (`tcp.connect`), and a WebSocket waits for its number."""
    await redirect(lab.router, lab.client_link, target_port, PROXY_PORT)
    # A unix socket path is limited to 108 bytes: the work folder may be deeper than that. The
    # lab's scratch folder goes with the lab, and with `lab gc` after a SIGKILL.
    control_path = lab.scratch / "proxy.sock"
    stack.callback(control_path.unlink, True)
    argv = [sys.executable, "-m", "faultlab.proxy", "--port", str(PROXY_PORT), "--confdir",
            str(ca.mitmproxy_confdir(work_dir / "mitmproxy")), "--control", str(control_path),
            "--protocol", protocol.name]
    if upstream_ca is not None:
        argv += ["--upstream-ca", str(upstream_ca)]
    if tape is not None:
        argv += ["--tape", str(tape)]
    if numbered:
        argv += ["--numbered"]
    env = dict(os.environ, FAULTLAB_EVENTS=str(events_file),
               MITMPROXY_SSLKEYLOGFILE=str(create_private(work_dir / "keys.log")))
    log = create_private(work_dir / "proxy.log")
    proxy = LabProcess.started("proxy", await lab.start("router", argv, env, None, log), argv, bus)
    stack.push_async_callback(proxy.stop)
    await wait_listening(proxy, PROXY_PORT, READY_S, log)
    control = ProxyControl(control_path)
    await control.connect(READY_S)
    stack.push_async_callback(control.close)
    bus.subscribe(control.observe)
    bus.announce("faultlab", ProxyReady(PROXY_PORT))
    return control
