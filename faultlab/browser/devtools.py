"""The DevTools protocol over the browser's pipe, for asyncio: commands and their answers, and
the events in the order the browser sent them.

A message is JSON ended by NUL. Commands to a page carry the session id that
`Target.attachToTarget` (flatten) gave; an answer carries the command's id; anything else is an
event, queued for `events()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from typing import Any

# Seconds: a cold start of Debian's chromium takes about 1 s on 2 cores; a command a few ms.
CALL_TIMEOUT_S = 30.0


class DevToolsError(Exception):
    """The browser ended, did not answer in time, or answered a command with an error."""


class DevTools:
    def __init__(self, to_fd: int, from_fd: int) -> None:
        self._to = to_fd
        self._from = from_fd
        os.set_blocking(from_fd, False)
        self._buffer = b""
        self._next_id = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.session: str | None = None
        self.ended = False
        asyncio.get_running_loop().add_reader(from_fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._from, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._end()
            return
        self._buffer += chunk
        while b"\0" in self._buffer:
            raw, _, self._buffer = self._buffer.partition(b"\0")
            message: dict[str, Any] = json.loads(raw)
            waiting = self._waiting.pop(message.get("id", -1), None)
            if waiting is not None:
                if not waiting.done():
                    waiting.set_result(message)
            elif "method" in message:
                self._events.put_nowait(message)

    def _end(self) -> None:
        """The browser closed its end: every waiting command fails, the events end."""
        if self.ended:
            return
        self.ended = True
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self._from)
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(DevToolsError("the browser ended"))
        self._waiting.clear()
        self._events.put_nowait(None)

    async def call(self, method: str, timeout_s: float = CALL_TIMEOUT_S,
                   **params: Any) -> dict[str, Any]:
        """Send one command (to the attached page, but for the browser's own domains) and wait
        for its result."""
        if self.ended:
            raise DevToolsError(f"{method}: the browser has ended")
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self.session is not None and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[self._next_id] = answer
        data = json.dumps(message).encode() + b"\0"
        try:
            while data:
                data = data[os.write(self._to, data):]
        except OSError as exc:
            self._waiting.pop(message["id"], None)
            raise DevToolsError(f"{method}: {exc}") from exc
        try:
            reply = await asyncio.wait_for(answer, timeout_s)
        except TimeoutError:
            self._waiting.pop(message["id"], None)
            raise DevToolsError(f"no answer to {method} in {timeout_s:g} s") from None
        if "error" in reply:
            raise DevToolsError(f"{method}: {reply['error'].get('message', reply['error'])}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """The browser's events as they come, until it ends."""
        while (event := await self._events.get()) is not None:
            yield event

    def close(self) -> None:
        self._end()
        for fd in (self._to, self._from):
            with contextlib.suppress(OSError):
                os.close(fd)
