"""The booking backend of the field study: a job per tool call, a ledger, dedupe by business key.

A call starts a job that commits after `commit_s` (4 s, or 7 s in the long scenarios; times the
time scale). The ledger, kept by call id and by business key (the slot), is the truth that
clients read for their status lines and expectations read for `bookings`: a second call for a
slot already booked or being booked (a re-issued call has a new id) joins the first booking.
Every change is an event (`backend.job`, `backend.commit`, `backend.deduped`) and the ledger is
written to a JSON file after each change.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from faultlab.events import EventWriter
from faultlab.scenarios.booking.events import BackendCommit, BackendDeduped, BackendJob
from faultlab.scenarios.booking.script import SCRIPT


def run_ledger() -> Path | None:
    """Where a client's backend keeps its ledger: `ledger.json` in the run folder (None outside
    a run)."""
    run_dir = os.environ.get("FAULTLAB_RUN_DIR")
    return Path(run_dir) / "ledger.json" if run_dir else None


def business_key(slot: str) -> str:
    """The slot, spelt canonically: "tomorrow at 3pm" and "tomorrow 3pm" are one booking."""
    return " ".join(w for w in slot.lower().replace(",", " ").split() if w != "at")


@dataclass
class Booking:
    id: str
    key: str
    slot: str
    call_ids: list[str]
    status: str = "pending"  # then "committed"

    def status_line(self) -> str:
        """What a client tells a new session about this side effect."""
        return SCRIPT.status_line.format(tool=SCRIPT.tool, slot=self.slot, status=self.status,
                                         booking=self.id)


@dataclass
class Ledger:
    bookings: list[Booking] = field(default_factory=list)

    def by_key(self, key: str) -> Booking | None:
        return next((b for b in self.bookings if b.key == key), None)

    def by_call(self, call_id: str) -> Booking | None:
        return next((b for b in self.bookings if call_id in b.call_ids), None)


class BookingBackend:
    def __init__(self, commit_s: float = 4.0, time_scale: float = 1.0,
                 ledger_path: Path | None = None, events: EventWriter | None = None) -> None:
        self.commit_s = commit_s * time_scale
        self.ledger = Ledger()
        self.ledger_path = ledger_path
        self.events = events or EventWriter(None)
        self._jobs: dict[str, asyncio.Task[None]] = {}

    def book(self, call_id: str, slot: str) -> Booking:
        """Start (or join, by business key) the booking for a call; returns it at once."""
        key = business_key(slot)
        existing = self.ledger.by_key(key)
        if existing is not None:
            if call_id not in existing.call_ids:
                existing.call_ids.append(call_id)
            self.events.announce(BackendDeduped(call_id, slot, existing.id, existing.status))
            self._save()
            return existing
        booking = Booking(f"B{len(self.ledger.bookings) + 1}", key, slot, [call_id])
        self.ledger.bookings.append(booking)
        self.events.announce(BackendJob(call_id, slot, booking.id, self.commit_s))
        self._jobs[booking.id] = asyncio.get_running_loop().create_task(self._commit(booking))
        self._save()
        return booking

    async def _commit(self, booking: Booking) -> None:
        await asyncio.sleep(self.commit_s)
        booking.status = "committed"
        self.events.announce(BackendCommit(booking.id, booking.slot, list(booking.call_ids)))
        self._save()

    async def committed(self, booking: Booking) -> Booking:
        """Wait for a booking's job to finish."""
        job = self._jobs.get(booking.id)
        if job is not None:
            await asyncio.shield(job)
        return booking

    def status_lines(self) -> list[str]:
        return [b.status_line() for b in self.ledger.bookings]

    def _save(self) -> None:
        if self.ledger_path is not None:
            tmp = self.ledger_path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"bookings": [asdict(b) for b in self.ledger.bookings]},
                                      indent=1))
            tmp.replace(self.ledger_path)

    def close(self) -> None:
        for job in self._jobs.values():
            job.cancel()
