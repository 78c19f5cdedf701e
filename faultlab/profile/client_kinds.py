"""faultlab's own client kinds (`command`, `builtin`, `browser`), registered as any plugin's
(pyproject.toml's `faultlab.clients`), and the registry of every installed kind."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, ClassVar

from faultlab.browser.spec import BrowserPage
from faultlab.clients.kind import GROUP, ClientKind, Declared
from faultlab.lab.process import BROWSER_DIR_PREFIX
from faultlab.model import one_of
from faultlab.peers import BUILTINS, builtin_command
from faultlab.plugins import PluginError, load
from faultlab.vocabulary import browser as browser_events
from faultlab.vocabulary.base import Record
from faultlab.vocabulary.registry import declared_in, register


class Command(ClientKind):
    """A command line of the user's own (`command: [argv...]`)."""

    name: ClassVar[str] = "command"
    setting: ClassVar[Any] = list[str]

    def misfit(self, setting: Any, client: Declared) -> str | None:
        return None if setting else "'command' needs at least one word"

    def argv(self, setting: Any, client: Declared, folder: Path) -> list[str]:
        return [*setting, *client.args]


class Builtin(ClientKind):
    """One of faultlab's programs (`builtin: NAME`, faultlab.peers.BUILTINS)."""

    name: ClassVar[str] = "builtin"
    setting: ClassVar[Any] = str

    def misfit(self, setting: Any, client: Declared) -> str | None:
        try:
            one_of("builtin", setting, BUILTINS)
        except ValueError as exc:
            return str(exc)
        return None

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": sorted(BUILTINS)}

    def argv(self, setting: Any, client: Declared, folder: Path) -> list[str]:
        return [*builtin_command(setting, in_image=client.image is not None), *client.args]


class Browser(ClientKind):
    """A web page in the lab's headless Chromium (`browser: {...}`, faultlab.browser.spec)."""

    name: ClassVar[str] = "browser"
    setting: ClassVar[Any] = BrowserPage
    pid_folders: ClassVar[tuple[str, ...]] = (BROWSER_DIR_PREFIX,)

    def records(self) -> tuple[type[Record], ...]:
        return tuple(declared_in(vars(browser_events).values()))

    def misfit(self, setting: Any, client: Declared) -> str | None:
        if client.image is not None or client.args:
            return ("a 'browser' client runs faultlab's Chromium on the host: it takes no "
                    "'image' or 'args'")
        return None

    def argv(self, setting: Any, client: Declared, folder: Path) -> list[str]:
        page: BrowserPage = setting
        return [sys.executable, "-m", "faultlab.browser", page.resolved(folder).model_dump_json()]


COMMAND, BUILTIN, BROWSER = Command(), Builtin(), Browser()


@functools.cache
def client_kinds() -> dict[str, ClientKind]:
    """Every installed client kind by its key: the `faultlab.clients` group's, then those the
    scenario packs bring; the records each brings join the vocabulary as it loads."""
    from faultlab.scenarios import packs

    found: dict[str, ClientKind] = dict(load(GROUP, ClientKind))
    for pack in packs().values():
        for kind in pack.kinds:
            if found.setdefault(kind.name, kind) is not kind:
                raise PluginError(f"scenario pack {pack.name} brings a client kind named "
                                  f"{kind.name!r}, which is already installed")
    for kind in found.values():
        register(*kind.records())
    return found
