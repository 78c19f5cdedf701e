"""The reference clients' command lines: the options they share, and running one."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import Protocol

from faultlab.events import EventWriter
from faultlab.scenarios.booking import conversation
from faultlab.scenarios.booking.script import SCRIPT
from faultlab.units import parse_duration


class Client(Protocol):
    async def run(self) -> int: ...


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options every reference client takes: the conversation's, the connection's, the
    microphone's, and how it notices a loss and resumes."""
    conversation.add_arguments(p)
    p.add_argument("--close-old-after", type=parse_duration, default=None,
                   help="keep a lost connection and close it (1000) this long after noticing "
                        "the loss")
    p.add_argument("--close-old-on-return", action="store_true",
                   help="keep a lost connection and close it (1000) once it answers a ping")
    p.add_argument("--audio", action="store_true",
                   help="ask for spoken replies (24 kHz audio with a transcript)")
    p.add_argument("--mic", action="store_true",
                   help="speak through the lab's microphone (FAULTLAB_MIC) instead of typing")
    p.add_argument("--keep-alive", choices=["source", "uplink"], default="source",
                   help="with --mic: send silence while the microphone stalls, keyed on the "
                        "source's arrival (right) or on the uplink's sends (the mistake: a held "
                        "back uplink then gets silence mixed into speech)")
    p.add_argument("--no-keep-alive", dest="keep_alive", action="store_const", const=None,
                   help="with --mic: send only what the microphone hands over (no silence "
                        "while it stalls)")
    p.add_argument("--stream-end", action="store_true",
                   help="with --mic: send audioStreamEnd when the microphone ends")
    conversation.add_backend_arguments(p)
    p.add_argument("--first-resume", type=parse_duration, default=0.0)
    p.add_argument("--retry-after", type=parse_duration,
                   default=SCRIPT.defaults_s["retry_after"])
    p.add_argument("--give-up-after", type=parse_duration, default=60.0)
    p.add_argument("--connect-timeout", type=parse_duration,
                   default=SCRIPT.defaults_s["connect_timeout"],
                   help="a resume attempt that has not connected by then counts as refused")
    p.add_argument("--ping-interval", type=parse_duration,
                   default=SCRIPT.defaults_s["ping_interval"])
    p.add_argument("--lost-after", type=parse_duration,
                   default=SCRIPT.defaults_s["lost_after"])
    p.add_argument("--quiet", type=parse_duration,
                   default=SCRIPT.defaults_s["quiet"],
                   help="after the answer, leave once nothing has come for this long")
    p.add_argument("--duration", type=parse_duration,
                   default=SCRIPT.defaults_s["duration"])
    p.add_argument("--model", default=SCRIPT.models["gemini"])


def parser_for(doc: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return parser


def main(client: Callable[[argparse.Namespace, EventWriter], Client],
         parser: argparse.ArgumentParser) -> None:
    """Run a client made with the parsed options; exit with its code."""
    events = EventWriter()
    code = asyncio.run(client(parser.parse_args(), events).run())
    events.close()
    sys.exit(code)
