"""The one way reports become HTML: Jinja2 templates (faultlab/report/templates/) with their
scripts and styles inlined from faultlab/report/assets/, so that a page needs nothing but itself
(it opens from a CI artefact or an e-mail, with no network)."""

from __future__ import annotations

import functools
from importlib.resources import files
from typing import Any

import jinja2


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("faultlab.report", "templates"),
        autoescape=jinja2.select_autoescape(default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["asset"] = asset
    return env


def asset(name: str) -> str:
    """The text of an asset, for a template to inline (`{{ asset("timeline.js") | safe }}`)."""
    return files("faultlab.report").joinpath("assets", name).read_text()


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
