"""mkdocs hooks: the reference pages faultlab.reference writes from the code join the site as
it is built (nothing generated is kept in docs/), and the offline search's Web Worker shim comes
from npm's package (docs-build/), not a CDN."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from faultlab.reference import pages

SHIM = Path(__file__).parents[1] / "docs-build" / "node_modules" / "iframe-worker" / "shim" / "index.js"
SHIM_IN_SITE = "assets/iframe-worker/shim.js"  # mkdocs.yml's extra.polyfills names it


def on_files(files: Files, config: Any) -> Files:
    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    return files


def on_post_build(config: Any) -> None:
    if not SHIM.is_file():
        raise PluginError(f"{SHIM} is missing: make install (npm ci --prefix docs-build)")
    target = Path(config["site_dir"]) / SHIM_IN_SITE
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SHIM, target)
