"""A kind of client (the `faultlab.clients` entry point group): how a profile's `client:` section
declares it (its key, and the type of that key's value), how the lab launches it (its command
line and variables), what `faultlab lab gc` reaps of it (folders in the temp dir named with a
pid) and what it writes for the report to draw (`records`, faultlab.vocabulary's classes).

A kind is an instance of a `ClientKind` subclass, named by an entry point; faultlab's own
(`command`, `builtin`, `browser`: faultlab.profile.client_kinds) are registered the same way.
A leaf module: a plugin imports it without importing the profile's loader.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from faultlab.targets.base import Surroundings
    from faultlab.vocabulary.base import Record

GROUP = "faultlab.clients"


class Declared(Protocol):
    """What a kind reads of the profile's `client:` beside its own key's value."""

    @property
    def image(self) -> str | None: ...

    @property
    def args(self) -> list[str]: ...


class ClientKind(ABC):
    """One kind of client; `setting` is the validated value of its key in `client:`."""

    # Its key in a profile's `client:` section, and the type of that key's value (validated by
    # pydantic: a model, `str`, `list[str]` ...).
    name: ClassVar[str]
    setting: ClassVar[Any]
    # Prefixes of the folders it makes in the temp dir, each followed by the pid that owns it
    # (`PREFIX<pid>-...`): `faultlab lab gc` removes them once that pid is gone.
    pid_folders: ClassVar[tuple[str, ...]] = ()

    def records(self) -> tuple[type[Record], ...]:
        """The records (faultlab.vocabulary) of the events it writes, which join the vocabulary
        as the kind loads: the report draws them and `faultlab events check` knows them. A
        method, so that a kind's module need not import the vocabulary when it is loaded."""
        return ()

    def misfit(self, setting: Any, client: Declared) -> str | None:
        """Why the rest of `client:` does not go with this kind, if it does not."""
        return None

    def schema(self) -> dict[str, Any] | None:
        """The JSON Schema of its setting where its type says less than `misfit` checks (a
        closed set of names), for the profile schema; None: its type's."""
        return None

    @abstractmethod
    def argv(self, setting: Any, client: Declared, folder: Path) -> list[str]:
        """Its command line in the client's namespace (in a container with `client.image`);
        `folder` is the profile's, which relative paths start from."""

    def env(self, setting: Any, run: Surroundings) -> dict[str, str]:
        """Its own variables, over faultlab's (beneath the profile's `env`)."""
        return {}
