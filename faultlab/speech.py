"""Speech: espeak-ng's voice as 16-bit mono PCM, resampling, and clips (WAV files with their text).

The lab's virtual microphone (`faultlab.mic`) and the emulator share it: the microphone speaks a
profile's lines into clips, a folder of NAME.wav + NAME.txt, and the emulator's transcript
registry (`faultlab.emulator.audio`) loads that folder to "hear" those words; the emulator speaks
its answers with the same voice. The Live API hears 16 kHz (`RATE_IN`) and speaks 24 kHz
(`RATE_OUT`).
"""

from __future__ import annotations

import functools
import io
import shutil
import subprocess
import wave
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

RATE_IN = 16000
RATE_OUT = 24000
ESPEAK = shutil.which("espeak-ng")

Samples = npt.NDArray[np.int16]


def resample(pcm: Samples, rate_from: int, rate_to: int) -> Samples:
    """Linear-interpolation resampling (good enough for VAD, recognition and playback)."""
    if rate_from == rate_to or len(pcm) == 0:
        return pcm
    n_out = max(1, round(len(pcm) * rate_to / rate_from))
    if not 2 <= len(pcm) <= GRID_KEPT_SAMPLES:
        # A long clip: its plan is not kept (one 16 MiB message's would be 84 MB).
        x, xp = np.linspace(0, len(pcm) - 1, n_out), np.arange(len(pcm))
        return np.interp(x, xp, pcm.astype(np.float32)).astype(np.int16)
    left, right, weight = _plan(len(pcm), n_out)
    # np.interp's own arithmetic (float64: the left sample plus the slope times the distance
    # from it), so the samples are the same to the bit; gathering both neighbours by a kept
    # plan instead of interp's search per sample took 100 ms of 24 kHz audio from 18 us to
    # 9 us alone, and from 59 to 38 us a chunk in the emulator under 50 OpenAI sessions (the
    # most an OpenAI chunk cost it beyond a Gemini one's, which is not resampled).
    samples = pcm.astype(np.float64)
    low = samples.take(left)
    out = samples.take(right)
    out -= low
    out *= weight
    out += low
    return out.astype(np.int16)


# Plans are kept for chunks up to a second at 48 kHz: a stream's chunks, not whole clips.
GRID_KEPT_SAMPLES = 48_000


@functools.lru_cache(maxsize=64)
def _plan(n_in: int, n_out: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp],
                                          npt.NDArray[np.float64]]:
    """Where `n_out` samples fall among `n_in` (n_in >= 2): the input sample left of each, the
    one right of it, and the distance from the left one; the same for every chunk of a
    stream."""
    x = np.linspace(0, n_in - 1, n_out)
    left = np.minimum(x.astype(np.intp), n_in - 2)
    return left, left + 1, x - left


def read_wav(data: bytes) -> tuple[Samples, int]:
    """16-bit PCM samples (first channel) and the rate of a WAV file."""
    with wave.open(io.BytesIO(data)) as w:
        if w.getsampwidth() != 2:
            raise ValueError("only 16-bit WAV is supported")
        frames = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        channels = w.getnchannels()
        return frames[::channels].astype(np.int16), w.getframerate()


def write_wav(pcm: Samples, rate: int) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.astype("<i2").tobytes())
    return buf.getvalue()


# A reply is at most a few hundred KiB of speech (370 KiB for the longest echo); most replies
# are a rule's fixed sentences, and every echo differs, so a small cache holds what repeats
# (256 entries of echoes held about 90 MiB).
@functools.lru_cache(maxsize=32)
def synthesise(text: str, rate: int = RATE_OUT) -> Samples:
    """Speech for `text` from espeak-ng at `rate` Hz; a tone of a plausible length without it."""
    if ESPEAK is not None:
        done = subprocess.run([ESPEAK, "-v", "en-us", "-s", "170", "--stdout", text],
                              capture_output=True, timeout=30, check=False)
        if done.returncode == 0 and done.stdout:
            pcm, source_rate = read_wav(done.stdout)
            return resample(pcm, source_rate, rate)
    seconds = max(0.5, 0.065 * len(text))
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * 220 * t) * 6000).astype(np.int16)


def write_clips(lines: Sequence[str], folder: Path) -> list[Samples]:
    """Speak each line into `folder` as NN.wav + NN.txt at RATE_IN (what the emulator loads)."""
    folder.mkdir(parents=True, exist_ok=True)
    clips = []
    for i, text in enumerate(lines, 1):
        pcm = synthesise(text, RATE_IN)
        (folder / f"{i:02d}.wav").write_bytes(write_wav(pcm, RATE_IN))
        (folder / f"{i:02d}.txt").write_text(text + "\n", encoding="utf-8")
        clips.append(pcm)
    return clips
