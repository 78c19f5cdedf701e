"""The tutorial's own client (docs/tutorial/first-client.md) does what the page says: its files,
taken from the page, run as it tells a reader to, fail as shown (the loss told 10 s late, after
websockets' closing handshake), and pass with the page's one-line fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ..conftest import REPO, faultlab

PAGE = REPO / "docs" / "tutorial" / "first-client.md"

pytestmark = pytest.mark.lab


def blocks(language: str) -> list[str]:
    """The page's code blocks in `language`, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", PAGE.read_text(), re.MULTILINE | re.DOTALL)


def lost_after(result: dict[str, object]) -> tuple[bool, str]:
    """Whether the expectation on `client.lost` held, and what it saw."""
    (lost,) = [e for e in result["expectations"] if "client.lost" in e["expectation"]]  # type: ignore[attr-defined]
    return lost["held"], str(lost["seen"])


@pytest.mark.timeout(180)
def test_the_tutorial_client_fails_as_shown_then_passes_with_its_fix(tmp_path: Path) -> None:
    client, fix = blocks("python")
    (profile,) = blocks("yaml")
    (tmp_path / ".venv").symlink_to(REPO / ".venv")  # "in the checkout": its venv
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "my_client.py").write_text(client)
    (mine / "my-first.yaml").write_text(profile)

    def run() -> tuple[int, dict[str, object]]:
        done = faultlab("run", "mine/my-first.yaml", "-q", "--no-timeline", cwd=tmp_path)
        (result,) = (tmp_path / "runs").glob("*-my-first/result.json")
        data = json.loads(result.read_text())
        result.rename(result.with_suffix(".seen"))
        return done.returncode, data

    code, result = run()
    held, seen = lost_after(result)
    assert code == 1 and not held, seen
    assert float(re.search(r"\+([\d.]+)s", seen).group(1)) > 5, seen  # type: ignore[union-attr]

    # The fix: the page's one line in place of the client's own connect line.
    fixed = fix.rstrip("\n")
    old = next(line for line in client.splitlines() if "websockets.connect(" in line)
    assert "close_timeout" in fixed and "close_timeout" not in old
    (mine / "my_client.py").write_text(client.replace(old, fixed))
    code, result = run()
    assert code == 0 and lost_after(result)[0], result["expectations"]
