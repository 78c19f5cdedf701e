"""Reaching a Live API endpoint with the official SDK, and timing what it sends.

The real service (Developer API) needs GOOGLE_API_KEY; an emulator is reached by its base URL and
the CA it serves with, as an unmodified client would be (`faultlab.tls.client_environment`
names the same two things). The key goes to the SDK only, and every text shown is redacted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from faultlab.errors import FaultlabError
from faultlab.private import redact_text, remember_secrets, secrets_in_env

if TYPE_CHECKING:
    from google import genai
    from google.genai import types
    from google.genai.live import AsyncSession

# The Developer API model of the field measurements (docs/live-server-behaviour.md).
DEFAULT_MODEL = "gemini-3.8-live"
REAL_SERVICE = "the Gemini Developer API"
# An emulator wants some key and takes any; the real service's comes from the environment only.
STAND_IN_KEY = "faultlab-calibrate"

Received = tuple[float, "types.LiveServerMessage"]


class EndpointError(FaultlabError):
    """The endpoint could not be reached, or did not answer a fresh session's setup."""


@dataclass(frozen=True)
class Endpoint:
    """Where the probes connect: a base URL (None: the real service), its CA, the model."""

    base_url: str | None
    ca: Path | None
    model: str
    timeout_s: float
    key: str = field(repr=False)

    @classmethod
    def from_options(cls, base_url: str | None, ca: Path | None, model: str, timeout_s: float,
                     env: Mapping[str, str] = os.environ) -> Endpoint:
        """The endpoint the options name, with the key from `env`; ValueError when the real
        service is meant and the environment has no key."""
        keys = secrets_in_env(env)
        parts = urlsplit(base_url or "")
        if base_url is not None and (parts.scheme not in ("http", "https", "ws", "wss")
                                     or not parts.netloc):
            raise ValueError(f"--base-url {redact_text(base_url)!r}: write e.g. "
                             "https://localhost:8443")
        if base_url is None and not keys:
            raise ValueError("the real service needs its key in the environment (GOOGLE_API_KEY, "
                             "or OPENAI_API_KEY; or give --base-url and --ca of an emulator)")
        remember_secrets(keys)
        return cls(base_url.rstrip("/") if base_url else None, ca, model, timeout_s,
                   keys[0] if keys else STAND_IN_KEY)

    def describe(self) -> str:
        return redact_text(self.base_url) if self.base_url else REAL_SERVICE

    def client(self) -> genai.Client:
        """An SDK client for this endpoint (Developer API, whatever the environment says)."""
        from google import genai
        from google.genai import types

        options: dict[str, Any] = {}
        if self.base_url:
            options["base_url"] = self.base_url
        if self.ca is not None:
            # The SDK reads SSL_CERT_FILE only when it builds its context; given one, it uses it.
            options["async_client_args"] = {"ssl": ssl.create_default_context(cafile=self.ca)}
        return genai.Client(api_key=self.key, vertexai=False,
                            http_options=types.HttpOptions(**options))


def failure(exc: BaseException, timeout_s: float) -> str:
    """What a failed connection attempt met, in a few words (redacted)."""
    from google.genai import errors
    from websockets.exceptions import InvalidHandshake, InvalidStatus

    if isinstance(exc, errors.APIError):
        # A close during connect() carries the close frame's reason as the error's details.
        reason = exc.details if isinstance(exc.details, str) else exc.message
        text = f"closed {exc.code}" + (f": {reason}" if reason else "")
    elif isinstance(exc, InvalidStatus):
        text = f"HTTP {exc.response.status_code} to the WebSocket upgrade"
    elif isinstance(exc, ssl.SSLCertVerificationError):
        text = f"TLS: {exc.verify_message} (an emulator's CA goes in --ca)"
    elif isinstance(exc, ssl.SSLError):
        text = f"TLS: {exc.reason or exc}"
    elif isinstance(exc, TimeoutError):
        text = f"no answer within {timeout_s:g}s"
    elif isinstance(exc, ConnectionRefusedError):
        text = "connection refused"
    elif isinstance(exc, socket.gaierror):
        text = f"cannot resolve the host ({exc.strerror})"
    elif isinstance(exc, OSError):
        text = exc.strerror or str(exc) or type(exc).__name__
    elif isinstance(exc, InvalidHandshake):
        text = f"not a WebSocket server ({exc})"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return redact_text(text)


def connect_errors() -> tuple[type[BaseException], ...]:
    """What a connection attempt raises when the endpoint refuses or cannot be reached."""
    from google.genai import errors
    from websockets.exceptions import InvalidHandshake, InvalidURI

    return (errors.APIError, InvalidHandshake, InvalidURI, OSError, TimeoutError)


class Arrivals[M]:
    """What a connection received, each message with the time it arrived, and the end that
    stopped it (`ended`); `first` waits for the one a probe wants."""

    def __init__(self) -> None:
        self.received: list[tuple[float, M]] = []
        self.ended: BaseException | None = None
        self._more = asyncio.Event()

    def arrived(self, message: M) -> None:
        self.received.append((asyncio.get_running_loop().time(), message))
        self._more.set()

    def end(self, exc: BaseException) -> None:
        self.ended = exc
        self._more.set()

    def mark(self) -> int:
        """Where the messages from now on begin (for `first`)."""
        return len(self.received)

    async def first(self, wanted: Callable[[M], bool], since: int,
                    timeout_s: float) -> tuple[float, M] | None:
        """The first message from `since` on that is `wanted`, waiting up to `timeout_s`; None
        if none came (or the connection ended)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        index = since
        while True:
            for at, message in self.received[index:]:
                if wanted(message):
                    return at, message
            index = len(self.received)
            if self.ended is not None or loop.time() >= deadline:
                return None
            self._more.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._more.wait(), deadline - loop.time())


class Live(Arrivals["types.LiveServerMessage"]):
    """One open connection: its SDK session, when it opened, and every message it received with
    the time it arrived (read all along, as a client must)."""

    def __init__(self, session: AsyncSession, stack: contextlib.AsyncExitStack,
                 started: float, opened: float) -> None:
        super().__init__()
        self.session = session
        self.started = started
        self.opened = opened
        self._stack = stack
        self._closed_at: float | None = None
        self._reader = asyncio.create_task(self._read())

    @property
    def setup_s(self) -> float:
        """From the start of the attempt to the SDK's connect() returning (setupComplete)."""
        return self.opened - self.started

    @classmethod
    async def open(cls, client: genai.Client, endpoint: Endpoint,
                   config: types.LiveConnectConfig) -> Live:
        """Connect and wait for setupComplete (inside the SDK's connect(), as for any client)."""
        loop = asyncio.get_running_loop()
        stack = contextlib.AsyncExitStack()
        started = loop.time()
        try:
            async with asyncio.timeout(endpoint.timeout_s):
                session = await stack.enter_async_context(
                    client.aio.live.connect(model=endpoint.model, config=config))
        except BaseException:
            await stack.aclose()
            raise
        return cls(session, stack, started, loop.time())

    async def _read(self) -> None:
        try:
            while True:  # the SDK's iterator ends after each turnComplete
                async for message in self.session.receive():
                    self.arrived(message)
        except Exception as exc:  # the connection ended: the probes see it as no answer
            self.end(exc)

    async def close(self) -> float:
        """Close the connection (close 1000, answered by the server), once; when that was done."""
        if self._closed_at is None:
            self._reader.cancel()
            await asyncio.wait({self._reader})
            with contextlib.suppress(Exception):
                await self._stack.aclose()
            self._closed_at = asyncio.get_running_loop().time()
        return self._closed_at

    async def __aenter__(self) -> Live:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
