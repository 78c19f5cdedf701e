"""The profiles a user can name: files, folders of them, and bare names (`silent-loss`,
`field/BR1`) looked up in `./profiles/` first, then among the profiles shipped with faultlab."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from faultlab.errors import FaultlabError, ProfileError
from faultlab.plainyaml import load_plain, read_bounded

PROFILE_SUFFIXES = (".yaml", ".yml")
# Looked up before the shipped profiles, relative to the current folder.
LOCAL_PROFILES = Path("profiles")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s+[A-Z`]|\s*$)")


def profile_paths(paths: Iterable[str | Path]) -> list[Path]:
    """The profile files named: a file as is, a folder as every *.yaml/*.yml below it (but in
    hidden folders), sorted."""
    out: list[Path] = []
    for item in paths:
        p = Path(item)
        if p.is_dir():
            # Hidden folders are not the user's profiles (a Kubernetes ConfigMap mount keeps
            # its files in `..<timestamp>/` and links each one beside it).
            out.extend(sorted(q for q in p.rglob("*") if q.suffix in PROFILE_SUFFIXES
                              and not any(part.startswith(".") for part in
                                          q.relative_to(p).parts[:-1])))
        else:
            out.append(p)
    return out


def shipped_profiles() -> Path:
    """The folder of the profiles installed with faultlab (`faultlab/profiles` in the wheel)."""
    root = resources.files("faultlab") / "profiles"
    if not isinstance(root, Path):
        # Only a zip import has no real path; profiles are read, and named in events, as files.
        raise FaultlabError(f"faultlab's shipped profiles are not files on disk ({root})")
    return root


def profile_names(folder: Path) -> dict[str, Path]:
    """Every profile below `folder` by name: its path there without the suffix (`field/BR1`)."""
    names: dict[str, Path] = {}
    for path in profile_paths([folder]) if folder.is_dir() else []:
        names.setdefault(path.relative_to(folder).with_suffix("").as_posix(), path)
    return {name: names[name] for name in sorted(names, key=lambda n: (n.count("/"), n))}


def _is_name(item: str) -> bool:
    """`silent-loss`, `field/BR1`: relative, no .yaml/.yml suffix, and no file or folder there."""
    parts = item.split("/")
    return (bool(item) and not item.startswith("/") and all(p not in ("", ".", "..") for p in parts)
            and Path(item).suffix not in PROFILE_SUFFIXES and not Path(item).exists())


def _find_named(name: str) -> Path | None:
    for folder in (LOCAL_PROFILES, shipped_profiles()):
        for suffix in PROFILE_SUFFIXES:
            path = folder / f"{name}{suffix}"
            if path.is_file():
                return path
    return None


def _unknown_name(name: str) -> str:
    known = {k.lower(): k for k in sorted({*profile_names(LOCAL_PROFILES),
                                           *profile_names(shipped_profiles())})}
    # `BR1` for `field/BR1`: a folder is easy to forget, and difflib alone scores it low.
    close = [k for low, k in known.items() if low.rsplit("/", 1)[-1] == name.lower()]
    close += [known[low] for low in difflib.get_close_matches(name.lower(), known, n=3)
              if known[low] not in close]
    hint = f"close matches: {', '.join(close)}" if close else "`faultlab profiles` lists them"
    return f"{name}: no such file, nor a profile of that name in ./profiles or shipped with faultlab; {hint}"


def resolve_profiles(items: Iterable[str | Path]) -> list[Path]:
    """The profile files a command line names, in order: existing files and folders as
    `profile_paths` reads them, and names (`silent-loss`, `field/BR1`) looked up in ./profiles,
    then among the shipped profiles. Every unknown name is one line of the ProfileError."""
    out: list[Path] = []
    unknown: list[str] = []
    for item in items:
        if not _is_name(str(item)):
            out += profile_paths([item])
        elif (found := _find_named(str(item))) is not None:
            out.append(found)
        else:
            unknown.append(_unknown_name(str(item)))
    if unknown:
        raise ProfileError(unknown)
    return out


def profile_summary(path: Path) -> str:
    """A profile's description cut to its first sentence (or line), for listings."""
    try:
        _, data = load_plain(read_bounded(path), str(path))
    except (OSError, ProfileError):
        return "(unreadable; `faultlab validate` says why)"
    description = data.get("description") if isinstance(data, dict) else None
    lines = str(description or "").strip().splitlines()
    first = lines[0].strip() if lines else ""
    end = _SENTENCE_END.search(first)
    return first[:end.end()] if end else first


def profile_catalogue() -> list[tuple[str, dict[str, Path]]]:
    """The profiles known by name, by where they are found: ./profiles (when it is not the
    shipped folder itself, as in a checkout of faultlab) first, then the shipped ones."""
    shipped = shipped_profiles()
    shelves = [("shipped with faultlab", profile_names(shipped))]
    if LOCAL_PROFILES.is_dir() and LOCAL_PROFILES.resolve() != shipped.resolve():
        shelves.insert(0, ("in ./profiles (looked up first)", profile_names(LOCAL_PROFILES)))
    return shelves
