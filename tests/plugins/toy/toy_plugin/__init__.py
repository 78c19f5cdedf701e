"""A toy plugin: a third realtime API ("toy", a JSON echo protocol: `toy_plugin.protocol`,
served by the emulator through `toy_plugin.emulated` with the personality `toy-1`), a client
kind (a profile's `client: {toy: {say: ...}}`, run as `python -m toy_plugin.client`), and a
scenario pack that brings clients (the builtin `toy-said` and the kind `toy-pack`).

Its entry points (the dist-info folder beside this package, as `pip install` would leave it):

    [faultlab.apis]
    toy = toy_plugin:API

    [faultlab.clients]
    toy = toy_plugin:KIND

    [faultlab.scenarios]
    toy = toy_plugin:PACK

This module stays light (every registry of APIs or client kinds imports it): the API's parts are
named by reference, imported when the emulator or a run first uses them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from faultlab.clients.kind import ClientKind, Declared
from faultlab.model import Model
from faultlab.protocols.plugin import ApiPlugin
from faultlab.scenarios.pack import ScenarioPack

if TYPE_CHECKING:
    from faultlab.vocabulary import Record

API = ApiPlugin(
    name="toy", protocol_ref="toy_plugin.protocol:TOY",
    emulated_ref="toy_plugin.emulated:TOY_API",
    personalities_ref="toy_plugin.emulated:PERSONALITIES", default_personality="toy-1",
    builtins={"toy-echo": "toy_plugin.client"},
)


class Say(Model):
    """What the toy client says: `say` once, and the model it asks for."""

    say: str
    model: str = "toy-1"


class ToyClient(ClientKind):
    """`client: {toy: {say: TEXT}}`: the toy client, saying TEXT to the toy API."""

    name: ClassVar[str] = "toy"
    setting: ClassVar[Any] = Say

    def records(self) -> tuple[type[Record], ...]:
        from toy_plugin.events import RECORDS

        return RECORDS

    def argv(self, setting: Any, client: Declared, folder: Path) -> list[str]:
        return [sys.executable, "-m", "toy_plugin.client", "--model", setting.model,
                *client.args]

    def env(self, setting: Any, run: Any) -> dict[str, str]:
        return {"TOY_SAY": setting.say}


KIND = ToyClient()


class PackToyClient(ToyClient):
    """The same client under the key a scenario pack brings it by (`client: {toy-pack: ...}`)."""

    name: ClassVar[str] = "toy-pack"


# A scenario pack that brings clients: a builtin program and a client kind.
PACK = ScenarioPack("toy", clients={"toy-said": "toy_plugin.client"}, kinds=(PackToyClient(),))
