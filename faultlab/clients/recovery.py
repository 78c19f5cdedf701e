"""field-recovery: the field study's recovery pattern on the SDK.

Like `naive`, but when the path dies it resumes only within a short window (`--window`, 4 s; one
attempt a second) while sending a close on the old socket in parallel; then it opens a new
session and restores it with the user's request and one status line per side effect, taken from
the backend (not from memory; `--no-status-note` leaves them out, field BR1-nonote). If every
booking has committed, the restore asks the question too, so the model speaks at once; a job that
finishes after the restore is reported with an update note. Events as `naive`, plus
recovery.new_session (since_loss_s), recovery.restored (lines) and client.status_note.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time

from faultlab.clients.naive import Connection, NaiveClient, main, parser_for
from faultlab.scenarios.booking.backend import Booking
from faultlab.units import parse_duration


class RecoveryClient(NaiveClient):
    async def _drop(self, why: str) -> None:
        old = getattr(self.session, "_ws", None)
        if old is not None and not self.lost.is_set():
            # Get a close to the server if the path allows: that is what unlocks the session.
            self._spawn(old.close(1000))
            await asyncio.sleep(0)
        await super()._drop(why)

    async def _recover(self) -> bool:
        lost_at = time.monotonic()
        connection = await self._resume_attempts(lost_at, self.args.give_up_after)
        if connection is not None:
            self._install(*connection)
            return True
        await self._restore(await self._connect(None), lost_at)
        return True

    async def _restore(self, connection: Connection, lost_at: float) -> None:
        """Make a new session the one in use and tell it what the user asked and what the
        backend has done; ask the question with it when its answer is known."""
        self.generation += 1
        self._install(*connection)
        self.events.emit("recovery.new_session", since_loss_s=round(time.monotonic() - lost_at, 3))
        lines = self.backend.status_lines() if self.args.status_note else []
        turns = [("user", self.args.say), *(("user", line) for line in lines)]
        ask = self._ask_due()
        if ask:
            turns.append(("user", self.args.ask))
        await self._say(turns, turn_complete=ask or bool(lines))
        if ask:
            self._mark_asked()
        self.events.emit("recovery.restored", lines=len(lines), asked=ask)

    async def _call_outlived(self, booking: Booking) -> None:
        """Tell the new session what happened to a call of the old one (the update note)."""
        if self.args.status_note:
            with contextlib.suppress(Exception):
                await self._say([("user", booking.status_line())], turn_complete=False)
                self.events.emit("client.status_note", booking=booking.id, status=booking.status)


def add_recovery_arguments(parser: argparse.ArgumentParser, window_s: float) -> None:
    parser.set_defaults(give_up_after=window_s)
    parser.add_argument("--window", dest="give_up_after", type=parse_duration,
                        help=f"how long to try resuming before a new session (default "
                             f"{window_s:g}s)")
    parser.add_argument("--no-status-note", dest="status_note", action="store_false",
                        help="restore a new session without the backend's status lines")


def cli() -> None:
    parser = parser_for(__doc__)
    add_recovery_arguments(parser, 4.0)
    main(RecoveryClient, parser)


if __name__ == "__main__":
    cli()
