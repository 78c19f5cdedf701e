"""`faultlab calibrate` against real emulator processes (127.0.0.1, TLS, time scale 1), and the
personality files it writes and `emulator serve --personality FILE` reads."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from faultlab.calibrate.sheet import (
    GEMINI_SHEET,
    OPENAI_SHEET,
    TIMINGS,
    Observations,
    Rate,
    Sample,
    Timing,
    judge,
)
from faultlab.emulator.personality import (
    PERSONALITIES,
    personality_file_text,
    personality_from,
    read_personality_file,
)
from faultlab.errors import ProfileError

from ..conftest import faultlab
from .conftest import RunningEmulator

Start = Callable[..., RunningEmulator]
DEFAULT = PERSONALITIES["gemini-dev-2026-10"]
# Seconds a timing may stray: loopback costs milliseconds. A busy machine makes timings longer
# and rates slower, so the tests judge only the flags it cannot cause (`early_flags`).
TOLERANCE = 0.4
OPENAI_TOLERANCE = 1.0
RATES = {t.field for sheet in (GEMINI_SHEET, OPENAI_SHEET) for t in sheet.timings
         if isinstance(t, Rate)}
# One run of each probe: about 20 s at time scale 1 (the lockout probe alone holds ~11 s).
RUN_TIMEOUT = 90


def calibrate(emulator: RunningEmulator, *args: str) -> tuple[subprocess.CompletedProcess[str],
                                                             dict[str, Any]]:
    """One calibrate run against `emulator`, one sample a probe; its process and its JSON."""
    done = faultlab("calibrate", "--base-url", emulator.env["GOOGLE_GEMINI_BASE_URL"],
                    "--ca", emulator.env["SSL_CERT_FILE"], "--samples", "1",
                    "--tolerance", f"{TOLERANCE:g}", "--json", *args, timeout=RUN_TIMEOUT)
    assert done.stdout, done.stderr
    return done, json.loads(done.stdout)


def measures(sheet: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in sheet["measures"]}


def early_flags(sheet: dict[str, Any]) -> list[str]:
    """The measures flagged for what no busy machine causes: a behaviour other than expected, a
    measure without samples, a timing shorter than its range or a rate faster than it. (That the
    emulator keeps its ranges is its unit tests' to pin, on their own clocks.)"""
    out = []
    for m in sheet["measures"]:
        if not m["flagged"]:
            continue
        if "seen" in m or not m["values"] or m["notes"]:
            out.append(m["name"])
            continue
        low, high = m["expected"]
        if any(v > high if m["name"] in RATES else v < low for v in m["outside"]):
            out.append(m["name"])
    return out


def exit_code_says(done: subprocess.CompletedProcess[str], sheet: dict[str, Any]) -> None:
    """calibrate exits 1 when it flags anything, else 0."""
    assert done.returncode == (1 if sheet["flagged"] else 0), (done.returncode, sheet["flagged"])


def test_changed_timings_are_flagged_and_the_out_file_serves(start_emulator: Start,
                                                             tmp_path: Path) -> None:
    """An emulator whose fresh set-up and refusals take 1.5-1.7 s is flagged on those two
    measures (exit 1): every other timing is measured and none shorter than the default
    personality's ranges, as a default emulator's (the lockout refused with 1011, the pending call
    answered), and the API key is in no output; the --out file, served with `--personality
    FILE`, gives an emulator with those timings that calibrate finds no faster than the file's
    own ranges."""
    slow = start_emulator("gemini-dev-2026-10", 1.0, "--set", "setup_complete_s=[1.5, 1.7]",
                          "--set", "refusal_s=[1.5, 1.7]")
    out = tmp_path / "measured.yaml"
    done, sheet = calibrate(slow, "--out", str(out))
    assert {"setup_complete_s", "refusal_s"} <= set(sheet["flagged"])
    assert early_flags(sheet) == []  # the two are late, as asked
    assert done.returncode == 1
    # The default emulator in every other measure (a calibrate run of its own took 23 s).
    got = measures(sheet)
    assert all(got[t.field]["values"] for t in TIMINGS)
    assert got["lockout"]["seen"] == {"refused 1011": got["lockout"]["seen"]["refused 1011"]}
    assert got["pending_call"]["seen"] == {"answered": 1}
    assert "test-key-not-a-secret" not in done.stdout + done.stderr
    low, high = read_personality_file(out)[1]["setup_complete_s"]
    assert 1.5 <= low <= high

    served = start_emulator(str(out), 1.0)
    done, sheet = calibrate(served, "--personality", str(out))
    assert early_flags(sheet) == [], sheet
    exit_code_says(done, sheet)
    assert sheet["personality"] == "measured"
    assert min(measures(sheet)["setup_complete_s"]["values"]) >= 1.5
    assert min(measures(sheet)["refusal_s"]["values"]) >= 1.5


@pytest.mark.parametrize("command", [("emulator", "serve", "--port", "0"), ("calibrate",)])
def test_a_bad_field_in_a_personality_file_is_one_line(tmp_path: Path,
                                                       command: tuple[str, ...]) -> None:
    """A personality file with a bad value is refused before anything starts: one
    `file:line: field: message` line, exit 2."""
    path = tmp_path / "slow.yaml"
    path.write_text("base: gemini-dev-2026-10\n# set-up got slower\nsetup_complete_s: [0.4, soon]\n")
    done = faultlab(*command, "--personality", str(path), timeout=30)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}:3: setup_complete_s[1]: "), lines


def test_an_endpoint_that_does_not_answer_is_one_line(tmp_path: Path) -> None:
    """Nothing listening at the base URL: one line naming the endpoint, exit 3, no traceback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = faultlab("calibrate", "--base-url", f"https://127.0.0.1:{port}", "--timeout", "5",
                    timeout=30)
    assert done.returncode == 3
    assert done.stderr.splitlines()[-1] == (f"faultlab: cannot open a Live session at "
                                            f"https://127.0.0.1:{port}: connection refused")
    assert "Traceback" not in done.stderr


def test_an_api_without_probes_is_one_line_that_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """A personality of an API calibrate has no probes for: one line saying it cannot measure
    that API, exit 2, before anything connects."""
    from click.testing import CliRunner

    from faultlab import calibrate as calibrate_package
    from faultlab.cli import cli

    monkeypatch.setattr(calibrate_package, "PROBES", {"gemini": calibrate_package.PROBES["gemini"]})
    result = CliRunner().invoke(cli, ["calibrate", "--personality", "openai-realtime"])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == (
        "faultlab: calibrate has no probes for the openai API, so it cannot measure it (it "
        "measures gemini: faultlab.calibrate.PROBES)")


def test_personality_file_problems_all_at_once_with_their_lines(tmp_path: Path) -> None:
    """Every problem of a personality file is reported at once, each at its line: a missing
    base, an unknown field, a range whose ends are swapped."""
    path = tmp_path / "p.yaml"
    path.write_text("refusal: [1, 2]\nsetup_complete_s: [0.5, 0.3]\n")
    with pytest.raises(ProfileError) as caught:
        read_personality_file(path)
    assert caught.value.problems == [
        f"{path}:1: base: required field is missing; one of: gemini-dev-2026-10, "
        "openai-realtime, openai-realtime-2025-08, vertex-2026",
        f"{path}:1: refusal: unknown field",
        f"{path}:2: setup_complete_s: the low end 0.5 is above the high end 0.3",
    ]


def test_personality_file_round_trip_with_set_on_top(tmp_path: Path) -> None:
    """A written personality file reads back as its base with the changes; `--set` values go on
    top of it; its name is the file's stem."""
    path = tmp_path / "field-2026-11.yaml"
    path.write_text(personality_file_text("vertex-2026", {"refusal_s": [0.9, 1.2],
                                                          "audio_speedup": 4.6}, "measured\nby me"))
    assert path.read_text().startswith("# measured\n# by me\nbase: vertex-2026\n")
    loaded = personality_from(str(path), {"audio_speedup": 3.0})
    assert loaded.name == "field-2026-11" and loaded.api == "vertex"
    assert loaded.refusal_s == (0.9, 1.2) and loaded.audio_speedup == 3.0


def test_tolerance_widens_timings_and_rates_by_wall_seconds() -> None:
    """A timing is within its range widened by the tolerance on both sides; a rate is within when
    its wall time, moved by up to the tolerance, gives the personality's value."""
    timing = Timing("refusal_s", "R1", "")
    assert timing.within(Sample(0.80, 0.80), (0.472, 0.704), 0.1)
    assert not timing.within(Sample(0.81, 0.81), (0.472, 0.704), 0.1)
    assert not timing.within(Sample(0.37, 0.37), (0.472, 0.704), 0.1)
    rate = Rate("audio_speedup", "T3", "")
    # 4 s of audio in 1 s (4x): 0.2 s more wall time gives 3.33x, 0.2 s less gives 5x.
    assert rate.within(Sample(4.0, 1.0), (5.0, 5.0), 0.2)
    assert not rate.within(Sample(4.0, 1.0), (5.3, 5.3), 0.2)
    assert not rate.within(Sample(4.0, 1.0), (3.2, 3.2), 0.2)


def test_a_measure_without_samples_is_flagged() -> None:
    """A timing no probe measured, or a behaviour not seen as expected, is flagged; the end of a
    spoken turn is judged against the VAD's silence plus `turn_end_s`."""
    seen = Observations()
    seen.time("turn_end_s", 1.2)
    seen.saw("lockout", "refused 1011")
    seen.saw("lockout", "accepted")
    sheet = {r.name: r for r in judge(seen, DEFAULT, 0.0)}
    assert not sheet["turn_end_s"].flagged and sheet["turn_end_s"].expected == "1.10-1.30 s"
    assert sheet["setup_complete_s"].flagged and sheet["lockout"].flagged


def test_an_openai_emulator_is_within_the_openai_personality(start_emulator: Start,
                                                             tmp_path: Path) -> None:
    """OpenAI Realtime's probes, with the openai SDK: against an emulator of the openai-realtime
    personality every timing is measured (none shorter than its range) and every behaviour is
    the personality's (no resumption, in-band errors, an unknown model refused); compared with a
    personality whose replies are slower, reply_s is flagged as too fast, and the file written
    serves."""
    emulator = start_emulator("openai-realtime", 1.0)
    endpoint = ["--base-url", emulator.env["OPENAI_BASE_URL"], "--ca",
                emulator.env["SSL_CERT_FILE"], "--samples", "2", "--tolerance",
                f"{OPENAI_TOLERANCE:g}", "--json"]
    done = faultlab("calibrate", "--personality", "openai-realtime", *endpoint,
                    timeout=RUN_TIMEOUT)
    sheet = json.loads(done.stdout)
    got = measures(sheet)
    assert early_flags(sheet) == [], sheet
    exit_code_says(done, sheet)
    assert set(got) == {"setup_complete_s", "invalid_argument_s", "reply_s", "tool_reply_s",
                        "turn_end_s", "audio_speedup", "in_band_error", "no_resumption",
                        "unknown_model"}
    assert all(m["values"] for m in got.values() if "values" in m)
    assert got["unknown_model"]["seen"] == {"error model_not_found, close 4000": 1}
    slower = tmp_path / "slower.yaml"
    slower.write_text("base: openai-realtime\nreply_s: [3, 4]\n")
    out = tmp_path / "measured.yaml"
    done = faultlab("calibrate", "--personality", str(slower), *endpoint, "--out", str(out),
                    timeout=RUN_TIMEOUT)
    assert done.returncode == 1 and early_flags(json.loads(done.stdout)) == ["reply_s"]
    measured = personality_from(str(out))
    assert measured.protocol == "openai" and measured.reply_s[1] < 3
