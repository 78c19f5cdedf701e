"""The booking pack (`PACK`, the `faultlab.scenarios` entry point): the emulator's model of the
assistant (`brain`), the reference clients it brings as builtins (`CLIENTS`: on Gemini Live in
Python, Node and a page, and on OpenAI Realtime; faultlab/clients/), and `PROBE`, what `faultlab
calibrate` says to make a model call `book_slot`. Loading it imports `expectations`, which
registers the pack's expectations, suite columns and summary events.
"""

from __future__ import annotations

from faultlab.scenarios.booking import expectations  # registers them
from faultlab.scenarios.booking.brain import booking_assistant
from faultlab.scenarios.pack import ProbeWords, ScenarioPack

# The words of the field's booking scenario: the emulator's model calls book_slot for them, and
# the instruction asks the real one to. (Words such as "booked" next to the tool's name would read
# to the emulator's model as a status line saying the slot is taken.)
PROBE = ProbeWords(
    instruction="You book appointment slots with the book_slot tool: call it as soon as a slot is "
                "asked for.",
    request="Book me the 3pm slot tomorrow, please.", tool="book_slot",
    description="Book an appointment slot.", parameter="slot")

# The reference clients of the booking conversation, by builtin name: the module each runs.
CLIENTS = {
    "naive": "faultlab.clients.naive", "field-recovery": "faultlab.clients.recovery",
    "racing-recovery": "faultlab.clients.racing", "node-booking": "faultlab.clients.node",
    "web-booking": "faultlab.clients.web", "openai-naive": "faultlab.clients.openai_naive",
    "openai-recovery": "faultlab.clients.openai_recovery",
    "openai-webrtc": "faultlab.clients.openai_webrtc",
    "openai-webrtc-recovery": "faultlab.clients.openai_webrtc_recovery",
}

PACK = ScenarioPack("booking", brain=booking_assistant, probe=PROBE, clients=CLIENTS)

__all__ = ["PACK", "PROBE", "expectations"]
