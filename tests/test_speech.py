"""Speech clips: what the microphone speaks is what the emulator loads and hears."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from faultlab.emulator.audio import TranscriptRegistry
from faultlab.speech import RATE_IN, read_wav, write_clips

LINES = ["Hello there.", "Book me the 3pm slot tomorrow, please."]


def test_clips_are_what_the_emulators_registry_loads(tmp_path: Path) -> None:
    """Each line becomes NN.wav (16 kHz) + NN.txt; the emulator's registry loads the folder and
    hears each clip as its line."""
    clips = write_clips(LINES, tmp_path / "speech")
    assert (tmp_path / "speech" / "01.txt").read_text() == "Hello there.\n"
    pcm, rate = read_wav((tmp_path / "speech" / "01.wav").read_bytes())
    assert rate == RATE_IN and len(pcm) > RATE_IN // 2 and np.array_equal(pcm, clips[0])
    registry = TranscriptRegistry()
    assert registry.load_dir(tmp_path / "speech") == len(LINES)
    assert [registry.recognise(clip) for clip in clips] == LINES
