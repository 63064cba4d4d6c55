"""The fetcher: the only place that talks HTTP. One request, one hop, no redirect following.

Redirects are returned to the caller, which checks each hop against scope (and dedup) before it is
requested. One client per worker process (connection reuse): plain http on kept connections of
its own, the rest through a ``requests.Session``, made (and requests imported) on first need;
connect and read timeouts on every request; the body is streamed and capped after decompression
(a gzip bomb stops at the cap) and under a total time limit (a server trickling one byte a second
cannot hold a worker).
Non-HTML bodies are not downloaded: the crawler records them but has nothing to parse; with a
WARC writer (--warc) every body is still read to its end, up to --max-bytes as received, for the
archive alone (``_Body.drain``).

The body is read off the wire undecoded and decoded here (gzip, deflate, br when a bounded brotli
decoder is installed), each step asked for at most what the cap still allows: the bytes as received
can go to a WARC file (``spider/warc.py``) while the crawler sees the decoded body as before.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import _signal
import re
import signal
import socket
import struct
import sys
import threading
import time
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, NamedTuple, Protocol

from .config import CrawlConfig
from .policy import PAUSED, FetchFailure
from .records import HTML_TYPES, safe_text
from .warc import Exchange, WarcWriter, request_head, response_head

if TYPE_CHECKING:
    import requests
    import urllib3
    from urllib3.response import BaseHTTPResponse
    from urllib3.util import Timeout as TimeoutSauce

    from . import fetch_requests

try:   # brotli >= 1.2 can bound its output (output_buffer_limit); an older one could be bombed
    import brotli
    _BROTLI = hasattr(brotli.Decompressor(), "can_accept_more_data")
except ImportError:   # pragma: no cover - depends on what is installed
    brotli = None
    _BROTLI = False

CSS_TYPES = ("text/css",)
# What we decode ourselves, and so all we ask for in Accept-Encoding.
ACCEPT_ENCODING = "gzip, deflate" + (", br" if _BROTLI else "")
DECODABLE = frozenset({"identity", "gzip", "x-gzip", "deflate"} | ({"br"} if _BROTLI else set()))
_CHUNK = 65536
MAX_INTERIM = 100   # interim (1xx) responses skipped before one request's final response


def _module(name: str):  # type: ignore[no-untyped-def]
    """The module ``name``, imported now if it was not yet, with SIGALRM held off meanwhile:
    --max-time's timer (``_arm``) must not cut an import in two; it rings right after instead."""
    module = sys.modules.get(name)
    if module is None:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        try:
            __import__(name)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        module = sys.modules[name]
    return module


def _parts() -> "fetch_requests":  # type: ignore[valid-type]
    """``spider.fetch_requests``: what needs requests and urllib3 (~50 ms to import), on first need."""
    return _module(__package__ + ".fetch_requests")


def _urllib3_errors():  # type: ignore[no-untyped-def]
    """``urllib3.exceptions``, imported on the first error to raise as urllib3 names it."""
    return _module("urllib3.exceptions")


class _OnFirstUse:
    """A package as this module's code names it (``http.client.X``, ``email.parser.Parser``),
    its submodule imported when first named (``_module``): the direct path reads and writes
    HTTP itself, and http.client (with ssl and the email parser, ~7 ms of every start) is
    needed only for an unusual head, an error, a cookie or requests' path."""

    __slots__ = ("_package",)

    def __init__(self, package: str) -> None:
        self._package = package

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        if name.startswith("_"):   # (asked by inspect, doctest, copy...: not a submodule)
            raise AttributeError(name)
        return _module(f"{self._package}.{name}")


http = _OnFirstUse("http")
email = _OnFirstUse("email")


_LAZY = frozenset({"_Connection", "_TLSConnection", "_Pool", "_TLSPool", "_Adapter", "_FinalResponse"})


def __getattr__(name: str) -> object:
    """The subclasses of requests', urllib3's and http.client's classes, from ``spider.fetch_requests``."""
    if name in _LAZY:
        return getattr(_parts(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _TooSlow(BaseException):   # not an Exception: no handler on the way may swallow it
    pass


# --max-time's timer: each fetch sets the process's ITIMER_REAL to ring at its deadline, and the
# handler raises ``_TooSlow`` if the deadline passed. The timer is not turned off after a fetch
# (one setitimer call a page, not two): the next fetch sets it anew, and a ring between fetches,
# or one left from the fetch before that comes as the next one starts, interrupts nothing.
_armed = False     # a fetch is running under its deadline (``_arm``)
_deadline = 0.0    # that deadline (time.monotonic())
_set = False       # the timer may be running (``_stop_timer``)
# The handler of a signal as set: signal.getsignal also looks it up among the Handlers enum,
# by a failed enum lookup for any function (3 µs, twice a fetch).
_handler = getattr(_signal, "getsignal", signal.getsignal)


def _on_alarm(signum: int, frame: object) -> None:
    if _armed:   # else the timer rang between fetches: nothing to interrupt
        left = _deadline - time.monotonic()
        if left <= 0:
            raise _TooSlow()
        # the timer of the fetch before, ringing as this one starts (it sets its own right
        # after), or this one's a hair early: it rings again at the deadline
        signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6))


# Time this process spends stopped (SIGSTOP, Ctrl-Z then fg) is not the server's slowness, but
# every clock that counts a request's time counts it (ITIMER_REAL, the socket's timeout, the
# monotonic clock), and no clock leaves it out: CPU clocks also leave out the waiting for the
# server, and SIGSTOP cannot be caught to note when the stop began. What can be seen is the
# SIGCONT that ends a stop. So a request that ran out of time (or lost its connection) while a
# SIGCONT arrived is reported as ``paused``: tried again at once, with no attempt spent. Its time
# is not measured again against what is left of --max-time: how long the stop lasted is unknown,
# and the server may have closed the connection meanwhile anyway.
_continued = 0   # SIGCONTs received by this process


def _on_continue(signum: int, frame: object) -> None:
    global _continued
    _continued += 1


def _watch_pauses() -> None:
    """Count this process's SIGCONTs (once is enough). In the main thread only, which alone can
    set a handler: the caller checks (``Fetcher.fetch``, once for the three of a fetch)."""
    if _handler(signal.SIGCONT) is not _on_continue:
        signal.signal(signal.SIGCONT, _on_continue)


def _unless_paused(result: "Response | FetchFailure", continued: int) -> "Response | FetchFailure":
    """``result``, or a ``paused`` failure if it timed out or broke while the process was stopped.

    The SIGCONT that ended a stop may not have reached its handler yet: when the SIGALRM that
    came with it (the timer ran out during the stop) raised first, Python leaves the other
    pending handlers to its next explicit check, which no bytecode makes. ``signal.signal``
    makes one (that is how the per-fetch handler swap used to run it), so a failure that may be
    a pause asks for it before reading the count."""
    if isinstance(result, FetchFailure) and (result.transient or result.kind == "too slow"):
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGCONT, _on_continue)   # runs the pending handlers first
        if _continued != continued:
            return FetchFailure(PAUSED, True, f"{result.kind} while this process was stopped (SIGSTOP or Ctrl-Z)")
    return result


def _arm(seconds: float) -> None:
    """Raise ``_TooSlow`` in this thread after ``seconds``, until ``_disarm``. In the main thread
    only (the caller checks): signals cannot be used elsewhere; the per-chunk check still
    applies there.

    The handler is installed once per process and left in place: swapping it in and out around
    every request cost two sigaction calls and ~11 µs a page (of 1.6 µs for the timer itself),
    and a SIGALRM that comes between fetches is ignored instead of reaching the handler
    restored meanwhile (by default, the end of the process). The deadline and ``_armed`` come
    first: a ring from here on is measured against this fetch's deadline."""
    global _armed, _deadline, _set
    if _handler(signal.SIGALRM) is not _on_alarm:
        signal.signal(signal.SIGALRM, _on_alarm)
    _deadline = time.monotonic() + seconds
    _armed = _set = True
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _disarm() -> None:
    """The fetch is over: a ring from now on finds nothing to interrupt. The timer is left to
    run (the next fetch sets it anew): turning it off cost a system call a page. Only the main
    thread arms it, and only it disarms it (the caller checks): a fetch in another thread
    leaves it be."""
    global _armed
    _armed = False


def _stop_timer() -> None:
    """Turn off the timer left running by the last fetch (``Fetcher.close``): nothing of this
    module rings once its fetchers are closed."""
    global _set
    if _set and not _armed and threading.current_thread() is threading.main_thread():
        _set = False
        signal.setitimer(signal.ITIMER_REAL, 0)


@dataclass(frozen=True)
class Response:
    """One response as the crawler sees it (one hop: a redirect is returned, not followed)."""

    url: str
    status: int
    content_type: str        # parse_content_type's media type ("" when the server sent none)
    charset: str | None
    body: bytes              # the decoded body for HTML; empty for other types
    size: int                # bytes received (decoded), or the declared length when not downloaded
    location: str | None     # raw Location header of a redirect
    elapsed: float
    retry_after: str | None = None
    etag: str | None = None            # validators, for conditional requests on recrawl
    last_modified: str | None = None
    link: str | None = None            # the Link and Refresh headers: they may name pages too
    refresh: str | None = None

    @property
    def is_html(self) -> bool:
        return self.content_type in HTML_TYPES


def parse_content_type(value: str | None) -> tuple[str, str | None]:
    """The media type and charset of a Content-Type header; the media type is what the crawler
    records and what decides whether the body is parsed, so both see the same text.

    It is written as a record field would be (``records.safe_text``): a NUL or ESC in it stays
    visible (``text/html\\x00``) and such a type is not HTML. Before, ``text/html\\x00`` was
    recorded as ``text/html`` (the record's cleaning dropped the NUL) but not parsed.

    >>> parse_content_type('Text/HTML; charset="UTF-8"')
    ('text/html', 'UTF-8')
    >>> parse_content_type("text/html\\x00")
    ('text/html\\\\x00', None)
    """
    if not value:
        return "", None
    parts = value.split(";")
    media = safe_text(parts[0]).strip().lower()
    charset = None
    for p in parts[1:]:
        k, _, v = p.partition("=")
        if k.strip().lower() == "charset":
            charset = v.strip().strip("\"'") or None
    return media, charset


_MEDIA_TYPES: dict[str | None, tuple[str, str | None]] = {}


def _media_type(value: str | None) -> tuple[str, str | None]:
    """``parse_content_type``, of a value read before: most pages of a site have the same."""
    known = _MEDIA_TYPES.get(value)
    if known is None:
        known = parse_content_type(value)
        if value is None or len(value) <= 128:   # a hostile server's long ones are not kept
            if len(_MEDIA_TYPES) >= 64:
                _MEDIA_TYPES.clear()
            _MEDIA_TYPES[value] = known
    return known


def _sniff_html(head: bytes) -> bool:
    h = head[:1024].lstrip().lower()
    return h.startswith((b"<!doctype html", b"<html")) or b"<html" in h or b"<body" in h


# ------------------------------------------------------------------------------- content decoding


class _Stage(Protocol):
    def feed(self, data: bytes) -> None: ...
    def read(self, n: int) -> bytes: ...


class _Identity:
    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> None:
        self._buf = self._buf + data if self._buf else data

    def read(self, n: int) -> bytes:
        out, self._buf = (self._buf, b"") if len(self._buf) <= n else (self._buf[:n], self._buf[n:])
        return out


class _Zlib:
    """gzip (several members, trailing garbage ignored, as urllib3 does) or deflate (zlib-wrapped,
    or raw as some servers send it). ``read(n)`` returns at most ``n`` bytes: a bomb stays small."""

    def __init__(self, gzip: bool) -> None:
        self._gzip = gzip
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS if gzip else zlib.MAX_WBITS)
        self._pending = b""
        self._first: bytes | None = None if gzip else b""   # deflate: input kept until it decodes
        self._members = 0
        self._done = False

    def feed(self, data: bytes) -> None:
        if not self._done:
            self._pending += data

    def read(self, n: int) -> bytes:
        while self._pending and not self._done:
            data, self._pending = self._pending, b""
            if self._first is not None:
                self._first += data
            try:
                out = self._d.decompress(data, n)
            except zlib.error:
                if not self._recover():
                    raise
                continue
            if out or self._d.eof:
                self._first = None
            if self._d.eof:   # the rest is in unused_data (unconsumed_tail may repeat it)
                self._next_member(self._d.unused_data)
            else:
                self._pending = self._d.unconsumed_tail
            if out:
                return out
        return b""

    def _recover(self) -> bool:
        """After a zlib error: a deflate body that is not zlib-wrapped starts again as raw deflate;
        a broken later gzip member ends the body (other clients ignore trailing garbage too)."""
        if self._gzip and self._members:
            self._pending, self._done = b"", True
            return True
        if self._first is None:
            return False
        self._d, self._pending, self._first = zlib.decompressobj(-zlib.MAX_WBITS), self._first, None
        return True

    def _next_member(self, rest: bytes) -> None:
        """gzip: what follows may be another member, now or in a later chunk. deflate: the end."""
        self._members += 1
        if self._gzip:
            self._d, self._pending = zlib.decompressobj(16 + zlib.MAX_WBITS), rest
        else:
            self._pending, self._done = b"", True


class _Brotli:
    def __init__(self) -> None:
        self._d = brotli.Decompressor()
        self._pending = b""

    def feed(self, data: bytes) -> None:
        self._pending += data

    def read(self, n: int) -> bytes:
        if self._d.is_finished():
            self._pending = b""
            return b""
        if self._d.can_accept_more_data():
            data, self._pending = self._pending, b""
            if not data:
                return b""
        else:
            data = b""
        return self._d.process(data, output_buffer_limit=n)


def _stage(encoding: str) -> _Stage:
    if encoding in ("gzip", "x-gzip"):
        return _Zlib(gzip=True)
    if encoding == "deflate":
        return _Zlib(gzip=False)
    if encoding == "br":
        return _Brotli()
    return _Identity()


class _Decoder:
    """Undo the content codings in reverse order of application (RFC 9110 8.4), each stage pulled
    for a bounded amount, so no stage ever holds much more than what the caller asked for."""

    def __init__(self, encodings: list[str]) -> None:
        self._stages = [_Identity()] + [_stage(e) for e in reversed(encodings) if e != "identity"]

    def feed(self, data: bytes) -> None:
        self._stages[0].feed(data)

    def read(self, n: int) -> bytes:
        return self._pull(len(self._stages) - 1, n)

    def _pull(self, i: int, n: int) -> bytes:
        stage = self._stages[i]
        while True:
            out = stage.read(n)
            if out or i == 0:
                return out
            more = self._pull(i - 1, _CHUNK)
            if not more:
                return b""
            stage.feed(more)


_DECODE_ERRORS: tuple[type[BaseException], ...] = (zlib.error,) + ((brotli.error,) if _BROTLI else ())


class _ReadFailure(Exception):
    """Reading the body ended in ``failure`` (already noted in the WARC exchange)."""

    def __init__(self, failure: FetchFailure) -> None:
        super().__init__(failure.kind)
        self.failure = failure


class _Body:
    """A response body read off the wire as received and decoded here: the received bytes go to the
    WARC exchange, the decoded ones to the crawler. ``raw_cap`` bounds the received bytes too (a
    stream of empty deflate blocks decodes to nothing for ever)."""

    def __init__(self, r: requests.Response, encodings: list[str], raw_cap: int, ex: Exchange | None) -> None:
        self._raw = r.raw
        self._decoder = _Decoder(encodings) if encodings else None   # None: the bytes as received
        self._rest = b""   # received, not yet read (no content coding)
        self._raw_cap = raw_cap
        self._ex = ex
        self._received = 0
        self._eof = False

    def read(self, n: int) -> bytes | None:
        """At most about ``n`` decoded bytes; b"" when what came so far decodes to nothing yet,
        None at the end of the body."""
        try:
            if self._decoder is None:
                return self._read_plain(n)
            out = self._decoder.read(n)
            if out or self._eof:
                return out or None
            chunk = self._raw.read1(_CHUNK, decode_content=False)
            if not chunk:
                self._eof = True
                if self._ex is not None:
                    self._ex.complete = True
                return self._decoder.read(n) or None
            self._keep(chunk)
            self._decoder.feed(chunk)
            return self._decoder.read(n)
        except _ReadFailure:
            raise
        except _DECODE_ERRORS as e:
            raise _ReadFailure(FetchFailure("bad content encoding", False, f"{type(e).__name__}: {e}")) from None
        except Exception as e:   # requests and urllib3 errors raised from the raw stream
            failure = failure_of(e)
            self.cut("time" if failure.kind == "timeout" else "disconnect")
            raise _ReadFailure(failure) from None

    def _read_plain(self, n: int) -> bytes | None:
        """``read`` of a body without content coding: what the identity decoder would give, without
        its stages (a few µs a page)."""
        out = self._rest
        if not out:
            if self._eof:
                return None
            out = self._raw.read1(_CHUNK, decode_content=False)
            if not out:
                self._eof = True
                if self._ex is not None:
                    self._ex.complete = True
                return None
            self._keep(out)
        if len(out) > n:
            self._rest = out[n:]
            return out[:n]
        self._rest = b""
        return out

    def cut(self, reason: str) -> None:
        if self._ex is not None:
            self._ex.cut(reason)

    def drain(self, cap: int, until: float) -> None:
        """For the WARC file only (--warc): read the rest of a body the crawler does not need (not
        HTML, an error status, a coding it cannot undo), as received and not decoded, keeping at
        most ``cap`` bytes (then ``WARC-Truncated: length``) until the monotonic time ``until``
        (then ``time``). What goes wrong here is the archive's loss only: the crawler's answer
        stays what it was without --warc."""
        ex = self._ex
        if ex is None or self._eof or ex.complete or ex.truncated or not ex.response:
            return
        try:
            while True:
                if time.monotonic() > until:
                    self.cut("time")
                    return
                chunk = self._raw.read1(min(_CHUNK, cap - self._received + 1), decode_content=False)
                if not chunk:
                    self._eof = ex.complete = True
                    return
                self._received += len(chunk)
                if self._received > cap:   # keep exactly the first ``cap`` bytes
                    ex.body.append(chunk[:len(chunk) - (self._received - cap)])
                    self.cut("length")
                    return
                ex.body.append(chunk)
        except _TooSlow:   # --max-time ran out meanwhile
            self.cut("time")
        except Exception:   # requests and urllib3 errors raised from the raw stream
            self.cut("disconnect")

    def _keep(self, chunk: bytes) -> None:
        self._received += len(chunk)
        if self._ex is not None:
            self._ex.body.append(chunk)
        if self._received > self._raw_cap:
            self.cut("length")
            raise _ReadFailure(FetchFailure("too large", False, f"over {self._raw_cap} bytes received"))


def _capture(r: requests.Response, ex: Exchange) -> None:
    """Note the request as sent and the response head as received, for the WARC records."""
    req = r.request
    ex.url = req.url or ex.url
    ex.request = request_head(req.method or "GET", ex.url, req.headers.items())
    raw = r.raw
    original = getattr(raw, "_original_response", None)
    headers = original.msg.items() if original is not None else raw.headers.items()
    ex.response = response_head(raw.version or 11, raw.status, raw.reason or "", headers)
    ex.declared = _int(r.headers.get("Content-Length"))
    ex.complete = r.status_code in (204, 304) or r.status_code < 200 or req.method == "HEAD"
    ex.ip = _peer_address(raw, original)
    if r._content_consumed and isinstance(r._content, bytes):   # type: ignore[attr-defined]
        # requests reads a redirect's body itself (Session.resolve_redirects, for Response.next),
        # content-decoded: as received only when there was no content coding
        if r.headers.get("Content-Encoding", "identity").strip().lower() == "identity":
            ex.body.append(r._content)   # type: ignore[attr-defined]
            ex.complete = True
        else:
            ex.truncated = "unspecified"


def _peer_address(raw: object, original: object) -> str | None:
    """The server's IP address, from the pooled connection, or else from the socket the response
    is read from (HTTP/1.0 servers that close: urllib3 gives the connection up at once). None
    when neither is open any more (an empty body the server closed at once)."""
    for get in (lambda: raw._connection.sock,                  # type: ignore[attr-defined]
                lambda: original.fp.raw._sock):                # type: ignore[attr-defined]
        with contextlib.suppress(Exception):
            return str(get().getpeername()[0])
    return None


# A header block that the email parser (http.client's) reads as one "Name: value" per line: no
# continuation line, no "From " line, no lone CR nor any other character str.splitlines breaks a
# line at (some Pythons' email parsers split there) but the line's own end, and (checked after)
# no multipart or message type, whose parse goes on into the (empty) body and notes defects.
_PLAIN_HEADERS = re.compile(r"(?:[!-9;-~]+:[^\r\n\x0b\x0c\x1c-\x1e\x85]*\r?\n)*(?:\r?\n)?\Z")


def parse_headers(lines: list[bytes]) -> http.client.HTTPMessage:
    """The header lines of a response (as ``http.client._read_headers`` reads them, its limits
    applied) as the same ``HTTPMessage`` that ``http.client.parse_headers`` gives, built without
    the email parser when the block is plain (~2 µs instead of ~23 µs for nginx's 8 headers).

    >>> parse_headers([b"Content-Type:  text/html \\r\\n", b"\\r\\n"]).items()
    [('Content-Type', 'text/html ')]
    """
    text = b"".join(lines).decode("iso-8859-1")
    if _PLAIN_HEADERS.match(text):
        msg = http.client.HTTPMessage()
        for line in text.split("\n"):
            if line and line != "\r":
                name, _, value = line.partition(":")
                msg.set_raw(name, value.lstrip(" \t").rstrip("\r"))
        msg.set_payload("")
        if msg.get_content_maintype() not in ("multipart", "message"):
            return msg
    return email.parser.Parser(_class=http.client.HTTPMessage).parsestr(text)


class _Keeper:
    """What a direct response (``_Direct``) is released to once its body was read to its end:
    nothing to do, the connection stays kept by its ``_Direct``. Named as the origin's urllib3
    pool would be, for the same error texts (``_Pool(host='h', port=80): Read timed out.``)."""

    __slots__ = ("_name",)

    def __init__(self, host: str, port: int) -> None:
        self._name = f"_Pool(host={host!r}, port={port!r})"   # fetch_requests._Pool

    def __str__(self) -> str:
        return self._name

    def _put_conn(self, conn: object) -> None:
        pass


# Errors of a kept connection the server closed meanwhile, met before any byte of the response
# (http.client's RemoteDisconnected, raised by ``_status_line``, is a ConnectionResetError).
_STALE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
_MAXLINE = 65536      # http.client's limits: a longer head line is a LineTooLong,
_MAXHEADERS = 100     # and this many lines (the blank one included) "got more than 100 headers"
_log = logging.getLogger("urllib3.response")   # where urllib3 warns of a length with chunked


class _Wire:
    """A kept connection's socket and what came on it not read yet. A new request starts with
    nothing buffered, as http.client's reader, made anew for each response, did."""

    __slots__ = ("sock", "data", "pos", "timeout")

    def __init__(self, sock: socket.socket) -> None:
        self.sock: socket.socket | None = sock
        self.data = b""
        self.pos = 0
        self.timeout: float | None = None

    def recv(self) -> bytes:
        """One recv of at most 64 KiB. The socket blocks, with its timeouts set in the kernel
        (``_set_timeout``): one that runs out comes as EAGAIN, raised as the timeout that
        Python's timeout mode raises (what urllib3 and the callers name a read timeout)."""
        try:
            return self.sock.recv(_CHUNK)  # type: ignore[union-attr]
        except BlockingIOError:
            raise socket.timeout("timed out") from None

    def more(self) -> bool:
        """One recv added to what is buffered; False at the end of the stream."""
        got = self.recv()
        if not got:
            return False
        self.data = self.data[self.pos:] + got if self.pos < len(self.data) else got
        self.pos = 0
        return True

    def readline(self, limit: int) -> bytes:
        """As ``BufferedReader.readline(limit)``: up to a b"\\n", ``limit`` bytes or the end."""
        while True:
            data, pos = self.data, self.pos
            i = data.find(b"\n", pos, pos + limit)
            if i >= 0:
                self.pos = i + 1
                return data[pos:i + 1]
            if len(data) - pos >= limit or not self.more():
                end = min(len(self.data), self.pos + limit)
                line, self.pos = self.data[self.pos:end], end
                return line

    def read1(self, n: int) -> bytes:
        """As ``BufferedReader.read1(n)``: what is buffered, else one recv (of at most 64 KiB,
        whatever ``n``: a declared length of 10 GB allocates nothing); at most ``n`` bytes (any
        number when ``n`` < 0)."""
        data, pos = self.data, self.pos
        if pos >= len(data):
            if n == 0:
                return b""
            data = self.recv()
            pos = 0
        if n < 0 or len(data) - pos <= n:
            self.data, self.pos = b"", 0
            return data[pos:] if pos else data
        self.data, self.pos = data, pos + n
        return data[pos:pos + n]

    def read(self, n: int) -> bytes:
        """As ``BufferedReader.read(n)``: ``n`` bytes, fewer only at the end of the stream."""
        parts, got = [], 0
        while got < n:
            piece = self.read1(n - got)
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
        return b"".join(parts)

    def close(self) -> None:
        sock, self.sock = self.sock, None
        self.data, self.pos = b"", 0
        if sock is not None:
            sock.close()


_STATUS_LINES: dict[bytes, tuple[str, int, str]] = {}   # a few lines come back again and again


def _status_line(line: bytes) -> tuple[str, int, str]:
    """http.client's ``_read_status`` of one status line as read (its line end included); a
    line read before is not read again (``HTTP/1.1 200 OK``: 0.5 µs)."""
    known = _STATUS_LINES.get(line)
    if known is not None:
        return known
    known = _read_status_line(line)
    if len(line) <= 64:   # a hostile server's long ones are not kept
        if len(_STATUS_LINES) >= 64:
            _STATUS_LINES.clear()
        _STATUS_LINES[line] = known
    return known


def _read_status_line(line: bytes) -> tuple[str, int, str]:
    text = str(line, "iso-8859-1")
    if len(text) > _MAXLINE:
        raise http.client.LineTooLong("status line")
    if not text:   # the server closed the connection before sending a valid response
        raise http.client.RemoteDisconnected("Remote end closed connection without response")
    try:
        version, status, reason = text.split(None, 2)
    except ValueError:
        try:
            version, status = text.split(None, 1)
            reason = ""
        except ValueError:
            version = ""
    if not version.startswith("HTTP/"):
        raise http.client.BadStatusLine(text)
    try:
        code = int(status)
    except ValueError:
        raise http.client.BadStatusLine(text) from None
    if code < 100 or code > 999:
        raise http.client.BadStatusLine(text)
    return version, code, reason


def _header_lines(wire: _Wire) -> bytes:
    """The header block as ``http.client._read_headers`` reads it, line by line, its limits applied."""
    lines = []
    while True:
        line = wire.readline(_MAXLINE + 1)
        if len(line) > _MAXLINE:
            raise http.client.LineTooLong("header line")
        lines.append(line)
        if len(lines) > _MAXHEADERS:
            raise http.client.HTTPException(f"got more than {_MAXHEADERS} headers")
        if line in (b"\r\n", b"\n", b""):
            return b"".join(lines)


def _one_head(wire: _Wire) -> tuple[str, int, str, bytes | None]:
    """The next status line (version, status, reason) and, when it came whole in what is
    buffered, the header block after it (else None: the caller reads it line by line).

    The whole head is split at once when it is plain (every line ends in CRLF, within
    http.client's limits): then its lines are what reading them one by one would give."""
    if wire.pos >= len(wire.data):
        wire.more()
    data, pos = wire.data, wire.pos
    end = data.find(b"\r\n\r\n", pos, pos + _MAXLINE)
    if end >= 0:
        lines = data.count(b"\n", pos, end + 2)
        if lines <= _MAXHEADERS and lines == data.count(b"\r\n", pos, end + 2):
            i = data.index(b"\r\n", pos)
            wire.pos = end + 4
            return (*_status_line(data[pos:i + 2]), data[i + 2:end + 4])
    return (*_status_line(wire.readline(_MAXLINE + 1)), None)


def _read_head(wire: _Wire) -> tuple[int, int, str, bytes]:
    """Version (10, 11), status, reason and header block of the final response, as
    ``_FinalResponse.begin`` reads them: interim (1xx) responses skipped, 101 kept."""
    while True:
        for _ in range(MAX_INTERIM):
            version, status, reason, block = _one_head(wire)
            if not 100 < status < 200 or status == 101:
                break
            if block is None:
                _header_lines(wire)   # the interim headers
        else:
            raise http.client.HTTPException(f"got more than {MAX_INTERIM} interim (1xx) responses")
        if status != 100:   # http.client.CONTINUE
            break
        if block is None:
            _header_lines(wire)
    if version in ("HTTP/1.0", "HTTP/0.9"):
        number = 10
    elif version.startswith("HTTP/1."):
        number = 11
    else:
        raise http.client.UnknownProtocol(version)
    return number, status, reason.strip(), _header_lines(wire) if block is None else block


def _header_pairs(block: bytes) -> tuple["_Headers", http.client.HTTPMessage | None]:
    """The headers of a header block as ``parse_headers`` reads them (``_Headers``), and the
    HTTPMessage when the email parser had to make it (else None: made only if asked for)."""
    text = block.decode("iso-8859-1")
    if _PLAIN_HEADERS.match(text):
        pairs = []
        for line in text.split("\n"):
            if line and line != "\r":
                name, _, value = line.partition(":")
                pairs.append((name, value.lstrip(" \t").rstrip("\r")))
        headers = _Headers(pairs)
        ctype = headers.first("content-type")
        main = ctype.partition(";")[0].strip().lower() if ctype is not None else ""
        if main.count("/") != 1 or main.partition("/")[0] not in ("multipart", "message"):
            return headers, None
    msg = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(text)
    return _Headers(msg.items()), msg


def _first(pairs: list[tuple[str, str]], name: str) -> str | None:
    """``HTTPMessage.get``: the first value of a header."""
    for k, v in pairs:
        if len(k) == len(name) and k.lower() == name:
            return v
    return None


class _Headers:
    """A response's headers read as urllib3's ``HTTPHeaderDict`` reads them (any case; the
    values of a repeated header joined by ", "), ``items`` one pair per header line, and
    ``first`` as ``HTTPMessage.get`` (http.client's framing reads that)."""

    __slots__ = ("_joined", "_pairs", "_repeated")

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = pairs
        joined: dict[str, str] = {}
        repeated: set[str] | None = None
        for name, value in pairs:
            key = name.lower()
            if key in joined:
                joined[key] += ", " + value
                repeated = (repeated or set()) | {key}
            else:
                joined[key] = value
        self._joined, self._repeated = joined, repeated

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._joined.get(name.lower(), default)

    def first(self, key: str) -> str | None:
        """The first value of a header (``key`` in lower case)."""
        if self._repeated is not None and key in self._repeated:
            return _first(self._pairs, key)
        return self._joined.get(key)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._joined

    def items(self) -> list[tuple[str, str]]:
        return list(self._pairs)


class _Stream:
    """A response body framed as http.client's ``HTTPResponse`` frames it (its ``read1``,
    ``read``, ``close`` and ``isclosed``, chunked bodies, trailers and errors included), read
    off our own ``_Wire``; ``msg`` is the HTTPMessage, made when asked for (cookies)."""

    __slots__ = ("wire", "owner", "length", "chunked", "chunk_left", "head", "closed", "_open",
                 "_pairs", "_msg")

    def __init__(self, wire: _Wire, owner: bool, pairs: list[tuple[str, str]],
                 msg: http.client.HTTPMessage | None, length: int | None, chunked: bool, head: bool) -> None:
        self.wire, self.owner = wire, owner   # owner: the connection ends with this response
        self._pairs, self._msg = pairs, msg
        self.length, self.chunked, self.chunk_left, self.head = length, chunked, None, head
        self.closed = False   # io's flag: set by close() only
        self._open = True     # http.client's ``fp is not None``

    @property
    def msg(self) -> http.client.HTTPMessage:
        if self._msg is None:
            msg = self._msg = http.client.HTTPMessage()
            for name, value in self._pairs:
                msg.set_raw(name, value)
            msg.set_payload("")
        return self._msg

    def isclosed(self) -> bool:
        return not self._open

    def _close_conn(self) -> None:
        if self._open:
            self._open = False
            if self.owner:
                self.wire.close()

    def close(self) -> None:
        self.closed = True
        self._close_conn()

    def read1(self, n: int = -1) -> bytes:
        if not self._open or self.head:
            return b""
        if self.chunked:
            return self._read1_chunked(n)
        length = self.length
        if length is not None and (n < 0 or n > length):
            n = length
        result = self.wire.read1(n)
        if not result and n:
            self._close_conn()
        elif length is not None:
            self.length = length - len(result)
        return result

    def read(self, amt: int | None = None) -> bytes:
        """http.client's ``read``, for urllib3 reading a body for requests (a redirect's)."""
        if not self._open:
            return b""
        if self.head:
            self._close_conn()
            return b""
        if self.chunked:
            parts: list[bytes] = []
            try:
                while amt is None or amt > 0:
                    piece = self._read1_chunked(-1 if amt is None else amt)
                    if not piece:
                        break
                    parts.append(piece)
                    if amt is not None:
                        amt -= len(piece)
            except http.client.IncompleteRead as e:
                raise http.client.IncompleteRead(b"".join(parts)) from e
            return b"".join(parts)
        if amt is not None:
            if self.length is not None and amt > self.length:
                amt = self.length
            s = self.wire.read(amt)
            if not s and amt:
                self._close_conn()
            elif self.length is not None:
                self.length -= len(s)
                if not self.length:
                    self._close_conn()
            return s
        if self.length is None:
            s = self.wire.read(1 << 62)
        else:
            s = self.wire.read(self.length)
            if len(s) < self.length:
                self._close_conn()
                raise http.client.IncompleteRead(s, self.length - len(s))
            self.length = 0
        self._close_conn()
        return s

    def _read1_chunked(self, n: int) -> bytes:
        chunk_left = self._chunk_left()
        if chunk_left is None or n == 0:
            return b""
        if not 0 <= n <= chunk_left:
            n = chunk_left
        got = self.wire.read1(n)
        self.chunk_left = chunk_left - len(got)
        if not got:
            raise http.client.IncompleteRead(b"")
        return got

    def _chunk_left(self) -> int | None:
        chunk_left = self.chunk_left
        if not chunk_left:
            wire = self.wire
            if chunk_left is not None:   # the CRLF after a chunk
                crlf = wire.read(2)
                if len(crlf) < 2:
                    raise http.client.IncompleteRead(crlf, 2 - len(crlf))
            line = wire.readline(_MAXLINE + 1)
            if len(line) > _MAXLINE:
                raise http.client.LineTooLong("chunk size")
            try:
                chunk_left = int(line.partition(b";")[0], 16)
            except ValueError:
                self._close_conn()
                raise http.client.IncompleteRead(b"") from None
            if chunk_left == 0:   # the last chunk: trailers follow, up to a blank line
                while True:
                    line = wire.readline(_MAXLINE + 1)
                    if len(line) > _MAXLINE:
                        raise http.client.LineTooLong("trailer line")
                    if line in (b"\r\n", b"\n", b""):
                        break
                self._close_conn()
                chunk_left = None
            self.chunk_left = chunk_left
        return chunk_left


def _check_close(version: int, headers: _Headers) -> bool:
    """http.client's ``_check_close``: does the server close the connection after this response?"""
    conn = headers.first("connection")
    if version == 11:
        return bool(conn and "close" in conn.lower())
    if headers.first("keep-alive"):
        return False
    if conn and "keep-alive" in conn.lower():
        return False
    pconn = headers.first("proxy-connection")
    return not (pconn and "keep-alive" in pconn.lower())


def _read_error(e: Exception, pool: object) -> Exception:
    """The error urllib3's ``read1`` raises for ``e`` met reading a body (``e`` itself when it
    raises it as it is); urllib3's exceptions are imported for it then."""
    errors = _urllib3_errors()
    if isinstance(e, socket.timeout):
        return errors.ReadTimeoutError(pool, None, "Read timed out.")
    if isinstance(e, errors.IncompleteRead):
        if e.expected is not None and e.partial is not None and e.expected == -e.partial:
            return errors.ProtocolError("Response may not contain content.", e)
        return errors.ProtocolError(f"Connection broken: {e!r}", e)
    if isinstance(e, (http.client.HTTPException, OSError)):
        return errors.ProtocolError(f"Connection broken: {e!r}", e)
    return e


class _Reply:
    """A response on a ``_Direct`` connection, read as urllib3's ``HTTPResponse`` around
    http.client's read it for us (``read1`` undecoded, the Content-Length enforced, the errors
    wrapped as urllib3 wraps them, ``close`` and ``release_conn``), without building either:
    the head is parsed from the bytes received, the body framed by ``_Stream``."""

    __slots__ = ("status", "reason", "version", "headers", "_stream", "_connection", "_pool",
                 "length_remaining", "_read", "method", "target")
    _original_response = None   # _capture reads ``headers`` and ``_connection`` instead
    version_string = "HTTP/1.1"

    def __init__(self, direct: "_Direct", wire: _Wire, method: str, target: str) -> None:
        version, status, reason, block = _read_head(wire)
        headers, msg = _header_pairs(block)
        head = method == "HEAD"
        declared = headers._joined.get("content-length")
        if (declared is not None and headers._repeated is None and declared.isdigit() and declared.isascii()
                and "transfer-encoding" not in headers._joined):
            # one plain length and no transfer coding (most answers): what both rules below read
            chunked = False
            length = remaining = int(declared)
            if status in (204, 304) or 100 <= status < 200 or head:
                length = remaining = 0
        else:
            chunked, length = self._framing(headers, status, head)
            remaining = self._length(headers, status, head)
        will_close = _check_close(version, headers)
        if not will_close and not chunked and length is None:
            will_close = True   # no length: the body ends when the connection does
        if will_close:
            direct.wire = None   # the connection goes with this response
        self._stream = _Stream(wire, will_close, headers._pairs, msg, length, chunked, head)
        self.status, self.reason, self.version = status, reason, version
        self.headers = headers
        self._connection: _Wire | None = wire
        self._pool = direct.keeper
        self._read = 0
        self.method, self.target = method, target
        self.length_remaining = remaining

    @staticmethod
    def _framing(headers: _Headers, status: int, head: bool) -> tuple[bool, int | None]:
        """http.client's framing: chunked or not, and the length it reads (None: to the close)."""
        te = headers.first("transfer-encoding")
        chunked = bool(te and te.lower() == "chunked")
        length = None
        declared = headers.first("content-length")
        if declared and not chunked:
            with contextlib.suppress(ValueError):
                length = int(declared)
                if length < 0:   # nonsensical negative lengths are ignored
                    length = None
        if status in (204, 304) or 100 <= status < 200 or head:
            length = 0
        return chunked, length

    @staticmethod
    def _length(headers: _Headers, status: int, head: bool) -> int | None:
        """urllib3's ``_init_length``: the length it enforces."""
        declared = headers.get("content-length")
        length = None
        if declared is not None:
            te = headers.get("transfer-encoding", "").lower()  # type: ignore[union-attr]
            if "chunked" in (e.strip() for e in te.split(",")):
                _log.warning("Received response with both Content-Length and Transfer-Encoding set. "
                             "This is expressly forbidden by RFC 7230 sec 3.3.2. Ignoring "
                             "Content-Length and attempting to process response as "
                             "Transfer-Encoding: chunked.")
                return None
            try:
                lengths = {int(v) for v in declared.split(",")}
                if len(lengths) > 1:
                    raise _urllib3_errors().InvalidHeader(
                        f"Content-Length contained multiple unmatching values ({declared})")
                length = lengths.pop()
            except ValueError:
                length = None
            else:
                if length < 0:
                    length = None
        if status in (204, 304) or 100 <= status < 200 or head:
            length = 0
        return length

    def read1(self, amt: int | None = None, decode_content: bool | None = None) -> bytes:
        """urllib3's ``read1(amt, decode_content=False)``."""
        if amt is not None and amt < 0:
            amt = None
        if amt == 0:
            return b""
        stream = self._stream
        clean = False
        try:
            try:
                data = stream.read1(-1 if amt is None else amt) if not stream.closed else b""
                if amt is not None and not data:
                    stream.close()
                    if self.length_remaining is not None and self.length_remaining != 0:
                        raise _urllib3_errors().IncompleteRead(self._read, self.length_remaining)
                elif not data or self.length_remaining == len(data):
                    stream.close()   # the body's last bytes
            except Exception as e:
                mapped = _read_error(e, self._pool)
                if mapped is e:
                    raise
                raise mapped from e
            clean = True
        finally:
            if not clean:   # the connection is not used again
                stream.close()
                if self._connection is not None:
                    self._connection.close()
            if not stream._open:
                self._connection = None   # released: kept for the next request (closed if cut)
        if data:
            self._read += len(data)
            if self.length_remaining is not None:
                self.length_remaining -= len(data)
        return data

    def close(self) -> None:
        """A body not read to its end closes its connection."""
        if not self._stream.isclosed():
            self._stream.close()
        if self._connection is not None:
            self._connection.close()

    def release_conn(self) -> None:
        self._connection = None

    def for_requests(self) -> urllib3.HTTPResponse:
        """urllib3's response around this one's stream, for requests' own path (a cookie to keep,
        a redirect whose body it reads and decodes): what that path read before."""
        urllib3 = _module("urllib3")
        return urllib3.HTTPResponse(
            body=self._stream, headers=urllib3.HTTPHeaderDict(self.headers.items()), status=self.status,
            version=self.version, version_string="HTTP/1.1", reason=self.reason,
            preload_content=False, decode_content=False, original_response=self._stream,  # type: ignore[arg-type]
            enforce_content_length=True, request_method=self.method, request_url=self.target,
            pool=self._pool, connection=self._connection)  # type: ignore[arg-type]


def _plain_host(host: str) -> bool:
    """Does ``host.encode("idna")`` (urllib3's check before it connects) take its ASCII path and
    pass? It does for every host spider.urls makes: ASCII, no empty or over-long label."""
    labels = host.split(".")
    return host.isascii() and all(0 < len(x) < 64 for x in labels[:-1]) and len(labels[-1]) < 64


def _gai_family() -> int:
    """urllib3's ``allowed_gai_family``: IPv6 addresses too when this host can bind ::1 (its
    ``HAS_IPV6``, found once, or read from urllib3 when it is imported: it may be set there)."""
    urllib3_connection = sys.modules.get("urllib3.util.connection")
    if urllib3_connection is not None:
        return urllib3_connection.allowed_gai_family()  # type: ignore[no-any-return]
    if not _FAMILY:
        has_ipv6 = False
        if socket.has_ipv6:
            with contextlib.suppress(Exception), socket.socket(socket.AF_INET6) as sock:
                sock.bind(("::1", 0))
                has_ipv6 = True
        _FAMILY.append(socket.AF_UNSPEC if has_ipv6 else socket.AF_INET)
    return _FAMILY[0]


_FAMILY: list[int] = []


def _create_connection(host: str, port: int, timeout: float | None) -> socket.socket:
    """urllib3's ``create_connection`` with its connection's default socket options (Nagle off):
    each address tried in turn, the last one's error raised."""
    error: OSError | None = None
    # An ASCII host goes as bytes: given a str, getaddrinfo encodes it with the "idna" codec,
    # imported then (encodings.idna and stringprep, ~1.5 ms of each worker's first connection).
    name = host.encode("ascii") if host.isascii() else host
    for family, kind, proto, _, address in socket.getaddrinfo(name, port, _gai_family(), socket.SOCK_STREAM):
        sock = None
        try:
            sock = socket.socket(family, kind, proto)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as e:
            error = e
            if sock is not None:
                sock.close()
    if error is not None:
        raise error
    raise OSError("getaddrinfo returns an empty list")


# SO_RCVTIMEO and SO_SNDTIMEO take a struct timeval: two longs on 64-bit Linux. Elsewhere (other
# layouts) the socket keeps Python's timeout mode.
_TIMEVAL = struct.Struct("@ll") if sys.platform.startswith("linux") and struct.calcsize("@l") == 8 else None


def _set_timeout(sock: socket.socket, seconds: float | None) -> None:
    """Bound each send and recv on ``sock`` to ``seconds``, as ``settimeout`` does, but in the
    kernel: the socket blocks, with SO_RCVTIMEO and SO_SNDTIMEO set. In Python's timeout mode
    each call polls first (a poll and a deadline worked out per recv and per send, ~1 µs a page);
    here a call that waits too long fails with EAGAIN, which ``_Wire.recv`` and ``_Direct.open``
    raise as the ``socket.timeout`` Python would have raised."""
    if _TIMEVAL is None or seconds is None:
        sock.settimeout(seconds)
        return
    usec = max(1, math.ceil(seconds * 1_000_000))   # a zero timeval would wait for ever
    timeval = _TIMEVAL.pack(*divmod(usec, 1_000_000))
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


class _Timeouts(NamedTuple):
    """A request's connect and read timeouts, named as urllib3's ``Timeout`` names them."""
    connect_timeout: float
    read_timeout: float


# RFC 9110's token: a header name or method (or a host) that http.client writes as it is.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _plain_head_lines(host: str, port: int, method: str, headers: Mapping[str, str]) -> bytes | None:
    """The header lines ``http.client.HTTPConnection(host, port)`` writes for a request with
    ``headers`` (Host and Accept-Encoding first, unless given), when every part is plain: the
    method, host and names tokens, the values printable ASCII, a User-Agent given. None
    otherwise: http.client writes them then, its checks (and errors) its own."""
    names = {k.lower() for k in headers}
    if "user-agent" not in names or type(port) is not int or not (
            type(host) is str and _TOKEN.fullmatch(host) and type(method) is str and _TOKEN.fullmatch(method)):
        return None
    lines = []
    if "host" not in names:
        lines.append(f"Host: {host}" if port == 80 else f"Host: {host}:{port}")
    if "accept-encoding" not in names:
        lines.append("Accept-Encoding: identity")
    for name, value in headers.items():
        if not (type(name) is str and _TOKEN.fullmatch(name)
                and type(value) is str and value.isascii() and value.isprintable()):
            return None
        lines.append(f"{name}: {value}")
    lines += ["", ""]
    return "\r\n".join(lines).encode("ascii")


class _Direct:
    """One kept keep-alive connection to a plain http origin (no TLS, no proxy), a request sent on
    it without urllib3's pool and ``urlopen`` and its response read without urllib3's and
    http.client's ``HTTPResponse`` (``_Reply``): the request head is one bytes object, made
    once for the headers sent, and the response head is split from the bytes received.

    The socket is opened as urllib3's connection opened it (``_create_connection``), its errors
    built by urllib3 when one comes (``fetch_requests.connect_error``). A body read to
    its end leaves the connection here for the next request, one cut closes it. Errors are the
    ones ``urlopen`` raises with ``retries=0`` (connect errors in a ``MaxRetryError``, a timeout
    for the head as ``ReadTimeoutError``, others as ``ProtocolError("Connection aborted.")``),
    and a request on a kept connection that the server closed is sent again once, on a new one,
    when it failed before any byte of the response came (urllib3 polls for that before sending)."""

    __slots__ = ("dns_host", "host", "port", "keeper", "wire", "_heads")

    def __init__(self, host: str, port: int) -> None:
        # as urllib3's connection: the host resolved as given, named without a final dot
        # (the Host header, error texts)
        self.dns_host, self.host, self.port = host, host.rstrip("."), port
        self.keeper = _Keeper(self.host, port)
        self.wire: _Wire | None = None
        self._heads: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}

    def open(self, method: str, target: str, headers: Mapping[str, str], timeout: _Timeouts) -> _Reply:
        if self.wire is not None and self.wire.sock is None:   # closed with a body cut short
            self.wire = None
        for fresh in (self.wire is None, True):
            wire = self.wire
            try:
                if wire is None:
                    wire = self.wire = _Wire(self._connect(timeout.connect_timeout, target))
                if wire.timeout != timeout.read_timeout:
                    wire.timeout = timeout.read_timeout
                    _set_timeout(wire.sock, wire.timeout)  # type: ignore[arg-type]
                wire.data, wire.pos = b"", 0
                try:
                    try:
                        wire.sock.sendall(self._head(method, target, headers))  # type: ignore[union-attr]
                    except BlockingIOError:   # SO_SNDTIMEO ran out: Python's timeout mode's error
                        raise socket.timeout("timed out") from None
                except BrokenPipeError:   # as urllib3: the response may still be readable
                    if not fresh:
                        raise
                except OSError as e:
                    if not fresh or e.errno not in (errno.EPROTOTYPE, errno.ECONNRESET):
                        raise
                try:
                    return _Reply(self, wire, method, target)
                except (socket.timeout, BlockingIOError) as e:
                    raise _urllib3_errors().ReadTimeoutError(
                        self.keeper, target, f"Read timed out. (read timeout={timeout.read_timeout})") from e
            except _STALE as e:
                self._drop(wire)
                if fresh:
                    raise _urllib3_errors().ProtocolError("Connection aborted.", e) from e
            except (http.client.HTTPException, OSError) as e:
                self._drop(wire)
                raise _urllib3_errors().ProtocolError("Connection aborted.", e) from e
            except BaseException:
                self._drop(wire)
                raise
        raise AssertionError("unreachable")   # pragma: no cover

    def _connect(self, timeout: float | None, target: str) -> socket.socket:
        """A new socket to the origin, as urllib3's ``HTTPConnection.connect`` opens it. Its
        errors are the ``MaxRetryError`` that ``urlopen`` raises (urllib3 imported then)."""
        if not _plain_host(self.dns_host):   # urllib3 refuses it, or lets IDNA have its say
            return _parts().connect(self, timeout, target)
        try:
            sock = _create_connection(self.dns_host, self.port, timeout)
        except OSError as e:
            raise _parts().connect_error(self, e, timeout, target)   # noqa: B904  # its own cause
        sys.audit("http.client.connect", self, self.host, self.port)
        return sock

    def _drop(self, wire: _Wire | None) -> None:
        if wire is not None:
            wire.close()
        self.wire = None

    def _head(self, method: str, target: str, headers: Mapping[str, str]) -> bytes:
        """The request head, as urllib3's ``HTTPConnection.request`` sends a request without a
        body; all but the request line made once for the headers sent."""
        key = (method, tuple(headers.items()))
        rest = self._heads.get(key)
        if rest is None:
            rest = self._head_after_line(method, headers)
            if len(self._heads) >= 32:   # per-request headers (validators) vary: keep few
                self._heads.clear()
            self._heads[key] = rest
        return b"%s %s HTTP/1.1\r\n%s" % (method.encode("ascii"), target.encode("ascii"), rest)

    def _head_after_line(self, method: str, headers: Mapping[str, str]) -> bytes:
        """The header lines http.client writes (its checks of names and values applied)."""
        plain = _plain_head_lines(self.host, self.port, method, headers)
        if plain is not None:
            return plain
        lines = http.client.HTTPConnection(self.host, self.port)
        names = {k.lower() for k in headers}
        lines.putrequest(method, "/", skip_host="host" in names, skip_accept_encoding="accept-encoding" in names)
        if "user-agent" not in names:
            lines.putheader("User-Agent", _module("urllib3.connection")._get_default_user_agent())
        for name, value in headers.items():
            lines.putheader(name, value)
        return b"\r\n".join(lines._buffer[1:] + [b"", b""])  # type: ignore[attr-defined]

    def close(self) -> None:
        self._drop(self.wire)


# An http(s) URL that needs nothing of requests' preparation (spider.urls' normal form, ASCII, no
# userinfo, no fragment, no empty query): the request target is what follows group 1, as is.
_PLAIN_URL = re.compile(r"(https?://[^/?#@\\\x00-\x20\x7f]+)/[^#\x00-\x20\x7f]*(?<!\?)\Z", re.ASCII)


# A request target that urllib3's ``_encode_target`` leaves as it is: allowed characters and
# escapes already in upper case (it would upper-case an escape's hex digits).
_SAFE_TARGET = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@/?-]*(?:%[0-9A-F]{2}[A-Za-z0-9._~!$&'()*+,;=:@/?-]*)*")


def _target(target: str) -> str:
    """The request target as urllib3 sends it (a "%" that starts no escape goes as "%25")."""
    return target if _SAFE_TARGET.fullmatch(target) else _encode_target(target)


# urllib3.util.url's, for ``_encode_target``
_TARGET_RE = re.compile(r"^(/[^?#]*)(?:\?([^#]*))?(?:#.*)?$")
_PERCENT_RE = re.compile(r"%[a-fA-F0-9]{2}")
_PATH_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-~" "!$&'()*+,;=" ":@/")
_QUERY_CHARS = _PATH_CHARS | {"?"}


def _encode_target(target: str) -> str:
    """urllib3's ``_encode_target`` (urllib3.util.url), without importing urllib3: the path and
    the query percent-encoded where they hold what they may not, existing escapes kept (their
    hex digits in upper case) unless some "%" starts none, when every "%" is encoded."""
    match = _TARGET_RE.match(target)
    if not match:   # not for a target that starts with "/", as ours do
        raise _urllib3_errors().LocationParseError(f"{target!r} is not a valid request URI")
    path, query = match.groups()
    encoded = _encode_invalid_chars(path, _PATH_CHARS)
    if query is not None:
        encoded += "?" + _encode_invalid_chars(query, _QUERY_CHARS)
    return encoded


def _encode_invalid_chars(component: str, allowed: frozenset[str]) -> str:
    component, escapes = _PERCENT_RE.subn(lambda m: m.group(0).upper(), component)
    data = component.encode("utf-8", "surrogatepass")
    keep_percent = escapes == data.count(b"%")
    return "".join(chr(byte) if (keep_percent and byte == 37) or (byte < 128 and chr(byte) in allowed)
                   else "%%%02X" % byte for byte in data)


def _plain(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers as a plain dict, the names as given: urllib3 copies and walks the headers of a
    request several times, each slower on a CaseInsensitiveDict (its copy alone 2.7 µs against
    0.7; ~10 µs a request in all, measured on loopback)."""
    store = getattr(headers, "_store", None)   # requests' CaseInsensitiveDict: lower -> (name, value)
    return dict(store.values()) if isinstance(store, dict) else dict(headers)


def _merged(headers: Mapping[str, str], more: Mapping[str, str]) -> dict[str, str]:
    """``_plain`` of requests' ``CaseInsensitiveDict(headers)`` updated with ``more``: a header of
    ``more`` replaces one of any case, in its place, under its own name."""
    store = {name.lower(): (name, value) for name, value in headers.items()}
    for name, value in more.items():
        store[name.lower()] = (name, value)
    return dict(store.values())


REDIRECT_STATI = (301, 302, 303, 307, 308)   # requests.models': what Session.send follows


class _Request(NamedTuple):
    """A request sent through ``_Adapter.open``: what the WARC capture and requests' exceptions read."""
    method: str
    url: str
    headers: Mapping[str, str]


class _Sent:
    """A response got through ``_Adapter.open``: the names of ``requests.Response`` that
    ``Fetcher`` reads, without the work of building one (its headers copied into a new
    case-insensitive dict, the charset guessed, cookies looked for twice)."""

    __slots__ = ("request", "raw", "headers", "status_code", "url")
    _content_consumed = False   # the body is read by ``_Body``, never by requests
    _content = None

    def __init__(self, request: _Request, raw: BaseHTTPResponse) -> None:
        self.request, self.raw, self.headers = request, raw, raw.headers
        self.status_code, self.url = raw.status, request.url

    def close(self) -> None:
        """As ``requests.Response.close``: a body not read to its end closes its connection."""
        self.raw.close()
        self.raw.release_conn()


class Fetcher:
    """One worker's HTTP client. With ``warc``, every exchange that got a response is also
    written there (the fetcher owns the writer from then on: ``close`` closes it).

    requests' session is made on first need (``session``): a plain http request with no proxy
    and no cookie goes by ``_Direct`` and needs neither requests nor urllib3, which are not even
    imported (~50 ms of CPU at every start) until an https URL, a proxy, a cookie, a redirect or
    an error to name needs them (``spider.fetch_requests``)."""

    direct_http = True   # plain http requests on kept connections (``_Direct``); False: urllib3's pool

    def __init__(self, config: CrawlConfig, warc: WarcWriter | None = None) -> None:
        self.config = config
        self.warc = warc
        # The session's headers until it is made: requests' defaults with ours over them (names
        # and order as there, ``test_the_headers_are_the_sessions_before_it_is_made``).
        self._headers = {"User-Agent": config.user_agent, "Accept-Encoding": ACCEPT_ENCODING,
                         "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5", "Connection": "keep-alive"}
        self._session: requests.Session | None = None
        self._requests_adapter: fetch_requests._Adapter | None = None  # type: ignore[name-defined]
        self._timeouts = _Timeouts(config.connect_timeout, config.read_timeout)
        self._urllib3_timeout: TimeoutSauce | None = None
        self._direct: dict[str, _Direct] = {}   # plain http origin -> its kept connection
        # requests re-reads the proxy environment on every request (0.6 ms each, measured);
        # when no proxy is configured there is nothing to honour, so skip that work.
        self._trust_env = any(k.lower().endswith("_proxy") and v and k.lower() != "no_proxy"
                              for k, v in os.environ.items())
        if warc is not None:
            warc.add_info({"http-header-user-agent": config.user_agent,
                           "robots": "ignore" if config.ignore_robots else "classic"})

    @property
    def session(self) -> requests.Session:
        """requests' session (imports requests the first time): what the fetcher's requests
        went by before the direct path, and still go by when it does not apply."""
        if self._session is None:
            self._session, self._requests_adapter = _parts().new_session(self._headers, self._trust_env)
        return self._session

    @property
    def _adapter(self) -> fetch_requests._Adapter:  # type: ignore[name-defined]
        if self._requests_adapter is None:
            self.session  # noqa: B018  # makes it
        return self._requests_adapter

    @property
    def _timeout(self) -> TimeoutSauce:
        """The timeouts as urllib3 takes them (its pools)."""
        if self._urllib3_timeout is None:
            self._urllib3_timeout = _parts().timeout(self.config.connect_timeout, self.config.read_timeout)
        return self._urllib3_timeout

    def _prepare(self, url: str, headers: dict[str, str] | None, method: str = "GET") -> requests.PreparedRequest:
        return _parts().prepare(self, url, headers, method)

    def _send(self, url: str, headers: dict[str, str] | None, method: str) -> requests.Response | _Sent:
        """The response to one request, its body unread; raises requests' exceptions.

        A plain http(s) URL, with no proxy, no client certificate and no cookie to send, goes
        through the origin's connection pool directly (``_Adapter.open``), or for plain http its
        kept connection (``_Direct``): what Session.send adds around the adapter is work for
        features not in use then (0.2 ms of a request's ~0.45 ms of CPU, measured on loopback).
        A response that sets a cookie or redirects is then handed to requests as Session.send
        would see it (``fetch_requests.finish``). Before the session is made, it is known to
        have no proxy, cookie nor certificate, and the headers it would have."""
        s = self._session
        timeout = (self.config.connect_timeout, self.config.read_timeout)
        if s is None and self._trust_env:
            s = self.session
        if s is not None and s.trust_env:   # proxies from the environment: let requests merge them
            return s.request(method, url, allow_redirects=False, stream=True, headers=headers, timeout=timeout)
        m = _PLAIN_URL.match(url) if url.isascii() else None
        if m is None or s is not None and (s.proxies or s.cookies or s.cert is not None):
            s = self.session
            # proxies given: Session.send would otherwise work out again that there are none
            return s.send(self._prepare(url, headers, method), allow_redirects=False, stream=True,
                          timeout=timeout, proxies=dict(s.proxies))
        sent = _plain(self._headers if s is None else s.headers) if not headers else \
            _merged(self._headers if s is None else s.headers, headers)
        request = _Request(method, url, sent)
        origin = m.group(1)
        plain_http = origin[4] == ":" and self.direct_http   # http://, not https://
        direct = self._direct.get(origin) if plain_http else None
        if direct is None and plain_http:
            direct = self._direct_for(origin)
        if direct is None:
            raw = self._adapter.open(request, url[m.end(1):], self.session.verify, self._timeout)
        else:
            try:
                raw = direct.open(method, _target(url[m.end(1):]), request.headers, self._timeouts)
            except Exception as e:
                mapped = _parts().requests_error(e, request)
                if mapped is e:
                    raise
                raise mapped from e
        if "set-cookie" not in raw.headers and "set-cookie2" not in raw.headers and not (
                raw.status in REDIRECT_STATI and "location" in raw.headers):
            return _Sent(request, raw)
        try:   # the rest of Session.send, as it would run (requests imported for it)
            return _parts().finish(self, raw, url, headers, method)  # type: ignore[no-any-return]
        except BaseException:
            raw.close()
            raise

    def _direct_for(self, origin: str) -> "_Direct | None":
        """A new kept connection for a plain ``http://host[:port]`` origin; None (urllib3's pool
        then) for a host whose form http.client would read otherwise (an IPv6 literal)."""
        host, colon, port = origin[7:].rpartition(":")
        if not colon:
            host, port = port, "80"
        if not host or "[" in host or not port.isdigit() or not 0 < int(port) < 65536:
            return None
        if len(self._direct) >= 64:   # as many origins as the pool manager keeps
            self._close_direct()
        direct = self._direct[origin] = _Direct(host, int(port))
        return direct

    def _close_direct(self) -> None:
        for direct in self._direct.values():
            direct.close()
        self._direct.clear()

    def close(self) -> None:
        self._close_direct()
        _stop_timer()
        if self._session is not None:
            self._session.close()
        if self.warc is not None:
            self.warc.close()

    def fetch(self, url: str, *, any_type: bool = False, limit: int | None = None,
              headers: dict[str, str] | None = None, method: str = "GET",
              body_types: tuple[str, ...] = HTML_TYPES) -> Response | FetchFailure:
        """One request. ``--max-time`` bounds all of it, headers included: a server sending its
        headers a byte at a time stays under the read timeout, so a timer interrupts it.

        ``any_type`` downloads the body whatever its type (robots.txt, sitemaps), and ``limit``
        keeps only that many bytes of it instead of failing (RFC 9309 parses the first 500 KiB).
        ``body_types``: the media types whose body is downloaded (HTML; a requisite's: CSS, to find
        its url()s; none when only checking one); ``method`` HEAD checks a requisite.
        The WARC records are written once the timer is disarmed: it must not cut a record in two.
        """
        ex = Exchange(url) if self.warc is not None else None
        main = threading.current_thread() is threading.main_thread()   # signals: there only
        if main:
            _watch_pauses()
        continued = _continued
        try:
            if main:
                _arm(self.config.max_time)   # in the try: a --max-time so short it rings at once
            result = self._fetch(url, any_type, limit, headers, ex, method, body_types)
        except _TooSlow:
            result = FetchFailure("too slow", False, f"response took over {self.config.max_time:g} s")
        finally:
            if main:
                _disarm()
        if ex is not None and self.warc is not None:
            self.warc.write(ex)
        return _unless_paused(result, continued)

    def _fetch(self, url: str, any_type: bool = False, limit: int | None = None,
               headers: dict[str, str] | None = None, ex: Exchange | None = None, method: str = "GET",
               body_types: tuple[str, ...] = HTML_TYPES) -> Response | FetchFailure:
        cfg = self.config
        start = time.monotonic()
        try:
            r = self._send(url, headers, method)
        except _requests_exception() as e:
            return failure_of(e)
        except (UnicodeError, ValueError) as e:   # e.g. a Location header that is not UTF-8
            return FetchFailure("invalid response", False, f"{type(e).__name__}: {e}")
        reader: _Body | None = None
        try:
            if ex is not None:
                _capture(r, ex)
            coding = r.headers.get("Content-Encoding")
            encodings = [e.strip().lower() for e in coding.split(",") if e.strip()] if coding else []
            if any(e not in DECODABLE for e in encodings):
                reader = _Body(r, [], 0, ex)   # archived as received all the same (--warc)
                return FetchFailure("unsupported content encoding", False, ",".join(encodings))
            media, charset = _media_type(r.headers.get("Content-Type"))
            declared = _int(r.headers.get("Content-Length"))
            location = _utf8_header(r.headers.get("Location"))
            retry_after = r.headers.get("Retry-After")
            body = b""
            size = declared or 0
            cap = cfg.max_bytes if limit is None else limit
            # received bytes: generous, since decoding lags a chunk behind; only a stream that
            # decodes to (almost) nothing can reach it
            reader = _Body(r, encodings, 2 * max(cfg.max_bytes, cap) + _CHUNK, ex)
            if 200 <= r.status_code < 300 and not media and not any_type and body_types == HTML_TYPES:
                # No Content-Type: look at the first bytes only; a non-HTML body is not downloaded.
                head = self._head(reader)
                if not _sniff_html(head):
                    return Response(r.url or url, r.status_code, "", charset, b"", declared or len(head),
                                    location, time.monotonic() - start, retry_after)
                media = "text/html"
                got = self._read_body(reader, start, limit, head)
                if isinstance(got, FetchFailure):
                    return got
                body, size = got, len(got)
            elif 200 <= r.status_code < 300 and (media in body_types or any_type) and method != "HEAD":
                got = self._read_body(reader, start, limit)
                if isinstance(got, FetchFailure):
                    return got
                body, size = got, len(got)
            return Response(r.url or url, r.status_code, media, charset, body, size, location,
                            time.monotonic() - start, retry_after,
                            r.headers.get("ETag"), r.headers.get("Last-Modified"),
                            _utf8_header(r.headers.get("Link")), _utf8_header(r.headers.get("Refresh")))
        except _ReadFailure as e:
            return e.failure
        except _requests_exception() as e:
            return failure_of(e)
        except _TooSlow:
            if ex is not None:
                ex.cut("time")
            raise
        finally:
            if ex is not None:
                if reader is not None:   # --warc: every body is archived, within --max-bytes
                    reader.drain(cfg.max_bytes, start + cfg.max_time)
                ex.cut("unspecified")   # not read to its end (if no reason is noted yet)
            r.close()

    @staticmethod
    def _head(reader: _Body) -> bytes:
        """The first decoded bytes of a body (up to 4 KiB), for sniffing."""
        while True:
            piece = reader.read(4096)
            if piece is None or piece:
                return piece or b""

    def _read_body(self, reader: _Body, start: float, limit: int | None = None,
                   head: bytes = b"") -> bytes | FetchFailure:
        """The decoded body, at most ``limit`` bytes (cut there), else at most --max-bytes (over
        that: too large). Each read asks for one byte more than the cap allows, to see it pass."""
        cfg = self.config
        cap = cfg.max_bytes if limit is None else limit
        chunks: list[bytes] = [head] if head else []
        total = len(head)
        try:
            while total <= cap:
                piece = reader.read(cap - total + 1)
                if piece is None:
                    return b"".join(chunks)
                total += len(piece)
                chunks.append(piece)
                if time.monotonic() - start > cfg.max_time:
                    reader.cut("time")
                    return FetchFailure("too slow", False, f"response took over {cfg.max_time:g} s")
        except _ReadFailure as e:
            return e.failure
        reader.cut("length")
        if limit is not None:
            return b"".join(chunks)[:limit]
        return FetchFailure("too large", False, f"body over {cfg.max_bytes} bytes")


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _requests_classes(*names: str) -> tuple[type[BaseException], ...]:
    """requests' exception classes of these names (``requests.exceptions``), or none while
    requests is not imported: no exception can be one of them then."""
    errors = sys.modules.get("requests.exceptions")
    return () if errors is None else tuple(getattr(errors, name) for name in names if hasattr(errors, name))


def _requests_exception() -> tuple[type[BaseException], ...]:
    """What an ``except`` of requests' exceptions catches (nothing before requests is imported)."""
    return _requests_classes("RequestException")


def failure_of(exc: BaseException) -> FetchFailure:
    """Name a fetch exception by what it means for retrying."""
    name = type(exc).__name__
    text = str(exc)
    if isinstance(exc, _requests_classes("ConnectTimeout")):
        return FetchFailure("connect timeout", True, text)
    if isinstance(exc, _requests_classes("ReadTimeout")) or "Read timed out" in text or name == "ReadTimeoutError":
        return FetchFailure("timeout", True, text)
    if "BadStatusLine" in text or "LineTooLong" in text or "got more than" in text or "InvalidHeader" in text:
        return FetchFailure("invalid response", False, text)
    if isinstance(exc, _requests_classes("ContentDecodingError")) or name == "DecodeError":
        return FetchFailure("bad content encoding", False, text)
    if isinstance(exc, _requests_classes("InvalidURL", "InvalidSchema", "MissingSchema", "InvalidHeader")):
        return FetchFailure("invalid request", False, text)
    if "NameResolutionError" in text or "Name or service not known" in text or "getaddrinfo" in text:
        return FetchFailure("dns error", True, text)
    if isinstance(exc, _requests_classes("ChunkedEncodingError")) or name in ("ProtocolError", "IncompleteRead"):
        return FetchFailure("connection broken", True, text)
    if isinstance(exc, _requests_classes("ConnectionError")):
        if "Connection refused" in text:
            return FetchFailure("connection refused", True, text)
        return FetchFailure("connection error", True, text)
    return FetchFailure(name.lower(), False, text)


def _utf8_header(value: str | None) -> str | None:
    """A header as its sender meant it: http.client reads header bytes as Latin-1, but a server
    that puts a raw non-ASCII path in ``Location`` sends UTF-8 (as browsers assume), so
    ``/t/caf\xc3\xa9`` is ``/t/café``, not ``/t/cafÃ©``. Bytes that are not UTF-8 stay Latin-1."""
    if value is None or value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value
