"""A real emulator process, and the environment an unmodified SDK client gets from it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from faultlab.emulator.apis import APIS
from faultlab.emulator.personality import personality_from
from faultlab.speech import RATE_IN, read_wav, synthesise, write_wav

from ..conftest import REPO

BOOKING = "Book me the 3pm slot tomorrow, please."
HELLO = "Hello, can you hear me?"


@dataclass
class RunningEmulator:
    env: dict[str, str]
    events: Path
    process: subprocess.Popen[str]
    log: Path  # its stderr

    def rss_kib(self, field: str = "VmRSS") -> int:
        """The process's resident memory (VmRSS) or its peak (VmHWM), in KiB."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise AssertionError(f"no {field} in /proc/{self.process.pid}/status")

    def event_names(self) -> list[str]:
        import json

        return [json.loads(x)["event"] for x in self.events.read_text().splitlines()]


@pytest.fixture(scope="session")
def utterances(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Speech clips (16 kHz WAV + text) the emulator recognises."""
    folder = tmp_path_factory.mktemp("utterances")
    for name, text in (("booking", BOOKING), ("hello", HELLO), ("asked", "Did you book it?")):
        (folder / f"{name}.wav").write_bytes(write_wav(synthesise(text, RATE_IN), RATE_IN))
        (folder / f"{name}.txt").write_text(text)
    return folder


def clip(name: str, utterances: Path) -> bytes:
    pcm, _ = read_wav((utterances / f"{name}.wav").read_bytes())
    return pcm.astype("<i2").tobytes()


def silence(seconds: float) -> bytes:
    return np.zeros(int(seconds * RATE_IN), dtype="<i2").tobytes()


@pytest.fixture
def start_emulator(tmp_path: Path, utterances: Path,
                   monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., RunningEmulator]]:
    """Start `faultlab emulator serve`; put its printed environment into this process's."""
    started: list[subprocess.Popen[str]] = []

    def start(personality: str = "gemini-dev-2026-10", time_scale: float = 0.1,
              *extra: str) -> RunningEmulator:
        events = tmp_path / f"emulator-{len(started)}.jsonl"
        log = (tmp_path / f"emulator-{len(started)}.log").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "faultlab", "emulator", "serve", "--port", "0",
             "--personality", personality, "--time-scale", str(time_scale),
             "--ca-dir", str(tmp_path / "ca"), "--utterances", str(utterances),
             "--events", str(events), "--seed", "7", *extra],
            cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True)
        started.append(proc)
        env: dict[str, str] = {}
        assert proc.stdout is not None
        # The service's base URL variables come last.
        service = APIS[personality_from(personality).protocol].protocol.service
        deadline = time.monotonic() + 20
        while not set(service.base_url_variables) <= set(env) and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"emulator exited: {log.name}")
            key, _, value = line.removeprefix("export ").strip().partition("=")
            env[key] = value
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-a-secret")
        monkeypatch.setenv("GOOGLE_API_KEY", "test-key-not-a-secret")
        monkeypatch.delenv("GEMINI_API_KEY", raising=False)
        if personality.startswith("vertex"):
            monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
        else:
            monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
        return RunningEmulator(env, events, proc, Path(log.name))

    yield start
    for proc in started:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
