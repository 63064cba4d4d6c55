"""The direct path's own HTTP reading (``spider.fetch._Direct``, ``_Reply``): a plain ``http://``
request's head is one bytes object made once for the headers sent, and its response is read off
the socket without urllib3's or http.client's ``HTTPResponse`` (they cost half the fetch's Python
time). It must answer exactly as urllib3's pool does (``Fetcher.direct_http = False``): the same
page or the same failure (kind and text), the same connections kept, the same WARC records. Raw
socket servers, so that every odd byte and every connection is known."""

from __future__ import annotations

import contextlib
import gzip
import http.client
import re
import socket
import struct
import time

import pytest
import urllib3

from spider import fetch
from spider.config import CrawlConfig
from spider.fetch import Fetcher, Response
from spider.policy import FetchFailure
from test_fetch_direct import RawServer

PAGE = b"<html><body>hi</body></html>"
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (len(PAGE), PAGE)
H = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"


def _sized(body: bytes, head: bytes = H) -> bytes:
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


# What the first connection's first request is answered with: bytes to send, "pause" (let them go
# as a packet of their own), "close" (end the connection there), "reset" (end it with a RST).
# Then, on every connection, every request gets OK.
ANSWERS: dict[str, list[bytes | str]] = {
    "chunked with extensions and trailers": [
        H + b"Transfer-Encoding: chunked\r\n\r\n5\r\n<html\r\n3;ext=1\r\n>hi\r\n0\r\nX-T: 1\r\n\r\n"],
    "chunked, the connection closed before the trailers' end": [
        H + b"Transfer-Encoding: chunked\r\n\r\n5\r\n<html\r\n0\r\n", "close"],
    "a bad chunk size": [H + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n<html\r\n0\r\n\r\n"],
    "a negative chunk size": [H + b"Transfer-Encoding: chunked\r\n\r\n-5\r\n<html>hello\r\n0\r\n\r\n", "close"],
    "a chunk without its CRLF": [H + b"Transfer-Encoding: chunked\r\n\r\n5\r\n<htmlXX3\r\nabc\r\n0\r\n\r\n"],
    "a chunk cut short": [H + b"Transfer-Encoding: chunked\r\n\r\n50\r\n<html", "close"],
    "a chunk size line too long": [H + b"Transfer-Encoding: chunked\r\n\r\n" + b"1" * 70000 + b"\r\n", "close"],
    "a trailer line too long": [
        H + b"Transfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nX: " + b"1" * 70000 + b"\r\n\r\n", "close"],
    "HTTP/1.0 without a length": [b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + PAGE, "close"],
    "HTTP/1.0 kept alive": [_sized(PAGE, b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\nConnection: keep-alive\r\n")],
    "HTTP/1.1 without a length": [H + b"\r\n" + PAGE, "close"],
    "Connection: close": [_sized(PAGE, H + b"Connection: close\r\n"), "close"],
    "a body shorter than its length": [H + b"Content-Length: 900\r\n\r\n<html>", "close"],
    "a body longer than its length": [H + b"Content-Length: 3\r\n\r\n<html>junk"],
    "103 Early Hints first": [b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n" + _sized(PAGE)],
    "100 Continue first": [b"HTTP/1.1 100 Continue\r\n\r\n" + _sized(PAGE)],
    "over 100 interim responses": [b"HTTP/1.1 102 P\r\n\r\n" * 101 + _sized(PAGE)],
    "101 Switching Protocols": [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", "close"],
    "an obs-fold header": [_sized(PAGE, H + b"X-A: one\r\n  two\r\n")],
    "a header line too long": [_sized(PAGE, H + b"X-A: " + b"a" * 70000 + b"\r\n")],
    "99 headers": [_sized(PAGE, H + b"X-A: 1\r\n" * 97)],
    "100 headers": [_sized(PAGE, H + b"X-A: 1\r\n" * 98)],
    "a bad status line": [b"HTTQ/1.1 200 OK\r\n\r\n"],
    "status 1000": [b"HTTP/1.1 1000 X\r\n\r\n"],
    "HTTP/2.0": [b"HTTP/2.0 200 OK\r\n\r\n"],
    "no reason phrase": [b"HTTP/1.1 200\r\nContent-Type: text/html\r\nContent-Length: 6\r\n\r\n<html>"],
    "bare LF line ends": [b"HTTP/1.1 200 OK\nContent-Type: text/html\nContent-Length: 6\n\n<html>"],
    "a lone CR in a header": [b"HTTP/1.1 200 OK\r\nContent-Type: text/html\rX\r\nContent-Length: 6\r\n\r\n<html>"],
    "lengths 6, 6": [H + b"Content-Length: 6, 6\r\n\r\n<html>", "close"],
    # lengths that are not plain ASCII digits (int() reads some of them, str.isdigit others)
    "a length with a sign": [H + b"Content-Length: +6\r\n\r\n<html>"],
    "a length with an underscore": [H + b"Content-Length: 0_6\r\n\r\n<html>"],
    "a length in superscript": [H + b"Content-Length: \xb2\r\n\r\n<html>", "close"],
    "a length and a space": [H + b"Content-Length: 6 \r\n\r\n<html>"],
    "an empty length": [H + b"Content-Length:\r\n\r\n<html>", "close"],
    "a length repeated": [H + b"Content-Length: 6\r\nContent-Length: 6\r\n\r\n<html>"],
    "a length with identity transfer coding": [H + b"Transfer-Encoding: identity\r\nContent-Length: 6\r\n\r\n<html>"],
    "two different lengths": [H + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"],
    "a length with chunked": [H + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n<html>\r\n0\r\n\r\n"],
    "gzip, chunked as transfer coding": [H + b"Transfer-Encoding: gzip, chunked\r\nContent-Length: 6\r\n\r\n<html>"],
    "204 with a body": [b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello" + OK],
    "304": [b"HTTP/1.1 304 Not Modified\r\nETag: x\r\n\r\n"],
    "404 with a page": [_sized(PAGE, b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n")],
    "a redirect": [_sized(b"moved", b"HTTP/1.1 301 Moved\r\nLocation: /b\r\n")],
    "a redirect with a chunked body": [
        b"HTTP/1.1 302 Found\r\nLocation: /b\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"],
    "a redirect with a gzip body": [_sized(gzip.compress(b"moved"), b"HTTP/1.1 302 F\r\nLocation: /b\r\nContent-Encoding: gzip\r\n")],
    "a redirect with a UTF-8 Location": [_sized(b"", b"HTTP/1.1 302 Found\r\nLocation: /caf\xc3\xa9\r\n")],
    "cookies": [_sized(PAGE, H + b"Set-Cookie: a=1; Path=/\r\nSet-Cookie: b=2\r\n")],
    "a gzip page": [_sized(gzip.compress(PAGE), H + b"Content-Encoding: gzip\r\n")],
    "a page that is not gzip": [_sized(b"notgzip", H + b"Content-Encoding: gzip\r\n")],
    "bytes after the body": [_sized(PAGE) + b"GARBAGE\r\n"],
    "a multipart type (the email parser's)": [_sized(PAGE, b"HTTP/1.1 200 OK\r\nContent-Type: multipart/mixed; boundary=x\r\n")],
    "a status line, then the end": [b"HTTP/1.1 200 OK", "close"],
    "nothing": [b"", "close"],
    "a head in two packets": [b"HTTP/1.1 200 OK\r\nContent-Ty", "pause", b"pe: text/html\r\nContent-Length: 6\r\n\r\n<html>"],
    "a body in two packets": [H + b"Content-Length: 12\r\n\r\n<html>", "pause", b"</html>"[:6]],
    "no type, sniffed": [b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n<html>"],
    "Latin-1 header bytes": [_sized(PAGE, H + b"X-\xe9: \xff\r\n")],
    "a head, then the end": [H + b"Content-Length: 6\r\n\r\n", "close"],
    "reset mid-body": [H + b"Content-Length: 900\r\n\r\n<html>", "reset"],
    "reset mid-head": [b"HTTP/1.1 200 OK\r\nContent-Type", "reset"],
}


def _stop(server: RawServer) -> None:
    """Close the server and end its accepting thread (a close alone leaves accept() blocked)."""
    server._stop = True
    with contextlib.suppress(OSError):
        server.sock.shutdown(socket.SHUT_RDWR)
    server.close()


def _answer(parts: list[bytes | str]):  # type: ignore[no-untyped-def]
    def serve(server: RawServer, conn: socket.socket, n: int) -> None:
        if n == 0:
            if not server.read_request(conn):
                return
            for part in parts:
                if part == "close":
                    return
                if part == "pause":
                    time.sleep(0.05)
                elif part == "reset":
                    time.sleep(0.05)
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                else:
                    conn.sendall(part)  # type: ignore[arg-type]
        while server.read_request(conn):
            conn.sendall(OK)
    return serve


class _Records:
    """A stand-in WARC writer that keeps each exchange's fields."""

    def __init__(self) -> None:
        self.exchanges: list[dict[str, object]] = []

    def add_info(self, info: object) -> None:
        pass

    def write(self, ex: object) -> None:
        fields = {k: (b"".join(v) if k == "body" else v) for k, v in vars(ex).items() if k not in ("started", "date")}
        self.exchanges.append(fields)

    def close(self) -> None:
        pass


def _plain(result: Response | FetchFailure) -> object:
    """A result without what differs by run (elapsed time, port, object addresses)."""
    if isinstance(result, FetchFailure):
        return result.kind, result.transient, re.sub(r" at 0x[0-9a-f]+", "", result.detail)
    return {k: v for k, v in vars(result).items() if k != "elapsed"}


def _run(direct: bool, parts: list[bytes | str], warc: bool, method: str) -> tuple[bytes, int]:
    server = RawServer(_answer(parts))
    records = _Records() if warc else None
    f = Fetcher(CrawlConfig(connect_timeout=1.0, read_timeout=0.5, max_time=3.0, max_bytes=100_000), records)  # type: ignore[arg-type]
    f.direct_http = direct
    try:
        results = [_plain(f.fetch(server.url("/a"), method=method))] + [_plain(f.fetch(server.url(p))) for p in ("/b", "/c")]
    finally:
        f.close()
        _stop(server)
    seen = repr((results, records.exchanges if records else None))
    return re.sub(rb"127\.0\.0\.1:%d|port=%d" % (server.port, server.port), b"PORT", seen.encode()), server.connections


def _unfolded(seen: bytes) -> bytes:
    """``seen`` with obs-fold continuation lines joined to the line before, as urllib3 2.8 records
    a response head through its pool (2.7 kept it as received, as the direct path does)."""
    return re.sub(rb"\\r\\n[ \t]+", b" ", seen)


@pytest.mark.parametrize("name", list(ANSWERS))
def test_the_same_answers_connections_and_records_as_through_urllib3(name: str) -> None:
    for warc, method in ((False, "GET"), (False, "HEAD"), (True, "GET")):
        (old, old_connections), (new, new_connections) = (_run(False, ANSWERS[name], warc, method),
                                                          _run(True, ANSWERS[name], warc, method))
        if name == "an obs-fold header" and warc:
            # The direct path archives the head as received; urllib3's pool does so or unfolds it
            # depending on its version: the rest must be the same.
            assert rb"X-A: one\r\n  two" in new
            old, new = _unfolded(old), _unfolded(new)
        assert new == old, (warc, method)
        if name != "cookies":   # with a cookie kept, the next requests go by requests' own path (its pool)
            assert new_connections == old_connections, (warc, method)


def _keep_alive(server: RawServer, conn: socket.socket, n: int) -> None:
    while server.read_request(conn):
        conn.sendall(OK)


def test_a_direct_response_is_read_without_urllib3s_or_http_clients_response(monkeypatch: pytest.MonkeyPatch) -> None:
    def unused(*args: object, **kwargs: object) -> None:
        raise AssertionError("not on the direct path")

    monkeypatch.setattr(urllib3.response.HTTPResponse, "__init__", unused)
    monkeypatch.setattr(http.client.HTTPResponse, "__init__", unused)
    server = RawServer(_keep_alive)
    f = Fetcher(CrawlConfig(connect_timeout=1.0, read_timeout=1.0, max_time=3.0))
    try:
        for _ in range(3):
            r = f.fetch(server.url("/a"))
            assert isinstance(r, Response) and r.body == PAGE, r
        assert server.connections == 1
    finally:
        f.close()
        _stop(server)


def test_the_request_head_is_made_once_for_the_same_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    head_after_line = fetch._Direct._head_after_line   # (http.client's lines, or the same made without it)

    def counted(self: fetch._Direct, method: str, headers: dict[str, str]) -> bytes:
        made.append(method)
        return head_after_line(self, method, headers)

    monkeypatch.setattr(fetch._Direct, "_head_after_line", counted)
    server = RawServer(_keep_alive)
    f = Fetcher(CrawlConfig(connect_timeout=1.0, read_timeout=1.0, max_time=3.0))
    try:
        for path in ("/a", "/b?x=1", "/c"):
            assert isinstance(f.fetch(server.url(path)), Response)
        assert made == ["GET"]
        assert isinstance(f.fetch(server.url("/d"), headers={"If-None-Match": '"x"'}), Response)
        assert isinstance(f.fetch(server.url("/e"), method="HEAD"), Response)
        assert made == ["GET", "GET", "HEAD"]
        sent = [q.split(b"\r\n", 1) for q in server.requests]
        assert [line for line, _ in sent] == [b"GET /a HTTP/1.1", b"GET /b?x=1 HTTP/1.1", b"GET /c HTTP/1.1",
                                              b"GET /d HTTP/1.1", b"HEAD /e HTTP/1.1"]
        assert sent[0][1] == sent[1][1] == sent[2][1] == sent[4][1]
        assert sent[3][1].endswith(b'If-None-Match: "x"\r\n\r\n')
    finally:
        f.close()
        _stop(server)


def test_a_read_of_any_size_receives_at_most_64_kib_at_once() -> None:
    """``_Wire.read1(n)`` asks the socket for at most 64 KiB whatever ``n`` (a declared length of
    1 TB read as one piece must not allocate 1 TB), and ``read(n)`` stops at the end."""
    from spider.fetch import _Wire

    ours, theirs = socket.socketpair()
    theirs.sendall(b"x" * 200_000)
    theirs.close()
    wire = _Wire(ours)
    try:
        assert len(wire.read1(10**12)) <= 65536
        assert len(wire.read(10**12)) > 0 and wire.read1(10**12) == b""
    finally:
        wire.close()
