"""A profile's `client: {browser: ...}`: the web page the lab's headless Chromium opens, and when
its run ends."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from faultlab.model import Duration, Model
from faultlab.vocabulary.session import ClientDone

# What a page logs (console.log of a JSON object) to say it is done; its `code` is the exit code.
DONE_EVENT = ClientDone.NAME


class BrowserPage(Model):
    """A page from a `url` the lab resolves, or from a folder faultlab serves (`serve`, at
    `path`) on the client's own loopback (a secure context: the microphone is allowed). `start`:
    JavaScript run in order once it has loaded (a click on its connect button). It ends when it
    logs `done` (a console event; its `code` the exit code), when `until` (JavaScript) becomes
    true (exit 0), or at `timeout` (exit `timeout_exit`)."""

    url: str | None = None
    """The page to open, an `http://` or `https://` URL the lab resolves (the profile's `hosts`);
    or give `serve`."""
    serve: Path | None = None
    """A folder faultlab serves on the client's own loopback (`http://127.0.0.1:PORT/`, a secure
    context), relative to the profile's folder; or give `url`."""
    path: str = "/"
    """The page to open in the served folder, with its query (`/?mode=voice`)."""
    start: list[str] = Field(default_factory=list)
    """JavaScript run in order once the page has loaded:
    `document.querySelector("button.connect").click()`."""
    done: str = DONE_EVENT
    """The event the page logs (a console line of one JSON object) to say it is done; its `code`
    is the exit code (absent: 0)."""
    until: str | None = None
    """A JavaScript expression, polled after `start`: the page ends, exit 0, when it is true."""
    timeout: Duration = 60.0
    """When the page ends if nothing else ended it, counted from opening (load included)."""
    timeout_exit: int = Field(default=0, ge=0, le=255)
    """The exit code when `timeout` ends the page."""
    viewport: tuple[int, int] = (1280, 800)
    """The browser window's size in pixels: `[width, height]`."""

    SCHEMES: ClassVar[tuple[str, ...]] = ("http://", "https://")

    @field_validator("url")
    @classmethod
    def _web_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(cls.SCHEMES):
            raise ValueError("a page's url starts with http:// or https://")
        return url

    @field_validator("path")
    @classmethod
    def _absolute_path(cls, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError("the page's path in the served folder starts with '/'")
        return path

    @model_validator(mode="after")
    def _one_source(self) -> BrowserPage:
        if (self.url is None) == (self.serve is None):
            raise ValueError("give the page's 'url' or a folder to 'serve' (one of them)")
        if self.url is not None and self.path != "/":
            raise ValueError("'path' is the page in a served folder; with 'url', put it in the url")
        return self

    def resolved(self, folder: Path) -> BrowserPage:
        """With `serve` relative to the profile's `folder` made absolute."""
        if self.serve is None or self.serve.is_absolute():
            return self
        return self.model_copy(update={"serve": (folder / self.serve).absolute()})
