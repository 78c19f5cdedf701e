"""A toy plugin package (tests/plugins/toy/: a dist-info folder and its package, as `pip install`
leaves them) adds a third realtime API and a client kind through the entry points alone: no
faultlab module names it. Each test runs faultlab in a subprocess with the package on its path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from faultlab.plugins import BUILTINS

from ..conftest import REPO

HERE = Path(__file__).parent
TOY = HERE / "toy"
PROFILE = HERE / "toy.yaml"


def run(*argv: str, toy: bool = True, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`python ARGV`, with faultlab's tree (and the toy package, `toy`) on its path."""
    path = [str(REPO), *([str(TOY)] if toy else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120, check=False)


REGISTRIES = """
import json
from faultlab.calibrate import PROBES
from faultlab.emulator.apis import APIS
from faultlab.emulator.personality import PERSONALITIES, PROTOCOL_DEFAULTS
from faultlab.peers import BUILTINS
from faultlab.profile.client_kinds import client_kinds
from faultlab.protocols import PROTOCOLS, recognising
print(json.dumps({
    "protocols": sorted(PROTOCOLS), "apis": {n: type(a).__name__ for n, a in APIS.items()},
    "personality": PERSONALITIES["toy-1"].protocol, "defaults": dict(PROTOCOL_DEFAULTS),
    "probes": sorted(PROBES), "builtin": BUILTINS.get("toy-echo"),
    "pack builtin": BUILTINS.get("toy-said"),
    "kinds": sorted(client_kinds()), "recognised": recognising({"toy": "reply"}).name,
}))
"""


def test_the_toy_api_and_client_kind_load_through_the_entry_points() -> None:
    """With the toy package installed, every registry holds its API's parts, its client kind and
    the clients its scenario pack brings, beside faultlab's own; without it, none does."""
    done = run("-c", REGISTRIES)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {
        "protocols": ["gemini", "openai", "toy"],
        "apis": {"gemini": "GeminiApi", "openai": "OpenAIApi", "toy": "ToyApi"},
        "personality": "toy", "defaults": {"gemini": "gemini-dev-2026-10",
                                           "openai": "openai-realtime", "toy": "toy-1"},
        "probes": ["gemini", "openai"], "builtin": "toy_plugin.client",
        "pack builtin": "toy_plugin.client",
        "kinds": ["browser", "builtin", "command", "toy", "toy-pack"], "recognised": "toy"}
    without = run("-c", "from faultlab.protocols import PROTOCOLS; "
                        "from faultlab.profile.client_kinds import client_kinds; "
                        "print(sorted(PROTOCOLS), sorted(client_kinds()))", toy=False)
    assert without.stdout.split() == ["['gemini',", "'openai']", "['browser',", "'builtin',",
                                      "'command']"], without.stderr


def test_a_profile_of_the_toy_kind_and_api_validates() -> None:
    """`faultlab validate` takes a profile whose client is of the toy kind and whose emulator
    serves the toy API's personality."""
    done = run("-m", "faultlab", "validate", str(PROFILE))
    assert done.returncode == 0, done.stdout + done.stderr


def test_without_the_plugin_its_kind_and_personality_are_unknown() -> None:
    """Without the toy package, the same profile is refused (exit 2) naming the unknown client
    kind and personality, with the installed ones, at their lines."""
    done = run("-m", "faultlab", "validate", str(PROFILE), toy=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "toy.yaml:6: target.emulator.personality: unknown personality 'toy-1'" in done.stderr
    assert ("toy.yaml:7: client: unknown client kind 'toy'; installed kinds: browser, builtin, "
            "command") in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_setting_of_a_plugin_kind_is_placed_under_its_key(tmp_path: Path) -> None:
    """The toy kind's own model validates its key's value; a problem names `client.toy.FIELD`."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nclient:\n  toy: {say: hi, loud: true}\n")
    done = run("-m", "faultlab", "validate", str(bad))
    assert done.returncode == 2
    assert "bad.yaml:3: client.toy.loud: unknown field" in done.stderr, done.stderr


def test_the_profile_schema_holds_the_toy_kind_and_personality() -> None:
    """`faultlab schema` with the toy package installed: a client may be of the toy kind, with
    the kind's own fields, and the emulator may serve the toy personality; without it, neither."""
    def schema(toy: bool) -> dict[str, Any]:
        done = run("-m", "faultlab", "schema", toy=toy)
        assert done.returncode == 0, done.stderr
        defs: dict[str, Any] = json.loads(done.stdout)["$defs"]
        return defs

    defs = schema(toy=True)
    toy = defs["Client"]["properties"]["toy"]
    assert {"say", "model"} <= defs[toy["$ref"].rsplit("/", 1)[1]]["properties"].keys()
    assert "toy-1" in defs["EmulatorTarget"]["properties"]["personality"]["enum"]
    without = schema(toy=False)
    assert "toy" not in without["Client"]["properties"]
    assert "toy-1" not in without["EmulatorTarget"]["properties"]["personality"]["enum"]


def test_a_personality_of_an_api_not_installed_is_refused() -> None:
    """A personality naming an API no plugin brings, or a dialect its API lacks, is an error
    naming the installed ones."""
    done = run("-c", """
from faultlab.emulator.personality import Personality
for fields in ({"protocol": "nope", "api": "echo"}, {"protocol": "toy", "api": "developer"}):
    try:
        Personality(name="x", **fields)
    except ValueError as exc:
        print(exc.errors()[0]["msg"])
""")
    assert done.stdout.splitlines() == [
        "Value error, unknown realtime API 'nope'; one of: gemini, openai, toy",
        "Value error, api: 'developer' is not a dialect of toy; one of: echo"], done.stderr


def test_pyproject_declares_the_built_in_plugins_faultlab_loads() -> None:
    """faultlab's own APIs and client kinds, which it loads without the installed metadata, are
    the entry points its pyproject.toml declares."""
    points = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    for group, lines in BUILTINS.items():
        declared = {k: v for k, v in points[group].items()}
        assert declared == dict(tuple(p.strip() for p in line.split("=")) for line in lines)


@pytest.mark.lab
def test_a_run_of_the_toy_client_against_the_emulated_toy_api_passes(tmp_path: Path) -> None:
    """`faultlab run` of tests/plugins/toy.yaml: the toy client kind reaches the emulator serving
    the toy API, which answers its turn, and the run passes."""
    done = run("-m", "faultlab", "run", "--runs-dir", str(tmp_path / "runs"), str(PROFILE),
               cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    (folder,) = (tmp_path / "runs").glob("*-toy-echo")
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    replies = [e for e in events if e.get("event") == "toy.reply"]
    assert [r.get("text") for r in replies] == ["You said: hello there"]
    # The records the toy kind brings join the vocabulary: every event of the run has a record,
    # and the report draws the toy's as the kind declares.
    checked = run("-m", "faultlab", "events", "check", str(folder))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    drawn = run("-c", f"""
from pathlib import Path
from faultlab.events import read_events
from faultlab.profile.client_kinds import client_kinds
from faultlab.report.sequence import drawing_of
client_kinds()
for e in read_events(Path({str(folder / "events.jsonl")!r})):
    if e.name.startswith("toy."):
        drawing, _ = drawing_of(e)
        print(e.name, drawing.lane, drawing.category)
""")
    assert drawn.returncode == 0, drawn.stderr
    lines = drawn.stdout.splitlines()
    assert "toy.reply client conversation" in lines and "toy.connected client setup" in lines, lines
