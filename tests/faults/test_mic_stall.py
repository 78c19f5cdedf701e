"""mic_stall: `for` is a duration with a unit; it stalls the lab's microphone once, needs the
microphone, and has nothing to revert."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from faultlab.errors import LabError
from faultlab.faults import FAULTS
from faultlab.mic import VirtualMic

from .conftest import FakeContext, FakeMic, apply_and_revert, build, params_of, refusal


@pytest.mark.parametrize(("written", "seconds"), [("1.5s", 1.5), ("200ms", 0.2), ("2m", 120.0)])
def test_for_is_a_duration_with_a_unit(written: str, seconds: float) -> None:
    """`for` is read in seconds from a duration with its unit."""
    assert params_of("mic_stall", {"for": written}).model_dump() == {"duration": seconds}


@pytest.mark.parametrize(("params", "refused"), [
    ({"for": 1.5}, {"for": "value_error"}),
    ({"for": "1.5"}, {"for": "value_error"}),
    ({"for": "-1s"}, {"for": "value_error"}),
    ({}, {"for": "missing"}),
    ({"for": "1s", "gain": 0}, {"gain": "extra_forbidden"}),
    # The field is `for` in a profile; its Python name is not a second spelling.
    ({"duration": "1s"}, {"for": "missing", "duration": "extra_forbidden"}),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object],
                                            refused: dict[str, str]) -> None:
    """A bare number, a negative or unitless duration, a missing `for` or an unknown field is
    refused naming the field."""
    assert refusal("mic_stall", params) == refused


def test_it_stalls_the_microphone_once_and_reverts_nothing() -> None:
    """Applying stalls the microphone for `for` seconds; reverting does not touch it again."""
    mic = FakeMic()
    stall = build("mic_stall", {"for": "1.5s"})
    details = apply_and_revert(stall, FakeContext(mic=cast(VirtualMic, mic)))
    assert details == {} and stall.lasts_s == 1.5  # its fault.applied says `for_s: 1.5`
    assert mic.stalls == [1.5]


def test_without_a_microphone_it_fails_saying_so() -> None:
    """A run without the lab's microphone cannot stall it: a lab error naming `mic`."""
    ctx = FakeContext()
    with pytest.raises(LabError, match="mic_stall needs the lab's microphone: give the profile a 'mic'"):
        asyncio.run(build("mic_stall", {"for": "1s"}).apply(ctx))
    assert all(ctx.lab.ns(role).calls == [] for role in ("client", "router", "server"))


def test_it_needs_the_microphone_and_is_not_held() -> None:
    """mic_stall needs the microphone, acts on the client, and ends by itself: the run keeps
    nothing to revert."""
    assert FAULTS["mic_stall"].needs == frozenset({"mic"})
    assert FAULTS["mic_stall"].layer == "client"
    fault = build("mic_stall", {"for": "1s"})
    assert fault.reversible is False and fault.held_by_run is False
