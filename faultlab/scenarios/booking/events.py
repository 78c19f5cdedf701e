"""The booking backend's events as typed records, registered in faultlab's vocabulary by the
pack (faultlab.vocabulary.register): the core knows no booking word."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from faultlab.vocabulary import Drawing, Record, register

ON_CLIENT = Drawing("client")


@dataclass(frozen=True)
class BackendJob(Record):
    """A tool call started `booking`'s job for `slot`; it commits in `commit_in_s`."""

    NAME: ClassVar[str] = "backend.job"
    DRAWN: ClassVar[Drawing] = ON_CLIENT
    call_id: str
    slot: str
    booking: str
    commit_in_s: float


@dataclass(frozen=True)
class BackendDeduped(Record):
    """A call for a slot already booked (or being booked) joined that `booking`."""

    NAME: ClassVar[str] = "backend.deduped"
    DRAWN: ClassVar[Drawing] = ON_CLIENT
    call_id: str
    slot: str
    booking: str
    status: str


@dataclass(frozen=True)
class BackendCommit(Record):
    """`booking`'s job committed, for the calls `call_ids`."""

    NAME: ClassVar[str] = "backend.commit"
    DRAWN: ClassVar[Drawing] = ON_CLIENT
    booking: str
    slot: str
    call_ids: list[str]


RECORDS = (BackendJob, BackendDeduped, BackendCommit)
register(*RECORDS)
