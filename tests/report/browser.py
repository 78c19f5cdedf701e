"""Headless Chromium driven over the DevTools protocol, synchronously, for the tests and the
bench that look at report.html in a real browser.

The browser is the product's (faultlab.browser.chromium: its pipe, its PID namespace), in a
network namespace of its own too: it reaches no network. `unavailable()` says why it cannot run
here (no root, no chromium) so a caller can skip with the reason.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from faultlab.browser import chromium
from faultlab.browser.chromium import CLOSE_TIMEOUT_S, unavailable

FLAGS = ("--hide-scrollbars",)
# Seconds: a cold start of Debian's chromium takes about 1 s on 2 cores; a page a few hundred ms.
START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 30.0


class BrowserError(Exception):
    """The browser died, timed out, or answered a call with an error."""


class Browser:
    """One headless Chromium with one page, `width` x `height` CSS pixels at scale 1."""

    def __init__(self, width: int = 1400, height: int = 900) -> None:
        self.width, self.height = width, height
        self.errors: list[str] = []
        self.pid: int | None = None
        self._profile: Path | None = None
        self._to: int | None = None
        self._from: int | None = None
        self._buffer = b""
        self._next_id = 0
        self._session: str | None = None

    def __enter__(self) -> Browser:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        if (why := unavailable()) is not None:
            raise BrowserError(why)
        self._profile = Path(tempfile.mkdtemp(prefix="faultlab-chromium-"))
        # A network namespace of its own: a report page reaches nothing.
        spawned = chromium.spawn(self._profile, [*FLAGS, f"--window-size={self.width},{self.height}",
                                                 "about:blank"],
                                 self._profile / "chromium.log", os.environ, own_network=True)
        self.pid, self._to, self._from = spawned.pid, spawned.to_fd, spawned.from_fd
        target = self.call("Target.createTarget", url="about:blank", timeout_s=START_TIMEOUT_S)
        attached = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        self._session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)

    def log(self) -> str:
        """The browser's own output (stderr), for a failure's message."""
        if self._profile is None:
            return ""
        try:
            return (self._profile / "chromium.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    # The protocol.

    def call(self, method: str, timeout_s: float = CALL_TIMEOUT_S, **params: Any) -> dict[str, Any]:
        """Send one command (to the page once attached) and wait for its answer."""
        if self._to is None:
            raise BrowserError("the browser is not running")
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self._session is not None and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self._session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to, data):]
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._receive(deadline, method)
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self._note(reply)

    def _receive(self, deadline: float, waiting_for: str) -> dict[str, Any]:
        assert self._from is not None
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from], [], [], left)[0]:
                raise BrowserError(f"no answer to {waiting_for} in time\n{self.log()}")
            chunk = os.read(self._from, 1 << 20)
            if not chunk:
                raise BrowserError(f"the browser ended while waiting for {waiting_for}\n{self.log()}")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        reply: dict[str, Any] = json.loads(raw)
        return reply

    def _note(self, event: dict[str, Any]) -> None:
        """Keep what the page reported as an error: console.error, an uncaught exception, a
        browser log entry at level error (a blocked load, a policy violation)."""
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append("console.error: " + " ".join(
                str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append("exception: " + str(details.get("exception", {}).get("description")
                                                   or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())

    # What a test does with a page.

    def open(self, url: str) -> None:
        """Navigate the page to `url` (a file:// URL: the browser reaches nothing else)."""
        done = self.call("Page.navigate", url=url)
        if done.get("errorText"):
            raise BrowserError(f"cannot open {url}: {done['errorText']}")

    def open_rendered(self, url: str, timeout_s: float = 10.0) -> float:
        """Open a report page and wait until its script has drawn it; the milliseconds the
        script took (`document.body.dataset.rendered`)."""
        self.open(url)
        rendered = self.wait_for(f"document.URL === {json.dumps(url)} && document.body"
                                 " && document.body.dataset.rendered", timeout_s)
        return float(rendered)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        done = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                         awaitPromise=True)
        if "exceptionDetails" in done:
            raise BrowserError(f"{expression}: {done['exceptionDetails']}")
        return done.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout_s: float = 10.0, every_s: float = 0.02) -> Any:
        """The first truthy value of `expression`, polled; BrowserError past `timeout_s` (with
        the page's errors, which usually say why)."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"{expression} still false after {timeout_s:g} s; "
                                   f"page errors: {self.errors}")
            time.sleep(every_s)

    def screenshot(self, full_page: bool = False) -> bytes:
        """A PNG of the viewport (or of the whole page)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth,"
                                 " document.documentElement.scrollHeight]")
            params |= {"captureBeyondViewport": True,
                       "clip": {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}}
        return base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])

    def close(self) -> None:
        """Ask the browser to quit, then end it by its PID (unshare's) if it has not; its profile
        removed."""
        if self.pid is not None and self._to is not None:
            with contextlib.suppress(BrowserError, OSError):
                self.call("Browser.close", timeout_s=CLOSE_TIMEOUT_S)
        for fd in (self._to, self._from):
            if fd is not None:
                os.close(fd)
        self._to = self._from = None
        if self.pid is not None:
            chromium.end(self.pid)
            self.pid = None
        if self._profile is not None:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
