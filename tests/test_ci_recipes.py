"""docs/ci's recipes: valid YAML, and every faultlab or make command they call exists with the
options they give it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from faultlab.cli import cli
from faultlab.jobs import parse_shard

from .conftest import REPO

RECIPES = sorted((REPO / "docs" / "ci").glob("*.y*ml"))
# CI variables as the recipes write them, with a value each (a shard number, a count).
VARIABLES = {r"\$\{\{ matrix\.shard \}\}": "1", r"\$\{\{ env\.SHARDS \}\}": "4",
             r"\$\{\{ env\.PROFILES \}\}": "profiles/", r"\$\(\(JOB_COMPLETION_INDEX \+ 1\)\)": "1",
             r"\$JOB_COMPLETION_INDEX": "0", r"\$CI_NODE_INDEX": "1", r"\$CI_NODE_TOTAL": "4",
             r"\$PROFILES": "profiles/"}


def strings(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in strings(v)]
    return []


def commands(recipe: Path) -> list[list[str]]:
    """The faultlab and make command lines in a recipe's strings, variables filled in."""
    found = []
    for text in strings(yaml.safe_load(recipe.read_text())):
        for pattern, value in VARIABLES.items():
            text = re.sub(pattern, value, text)
        for line in re.split(r"\n|&&|;", text):
            words = shlex.split(line.replace("exec ", ""))
            for i, word in enumerate(words[:-1]):  # a command has arguments (a name has none)
                if word in ("faultlab", "make") or word.endswith("/faultlab"):
                    found.append([Path(word).name, *words[i + 1:]])
                    break
    return found


def test_the_docs_describe_each_recipe_there_is() -> None:
    """Every recipe the README (or a page of docs/) points a user to is in docs/ci, where the
    tests below read it, and every recipe there is described."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]
    named = {name for page in pages
             for name in re.findall(r"docs/ci/([\w.-]+\.ya?ml)", page.read_text())}
    assert named, "the docs point to no CI recipe"
    assert named == {p.name for p in RECIPES}


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_a_recipes_commands_exist(recipe: Path) -> None:
    calls = commands(recipe)
    assert any(c[:2] == ["faultlab", "run"] for c in calls), calls
    targets = set(re.findall(r"^([a-z-]+):", (REPO / "Makefile").read_text(), re.M))
    for call in calls:
        if call[0] == "make":
            assert all(t in targets for t in call[1:] if "=" not in t), call
            continue
        command: click.Command = cli
        args = call[1:]
        while isinstance(command, click.Group):
            sub = command.get_command(click.Context(command), args[0])
            assert sub is not None, f"no command faultlab {args[0]} ({call})"
            command, args = sub, args[1:]
        options = {o for p in command.params for o in p.opts}
        for i, arg in enumerate(args):
            if arg.startswith("-"):
                assert arg.split("=")[0] in options, f"{arg} is no option of {call[:3]}"
            if i and args[i - 1] == "--shard":
                parse_shard(arg)


def test_the_kubernetes_job_runs_the_lab_image_privileged_one_shard_per_index() -> None:
    (job,) = [p for p in RECIPES if p.name == "kubernetes-job.yaml"]
    spec = yaml.safe_load(job.read_text())["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"]
    (container,) = spec["template"]["spec"]["containers"]
    assert container["image"] == "faultlab:latest"
    assert container["securityContext"]["privileged"] is True
    assert f"/{spec['completions']}" in " ".join(container["args"])
