import asyncio
import json
from pathlib import Path

from faultlab.events import EventWriter
from faultlab.scenarios.booking.backend import BookingBackend, business_key


def test_business_key_ignores_wording() -> None:
    """A re-issued call's drifted wording names the same slot."""
    assert business_key("tomorrow at 3pm") == business_key("Tomorrow 3pm") == "tomorrow 3pm"


def test_a_call_commits_after_its_job_and_the_ledger_records_it(tmp_path: Path) -> None:
    """A job per call commits after commit_s (time-scaled); events and the ledger file say so."""
    events_path = tmp_path / "events.jsonl"
    ledger = tmp_path / "ledger.json"

    async def scenario() -> tuple[str, str]:
        backend = BookingBackend(commit_s=4.0, time_scale=0.01, ledger_path=ledger,
                                 events=EventWriter(events_path))
        booking = backend.book("call-1", "tomorrow at 3pm")
        before = booking.status
        await backend.committed(booking)
        return before, booking.status

    before, after = asyncio.run(scenario())
    assert (before, after) == ("pending", "committed")
    saved = json.loads(ledger.read_text())["bookings"]
    assert saved == [{"id": "B1", "key": "tomorrow 3pm", "slot": "tomorrow at 3pm",
                      "call_ids": ["call-1"], "status": "committed"}]
    names = [json.loads(x)["event"] for x in events_path.read_text().splitlines()]
    assert names == ["backend.job", "backend.commit"]


def test_a_reissued_call_is_deduplicated_by_business_key(tmp_path: Path) -> None:
    """The same slot under a new call id joins the first booking: one commit, two call ids."""
    events_path = tmp_path / "events.jsonl"

    async def scenario() -> list[str]:
        backend = BookingBackend(commit_s=1.0, time_scale=0.01, events=EventWriter(events_path))
        first = backend.book("call-1", "tomorrow at 3pm")
        second = backend.book("call-2", "tomorrow 3pm")
        assert second is first
        await backend.committed(first)
        return backend.status_lines()

    lines = asyncio.run(scenario())
    assert lines == ["[status] book_slot(tomorrow at 3pm): committed, booking B1"]
    names = [json.loads(x)["event"] for x in events_path.read_text().splitlines()]
    assert names.count("backend.commit") == 1 and "backend.deduped" in names
