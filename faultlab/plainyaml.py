"""Plain YAML: a profile's bytes read as plain data, within limits, whatever the bytes hold.

Plain data is what YAML's core schema builds: strings, integers, floats, booleans, null, lists and
mappings (anchors, aliases and `<<` merges too, within the limits). The limits are checked on the
parser's events, before a node is composed or an alias expanded: a hostile-input study (issue 17)
found tracebacks for a non-UTF-8 byte, 500 nested lists, a self-referencing alias, a 4,300-digit
integer, `!!float true` or `!!timestamp abc`, and a 1 KB alias bomb that grew memory by 70 MB/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import yaml

from faultlab.problems import Loc, Problems, line_map

MAX_BYTES = 5 * 2**20
MAX_DEPTH = 64  # lists and mappings inside one another, aliases expanded
MAX_VALUES = 20_000  # scalars, lists and mappings, each alias counted as all it stands for
MAX_INT_DIGITS = 100

CORE = "tag:yaml.org,2002:"
STR, INT, FLOAT = CORE + "str", CORE + "int", CORE + "float"
SCALAR_TAGS = frozenset({STR, INT, FLOAT, CORE + "bool", CORE + "null"})
COLLECTION_TAGS: dict[type[yaml.Event], str] = {
    yaml.SequenceStartEvent: CORE + "seq", yaml.MappingStartEvent: CORE + "map"}

if TYPE_CHECKING or not yaml.__with_libyaml__:
    from yaml import SafeLoader as _Loader
else:  # libyaml parses a 5 MB profile in 0.1 s; the pure-Python parser takes 2 s.
    from yaml import CSafeLoader as _Loader


class PlainLoader(_Loader):
    """The safe loader with the core schema only: `2024-13-45` is a string, not a timestamp that
    fails to construct, and no tag but the core's has a constructor."""

    # PyYAML looks both up on the class.
    yaml_implicit_resolvers = {  # noqa: RUF012
        first: [(tag, regexp) for tag, regexp in resolvers if tag in SCALAR_TAGS | {CORE + "merge"}]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    yaml_constructors: ClassVar[dict[Any, Any]] = {
        tag: construct for tag, construct in yaml.SafeLoader.yaml_constructors.items()
        if tag is None or tag in SCALAR_TAGS or tag in COLLECTION_TAGS.values()
    }

    def scalar_tag(self, value: str, implicit: tuple[bool, bool]) -> str:
        """The tag an untagged scalar gets: for a plain one (implicit[0]), what its text reads as."""
        tag: str = self.resolve(yaml.ScalarNode, value, implicit)  # type: ignore[no-untyped-call]
        return tag


def read_bounded(path: Path) -> bytes:
    """A file's bytes, read no further than one byte past MAX_BYTES (enough for load_plain to
    refuse it as too large); OSError if it cannot be read."""
    with path.open("rb") as file:
        return file.read(MAX_BYTES + 1)


def load_plain(content: str | bytes, source: str) -> tuple[yaml.Node | None, Any]:
    """The node tree (which gives each key its line) and the data of one YAML document; every
    problem a ProfileError line `source:line: field: message`."""
    problems = Problems(source, {})
    text = _text(content.encode(errors="surrogatepass") if isinstance(content, str) else content,
                 problems)
    _check_events(text, problems)
    loader = PlainLoader(text)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    except yaml.YAMLError as exc:
        _add_yaml(problems, exc)
        problems.fail()
    finally:
        loader.dispose()


def load_mapping(content: str | bytes, source: str, shape: str) -> tuple[dict[str, Any], Problems]:
    """A YAML document that must be a mapping (`shape` says what one looks like, for the error),
    and the problems collector that knows each key's line, duplicate keys already in it; a
    document that is no mapping is a ProfileError at once."""
    node, data = load_plain(content, source)
    lines: dict[Loc, int] = {}
    duplicates: list[tuple[Loc, str]] = []
    if node is not None:
        line_map(node, (), lines, duplicates)
    problems = Problems(source, lines)
    for loc, message in duplicates:
        problems.add(loc, message)
    if not isinstance(data, dict):
        problems.add((), shape)
        problems.fail()
    return data, problems


def _text(data: bytes, problems: Problems) -> str:
    """The bytes as text, if they are at most MAX_BYTES of UTF-8 with only printable characters."""
    if len(data) > MAX_BYTES:
        problems.add((), f"larger than {MAX_BYTES // 2**20} MB, the most a profile may be")
        problems.fail()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        problems.add((), f"not UTF-8 (byte 0x{data[exc.start]:02x} at line {line})", line=line)
        problems.fail()
    # Found here rather than by the parser, whose position counts bytes (libyaml) or characters.
    bad = yaml.reader.Reader.NON_PRINTABLE.search(text)
    if bad is not None:
        line = text.count("\n", 0, bad.start()) + 1
        problems.add((), f"YAML: unprintable character {bad.group()!r} at line {line}", line=line)
        problems.fail()
    return text


def _add_yaml(problems: Problems, exc: yaml.YAMLError) -> None:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = ", ".join(part for part in (exc.context, exc.problem) if part) or str(exc)
        problems.add((), f"YAML: {what}", line=mark.line + 1 if mark else None)
    else:
        problems.add((), f"YAML: {exc}")


def _check_events(text: str, problems: Problems) -> None:
    """Every limit and tag, checked as the parser yields events, before anything is composed."""
    loader = PlainLoader(text)
    check = _EventCheck(loader, problems)
    try:
        while loader.check_event():
            check.take(loader.get_event())  # type: ignore[no-untyped-call]
    except yaml.YAMLError as exc:
        _add_yaml(problems, exc)
    finally:
        loader.dispose()
    problems.raise_if_any()


@dataclass(frozen=True)
class _Anchored:
    """What an alias of an anchor stands for: its values, its depth, and its text as a key."""

    values: int
    depth: int
    key: str | None


@dataclass
class _Open:
    """A list or mapping the events are inside: where it is, and what it holds so far."""

    loc: Loc
    mapping: bool
    anchor: str | None
    values: int = 1
    depth: int = 1
    items: int = 0  # of a mapping: keys and values
    key: str = ""

    def child_loc(self) -> Loc:
        if not self.mapping:
            return (*self.loc, self.items)
        return self.loc if self.items % 2 == 0 else (*self.loc, self.key)


class _EventCheck:
    """Takes a document's events in order; refuses what is not plain data, and stops at a limit."""

    def __init__(self, loader: PlainLoader, problems: Problems) -> None:
        self.loader = loader
        self.problems = problems
        self.open: list[_Open] = []
        self.anchors: dict[str, _Anchored] = {}
        self.values = 0

    def take(self, event: yaml.Event) -> None:
        if not isinstance(event, yaml.NodeEvent | yaml.CollectionEndEvent):
            return
        line = event.start_mark.line + 1 if event.start_mark else 1
        parent = self.open[-1] if self.open else None
        is_key = parent is not None and parent.mapping and parent.items % 2 == 0
        loc = parent.child_loc() if parent is not None else ()
        if isinstance(event, yaml.CollectionEndEvent):
            done = self.open.pop()
            self._done(done.anchor, _Anchored(done.values, done.depth, None))
        elif isinstance(event, yaml.AliasEvent):
            self._alias(event, line, loc, is_key)
        elif isinstance(event, yaml.ScalarEvent):
            self._count(line, loc)
            self._new_anchor(event.anchor, line, loc)
            self._scalar(event, line, loc)
            self._done(event.anchor, _Anchored(1, 0, event.value))
        elif isinstance(event, yaml.CollectionStartEvent):
            self._count(line, loc)
            if event.tag not in (None, "!", COLLECTION_TAGS[type(event)]):
                self.problems.add(loc, _not_plain(event.tag), line=line)
            if is_key:
                self.problems.add(loc, "a key is one value, not a list or mapping", line=line)
            if len(self.open) + 1 > MAX_DEPTH:
                self._stop(loc[:1], f"nested deeper than {MAX_DEPTH} lists and mappings", line)
            self._new_anchor(event.anchor, line, loc)
            self.open.append(_Open(loc, isinstance(event, yaml.MappingStartEvent), event.anchor))

    def _alias(self, event: yaml.AliasEvent, line: int, loc: Loc, is_key: bool) -> None:
        name = event.anchor
        if any(o.anchor == name for o in self.open):
            self._stop(loc, f"the alias *{name} is inside the value it names", line)
        anchored = self.anchors.get(name or "")
        if anchored is None:
            self._stop(loc, f"the alias *{name} names no anchor before it", line)
        if is_key and anchored.key is None:
            self.problems.add(loc, "a key is one value, not a list or mapping", line=line)
        if len(self.open) + anchored.depth > MAX_DEPTH:
            self._stop(loc[:1], f"the alias *{name} nests deeper than {MAX_DEPTH} lists and "
                                "mappings", line)
        if self.values + anchored.values > MAX_VALUES:
            self._stop(loc, f"the alias *{name} expands past {MAX_VALUES} values, the most a "
                            "profile may hold", line)
        self.values += anchored.values
        self._done(None, anchored)

    def _scalar(self, event: yaml.ScalarEvent, line: int, loc: Loc) -> None:
        tag = event.tag
        if tag in (None, "!"):
            tag = self.loader.scalar_tag(event.value, event.implicit)
        elif tag not in SCALAR_TAGS:
            self.problems.add(loc, _not_plain(tag), line=line)
            return
        elif tag != STR:
            plain = self.loader.scalar_tag(event.value, (True, False))
            if not (plain == tag or (tag, plain) == (FLOAT, INT)):
                self.problems.add(loc, f"{_shown(event.value)} is not a {_short(tag)} value",
                                  line=line)
                return
        digits = len(event.value.lstrip("+-").replace("_", ""))
        if tag == INT and digits > MAX_INT_DIGITS:
            self.problems.add(loc, f"an integer of {digits} digits; at most {MAX_INT_DIGITS}",
                              line=line)

    def _new_anchor(self, anchor: str | None, line: int, loc: Loc) -> None:
        if anchor in self.anchors or any(o.anchor == anchor for o in self.open if anchor):
            self._stop(loc, f"the anchor &{anchor} is defined twice", line)

    def _count(self, line: int, loc: Loc) -> None:
        self.values += 1
        if self.values > MAX_VALUES:
            self._stop(loc, f"more than {MAX_VALUES} values, the most a profile may hold", line)

    def _done(self, anchor: str | None, value: _Anchored) -> None:
        """A value is complete: it counts in its parent and, anchored, is what aliases stand for."""
        if anchor is not None:
            self.anchors[anchor] = value
        if self.open:
            parent = self.open[-1]
            parent.values += value.values
            parent.depth = max(parent.depth, value.depth + 1)
            if parent.mapping and parent.items % 2 == 0:
                parent.key = value.key or ""
            parent.items += 1

    def _stop(self, loc: Loc, message: str, line: int) -> NoReturn:
        self.problems.add(loc, message, line=line)
        self.problems.fail()


def _short(tag: str) -> str:
    return "!!" + tag.removeprefix(CORE) if tag.startswith(CORE) else tag


def _shown(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "...")


def _not_plain(tag: str | None) -> str:
    return (f"the tag {_short(tag or '')} is not plain data; a profile holds strings, numbers, "
            "booleans, null, lists and mappings")
