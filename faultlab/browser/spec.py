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
    serve: Path | None = None
    path: str = "/"
    start: list[str] = Field(default_factory=list)
    done: str = DONE_EVENT
    until: str | None = None
    timeout: Duration = 60.0
    timeout_exit: int = Field(default=0, ge=0, le=255)
    viewport: tuple[int, int] = (1280, 800)

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
