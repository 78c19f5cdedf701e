"""The booking assistant (the field study's scenario), as one pack: the user asks an agent to book a
slot, the model calls the booking tool, the backend records a job and then commits it; later the
user asks "Did you book it?".

- `pack`: the pack itself (`PACK`, the `faultlab.scenarios` entry point), which loads the rest;
- `brain`: the emulator's model of the assistant (a personality's `scenario: booking`, the default);
- `backend`: the booking backend the clients hand each tool call to (the ledger, `backend.*`);
- `conversation`: the client's side of it (book, answer the call, ask, status lines), which the
  reference clients the pack brings as builtins (faultlab/clients/) hold;
- `expectations`: `truthful` and `bookings`, the suite columns "bookings" and "user told", and the
  backend's events in each summary.

This package imports nothing: a reference client imports its conversation without the pack's
expectations (and faultlab's expectation models, pydantic with them: 0.18 s of a client's start).
"""
