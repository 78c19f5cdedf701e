"""The profile's JSON Schema (`faultlab schema`, faultlab/profiles/profile.schema.json): the file
is what the models say, every shipped profile names it and holds to it, and on hostile profiles
the schema and the loader agree: what one refuses, so does the other."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
import yaml

from faultlab.errors import ProfileError
from faultlab.profile import parse_profile
from faultlab.profile.schema import SCHEMA_FILE, profile_schema, schema_text, shipped_schema

from .conftest import REPO

PROFILES = REPO / "faultlab" / "profiles"
SHIPPED = sorted(PROFILES.rglob("*.yaml"))
COMMENT = "# yaml-language-server: $schema="


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = profile_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_schema_file_is_what_the_models_say() -> None:
    assert shipped_schema() == schema_text(), "the models changed: `make schema` writes it anew"


def test_every_shipped_profile_names_the_schema_and_holds_to_it(
        validator: jsonschema.Draft202012Validator) -> None:
    assert len(SHIPPED) > 50
    for path in SHIPPED:
        first = path.read_text().splitlines()[0]
        assert first.startswith(COMMENT), f"{path}: its first line names the schema"
        named = (path.parent / first.removeprefix(COMMENT)).resolve()
        assert named == PROFILES / SCHEMA_FILE, f"{path}: {first}"
        errors = [f"{list(e.absolute_path)}: {e.message}"
                  for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert not errors, f"{path}: {errors}"


def client(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda p: p.update(client=fields)


def step(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda p: p["timeline"][0].update(fields)


def do(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda p: p["timeline"][0]["do"].update(fields)


# Each change to silent-loss.yaml, and whether a profile with it is valid.
HOSTILE: dict[str, tuple[Callable[[dict[str, Any]], None], bool]] = {
    "as shipped": (lambda p: None, True),
    "a misspelt field": (lambda p: p.update(timout="15s"), False),
    "a duration without a unit": (lambda p: p.update(timeout=15), False),
    "a duration in words": (lambda p: p.update(timeout="15 seconds"), False),
    "a string for a boolean": (lambda p: p.update(proxy="yes"), False),
    "a string for a port": (lambda p: p["target"].update(port="8765"), False),
    "a port out of range": (lambda p: p["target"].update(port=70000), False),
    "a fraction for a port": (lambda p: p["target"].update(port=8765.5), False),
    "a name that starts with a dash": (lambda p: p.update(name="-x"), False),
    "no name": (lambda p: p.update(name=None), False),
    "no client": (lambda p: p.pop("client"), False),
    "a host list as a string": (lambda p: p.update(hosts="a.test"), False),
    "a timeline as a mapping": (lambda p: p.update(timeline={}), False),
    "an unknown fault": (do(fault="dorp"), False),
    "a fault's field misspelt": (do(directoin="both"), False),
    "a fault's field out of its choices": (do(direction="sideways"), False),
    "a step without a fault": (lambda p: p["timeline"][0]["do"].pop("fault"), False),
    "latency without its latency_ms": (step(do={"fault": "latency", "jitter_ms": 5}), False),
    "a path with no impairment": (step(do={"fault": "path", "direction": "both"}), False),
    "a path with a rate": (step(do={"fault": "path", "rate_kbps": 64}), True),
    "a freeze of one connection": (step(do={"fault": "freeze", "connection": "first"}), True),
    "a thaw of one connection (it ends steps)": (
        step(do={"fault": "thaw", "connection": "first"}), False),
    "a trigger of two kinds": (step(when={"event": "client.connected", "at": "1s"}), False),
    "a trigger's where without an event": (step(when={"at": "1s", "where": {"a": 1}}), False),
    "a step id that starts with a digit": (step(id="1cut"), False),
    "a negative delay": (step(after="-1s"), False),
    "an unknown expectation": (lambda p: p["expect"].append({"evnt": "x"}), False),
    "an expectation with a stray field": (lambda p: p["expect"][0].update(foo=1), False),
    "an expectation of two kinds": (lambda p: p["expect"][0].update(exit_code=1), False),
    "a client of two kinds": (client(builtin="ws-client", command=["x"]), False),
    "a client of no kind": (client(args=["x"]), False),
    "a client that is an image alone": (client(image="alpine"), True),
    "an unknown builtin": (client(builtin="nope"), False),
    "a command as a string": (client(command="ls -l"), False),
    "an unknown personality": (lambda p: p.update(target={"emulator": {"personality": "x"}}), False),
    "the emulator": (lambda p: p.update(target={"emulator": {"time_scale": 0.5}}), True),
    "a cassette by its file": (lambda p: p.update(target={"cassette": "R0.cassette.jsonl"}), True),
    "a cassette's unknown personality": (
        lambda p: p.update(target={"cassette": {"file": "x", "personality": "x"}}), False),
}


@pytest.mark.parametrize("change", HOSTILE, ids=list(HOSTILE))
def test_the_schema_and_the_loader_refuse_the_same_profiles(
        change: str, validator: jsonschema.Draft202012Validator) -> None:
    edit, valid = HOSTILE[change]
    profile = copy.deepcopy(yaml.safe_load((PROFILES / "silent-loss.yaml").read_text()))
    edit(profile)
    schema_errors = [e.message for e in validator.iter_errors(profile)]
    assert (not schema_errors) == valid, schema_errors
    try:
        # Read as if beside the shipped cassettes, which a cassette's file names.
        parse_profile(json.dumps(profile), "p.yaml", PROFILES / "cassettes" / "p.yaml")
    except ProfileError as exc:
        assert not valid, str(exc)
    else:
        assert valid, "the loader took it"
