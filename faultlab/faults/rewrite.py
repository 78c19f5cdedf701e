"""rewrite: the proxy changes fields of JSON messages before relaying them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from faultlab.faults.app import AppFault, WebSocketParams, heading
from faultlab.faults.base import register
from faultlab.faults.flows import Direction
from faultlab.vocabulary.lab import ProxyRewrote

if TYPE_CHECKING:
    from mitmproxy import http, websocket

    from faultlab.faults.app import ProxyView


class RewriteParams(WebSocketParams):
    """`set`: fields by dotted path (`setup.sessionResumption.transparent`) and their new values
    (missing mappings on the way are made); `direction`; `kind`: only messages of this kind in
    the run's protocol; `count`: only the next N matching messages (all while applied when absent). With a
    frame trigger, `forward: before` rewrites the very message that triggered the step."""

    fields: dict[str, Any] = Field(alias="set", min_length=1)
    """Fields to set, by dotted path in the JSON (`setup.sessionResumption.transparent`, list
    indexes too), and their new values; missing mappings on the way are made."""
    direction: Direction = "both"
    """Which way's messages are rewritten: `both`, `to_server` or `to_client`."""
    kind: str | None = None
    """Only messages of this kind in the run's protocol (`setup`); absent: every JSON object
    message."""
    count: int | None = Field(default=None, ge=1)
    """Only the next N matching messages, then the rest pass; absent: every one while the fault is
    applied."""


def set_at(data: dict[str, Any], path: str, value: Any) -> None:
    """Set the value at a dotted path, list indexes included (`toolCall.functionCalls.0.name`);
    missing mappings on the way are made."""
    node: Any = data
    *parents, last = path.split(".")
    for part in parents:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
            continue
        child = node.get(part) if isinstance(node, dict) else None
        if not isinstance(child, dict | list):
            child = node[part] = {}
        node = child
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
    else:
        node[last] = value


@register
class Rewrite(AppFault[RewriteParams]):
    """Rewrite matching JSON messages going the chosen way (others pass untouched)."""

    name: ClassVar[str] = "rewrite"
    Params = RewriteParams

    def engage(self, proxy: ProxyView) -> dict[str, Any]:
        self.rewritten = 0
        return {"direction": self.params.direction, "kind": self.params.kind,
                "fields": sorted(self.params.fields)}

    def on_message(self, proxy: ProxyView, flow: http.HTTPFlow,
                   message: websocket.WebSocketMessage, kind: str) -> None:
        p = self.params
        if not heading(p.direction, message.from_client) or (
                p.count is not None and self.rewritten >= p.count):
            return
        if p.kind and not proxy.protocol.kind_matches(kind, p.kind):
            return
        try:
            data = json.loads(message.content)
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        for path, value in p.fields.items():
            set_at(data, path, value)
        message.content = json.dumps(data, separators=(",", ":")).encode()
        self.rewritten += 1
        proxy.events.announce(ProxyRewrote(self.step_id, kind, sorted(p.fields)))
