"""faultlab's event vocabulary: every event faultlab's own parts write and read, as a typed record
declared once (faultlab.vocabulary.base.Record).

A record is written with `EventBus.announce` (or `EventWriter.announce` in another process) and
read back from any `Event` with `Record.read`, which is None for an event of another name. The
JSONL is what it always was: a record's `fields` are the event's fields.

- `run`: the run's own (faults, frames, TCP, processes, the run).
- `server`: the server's (the emulator's, a cassette replay's, the echo peer's).
"""

from faultlab.vocabulary.base import Record, Sender
from faultlab.vocabulary.run import (
    AppliedFault,
    FaultApplied,
    FaultFailed,
    FaultReverted,
    FaultRevertFailed,
    FaultSpan,
    FrameLogged,
    LabReady,
    ProcessExit,
    ProcessStart,
    ProxyUpstream,
    RunEnd,
    RunError,
    RunInterrupted,
    RunStart,
    RunTeardown,
    RunTimeout,
    TcpConnect,
    TcpFin,
    TcpRst,
    fault_spans,
)
from faultlab.vocabulary.server import *  # noqa: F403 (the server's records: server.__all__)

__all__ = [
    "AppliedFault",
    "FaultApplied",
    "FaultFailed",
    "FaultRevertFailed",
    "FaultReverted",
    "FaultSpan",
    "FrameLogged",
    "LabReady",
    "ProcessExit",
    "ProcessStart",
    "ProxyUpstream",
    "Record",
    "RunEnd",
    "RunError",
    "RunInterrupted",
    "RunStart",
    "RunTeardown",
    "RunTimeout",
    "Sender",
    "TcpConnect",
    "TcpFin",
    "TcpRst",
    "fault_spans",
]
