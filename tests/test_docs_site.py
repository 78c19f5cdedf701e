"""The documentation site (mkdocs.yml, `make docs`): it builds with every link checked, and its
reference pages, written from the code, list every fault, command, option and profile field the
code has, each with a description."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import click

from faultlab.cli import cli
from faultlab.faults import FAULTS
from faultlab.profile.schema import profile_schema
from faultlab.reference import faults_page, profile_page


def commands(group: click.Command, path: str = "faultlab") -> list[tuple[str, click.Command]]:
    """Every command under the group, by its full name."""
    found = [(path, group)]
    if isinstance(group, click.Group):
        for name, command in sorted(group.commands.items()):
            if not command.hidden:
                found += commands(command, f"{path} {name}")
    return found


def test_the_site_builds_strictly_with_its_reference_pages(docs_site: Path) -> None:
    for page in ("index.html", "design.html", "reference/cli.html", "reference/faults.html",
                 "reference/profile.html", "reference/events.html", "search/search_index.js"):
        assert (docs_site / page).is_file(), page
    assert "fonts.googleapis" not in (docs_site / "index.html").read_text()  # it reads offline


def test_the_cli_page_lists_every_command_and_option_each_with_help(docs_site: Path) -> None:
    page = (docs_site / "reference" / "cli.html").read_text()
    for name, command in commands(cli):
        assert name in page, f"{name} is not on the command line's page"
        assert (command.help or "").strip(), f"{name} has no help"
        if not isinstance(command, click.Group):  # a command says how it ends, on the page too
            codes = re.search(r"^Exit codes: .+", inspect.cleandoc(command.help or ""), re.M | re.S)
            assert codes, f"{name}'s help names no exit codes"
            assert " ".join(codes.group(0).split()[:4]) in " ".join(page.split()), name
        for option in command.params:
            if isinstance(option, click.Option) and not option.hidden:
                assert (option.help or "").strip(), f"{name} {option.opts[0]} has no help"
                assert all(flag in page for flag in option.opts), f"{name} {option.opts}"


def test_the_faults_page_lists_every_fault_and_parameter_each_fault_described() -> None:
    page = faults_page()
    for name in FAULTS:
        fault = FAULTS[name]
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert (fault.__doc__ or "").strip() and fault.mechanism, f"{name} is not described"
        for field in fault.Params.model_json_schema(by_alias=True).get("properties", {}):
            assert f"| `{field}` |" in section, f"{name}.{field} is not on the faults page"


def test_every_profile_field_and_fault_parameter_has_a_description() -> None:
    """Each field a profile may write (a fault's parameters and an expectation's fields too) says
    what it is: the schema's `description`, from the field's docstring, is the reference's."""
    schema = profile_schema()
    sections = {"the profile": schema, **schema["$defs"]}
    bare = [f"{section}.{field}" for section, node in sections.items()
            for field, spec in node.get("properties", {}).items() if not spec.get("description")]
    assert not bare, f"fields without a docstring: {bare}"


def test_the_profile_page_lists_every_field_of_every_section() -> None:
    schema = profile_schema()
    page = profile_page()
    sections = re.split(r"\n## ", page)
    tables = {s.split("\n", 1)[0]: s for s in sections[1:]}

    def listed(title: str, node: dict[str, Any]) -> None:
        for field in node.get("properties", {}):
            assert f"| `{field}` |" in tables[title], f"{title}.{field} is not on the page"

    listed("The profile", schema)
    reached = [title for title in tables if title != "The profile"]
    assert {"Network", "Target", "Client", "RawStep", "Trigger", "Space"} <= set(reached)
    for title in reached:
        listed(title, schema["$defs"][title])
