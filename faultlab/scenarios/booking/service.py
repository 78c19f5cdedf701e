"""The booking backend over HTTP, for clients that are not Python (the JavaScript reference
clients, faultlab/clients/js/): the same ledger, `ledger.json` and `backend.*` events as the
in-process backend the Python clients hold (`backend.BookingBackend`).

Routes, under `/backend/`, with JSON bodies and answers (a booking is `{id, status, slot}`):
- `POST /backend/book {call_id, slot}`: start (or join, by slot) the booking for a tool call;
  answers at once with the booking, `pending` (or `committed`, when it joined one that had);
- `GET /backend/bookings/<id>`: the booking now; with `?wait=1`, once it has committed;
- `GET /backend/status`: `{lines, bookings}`, the status lines a client restores a new session
  with (`[status] book_slot(...): committed, booking B1`) and every booking.

The backend's jobs are asyncio tasks: it runs on an event loop of its own, on a thread of its own,
and the HTTP server's threads reach it with `asyncio.run_coroutine_threadsafe`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import threading
from collections.abc import Coroutine, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from faultlab.events import EventWriter
from faultlab.scenarios.booking.backend import Booking, BookingBackend

# Where the routes live in a server's paths.
PREFIX = "/backend/"
# An HTTP answer: its status code and its JSON body.
Answer = tuple[int, dict[str, Any]]
T = TypeVar("T")


def public(booking: Booking) -> dict[str, str]:
    """A booking as a route answers it."""
    return {"id": booking.id, "status": booking.status, "slot": booking.slot}


class BookingService:
    """A `BookingBackend` on an event loop thread of its own (started here), answering the
    routes; `close` cancels its jobs and ends the thread."""

    def __init__(self, commit_s: float = 4.0, time_scale: float = 1.0,
                 ledger_path: Path | None = None, events: EventWriter | None = None) -> None:
        self.backend = BookingBackend(commit_s, time_scale, ledger_path, events)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="booking-backend",
                                        daemon=True)
        self._thread.start()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the backend's loop and wait for its result (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def answer(self, method: str, route: str, query: Mapping[str, list[str]],
               body: bytes) -> Answer:
        """The answer to a request for `route` (the path after `/backend/`)."""
        if self._loop.is_closed():
            return 503, {"error": "the backend has closed"}
        try:
            if method == "POST" and route == "book":
                return self._book(body)
            if method == "GET" and route == "status":
                return 200, self._call(self._status())
            if method == "GET" and route.startswith("bookings/"):
                wait = query.get("wait", ["0"])[-1] not in ("", "0", "false")
                return self._booking(route.removeprefix("bookings/"), wait)
        except (concurrent.futures.CancelledError, RuntimeError):
            # Cancelled by `close` (or the loop gone): the run is ending.
            return 503, {"error": "the backend has closed"}
        return 404, {"error": f"no route {method} {PREFIX}{route}"}

    def _book(self, body: bytes) -> Answer:
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return 400, {"error": "the body is not JSON"}
        if not (isinstance(request, dict) and isinstance(request.get("call_id"), str)
                and isinstance(request.get("slot"), str)):
            return 400, {"error": "book takes {call_id: string, slot: string}"}
        return 200, self._call(self._book_on_loop(request["call_id"], request["slot"]))

    def _booking(self, booking_id: str, wait: bool) -> Answer:
        found = self._call(self._find(booking_id, wait))
        if found is None:
            return 404, {"error": f"no booking {booking_id!r}"}
        return 200, found

    # On the backend's loop.

    async def _book_on_loop(self, call_id: str, slot: str) -> dict[str, str]:
        return public(self.backend.book(call_id, slot))

    async def _find(self, booking_id: str, wait: bool) -> dict[str, str] | None:
        booking = next((b for b in self.backend.ledger.bookings if b.id == booking_id), None)
        if booking is None:
            return None
        if wait:
            await self.backend.committed(booking)
        return public(booking)

    async def _status(self) -> dict[str, Any]:
        return {"lines": self.backend.status_lines(),
                "bookings": [public(b) for b in self.backend.ledger.bookings]}

    async def _stop(self) -> None:
        """Cancel the jobs, and with them every request waiting for one (their answer: 503)."""
        self.backend.close()
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    # Lifetime.

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(concurrent.futures.CancelledError, RuntimeError):
            self._call(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> BookingService:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
