"""A configurable loopback HTTP server for the crawler's tests.

`TestSite` serves routes you declare (static bodies, dynamic handlers, redirects, generated
link trees) plus misbehaving endpoints for robustness tests (slow, trickling, endless, gzip
bomb, connection reset). Every request is recorded so tests can assert exactly what the
crawler fetched. It only ever listens on 127.0.0.0/8.

    with TestSite() as site:
        site.route("/", body='<a href="/a">a</a>')
        site.route("/a", body="hello")
        ...crawl site.url("/")...
        assert site.hits["/a"] == 1
"""

from __future__ import annotations

import functools
import html
import ipaddress
import socket
import socketserver
import struct
import sys
import threading
import time
import traceback
import zlib
from collections import Counter
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable, Iterator, Mapping, Optional, Union
from urllib.parse import urlsplit

__all__ = [
    "RequestInfo",
    "Route",
    "SiteRequestHandler",
    "TestSite",
    "tree_links",
    "DEMO_BROKEN",
    "DEMO_DISALLOWED",
    "DEMO_EXTERNAL",
    "DEMO_FILES",
    "DEMO_HTML_PAGES",
    "DEMO_NON_HTTP",
    "DEMO_ONLY_VIA_BASE",
    "DEMO_QUERY_VARIANTS",
    "DEMO_REDIRECTS",
]

Body = Union[bytes, str]
Headers = Mapping[str, str]
#: A dynamic route: gets the request, returns (status, headers or None, body).
Handler = Callable[["RequestInfo"], "tuple[int, Optional[Headers], Body]"]
#: A low-level route that writes the response itself (status line, headers, body) via the handler.
RawHandler = Callable[["SiteRequestHandler", "RequestInfo"], None]

HTML = "text/html; charset=utf-8"
_CHUNK = 16 * 1024
_TICK = 0.05  # seconds between trickled writes
_FILLER = (
    "Spiders are not insects: they have eight legs, two body parts and no antennae. "
    "Most build silk structures, and all of them are very good at waiting. "
)


@dataclass(frozen=True)
class RequestInfo:
    """One request as the server saw it (what handlers receive and `TestSite.requests` holds)."""

    method: str
    target: str  # path + query exactly as requested, e.g. "/p/1.html?utm_source=x"
    path: str  # without the query string; what routes match on
    query: str
    headers: Message  # case-insensitive: info.headers["user-agent"]
    client_address: tuple[str, int]
    time: float
    count: int  # 1 for the first request to this path (query ignored), 2 for the second, ...
    body: bytes = b""


@dataclass
class Route:
    """What the server answers for one path (see `TestSite.route`)."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: Optional[str] = HTML
    delay: float = 0.0
    handler: Optional[Handler] = None
    raw: Optional[RawHandler] = None


def _to_bytes(body: Body) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else bytes(body)


def _filler(size: int) -> bytes:
    """`size` bytes of readable ASCII text, so padded pages still look like prose."""
    reps = size // len(_FILLER) + 1
    return (_FILLER * reps).encode("ascii")[:size]


def _html_page(title: str, links: Iterable[str] = (), text: str = "", size: int = 0) -> bytes:
    """A small HTML page linking to `links`, padded with prose to about `size` bytes."""
    items = "".join(f'<li><a href="{html.escape(href)}">{html.escape(href)}</a></li>\n' for href in links)
    head = (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>\n'
        f"<body><h1>{html.escape(title)}</h1>\n<ul>\n{items}</ul>\n<p>{html.escape(text)}"
    ).encode("utf-8")
    tail = b"</p>\n</body></html>\n"
    return head + _filler(max(0, size - len(head) - len(tail))) + tail


def _sized_page(title: str, size: int) -> bytes:
    """Exactly `size` bytes: an HTML page if that fits, else plain filler text."""
    page = _html_page(title, size=size)
    return page if len(page) == size else _filler(size)


def tree_links(i: int, n_pages: int, links_per_page: int) -> list[int]:
    """Deterministic link targets of page `i` in `TestSite.add_tree`.

    The first link is always page i+1 (mod n), so page 0 reaches every page; the rest are
    (i*7 + k) mod n for k = 1, 2, ... skipping self and duplicates.
    """
    wanted = min(links_per_page, n_pages - 1)
    if wanted <= 0:
        return []
    out = [(i + 1) % n_pages]
    k = 0
    while len(out) < wanted:
        k += 1
        target = (i * 7 + k) % n_pages
        if target != i and target not in out:
            out.append(target)
    return out


# -------------------------------------------------------------------------------- gzip bomb


@functools.lru_cache(maxsize=8)
def _deflate_zeros(size: int) -> bytes:
    """Raw deflate of `size` zero bytes ending in a full flush (byte-aligned, history reset).

    Because a full flush resets the compressor, such pieces can be concatenated into one
    valid deflate stream; that lets a multi-gigabyte bomb be streamed from one small block.
    """
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    return comp.compress(bytes(size)) + comp.flush(zlib.Z_FULL_FLUSH)


def _crc32_zeros(n: int) -> int:
    """zlib.crc32(bytes(n)) in O(log n) (GF(2) matrix powers), so huge bombs cost nothing."""
    mask = 0xFFFFFFFF

    def apply(mat: list[int], vec: int) -> int:
        out, i = 0, 0
        while vec:
            if vec & 1:
                out ^= mat[i]
            vec >>= 1
            i += 1
        return out

    # Column j: the internal (pre/post-inverted) CRC state after one zero byte from state 1<<j.
    step = [zlib.crc32(b"\0", (1 << j) ^ mask) ^ mask for j in range(32)]
    state = mask  # internal state for the initial value 0
    while n:
        if n & 1:
            state = apply(step, state)
        step = [apply(step, col) for col in step]
        n >>= 1
    return state ^ mask


def _gzip_bomb_parts(decompressed_size: int) -> tuple[int, Callable[[], Iterator[bytes]]]:
    """(compressed length, generator of the gzip stream) for `decompressed_size` zero bytes."""
    block = 1 << 20
    full, rest = divmod(decompressed_size, block)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # gzip, deflate, no name, mtime 0
    body_block = _deflate_zeros(block) if full else b""
    tail_block = _deflate_zeros(rest) if rest else b""
    crc = _crc32_zeros(decompressed_size)
    trailer = b"\x03\x00" + struct.pack("<II", crc, decompressed_size & 0xFFFFFFFF)
    length = len(header) + full * len(body_block) + len(tail_block) + len(trailer)

    def chunks() -> Iterator[bytes]:
        yield header
        batch = max(1, _CHUNK * 4 // max(1, len(body_block)))
        left = full
        while left:
            take = min(batch, left)
            yield body_block * take
            left -= take
        if tail_block:
            yield tail_block
        yield trailer  # an empty final block, then CRC32 and size

    return length, chunks


# -------------------------------------------------------------------------------- server


class SiteRequestHandler(BaseHTTPRequestHandler):
    """Dispatches requests to the owning `TestSite`'s routes. HTTP/1.1 keep-alive, silent."""

    protocol_version = "HTTP/1.1"
    server_version = "sitekit/1.0"
    disable_nagle_algorithm = True  # headers and body go out in separate writes; avoid 40 ms stalls
    timeout = 60  # idle keep-alive connections eventually give their thread back
    server: "_SiteServer"

    @property
    def site(self) -> "TestSite":
        return self.server.site

    # -- plumbing ---------------------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.untrack(self.connection)

    def handle(self) -> None:
        """A client hanging up (or the site stopping) mid-response is normal here, not an error."""
        try:
            super().handle()
        except OSError:
            self.close_connection = True

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        """Stay silent: tests read `TestSite.log`, not stderr."""

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    # -- helpers for raw handlers ------------------------------------------------------------

    @property
    def is_head(self) -> bool:
        return self.command == "HEAD"

    def send_head(
        self, status: int, headers: Optional[Headers] = None, content_type: Optional[str] = HTML
    ) -> None:
        """Send the status line and headers (nothing else: no Content-Length is added)."""
        self.send_response(status)
        names = {name.lower() for name in (headers or {})}
        if content_type and "content-type" not in names:
            self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()

    def send_full(
        self, status: int, headers: Optional[Headers], body: bytes, content_type: Optional[str]
    ) -> None:
        """A complete response with Content-Length (unless the caller set one, e.g. to lie)."""
        headers = dict(headers or {})
        bodiless = status < 200 or status in (204, 304)
        if not bodiless and "content-length" not in {name.lower() for name in headers}:
            headers["Content-Length"] = str(len(body))
        self.send_head(status, headers, content_type)
        if not bodiless and not self.is_head:
            self.wfile.write(body)

    def wait(self, seconds: float) -> bool:
        """Sleep, but wake early when the site stops; returns True if it is stopping."""
        return self.site._stopping.wait(seconds) if seconds > 0 else self.site._stopping.is_set()

    def abort(self) -> None:
        """Drop the connection with a TCP RST (SO_LINGER 0) instead of an orderly close."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()  # the fd really closes (with RST) once rfile is closed in finish()
        except OSError:
            pass

    # -- dispatch ----------------------------------------------------------------------------

    def _dispatch(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        info = self.site._record(self, body)
        route = self.site._route_for(info.path)
        if route is None:
            self.send_full(404, None, _html_page("404 Not Found", text=f"Nothing at {info.path}."), HTML)
            return
        try:
            if route.delay and self.wait(route.delay):
                self.close_connection = True
                return
            if route.raw is not None:
                route.raw(self, info)
                return
            if route.handler is not None:
                status, headers, payload = route.handler(info)
                self.send_full(status, headers, _to_bytes(payload), route.content_type)
                return
        except OSError:
            raise  # the client went away; handle() deals with it quietly
        except Exception:  # a bug in a test's handler: record it and answer 500
            self.site._record_error(traceback.format_exc())
            self.close_connection = True
            try:
                self.send_full(500, None, _html_page("500 Handler error"), HTML)
            except OSError:
                pass
            return
        self.send_full(route.status, route.headers, route.body, route.content_type)


class _SiteServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that never does reverse DNS and can cut its open connections."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], site: "TestSite") -> None:
        self.site = site
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        super().__init__(address, SiteRequestHandler)

    def server_bind(self) -> None:
        """Bind without HTTPServer's socket.getfqdn(), which may query DNS beyond loopback."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def track(self, conn: socket.socket) -> None:
        with self._conn_lock:
            self._connections.add(conn)

    def untrack(self, conn: socket.socket) -> None:
        with self._conn_lock:
            self._connections.discard(conn)

    def close_connections(self) -> None:
        """Shut every open connection so handler threads blocked on I/O finish promptly."""
        with self._conn_lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: object, client_address: object) -> None:
        """Hang-ups are expected; anything else is recorded in `TestSite.errors`."""
        if not isinstance(sys.exc_info()[1], OSError):
            self.site._record_error(traceback.format_exc())


# The RFC 2544 benchmarking range: only on the veths of network namespaces a test made itself
# (tests/netns.py), never reachable from outside them.
NAMESPACE_NET = ipaddress.IPv4Network("198.18.0.0/15")


def _check_host(host: str) -> str:
    try:
        address = ipaddress.IPv4Address(host)
    except ValueError:
        raise ValueError(f"TestSite host must be an IPv4 address in 127.0.0.0/8, not {host!r}") from None
    if not address.is_loopback and address not in NAMESPACE_NET:
        raise ValueError(f"TestSite only listens on loopback (127.0.0.0/8) or in a test's network "
                         f"namespace (198.18.0.0/15), not {host}")
    return host


class TestSite:
    """A loopback HTTP server with declarative routes and request recording.

    Use as a context manager or call `start()`/`stop()`. Routes may be added or replaced at
    any time, also while serving. Instrumentation (`hits`, `log`, `requests`, `errors`)
    returns snapshots taken under a lock, so it is safe to read while requests are running.
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = _check_host(host)
        self._requested_port = port
        self._lock = threading.Lock()
        self._routes: dict[str, Route] = {}
        self._hits: Counter[str] = Counter()
        self._counts: Counter[str] = Counter()
        self._log: list[tuple[float, str, tuple[str, int]]] = []
        self._requests: list[RequestInfo] = []
        self._errors: list[str] = []
        self._stopping = threading.Event()
        self._server: Optional[_SiteServer] = None
        self._thread: Optional[threading.Thread] = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> "TestSite":
        """Bind (port 0 = a free port) and serve in a daemon thread. Returns self."""
        if self._server is None:
            self._stopping.clear()
            self._server = _SiteServer((self._host, self._requested_port), self)
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},  # shutdown() waits up to one poll interval
                name=f"TestSite-{self._host}:{self._server.server_port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections (ending slow/endless responses) and free the port."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.close_connections()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> "TestSite":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"{self._host}:{self.port}" if self._server else "stopped"
        return f"<TestSite {state} routes={len(self._routes)}>"

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("TestSite is not started")
        return self._server.server_port

    def url(self, path: str = "/") -> str:
        """Absolute URL for `path` on this site, e.g. ``http://127.0.0.1:41234/a?b=1``."""
        if not path.startswith("/"):
            path = "/" + path
        return f"http://{self._host}:{self.port}{path}"

    # -- routes ---------------------------------------------------------------------------------

    def route(
        self,
        path: str,
        status: int = 200,
        body: Body = b"",
        headers: Optional[Headers] = None,
        content_type: Optional[str] = HTML,
        delay: float = 0.0,
        handler: Optional[Handler] = None,
        *,
        raw: Optional[RawHandler] = None,
    ) -> None:
        """Answer requests for `path` (matched exactly, without the query string).

        A static route sends `status`, `headers` and `body` (Content-Length added unless given).
        `handler(info)` computes `(status, headers, body)` per request instead; `info.count`
        tells it how many times this path has been requested. `raw(request_handler, info)`
        writes the whole response itself. `delay` seconds pass before anything is sent.
        Re-routing a path replaces its route.
        """
        if not path.startswith("/"):
            raise ValueError(f"route paths start with '/': {path!r}")
        new = Route(status, _to_bytes(body), dict(headers or {}), content_type, delay, handler, raw)
        with self._lock:
            self._routes[path] = new

    def add_redirect(self, path: str, target: str, status: int = 301) -> None:
        """`path` redirects to `target` (a path or an absolute URL) with a Location header."""
        body = _html_page("Moved", [target])
        self.route(path, status=status, body=body, headers={"Location": target})

    def status(
        self, path: str, code: int, headers: Optional[Headers] = None, body: Optional[Body] = None
    ) -> None:
        """`path` answers `code` (e.g. 410, 503 with Retry-After) with a small HTML body."""
        payload = _html_page(f"Status {code}") if body is None else body
        self.route(path, status=code, body=payload, headers=headers)

    def add_tree(
        self,
        n_pages: int,
        links_per_page: int,
        prefix: str = "/p/",
        page_size: int = 0,
        home: bool = True,
    ) -> set[str]:
        """Add a deterministic site of pages ``{prefix}{i}.html`` (i < n_pages) linking to each other.

        Page i links to `tree_links(i, ...)` (always including page i+1, so all pages are
        reachable). With `home`, "/" links to the first max(1, links_per_page) pages (all of
        them if links_per_page is 0). Pages are padded to about `page_size` bytes. Returns
        every path added, "/" included when `home` is set.
        """
        paths = [f"{prefix}{i}.html" for i in range(n_pages)]
        # The site's address is part of the text: two test sites are two sites, not mirrors
        # (the crawler treats pages with the same text as duplicates).
        where = f"{self.host}:{self.port}" if self._server is not None else ""
        for i, path in enumerate(paths):
            links = [paths[t] for t in tree_links(i, n_pages, links_per_page)]
            self.route(path, body=_html_page(f"Page {i}", links, text=where, size=page_size))
        added = set(paths)
        if home:
            first = paths if links_per_page <= 0 else paths[: max(1, links_per_page)]
            self.route("/", body=_html_page("Home", first, text=where, size=page_size))
            added.add("/")
        return added

    # -- misbehaving endpoints --------------------------------------------------------------

    def slow(self, path: str, seconds: float, body: Optional[Body] = None) -> None:
        """`path` waits `seconds` before sending anything (for timeouts and concurrency)."""
        self.route(path, body=_html_page("Slow page") if body is None else body, delay=seconds)

    def trickle(
        self, path: str, total_bytes: int, bytes_per_second: float, content_type: Optional[str] = HTML
    ) -> None:
        """`path` sends headers at once, then drips `total_bytes` at about `bytes_per_second`."""
        body = _sized_page("Trickle", total_bytes)
        step = max(1, int(bytes_per_second * _TICK))

        def raw(req: SiteRequestHandler, info: RequestInfo) -> None:
            req.send_head(200, {"Content-Length": str(len(body))}, content_type)
            if req.is_head:
                return
            start = time.monotonic()
            for offset in range(0, len(body), step):
                req.wfile.write(body[offset : offset + step])
                end = offset + step
                if end < len(body) and req.wait(start + end / bytes_per_second - time.monotonic()):
                    req.abort()
                    return

        self.route(path, raw=raw)

    def endless(self, path: str, chunked: bool = True, content_type: Optional[str] = HTML) -> None:
        """`path` streams forever: chunked, or with a huge Content-Length if `chunked` is False."""
        piece = _filler(_CHUNK)
        frame = b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece
        headers = {"Transfer-Encoding": "chunked"} if chunked else {"Content-Length": str(10**15)}

        def raw(req: SiteRequestHandler, info: RequestInfo) -> None:
            req.send_head(200, headers, content_type)
            req.close_connection = True
            if req.is_head:
                return
            while not req.wait(0):
                req.wfile.write(frame)  # ends with BrokenPipe/ConnectionReset when the client quits

        self.route(path, raw=raw)

    def gzip_bomb(
        self, path: str, decompressed_size: int = 1 << 30, content_type: Optional[str] = HTML
    ) -> None:
        """`path` sends `Content-Encoding: gzip` of `decompressed_size` zero bytes (~1000:1).

        Content-Length is the small compressed size; the body is streamed, not held in memory.
        """
        length, chunks = _gzip_bomb_parts(decompressed_size)

        def raw(req: SiteRequestHandler, info: RequestInfo) -> None:
            req.send_head(200, {"Content-Encoding": "gzip", "Content-Length": str(length)}, content_type)
            if req.is_head:
                return
            for chunk in chunks():
                if req.wait(0):
                    req.abort()
                    return
                req.wfile.write(chunk)

        self.route(path, raw=raw)

    def reset_mid_body(self, path: str, total_bytes: int = 20_000, sent_bytes: Optional[int] = None) -> None:
        """`path` promises `total_bytes`, sends `sent_bytes` (default half), then resets with a TCP RST."""
        body = _sized_page("Cut short", total_bytes)
        cut = len(body) // 2 if sent_bytes is None else sent_bytes

        def raw(req: SiteRequestHandler, info: RequestInfo) -> None:
            req.send_head(200, {"Content-Length": str(len(body))}, HTML)
            if not req.is_head:
                req.wfile.write(body[:cut])
            req.abort()

        self.route(path, raw=raw)

    # -- instrumentation ----------------------------------------------------------------------

    @property
    def hits(self) -> Counter[str]:
        """Requests per target (path + query as requested); a snapshot."""
        with self._lock:
            return Counter(self._hits)

    @property
    def log(self) -> list[tuple[float, str, tuple[str, int]]]:
        """(time.time(), target, client_address) per request, in arrival order; a snapshot."""
        with self._lock:
            return list(self._log)

    @property
    def requests(self) -> list[RequestInfo]:
        """Full `RequestInfo` per request (headers included), in arrival order; a snapshot."""
        with self._lock:
            return list(self._requests)

    @property
    def errors(self) -> list[str]:
        """Tracebacks of exceptions raised by route handlers (should stay empty)."""
        with self._lock:
            return list(self._errors)

    def reset(self) -> None:
        """Forget recorded requests, hit counts (including `info.count`) and errors; keep routes."""
        with self._lock:
            self._hits.clear()
            self._counts.clear()
            self._log.clear()
            self._requests.clear()
            self._errors.clear()

    # -- internals used by the request handler -----------------------------------------------

    def _route_for(self, path: str) -> Optional[Route]:
        with self._lock:
            return self._routes.get(path)

    def _record(self, req: SiteRequestHandler, body: bytes) -> RequestInfo:
        target = req.path
        parts = urlsplit(target)
        path = parts.path or "/"
        now = time.time()
        client = (str(req.client_address[0]), int(req.client_address[1]))
        with self._lock:
            self._hits[target] += 1
            self._counts[path] += 1
            count = self._counts[path]
            info = RequestInfo(req.command, target, path, parts.query, req.headers, client, now, count, body)
            self._log.append((now, target, client))
            self._requests.append(info)
        return info

    def _record_error(self, text: str) -> None:
        with self._lock:
            self._errors.append(text)


# -------------------------------------------------------------------------------- demo site facts
# Ground truth about the bundled demo site (spider/demo/site), for crawler tests. Paths are
# as linked; tests/test_sitekit.py crawls the served site and checks every fact below.

#: HTML pages in the site, including the two under /private/.
DEMO_HTML_PAGES = 49
#: Linked paths that answer 404.
DEMO_BROKEN = frozenset({
    "/species/wolf/raft-spider.html",
    "/guides/night-walks.html",
    "/img/missing-photo.png",
})
#: Linked paths that redirect: path -> (status, Location). "/species" is the server's own
#: trailing-slash redirect for folders; the others come from _redirects.txt.
DEMO_REDIRECTS: dict[str, tuple[int, str]] = {
    "/old-index.html": (301, "/index.html"),
    "/species/garden-spider.html": (301, "/species/orb-weavers/garden-spider.html"),
    "/guides/spotting.html": (302, "/guides/identification.html"),
    "/old/spotting-guide.html": (301, "/guides/spotting.html"),  # a two-hop chain
    "/go/checklist": (307, "/files/checklist.txt"),
    "/species": (301, "/species/"),
}
#: Linked paths that robots.txt (``Disallow: /private/``) forbids; both exist (200) if fetched.
DEMO_DISALLOWED = frozenset({"/private/", "/private/field-notes.html"})
#: Links leaving the site, resolved (one is written protocol-relative: //example.com/spiders).
DEMO_EXTERNAL = frozenset({
    "https://example.org/",
    "https://example.com/arachnology",
    "http://example.com/spiders",
})
#: Non-HTTP links on the site.
DEMO_NON_HTTP = frozenset({
    "mailto:hello@example.org",
    "mailto:hello@example.org?subject=Spiders",
    "tel:+10000000000",
    "javascript:void(0)",
    "javascript:alert('Hello from the spiders!')",
})
#: Non-HTML files (all linked, all 200; /style.css only from <link rel=stylesheet>).
DEMO_FILES = frozenset({
    "/robots.txt",
    "/style.css",
    "/files/checklist.txt",
    "/img/orb-web.svg",
    "/img/spider-icon.png",
})
#: Links with a query string (the server ignores queries: each is the page without it).
DEMO_QUERY_VARIANTS = frozenset({
    "/species/index.html?utm_source=x",
    "/species/orb-weavers/garden-spider.html?utm_source=x",
    "/species/orb-weavers/garden-spider.html?utm_source=newsletter&utm_campaign=spring",
    "/species/orb-weavers/garden-spider.html?ref=share",
    "/species/orb-weavers/wasp-spider.html?utm_source=newsletter&utm_medium=email",
})
#: Linked only from /guides/quick-picks.html, which sets <base href="/species/jumping/">;
#: a crawler ignoring <base> requests /guides/bold-jumper.html (404) and never finds it.
DEMO_ONLY_VIA_BASE = "/species/jumping/bold-jumper.html"
