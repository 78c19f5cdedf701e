"""The proxy process's work (`python -m faultlab.proxy`, faultlab/proxy/__main__.py): mitmproxy
in transparent mode in the router namespace. A bare `Master` with only the addons needed is about
twice as fast as `DumpMaster`."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from pathlib import Path

from mitmproxy import options
from mitmproxy.addons import core, next_layer, proxyserver, tlsconfig
from mitmproxy.master import Master
from mitmproxy.net import tls

from faultlab.cassette.tape import TapeWriter
from faultlab.events import EventWriter
from faultlab.protocols import DEFAULT, PROTOCOLS
from faultlab.proxy.framelog import FrameLog
from faultlab.proxy.state import ProxyState, install
from faultlab.vocabulary.lab import ProxyStart, ProxyStop


async def main(args: argparse.Namespace) -> None:
    opts = options.Options()
    master = Master(opts)
    server = proxyserver.Proxyserver()
    state = ProxyState(server, EventWriter(), protocol=PROTOCOLS[args.protocol],
                       numbered=args.numbered)
    install(state)
    master.addons.add(core.Core(), server, next_layer.NextLayer(), tlsconfig.TlsConfig(),
                      FrameLog(state, TapeWriter(Path(args.tape)) if args.tape else None))
    # Addons declare their options: set them once all are loaded.
    opts.update(mode=["transparent"], listen_host="0.0.0.0", listen_port=args.port,
                confdir=args.confdir)
    if args.upstream_ca:
        opts.update(ssl_verify_upstream_trusted_ca=args.upstream_ca)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, master.shutdown)
    control = await state.serve_control(Path(args.control))
    state.events.announce(ProxyStart(args.port))
    await master.run()
    control.close()
    state.events.announce(ProxyStop())


def cli() -> None:
    parser = argparse.ArgumentParser(prog="python -m faultlab.proxy")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--confdir", required=True)
    parser.add_argument("--upstream-ca", default=None)
    parser.add_argument("--control", required=True, help="unix socket for the runner's requests")
    parser.add_argument("--tape", default=None, help="record the sessions on this tape")
    parser.add_argument("--numbered", action="store_true",
                        help="the run numbers the connections: a WebSocket waits for its number")
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default=DEFAULT.name,
                        help="the realtime API the client speaks (names its messages)")
    args = parser.parse_args()
    # mitmproxy takes its key log from the environment when it is imported, and a proxy forked
    # warm (faultlab.lab.zygote) was imported before its environment was set: take it now.
    tls.log_master_secret = tls.make_master_secret_logger(
        os.getenv("MITMPROXY_SSLKEYLOGFILE") or os.getenv("SSLKEYLOGFILE"))
    asyncio.run(main(args))
