"""The bundled demo site and a tiny static server for it (`python main.py demo`).

The site (``SITE_DIR``) is a small field guide to spiders with the awkward corners a
crawler has to cope with: relative links of every kind, a ``<base href>`` page, broken
links, redirects, a robots.txt-disallowed area, external and non-HTTP links, non-HTML
files and query-string variants. The server is deliberately small and standard-library
only, so the demo and the tests run anywhere without network access beyond loopback.
"""

from __future__ import annotations

import html
import ipaddress
import mimetypes
import posixpath
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional, TextIO
from urllib.parse import unquote, urlsplit

__all__ = ["SITE_DIR", "DemoServer", "DemoRequestHandler", "load_redirects", "serve", "run"]

#: The folder holding the demo site's static files (shipped as package data).
SITE_DIR: Path = Path(__file__).resolve().parent / "site"

#: Name of the redirect table in the site root; it configures the server and is never served.
REDIRECTS_FILE = "_redirects.txt"

#: Fixed types for the files the site uses, so responses don't depend on the host's mime.types.
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".xml": "application/xml",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".ico": "image/x-icon",
}

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


def content_type_for(path: Path) -> str:
    """Content-Type for a file: a fixed table first, then `mimetypes`, then octet-stream."""
    suffix = path.suffix.lower()
    if suffix in _CONTENT_TYPES:
        return _CONTENT_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(path.name)
    if guessed is None:
        return "application/octet-stream"
    return f"{guessed}; charset=utf-8" if guessed.startswith("text/") else guessed


def load_redirects(root: Path) -> dict[str, tuple[int, str]]:
    """Parse ``root/_redirects.txt`` (``PATH<TAB>STATUS<TAB>TARGET``; ``#`` comments) into a dict.

    Columns may also be separated by runs of spaces. A missing file means no redirects.
    """
    table: dict[str, tuple[int, str]] = {}
    file = root / REDIRECTS_FILE
    if not file.is_file():
        return table
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        parts = [p.strip() for p in parts if p.strip()]
        if len(parts) != 3 or not parts[1].isdigit() or int(parts[1]) not in _REDIRECT_STATUSES:
            raise ValueError(f"{file}:{number}: expected PATH<TAB>STATUS<TAB>TARGET, got {line!r}")
        table[parts[0]] = (int(parts[1]), parts[2])
    return table


def _html_page(title: str, message: str) -> bytes:
    """A small HTML body for error and redirect responses."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title></head>\n"
        f"<body><h1>{html.escape(title)}</h1><p>{message}</p></body></html>\n"
    ).encode("utf-8")


class DemoRequestHandler(BaseHTTPRequestHandler):
    """Serves static files from ``server.root``; GET and HEAD only, quiet, HTTP/1.1 keep-alive."""

    protocol_version = "HTTP/1.1"
    server_version = "spider-demo/1.0"
    disable_nagle_algorithm = True  # headers and body go out in separate writes; avoid 40 ms stalls
    timeout = 30  # idle keep-alive connections give their thread back eventually
    server: "DemoServer"

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        """Stay silent: the demo and the test suite must not spam stderr."""

    def handle(self) -> None:
        """Treat a client hanging up mid-response as normal, not as an error."""
        try:
            super().handle()
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    # -- internals -------------------------------------------------------------------------

    def _serve(self, head: bool) -> None:
        raw_path = urlsplit(self.path).path or "/"  # the query string never selects a file
        redirect = self.server.redirects.get(raw_path)
        if redirect is not None:
            status, target = redirect
            self._redirect(status, target, head)
            return
        file = self._resolve(raw_path)
        if file is None:
            self._not_found(head)
            return
        if raw_path.endswith("/") and not file.is_dir():
            self._not_found(head)  # "/page.html/" would make the page's relative links resolve wrongly
            return
        if file.is_dir():
            if not raw_path.endswith("/"):
                query = urlsplit(self.path).query
                self._redirect(301, raw_path + "/" + (f"?{query}" if query else ""), head)
                return
            file = file / "index.html"
            if not file.is_file():
                self._not_found(head)
                return
        try:
            body = file.read_bytes()
        except OSError:
            self._not_found(head)
            return
        modified = self.date_time_string(int(file.stat().st_mtime))
        self._send(200, body, content_type_for(file), head, {"Last-Modified": modified})

    def _resolve(self, raw_path: str) -> Optional[Path]:
        """Map a URL path to a file or folder under the root, or None (missing, hidden, traversal)."""
        try:
            path = unquote(raw_path, errors="strict")
        except UnicodeDecodeError:
            return None
        if "\x00" in path or "\\" in path or not path.startswith("/"):
            return None
        segments = path.split("/")
        if any(seg in ("..", ".") for seg in segments):
            return None  # refuse traversal outright instead of normalising it away
        if posixpath.basename(path) == REDIRECTS_FILE:
            return None
        root = self.server.root
        candidate = root.joinpath(*[s for s in segments if s])
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError):
            return None
        if real != root and root not in real.parents:
            return None  # a symlink pointing out of the site
        return real

    def _redirect(self, status: int, target: str, head: bool) -> None:
        link = html.escape(target)
        body = _html_page("Moved", f'This page has moved to <a href="{link}">{link}</a>.')
        self._send(status, body, "text/html; charset=utf-8", head, {"Location": target})

    def _not_found(self, head: bool) -> None:
        body = _html_page("404 Not Found", "There is no page here. Try the <a href=\"/\">home page</a>.")
        self._send(404, body, "text/html; charset=utf-8", head)

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        head: bool,
        headers: Optional[dict[str, str]] = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)


class DemoServer(ThreadingHTTPServer):
    """A threaded static file server for a site folder (by default the bundled demo site)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        root: Path = SITE_DIR,
        handler: type[BaseHTTPRequestHandler] = DemoRequestHandler,
    ) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise FileNotFoundError(f"site folder not found: {self.root}")
        self.redirects = load_redirects(self.root)
        self._thread: Optional[threading.Thread] = None
        super().__init__(address, handler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse-DNS lookup (getfqdn), which may leave loopback."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def handle_error(self, request: object, client_address: object) -> None:
        """Ignore hang-ups; report anything else (a real bug) on stderr."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:8000/``."""
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}/"

    def start(self) -> "DemoServer":
        """Serve in a daemon thread; returns self."""
        if self._thread is None:
            name = f"demo-server-{self.server_port}"
            self._thread = threading.Thread(
                target=self.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True
            )
            self._thread.start()
        return self

    def shutdown(self) -> None:
        """Stop serving (if started) and release the listening socket; safe to call twice."""
        if self._thread is not None:
            super().shutdown()
            self._thread.join()
            self._thread = None
        self.server_close()


def _check_loopback(host: str) -> None:
    """The demo never listens beyond this machine's loopback interface."""
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"demo server only binds loopback addresses (127.0.0.0/8), not {host!r}")


def serve(root: Path = SITE_DIR, host: str = "127.0.0.1", port: int = 0) -> tuple[DemoServer, str]:
    """Start a `DemoServer` for ``root`` in a daemon thread; return it and its base URL.

    ``port=0`` picks a free port. Call ``server.shutdown()`` to stop it.
    """
    _check_loopback(host)
    server = DemoServer((host, port), root)
    server.start()
    return server, server.url


def run(
    host: str = "127.0.0.1", port: int = 8000, root: Path = SITE_DIR, out: Optional[TextIO] = None
) -> None:
    """Serve the demo site in the foreground until Ctrl-C (what `python main.py demo` should call)."""
    out = out or sys.stdout
    server, url = serve(root, host, port)
    try:
        pages = sum(1 for _ in Path(root).rglob("*.html"))
        print(f"Demo site ({pages} pages) at {url} - press Ctrl-C to stop.", file=out, flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()

