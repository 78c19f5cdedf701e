"""A web page in the lab: headless Chromium in the client's namespace opens it, and what the page
does becomes the run's events.

The browser trusts the run's CA in a store of its own (`NODE_EXTRA_CA_CERTS`, else
`SSL_CERT_FILE`: the same file other clients trust), resolves the service's names as every
client in the lab does (the run's /etc/hosts, or the lab's resolver), and hears the lab's
microphone: Chromium's fake capture device plays the run's utterances (`FAULTLAB_MIC_WAV`) once,
then silence. Autoplay and media permissions are granted.

Events, stamped with the DevTools protocol's own times (the kernel's monotonic clock, as the
run's): `browser.frame` per WebSocket message (faultlab.vocabulary.run.FrameLogged, the browser's
numbering of its sockets as `conn`), `browser.ws_open` / `browser.ws_closed` / `browser.ws_error`,
`browser.load`, console messages (a JSON object with an `event` is the page's own event, by its
name; any other line is `browser.console`), `browser.error` (an uncaught exception),
`browser.crash`, `browser.screenshot`, and `browser.end` (why, code). It ends when the page logs
its `done` event (exit code: the event's `code`, else 0), when `until` is true (0), at `timeout`
(`timeout_exit`), or when the page crashes (70). A screenshot is taken at the
end, and at the first uncaught exception.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from faultlab.browser import chromium
from faultlab.browser.devtools import DevTools, DevToolsError
from faultlab.browser.spec import BrowserPage
from faultlab.events import EventWriter
from faultlab.lab.process import BROWSER_DIR_PREFIX
from faultlab.protocols import recognising
from faultlab.protocols.base import Protocol
from faultlab.vocabulary import Record
from faultlab.vocabulary.browser import (
    BrowserConsole,
    BrowserCrash,
    BrowserEnd,
    BrowserError,
    BrowserLoad,
    BrowserOpen,
    BrowserScreenshot,
    BrowserStart,
    BrowserStarted,
    BrowserWsClosed,
    BrowserWsError,
    BrowserWsHandshake,
    BrowserWsOpen,
)
from faultlab.vocabulary.run import FrameLogged

CONSOLE_CHARS = 500  # of a console line that is not an event; the rest is cut
UNTIL_EVERY_S = 0.1
CRASHED = 70  # EX_SOFTWARE: the page's renderer crashed, or the browser ended


def monotonic_to_wall() -> float:
    """What to add to a DevTools time (CLOCK_MONOTONIC seconds, as Chromium's TimeTicks) to get
    a Unix time, as the run's events carry."""
    return time.time() - time.monotonic()


class PageRun:
    """One page, from the browser's start to its end."""

    def __init__(self, spec: BrowserPage, run_dir: Path, events: EventWriter,
                 env: dict[str, str]) -> None:
        self.spec = spec
        self.run_dir = run_dir
        self.events = events
        self.env = env
        self.offset = monotonic_to_wall()
        self.ending: asyncio.Future[tuple[str, int]] | None = None
        self.sockets: dict[str, int] = {}  # DevTools request id -> the page's socket number
        self.protocol: Protocol | None = None
        self.shot_error = False
        self.shots: set[asyncio.Task[None]] = set()

    def emit_at(self, monotonic_s: float | None, what: Record) -> None:
        """An event at a DevTools time (None: now)."""
        ts = time.time() if monotonic_s is None else monotonic_s + self.offset
        self.events.announce_at(ts, what)

    def end(self, why: str, code: int) -> None:
        if self.ending is not None and not self.ending.done():
            self.ending.set_result((why, code))

    # What the browser tells.

    def on_event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method", ""), message.get("params", {})
        handler = getattr(self, "_on_" + method.replace(".", "_"), None)
        if handler is not None:
            handler(params)

    def _on_Network_webSocketCreated(self, p: dict[str, Any]) -> None:
        self.sockets[p["requestId"]] = n = len(self.sockets) + 1
        self.emit_at(None, BrowserWsOpen(n, _redacted_url(p.get("url", ""))))

    def _on_Network_webSocketHandshakeResponseReceived(self, p: dict[str, Any]) -> None:
        response = p.get("response", {})
        self.emit_at(p.get("timestamp"), BrowserWsHandshake(self.sockets.get(p["requestId"]),
                                                            response.get("status")))

    def _on_Network_webSocketFrameSent(self, p: dict[str, Any]) -> None:
        self._frame(p, "client")

    def _on_Network_webSocketFrameReceived(self, p: dict[str, Any]) -> None:
        self._frame(p, "server")

    def _frame(self, p: dict[str, Any], sender: str) -> None:
        response = p.get("response", {})
        opcode, data = response.get("opcode"), response.get("payloadData", "")
        raw: bytes | str = data
        if opcode == 2:
            with contextlib.suppress(ValueError):
                raw = base64.b64decode(data)
        described = self._describe(raw) if opcode in (1, 2) else {}
        kind = str(described.pop("kind", "") or "")
        size = len(raw.encode() if isinstance(raw, str) else raw)
        self.events.announce_at(p["timestamp"] + self.offset, FrameLogged(
            "browser", "client" if sender == "client" else "server",
            self.sockets.get(p["requestId"]), kind, size, extra={"opcode": opcode, **described}))

    def _describe(self, raw: bytes | str) -> dict[str, Any]:
        if self.protocol is None:
            try:
                message = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                return {}
            if not isinstance(message, dict):
                return {}
            self.protocol = recognising(message)
        return dict(self.protocol.describe(raw))

    def _on_Network_webSocketClosed(self, p: dict[str, Any]) -> None:
        self.emit_at(p.get("timestamp"), BrowserWsClosed(self.sockets.get(p["requestId"])))

    def _on_Network_webSocketFrameError(self, p: dict[str, Any]) -> None:
        self.emit_at(p.get("timestamp"), BrowserWsError(self.sockets.get(p["requestId"]),
                                                        p.get("errorMessage")))

    def _on_Page_loadEventFired(self, p: dict[str, Any]) -> None:
        self.emit_at(p.get("timestamp"), BrowserLoad())

    def _on_Runtime_consoleAPICalled(self, p: dict[str, Any]) -> None:
        ts = p.get("timestamp", time.time() * 1000) / 1000  # Runtime's times are Unix ms
        args = p.get("args", [])
        own = _page_event(args)
        if own is not None:
            name, fields = own
            self.events.emit_at(ts, name, **fields)
            if name == self.spec.done:
                code = fields.get("code", 0)
                self.end("done", code if isinstance(code, int) else 1)
            return
        text = " ".join(str(a.get("value", a.get("description", ""))) for a in args)
        self.events.announce_at(ts, BrowserConsole(p.get("type"), text[:CONSOLE_CHARS]))

    def _on_Runtime_exceptionThrown(self, p: dict[str, Any]) -> None:
        details = p.get("exceptionDetails", {})
        text = str(details.get("exception", {}).get("description") or details.get("text"))
        self.events.announce_at(p.get("timestamp", time.time() * 1000) / 1000,
                                BrowserError(text[:CONSOLE_CHARS]))
        self.shot_error = True

    def _on_Inspector_targetCrashed(self, p: dict[str, Any]) -> None:
        self.emit_at(None, BrowserCrash())
        self.end("crash", CRASHED)

    # The run.

    async def run(self) -> int:
        # In the temp dir, named with this pid: `faultlab lab gc` removes it after a SIGKILL.
        work = Path(tempfile.mkdtemp(prefix=f"{BROWSER_DIR_PREFIX}{os.getpid()}-"))
        self.ending = asyncio.get_running_loop().create_future()
        spawned: chromium.Spawned | None = None
        devtools: DevTools | None = None
        try:
            trusted = [Path(p) for p in (self.env.get("NODE_EXTRA_CA_CERTS")
                                         or self.env.get("SSL_CERT_FILE"),) if p]
            await asyncio.to_thread(chromium.trust, work, trusted)
            spawned = chromium.spawn(work, list(self._flags()), self.run_dir / "browser.log",
                                     self.env)
            devtools = DevTools(spawned.to_fd, spawned.from_fd)
            self.emit_at(None, BrowserStart(spawned.pid, str(work)))
            return await self._drive(devtools)
        finally:
            if devtools is not None:
                with contextlib.suppress(DevToolsError):
                    await devtools.call("Browser.close", timeout_s=chromium.CLOSE_TIMEOUT_S)
                devtools.close()
            if spawned is not None:
                await asyncio.to_thread(chromium.end, spawned.pid)
            shutil.rmtree(work, ignore_errors=True)

    def _flags(self) -> Iterator[str]:
        width, height = self.spec.viewport
        yield f"--window-size={width},{height}"
        yield "--autoplay-policy=no-user-gesture-required"
        yield "--use-fake-ui-for-media-stream"
        yield "--use-fake-device-for-media-stream"
        mic = self.env.get("FAULTLAB_MIC_WAV")
        if mic:
            # Once, then silence (looped, the request would be said again and again).
            yield f"--use-file-for-fake-audio-capture={mic}%noloop"
        yield "about:blank"

    async def _drive(self, devtools: DevTools) -> int:
        assert self.ending is not None
        target = await devtools.call("Target.createTarget", url="about:blank")
        attached = await devtools.call("Target.attachToTarget", targetId=target["targetId"],
                                       flatten=True)
        devtools.session = attached["sessionId"]
        listening = asyncio.create_task(self._listen(devtools))
        try:
            for domain in ("Page", "Runtime", "Network", "Inspector"):
                await devtools.call(f"{domain}.enable")
            url = self.spec.url or f"{self.env['FAULTLAB_PAGE_ORIGIN']}{self.spec.path}"
            self.emit_at(None, BrowserOpen(_redacted_url(url)))
            opened = await devtools.call("Page.navigate", url=url)
            if opened.get("errorText"):
                self.emit_at(None, BrowserError(f"cannot open the page: {opened['errorText']}"))
                why, code = "unreachable", CRASHED
            else:
                why, code = await self._until_end(devtools)
            await self._screenshot(devtools, "browser-end.png")
            self.emit_at(None, BrowserEnd(why, code))
            return code
        finally:
            listening.cancel()

    async def _listen(self, devtools: DevTools) -> None:
        async for message in devtools.events():
            self.on_event(message)
            if self.shot_error:
                self.shot_error = False
                shot = asyncio.create_task(self._screenshot(devtools, "browser-error.png", once=True))
                self.shots.add(shot)
                shot.add_done_callback(self.shots.discard)
        self.end("browser ended", CRASHED)

    async def _until_end(self, devtools: DevTools) -> tuple[str, int]:
        """One deadline, `timeout`, from the page's opening: its load, its `start` expressions
        and its end (its done event, `until`, or a crash, which may come at any point)."""
        assert self.ending is not None
        script = asyncio.create_task(self._script(devtools))
        try:
            return await asyncio.wait_for(asyncio.shield(self.ending), self.spec.timeout)
        except TimeoutError:
            return "timeout", self.spec.timeout_exit
        finally:
            script.cancel()

    async def _script(self, devtools: DevTools) -> None:
        """Wait for the load, run `start` in order, then poll `until` (when given)."""
        await self._loaded(devtools)
        for expression in self.spec.start:
            value = await self._evaluate(devtools, expression)
            self.emit_at(None, BrowserStarted(expression[:120], str(value)[:120]))
        if self.spec.until:
            await self._poll_until(devtools)

    async def _loaded(self, devtools: DevTools) -> None:
        while await self._evaluate(devtools, "document.readyState") != "complete":
            await asyncio.sleep(UNTIL_EVERY_S)

    async def _poll_until(self, devtools: DevTools) -> None:
        assert self.spec.until is not None
        while not await self._evaluate(devtools, self.spec.until):
            await asyncio.sleep(UNTIL_EVERY_S)
        self.end("until", 0)

    async def _evaluate(self, devtools: DevTools, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited); an exception's
        text is told as an event, and the value is then None."""
        try:
            done = await devtools.call("Runtime.evaluate", expression=expression,
                                       returnByValue=True, awaitPromise=True)
        except DevToolsError as exc:
            self.emit_at(None, BrowserError(f"{expression[:80]}: {exc}"))
            return None
        if "exceptionDetails" in done:
            details = done["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.emit_at(None, BrowserError(f"{expression[:80]}: {text}"[:CONSOLE_CHARS]))
            return None
        return done.get("result", {}).get("value")

    async def _screenshot(self, devtools: DevTools, name: str, once: bool = False) -> None:
        path = self.run_dir / name
        if once and path.exists():
            return
        try:
            shot = await devtools.call("Page.captureScreenshot", format="png", timeout_s=10)
        except DevToolsError:
            return
        path.write_bytes(base64.b64decode(shot["data"]))
        self.emit_at(None, BrowserScreenshot(name))


def _page_event(args: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """A console message that is one JSON object with an `event` name: the page's own event."""
    if len(args) != 1 or args[0].get("type") != "string":
        return None
    text = args[0].get("value", "")
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("event"), str):
        return None
    name = data.pop("event")
    data.pop("ts", None)
    return name, data


def _redacted_url(url: str) -> str:
    """A URL without its query's values (a `key=` in a Live API URL is a secret)."""
    base, _, query = url.partition("?")
    if not query:
        return base
    return base + "?" + "&".join(part.split("=", 1)[0] + "=..." for part in query.split("&"))



