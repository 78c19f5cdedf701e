"""How an error becomes a close: a client's error told in-band or closing the connection (as its
API does: `EmulatedApi.closes_on`), a setup the service refuses, and an emulator bug.

Every input error is a `ProtocolError` (faultlab.emulator.refusals): it closes 1007 (1008 for a
model not served), or, for an API that tells errors in-band (OpenAI), leaves an `error` and an
`EmulatorErrorTold` and the connection open. Anything else raised while handling a frame or a
timer is an emulator bug: its traceback goes to the log and the connection is closed 1011 with
EMULATOR_BUG, which no behaviour uses.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from faultlab.emulator.lifecycle import Lifecycle
from faultlab.emulator.messages import Encoder, Setup
from faultlab.emulator.personality import Personality, ServedModel
from faultlab.emulator.refusals import ProtocolError
from faultlab.vocabulary.server import EmulatorErrorTold

if TYPE_CHECKING:
    from faultlab.emulator.apis.base import EmulatedApi

log = logging.getLogger(__name__)
TRANSPARENT_REFUSED = ('Invalid JSON payload received. Unknown name "transparent" at '
                       "'setup.session_resumption': Cannot find field.")
MODALITIES_REFUSED = ("The requested combination of response modalities ({modalities}) is not "
                      "supported by the model.")
EMULATOR_BUG = "Internal error encountered (an emulator bug: see its log)."


def refuse(conn: Lifecycle, api: EmulatedApi, encoder: Encoder, at: float, ready_at: float,
           error: ProtocolError, why: str) -> None:
    """A client's error at `at`: told in-band (never before the session is ready, `ready_at`),
    or closing the connection, as the API does."""
    message = str(error)
    for frame in encoder.error(message, error.error_code, error.param, error.event_id):
        conn.outbox.send(max(at, ready_at), frame)
    close = api.closes_on(error)
    if close is None:
        conn.teller.announce(EmulatorErrorTold(conn.number, error.error_code, message[:500], why))
        return
    # The event keeps what a close frame's 123 bytes cut (a long field path).
    code, reason = close
    full = {"detail": message[:500]} if message != reason else {}
    conn.close(at, code, reason, why, **full)


def setup_refusal(p: Personality, model: ServedModel | None,
                  setup: Setup) -> ProtocolError | tuple[int, str, str] | None:
    """Why the service refuses a setup: a model it does not serve (a `ProtocolError`, told as
    the API tells errors), or a close (code, reason, why) for what the model cannot do; None:
    accepted."""
    if model is None:
        return ProtocolError(p.unknown_model.replace("{model}", setup.model), 1008,
                             error_code="model_not_found", param="model", fatal=True)
    if setup.transparent and not p.transparent_resumption:
        return 1007, TRANSPARENT_REFUSED, "transparent resumption"
    refused = [m for m in setup.modalities if m not in model.modalities]
    if refused:
        return (1007, MODALITIES_REFUSED.format(modalities=", ".join(refused)),
                f"{', '.join(refused)} modality")
    return None


def close_on_bug(conn: Lifecycle, now: float, exc: Exception, handling: str) -> None:
    """An exception no input should cause: logged with its traceback, and the connection closed
    1011 with a reason no behaviour uses, in place of whatever was due."""
    log.error("emulator bug on connection %d, handling %s", conn.number, handling, exc_info=exc)
    conn.drop_scheduled()
    conn.closing = False
    conn.close(now, 1011, EMULATOR_BUG, "emulator bug", error=f"{type(exc).__name__}: {exc}"[:200])
