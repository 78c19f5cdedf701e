"""faultlab's event vocabulary: every event faultlab's own parts write and read, as a typed record
declared once (faultlab.vocabulary.base.Record).

A record is written with `EventBus.announce` (or `EventWriter.announce` in another process) and
read back from any `Event` with `Record.read`, which is None for an event of another name. The
JSONL is what it always was: a record's `fields` are the event's fields. Each record declares how
the report draws it (`Drawing`); `vocabulary()` finds every record by event name: those of the
modules below (`registry.record_modules`, imported when it is first asked) and those `register`
adds (a scenario pack's). `faultlab events schema` prints them as one JSON Schema.

A record is imported from its module (`from faultlab.vocabulary.session import ClientLost`);
this package imports none of them, so that a process writes its own events without building
every record of the vocabulary (the emulator, the proxy, a client and a peer each load a module
or two of seven: ~45 ms of each one's start).

- `run`: the run's own (faults, frames, TCP, processes, the run);
- `session`: what a client says of its session (connected, lost, resumes, the conversation);
- `audio`: the lab's microphone and a client's uplink;
- `lab`: the proxy, the resolver, the target, the capture;
- `browser`: a browser client's own account;
- `server`: the server's (the emulator's, a cassette replay's, the echo peer's);
- `webrtc`: what a WebRTC client says of its call (ICE, the candidate pair, received audio).
"""

from faultlab.vocabulary.base import NOT_DRAWN, Drawing, Gauge, Lane, Record, Sender
from faultlab.vocabulary.registry import read, record_of, register, vocabulary

__all__ = ["NOT_DRAWN", "Drawing", "Gauge", "Lane", "Record", "Sender", "read", "record_of",
           "register", "vocabulary"]
