"""rewrite: its parameters, and how it changes dotted paths of JSON messages before they are
relayed: only the chosen kind and direction, only `count` times."""

from __future__ import annotations

import json
import time

import pytest

from faultlab.faults.rewrite import Rewrite
from faultlab.frames import FrameMatch
from faultlab.proxy.control import Arm, ArmedStep

from .conftest import ENGAGE_MS, assert_lives_in_the_proxy, assert_run_side, params_of, refusal, slow_engage
from .fake_proxy import Proxy

SETUP = {"setup": {"model": "m", "sessionResumption": {}}}
TRANSPARENT = {"setup.sessionResumption.transparent": True}
TOOL_CALL = {"toolCall": {"functionCalls": [{"id": "c1", "name": "book", "args": {}}]}}


def test_set_is_required_and_the_rest_default() -> None:
    """`set` names the fields to change; direction defaults to both, kind and count to any."""
    assert params_of("rewrite", {"set": TRANSPARENT}).model_dump() == {
        "connection": None, "fields": TRANSPARENT, "direction": "both", "kind": None,
        "count": None}


@pytest.mark.parametrize(("params", "refused"), [
    ({}, {"set": "missing"}),
    ({"set": {}}, {"set": "too_short"}),
    ({"set": ["a.b"]}, {"set": "dict_type"}),
    ({"set": TRANSPARENT, "count": 0}, {"count": "greater_than_equal"}),
    ({"set": TRANSPARENT, "direction": "sideways"}, {"direction": "literal_error"}),
    # `set` is the field's only spelling.
    ({"fields": TRANSPARENT}, {"set": "missing", "fields": "extra_forbidden"}),
])
def test_bad_parameters_are_refused_by_name(params: dict[str, object],
                                            refused: dict[str, str]) -> None:
    """A missing or empty `set`, a count below one, a direction out of its choices or an unknown
    field is refused naming the field."""
    assert refusal("rewrite", params) == refused


def test_it_sets_the_dotted_path_before_relaying(proxy: Proxy) -> None:
    """The message is relayed with the field set at its dotted path (missing mappings made, the
    rest kept), as compact JSON, and the proxy records the rewrite."""
    flow = proxy.open_flow()
    reply = proxy.apply("p1", "rewrite", {"set": {**TRANSPARENT, "setup.config.temperature": 0.5},
                                          "kind": "setup"})
    assert reply.details == {"direction": "both", "kind": "setup",
                             "fields": ["setup.config.temperature",
                                        "setup.sessionResumption.transparent"]}
    message = proxy.send(flow, SETUP, from_client=True)
    assert message.dropped is False
    assert message.content == (b'{"setup":{"model":"m","sessionResumption":{"transparent":true},'
                               b'"config":{"temperature":0.5}}}')
    assert proxy.events() == [{"event": "proxy.rewrote", "step": "p1", "kind": "setup",
                               "fields": ["setup.config.temperature",
                                          "setup.sessionResumption.transparent"]}]


def test_only_the_chosen_kind_and_direction(proxy: Proxy) -> None:
    """With `kind` and `direction: to_server`, other kinds and the server's messages pass
    unchanged."""
    flow = proxy.open_flow()
    proxy.apply("p1", "rewrite", {"set": {"x": 1}, "kind": "setup", "direction": "to_server"})
    from_server = proxy.send(flow, SETUP, from_client=False)
    other_kind = proxy.send(flow, TOOL_CALL, from_client=True)
    assert json.loads(from_server.content) == SETUP
    assert json.loads(other_kind.content) == TOOL_CALL
    assert json.loads(proxy.send(flow, SETUP, from_client=True).content) == {**SETUP, "x": 1}


def test_count_rewrites_only_the_next_n(proxy: Proxy) -> None:
    """`count: 1` rewrites the next matching message only; non-matching ones do not use it up."""
    flow = proxy.open_flow()
    proxy.apply("p1", "rewrite", {"set": {"x": 1}, "kind": "setup", "count": 1})
    skipped = proxy.send(flow, TOOL_CALL, from_client=True)
    first = proxy.send(flow, SETUP, from_client=True)
    second = proxy.send(flow, SETUP, from_client=True)
    assert json.loads(skipped.content) == TOOL_CALL
    assert json.loads(first.content)["x"] == 1
    assert json.loads(second.content) == SETUP
    assert len(proxy.events()) == 1


def test_what_is_not_a_json_object_passes_unchanged(proxy: Proxy) -> None:
    """Text that is not JSON, and JSON that is not an object, are relayed as they came and do not
    use up the count."""
    flow = proxy.open_flow()
    proxy.apply("p1", "rewrite", {"set": {"x": 1}, "count": 1})
    assert proxy.send(flow, b"hello", from_client=True).content == b"hello"
    assert proxy.send(flow, b"[1, 2]", from_client=True).content == b"[1, 2]"
    assert json.loads(proxy.send(flow, b"{}", from_client=True).content) == {"x": 1}


def test_a_list_index_on_the_path_sets_that_item(proxy: Proxy) -> None:
    """`toolCall.functionCalls.0.name` renames the first call and keeps the list, as a frame match
    reads the same path."""
    flow = proxy.open_flow()
    proxy.apply("p1", "rewrite", {"set": {"toolCall.functionCalls.0.name": "cancel"}})
    message = proxy.send(flow, TOOL_CALL, from_client=False)
    assert json.loads(message.content) == {
        "toolCall": {"functionCalls": [{"id": "c1", "name": "cancel", "args": {}}]}}


def test_revert_stops_rewriting(proxy: Proxy) -> None:
    """After revert messages pass unchanged."""
    flow = proxy.open_flow()
    proxy.apply("p1", "rewrite", {"set": {"x": 1}})
    assert proxy.revert(None).reverted == ["p1"]
    assert proxy.send(flow, b"{}", from_client=True).content == b"{}"


def test_an_armed_rewrite_changes_the_message_that_triggered_it(
        proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """Armed on the client's second setup with `forward: before` (and no delay), the rewrite
    engages inside the hook and changes that setup itself, not the first; `fault.applied` is in
    the proxy's events before the rewrite, its `applied_in_ms` the time the rewrite took to engage
    (made 20 ms here)."""
    slow_engage(monkeypatch, Rewrite)
    flow = proxy.open_flow()
    match = FrameMatch.model_validate({"from": "client", "kind": "setup", "nth": 2,
                                       "forward": "before"})
    assert proxy.ask(Arm(steps=[ArmedStep(step="p1", fault="rewrite",
                                          params={"set": TRANSPARENT, "count": 1},
                                          match=match, after_s=0)])).ok
    started = time.perf_counter()
    first = proxy.send(flow, SETUP, from_client=True)
    second = proxy.send(flow, SETUP, from_client=True)
    sending_ms = (time.perf_counter() - started) * 1000
    assert json.loads(first.content) == SETUP
    assert json.loads(second.content)["setup"]["sessionResumption"] == {"transparent": True}
    applied, rewrote = proxy.events()
    assert ENGAGE_MS <= applied.pop("applied_in_ms") <= sending_ms
    assert applied == {"event": "fault.applied", "step": "p1", "fault": "rewrite", "layer": "app",
                       "trigger": "on frame setup", "direction": "both", "kind": None,
                       "fields": ["setup.sessionResumption.transparent"]}
    assert rewrote["event"] == "proxy.rewrote"


def test_the_run_asks_the_proxy() -> None:
    """The run's side of rewrite is a request to the proxy, and so is its revert."""
    assert_run_side("rewrite", {"set": TRANSPARENT, "kind": "setup"})


def test_it_lives_in_the_proxy_and_a_restore_reverts_it(proxy: Proxy) -> None:
    """Without a target (so with no proxy) a profile is refused; the run starts the proxy for it,
    records it at the app layer, and a restore reverts it: messages pass unchanged again."""
    assert_lives_in_the_proxy(proxy, "rewrite", {"set": TRANSPARENT}, restore_reverts=True)
    (flow,) = proxy.state.flows
    assert json.loads(proxy.send(flow, SETUP, from_client=True).content) == SETUP
