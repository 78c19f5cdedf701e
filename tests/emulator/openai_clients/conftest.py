"""The emulator the public OpenAI Realtime clients are checked against: the openai-realtime
personality at time scale 0.1."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ..conftest import RunningEmulator


@pytest.fixture
def emulator(start_emulator: Callable[..., RunningEmulator]) -> RunningEmulator:
    return start_emulator("openai-realtime", 0.1)
