"""faultlab's ws-client writes the spans of its keepalive rule so that they still say the rule."""

from __future__ import annotations

import pytest

from faultlab.peers.ws_client import ms_up


@pytest.mark.parametrize("span", [2.0004, 2.0000001, 2.0191])
def test_a_span_past_the_rule_reads_past_it_once_written(span: float) -> None:
    """A span declared lost for being over 2 s is written over 2 s (round() wrote 2.0004 as 2.0:
    CI's stop 43 failed on exactly that)."""
    assert ms_up(span) > 2.0
    assert ms_up(span) - span < 0.001


def test_a_whole_millisecond_stays_as_it_is() -> None:
    assert ms_up(1.5) == 1.5
