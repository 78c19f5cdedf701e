"""The shipped voice-path profiles pass: a voice session with the microphone against the emulator
on a 3G link, lossy Wi-Fi, a congested uplink, and a jittery uplink with the keep-alive keyed on
the source (right) and on the uplink (the field's warning)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ..conftest import PROFILES, faultlab, patience

pytestmark = [pytest.mark.lab, pytest.mark.alone]

VOICE_PATHS = ["mobile-3g", "lossy-wifi", "congested-uplink", "audio-jitter",
               "audio-jitter-uplink-keepalive"]


def test_the_voice_path_profiles_pass(tmp_path: Path) -> None:
    """Each profile's expectations hold (the turn heard and answered, the delivered-audio ratio,
    no false loss; and with the uplink-keyed keep-alive, silence in the speech and a ratio above
    1), all five labs at once; the suite table shows the ratios."""
    # No timeline.png (tests/report draws it).
    done = faultlab("run", "-q", "--jobs", "5", "--no-timeline", "--runs-dir", str(tmp_path),
                    *(str(PROFILES / f"{name}.yaml") for name in VOICE_PATHS),
                    timeout=patience(180))
    failed = [line for line in done.stdout.splitlines() if "FAIL" in line or "ERROR" in line]
    assert done.returncode == 0 and not failed, "\n".join(failed) + done.stderr
    rows = {cells[0]: cells for cells in (
        [c.strip() for c in line.split("|")[1:-1]] for line in done.stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| scenario"))}
    ratio = {name: rows[name][-1] for name in VOICE_PATHS}
    assert float(re.split(r"-", ratio["audio-jitter-uplink-keepalive"])[0]) > 1.05
    assert float(re.split(r"-", ratio["audio-jitter"])[-1]) <= 1.05
