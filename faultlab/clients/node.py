"""node-booking: the JavaScript reference client on Node (faultlab/clients/js/node.mjs, on
@google/genai) beside the booking backend it reaches over HTTP.

It serves the booking backend (faultlab/scenarios/booking/service.py: `--commit`, `--time-scale`
as the Python clients take them; the same ledger and `backend.*` events) on a loopback port of
the client's namespace, runs `node node.mjs` with the other arguments and `FAULTLAB_BACKEND` set
to the backend's URL, passes SIGTERM and SIGINT on to it, and exits with its code. Node reads no
SSLKEYLOGFILE: the client's TLS keys reach it through `--tls-keylog`. Without Node or the
package's node_modules (`make install` brings both) it says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

from faultlab.browser.serve import LabHttp
from faultlab.events import EventWriter
from faultlab.scenarios.booking.backend import run_ledger
from faultlab.scenarios.booking.conversation import add_backend_arguments
from faultlab.scenarios.booking.service import PREFIX, BookingService

PACKAGE = Path(__file__).parent / "js"
CLIENT = PACKAGE / "node.mjs"


def missing() -> str | None:
    """What the Node client lacks to run, in one line (None: nothing)."""
    if shutil.which("node") is None:
        return "node is not installed (run make install)"
    if not (PACKAGE / "node_modules" / "@google" / "genai").is_dir():
        return f"{PACKAGE / 'node_modules'} lacks the client's packages (run make install)"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False, epilog="Every other argument goes to node.mjs (`--help` there too).")
    add_backend_arguments(parser)
    args, rest = parser.parse_known_args()
    lacking = missing()
    if lacking is not None:
        print(f"node-booking: {lacking}", file=sys.stderr)
        sys.exit(2)
    keylog = os.environ.get("SSLKEYLOGFILE")
    argv = ["node", *([f"--tls-keylog={keylog}"] if keylog else []), str(CLIENT), *rest]
    events = EventWriter()
    with BookingService(args.commit, args.time_scale, run_ledger(), events) as backend, \
            LabHttp(None, {PREFIX: backend}) as server:
        env = {**os.environ,
               "FAULTLAB_BACKEND": f"http://127.0.0.1:{server.port}{PREFIX.rstrip('/')}"}
        proc = subprocess.Popen(argv, env=env)

        def forward(signum: int, _: FrameType | None) -> None:
            proc.send_signal(signum)

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, forward)
        code = proc.wait()
    events.close()
    # A node ended by a signal exits as a shell reports it.
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
