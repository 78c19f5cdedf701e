"""Fakes the faults are tested with, none of which needs root: a lab whose namespaces record what
would run in them, a proxy channel, a microphone; and the proxy's own state (fake_proxy.py) as a
fixture."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self, cast

import pytest
from mitmproxy.addons.proxyserver import Proxyserver
from pydantic import ValidationError

from faultlab.connections import ConnectionTable
from faultlab.errors import MechanismError, ProfileError
from faultlab.events import EventBus, EventWriter, RunClock
from faultlab.faults import FAULTS, Fault, FaultParams
from faultlab.faults.app import AppFault, ProxyView
from faultlab.injector import FaultRuntime
from faultlab.lab.base import Lab, LabSpec, Role
from faultlab.lab.namespace import Namespace
from faultlab.lab.netfilter import commit
from faultlab.mic import VirtualMic
from faultlab.profile import Profile, parse_profile
from faultlab.proxy.control import ProxyControl
from faultlab.proxy.state import ProxyState
from faultlab.timeline import Due

from .fake_proxy import FakeServer, Proxy

CLIENT = "10.0.1.2"
SERVER = "10.0.2.2"
SERVER_PORT = 443


# The run's side: a lab, a proxy channel, a microphone.


class FakeNamespace(Namespace):
    """A place that records what would run in it instead of entering a network namespace."""

    def __init__(self, role: str) -> None:
        # No worker thread: nothing ever runs here.
        self.role = role
        self.path = Path("/nonexistent/faultlab-tests") / role
        self.calls: list[tuple[Callable[..., Any], tuple[object, ...]]] = []
        self.links: list[tuple[str, bool]] = []

    async def run[T](self, fn: Callable[..., T], *args: object) -> T:
        self.calls.append((fn, args))
        return cast(T, None)

    async def set_link_state(self, ifname: str, up: bool) -> None:
        self.links.append((ifname, up))

    def close(self) -> None:
        """Nothing to stop."""

    @property
    def batches(self) -> list[list[str]]:
        """The iptables-restore batches of the filter table run here, in order; fails on
        anything else."""
        out = []
        for fn, args in self.calls:
            assert fn is commit, f"{fn!r} ran in {self.role}, not an iptables-restore batch"
            batch, table = args
            assert table == "filter", f"a batch of the {table} table ran in {self.role}"
            out.append(list(cast(list[str], batch)))
        return out


class FakeLab(Lab):
    """Three fake places with the interface names of the netns lab."""

    backend: ClassVar[str] = "fake"
    client_link: ClassVar[str] = "c0"
    server_link: ClassVar[str] = "s0"
    client_iface: ClassVar[str] = "eth0"

    def __init__(self) -> None:
        self.places = {role: FakeNamespace(role) for role in ("client", "router", "server")}

    @classmethod
    def build(cls, spec: LabSpec) -> Self:
        return cls()

    def place(self, role: Role) -> Namespace:
        return self.places[role]

    def ns(self, role: Role) -> FakeNamespace:
        return self.places[role]

    @property
    def scratch(self) -> Path:
        raise NotImplementedError("a fault test keeps no files in the lab")

    @property
    def client_address(self) -> IPv4Address:
        return IPv4Address(CLIENT)

    @property
    def server_address(self) -> IPv4Address:
        return IPv4Address(SERVER)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        return None


class FakeMic:
    """The lab's microphone, recording each stall asked of it (seconds)."""

    def __init__(self) -> None:
        self.stalls: list[float] = []

    def stall(self, seconds: float) -> None:
        self.stalls.append(seconds)


@dataclass
class FakeProxyChannel:
    """The run's control channel to a proxy that holds the step ids in `held`."""

    held: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=lambda: {"engaged": True})
    applied: list[tuple[str, str, FaultParams]] = field(default_factory=list)
    reverts: list[list[str] | None] = field(default_factory=list)

    async def apply(self, step: str, fault: str, params: FaultParams) -> dict[str, Any]:
        self.applied.append((step, fault, params))
        self.held.append(step)
        return dict(self.details)

    async def revert(self, steps: list[str] | None) -> list[str]:
        self.reverts.append(None if steps is None else list(steps))
        ids = [s for s in reversed(self.held) if steps is None or s in steps]
        self.held = [s for s in self.held if s not in ids]
        return ids


@dataclass
class FakeContext:
    """A FaultContext over the fake lab; `revert` records what it is asked and answers with the
    ids of `held` it names (all when None)."""

    lab: FakeLab = field(default_factory=FakeLab)
    connections: ConnectionTable = field(default_factory=lambda: ConnectionTable())
    proxy: FakeProxyChannel | None = None
    mic: VirtualMic | None = None
    held: list[str] = field(default_factory=list)
    reverts: list[list[str] | None] = field(default_factory=list)

    async def revert(self, step_ids: Sequence[str] | None) -> list[str]:
        self.reverts.append(None if step_ids is None else list(step_ids))
        return [s for s in reversed(self.held) if step_ids is None or s in step_ids]


def with_connections(ctx: FakeContext, *client_ports: int) -> FakeContext:
    """`ctx` after the capture saw one SYN from the client per port, to the server's 443."""
    for i, port in enumerate(client_ports):
        ctx.connections.observe_syn(CLIENT, port, SERVER, SERVER_PORT, t=0.1 * (i + 1))
    return ctx


def params_of(name: str, params: dict[str, Any] | None = None) -> FaultParams:
    """Fault `name`'s parameters as its own model validates them."""
    return FAULTS[name].Params.model_validate(params or {})


def build(name: str, params: dict[str, Any] | None = None, step: str = "s1") -> Fault[Any]:
    """Fault `name` for step `step` with `params` as a profile writes them."""
    return FAULTS[name](step, params_of(name, params))


def refusal(name: str, params: dict[str, Any]) -> dict[str, str]:
    """The fields fault `name`'s model refuses in `params`, each with its first error's type."""
    with pytest.raises(ValidationError) as caught:
        params_of(name, params)
    out: dict[str, str] = {}
    for error in caught.value.errors():
        out.setdefault(str(error["loc"][0]), error["type"])
    return out


def apply_and_revert(fault: Fault[Any], ctx: FakeContext) -> dict[str, Any]:
    """Apply then revert `fault`; the details of its `fault.applied` event."""
    async def go() -> dict[str, Any]:
        details = await fault.apply(ctx)
        await fault.revert(ctx)
        return details

    return asyncio.run(go())


# How long `slow_engage` makes a fault take to engage.
ENGAGE_MS = 20.0


def slow_engage(monkeypatch: pytest.MonkeyPatch, fault: type[AppFault[Any]]) -> None:
    """Make app fault `fault` take ENGAGE_MS (at least) to engage in the proxy."""
    engage = fault.engage

    def slowly(self: AppFault[Any], view: ProxyView) -> dict[str, Any]:
        time.sleep(ENGAGE_MS / 1000)
        return engage(self, view)

    monkeypatch.setattr(fault, "engage", slowly)


def assert_run_side(name: str, params: dict[str, Any]) -> None:
    """The run's side of app fault `name`: apply asks the proxy to engage it (step id, name,
    parameters) and returns the proxy's details, revert asks the proxy to disengage that step, and
    without a proxy applying fails."""
    fault = build(name, params, step="s1")
    channel = FakeProxyChannel(details={"from": "proxy"})
    assert apply_and_revert(fault, FakeContext(proxy=channel)) == {"from": "proxy"}
    assert channel.applied == [("s1", name, fault.params)]
    assert channel.reverts == [["s1"]]
    assert fault.held_by_run is False
    with pytest.raises(MechanismError, match=f"{name} needs the proxy"):
        asyncio.run(fault.apply(FakeContext()))


# The proxy's side: its state (tests/faults/fake_proxy.py) in a test's own events file.


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Proxy]:
    # A path of the test's own: EventWriter(None) would write to $FAULTLAB_EVENTS when it is set.
    path = tmp_path / "proxy-events.jsonl"
    path.touch()
    server = FakeServer()
    writer = EventWriter(path)
    yield Proxy(ProxyState(server=cast(Proxyserver, server), events=writer), server, path)
    writer.close()


# A fault's declarations, through what reads them: `validate` (needs), and the run's FaultRuntime
# (layer, and whether a restore reverts it), its proxy channel the real one to a Proxy's state.


def profile_with(fault: str, params: dict[str, Any] | None = None, *, target: bool = True,
                 mic: bool = True, before: Sequence[dict[str, Any]] = ()) -> str:
    """A profile whose step `s1` applies `fault` at 2s, after the steps `before` (at 1s), and
    whose step `heal` restores everything at 3s; with a target (in front of which a proxy can
    stand) and a microphone unless told otherwise. JSON, which is YAML."""
    steps = [{"id": step["id"], "when": {"at": "1s"}, "do": step["do"]} for step in before]
    steps += [{"id": "s1", "when": {"at": "2s"}, "do": {"fault": fault, **(params or {})}},
              {"id": "heal", "when": {"at": "3s"}, "do": {"fault": "restore"}}]
    data: dict[str, Any] = {"name": "declarations", "client": {"command": ["sleep", "1"]},
                            "timeline": steps}
    if target:
        data["target"] = {"builtin": "ws-echo-server", "port": 8765}
    if mic:
        data["mic"] = {"utterances": ["hello"]}
    return json.dumps(data)


def validate(fault: str, params: dict[str, Any] | None = None, *, target: bool = True,
             mic: bool = True, before: Sequence[dict[str, Any]] = ()) -> Profile:
    """`profile_with(...)` as `faultlab validate` reads it (a refusal raises ProfileError)."""
    return parse_profile(profile_with(fault, params, target=target, mic=mic, before=before))


@dataclass
class RunRecord:
    """What the run's FaultRuntime did with a profile's steps."""

    events: list[tuple[str, dict[str, Any]]]
    # After each step, in order: the step ids the run itself held, and those the proxy held.
    held: list[list[str]]
    held_by_proxy: list[list[str]]
    failures: list[str]

    def applied(self, step: str) -> dict[str, Any]:
        """The fields of step `step`'s `fault.applied` event."""
        (fields,) = [f for name, f in self.events if name == "fault.applied" and f["step"] == step]
        return fields

    def reverted(self) -> list[dict[str, Any]]:
        """The fields of every `fault.reverted` event, in order."""
        return [f for name, f in self.events if name == "fault.reverted"]


def run_steps(profile: str, *steps: str, proxy: Proxy | None = None, lab: FakeLab | None = None,
              mic: FakeMic | None = None) -> RunRecord:
    """Apply `steps` of `profile`, in order, as a run does: through its FaultRuntime on the fake
    lab and microphone, with the real control channel (ProxyControl) to `proxy`'s state over a
    Unix socket when there is a proxy."""
    timeline = {s.id: s for s in parse_profile(profile).timeline}
    bus = EventBus(RunClock())
    failures: list[str] = []
    held: list[list[str]] = []
    held_by_proxy: list[list[str]] = []

    async def apply(control: ProxyControl | None) -> None:
        runtime = FaultRuntime(lab or FakeLab(), ConnectionTable(), bus, control,
                               cast(VirtualMic, mic or FakeMic()), tuple(timeline.values()),
                               failures.append)
        for step in steps:
            await runtime.apply(Due(timeline[step], 1.0, "at 1s"))
            held.append(list(runtime.active))
            held_by_proxy.append([] if proxy is None else list(proxy.state.active))

    async def go() -> None:
        if proxy is None:
            await apply(None)
            return
        # A short directory of its own: a Unix socket's path has a small limit.
        with tempfile.TemporaryDirectory(prefix="fl-") as scratch:
            path = Path(scratch) / "control.sock"
            server = await proxy.state.serve_control(path)
            control = ProxyControl(path)
            try:
                await control.connect(timeout_s=5)
                await apply(control)
            finally:
                await control.close()
                server.close()
                await server.wait_closed()

    asyncio.run(go())
    return RunRecord([(e.name, dict(e.fields)) for e in bus.events], held, held_by_proxy,
                     failures)


def assert_lives_in_the_proxy(proxy: Proxy, name: str, params: dict[str, Any] | None = None, *,
                              restore_reverts: bool,
                              before: Sequence[dict[str, Any]] = ()) -> RunRecord:
    """App fault `name` as `validate` and the run see it: a profile without a target (so with no
    proxy) is refused, naming the fault; with a target the run starts the proxy, and nothing
    else, for it. Applied by the run (after the steps `before`, on a live flow) it is engaged and
    held in the proxy, not by the run, its `fault.applied` says `layer: app`; a restore then
    reverts it there, or (`restore_reverts=False`: it has nothing to undo) finds nothing of it."""
    with pytest.raises(ProfileError, match=rf"do\.fault: {name} needs the proxy"):
        validate(name, params, target=False, before=before)
    assert validate(name, params, mic=False, before=before).needs == {"proxy"}
    proxy.open_flow()
    ids = [step["id"] for step in before]
    run = run_steps(profile_with(name, params, before=before), *ids, "s1", "heal", proxy=proxy)
    assert run.failures == []
    assert run.applied("s1")["layer"] == "app"
    assert run.held == [[]] * (len(ids) + 2), "the run held a fault that lives in the proxy"
    assert ("s1" in run.held_by_proxy[len(ids)]) is restore_reverts
    assert ("s1" in run.applied("heal")["reverted"]) is restore_reverts
    assert run.held_by_proxy[-1] == []
    return run


def assert_a_packet_fault_the_run_holds(name: str, params: dict[str, Any] | None = None
                                        ) -> tuple[RunRecord, FakeLab]:
    """Packet fault `name` as `validate` and the run see it: a profile with neither a target nor
    a microphone is accepted and the run starts nothing for it; applied by the run its
    `fault.applied` says `layer: packet` and the run holds it, so a restore reverts it. The run's
    record and its lab."""
    assert validate(name, params, target=False, mic=False).needs == frozenset()
    lab = FakeLab()
    run = run_steps(profile_with(name, params, target=False, mic=False), "s1", "heal", lab=lab)
    assert run.failures == []
    assert run.applied("s1")["layer"] == "packet"
    assert run.held == [["s1"], []]
    assert run.applied("heal")["reverted"] == ["s1"]
    assert run.reverted() == [{"step": "s1", "fault": name}]
    return run, lab
