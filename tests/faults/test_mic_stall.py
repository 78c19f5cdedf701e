"""mic_stall: `for` is a duration with a unit; it stalls the lab's microphone once, needs the
microphone, and has nothing to revert."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from faultlab.errors import LabError, ProfileError
from faultlab.mic import VirtualMic

from .conftest import (
    FakeContext,
    FakeMic,
    apply_and_revert,
    build,
    params_of,
    profile_with,
    refusal,
    run_steps,
    validate,
)


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
    """A profile without a microphone is refused; with one (and no target) the run starts the
    microphone and nothing else for it. Applied by the run it stalls the microphone and is
    recorded at the client layer; the stall ends by itself, so the run keeps nothing and a
    restore reverts nothing (and does not stall again)."""
    with pytest.raises(ProfileError, match=r"do\.fault: mic_stall acts on the lab's microphone"):
        validate("mic_stall", {"for": "1s"}, mic=False)
    assert validate("mic_stall", {"for": "1s"}, target=False).needs == {"mic"}
    mic = FakeMic()
    run = run_steps(profile_with("mic_stall", {"for": "1s"}, target=False), "s1", "heal", mic=mic)
    assert run.failures == []
    assert run.applied("s1")["layer"] == "client"
    assert mic.stalls == [1.0]
    assert run.held == [[], []]
    assert run.applied("heal")["reverted"] == [] and run.reverted() == []
