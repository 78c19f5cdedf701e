"""VAD, resampling and recognition of known utterances."""

from __future__ import annotations

import numpy as np

from faultlab.emulator.audio import UTTERANCE_KEPT_S, TranscriptRegistry, Utterance, Vad
from faultlab.speech import RATE_IN, resample, synthesise

BOOKING = "Book me the 3pm slot tomorrow, please."


def feed(vad: Vad, pcm: np.ndarray, chunk: int) -> list[str]:  # type: ignore[type-arg]
    kinds = []
    for i in range(0, len(pcm), chunk):
        kinds += [e.kind for e in vad.feed(pcm[i : i + chunk])]
    return kinds


def test_vad_needs_silence_as_samples_to_end_a_turn() -> None:
    """Speech starts an activity; only 800 ms of silent samples end it (A1-A3)."""
    t = np.arange(RATE_IN) / RATE_IN
    voice = (np.sin(2 * np.pi * 180 * t) * 8000).astype(np.int16)
    vad = Vad()
    assert feed(vad, voice, 1600) == ["start"]
    assert feed(vad, np.zeros(RATE_IN * 7 // 10, np.int16), 1600) == []  # 700 ms
    assert feed(vad, np.zeros(RATE_IN // 10, np.int16), 1600) == ["end"]  # 800 ms


def test_recognition_does_not_depend_on_chunking_or_rate() -> None:
    """A known clip is recognised whatever the chunk size, and from a 24 kHz upload."""
    registry = TranscriptRegistry()
    registry.add(BOOKING, synthesise(BOOKING, RATE_IN))
    registry.add("Did you book it?", synthesise("Did you book it?", RATE_IN))
    stream = np.concatenate([np.zeros(4000, np.int16), synthesise(BOOKING, RATE_IN),
                             np.zeros(RATE_IN, np.int16)])
    for chunk in (320, 1600, 4801):
        vad = Vad()
        assert feed(vad, stream, chunk) == ["start", "end"]
        assert registry.recognise(vad.take_utterance().samples()) == BOOKING
    upsampled = resample(synthesise(BOOKING, RATE_IN), RATE_IN, 24000)
    assert registry.recognise(resample(upsampled, 24000, RATE_IN)) == BOOKING


def test_unknown_speech_is_not_recognised() -> None:
    """Speech that is not in the registry gets no transcript (the core uses a placeholder)."""
    registry = TranscriptRegistry()
    registry.add(BOOKING, synthesise(BOOKING, RATE_IN))
    assert registry.recognise(synthesise("The weather is lovely today.", RATE_IN)) is None


def test_an_utterance_keeps_its_last_sixty_seconds_in_copies() -> None:
    """Memory: past UTTERANCE_KEPT_S the oldest samples go, whatever the chunking, and what is
    kept does not hold the (larger) chunk it came from."""
    utterance = Utterance()
    ramp = (np.arange(70 * RATE_IN) % 30000).astype(np.int16)
    for i in range(0, len(ramp), 4800):
        utterance.add(ramp[i : i + 4800])
    assert len(utterance) == UTTERANCE_KEPT_S * RATE_IN and utterance.dropped == 10 * RATE_IN
    assert np.array_equal(utterance.samples(), ramp[-UTTERANCE_KEPT_S * RATE_IN :])
    whole = Utterance()
    whole.add(ramp)
    assert np.array_equal(whole.samples(), ramp[-UTTERANCE_KEPT_S * RATE_IN :])
    assert all(chunk.base is None for chunk in whole._chunks)


def test_vad_holds_at_most_sixty_seconds_of_one_long_utterance() -> None:
    """70 s of speech without a pause, fed as 10 MB-style big chunks, ends (on silence) as the
    last 60 s, with the rest counted as dropped."""
    t = np.arange(70 * RATE_IN) / RATE_IN
    voice = (np.sin(2 * np.pi * 180 * t) * 8000).astype(np.int16)
    vad = Vad()
    assert feed(vad, voice, 35 * RATE_IN) == ["start"]
    assert feed(vad, np.zeros(RATE_IN, np.int16), 1600) == ["end"]
    utterance = vad.take_utterance()
    assert len(utterance) == UTTERANCE_KEPT_S * RATE_IN
    assert utterance.dropped > 10 * RATE_IN - RATE_IN // 10
