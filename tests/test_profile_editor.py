"""What an editor says of faultlab's profiles: yaml-language-server (VS Code's YAML extension's
server, from npm: tests/editor/, `make install`) reads each shipped profile by the schema its
first line names and finds nothing wrong; a misspelt field gets its error at its own line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from faultlab.profile.schema import SCHEMA_FILE

from .conftest import REPO

PROFILES = REPO / "faultlab" / "profiles"
DIAGNOSE = REPO / "tests" / "editor" / "diagnose.mjs"


def diagnose(*files: Path) -> dict[str, list[dict[str, Any]]]:
    """The editor's diagnostics of each file, by its path."""
    assert (DIAGNOSE.parent / "node_modules" / "yaml-language-server").is_dir(), \
        "yaml-language-server is not installed: make install"
    done = subprocess.run(["node", str(DIAGNOSE), *map(str, files)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    diagnostics: dict[str, list[dict[str, Any]]] = json.loads(done.stdout)
    return diagnostics


def test_the_editor_finds_no_error_in_a_shipped_profile_and_a_misspelt_field_at_its_line(
        tmp_path: Path) -> None:
    shipped = sorted(PROFILES.rglob("*.yaml"))
    # A misspelt field in a profile beside its own copy of the schema (the first line names it
    # as the shipped ones do, relative to the profile's folder).
    shutil.copy(PROFILES / SCHEMA_FILE, tmp_path / SCHEMA_FILE)
    lines = (PROFILES / "silent-loss.yaml").read_text().splitlines()
    at = lines.index("timeout: 15s")
    lines[at] = "timout: 15s"
    lines.insert(at, "proxy: 'yes'")
    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text("\n".join(lines) + "\n")

    said = diagnose(misspelt, *shipped)
    assert len(said) == len(shipped) + 1
    wrong = {file: found for file, found in said.items() if found and file != str(misspelt)}
    assert not wrong, wrong
    assert sorted((d["line"], d["severity"]) for d in said[str(misspelt)]) == [
        (at + 1, 1), (at + 2, 1)], said[str(misspelt)]
    assert any("timout" in d["message"] for d in said[str(misspelt)])
