"""What a run keeps to itself: secrets redacted in every artifact it writes, and its folder and
files readable by their owner only.

Every writer of an artifact (the event bus, a process's event writer, the summary, the suite
table, and the processes' own logs and event files, rewritten at the end of the run) goes through
`redact` or `redact_text`. A secret is recognised

- by the name of the field that holds it: API keys, tokens, resumption handles;
- by where it sits in text: a URL's `key=` or `access_token=`, an `x-goog-api-key` or
  `Authorization` header;
- by its value: the API key in the environment (`GOOGLE_API_KEY`, `GEMINI_API_KEY`) and the
  credentials a process was told or saw (`remember_secrets`);
- by its shape: the emulator's resumption handles are UUIDs.

It becomes its length and a short hash, so two occurrences can still be told equal. File modes
keep other local users out, not the lab's processes: they run as root (or as the run's user).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, overload

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700

# Field names whose values are secrets wherever they appear (compared case-insensitively, with
# `_` and `-` ignored), and the endings that make a name one (`new_handle`, `x-goog-api-key`,
# `access_token`).
SECRET_FIELDS = frozenset({"key", "authorization"})
SECRET_ENDINGS = ("handle", "token", "apikey", "secret", "password")
# Shorter values are not redacted where they appear in text: a key of "x" would erase every x.
# Real API keys are 39 characters; the tests' stand-ins ("not-a-real-key") are 14.
MIN_SECRET_CHARS = 8

_PLACEHOLDER = r"<redacted len=\d+ sha256=[0-9a-f]{8}>"
_VALUE = r"[^\s&#,;\"'<>\\]+"
# Substrings one of which text holds if a UUID may match (its start is checked whole), and a
# JSON line if one of its fields may be a secret's.
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-")
_FIELD_HINTS = ("key", "authorization", *SECRET_ENDINGS)


@dataclass(frozen=True)
class CredentialPlaces:
    """Where a request carries its credentials (every installed API's query parameters, headers
    and WebSocket subprotocols) and the environment variables that give a client its API key;
    `shapes`: the pattern of them all, `names`: substrings one of which text holds if a place may
    match."""

    params: tuple[str, ...]
    headers: tuple[str, ...]
    subprotocols: tuple[str, ...]
    env: tuple[str, ...]

    @functools.cached_property
    def shapes(self) -> str:
        # An existing placeholder first: it is kept as it is, so redacting twice changes nothing.
        # Names and UUIDs in any case; values as they are.
        return (rf"(?i:(?P<done>{_PLACEHOLDER})"
                rf"|(?P<param>[?&;](?:{'|'.join(self.params)})=)(?P<pvalue>{_VALUE})"
                rf"|(?P<header>\b(?:{'|'.join(self.headers)})[\"']?\s*[:=]\s*[\"']?"
                rf"(?:(?:bearer|basic)\s+)?)(?P<hvalue>{_VALUE})"
                rf"|(?P<subprotocol>\b(?:{'|'.join(map(re.escape, self.subprotocols))}))"
                rf"(?P<svalue>{_VALUE})"
                r"|(?P<uuid>\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b))")

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        return (*(f"{p}=" for p in self.params), *self.headers, *self.subprotocols)


@functools.cache
def credential_places() -> CredentialPlaces:
    """Every installed API's places of credentials, asked of the APIs when first needed, not at
    import: every process imports this module (through the event bus), and an API plugin's own
    module may import the bus."""
    from faultlab.protocols import PROTOCOLS

    def each(names: Iterable[Iterable[str]]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for some in names for n in some))

    apis = list(PROTOCOLS.values())
    return CredentialPlaces(params=each(p.credential_params for p in apis),
                            headers=each(p.credential_headers for p in apis),
                            subprotocols=each(p.credential_subprotocols for p in apis),
                            env=each(p.secret_env for p in apis))


def _compile(known: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(credential_places().shapes + "".join(f"|{re.escape(v)}" for v in known))


# The values redacted wherever they appear (remember_secrets), longest first, and the pattern
# that finds them and the shapes (compiled when first used, and again when the values change).
_known: tuple[str, ...] = ()
_compiled: re.Pattern[str] | None = None
_generation = 0  # how many times the secrets changed
_env_remembered = False  # this process's own API keys, remembered at the first redaction


def _pattern() -> re.Pattern[str]:
    global _compiled, _env_remembered
    if not _env_remembered:
        _env_remembered = True
        remember_env_secrets()
    if _compiled is None:
        _compiled = _compile(_known)
    return _compiled


# Short strings recur (field names, message kinds, roles): their redaction is remembered until
# the secrets change. An emulator writes an event per frame, five short strings each: 17 us an
# event without the memo, a third of what a frame costs it to send.
SHORT_TEXT_CHARS = 64


def _redact_short(text: str) -> str:
    _pattern()  # this process's keys remembered before the memo is keyed by the generation
    return _redact_short_as_of(text, _generation)


@functools.lru_cache(maxsize=4096)
def _redact_short_as_of(text: str, generation: int) -> str:
    """`text` redacted with the secrets known at `generation` (a result computed while the
    secrets changed is never served for the new ones)."""
    if not _may_hold_secret(text):
        return text
    return _pattern().sub(_replace, text)


def redact_value(value: str) -> str:
    """A secret as its length and a short hash, enough to tell two handles apart (a value already
    redacted, by a client's own writer, stays as it is)."""
    if value.startswith("<redacted len="):
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:8]
    return f"<redacted len={len(value)} sha256={digest}>"


@functools.lru_cache(maxsize=1024)
def is_secret_field(name: str) -> bool:
    plain = name.lower().replace("_", "").replace("-", "")
    return plain in SECRET_FIELDS or plain.endswith(SECRET_ENDINGS)


def secrets_in_env(env: Mapping[str, str]) -> list[str]:
    """The API keys an environment gives a client."""
    return [env[name] for name in credential_places().env if env.get(name)]


def credentials(path: str, headers: Mapping[str, str]) -> list[str]:
    """The credentials a request carries, in its query or its headers (without `Bearer `);
    header names in any case (a capture keeps them as they were sent)."""
    found = [m.group("pvalue") for m in _pattern().finditer(path) if m.group("pvalue")]
    named = {str(name).lower(): str(value) for name, value in headers.items()}
    for name in credential_places().headers:
        value = named.get(name)
        if value:
            found.append(value.split()[-1])
    offered = named.get("sec-websocket-protocol") or ""
    found += [m.group("svalue") for m in _pattern().finditer(offered) if m.group("svalue")]
    return found


def remember_secrets(values: Iterable[str]) -> None:
    """Redact these values wherever they appear from now on, in this process."""
    global _known, _compiled, _generation
    new = {v for v in values if len(v) >= MIN_SECRET_CHARS} - set(_known)
    if new:
        # Longest first: a key that contains another is replaced whole.
        _known = tuple(sorted({*_known, *new}, key=lambda v: (-len(v), v)))
        _compiled = None
        _generation += 1
        _redact_short_as_of.cache_clear()


def remember_env_secrets(env: Mapping[str, str] = os.environ) -> None:
    """Redact the API keys this environment gives: this process's at its first redaction, and a
    writer's when it is made (a test may set a key later)."""
    remember_secrets(secrets_in_env(env))


def _replace(match: re.Match[str]) -> str:
    if match.group("done"):
        return match.group(0)
    if match.group("pvalue"):
        return match.group("param") + redact_value(match.group("pvalue"))
    if match.group("hvalue"):
        return match.group("header") + redact_value(match.group("hvalue"))
    if match.group("svalue"):
        return match.group("subprotocol") + redact_value(match.group("svalue"))
    return redact_value(match.group(0))


def redact_text(text: str) -> str:
    """`text` with every secret in it redacted where it stands."""
    if len(text) <= SHORT_TEXT_CHARS:
        return _redact_short(text)
    pattern = _pattern()  # first: it remembers this process's keys, which _may_hold_secret reads
    if not _may_hold_secret(text):
        return text
    return pattern.sub(_replace, text)




def _may_hold_secret(text: str) -> bool:
    """False for text no shape or value can match, found by substrings: most strings are names
    and numbers, and the regex costs several times more (the proxy redacts every frame's
    event)."""
    if "-" in text and text.count("-") >= 4 and _UUID.search(text):
        return True
    places = credential_places()
    if any(prefix in text for prefix in places.subprotocols):
        return True
    if "=" in text or ":" in text:
        lower = text.lower()
        for name in places.names:
            if name in lower:
                return True
    return any(value in text for value in _known)


def redact(data: Any) -> Any:
    """A copy of `data` with every secret redacted, at any depth: a secret field's string value
    whole, and the secrets inside any other string (field names included)."""
    if isinstance(data, str):
        return redact_text(data)
    if isinstance(data, int | float) or data is None:
        return data
    if isinstance(data, Mapping):
        return {redact(k): _redact_secret(v) if isinstance(k, str) and is_secret_field(k)
                else redact(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [redact(v) for v in data]
    return data


def _redact_secret(value: Any) -> Any:
    """A secret field's value: a string whole, or each string of a list (`Authorization`'s
    values)."""
    if isinstance(value, str):
        return redact_value(value)
    if isinstance(value, list | tuple):
        return [_redact_secret(v) for v in value]
    return redact(value)


def json_default(value: object) -> str:
    """What json.dumps writes for a value it cannot encode: its text, redacted."""
    return redact_text(str(value))


def redact_file(path: Path) -> bool:
    """Rewrite a file a process wrote with its secrets redacted (JSON lines field by field, any
    other line as text); True when something was."""
    try:
        source = path.open("rb")
    except FileNotFoundError:
        return False
    changed = False
    draft = path.with_name(f".{path.name}.redacting")
    with source, open_private(draft, "wb") as out:
        for raw in source:
            line = raw.decode("utf-8", "surrogateescape")
            clean = _redact_line(line)
            changed |= clean != line
            out.write(clean.encode("utf-8", "surrogateescape"))
    if changed:
        draft.replace(path)
    else:
        draft.unlink()
    return changed


def _redact_line(line: str) -> str:
    clean = redact_text(line)
    # A JSON line is redacted field by field too, when a field's name may be a secret's.
    if line.startswith("{") and any(n in line.lower() for n in _FIELD_HINTS):
        with contextlib.suppress(ValueError):
            data = json.loads(clean)
            redacted = redact(data)
            if redacted != data:
                return json.dumps(redacted, default=json_default) + "\n" * line.endswith("\n")
    return clean


@overload
def open_private(path: Path, mode: Literal["w", "a"]) -> IO[str]: ...
@overload
def open_private(path: Path, mode: Literal["wb", "ab"]) -> IO[bytes]: ...
def open_private(path: Path, mode: str) -> IO[Any]:
    """Open a file for writing that only its owner can read (made so if it already existed)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    fd = os.open(path, flags, PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)
    return os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8")


def create_private(path: Path) -> Path:
    """An empty file only its owner can read, for a process to append to (a file that exists keeps
    its content)."""
    open_private(path, "ab").close()
    return path


def write_private(path: Path, data: str | bytes) -> None:
    """Write a whole file only its owner can read."""
    if isinstance(data, str):
        with open_private(path, "w") as f:
            f.write(data)
    else:
        with open_private(path, "wb") as b:
            b.write(data)


def redact_process_files(run_dir: Path) -> list[Path]:
    """Redact what the run's processes wrote themselves, once they are gone: their logs (their
    own output, which the run does not rewrite as it goes) and their event files (a client that
    does not use faultlab's writer may write anything there). Key logs are left as they are:
    they hold TLS secrets, not text. Returns the files that had secrets."""
    remember_env_secrets()
    files = sorted({*run_dir.glob("*.log"), *run_dir.glob("*.events.jsonl")})
    return [f for f in files if not f.name.endswith("keys.log") and redact_file(f)]
