"""The clients are tested against a real emulator process on loopback (no lab needed)."""

from ..emulator.conftest import start_emulator, utterances

__all__ = ["start_emulator", "utterances"]
