"""The fetcher's direct path: a plain ``http://`` request is sent on a kept http.client connection
of its own (``spider.fetch._Direct``), not through urllib3's pool. It answers as the pool did:
a kept connection the server closed is reopened (the request sent again once, on a new
connection), a connection is kept only after a body read to its end (a body cut at --max-bytes
closes it), and refused, timed-out and reset requests fail with the same reasons and texts as
through urllib3 (``Fetcher.direct_http = False``). Raw socket servers, so that what happens on
each connection is known."""

from __future__ import annotations

import re
import socket
import struct
import threading
import time
from typing import Callable

import pytest

from spider.config import CrawlConfig
from spider.fetch import Fetcher, Response
from spider.policy import FetchFailure

PAGE = b"<html><body>hi</body></html>"
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (len(PAGE), PAGE)


class RawServer:
    """Accepts connections on 127.0.0.1 and hands each to ``serve(conn, n)`` (n: its number from 0)
    in a thread; counts connections and request heads read with ``read_request``."""

    def __init__(self, serve: Callable[["RawServer", socket.socket, int], None]) -> None:
        self.serve = serve
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self._stop = False
        threading.Thread(target=self._loop, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _loop(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            n, self.connections = self.connections, self.connections + 1
            threading.Thread(target=self._run, args=(conn, n), daemon=True).start()

    def _run(self, conn: socket.socket, n: int) -> None:
        with conn:
            try:
                self.serve(self, conn, n)
            except OSError:
                pass

    def read_request(self, conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(4096)
            if not more:
                return b""
            data += more
        self.requests.append(data)
        return data

    def close(self) -> None:
        self._stop = True
        self.sock.close()


def _fetcher(direct: bool | None = None, **kw: float) -> Fetcher:
    f = Fetcher(CrawlConfig(**{"connect_timeout": 1.0, "read_timeout": 1.0, "max_time": 3.0, **kw}))
    if direct is not None:   # else the default: direct
        f.direct_http = direct
    return f


def _keep_alive(server: RawServer, conn: socket.socket, n: int) -> None:
    while server.read_request(conn):
        conn.sendall(OK)


def test_a_plain_http_request_goes_on_a_kept_connection_not_through_urllib3s_pool() -> None:
    server = RawServer(_keep_alive)
    f = _fetcher()
    try:
        for _ in range(3):
            r = f.fetch(server.url("/a"))
            assert isinstance(r, Response) and r.body == PAGE, r
        assert server.connections == 1 and len(server.requests) == 3
        assert not f.session.get_adapter("http://x/")._origin_pools   # urllib3's pool never made
        assert list(f._direct) == [f"http://127.0.0.1:{server.port}"]
        head = server.requests[0].decode()
        assert head.startswith("GET /a HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % server.port)
        assert "Accept-Encoding: gzip, deflate" in head and "identity" not in head
    finally:
        f.close()
        server.close()


def test_a_kept_connection_the_server_closed_is_reopened_and_the_request_sent_once_more() -> None:
    def answer_once(server: RawServer, conn: socket.socket, n: int) -> None:
        if server.read_request(conn):
            conn.sendall(OK)   # keep-alive promised, then closed: the next request finds it stale

    server = RawServer(answer_once)
    f = _fetcher()
    try:
        for i in range(3):
            r = f.fetch(server.url(f"/{i}"))
            assert isinstance(r, Response) and r.status == 200, r
            time.sleep(0.1)   # the server's close has reached the client
        assert server.connections == 3
        assert [q.split(b" ")[1] for q in server.requests] == [b"/0", b"/1", b"/2"]
    finally:
        f.close()
        server.close()


def test_a_request_is_sent_again_only_once() -> None:
    """The first connection answers, then every connection closes without an answer: the request
    on the stale kept connection is sent again on a new one, and that one's failure stands."""
    def answer_first_only(server: RawServer, conn: socket.socket, n: int) -> None:
        if server.read_request(conn) and n == 0:
            conn.sendall(OK)

    server = RawServer(answer_first_only)
    f = _fetcher()
    try:
        assert isinstance(f.fetch(server.url("/a")), Response)
        time.sleep(0.1)
        r = f.fetch(server.url("/b"))
        assert isinstance(r, FetchFailure) and r.kind == "connection error", r
        assert "RemoteDisconnected" in r.detail
        assert server.connections == 2
        r = f.fetch(server.url("/c"))   # a new connection, not sent again
        assert isinstance(r, FetchFailure) and r.kind == "connection error", r
        assert server.connections == 3
    finally:
        f.close()
        server.close()


def test_a_body_cut_at_max_bytes_closes_the_connection_one_read_to_its_end_keeps_it() -> None:
    big = b"<html>" + b"x" * 300_000 + b"</html>"   # more than one read (64 KiB)

    def serve(server: RawServer, conn: socket.socket, n: int) -> None:
        while True:
            head = server.read_request(conn)
            if not head:
                return
            body = big if b" /big " in head else PAGE
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))

    server = RawServer(serve)
    f = _fetcher(max_bytes=1000)
    try:
        assert isinstance(f.fetch(server.url("/a")), Response)
        assert isinstance(f.fetch(server.url("/a")), Response)
        assert server.connections == 1
        r = f.fetch(server.url("/big"))
        assert isinstance(r, FetchFailure) and r.kind == "too large", r
        r = f.fetch(server.url("/a"))   # not on the connection with the rest of /big's body unread
        assert isinstance(r, Response) and r.body == PAGE, r
        assert server.connections == 2
    finally:
        f.close()
        server.close()


def _silent(server: RawServer, conn: socket.socket, n: int) -> None:
    server.read_request(conn)
    time.sleep(3)


def _reset(server: RawServer, conn: socket.socket, n: int) -> None:
    server.read_request(conn)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _reset_mid_body(server: RawServer, conn: socket.socket, n: int) -> None:
    server.read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 9000\r\n\r\n<html>")
    time.sleep(0.1)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _short_body(server: RawServer, conn: socket.socket, n: int) -> None:
    server.read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 9000\r\n\r\n<html>")


def _bad_status(server: RawServer, conn: socket.socket, n: int) -> None:
    server.read_request(conn)
    conn.sendall(b"HTTQ/1.1 200 OK\r\n\r\n")


def _two_lengths(server: RawServer, conn: socket.socket, n: int) -> None:
    server.read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd")


def _failure(direct: bool, url: str, **kw: float) -> FetchFailure:
    f = _fetcher(direct, **kw)
    try:
        r = f.fetch(url)
    finally:
        f.close()
    assert isinstance(r, FetchFailure), r
    return r


def _text(failure: FetchFailure) -> tuple[str, bool, str]:
    """The failure without the object addresses and pool class names that differ by run."""
    return failure.kind, failure.transient, re.sub(r" at 0x[0-9a-f]+", "", failure.detail)


@pytest.mark.parametrize("serve", [_silent, _reset, _reset_mid_body, _short_body, _bad_status, _two_lengths])
def test_the_same_failures_as_through_urllib3(serve: Callable[[RawServer, socket.socket, int], None]) -> None:
    server = RawServer(serve)
    try:
        old = _text(_failure(False, server.url("/a")))
        new = _text(_failure(True, server.url("/a")))
    finally:
        server.close()
    assert new == old
    assert server.connections == 2


def test_a_refused_connection_fails_as_through_urllib3() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()   # nothing listens there now
    url = f"http://127.0.0.1:{port}/a"
    old, new = _text(_failure(False, url)), _text(_failure(True, url))
    assert new == old and new[0] == "connection refused", new
