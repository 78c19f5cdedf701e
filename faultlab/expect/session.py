"""Expectations on any Live API session: how resumes were refused, how the session recovered,
how much audio reached the server, and whether the model kept quiet.

They read events through their records (faultlab.vocabulary: the session's, that faultlab's
reference clients write, and the frames of the emulator and the proxy); a client of one's own that
writes the same records gets the same checks (docs/guide/own-client.md). A scenario's own events
are judged by the expectations its pack registers (faultlab/scenarios/).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import Field, model_validator

from faultlab.events import Event
from faultlab.expect.base import Expectation, Outcome, RunFacts
from faultlab.expect.registry import register
from faultlab.frames import connection_of, sender_of
from faultlab.model import Duration, EventMatch, Model
from faultlab.protocols import Protocol as RealtimeApi
from faultlab.vocabulary.lab import ProxyWsEnd
from faultlab.vocabulary.run import FaultApplied, FrameLogged, RunTeardown
from faultlab.vocabulary.server import ServerDisconnect
from faultlab.vocabulary.session import ClientRecovered, ResumeOk, ResumeRefused


@register
class ResumesRefused(Expectation):
    """Resume attempts were refused with this close code: at least `at_least` of them, and with
    `every`, every attempt before the first successful one."""

    resumes_refused: int = Field(ge=1000, le=4999)
    """The WebSocket close code (1000-4999) the refusals must carry, e.g. `1011`."""
    at_least: int = Field(default=1, ge=1)
    """At least this many resume attempts before the first successful one must be refused with
    that code."""
    every: bool = False
    """`true`: every refusal before the first successful resume must carry that code, none
    another."""

    def describe(self) -> str:
        scope = "every resume attempt before one works" if self.every else (
            f"at least {self.at_least} resume attempt(s)")
        return f"{scope} refused with {self.resumes_refused}" + (
            f" (at least {self.at_least})" if self.every else "")

    def check(self, facts: RunFacts) -> Outcome:
        ok = next((e.t for e in facts.events if ResumeOk.is_one(e)), float("inf"))
        before = [e for e in facts.events if ResumeRefused.is_one(e) and e.t < ok]
        codes = Counter(e.fields.get("code") for e in before)
        matching = codes.get(self.resumes_refused, 0)
        held = matching >= self.at_least and (not self.every or matching == len(before))
        seen = ", ".join(f"{n}x {code}" for code, n in codes.items()) or "no refusal"
        return self._outcome(held, seen + ("" if ok == float("inf") else ", then resumed"),
                             before[-1].t if before else None)


@register
class Recovered(Expectation):
    """The client recovered (`client.recovered`: the model's first output after a loss) within
    this long of the reference event (by default the first fault applied)."""

    recovered_within: Duration
    """The longest the client may take to recover after the reference event, e.g. `8s`."""
    after: EventMatch = EventMatch(event=FaultApplied.NAME)
    """The reference: the first event matching this (`{event: NAME, where: {...}}`), from when it
    began; by default the first fault applied (`fault.applied`)."""

    def describe(self) -> str:
        return f"recovered within {self.recovered_within:g}s of {self.after.describe()}"

    def check(self, facts: RunFacts) -> Outcome:
        ref = self.after.first(facts.events, facts.protocol.kind_matches)
        if ref is None:
            return self._outcome(False, f"{self.after.describe()} never happened")
        hit = next((e for e in facts.events if ClientRecovered.is_one(e) and e.t >= ref.began),
                   None)
        if hit is None:
            return self._outcome(False, "never recovered", ref.began)
        gap = hit.t - ref.began
        return self._outcome(gap <= self.recovered_within, f"+{gap:.3f}s", hit.t)


class Bounds(Model):
    at_least: float | None = Field(default=None, ge=0)
    """The value must be this or more."""
    at_most: float | None = Field(default=None, ge=0)
    """The value must be this or less. Give `at_least`, `at_most` or both."""

    @model_validator(mode="after")
    def _some_bound(self) -> Bounds:
        if self.at_least is None and self.at_most is None:
            raise ValueError("give 'at_least' or 'at_most'")
        return self

    def describe(self) -> str:
        return " and ".join(
            ([f">= {self.at_least:g}"] if self.at_least is not None else [])
            + ([f"<= {self.at_most:g}"] if self.at_most is not None else []))

    def hold(self, value: float) -> bool:
        return ((self.at_least is None or value >= self.at_least)
                and (self.at_most is None or value <= self.at_most))


def delivered_audio(events: Sequence[Event]) -> tuple[float, float] | None:
    """Uplink audio seconds and wall seconds of the connection that carried the most audio, from
    the emulator's frames (or else the proxy's): from its first audio message to its end (or the
    end of the run)."""
    for log in ("emulator", "proxy"):
        frames = [e for e in events if (f := FrameLogged.read(e)) is not None and f.log == log
                  and f.sender == "client" and isinstance(e.fields.get("audio_s"), int | float)]
        if frames:
            break
    else:
        return None
    by_conn: dict[object, list[Event]] = {}
    for e in frames:
        by_conn.setdefault(connection_of(e), []).append(e)
    conn, audio = max(by_conn.items(), key=lambda item: sum(e.fields["audio_s"] for e in item[1]))
    start = audio[0].t
    ends = [e.t for e in events if e.t > start and (
        ((ServerDisconnect.is_one(e) or ProxyWsEnd.is_one(e)) and connection_of(e) == conn)
        or RunTeardown.is_one(e))]
    end = min(ends, default=audio[-1].t + float(audio[-1].fields["audio_s"]))
    return sum(float(e.fields["audio_s"]) for e in audio), max(end - start, 1e-9)


@register
class DeliveredAudioRatio(Expectation):
    """Uplink audio seconds over wall seconds of the session (about 1.0 for a client that keeps
    streaming at real-time rate; lower when it stops sending)."""

    delivered_audio_ratio: Bounds
    """The bounds the ratio must lie within, e.g. `{at_least: 0.95}`."""

    def describe(self) -> str:
        return f"delivered-audio ratio {self.delivered_audio_ratio.describe()}"

    def check(self, facts: RunFacts) -> Outcome:
        measured = delivered_audio(facts.events)
        if measured is None:
            return self._outcome(False, "no uplink audio seen")
        audio_s, wall_s = measured
        ratio = audio_s / wall_s
        return self._outcome(self.delivered_audio_ratio.hold(ratio),
                             f"{ratio:.3f} ({audio_s:.2f}s of audio in {wall_s:.2f}s)")


class Window(Model):
    within: Duration | None = None
    """How long after `after` the model must stay silent, e.g. `3s`; absent: until the run ends."""
    after: EventMatch | None = None
    """The window starts at the first event matching this (`{event: NAME, where: {...}}`), which
    must happen; absent: at the client's start."""


def is_reply(event: Event, protocol: RealtimeApi) -> bool:
    """A message in which the model says something or calls a tool."""
    return sender_of(event) == "server" and protocol.is_reply(str(event.fields.get("kind", "")))


@register
class NoReply(Expectation):
    """The model says nothing and calls nothing within `within` of `after` (both optional: by
    default, never, from the client's start), as seen in the emulator's or the proxy's frames."""

    no_reply: Window
    """The window of silence: `{within: 3s, after: {event: ...}}`; `{}`: from the client's start
    to the run's end."""

    def describe(self) -> str:
        w = self.no_reply
        since = w.after.describe() if w.after else "the client's start"
        return "no reply" + (f" within {w.within:g}s of {since}" if w.within is not None
                             else f" after {since}")

    def check(self, facts: RunFacts) -> Outcome:
        w = self.no_reply
        t0 = facts.start
        if w.after is not None:
            ref = w.after.first(facts.events, facts.protocol.kind_matches)
            if ref is None:
                return self._outcome(False, f"{w.after.describe()} never happened")
            t0 = ref.began
        reply = next((e for e in facts.events if e.t >= t0 and is_reply(e, facts.protocol)), None)
        if reply is None:
            return self._outcome(True, "no reply")
        gap = reply.t - t0
        held = w.within is not None and gap > w.within
        return self._outcome(held, f"first reply at +{gap:.3f}s ({reply.fields.get('kind')})",
                             reply.t)
