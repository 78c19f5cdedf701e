"""Clients as people ship them, in the lab: profiles/web/ puts the reference web page
(web-booking: @google/genai in headless Chromium, speaking from the lab's microphone) and the
Node client (node-booking) through a silent loss, a clean 1001 close, a frozen proxy and lossy
Wi-Fi, four labs at once; each ends with one booking and the truth told."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from faultlab.browser.chromium import unavailable

from ..conftest import PROFILES, faultlab, patience
from .helpers import assert_events_known, suite_table

pytestmark = [pytest.mark.lab, pytest.mark.alone,
              pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]

# About 75 s for the eight, four at once on 2 cores (a Node run 13-25 s, a page's 25-40 s).
SUITE_TIMEOUT_S = patience(180)
LOSSES = ["app-freeze", "clean-close", "lossy-wifi", "silent-loss"]
CLIENTS = ["node", "web"]


@pytest.mark.timeout(SUITE_TIMEOUT_S + 60)
def test_web_and_node_clients_recover_from_each_loss_and_tell_the_truth(tmp_path: Path) -> None:
    """`faultlab run --jobs 4` of profiles/web/ passes every one; the table shows how each loss
    was met: resumed after a clean close, a new session after a silent loss or a freeze (every
    resume refused while the server held the old connection), none on lossy Wi-Fi. A page cannot
    ping: it notices a silent loss later than Node does, by the server's silence."""
    names = [f"{loss}-{client}" for loss in LOSSES for client in CLIENTS]
    assert sorted(p.stem for p in (PROFILES / "web").glob("*.yaml")) == sorted(names)
    # No timeline.png (tests/report draws it).
    done = faultlab("run", "-q", "--jobs", "4", "--no-timeline", "--runs-dir", str(tmp_path),
                    *(str(PROFILES / "web" / f"{name}.yaml") for name in names),
                    timeout=SUITE_TIMEOUT_S)
    failed = re.findall(r"== (\S+): (?:FAIL|ERROR)", done.stdout)
    assert done.returncode == 0 and not failed, done.stdout[-6000:] + done.stderr
    assert_events_known(tmp_path)
    rows = suite_table(tmp_path)
    assert sorted(rows) == sorted(f"web-{name}" for name in names)
    assert all((row["bookings"], row["user told"]) == ("1", "truth") for row in rows.values())
    for client in CLIENTS:
        assert rows[f"web-clean-close-{client}"]["resumed"].endswith(" s")
        assert rows[f"web-silent-loss-{client}"]["resumed"] == "-"
        assert "1011" in rows[f"web-app-freeze-{client}"]["resumes refused"]
        assert rows[f"web-lossy-wifi-{client}"]["detected"] == "-"
    detected = {client: float(rows[f"web-silent-loss-{client}"]["detected"].removesuffix(" s"))
                for client in CLIENTS}
    assert detected["node"] < detected["web"], detected
