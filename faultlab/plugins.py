"""What plugs into faultlab, found through entry points: realtime APIs (`faultlab.apis`), client
kinds (`faultlab.clients`) and scenario packs (`faultlab.scenarios`). Each entry point names one
object (`module:attribute`) that brings all of its parts; a plugin is a pip package whose
pyproject.toml names it under the group, as faultlab's own pyproject.toml names its built-ins.

faultlab's built-ins are loaded through the same path (an `EntryPoint` each, `BUILTINS`) before
the installed group's, so that an install whose metadata predates a group (an editable install of
an older checkout) still has them; an installed entry point equal to a built-in is the built-in.
Each registry reads its group once, when first asked (`faultlab.protocols.apis`,
`faultlab.profile.client_kinds.client_kinds`, `faultlab.scenarios.packs`), and an object's module
is imported only then: importing faultlab stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from faultlab.errors import FaultlabError


class PluginError(FaultlabError):
    """A plugin cannot be loaded, is not what its group holds, or is named twice."""


# faultlab's own, as its pyproject.toml declares them (tests/plugins/test_toy.py holds them equal).
BUILTINS: dict[str, tuple[str, ...]] = {
    "faultlab.apis": ("gemini = faultlab.protocols.gemini:API",
                      "openai = faultlab.protocols.openai:API"),
    "faultlab.clients": ("command = faultlab.profile.client_kinds:COMMAND",
                         "builtin = faultlab.profile.client_kinds:BUILTIN",
                         "browser = faultlab.profile.client_kinds:BROWSER"),
    "faultlab.scenarios": ("booking = faultlab.scenarios.booking:PACK",),
}


def _points(group: str) -> list[EntryPoint]:
    own = [EntryPoint(name.strip(), value.strip(), group)
           for name, value in (line.split("=") for line in BUILTINS.get(group, ()))]
    values = {p.value for p in own}
    return own + [p for p in entry_points(group=group) if p.value not in values]


def load(group: str, what: type[Any], noun: str = "", error: type[FaultlabError] = PluginError,
         ) -> dict[str, Any]:
    """Every object of `group` by its name, each an instance of `what`, imported now (the
    registries keep what they load); `error` names the entry point that fails, a `noun` plugin
    (the group's name by default)."""
    noun = noun or f"{group} plugin"
    found: dict[str, Any] = {}
    for point in _points(group):
        try:
            plugin = point.load()
        except Exception as exc:  # a broken plugin is named, not a traceback
            raise error(f"{noun} {point.name} ({point.value}) cannot be loaded: "
                        f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(plugin, what):
            raise error(f"{noun} {point.name} ({point.value}) is not a {what.__name__}")
        if plugin.name in found:
            raise error(f"two {noun}s are named {plugin.name!r}")
        found[plugin.name] = plugin
    return found


class View[T](Mapping[str, T]):
    """A read-only mapping computed from the plugins each time it is read (the registries the
    code consulted before plugins, e.g. `PROTOCOLS`), so that importing its module loads none."""

    def __init__(self, build: Callable[[], dict[str, T]]) -> None:
        self._build = build

    @property
    def _items(self) -> dict[str, T]:
        return self._build()

    def __getitem__(self, key: str) -> T:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"View({self._items!r})"


def resolve(reference: str) -> Any:
    """The object a `module:attribute` reference names, its module imported now."""
    return EntryPoint("", reference, "").load()
