"""Gemini Live's own personality fields (a personality's `quirks`, faultlab.emulator.personality):
what differs between its dialects on the wire and nowhere else."""

from __future__ import annotations

from faultlab.model import Model


class GeminiQuirks(Model):
    """What Gemini Live's encoder reads of a personality beyond the neutral fields."""

    session_id_in_setup_complete: bool = False  # S1: Vertex adds sessionId
