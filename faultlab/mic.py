"""The lab's virtual microphone: the scenario's utterances, spoken at real-time rate to the client.

A profile's `mic` names what the user says; faultlab speaks each line into a clip (16 kHz,
`faultlab.speech.write_clips`), registers the clips with the emulator's transcript registry (so
it "hears" those words), and serves the audio on a unix socket (in the run folder) whose path the
client gets as `FAULTLAB_MIC`: 16-bit mono PCM in 20 ms pieces, paced by the wall clock from the
moment the client connects. Silence comes before each utterance (`gap`); after the last one the
source goes on handing silence, like an open microphone, or ends with EOF after `tail`. `stall`
stops the pieces for a while, the way a browser hands empty buffers: the audio of that time never arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from faultlab.events import EventBus
from faultlab.lab.process import SPARE_DIR_PREFIX, leftover_dirs
from faultlab.speech import RATE_IN, Samples
from faultlab.vocabulary.audio import MicClosedByClient, MicEnd, MicOpen, MicUtterance

PIECE_S = 0.02
PIECE_BYTES = int(RATE_IN * PIECE_S) * 2
# Longest unix socket path (sun_path is 108 bytes with its terminating NUL).
MAX_SOCKET_PATH = 107


def leftover_mic_dirs() -> list[Path]:
    """Spare microphone folders whose run (the pid in the name) is gone."""
    return leftover_dirs(SPARE_DIR_PREFIX)


class VirtualMic:
    def __init__(self, lines: Sequence[str], clips: Sequence[Samples], gap_s: float,
                 tail_s: float | None, bus: EventBus) -> None:
        self.lines = list(lines)
        self.bus = bus
        gap = np.zeros(int(gap_s * RATE_IN), np.int16)
        parts: list[Samples] = []
        self._starts: list[float] = []
        for clip in clips:
            parts.append(gap)
            self._starts.append(sum(len(p) for p in parts) / RATE_IN)
            parts.append(clip)
        if tail_s is not None:
            parts.append(np.zeros(int(tail_s * RATE_IN), np.int16))
        self.samples: Samples = np.concatenate(parts).astype(np.int16)
        self.audio = self.samples.astype("<i2").tobytes()
        self.endless = tail_s is None
        self._stalled_until = 0.0
        self._server: asyncio.AbstractServer | None = None
        self._own_dir: Path | None = None
        self._streams: set[asyncio.Task[None]] = set()

    async def serve(self, folder: Path) -> Path:
        """Listen in `folder` (the run folder); where that path is too long for a unix socket,
        in a private folder of the temp dir instead (`faultlab-mic-<pid>-*`, removed on close,
        and by `faultlab lab gc` after a SIGKILL). Returns the socket's path."""
        path = folder.absolute() / "mic.sock"
        if len(str(path)) > MAX_SOCKET_PATH:
            self._own_dir = Path(tempfile.mkdtemp(prefix=f"{SPARE_DIR_PREFIX}{os.getpid()}-"))
            path = self._own_dir / "mic.sock"
        self._server = await asyncio.start_unix_server(self._stream, str(path))
        return path

    async def close(self) -> None:
        for task in self._streams:
            task.cancel()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)

    def stall(self, seconds: float) -> None:
        """Hand over nothing for `seconds`; what the source says meanwhile is lost."""
        self._stalled_until = time.monotonic() + seconds

    async def _stream(self, _: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._streams.add(task)
        started = time.monotonic()
        self.bus.announce("faultlab", MicOpen(round(len(self.audio) / 2 / RATE_IN, 3), self.endless))
        said = 0
        pieces = 0
        try:
            while True:
                offset = pieces * PIECE_BYTES
                if offset >= len(self.audio) and not self.endless:
                    break
                while said < len(self._starts) and offset / 2 / RATE_IN >= self._starts[said]:
                    self.bus.announce("faultlab", MicUtterance(said + 1, self.lines[said]))
                    said += 1
                if time.monotonic() >= self._stalled_until:
                    writer.write(self.audio[offset:offset + PIECE_BYTES]
                                 or bytes(PIECE_BYTES))
                    await writer.drain()
                pieces += 1
                await asyncio.sleep(max(0.0, started + pieces * PIECE_S - time.monotonic()))
            self.bus.announce("faultlab", MicEnd())
        except (ConnectionError, OSError):
            self.bus.announce("faultlab", MicClosedByClient())
        finally:
            self._streams.discard(task)
            writer.close()
