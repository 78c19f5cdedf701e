"""field-recovery: the field study's recovery pattern on the SDK.

Like `naive`, but when the path dies it resumes only within a short window (`--window`, 4 s; one
attempt a second) while sending a close on the old socket in parallel; then it opens a new
session and restores it with the user's request and one status line per side effect, taken from
the backend (not from memory; `--no-status-note` leaves them out, field BR1-nonote). If every
booking has committed, the restore asks the question too, so the model speaks at once; a request
the model never answered ends the restored turn, so that it does; a job that finishes after the
restore is reported with an update note. Lost before the server's first handle, there is nothing
to resume: it restores a new session at once. Events as `naive`, plus
recovery.new_session (since_loss_s), recovery.restored (lines) and client.status_note.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from faultlab.clients import sdk
from faultlab.clients.driver import ReferenceClient
from faultlab.clients.naive import LiveTransport, ResumeOnly
from faultlab.clients.options import main, parser_for
from faultlab.events import EventWriter
from faultlab.scenarios.booking.script import SCRIPT
from faultlab.units import parse_duration


class RestoreSession(ResumeOnly):
    """field-recovery's recovery: a close sent on the old socket at once; resumes within the
    window; then a new session, restored."""

    def __init__(self, status_notes: bool) -> None:
        self.status_notes = status_notes

    async def before_drop(self, client: ReferenceClient) -> None:
        old = sdk.websocket(client.session)
        if old is not None:
            # Get a close to the server if the path allows: that is what unlocks the session.
            client.spawn(old.close(1000))
            await asyncio.sleep(0)

    async def recover(self, client: ReferenceClient) -> bool:
        lost_at = time.monotonic()
        # Lost before the server's first handle, the session has nothing to resume: connecting
        # without one opens a new, empty session, which `faultlab explore` found taken for a
        # resumed one (the request never said again, the user never answered).
        if client.handle is not None:
            connection = await client.resume_attempts(lost_at, client.args.give_up_after)
            if connection is not None:
                client.install(*connection)
                return True
        await client.restore(await client.connect(None), lost_at)
        return True


def add_recovery_arguments(parser: argparse.ArgumentParser, window_s: float) -> None:
    parser.set_defaults(give_up_after=window_s)
    parser.add_argument("--window", dest="give_up_after", type=parse_duration,
                        help=f"how long to try resuming before a new session (default "
                             f"{window_s:g}s)")
    parser.add_argument("--no-status-note", dest="status_note", action="store_false",
                        help="restore a new session without the backend's status lines")


def field_recovery(args: argparse.Namespace, events: EventWriter) -> ReferenceClient:
    return ReferenceClient(args, events, LiveTransport(args), RestoreSession(args.status_note))


def cli() -> None:
    parser = parser_for(__doc__)
    add_recovery_arguments(parser, SCRIPT.defaults_s["window"])
    main(field_recovery, parser)


if __name__ == "__main__":
    cli()
