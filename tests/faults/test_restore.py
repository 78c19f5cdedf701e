"""restore: its parameters, and through the run's real FaultRuntime, which faults it reverts, in
which order, and which it asks the proxy for."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from faultlab.connections import ConnectionTable
from faultlab.events import Event, EventBus, RunClock
from faultlab.injector import FaultRuntime
from faultlab.profile import Step, parse_profile
from faultlab.timeline import Due

from .conftest import (
    FakeContext,
    FakeLab,
    FakeProxyChannel,
    build,
    params_of,
    profile_with,
    refusal,
    run_steps,
    validate,
)

PROFILE = """\
name: restore-test
target: {builtin: ws-echo-server, port: 8765}
client: {command: [sleep, "1"]}
timeline:
  - {id: cut, when: {at: 1s}, do: {fault: drop}}
  - {id: rst, when: {at: 2s}, do: {fault: reject, toward: client}}
  - {id: frz, when: {at: 3s}, do: {fault: freeze}}
  - {id: heal_cut, when: {at: 4s}, do: {fault: restore, faults: [cut]}}
  - {id: heal_two, when: {at: 4s}, do: {fault: restore, faults: [cut, frz]}}
  - {id: heal_all, when: {at: 5s}, do: {fault: restore}}
"""
# With the proxy in the path a packet fault also has a chain on the proxied legs
# (faultlab.faults.legs), removed first: two batches to apply, two to revert.
DROP_GONE = [["-D INPUT -j FLP-cut", "-D OUTPUT -j FLP-cut", "-F FLP-cut", "-X FLP-cut"],
             ["-D FORWARD -j FL-cut", "-F FL-cut", "-X FL-cut"]]
REJECT_GONE = [["-D INPUT -j FLP-rst", "-D OUTPUT -j FLP-rst", "-F FLP-rst", "-X FLP-rst"],
               ["-D FORWARD -j FL-rst", "-F FL-rst", "-X FL-rst"]]


class Run:
    """A FaultRuntime on the fake lab, with the profile's steps and a proxy holding `frz`."""

    def __init__(self) -> None:
        self.steps: dict[str, Step] = {s.id: s for s in parse_profile(PROFILE).timeline}
        self.lab = FakeLab()
        self.proxy = FakeProxyChannel(held=["frz"])
        self.bus = EventBus(RunClock())
        self.failures: list[str] = []
        self.runtime = FaultRuntime(self.lab, ConnectionTable(), self.bus, self.proxy, None,
                                    tuple(self.steps.values()), self.failures.append)

    async def apply(self, *step_ids: str) -> None:
        for step_id in step_ids:
            await self.runtime.apply(Due(self.steps[step_id], 1.0, "at 1s"))

    def router_batches(self) -> list[list[str]]:
        return self.lab.ns("router").batches

    def events(self, name: str) -> list[dict[str, Any]]:
        return [dict(e.fields) for e in self.bus.events if e.name == name]

    def last(self, name: str) -> Event:
        return [e for e in self.bus.events if e.name == name][-1]


def test_defaults_restore_everything() -> None:
    """With no parameters restore names no step, which means every active fault."""
    assert params_of("restore").model_dump() == {"faults": []}
    assert list(params_of("restore", {"faults": ["a", "b"]}).referenced_steps()) == ["a", "b"]


@pytest.mark.parametrize(("params", "field"), [
    ({"faults": "cut"}, "faults"),
    ({"faults": [1]}, "faults"),
    ({"steps": ["cut"]}, "steps"),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object], field: str) -> None:
    """`faults` is a list of step ids; any other field is refused."""
    assert list(refusal("restore", params)) == [field]


def test_restore_one_reverts_just_that_one() -> None:
    """`faults: [cut]` reverts the drop only: its chain goes, the reject stays applied, and one
    `fault.reverted` is emitted; the proxy is not asked."""
    run = Run()

    async def go() -> None:
        await run.apply("cut", "rst")
        await run.apply("heal_cut")

    asyncio.run(go())
    assert run.router_batches()[4:] == DROP_GONE
    assert list(run.runtime.active) == ["rst"]
    assert run.events("fault.reverted") == [{"step": "cut", "fault": "drop"}]
    assert run.last("fault.applied").fields["reverted"] == ["cut"]
    assert run.proxy.reverts == []
    assert run.failures == []


def test_restore_all_reverts_the_latest_first_and_asks_the_proxy() -> None:
    """With no ids restore reverts what the run holds, the latest first, then asks the proxy to
    revert everything it holds; each gets its `fault.reverted`."""
    run = Run()

    async def go() -> None:
        await run.apply("cut", "rst")
        await run.apply("heal_all")

    asyncio.run(go())
    assert run.router_batches()[4:] == REJECT_GONE + DROP_GONE
    assert run.runtime.active == {}
    assert run.proxy.reverts == [None]
    assert run.events("fault.reverted") == [
        {"step": "rst", "fault": "reject"}, {"step": "cut", "fault": "drop"},
        {"step": "frz", "fault": "freeze", "by": "proxy"},
    ]
    assert sorted(run.last("fault.applied").fields["reverted"]) == ["cut", "frz", "rst"]


def test_restore_reports_the_ids_in_the_order_reverted() -> None:
    """restore's `reverted` lists the faults in the order they were reverted, the latest first,
    as the proxy's own reply does."""
    run = Run()

    async def go() -> None:
        await run.apply("cut", "rst", "heal_all")

    asyncio.run(go())
    assert run.last("fault.applied").fields["reverted"] == ["rst", "cut", "frz"]


def test_ids_the_run_does_not_hold_are_asked_of_the_proxy() -> None:
    """`faults: [cut, frz]` reverts the drop here and asks the proxy for `frz` only."""
    run = Run()

    async def go() -> None:
        await run.apply("cut", "rst")
        await run.apply("heal_two")

    asyncio.run(go())
    assert run.router_batches()[4:] == DROP_GONE
    assert run.proxy.reverts == [["frz"]]
    assert run.proxy.held == []
    assert list(run.runtime.active) == ["rst"]
    assert run.last("fault.applied").fields == {
        "step": "heal_two", "fault": "restore", "layer": "packet", "trigger": "at 1s",
        "applied_in_ms": run.last("fault.applied").fields["applied_in_ms"],
        "reverted": ["cut", "frz"], "ends": ["cut", "frz"], "for_s": 0.0,
    }


def test_a_second_restore_finds_nothing_left() -> None:
    """After everything is restored, restoring again reverts nothing and changes no rule."""
    run = Run()

    async def go() -> None:
        await run.apply("cut", "heal_all", "heal_all")

    asyncio.run(go())
    assert len(run.router_batches()) == 4
    assert [e.fields["reverted"] for e in run.bus.events if e.name == "fault.applied"
            and e.fields["step"] == "heal_all"] == [["cut", "frz"], []]


def test_restore_asks_its_context_and_its_own_revert_does_nothing() -> None:
    """restore hands its ids (or None for all) to the context and records what came back; its own
    revert asks nothing."""
    ctx = FakeContext(held=["a", "b"])
    one = build("restore", {"faults": ["a"]})
    assert asyncio.run(one.apply(ctx)) == {"reverted": ["a"]}
    assert asyncio.run(build("restore").apply(ctx)) == {"reverted": ["b", "a"]}
    assert ctx.reverts == [["a"], None]
    asyncio.run(one.revert(ctx))
    assert ctx.reverts == [["a"], None]


def test_a_restore_needs_nothing_and_the_run_does_not_hold_it() -> None:
    """A profile with neither a target nor a microphone may restore: the run starts nothing for
    it. The run does not hold a restore, so a second restore finds nothing left, not even the
    first."""
    assert validate("restore", target=False, mic=False).needs == frozenset()
    run = run_steps(profile_with("restore", target=False, mic=False), "s1", "heal")
    assert run.failures == []
    assert run.held == [[], []]
    assert run.applied("heal")["reverted"] == [] and run.reverted() == []
