"""faultlab's event vocabulary: every event faultlab's own parts write and read, as a typed record
declared once (faultlab.vocabulary.base.Record).

A record is written with `EventBus.announce` (or `EventWriter.announce` in another process) and
read back from any `Event` with `Record.read`, which is None for an event of another name. The
JSONL is what it always was: a record's `fields` are the event's fields. Each record declares how
the report draws it (`Drawing`); `vocabulary()` finds every record by event name: those of the
modules below (a module of records imported here is found by itself) and those `register` adds
(a scenario pack's). `faultlab events schema` prints them as one JSON Schema.

- `run`: the run's own (faults, frames, TCP, processes, the run);
- `session`: what a client says of its session (connected, lost, resumes, the conversation);
- `audio`: the lab's microphone and a client's uplink;
- `lab`: the proxy, the resolver, the target, the capture;
- `browser`: a browser client's own account;
- `server`: the server's (the emulator's, a cassette replay's, the echo peer's);
- `webrtc`: what a WebRTC client says of its call (ICE, the candidate pair, received audio).
"""

from faultlab.vocabulary import audio, browser, lab, run, server, session, webrtc
from faultlab.vocabulary.base import NOT_DRAWN, Drawing, Gauge, Lane, Record, Sender
from faultlab.vocabulary.registry import read, record_of, register, vocabulary
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
from faultlab.vocabulary.session import (
    SESSION_PREFIXES,
    Answer,
    Ask,
    AudioEnd,
    AudioStart,
    ClientConnected,
    ClientLost,
    ClientReceived,
    ClientRecovered,
    ClientRefused,
    RecoveryNewSession,
    RecoveryRestored,
    ResumeAttempt,
    ResumeGaveUp,
    ResumeOk,
    ResumeRefused,
    ToolCall,
    ToolResponse,
)

__all__ = [
    "NOT_DRAWN",
    "SESSION_PREFIXES",
    "Answer",
    "AppliedFault",
    "Ask",
    "AudioEnd",
    "AudioStart",
    "ClientConnected",
    "ClientLost",
    "ClientReceived",
    "ClientRecovered",
    "ClientRefused",
    "Drawing",
    "FaultApplied",
    "FaultFailed",
    "FaultRevertFailed",
    "FaultReverted",
    "FaultSpan",
    "FrameLogged",
    "Gauge",
    "LabReady",
    "Lane",
    "ProcessExit",
    "ProcessStart",
    "ProxyUpstream",
    "Record",
    "RecoveryNewSession",
    "RecoveryRestored",
    "ResumeAttempt",
    "ResumeGaveUp",
    "ResumeOk",
    "ResumeRefused",
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
    "ToolCall",
    "ToolResponse",
    "audio",
    "browser",
    "fault_spans",
    "lab",
    "read",
    "record_of",
    "register",
    "run",
    "server",
    "session",
    "vocabulary",
    "webrtc",
]
