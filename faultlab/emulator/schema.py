"""The installed SDK's client frame field tree (S6), kept in the user's cache by SDK version.

The tree is derived from the installed google-genai SDK's types (`sdk_tree`). Importing the SDK
takes about a second of CPU (1.08 s here; the derivation 18 ms), which every emulator paid at its
start, on the cores its lab's client and proxy were starting on; so the tree is kept as JSON in the
user's cache (`$XDG_CACHE_HOME/faultlab`, else `~/.cache/faultlab`), under a key naming the SDK's
and pydantic's versions, the SDK's types file and the code the tree is made and read with. A cache
that is missing, unreadable or of another key is derived again (and written, if the folder can be);
deleting it is always safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, get_args

from faultlab.emulator.frame_tree import Field, JsonType, Leaf, Message, Shape

# The cache file's format.
CACHE_FORMAT = 1
# The code a tree is made and read with: a change to any of it makes a new key.
TREE_SOURCES = tuple(Path(__file__).parent.parent / name for name in (
    "emulator/sdk_tree.py", "emulator/frame_tree.py", "emulator/schema.py", "protocols/gemini.py"))
SHAPES, JSON_TYPES = frozenset(get_args(Shape)), frozenset(get_args(JsonType))


@cache
def client_message() -> Message:
    """`LiveClientMessage`: the top-level keys of a client frame and each one's message tree."""
    path = cache_path()
    if path is not None:
        with contextlib.suppress(OSError, ValueError, LookupError, TypeError):
            return tree_from_json(json.loads(path.read_text()))
    from faultlab.emulator import sdk_tree

    tree = sdk_tree.client_message()
    if path is not None:
        with contextlib.suppress(OSError):
            _write_atomically(path, json.dumps(tree_to_json(tree)))
    return tree


def cache_path() -> Path | None:
    """The cache file of the installed SDK's tree: None when the SDK's install or the user's
    cache folder cannot be told (no cache)."""
    try:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "faultlab"
        sdk = metadata.distribution("google-genai")
        types_file = Path(str(sdk.locate_file("google/genai/types.py"))).stat()
        said = [sdk.version, metadata.version("pydantic"), str(types_file.st_size),
                str(types_file.st_mtime_ns), str(CACHE_FORMAT),
                *(hashlib.sha256(source.read_bytes()).hexdigest() for source in TREE_SOURCES)]
    except (OSError, RuntimeError, metadata.PackageNotFoundError):
        return None
    key = hashlib.sha256("\n".join(said).encode()).hexdigest()[:16]
    return folder / f"emulator-sdk-tree-{key}.json"


def tree_to_json(root: Message) -> dict[str, Any]:
    """The tree as JSON: its messages in a list (a shared or recursive one once), fields naming
    messages by index."""
    index: dict[int, int] = {}
    messages: list[dict[str, Any]] = []

    def number(message: Message) -> int:
        if id(message) not in index:
            index[id(message)] = len(messages)
            entry: dict[str, Any] = {"name": message.name, "fields": {}}
            messages.append(entry)
            entry["fields"] = {name: {
                "message": None if f.message is None else number(f.message), "shape": f.shape,
                "leaf": None if f.leaf is None else {
                    "type": f.leaf.type, "repeated": f.leaf.repeated,
                    "names": sorted(f.leaf.names)}} for name, f in message.fields.items()}
        return index[id(message)]

    number(root)
    return {"format": CACHE_FORMAT, "messages": messages}


def tree_from_json(data: dict[str, Any]) -> Message:
    """The tree `tree_to_json` wrote (LookupError, TypeError or ValueError if it is not one)."""
    if data["format"] != CACHE_FORMAT or not data["messages"]:
        raise ValueError("not a tree of this format")
    nodes = [Message(str(entry["name"])) for entry in data["messages"]]

    def node(index: object) -> Message:
        if not isinstance(index, int) or not 0 <= index < len(nodes):
            raise ValueError(f"no message {index!r}")
        return nodes[index]

    def leaf(said: dict[str, Any] | None) -> Leaf | None:
        if said is None:
            return None
        if said["type"] not in JSON_TYPES or not isinstance(said["repeated"], bool):
            raise ValueError(f"not a leaf: {said!r}")
        return Leaf(said["type"], said["repeated"], frozenset(map(str, said["names"])))

    for message, entry in zip(nodes, data["messages"], strict=True):
        for name, f in entry["fields"].items():
            if f["shape"] not in SHAPES:
                raise ValueError(f"not a shape: {f['shape']!r}")
            message.fields[str(name)] = Field(
                None if f["message"] is None else node(f["message"]), f["shape"], leaf(f["leaf"]))
    return nodes[0]


def _write_atomically(path: Path, text: str) -> None:
    """Write `path` whole or not at all: emulators starting at once may each write it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
