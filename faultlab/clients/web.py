"""web-booking: the reference web page (faultlab/clients/js/web/, the booking conversation on
@google/genai's browser build) in the lab's headless Chromium, with the booking backend on the
page's own origin.

The page and `/backend/` (faultlab/scenarios/booking/service.py: `--commit`, `--time-scale`, the
same ledger and `backend.*` events as the Python clients') are served on the client's loopback;
the other options become the page's query: `--say`, `--ask`, `--model`, the durations
`--ask-after`, `--retry-after`, `--window`, `--lost-after`, `--quiet`, `--duration`,
`--connect-timeout`, and the switches `--mic` (speak from the lab's microphone), `--audio`
(spoken replies) and `--no-status-note`. With `--webrtc`, the page calls OpenAI Realtime over
WebRTC (js/web/call.mjs) through its own server's `/call/` (faultlab/clients/call_relay.py, which
holds the key and creates the call with the booking's session; `--model` its model), as
openai-webrtc does in Python; it gives a lost call up. The page logs the reference clients' events and ends
with `client.done`, whose code is the exit code; a page still running `--duration` plus a margin
after it opened is ended (exit 3). Without the built page (`make install` builds it) it says so
in one line and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from urllib.parse import urlencode

from faultlab.browser.__main__ import open_page
from faultlab.browser.serve import Backend
from faultlab.browser.spec import BrowserPage
from faultlab.clients import call_relay
from faultlab.events import EventWriter
from faultlab.scenarios.booking.backend import run_ledger
from faultlab.scenarios.booking.conversation import add_backend_arguments
from faultlab.scenarios.booking.script import SCRIPT
from faultlab.scenarios.booking.service import PREFIX, BookingService
from faultlab.units import parse_duration

PAGE = Path(__file__).parent / "js" / "web"
BUNDLE = PAGE / "dist" / "page.js"
# The page's own end comes first; this margin covers the browser's start and the page's load.
MARGIN_S = 15.0
NOT_DONE = 3  # as the reference clients exit when never answered
# Options whose value goes to the page's query, by the query's name.
VALUES = {"say": "say", "ask": "ask", "model": "model", "api_key": "apiKey"}
DURATIONS = {"ask_after": "askAfter", "retry_after": "retryAfter", "window": "window",
             "lost_after": "lostAfter", "quiet": "quiet", "duration": "duration",
             "connect_timeout": "connectTimeout"}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_backend_arguments(p)
    for option in VALUES:
        p.add_argument("--" + option.replace("_", "-"))
    for option in DURATIONS:
        p.add_argument("--" + option.replace("_", "-"), type=parse_duration)
    p.add_argument("--mic", action="store_true")
    p.add_argument("--audio", action="store_true")
    p.add_argument("--no-status-note", dest="status_note", action="store_false")
    p.add_argument("--webrtc", action="store_true")
    return p


def query(args: argparse.Namespace) -> str:
    """The page's query for the options given (the page's defaults for the others)."""
    pairs = {name: getattr(args, option) for option, name in VALUES.items()
             if getattr(args, option) is not None and not (args.webrtc and option == "model")}
    pairs |= {name: f"{getattr(args, option):g}s" for option, name in DURATIONS.items()
              if getattr(args, option) is not None}
    pairs |= {name: value for name, value in (("mic", "1" if args.mic else None),
                                               ("audio", "1" if args.audio else None),
                                               ("statusNote", None if args.status_note else "0"),
                                               ("webrtc", "1" if args.webrtc else None))
              if value is not None}
    return urlencode(pairs)


def main() -> None:
    args = parser().parse_args()
    if not BUNDLE.is_file():
        print(f"web-booking: {BUNDLE} is not built (run make install)", file=sys.stderr)
        sys.exit(2)
    duration = args.duration if args.duration is not None else 60.0
    page = BrowserPage.model_validate({"serve": PAGE, "path": "/?" + query(args),
                                       "timeout": f"{duration + MARGIN_S:g}s",
                                       "timeout_exit": NOT_DONE})
    events = EventWriter()
    with BookingService(args.commit, args.time_scale, run_ledger(), events) as backend:
        routes: dict[str, Backend] = {PREFIX: backend}
        if args.webrtc:
            routes[call_relay.PREFIX] = call_relay.CallRelay(
                args.model or SCRIPT.models["openai"], args.audio or args.mic,
                args.connect_timeout if args.connect_timeout is not None
                else SCRIPT.defaults_s["connect_timeout"])
        code = asyncio.run(open_page(page, routes))
    events.close()
    sys.exit(code)


if __name__ == "__main__":
    main()
