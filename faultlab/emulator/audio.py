"""What the emulator hears: voice activity detection and recognition of known utterances.

All input audio is 16-bit mono PCM at 16 kHz once resampled. VAD works on sample time, not wall
time: only silence that arrives as samples ends a turn, as on the real service (A1-A3). An
utterance keeps its last UTTERANCE_KEPT_S seconds: longer speech goes on, its start forgotten.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from faultlab.speech import RATE_IN, Samples, read_wav, resample

FRAME_MS = 20
FRAME_SAMPLES = RATE_IN * FRAME_MS // 1000
# Speech threshold (dBFS of a 20 ms frame) by start/end sensitivity; HIGH hears quieter speech.
THRESHOLD_DBFS = {"START_SENSITIVITY_HIGH": -50.0, "END_SENSITIVITY_HIGH": -50.0,
                  "START_SENSITIVITY_LOW": -38.0, "END_SENSITIVITY_LOW": -38.0}
DEFAULT_THRESHOLD_DBFS = -45.0
# How much speech starts an activity, by start sensitivity.
START_MS = {"START_SENSITIVITY_HIGH": 60, "START_SENSITIVITY_LOW": 160}
DEFAULT_START_MS = 100
# The most of one utterance a connection holds (1.9 MB): the service's turns are seconds long,
# and 10 MB of speech with no silence in it was once all held until its turn ended.
UTTERANCE_KEPT_S = 60


class Utterance:
    """The samples of one utterance as they come, keeping the last `kept_s` seconds (copies: a
    view would hold the whole chunk it was cut from)."""

    def __init__(self, kept_s: float = UTTERANCE_KEPT_S) -> None:
        self.limit = int(kept_s * RATE_IN)
        self.dropped = 0  # samples forgotten from the start
        self._chunks: deque[Samples] = deque()
        self._kept = 0

    def __len__(self) -> int:
        return self._kept

    def add(self, pcm: Samples) -> None:
        if len(pcm) >= self.limit:
            self.dropped += self._kept + len(pcm) - self.limit
            self._chunks.clear()
            self._kept = 0
            pcm = pcm[len(pcm) - self.limit :]
        self._chunks.append(pcm.copy())
        self._kept += len(pcm)
        while self._kept > self.limit:
            excess = self._kept - self.limit
            first = self._chunks[0]
            if len(first) <= excess:
                self._chunks.popleft()
                cut = len(first)
            else:
                self._chunks[0] = first[excess:].copy()
                cut = excess
            self._kept -= cut
            self.dropped += cut

    def samples(self) -> Samples:
        return np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)


def frame_dbfs(pcm: Samples) -> npt.NDArray[np.float64]:
    """dBFS of each whole 20 ms frame."""
    usable = len(pcm) - len(pcm) % FRAME_SAMPLES
    if usable == 0:
        return np.zeros(0)
    frames = pcm[:usable].astype(np.float32).reshape(-1, FRAME_SAMPLES)
    rms = np.sqrt(np.mean(frames * frames, axis=1)) / 32768.0
    return 20 * np.log10(np.maximum(rms, 1e-9))


@dataclass
class VadEvent:
    kind: str  # "start" or "end"
    audio_s: float  # position in the stream's audio time


@dataclass
class Vad:
    """Server-side voice activity detection over a stream of 16 kHz samples."""

    silence_ms: int = 800
    prefix_padding_ms: int = 20
    start_sensitivity: str | None = None
    end_sensitivity: str | None = None
    speaking: bool = False
    _pending: Samples = field(default_factory=lambda: np.zeros(0, np.int16))
    _samples_seen: int = 0
    _speech_run_ms: int = 0
    _silence_run_ms: int = 0
    _recent: list[Samples] = field(default_factory=list)
    utterance: Utterance = field(default_factory=Utterance)

    def feed(self, pcm: Samples) -> list[VadEvent]:
        pcm = np.concatenate([self._pending, pcm]) if len(self._pending) else pcm
        usable = len(pcm) - len(pcm) % FRAME_SAMPLES
        self._pending = pcm[usable:].copy()
        levels = frame_dbfs(pcm[:usable])
        start_db = THRESHOLD_DBFS.get(self.start_sensitivity or "", DEFAULT_THRESHOLD_DBFS)
        end_db = THRESHOLD_DBFS.get(self.end_sensitivity or "", DEFAULT_THRESHOLD_DBFS)
        start_ms = START_MS.get(self.start_sensitivity or "", DEFAULT_START_MS)
        padding_frames = max(1, self.prefix_padding_ms // FRAME_MS)
        events: list[VadEvent] = []
        for i, level in enumerate(levels):
            frame = pcm[i * FRAME_SAMPLES : (i + 1) * FRAME_SAMPLES]
            self._samples_seen += FRAME_SAMPLES
            t = self._samples_seen / RATE_IN
            if not self.speaking:
                self._recent.append(frame.copy())
                if level > start_db:
                    self._speech_run_ms += FRAME_MS
                    if self._speech_run_ms >= start_ms:
                        self.speaking = True
                        run = self._speech_run_ms // FRAME_MS
                        self.utterance = Utterance()
                        for kept in self._recent[-(run + padding_frames):]:
                            self.utterance.add(kept)
                        self._recent = []
                        self._silence_run_ms = 0
                        events.append(VadEvent("start", t))
                else:
                    self._speech_run_ms = 0
                del self._recent[: max(0, len(self._recent) - 64)]
            else:
                self.utterance.add(frame)
                if level > end_db:
                    self._silence_run_ms = 0
                else:
                    self._silence_run_ms += FRAME_MS
                    if self._silence_run_ms >= self.silence_ms:
                        self.speaking = False
                        self._speech_run_ms = 0
                        events.append(VadEvent("end", t))
        return events

    def take_utterance(self) -> Utterance:
        out, self.utterance = self.utterance, Utterance()
        return out


def envelope(pcm: Samples) -> npt.NDArray[np.float64]:
    """The utterance's loudness contour (dB per 20 ms, silence trimmed at both ends)."""
    levels = frame_dbfs(pcm)
    loud = np.nonzero(levels > DEFAULT_THRESHOLD_DBFS)[0]
    if len(loud) == 0:
        return np.zeros(0)
    return np.maximum(levels[loud[0] : loud[-1] + 1], -60.0)


# The share of an utterance's 20 ms frames that may differ most from the known one and still not
# count (`similarity`): a lost packet on a WebRTC call, concealed, changes ~100 ms of a contour
# (aiortc drops 4-5 frames a loss, faultlab.webrtc.PcmReader). Measured on a 3.3 s request over
# Opus with 5 frames lost at its loudest onset: 0.915 whole, 0.982-0.993 without the worst 5 %
# (0.963 with two such losses); 200 ms pauses inserted into a question, 2 to 10 of them (the
# mistake audio-jitter-uplink-keepalive.yaml shows), stay unrecognised (90 of 90), and a request
# that differs in two words ("3pm slot tomorrow", "4pm slot on Friday") scores far below MATCH.
TRIMMED = 0.05


def similarity(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    """Normalised correlation of two contours of similar length (1.0: the same utterance), the
    better of the whole and of the contours without the TRIMMED share of frames where they
    differ most."""
    if len(a) < 5 or len(b) < 5 or not 0.85 <= len(a) / len(b) <= 1.18:
        return 0.0
    n = min(len(a), len(b))
    best = 0.0
    for lag in range(-3, 4):
        x = a[max(0, lag) : max(0, lag) + n - 3]
        y = b[max(0, -lag) : max(0, -lag) + n - 3]
        m = min(len(x), len(y))
        x, y = x[:m], y[:m]
        best = max(best, _correlation(x, y))
        apart = np.abs(_standard(x) - _standard(y))
        kept = np.argsort(apart, kind="stable")[: m - int(m * TRIMMED)]
        best = max(best, _correlation(x[kept], y[kept]))
    return best


def _correlation(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> float:
    x, y = x - x.mean(), y - y.mean()
    denom = math.sqrt(float(np.dot(x, x) * np.dot(y, y)))
    return float(np.dot(x, y)) / denom if denom > 0 else 0.0


def _standard(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    spread = float(x.std())
    return (x - x.mean()) / (spread or 1.0)


class TranscriptRegistry:
    """Known utterances (text + audio): what the emulator 'hears' when their audio comes in."""

    MATCH = 0.9
    # The contour is taken per 20 ms frame, so speech that starts a few ms off the frame grid
    # has another one: a short question 10 ms off the grid scored below MATCH. Each utterance
    # is kept at PHASES offsets within a frame, and heard at the best.
    PHASES = 4

    def __init__(self) -> None:
        self._known: list[tuple[str, npt.NDArray[np.float64]]] = []

    def __len__(self) -> int:
        return len({text for text, _ in self._known})

    def add(self, text: str, pcm: Samples, rate: int = RATE_IN) -> None:
        samples = resample(pcm, rate, RATE_IN)
        step = FRAME_SAMPLES // self.PHASES
        for phase in range(self.PHASES):
            shifted = np.concatenate([np.zeros(phase * step, samples.dtype), samples])
            self._known.append((text, envelope(shifted)))

    def add_wav(self, text: str, path: Path) -> None:
        pcm, rate = read_wav(path.read_bytes())
        self.add(text, pcm, rate)

    def load_dir(self, directory: Path) -> int:
        """Register every `NAME.wav` with the text in `NAME.txt` beside it."""
        count = 0
        for wav in sorted(directory.glob("*.wav")):
            txt = wav.with_suffix(".txt")
            if txt.exists():
                self.add_wav(txt.read_text(encoding="utf-8").strip(), wav)
                count += 1
        return count

    def recognise(self, pcm: Samples) -> str | None:
        env = envelope(pcm)
        scored = [(similarity(env, known), text) for text, known in self._known]
        best = max(scored, default=(0.0, ""))
        return best[1] if best[0] >= self.MATCH else None
