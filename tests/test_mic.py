"""The virtual microphone: real-time pacing, utterance events, stalls, an end after the tail."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from faultlab.events import EventBus, RunClock
from faultlab.mic import PIECE_S, VirtualMic, leftover_mic_dirs
from faultlab.speech import RATE_IN

from .conftest import patience

TONE = (np.sin(np.arange(RATE_IN) / RATE_IN * 2 * np.pi * 300) * 8000).astype(np.int16)  # 1 s


async def read_for(socket: Path, seconds: float) -> tuple[bytes, list[float]]:
    """What the microphone hands over in `seconds`, and when each piece arrived."""
    reader, writer = await asyncio.open_unix_connection(str(socket))
    data, times = b"", []
    deadline = time.monotonic() + seconds
    try:
        while (left := deadline - time.monotonic()) > 0:
            try:
                piece = await asyncio.wait_for(reader.read(65536), left)
            except TimeoutError:
                break
            if not piece:
                break
            data += piece
            times.append(time.monotonic())
    finally:
        writer.close()
    return data, times


def test_the_microphone_speaks_at_real_time_rate_then_ends_after_the_tail(tmp_path: Path) -> None:
    """gap, utterance, tail, EOF: every sample, at the wall clock's pace, with the utterance's
    start announced."""
    bus = EventBus(RunClock())

    async def scenario() -> tuple[bytes, list[float]]:
        mic = VirtualMic(["a tone"], [TONE], 0.2, 0.3, bus)
        socket = await mic.serve(tmp_path)
        try:
            return await read_for(socket, 5.0)
        finally:
            await mic.close()

    started = time.monotonic()
    data, times = asyncio.run(scenario())
    assert len(data) == 2 * int(1.5 * RATE_IN)  # 0.2 + 1.0 + 0.3 s
    assert times[-1] - started >= 1.4  # at real-time rate, never faster
    pcm = np.frombuffer(data, "<i2")
    assert not pcm[: int(0.2 * RATE_IN)].any() and pcm[int(0.2 * RATE_IN):].any()
    assert [e.name for e in bus.events] == ["mic.open", "mic.utterance", "mic.end"]


def test_a_stall_hands_over_nothing_and_loses_that_audio(tmp_path: Path) -> None:
    """While stalled, nothing is handed over; afterwards the source goes on from the wall clock
    (the stalled stretch is gone, as in a browser's empty buffers): of the 1 s utterance, up to
    the stall's 0.6 s never arrives. (A busy machine can only make the loss smaller, by a loop
    that slept through part of the stall and catches up after it.)"""
    bus = EventBus(RunClock())

    async def scenario() -> tuple[bytes, list[float]]:
        mic = VirtualMic(["a tone"], [TONE], 0.0, 0.0, bus)
        socket = await mic.serve(tmp_path)
        asyncio.get_running_loop().call_later(0.3, mic.stall, 0.6)
        try:
            return await read_for(socket, patience(10))  # to the end of the utterance
        finally:
            await mic.close()

    data, _ = asyncio.run(scenario())
    lost_s = 1.0 - len(data) / 2 / RATE_IN
    assert 0 < lost_s <= 0.6 + PIECE_S
    assert [e.name for e in bus.events][-1] == "mic.end"


def test_a_run_folder_too_deep_for_a_socket_gets_a_spare_folder(tmp_path: Path) -> None:
    """A unix socket path has at most 107 bytes: a deep run folder gets its socket in a private
    folder of the temp dir, removed when the microphone closes."""
    mic = VirtualMic(["a tone"], [TONE], 0.0, None, EventBus(RunClock()))
    deep = tmp_path / ("x" * 120)
    deep.mkdir()

    async def scenario() -> Path:
        socket = await mic.serve(deep)
        assert socket.is_socket() and len(str(socket)) <= 107
        data, _ = await read_for(socket, 0.2)
        assert data
        await mic.close()
        return socket

    socket = asyncio.run(scenario())
    assert socket.parent.name.startswith(f"faultlab-mic-{os.getpid()}-")
    assert not socket.parent.exists()


def test_spare_folders_of_dead_runs_are_found_for_gc() -> None:
    """`lab gc` removes spare microphone folders whose run is gone, never a live run's."""
    dead = Path(tempfile.mkdtemp(prefix="faultlab-mic-4194304999-"))  # no such pid
    live = Path(tempfile.mkdtemp(prefix=f"faultlab-mic-{os.getpid()}-"))
    try:
        found = leftover_mic_dirs()
        assert dead in found and live not in found
    finally:
        dead.rmdir()
        live.rmdir()
