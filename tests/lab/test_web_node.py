"""The Node reference client in the lab: profiles/web/*-node.yaml put node-booking (@google/genai
in Node, the field's recovery pattern) through a silent loss, a clean 1001 close, a frozen proxy
and lossy Wi-Fi, four labs at once; each ends with one booking and the truth told."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ..conftest import PROFILES, faultlab, slack
from .helpers import suite_table

pytestmark = [pytest.mark.lab, pytest.mark.alone]

# About 25 s with the four at once on 2 cores (each run 14-24 s).
SUITE_TIMEOUT_S = slack(90)
NODE_PROFILES = ["app-freeze-node", "clean-close-node", "lossy-wifi-node", "silent-loss-node"]


@pytest.mark.timeout(SUITE_TIMEOUT_S + 60)
def test_the_node_client_recovers_from_each_loss_and_tells_the_truth(tmp_path: Path) -> None:
    """`faultlab run --jobs 4` of the Node profiles passes every one; the table shows how each
    loss was met: resumed after a clean close, a new session after a silent loss or a freeze
    (every resume refused while the server held the old connection), none on lossy Wi-Fi."""
    paths = [PROFILES / "web" / f"{name}.yaml" for name in NODE_PROFILES]
    assert sorted(p.stem for p in (PROFILES / "web").glob("*-node.yaml")) == NODE_PROFILES
    done = faultlab("run", "-q", "--jobs", "4", "--runs-dir", str(tmp_path), *map(str, paths),
                    timeout=SUITE_TIMEOUT_S)
    failed = re.findall(r"== (\S+): (?:FAIL|ERROR)", done.stdout)
    assert done.returncode == 0 and not failed, done.stdout[-6000:] + done.stderr
    rows = suite_table(tmp_path)
    assert sorted(rows) == [f"web-{name}" for name in NODE_PROFILES]
    assert all((row["bookings"], row["user told"]) == ("1", "truth") for row in rows.values())
    assert rows["web-clean-close-node"]["resumed"].endswith(" s")
    assert rows["web-silent-loss-node"]["resumed"] == "-"
    assert "1011" in rows["web-app-freeze-node"]["resumes refused"]
    assert rows["web-lossy-wifi-node"]["detected"] == "-"
