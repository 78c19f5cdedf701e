"""The booking backend over HTTP and the lab's loopback server (faultlab/scenarios/booking/service.py,
faultlab/browser/serve.py), spoken to over real HTTP on loopback."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from faultlab.browser.serve import LabHttp
from faultlab.events import EventWriter
from faultlab.scenarios.booking.service import PREFIX, BookingService

from .conftest import patience

COMMIT_S = 0.3


def request(port: int, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], bytes]:
    """One request, as sent (no normalising of the path); its status, headers and body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        data = json.dumps(body).encode() if body is not None else None
        connection.request(method, path, body=data,
                           headers={"Content-Type": "application/json"} if data else {})
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def call(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    status, _, data = request(port, method, path, body)
    return status, json.loads(data)


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The backend's routes on a loopback port (commit after 0.3 s); the port and the run folder."""
    events = EventWriter(tmp_path / "client.events.jsonl")
    with BookingService(COMMIT_S, 1.0, tmp_path / "ledger.json", events) as service, \
            LabHttp(None, {PREFIX: service}) as server:
        yield server.port, tmp_path
    events.close()


def written(folder: Path) -> list[str]:
    return [json.loads(line)["event"]
            for line in (folder / "client.events.jsonl").read_text().splitlines()]


def test_a_booking_is_pending_at_once_and_committed_once_waited_for(
        backend: tuple[int, Path]) -> None:
    """POST book answers at once (pending); GET with wait=1 answers once the job has committed,
    which is `commit_s` after the job started on the backend's own clock; the ledger file and the
    backend's events say so."""
    port, folder = backend
    status, booking = call(port, "POST", "/backend/book", {"call_id": "c1", "slot": "tomorrow at 3pm"})
    assert status == 200
    assert booking == {"id": "B1", "status": "pending", "slot": "tomorrow at 3pm"}
    status, waited = call(port, "GET", "/backend/bookings/B1?wait=1")
    assert status == 200 and waited == {"id": "B1", "status": "committed", "slot": "tomorrow at 3pm"}
    ledger = json.loads((folder / "ledger.json").read_text())["bookings"]
    assert [(b["id"], b["status"], b["call_ids"]) for b in ledger] == [("B1", "committed", ["c1"])]
    job, commit = [json.loads(line) for line in (folder / "client.events.jsonl").read_text().splitlines()]
    assert (job["event"], commit["event"]) == ("backend.job", "backend.commit")
    assert commit["ts"] - job["ts"] >= COMMIT_S - 0.01  # the timer's own sleep, never shorter


def test_a_booking_is_answered_as_it_stands_without_wait(tmp_path: Path) -> None:
    """GET without wait answers at once with the booking's status: pending while its job runs."""
    service = BookingService(60.0, 1.0, None, None)
    with LabHttp(None, {PREFIX: service}) as server:
        call(server.port, "POST", "/backend/book", {"call_id": "c1", "slot": "today at 9am"})
        answer = call(server.port, "GET", "/backend/bookings/B1")
        service.close()
    assert answer == (200, {"id": "B1", "status": "pending", "slot": "today at 9am"})


def test_a_second_call_for_the_same_slot_joins_the_first_booking(backend: tuple[int, Path]) -> None:
    """A re-issued call (a new id, the slot in other words) is deduplicated by slot: one booking,
    one job, a backend.deduped event."""
    port, folder = backend
    first = call(port, "POST", "/backend/book", {"call_id": "c1", "slot": "tomorrow at 3pm"})[1]
    second = call(port, "POST", "/backend/book", {"call_id": "c2", "slot": "Tomorrow 3pm"})[1]
    assert first["id"] == second["id"] == "B1"
    call(port, "GET", "/backend/bookings/B1?wait=1")
    assert written(folder) == ["backend.job", "backend.deduped", "backend.commit"]


def test_status_gives_the_lines_a_new_session_is_restored_with(backend: tuple[int, Path]) -> None:
    """GET status: one status line per booking, as the Python clients restore with, and the
    bookings; none before any call."""
    port, _ = backend
    assert call(port, "GET", "/backend/status") == (200, {"lines": [], "bookings": []})
    call(port, "POST", "/backend/book", {"call_id": "c1", "slot": "tomorrow at 3pm"})
    call(port, "GET", "/backend/bookings/B1?wait=1")
    status, answer = call(port, "GET", "/backend/status")
    assert status == 200
    assert answer == {"lines": ["[status] book_slot(tomorrow at 3pm): committed, booking B1"],
                      "bookings": [{"id": "B1", "status": "committed", "slot": "tomorrow at 3pm"}]}


def test_bad_requests_are_refused_with_a_reason(backend: tuple[int, Path]) -> None:
    """An unknown booking is 404, a book without its fields 400, an unknown route 404: each with
    an error in JSON."""
    port, _ = backend
    assert call(port, "GET", "/backend/bookings/nosuch")[0] == 404
    assert call(port, "POST", "/backend/book", {"slot": "tomorrow at 3pm"})[0] == 400
    status, answer = call(port, "GET", "/backend/nosuch")
    assert status == 404 and "error" in answer


def test_a_request_waiting_when_the_backend_closes_is_answered_503(tmp_path: Path) -> None:
    """Closing the backend cancels its jobs: a request waiting for one gets 503, not a hang."""
    service = BookingService(60.0, 1.0, None, None)
    with LabHttp(None, {PREFIX: service}) as server:
        call(server.port, "POST", "/backend/book", {"call_id": "c1", "slot": "today at 9am"})
        answers: list[tuple[int, Any]] = []
        waiter = threading.Thread(
            target=lambda: answers.append(call(server.port, "GET", "/backend/bookings/B1?wait=1")))
        waiter.start()
        time.sleep(0.2)  # to reach the wait (later, the closed backend answers 503 as well)
        service.close()
        waiter.join(timeout=patience(5))
    assert answers and answers[0][0] == 503


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A folder of a page's files served alone (no backend), beside a secret outside it."""
    folder = tmp_path / "site"
    (folder / "dist").mkdir(parents=True)
    (folder / "empty").mkdir()
    (folder / "index.html").write_text("<!doctype html><title>page</title>")
    (folder / "dist" / "page.js").write_text("console.log(1)")
    (folder / "dist" / "page.js.map").write_text("{}")
    (folder / "tone.wasm").write_bytes(b"\0asm")
    (tmp_path / "secret.txt").write_text("secret")
    (folder / "out").symlink_to(tmp_path / "secret.txt")
    with LabHttp(folder) as server:
        yield server.port, folder


def test_a_pages_files_are_served_with_their_type_and_never_cached(site: tuple[int, Path]) -> None:
    """`/` is index.html (a query string aside); each file has its MIME type and no-store."""
    port, _ = site
    status, headers, body = request(port, "GET", "/?say=hello&mic=1")
    assert (status, headers["content-type"]) == (200, "text/html; charset=utf-8")
    assert body.startswith(b"<!doctype html>")
    assert headers["cache-control"] == "no-store"
    for path, kind in (("/dist/page.js", "text/javascript; charset=utf-8"),
                       ("/dist/page.js.map", "application/json"), ("/tone.wasm", "application/wasm")):
        status, headers, _ = request(port, "GET", path)
        assert (status, headers["content-type"], headers["cache-control"]) == (200, kind, "no-store")


def test_no_listing_no_missing_file_and_no_way_out(site: tuple[int, Path]) -> None:
    """A folder without an index, a missing file and the backend's routes (none here) are 404;
    a path out of the folder, spelt plainly, percent-encoded or through a symlink, is 403."""
    port, _ = site
    for path in ("/empty/", "/dist/", "/nosuch.js", "/backend/status"):
        assert request(port, "GET", path)[0] == 404, path
    for path in ("/../secret.txt", "/dist/../../secret.txt", "/%2e%2e/secret.txt", "/out"):
        status, _, body = request(port, "GET", path)
        assert status == 403 and b"secret" not in body.replace(b"outside", b""), path
