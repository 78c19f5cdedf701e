"""The lab's own HTTP server on loopback, for the JavaScript clients: a web page's files, and
backends' routes, each under its prefix (the booking pack's: faultlab/scenarios/booking/service.py).

`LabHttp` is the standard library's threading HTTP server on 127.0.0.1, on a port the kernel picks,
serving from a daemon thread. A folder's files are served as they are (`/` is its index.html),
with their MIME type, never cached (`Cache-Control: no-store`: a page rebuilt between two runs is
never the old one), without directory listings, and never a file outside the folder (`..`, a
symlink out: 403). Requests are not logged: a page's fetches would flood the run's log.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

# The types of the files a page is made of; anything else goes as bytes.
MIME_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".wasm": "application/wasm",
    ".wav": "audio/wav",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
OTHER_TYPE = "application/octet-stream"
# The longest request body read (a backend's requests are small: a booking, a few dozen bytes).
MAX_BODY = 64 * 1024


class Backend(Protocol):
    """Routes the lab serves under a prefix: a request's answer, a status and a JSON object."""

    def answer(self, method: str, route: str, query: Mapping[str, list[str]],
               body: bytes) -> tuple[int, dict[str, Any]]:
        """`route`: the path after the prefix; `query`: the URL's, parsed."""
        ...


class Escape(Exception):
    """A path that leads out of the served folder."""


def static_file(folder: Path, url_path: str) -> Path | None:
    """The file a URL path names in `folder` (a folder's index.html for a path ending in `/`),
    None if there is none; raises `Escape` for a path that leads outside."""
    path = unquote(url_path)
    if "\0" in path:
        raise Escape(url_path)
    relative = path.lstrip("/")
    if relative == "" or relative.endswith("/"):
        relative += "index.html"
    root = folder.resolve()
    candidate = (root / relative).resolve()
    if not candidate.is_relative_to(root):
        raise Escape(url_path)
    return candidate if candidate.is_file() else None


class QuietServer(ThreadingHTTPServer):
    """A threading HTTP server that says nothing of a client gone mid-request."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class LabHttp:
    """Serves `folder`'s files (None: none) and each backend's routes under its prefix
    (`/backend/`) on 127.0.0.1; `start` returns the port. Closing it leaves the backends open
    (their owner closes them, after this)."""

    def __init__(self, folder: Path | None, backends: Mapping[str, Backend] | None = None) -> None:
        self.folder = folder
        self.backends = dict(backends or {})
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        server = QuietServer(("127.0.0.1", 0), self._handler())
        self._server = server
        # Polled every 50 ms for a shutdown (the default 0.5 s would be each close's wait).
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,),
                                        name="lab-http", daemon=True)
        self._thread.start()
        return int(server.server_address[1])

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return int(self._server.server_address[1])

    def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> LabHttp:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        folder, backends = self.folder, self.backends

        def backend_of(path: str) -> tuple[Backend, str] | None:
            """The backend whose prefix `path` starts with, and the route after it."""
            return next(((b, path.removeprefix(prefix)) for prefix, b in backends.items()
                         if path.startswith(prefix)), None)

        class Handler(BaseHTTPRequestHandler):
            server_version = "faultlab"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: see the module's doc

            def do_GET(self) -> None:
                self._serve(body=True)

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_POST(self) -> None:
                url = urlsplit(self.path)
                if (routed := backend_of(url.path)) is None:
                    self._json(HTTPStatus.NOT_FOUND, {"error": "no such route"})
                    return
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    self._json(HTTPStatus.BAD_REQUEST, {"error": "bad Content-Length"})
                    return
                if not 0 <= length <= MAX_BODY:
                    self._json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": "body too large"})
                    return
                backend, route = routed
                self._json(*backend.answer("POST", route, parse_qs(url.query),
                                           self.rfile.read(length)))

            def _serve(self, body: bool) -> None:
                url = urlsplit(self.path)
                if (routed := backend_of(url.path)) is not None:
                    backend, route = routed
                    self._json(*backend.answer("GET", route, parse_qs(url.query), b""), body=body)
                    return
                try:
                    found = static_file(folder, url.path) if folder is not None else None
                except Escape:
                    self._plain(HTTPStatus.FORBIDDEN, "outside the served folder", body)
                    return
                if found is None:
                    self._plain(HTTPStatus.NOT_FOUND, "not found", body)
                    return
                data = found.read_bytes()
                self._send(HTTPStatus.OK, MIME_TYPES.get(found.suffix.lower(), OTHER_TYPE), data,
                           body)

            def _json(self, status: int, answer: dict[str, Any], body: bool = True) -> None:
                self._send(status, "application/json", json.dumps(answer).encode(), body)

            def _plain(self, status: int, text: str, body: bool) -> None:
                self._send(status, "text/plain; charset=utf-8", text.encode() + b"\n", body)

            def _send(self, status: int, content_type: str, data: bytes, body: bool) -> None:
                # A client gone while its request waited (a page closed, a run ending) is not
                # an error of the server's.
                with contextlib.suppress(ConnectionError):
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("Cache-Control", "no-store")
                    self.end_headers()
                    if body:
                        self.wfile.write(data)

        return Handler
