"""field-recovery: the field study's recovery pattern on the SDK.

Like `naive`, but when the path dies it resumes only within a short window (`--window`, 4 s; one
attempt a second) while sending a close on the old socket in parallel; then it opens a new
session and restores it with the user's request and one status line per side effect, taken from
the backend (not from memory). A job that finishes after the restore is reported with an update
note. Events as `naive`, plus recovery.new_session (since_loss_s) and client.status_note.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time

from faultlab.clients.backend import Booking
from faultlab.clients.naive import NaiveClient, main, parser_for
from faultlab.events import EventWriter
from faultlab.units import parse_duration


class RecoveryClient(NaiveClient):
    def __init__(self, args: argparse.Namespace, events: EventWriter) -> None:
        super().__init__(args, events)
        self.generation = 0  # which session a call belongs to: a new session cannot answer it

    async def _drop(self, why: str) -> None:
        old = getattr(self.session, "_ws", None)
        if old is not None and not self.lost.is_set():
            # Get a close to the server if the path allows: that is what unlocks the session.
            task = asyncio.create_task(old.close(1000))
            self._responders.add(task)
            task.add_done_callback(self._responders.discard)
            await asyncio.sleep(0)
        await super()._drop(why)

    async def _resume(self) -> bool:
        lost_at = time.monotonic()
        if await super()._resume():
            return True
        await self._open(None)
        self.generation += 1
        self.events.emit("recovery.new_session",
                         since_loss_s=round(time.monotonic() - lost_at, 3))
        await self._say([("user", self.args.say), *(("user", line)
                                                    for line in self.backend.status_lines())],
                        turn_complete=False)
        return True

    async def _say(self, turns: list[tuple[str, str]], turn_complete: bool) -> None:
        from google.genai import types

        await self.session.send_client_content(turns=[
            types.Content(role=role, parts=[types.Part(text=text)]) for role, text in turns],
            turn_complete=turn_complete)

    async def _respond(self, call_id: str, name: str, booking: Booking) -> None:
        born = self.generation
        await self.backend.committed(booking)
        if born == self.generation:
            await super()._respond(call_id, name, booking)
            return
        # The call belongs to a session that is gone: tell the new one what happened instead.
        await self.up.wait()
        with contextlib.suppress(Exception):
            await self._say([("user", booking.status_line())], turn_complete=False)
            self.events.emit("client.status_note", booking=booking.id, status=booking.status)


def cli() -> None:
    parser = parser_for(__doc__)
    parser.set_defaults(give_up_after=4.0)
    parser.add_argument("--window", dest="give_up_after", type=parse_duration,
                        help="how long to try resuming before a new session (default 4s)")
    main(RecoveryClient, parser)


if __name__ == "__main__":
    cli()



