"""turn_down: no parameters; it kills the lab's TURN server and its revert starts it again; a
profile without a `turn` is refused, and a run without the server fails the step."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from faultlab.errors import LabError, ProfileError
from faultlab.profile import parse_profile

from .conftest import FakeContext, apply_and_revert, build, refusal


@dataclass
class FakeTurn:
    """The lab's TURN server, recording what is done to it."""

    done: list[str] = field(default_factory=list)

    async def kill(self) -> int:
        self.done.append("kill")
        return 4242

    async def start(self) -> None:
        self.done.append("start")


@dataclass
class TurnContext(FakeContext):
    turn: FakeTurn | None = None


def test_it_takes_no_parameters() -> None:
    assert refusal("turn_down", {"connection": "first"}) == {"connection": "extra_forbidden"}


def test_apply_kills_the_server_and_revert_starts_it_again() -> None:
    """The applied event names the pid it killed; reverting starts a new one."""
    ctx = TurnContext(turn=FakeTurn())
    assert apply_and_revert(build("turn_down", step="down"), ctx) == {"pid": 4242}
    assert ctx.turn is not None and ctx.turn.done == ["kill", "start"]


def test_without_the_server_the_step_fails_saying_why() -> None:
    with pytest.raises(LabError, match="give the profile a 'turn'"):
        asyncio.run(build("turn_down").apply(TurnContext()))


def test_a_profile_without_turn_is_refused_at_the_step() -> None:
    text = "name: t\nclient: {builtin: naive}\ntimeline:\n  - {when: {at: 1s}, do: {fault: turn_down}}\n"
    with pytest.raises(ProfileError, match=r"p.yaml:4: timeline\[0\].do.fault: turn_down acts on the "
                                        r"lab's TURN server: give the profile a 'turn'"):
        parse_profile(text, "p.yaml")
    assert parse_profile(text + "turn: {}\n", "p.yaml").needs == frozenset({"turn"})
