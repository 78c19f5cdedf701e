"""The Live API emulator: a calibrated, time-scalable stand-in for the Gemini Live service."""
