"""`python -m faultlab.browser SPEC`: the client of a profile's `client: {browser: ...}`, SPEC
being that section as JSON (faultlab.browser.spec.BrowserPage, `serve` made absolute)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from faultlab.browser.page import PageRun
from faultlab.browser.spec import BrowserPage
from faultlab.events import EventWriter
from faultlab.vocabulary.browser import BrowserEnd

if TYPE_CHECKING:
    from faultlab.browser.serve import Backend


async def open_page(spec: BrowserPage, backends: Mapping[str, Backend] | None = None) -> int:
    """Serve the page's folder (and `backends`, each under its prefix) when it has one, open it,
    and wait for its end; SIGTERM or SIGINT ends it as its timeout would, the browser closed
    first."""
    from faultlab.browser.serve import LabHttp

    env = dict(os.environ)
    run_dir = Path(env.get("FAULTLAB_RUN_DIR") or ".")
    events = EventWriter()
    server = LabHttp(spec.serve, backends) if spec.serve is not None or backends else None
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    try:
        if server is not None:
            env["FAULTLAB_PAGE_ORIGIN"] = f"http://127.0.0.1:{server.start()}"
        return await PageRun(spec, run_dir, events, env).run()
    except asyncio.CancelledError:
        events.announce(BrowserEnd("stopped", 143))
        return 143
    finally:
        if server is not None:
            server.close()
        events.close()


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m faultlab.browser SPEC_JSON")
    sys.exit(asyncio.run(open_page(BrowserPage.model_validate_json(sys.argv[1]))))


if __name__ == "__main__":
    main()
