"""timeline.png (faultlab.report.png): the run's sequence view drawn still, for a PR comment."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from faultlab.events import Event
from faultlab.report.png import FAULT_COLOUR, HEIGHT_PX, WIDTH_PX, write_timeline_png
from faultlab.report.sequence import View, build_view

from .test_sequence import a_record, ev

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def frame(t: float, sender: str, kind: str, conn: int = 1, **fields: object) -> Event:
    return ev(t, "target", "emulator.frame", conn=conn, **{"from": sender}, kind=kind, **fields)


def a_loss() -> list[Event]:
    """A session, an utterance of 20 audio frames, a drop that loses it, a refused resume and a
    recovery."""
    return [
        ev(0.5, "capture", "tcp.connect", k=1), frame(0.51, "client", "setup"),
        frame(0.8, "server", "setup_complete"), ev(0.81, "client", "client.connected"),
        *(frame(1.0 + i * 0.05, "client", "realtime_input.audio", audio_s=0.05) for i in range(20)),
        frame(2.2, "server", "tool_call"),
        ev(2.5, "faultlab", "fault.applied", step="cut", fault="drop", layer="packet",
           applied_in_ms=2.0),
        ev(4.5, "client", "client.lost", why="pings unanswered"),
        ev(4.6, "client", "resume.attempt", n=1), ev(4.61, "capture", "tcp.connect", k=2),
        frame(4.62, "client", "setup", conn=2),
        ev(4.63, "target", "emulator.close", conn=2, code=1011),
        ev(5.2, "client", "resume.refused", n=1, code=1011),
        ev(5.2, "capture", "tcp.fin", k=2, **{"from": "server"}),
        ev(6.0, "faultlab", "fault.reverted", step="cut", fault="drop"),
        ev(6.5, "client", "resume.ok"), ev(7.0, "client", "client.recovered"),
    ]


def pixels(path: Path) -> np.ndarray:
    """The picture's RGB values, 0 to 1."""
    return np.asarray(imread(path))[..., :3]


def test_a_run_is_a_private_png_of_the_designed_size(tmp_path: Path) -> None:
    """The picture is a PNG of WIDTH_PX x HEIGHT_PX, small, and readable by its owner only."""
    path = tmp_path / "timeline.png"
    write_timeline_png(build_view(a_loss(), a_record()), path)
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert pixels(path).shape[:2] == (HEIGHT_PX, WIDTH_PX)
    assert len(data) < 150_000
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_picture_shows_the_run_and_its_fault(tmp_path: Path) -> None:
    """A good share of the picture is drawn on, and the fault's band is there in its colour."""
    path = tmp_path / "timeline.png"
    write_timeline_png(build_view(a_loss(), a_record()), path)
    rgb = pixels(path)
    drawn = np.any(np.abs(rgb - 1.0) > 0.02, axis=-1).mean()
    band = np.all(np.abs(rgb - np.array(to_rgb(FAULT_COLOUR))) < 4 / 255, axis=-1).mean()
    # The drop lasts 3.5 s of the run's 7: about a third of the lanes' area.
    assert drawn > 0.2, f"only {drawn:.1%} of the picture is drawn"
    assert band > 0.1, f"the fault's band covers {band:.1%} of the picture"


def test_a_run_with_nothing_in_it_is_still_a_picture(tmp_path: Path) -> None:
    """No events at all (a lab that failed to start): a picture with the title and no lanes'
    content, not an error."""
    path = tmp_path / "timeline.png"
    write_timeline_png(build_view([], a_record(verdict="ERROR", error="cannot wire the lab")), path)
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_a_fifteen_minute_run_is_a_small_picture(tmp_path: Path) -> None:
    """Fifteen minutes of conversation (an utterance and an answer every 12 s, 14,000 frames)
    with a loss in the middle are drawn as a picture under 150 KB (how fast: `make bench`)."""
    events = [ev(0.5, "capture", "tcp.connect", k=1), frame(0.51, "client", "setup")]
    for turn in range(74):
        t = 1.0 + turn * 12
        events += [frame(t + i * 0.04, "client", "realtime_input.audio", audio_s=0.04)
                   for i in range(75)]
        events += [frame(t + 3.6 + i * 0.02, "server", "server_content.model_turn", audio_s=0.02)
                   for i in range(100)]
        events += [frame(t + 5.7, "server", "server_content.turn_complete"),
                   ev(t + 5.8, "client", "client.answer")]
    events += [ev(450.0, "faultlab", "fault.applied", step="cut", fault="drop"),
               ev(452.0, "client", "client.lost"),
               ev(460.0, "faultlab", "fault.reverted", step="cut", fault="drop")]
    view: View = build_view(sorted(events, key=lambda e: e.t), a_record(duration_s=900.0))
    write_timeline_png(view, tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").read_bytes().startswith(PNG_MAGIC)
    assert (tmp_path / "timeline.png").stat().st_size < 150_000
