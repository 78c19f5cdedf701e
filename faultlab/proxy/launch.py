"""Starting the proxy for a lab: the REDIRECT, the mitmproxy process, its control channel."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

from faultlab.errors import LabError
from faultlab.events import EventBus
from faultlab.faults.iptables import redirect
from faultlab.lab.netns import NetnsLab
from faultlab.lab.process import LabProcess, listening
from faultlab.proxy.control import ProxyControl
from faultlab.tls import LabCA

PROXY_PORT = 8080
# mitmproxy takes ~0.7 s to import and start here.
READY_S = 15.0
POLL_S = 0.02


async def launch_proxy(lab: NetnsLab, target_port: int, ca: LabCA, work_dir: Path,
                       events_file: Path, bus: EventBus, stack: AsyncExitStack,
                       verify_with_lab_ca: bool) -> ProxyControl:
    """mitmproxy in the router, fed the client's connections to `target_port` by a REDIRECT;
    everything it leaves is stopped and removed by `stack`."""
    await redirect(lab.router, lab.client_link, target_port, PROXY_PORT)
    # A unix socket path is limited to 108 bytes: the work folder may be deeper than that.
    sock_dir = Path(tempfile.mkdtemp(prefix="faultlab-"))
    stack.callback(shutil.rmtree, sock_dir, True)
    control_path = sock_dir / "proxy.sock"
    argv = [sys.executable, "-m", "faultlab.proxy", "--port", str(PROXY_PORT), "--confdir",
            str(ca.mitmproxy_confdir(work_dir / "mitmproxy")), "--control", str(control_path)]
    if verify_with_lab_ca:
        argv += ["--upstream-ca", str(ca.cert_path)]
    env = dict(os.environ, FAULTLAB_EVENTS=str(events_file),
               MITMPROXY_SSLKEYLOGFILE=str(work_dir / "keys.log"))
    proxy = await LabProcess.start("proxy", lab.router, argv, env, None, work_dir / "proxy.log",
                                   bus)
    stack.push_async_callback(proxy.stop)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READY_S
    while not listening(proxy.proc.pid, PROXY_PORT):
        if not proxy.alive or loop.time() > deadline:
            raise LabError(f"the proxy did not start; see {work_dir / 'proxy.log'}")
        await asyncio.sleep(POLL_S)
    control = ProxyControl(control_path)
    await control.connect(READY_S)
    stack.push_async_callback(control.close)
    bus.emit("faultlab", "proxy.ready", port=PROXY_PORT)
    return control
