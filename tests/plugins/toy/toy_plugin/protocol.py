"""The toy API's protocol: JSON objects whose `toy` field is their kind (`hello`, `say`;
`ready`, `reply`, `done`), on the path `/echo` of `echo.toy.test`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from faultlab.protocols.base import Protocol, Service


class ToyProtocol(Protocol):
    name: ClassVar[str] = "toy"
    service: ClassVar[Service] = Service(
        name="toy", hosts=("echo.toy.test",), certificate_names=("echo.toy.test",),
        base_url_variables=("TOY_BASE_URL",))
    credential_params: ClassVar[tuple[str, ...]] = ()
    credential_headers: ClassVar[tuple[str, ...]] = ("x-toy-key",)
    dialects: ClassVar[tuple[str, ...]] = ("echo",)
    secret_env: ClassVar[tuple[str, ...]] = ("TOY_KEY",)
    reply_kinds: ClassVar[tuple[str, ...]] = ("reply",)

    def recognises(self, message: Mapping[str, Any]) -> bool:
        return isinstance(message.get("toy"), str)

    def kind_of(self, message: Mapping[str, Any]) -> str:
        return str(message.get("toy", ""))

    def kind_matches(self, actual: str, wanted: str) -> bool:
        return actual == wanted

    def normalise(self, data: Any) -> Any:
        return data

    def describe(self, content: bytes | str) -> dict[str, Any]:
        try:
            message = json.loads(content)
        except ValueError:
            return {}
        return {"kind": message["toy"]} if isinstance(message, dict) and \
            self.recognises(message) else {}

    def category_of(self, kind: str) -> str:
        return {"hello": "setup", "ready": "setup", "done": "turn_complete"}.get(kind, "content")

    def dialect_of(self, path: str) -> str | None:
        return "echo" if path.split("?", 1)[0] == "/echo" else None


TOY = ToyProtocol()
