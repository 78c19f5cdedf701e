"""The calibration sheet: what the probes measured beside a personality's ranges, each measure
flagged when it strays outside by more than the tolerance; as text, as JSON, and as the
personality file `faultlab emulator serve --personality FILE` reads.

The tolerance widens every timing by the same seconds on both sides (a network's round trips, a
loaded machine); a rate is judged on the wall time it was measured over, widened the same way.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from faultlab.emulator.personality import Personality
from faultlab.report.registry import counts, span

REFUSED = "refused 1011"  # R1, L1: the close code of every refused resume
ACCEPTED = "accepted"
ANSWERED = "answered"


@dataclass(frozen=True)
class Sample:
    """One measured value (seconds, or for a rate audio seconds per wall second) and the wall
    seconds it was measured over."""

    value: float
    wall_s: float


@dataclass(frozen=True)
class Timing:
    """A timing the probes measure and the personality field (a range in seconds) it calibrates."""

    field: str
    items: str  # the item ids of the sheet's docs page
    what: str
    unit: str = " s"

    def expected(self, personality: Personality) -> tuple[float, float]:
        low, high = getattr(personality, self.field)
        return float(low), float(high)

    def within(self, sample: Sample, expected: tuple[float, float], tolerance_s: float) -> bool:
        return expected[0] - tolerance_s <= sample.value <= expected[1] + tolerance_s

    def field_value(self, samples: list[Sample], personality: Personality) -> Any:
        """What a personality file sets the field to: the measured range."""
        values = [s.value for s in samples]
        return [round(min(values), 3), round(max(values), 3)]


@dataclass(frozen=True)
class EndOfTurn(Timing):
    """T1, measured from the last speech chunk: the VAD's silence, then the personality's
    `turn_end_s`."""

    def expected(self, personality: Personality) -> tuple[float, float]:
        low, high = super().expected(personality)
        silence = personality.vad_silence_ms / 1000
        return silence + low, silence + high

    def field_value(self, samples: list[Sample], personality: Personality) -> Any:
        silence = personality.vad_silence_ms / 1000
        return [max(0.0, round(v - silence, 3)) for v in super().field_value(samples, personality)]


@dataclass(frozen=True)
class Rate(Timing):
    """A speed-up (a single value in the personality): a sample is within when the wall time it
    was measured over, moved by up to the tolerance, gives the personality's value."""

    unit: str = "x"

    def expected(self, personality: Personality) -> tuple[float, float]:
        value = float(getattr(personality, self.field))
        return value, value

    def within(self, sample: Sample, expected: tuple[float, float], tolerance_s: float) -> bool:
        audio_s = sample.value * sample.wall_s
        slowest = audio_s / (sample.wall_s + tolerance_s)
        fastest = audio_s / (sample.wall_s - tolerance_s) if sample.wall_s > tolerance_s else None
        return slowest <= expected[1] and (fastest is None or fastest >= expected[0])

    def field_value(self, samples: list[Sample], personality: Personality) -> Any:
        return round(statistics.median(s.value for s in samples), 1)


TIMINGS = (
    Timing("setup_complete_s", "S1", "fresh session: connect start to setupComplete"),
    Timing("resumed_setup_complete_s", "S2", "accepted resume: connect start to setupComplete"),
    Timing("resumption_update_s", "U1", "fresh session: setupComplete to sessionResumptionUpdate"),
    Timing("refusal_s", "R1 L2", "refused resume: connect start to close 1011"),
    Timing("reply_s", "T7", "text turn sent to the model's first reply (a toolCall)"),
    Timing("tool_reply_s", "T2", "toolResponse sent to the model's first reply"),
    EndOfTurn("turn_end_s", "T1", "last speech chunk (then silent samples at real-time rate) to "
                                  "the turn's end; personality: vad_silence_ms + turn_end_s"),
    Rate("audio_speedup", "T3", "the reply's audio seconds per wall second, first chunk to "
                                "generationComplete"),
)


@dataclass(frozen=True)
class Behaviour:
    """An outcome every probe of a kind must have (a close code, an acceptance, an answer)."""

    key: str
    items: str
    what: str
    expected: Callable[[Personality], str]


BEHAVIOURS = (
    Behaviour("idle_drop_refused", "R1", "resume at once after closing a session idle after a turn",
              lambda p: REFUSED if p.release_window_s > 0 else ACCEPTED),
    Behaviour("release_window", "R2", "resume release_window_s + 0.1 s after that close",
              lambda p: ACCEPTED),
    Behaviour("lockout", "L1", "resume while the first connection is still open (1 s cadence)",
              lambda p: REFUSED),
    Behaviour("unlock", "L3", "resume at once after closing that connection, idle for "
                              "release_after_activity_s + 0.5 s", lambda p: ACCEPTED),
    Behaviour("pending_call", "R4", "toolResponse for the old call id on the resumed session: "
                                    "the model speaks", lambda p: ANSWERED),
)


@dataclass(frozen=True)
class Sheet:
    """What one API's probes measure, and the docs page whose item ids the measures cite."""

    timings: tuple[Timing, ...]
    behaviours: tuple[Behaviour, ...]
    docs: str


GEMINI_SHEET = Sheet(TIMINGS, BEHAVIOURS, "docs/live-server-behaviour.md")
# OpenAI Realtime (docs/openai-realtime.md): nothing is resumed, errors are in-band.
STAYS_OPEN = "error, stays open"
NEW_SESSION = "a new, empty session"
OPENAI_SHEET = Sheet(
    timings=(
        Timing("setup_complete_s", "O2", "connect start to session.created"),
        Timing("invalid_argument_s", "O6", "a session.update without its type to its error"),
        Timing("reply_s", "O11", "response.create after a user item to the first output"),
        Timing("tool_reply_s", "O10", "function_call_output + response.create to the first "
                                      "output"),
        EndOfTurn("turn_end_s", "O13", "last speech chunk (then silent samples at real-time "
                                       "rate) to the response; personality: vad_silence_ms + "
                                       "turn_end_s"),
        Rate("audio_speedup", "O11", "the reply's audio seconds per wall second, first "
                                     "output_audio.delta to response.done"),
    ),
    behaviours=(
        Behaviour("in_band_error", "O6", "a bad event: an error event, and the session answers "
                                         "the next one", lambda p: STAYS_OPEN),
        Behaviour("no_resumption", "O3", "a second connection: its session has another id and "
                                         "none of the first's instructions",
                  lambda p: NEW_SESSION),
        Behaviour("unknown_model", "O4", "a model the service does not serve",
                  lambda p: "error model_not_found, close 4000"),
    ),
    docs="docs/openai-realtime.md")


@dataclass
class Observations:
    """What the probes saw: every timing's samples, every behaviour's outcomes, and why a
    measure has fewer samples than it should."""

    samples: dict[str, list[Sample]] = field(default_factory=dict)
    outcomes: dict[str, list[str]] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)

    def time(self, key: str, value: float, wall_s: float | None = None) -> None:
        self.samples.setdefault(key, []).append(Sample(value, value if wall_s is None else wall_s))

    def saw(self, key: str, outcome: str) -> None:
        self.outcomes.setdefault(key, []).append(outcome)

    def lack(self, key: str, why: str) -> None:
        self.missing.setdefault(key, []).append(why)

    async def timing[T](self, key: str, arrival: Awaitable[tuple[float, T] | None],
                        start: float, missing: str) -> tuple[float, T] | None:
        """The time from `start` to what `arrival` waits for (an `Arrivals.first`), or why it
        is `missing` when it does not come; what came."""
        got = await arrival
        if got is None:
            self.lack(key, missing)
        else:
            self.time(key, got[0] - start)
        return got


@dataclass(frozen=True)
class Row:
    """One line of the sheet: a timing or a behaviour, measured beside expected."""

    name: str
    items: str
    what: str
    measured: str
    expected: str
    flagged: bool
    data: dict[str, Any]


def judge(seen: Observations, personality: Personality, tolerance_s: float,
          sheet: Sheet = GEMINI_SHEET) -> list[Row]:
    """Every measure of the sheet, in the sheet's order."""
    out: list[Row] = []
    for timing in sheet.timings:
        samples = seen.samples.get(timing.field, [])
        expected = timing.expected(personality)
        outside = [s.value for s in samples if not timing.within(s, expected, tolerance_s)]
        notes = sorted(set(seen.missing.get(timing.field, [])))
        measured = span([s.value for s in samples], timing.unit) if samples else "not measured"
        out.append(Row(
            timing.field, timing.items, timing.what,
            f"{measured} (n={len(samples)})" + "".join(f"; {n}" for n in notes),
            span(list(expected), timing.unit), bool(outside or notes or not samples),
            {"values": [round(s.value, 4) for s in samples], "expected": list(expected),
             "outside": [round(v, 4) for v in outside], "notes": notes}))
    for behaviour in sheet.behaviours:
        outcomes = seen.outcomes.get(behaviour.key, [])
        wanted = behaviour.expected(personality)
        out.append(Row(
            behaviour.key, behaviour.items, behaviour.what,
            f"{counts(outcomes)} (n={len(outcomes)})" if outcomes else "not measured", wanted,
            not outcomes or any(o != wanted for o in outcomes),
            {"seen": dict(Counter(outcomes)), "expected": wanted}))
    return out


def measured_fields(seen: Observations, personality: Personality,
                    sheet: Sheet = GEMINI_SHEET) -> dict[str, Any]:
    """The personality fields the samples give values for, as a personality file writes them."""
    return {t.field: t.field_value(seen.samples[t.field], personality)
            for t in sheet.timings if seen.samples.get(t.field)}


def render(sheet: list[Row], heading: str, tolerance_s: float,
           docs: str = GEMINI_SHEET.docs) -> str:
    """The sheet as text: one line per measure, flagged ones marked, and the verdict."""
    width = max(len(r.name) for r in sheet)
    measured = max(len(r.measured) for r in sheet)
    expected = max(len(r.expected) for r in sheet)
    lines = [heading, "", f"{'measure':<{width}}  {'items':<5}  {'measured':<{measured}}  "
                          "personality"]
    for row in sheet:
        lines.append(f"{row.name:<{width}}  {row.items:<5}  {row.measured:<{measured}}  "
                     f"{row.expected:<{expected}}  {'FLAGGED' if row.flagged else 'ok'}")
    lines += ["", f"how each is measured (item ids: {docs}):"]
    lines += [f"  {row.name}: {row.what}" for row in sheet]
    flagged = [r.name for r in sheet if r.flagged]
    lines += ["", f"tolerance: {tolerance_s:g} s on every timing (network round trips, load)",
              f"{len(flagged)} flagged: {', '.join(flagged)}" if flagged
              else "every measure within the personality's range"]
    return "\n".join(lines)
