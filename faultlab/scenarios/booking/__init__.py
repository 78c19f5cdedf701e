"""The booking assistant (the field study's scenario), as one pack: the user asks an agent to book a
slot, the model calls the booking tool, the backend records a job and then commits it; later the
user asks "Did you book it?".

- `pack`: the pack itself (`PACK`, which the `faultlab.scenarios` entry point names here), which
  loads the rest;
- `brain`: the emulator's model of the assistant (a personality's `scenario: booking`, the default);
- `backend`: the booking backend the clients hand each tool call to (the ledger, `backend.*`);
- `conversation`: the client's side of it (book, answer the call, ask, status lines), which the
  reference clients the pack brings as builtins (faultlab/clients/) hold;
- `expectations`: `truthful` and `bookings`, the suite columns "bookings" and "user told", and the
  backend's events in each summary.

This package imports nothing until its `PACK` is asked for: a reference client imports its
conversation without the pack's expectations (and faultlab's expectation models, pydantic with
them): 0.1 s of the start of a client that does not import pydantic itself (measured: the OpenAI
client's imports 0.47 -> 0.37 s, the Node client's wrapper 0.33 -> 0.20 s; a google-genai client
imports pydantic anyway).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """`PACK`, which the entry point names here (`faultlab.scenarios.booking:PACK`, as installs
    have it), loaded from `pack` when first asked for."""
    if name == "PACK":
        from faultlab.scenarios.booking.pack import PACK

        return PACK
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
