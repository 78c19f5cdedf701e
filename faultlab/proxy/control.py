"""The runner's end of the proxy's control channel: JSON lines over a unix socket.

A unix socket is a path in the file system, so it joins the runner (host namespace) and the proxy
(router namespace) without any network.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from pathlib import Path
from typing import Any

from faultlab.errors import MechanismError


class ProxyControl:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)

    async def connect(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            try:
                self._reader, self._writer = await asyncio.open_unix_connection(str(self.path))
                return
            except OSError:
                if loop.time() > deadline:
                    raise MechanismError(f"the proxy's control socket {self.path} never opened") from None
                await asyncio.sleep(0.02)

    async def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its reply; a refusal raises MechanismError."""
        if self._reader is None or self._writer is None:
            raise MechanismError("the proxy's control channel is not connected")
        async with self._lock:
            self._writer.write((json.dumps({"id": next(self._ids), "op": op, **fields}) + "\n").encode())
            await self._writer.drain()
            line = await self._reader.readline()
        if not line:
            raise MechanismError("the proxy closed its control channel (see proxy.log)")
        reply: dict[str, Any] = json.loads(line)
        if not reply.get("ok"):
            raise MechanismError(f"the proxy refused {op}: {reply.get('error')}")
        return reply

    async def request(self, op: str, step: str, fault: str, params: dict[str, Any]) -> dict[str, Any]:
        reply = await self.call(op, step=step, fault=fault, params=params)
        details: dict[str, Any] = reply.get("details", {})
        return details

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
