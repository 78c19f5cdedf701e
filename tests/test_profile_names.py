"""Profiles by name: ./profiles first, then the ones shipped in the package; `faultlab profiles`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from faultlab.catalogue import profile_names, resolve_profiles, shipped_profiles
from faultlab.cli import NAME_COLUMN
from faultlab.errors import ProfileError
from faultlab.profile import load_profile

from .conftest import REPO, faultlab

SILENT_LOSS = (REPO / "faultlab" / "profiles" / "silent-loss.yaml").read_text(encoding="utf-8")


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current folder outside the repo, with no profiles/ of its own."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def own_profile(folder: Path, name: str, text: str) -> Path:
    path = folder / "profiles" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_bare_name_is_looked_up_in_the_local_profiles_first(elsewhere: Path) -> None:
    """`silent-loss` is ./profiles/silent-loss.yaml when that exists, not the shipped one."""
    local = own_profile(elsewhere, "silent-loss", SILENT_LOSS.replace("name: silent-loss", "name: mine"))
    (found,) = resolve_profiles(["silent-loss"])
    assert found.resolve() == local.resolve()
    assert load_profile(found).name == "mine"


def test_a_bare_name_falls_back_to_the_shipped_profiles(elsewhere: Path) -> None:
    """With no ./profiles, `silent-loss` is the profile installed with faultlab."""
    (found,) = resolve_profiles(["silent-loss"])
    assert found == shipped_profiles() / "silent-loss.yaml"
    assert load_profile(found).name == "silent-loss"


def test_a_name_with_a_folder_resolves(elsewhere: Path) -> None:
    """`field/BR1` names the shipped field/BR1.yaml."""
    assert resolve_profiles(["field/BR1"]) == [shipped_profiles() / "field" / "BR1.yaml"]


def test_an_existing_path_is_read_as_a_path_not_a_name(elsewhere: Path) -> None:
    """A folder called `silent-loss` in the current folder means the profiles in it."""
    (elsewhere / "silent-loss").mkdir()
    (elsewhere / "silent-loss" / "a.yaml").write_text(SILENT_LOSS, encoding="utf-8")
    assert resolve_profiles(["silent-loss"]) == [Path("silent-loss/a.yaml")]


def test_the_repo_profiles_folder_still_holds_every_shipped_profile() -> None:
    """`profiles/` at the repo root (a link to faultlab/profiles) gives the field profiles too."""
    paths = resolve_profiles([REPO / "profiles"])
    assert REPO / "profiles" / "field" / "BR1.yaml" in paths
    assert len(paths) == len(profile_names(shipped_profiles())) > 20


def test_an_unknown_name_lists_the_close_matches(elsewhere: Path) -> None:
    """Each unknown name is one line with its close matches; a name missing its folder finds it."""
    with pytest.raises(ProfileError) as info:
        resolve_profiles(["silnet-loss", "BR1"])
    misspelt, no_folder = info.value.problems
    assert misspelt.startswith("silnet-loss: no such file, nor a profile of that name")
    assert "close matches: silent-loss" in misspelt
    assert "close matches: field/BR1" in no_folder


def test_run_with_an_unknown_name_exits_2_with_one_line(tmp_path: Path) -> None:
    """`faultlab run nosuch-profle` says so in one line, exit 2, before any lab or run folder."""
    done = faultlab("run", "nosuch-profle", "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("nosuch-profle: no such file, nor a profile of that name")
    assert not (tmp_path / "runs").exists()


def test_validate_with_an_unknown_name_names_the_close_match(tmp_path: Path) -> None:
    """`faultlab validate silnet-loss` exits 2 and suggests silent-loss, with no traceback."""
    done = faultlab("validate", "silnet-loss", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "close matches: silent-loss" in line


def test_validate_takes_names_from_any_folder(tmp_path: Path) -> None:
    """`faultlab validate silent-loss field/BR1` works outside the repo."""
    done = faultlab("validate", "silent-loss", "field/BR1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2 profile(s) valid"


def test_profiles_lists_the_shipped_ones_with_their_first_sentence(tmp_path: Path) -> None:
    """One line a profile: the name padded to one column, then its description's first sentence."""
    done = faultlab("profiles", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # A name wider than the column has its summary on the next line, in the column.
    long = {i for i, line in enumerate(lines) if " " not in line}
    assert all(len(lines[i].strip()) > NAME_COLUMN for i in long)
    assert len(lines) - len(long) == len(profile_names(shipped_profiles()))
    summaries = [line for i, line in enumerate(lines) if i not in long]
    assert len({re.match(r"\S*\s+", line).end() for line in summaries}) == 1  # type: ignore[union-attr]
    by_name = {line.split()[0]: line for line in summaries if not line.startswith(" ")}
    assert "webrtc/udp-blocked-falls-back-to-turn-tcp" in {lines[i] for i in long}
    assert re.fullmatch(r"silent-loss +The path silently drops every packet .*",
                        by_name["silent-loss"])
    assert re.fullmatch(r"field/BR1 +Field scenario BR1: .*", by_name["field/BR1"])
    assert re.fullmatch(r"field/R0 +Field scenario R0: no tool call\.", by_name["field/R0"])


def test_profiles_lists_a_local_folder_first(tmp_path: Path) -> None:
    """With a ./profiles of its own, that folder's profiles come first, under headings."""
    own_profile(tmp_path, "mine",
                "name: mine\ndescription: |\n  Mine alone.\n  More.\nclient: {builtin: ws-client}\n")
    lines = faultlab("profiles", cwd=tmp_path).stdout.splitlines()
    assert lines[0] == "in ./profiles (looked up first):"
    assert re.fullmatch(r"  mine +Mine alone\.", lines[1])
    assert lines[2] == "shipped with faultlab:"


def test_profiles_lists_a_hostile_file_as_unreadable(tmp_path: Path) -> None:
    """A file that is not UTF-8, or an alias bomb, gets a line of its own, not a traceback."""
    own_profile(tmp_path, "latin", "").write_bytes(b"name: latin\ndescription: caf\xe9\n")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8))
    own_profile(tmp_path, "bomb", bomb)
    done = faultlab("profiles", cwd=tmp_path, timeout=10)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    unreadable = "(unreadable; `faultlab validate` says why)"
    assert re.search(r"  bomb +" + re.escape(unreadable), done.stdout)
    assert re.search(r"  latin +" + re.escape(unreadable), done.stdout)


def test_profiles_in_the_repo_lists_the_shipped_folder_once() -> None:
    """In a checkout, ./profiles is the shipped folder: no second list."""
    lines = faultlab("profiles").stdout.splitlines()
    named = [line for line in lines if not line.startswith(" ")]  # not a long name's summary
    assert len(named) == len(profile_names(shipped_profiles()))


@pytest.mark.slow
def test_the_wheel_ships_the_profiles(tmp_path: Path) -> None:
    """A wheel built from the source (offline, from a copy, so the tree stays clean) holds every
    shipped profile, field/ included."""
    source = tmp_path / "source"
    shutil.copytree(REPO / "faultlab", source / "faultlab",
                    ignore=shutil.ignore_patterns("__pycache__", "node_modules", "dist"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (tmp_path / "dist").glob("faultlab-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"faultlab/profiles/silent-loss.yaml", "faultlab/profiles/field/BR1.yaml"} <= names
    shipped = shipped_profiles()
    assert {f"faultlab/profiles/{p.relative_to(shipped).as_posix()}"
            for p in profile_names(shipped).values()} <= names


@pytest.mark.lab
def test_run_by_name_from_any_folder(tmp_path: Path, runs_dir: Path) -> None:
    """`faultlab run -q silent-loss` outside the repo runs the shipped demo, and it passes."""
    done = faultlab("run", "-q", "silent-loss", "--runs-dir", str(runs_dir), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "silent-loss: PASS" in done.stdout
