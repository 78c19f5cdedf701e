"""report.html: one run as a page that needs nothing but itself, its verdict and expectations
at the top, each linked to the moment it was judged on, over a swimlane view of the run (drawn
in the browser by assets/timeline.js, moved by assets/controls.js, from the view's data embedded
as JSON)."""

from __future__ import annotations

import json
from pathlib import Path

from faultlab.private import (
    json_default,
    redact,
    redact_text,
    remember_env_secrets,
    write_private,
)
from faultlab.report.html import render
from faultlab.report.record import PAGE_FILE
from faultlab.report.sequence import View


def render_run_page(view: View) -> str:
    """The page of one run's view, scripts, styles and data inlined, and every key the run met
    redacted before it is written into the HTML (a placeholder is then escaped as text)."""
    remember_env_secrets()
    # A run's own events can carry values JSON has no spelling for (a path, a timestamp); they
    # are embedded as events.jsonl writes them: as their text.
    # A number JSON cannot spell (a client's NaN) would stop the page's script: it is no number.
    data = redact(json.loads(json.dumps(view.to_dict(), default=json_default),
                             parse_constant=lambda _: None))
    used = {item.category for item in view.items}
    legend = {name: colour for name, colour in view.palette.items() if name in used}
    files = [name for name in data["files"] if name != PAGE_FILE]  # not a link to itself
    return render("run.html.j2", view=data, data=data, frames=view.frames, legend=legend,
                  files=files)


def write_run_page(view: View, path: Path) -> Path:
    """The page written to `path` (a run folder's report.html), private; redacted once more as
    a whole, as every artifact is."""
    write_private(path, redact_text(render_run_page(view)))
    return path
