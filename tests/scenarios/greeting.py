"""A tiny scenario pack for the tests: did the model greet the user (`client.greeting`)?

It lives outside faultlab/ and touches nothing in the core. Installed (a `faultlab.scenarios` entry
point naming `tests.scenarios.greeting:PACK`), it brings an emulator model that greets back
(`overrides: {scenario: greeting}`), `{greeted: ...}` and a "greeted" column after every other one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from faultlab.emulator.brain import Brain, Mind, Reply, Rule, echo_words, tool_done
from faultlab.events import Event
from faultlab.expect.base import Expectation, Outcome, RunFacts
from faultlab.expect.registry import register
from faultlab.report.registry import counts, register_column
from faultlab.scenarios.pack import ScenarioPack

HELLO = re.compile(r"\b(hello|hi)\b", re.I)


def greeted(events: Sequence[Event]) -> bool:
    return any(e.name == "client.greeting" for e in events)


@register
class Greeted(Expectation):
    """The client was greeted (`true`) or was not (`false`)."""

    greeted: bool

    def describe(self) -> str:
        return "the user is greeted" if self.greeted else "the user is not greeted"

    def check(self, facts: RunFacts) -> Outcome:
        seen = greeted(facts.events)
        return self._outcome(seen == self.greeted, "greeted" if seen else "no greeting")


@register_column("greeted", rank=1000, combine=counts, note="Greeted: client.greeting seen.")
def _greeted(events: Sequence[Event]) -> str:
    return "yes" if greeted(events) else "no"


def _greet(match: re.Match[str], mind: Mind) -> Reply:
    return Reply("Hello, nice to meet you!")


def greeter() -> Brain:
    return Brain([Rule(HELLO, _greet)], tool_done, echo_words)


PACK = ScenarioPack("greeting", brain=greeter)
