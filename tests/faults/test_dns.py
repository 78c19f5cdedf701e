"""dns: its parameters, what it asks of the lab's resolver and its revert, what `validate`
refuses, and the run's side (the run starts the resolver for it and a restore reverts it)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import ValidationError

from faultlab.connections import ConnectionTable
from faultlab.errors import MechanismError, ProfileError
from faultlab.events import EventBus, RunClock
from faultlab.injector import FaultRuntime
from faultlab.launch import files_then_dns
from faultlab.profile import parse_profile
from faultlab.timeline import Due

from .conftest import FakeContext, FakeLab, apply_and_revert, build, params_of, refusal


@dataclass
class FakeResolver:
    """The lab resolver's channel, recording each order; it hurts the names it is given, or
    the target's."""

    target_names: list[str] = field(default_factory=lambda: ["echo.lab"])
    orders: list[tuple[Any, ...]] = field(default_factory=list)

    async def set_answer(self, step: str, names: list[str] | None, answer: Any,
                         delay_s: float) -> list[str]:
        self.orders.append(("set", step, names, answer, delay_s))
        return sorted(names or self.target_names)

    async def clear_answer(self, step: str) -> None:
        self.orders.append(("clear", step))


@dataclass
class DnsContext(FakeContext):
    resolver: FakeResolver | None = None


def test_answer_is_required_and_names_default_to_the_target() -> None:
    """A step gives its `answer`; `names` defaults to the target's and `delay` to none."""
    assert params_of("dns", {"answer": "nxdomain"}).model_dump() == {
        "answer": "nxdomain", "delay": None, "names": None}
    assert params_of("dns", {"answer": "slow", "delay": "800ms"}).model_dump()["delay"] == 0.8
    assert params_of("dns", {"answer": "none", "names": ["API.Example.com"]}).model_dump()[
        "names"] == ["api.example.com"]


@pytest.mark.parametrize(("params", "refused"), [
    ({}, {"answer": "missing"}),
    ({"answer": "timeout"}, {"answer": "literal_error"}),
    ({"answer": "slow", "delay": 0.5}, {"delay": "value_error"}),
    ({"answer": "servfail", "names": []}, {"names": "too_short"}),
    ({"answer": "servfail", "names": ["not a name"]}, {"names": "value_error"}),
    ({"answer": "none", "connection": "latest"}, {"connection": "extra_forbidden"}),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object],
                                            refused: dict[str, str]) -> None:
    """An unknown answer, a unitless delay, an empty or malformed `names`, or a field dns does
    not have is refused naming the field."""
    assert refusal("dns", params) == refused


@pytest.mark.parametrize(("params", "message"), [
    ({"answer": "slow"}, "a slow answer needs a 'delay' above zero"),
    ({"answer": "slow", "delay": "0s"}, "a slow answer needs a 'delay' above zero"),
    ({"answer": "nxdomain", "delay": "1s"}, "'delay' goes with answer: slow, not nxdomain"),
])
def test_delay_goes_with_a_slow_answer(params: dict[str, object], message: str) -> None:
    """A slow answer needs a delay above zero, and no other answer takes one."""
    with pytest.raises(ValidationError, match=message):
        params_of("dns", params)


def test_apply_asks_the_resolver_and_revert_clears_its_step() -> None:
    """Applying hands the resolver the step's id, names, answer and delay, and records the
    names hurt; reverting clears that step's rule and nothing else."""
    resolver = FakeResolver()
    details = apply_and_revert(build("dns", {"answer": "slow", "delay": "1.5s"}, step="dn"),
                               DnsContext(resolver=resolver))
    assert details == {"answer": "slow", "delay": "1.5s", "names": ["echo.lab"]}
    assert resolver.orders == [("set", "dn", None, "slow", 1.5), ("clear", "dn")]


def test_named_names_are_the_ones_hurt() -> None:
    """`names` goes to the resolver as given (lowercased), and its reply is recorded."""
    resolver = FakeResolver()
    details = apply_and_revert(build("dns", {"answer": "nxdomain", "names": ["B.lab", "a.lab"]}),
                               DnsContext(resolver=resolver))
    assert details == {"answer": "nxdomain", "names": ["a.lab", "b.lab"]}
    assert resolver.orders[0] == ("set", "s1", ["b.lab", "a.lab"], "nxdomain", 0.0)


def test_without_the_resolver_it_fails_saying_so() -> None:
    """A run without the lab's resolver cannot apply it: a lab error saying why."""
    with pytest.raises(MechanismError, match="dns needs the lab's resolver"):
        asyncio.run(build("dns", {"answer": "none"}).apply(DnsContext()))


def profile(target: dict[str, Any] | None, hosts: list[str] | None = None) -> str:
    data: dict[str, Any] = {
        "name": "dns", "client": {"command": ["sleep", "1"]},
        "timeline": [{"id": "s1", "when": {"at": "1s"}, "do": {"fault": "dns", "answer": "none"}},
                     {"id": "heal", "when": {"at": "2s"}, "do": {"fault": "restore"}}]}
    if target is not None:
        data["target"] = target
    if hosts is not None:
        data["hosts"] = hosts
    return json.dumps(data)


ECHO = {"builtin": "ws-echo-server", "port": 8765}


@pytest.mark.parametrize("target", [
    {"emulator": {}},
    {"remote": {"host": "api.example.com"}},
    {"remote": {"host": "api.example.com", "address": "host-loopback"}},
])
def test_a_target_known_by_name_gets_the_resolver(target: dict[str, Any]) -> None:
    """An emulator (the service's names), a remote service (its host, pinned or not): the run
    starts the lab's resolver for the step, and nothing else."""
    assert parse_profile(profile(target)).needs == {"dns"}


def test_a_program_target_needs_hosts() -> None:
    """A program target is reached by its address unless the profile names it in `hosts`: a
    dns step is refused saying so, and accepted with `hosts`."""
    with pytest.raises(ProfileError, match=r"timeline\[0\]\.do\.fault: dns acts on the names .*"
                                           r"give the profile 'hosts'"):
        parse_profile(profile(ECHO))
    assert parse_profile(profile(ECHO, ["echo.lab"])).needs == {"dns"}


def test_without_a_target_it_is_refused() -> None:
    """With no target there is no name to answer for: refused, naming the fault."""
    with pytest.raises(ProfileError, match=r"dns answers for the target's names .*'target'"):
        parse_profile(profile(None, ["echo.lab"]))


def test_the_run_holds_it_and_a_restore_reverts_it() -> None:
    """Through the run's FaultRuntime: applied with the run's resolver channel, held by the run
    (`layer: packet`), reverted by a restore."""
    timeline = {s.id: s for s in parse_profile(profile(ECHO, ["echo.lab"])).timeline}
    bus = EventBus(RunClock())
    resolver = FakeResolver()
    failures: list[str] = []

    async def go() -> list[str]:
        runtime = FaultRuntime(FakeLab(), ConnectionTable(), bus, None, None,
                               tuple(timeline.values()), failures.append, resolver)
        await runtime.apply(Due(timeline["s1"], 1.0, "at 1s"))
        held = list(runtime.active)
        await runtime.apply(Due(timeline["heal"], 2.0, "at 2s"))
        return held

    assert asyncio.run(go()) == ["s1"]
    assert failures == []
    applied = next(e.fields for e in bus.events if e.name == "fault.applied")
    assert applied["layer"] == "packet" and applied["names"] == ["echo.lab"]
    assert resolver.orders == [("set", "s1", None, "none", 0.0), ("clear", "s1")]


def test_the_client_looks_names_up_in_files_then_dns_only() -> None:
    """The client's nsswitch.conf keeps the host's other databases and looks host names up in
    /etc/hosts, then DNS: no host resolver daemon (nss-resolve) or mDNS answers past the lab's
    resolver."""
    host = ("passwd:         files systemd\n"
            "hosts:          files resolve [!UNAVAIL=return] mdns4_minimal dns myhostname\n"
            "networks:       files\n")
    assert files_then_dns(host) == ("passwd:         files systemd\nnetworks:       files\n"
                                    "hosts: files dns\n")
