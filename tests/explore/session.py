"""What the exploration tests share: the base profile explored and the unhurt session its
runs log."""
from __future__ import annotations

from faultlab.protocols import PROTOCOLS

GEMINI = PROTOCOLS["gemini"]

BASE = """\
name: booking
target:
  emulator: {personality: gemini-dev-2026-10}
client:
  builtin: naive
  args: [--commit, 4s]
expect:
  - {bookings: 1}
  - {truthful: true}
timeout: 40s
"""
# The unhurt session: what the stand-in's baseline logs.
SESSION = [("client", "setup"), ("server", "setup_complete"), ("client", "client_content"),
           ("server", "tool_call"), ("server", "server_content.turn_complete"),
           ("client", "tool_response"), ("server", "server_content.model_turn"),
           ("server", "server_content.turn_complete")]


def timed(messages: list[tuple[str, str]]) -> list[tuple[str, str, float]]:
    return [(sender, kind, 10 + i * 0.1) for i, (sender, kind) in enumerate(messages)]

