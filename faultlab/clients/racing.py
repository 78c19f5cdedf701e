"""racing-recovery: the field's recovery pattern with the waiting taken out.

Like `field-recovery` (close sent on the old socket, a new session restored with the backend's
status lines, dedupe by business key), but it does not spend a resume window before the new
session: when the connection has been quiet for `--standby-after` (1 s; lost at 2 s) it already
opens a standby session, and once the loss is declared it races resume attempts against that
session and keeps whichever is ready first, closing the other. The field pattern's gap (loss to
first recovered audio, 6.1-7.1 s) was mostly its 4 s resume window and the set-up after it.
Events as `field-recovery`, plus recovery.standby and recovery.race (winner).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from typing import Any

from faultlab.clients.driver import Connection, ReferenceClient
from faultlab.clients.naive import LiveTransport
from faultlab.clients.options import main, parser_for
from faultlab.clients.recovery import RestoreSession, add_recovery_arguments
from faultlab.events import EventWriter
from faultlab.scenarios.booking.script import SCRIPT
from faultlab.units import parse_duration
from faultlab.vocabulary.session import RecoveryRace, RecoveryStandby


class Racing(RestoreSession):
    """racing-recovery's recovery: a standby session opened while the connection is suspect,
    raced against resuming once it is lost."""

    def __init__(self, status_notes: bool, standby_after_s: float) -> None:
        super().__init__(status_notes)
        self.standby_after_s = standby_after_s
        self._standby: asyncio.Task[Connection] | None = None

    def suspect(self, client: ReferenceClient, quiet_s: float) -> None:
        if quiet_s > self.standby_after_s and self._standby is None:
            client.events.announce(RecoveryStandby(round(quiet_s, 3)))
            self._standby = asyncio.create_task(client.connect(None))

    async def recover(self, client: ReferenceClient) -> bool:
        lost_at = time.monotonic()
        fresh = self._standby or asyncio.create_task(client.connect(None))
        self._standby = None
        racers: dict[asyncio.Task[Any], str] = {fresh: "new session"}
        resumed = None
        if client.handle is not None:  # without a handle there is nothing to resume
            resumed = asyncio.create_task(
                client.resume_attempts(lost_at, client.args.give_up_after))
            racers[resumed] = "resume"
        winner: asyncio.Task[Any] | None = None
        pending = set(racers)
        while pending and winner is None:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            winner = next((t for t in done if t.exception() is None and t.result() is not None),
                          None)
        for task in racers:
            if task is not winner:
                await _discard(task)
        if winner is None:
            return False
        client.events.announce(RecoveryRace(racers[winner],
                                            round(time.monotonic() - lost_at, 3)))
        if winner is resumed:
            client.install(*winner.result())
        else:
            await client.restore(winner.result(), lost_at)
        return True

    async def leave(self, client: ReferenceClient) -> None:
        if self._standby is not None:
            await _discard(self._standby)


async def _discard(task: asyncio.Task[Any]) -> None:
    """Stop a racer; a connection it already set up is closed."""
    task.cancel()
    await asyncio.wait({task})
    if task.cancelled() or task.exception() is not None or task.result() is None:
        return
    stack = task.result()[0]
    if stack is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(stack.aclose(), 1.0)


def racing_recovery(args: argparse.Namespace, events: EventWriter) -> ReferenceClient:
    return ReferenceClient(args, events, LiveTransport(args),
                           Racing(args.status_note, args.standby_after))


def cli() -> None:
    parser = parser_for(__doc__)
    add_recovery_arguments(parser, SCRIPT.defaults_s["window"])
    parser.add_argument("--standby-after", type=parse_duration, default=1.0,
                        help="open a standby session once the connection is quiet this long")
    main(racing_recovery, parser)


if __name__ == "__main__":
    cli()
