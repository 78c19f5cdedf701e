"""A tiny scenario pack for the tests: did the client greet the user (`client.greeting`)?

It lives outside faultlab/ and touches nothing in the core: importing it registers `{greeted: ...}`
and a "greeted" column after every other one.
"""

from __future__ import annotations

from collections.abc import Sequence

from faultlab.events import Event
from faultlab.expect.base import Expectation, Outcome, RunFacts
from faultlab.expect.registry import register
from faultlab.report.registry import counts, register_column


def greeted(events: Sequence[Event]) -> bool:
    return any(e.name == "client.greeting" for e in events)


@register
class Greeted(Expectation):
    """The client greeted the user (`true`) or did not (`false`)."""

    greeted: bool

    def describe(self) -> str:
        return "the user is greeted" if self.greeted else "the user is not greeted"

    def check(self, facts: RunFacts) -> Outcome:
        seen = greeted(facts.events)
        return self._outcome(seen == self.greeted, "greeted" if seen else "no greeting")


@register_column("greeted", rank=1000, combine=counts, note="Greeted: client.greeting seen.")
def _greeted(events: Sequence[Event]) -> str:
    return "yes" if greeted(events) else "no"
