"""A browser client's own account, as typed records (faultlab.browser.page): the browser, its
page, its sockets (their frames are FrameLogged's `browser.frame`), its console and failures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from faultlab.vocabulary.base import Drawing, Record


@dataclass(frozen=True)
class BrowserStart(Record):
    """The browser started, with its `profile` folder."""

    NAME: ClassVar[str] = "browser.start"
    pid: int
    profile: str


@dataclass(frozen=True)
class BrowserOpen(Record):
    """The browser opens the page at `url`."""

    NAME: ClassVar[str] = "browser.open"
    url: str


@dataclass(frozen=True)
class BrowserLoad(Record):
    """The page loaded."""

    NAME: ClassVar[str] = "browser.load"


@dataclass(frozen=True)
class BrowserStarted(Record):
    """A start expression of the spec ran, and gave `value`."""

    NAME: ClassVar[str] = "browser.started"
    expression: str
    value: str


@dataclass(frozen=True)
class BrowserEnd(Record):
    """The page's run ended (`why`: done, crash, a timeout...) with the client's exit code."""

    NAME: ClassVar[str] = "browser.end"
    why: str
    code: int


@dataclass(frozen=True)
class BrowserWsOpen(Record):
    """The page opened its socket number `conn` to `url`."""

    NAME: ClassVar[str] = "browser.ws_open"
    conn: int
    url: str


@dataclass(frozen=True)
class BrowserWsHandshake(Record):
    """Socket `conn`'s handshake answered with HTTP `status`."""

    NAME: ClassVar[str] = "browser.ws_handshake"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"conn", "status"})
    conn: int | None = None
    status: int | None = None


@dataclass(frozen=True)
class BrowserWsClosed(Record):
    """Socket `conn` closed."""

    NAME: ClassVar[str] = "browser.ws_closed"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"conn"})
    DRAWN: ClassVar[Drawing] = Drawing("client", "close")
    conn: int | None = None


@dataclass(frozen=True)
class BrowserWsError(Record):
    """Socket `conn` failed, with the browser's `message`."""

    NAME: ClassVar[str] = "browser.ws_error"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"conn", "message"})
    DRAWN: ClassVar[Drawing] = Drawing("client", "loss")
    conn: int | None = None
    message: str | None = None


@dataclass(frozen=True)
class BrowserConsole(Record):
    """A line the page logged that is none of the client's events."""

    NAME: ClassVar[str] = "browser.console"
    ALWAYS: ClassVar[frozenset[str]] = frozenset({"level"})
    level: str | None = None
    text: str = ""


@dataclass(frozen=True)
class BrowserError(Record):
    """The page failed: an exception, a page that would not open, an expression that threw."""

    NAME: ClassVar[str] = "browser.error"
    DRAWN: ClassVar[Drawing] = Drawing("client", "refused")
    text: str


@dataclass(frozen=True)
class BrowserCrash(Record):
    """The page crashed."""

    NAME: ClassVar[str] = "browser.crash"
    DRAWN: ClassVar[Drawing] = Drawing("client", "loss")


@dataclass(frozen=True)
class BrowserScreenshot(Record):
    """A screenshot of the page, in the run folder as `path`."""

    NAME: ClassVar[str] = "browser.screenshot"
    path: str
