"""drop_control: its parameters, and exactly which pings and pongs it stops in each direction."""

from __future__ import annotations

import pytest
import wsproto.events

from .conftest import assert_lives_in_the_proxy, assert_run_side, params_of, refusal
from .fake_proxy import Proxy

PING, PONG = wsproto.events.Ping(b"p"), wsproto.events.Pong(b"p")


def test_defaults_drop_pongs_both_ways() -> None:
    """With no parameters drop_control stops pongs, both ways."""
    assert params_of("drop_control").model_dump() == {"connection": None, "frames": "pongs",
                                                      "direction": "both"}


@pytest.mark.parametrize(("params", "refused"), [
    ({"frames": "ping"}, {"frames": "literal_error"}),
    ({"frames": "close"}, {"frames": "literal_error"}),
    ({"direction": "out"}, {"direction": "literal_error"}),
    ({"kind": "ping"}, {"kind": "extra_forbidden"}),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object],
                                            refused: dict[str, str]) -> None:
    """Frames or a direction out of their choices, or an unknown field, are refused by name."""
    assert refusal("drop_control", params) == refused


# (frames, direction) -> whether (ping to client, pong to client, ping to server, pong to server)
# may pass.
ALLOWED = [
    ("pongs", "both", (True, False, True, False)),
    ("pings", "both", (False, True, False, True)),
    ("both", "both", (False, False, False, False)),
    ("pings", "to_client", (False, True, True, True)),
    ("pongs", "to_server", (True, True, True, False)),
    ("both", "to_server", (True, True, False, False)),
]


@pytest.mark.parametrize(("frames", "direction", "allowed"), ALLOWED)
def test_it_stops_exactly_the_chosen_frames(proxy: Proxy, frames: str, direction: str,
                                            allowed: tuple[bool, bool, bool, bool]) -> None:
    """Only the chosen control frames going the chosen way are refused; the rest pass."""
    flow = proxy.open_flow()
    reply = proxy.apply("keep", "drop_control", {"frames": frames, "direction": direction})
    assert reply.details == {"frames": frames, "direction": direction}
    assert tuple(proxy.state.allow_control(flow, to_client, frame)
                 for to_client in (True, False) for frame in (PING, PONG)) == allowed


def test_data_keeps_flowing_and_revert_lets_frames_pass(proxy: Proxy) -> None:
    """Data messages are untouched; after revert every control frame passes again."""
    flow = proxy.open_flow()
    proxy.apply("keep", "drop_control", {"frames": "both"})
    assert proxy.send(flow, b"data", from_client=True).dropped is False
    assert proxy.state.holds(flow, True) is False
    assert proxy.revert(["keep"]).reverted == ["keep"]
    assert proxy.state.allow_control(flow, True, PING) is True
    assert proxy.state.allow_control(flow, False, PONG) is True


def test_other_connections_keep_their_frames(proxy: Proxy) -> None:
    """`connection: 1` stops the first connection's pongs; the second's pass."""
    first, second = proxy.open_flow(), proxy.open_flow()
    proxy.apply("keep", "drop_control", {"connection": 1})
    assert proxy.state.allow_control(first, True, PONG) is False
    assert proxy.state.allow_control(second, True, PONG) is True


def test_the_run_asks_the_proxy() -> None:
    """The run's side of drop_control is a request to the proxy, and so is its revert."""
    assert_run_side("drop_control", {"frames": "pings"})


def test_it_lives_in_the_proxy_and_a_restore_reverts_it(proxy: Proxy) -> None:
    """Without a target (so with no proxy) a profile is refused; the run starts the proxy for it,
    records it at the app layer, and a restore reverts it: pongs pass again."""
    assert_lives_in_the_proxy(proxy, "drop_control", restore_reverts=True)
    (flow,) = proxy.state.flows
    assert proxy.state.allow_control(flow, True, PONG) is True
