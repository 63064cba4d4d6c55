"""The fetcher: the only place that talks HTTP. One request, one hop, no redirect following.

Redirects are returned to the caller, which checks each hop against scope (and dedup) before it is
requested. One ``requests.Session`` per worker process (connection reuse); connect and read
timeouts on every request; the body is streamed and capped after decompression (a gzip bomb stops
at the cap) and under a total time limit (a server trickling one byte a second cannot hold a worker).
Non-HTML bodies are not downloaded: the crawler records them but has nothing to parse.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Iterator

import requests
from requests.adapters import HTTPAdapter
from urllib3.util import make_headers

from .config import CrawlConfig
from .policy import FetchFailure

HTML_TYPES = ("text/html", "application/xhtml+xml")
# What urllib3 can decode here (it only asks for these in Accept-Encoding).
ACCEPT_ENCODING = make_headers(accept_encoding=True)
DECODABLE = frozenset({"identity", "gzip", "x-gzip", "deflate"}
                      | {e.strip() for e in ACCEPT_ENCODING.get("accept-encoding", "").split(",")})


class _TooSlow(BaseException):   # not an Exception: no handler on the way may swallow it
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise _TooSlow()


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise ``_TooSlow`` in this thread after ``seconds`` (a no-op outside the main thread,
    where signals cannot be used; the per-chunk check still applies there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass(frozen=True)
class Response:
    url: str
    status: int
    content_type: str        # media type only, lowercased ("" when the server sent none)
    charset: str | None
    body: bytes              # the decoded body for HTML; empty for other types
    size: int                # bytes received (decoded), or the declared length when not downloaded
    location: str | None     # raw Location header of a redirect
    elapsed: float
    retry_after: str | None = None

    @property
    def is_html(self) -> bool:
        return self.content_type in HTML_TYPES


def parse_content_type(value: str | None) -> tuple[str, str | None]:
    if not value:
        return "", None
    parts = value.split(";")
    media = parts[0].strip().lower()
    charset = None
    for p in parts[1:]:
        k, _, v = p.partition("=")
        if k.strip().lower() == "charset":
            charset = v.strip().strip("\"'") or None
    return media, charset


def _sniff_html(head: bytes) -> bool:
    h = head[:1024].lstrip().lower()
    return h.startswith((b"<!doctype html", b"<html")) or b"<html" in h or b"<body" in h


class Fetcher:
    def __init__(self, config: CrawlConfig) -> None:
        self.config = config
        self.session = requests.Session()
        self.session.headers.update({"User-Agent": config.user_agent,
                                     "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"})
        adapter = HTTPAdapter(pool_connections=64, pool_maxsize=4, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        # requests re-reads the proxy environment on every request (0.6 ms each, measured);
        # when no proxy is configured there is nothing to honour, so skip that work.
        if not any(k.lower().endswith("_proxy") and v and k.lower() != "no_proxy" for k, v in os.environ.items()):
            self.session.trust_env = False

    def close(self) -> None:
        self.session.close()

    def fetch(self, url: str, *, any_type: bool = False, limit: int | None = None) -> Response | FetchFailure:
        """One request. ``--max-time`` bounds all of it, headers included: a server sending its
        headers a byte at a time stays under the read timeout, so a timer interrupts it.

        ``any_type`` downloads the body whatever its type (robots.txt, sitemaps), and ``limit``
        keeps only that many bytes of it instead of failing (RFC 9309 parses the first 500 KiB).
        """
        with _deadline(self.config.max_time):
            try:
                return self._fetch(url, any_type, limit)
            except _TooSlow:
                return FetchFailure("too slow", False, f"response took over {self.config.max_time:g} s")

    def _fetch(self, url: str, any_type: bool = False, limit: int | None = None) -> Response | FetchFailure:
        cfg = self.config
        start = time.monotonic()
        try:
            r = self.session.get(url, allow_redirects=False, stream=True,
                                 timeout=(cfg.connect_timeout, cfg.read_timeout))
        except requests.RequestException as e:
            return failure_of(e)
        except (UnicodeError, ValueError) as e:   # e.g. a Location header that is not UTF-8
            return FetchFailure("invalid response", False, f"{type(e).__name__}: {e}")
        try:
            encodings = [e.strip().lower() for e in r.headers.get("Content-Encoding", "").split(",") if e.strip()]
            if any(e not in DECODABLE for e in encodings):
                return FetchFailure("unsupported content encoding", False, ",".join(encodings))
            media, charset = parse_content_type(r.headers.get("Content-Type"))
            declared = _int(r.headers.get("Content-Length"))
            location = r.headers.get("Location")
            retry_after = r.headers.get("Retry-After")
            body = b""
            size = declared or 0
            if 200 <= r.status_code < 300 and not media and not any_type:
                # No Content-Type: look at the first bytes only; a non-HTML body is not downloaded.
                head = r.raw.read1(4096, decode_content=True)
                if not _sniff_html(head):
                    return Response(r.url or url, r.status_code, "", charset, b"", declared or len(head),
                                    location, time.monotonic() - start, retry_after)
                media = "text/html"
                got = self._read_body(r, start, limit, head)
                if isinstance(got, FetchFailure):
                    return got
                body, size = got, len(got)
            elif 200 <= r.status_code < 300 and (media in HTML_TYPES or any_type):
                got = self._read_body(r, start, limit)
                if isinstance(got, FetchFailure):
                    return got
                body, size = got, len(got)
            return Response(r.url or url, r.status_code, media, charset, body, size, location,
                            time.monotonic() - start, retry_after)
        except requests.RequestException as e:
            return failure_of(e)
        finally:
            r.close()

    def _read_body(self, r: requests.Response, start: float, limit: int | None = None,
                   head: bytes = b"") -> bytes | FetchFailure:
        cfg = self.config
        raw = r.raw
        chunks: list[bytes] = [head] if head else []
        total = len(head)
        try:
            while True:
                chunk = raw.read1(65536, decode_content=True)
                if not chunk:
                    break
                total += len(chunk)
                if limit is not None and total >= limit:
                    chunks.append(chunk)
                    return b"".join(chunks)[:limit]
                if limit is None and total > cfg.max_bytes:
                    return FetchFailure("too large", False, f"body over {cfg.max_bytes} bytes")
                chunks.append(chunk)
                if time.monotonic() - start > cfg.max_time:
                    return FetchFailure("too slow", False, f"response took over {cfg.max_time:g} s")
        except requests.RequestException as e:
            return failure_of(e)
        except Exception as e:   # urllib3 errors raised from the raw stream
            return failure_of(e)
        return b"".join(chunks)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def failure_of(exc: BaseException) -> FetchFailure:
    """Name a fetch exception by what it means for retrying."""
    name = type(exc).__name__
    text = str(exc)
    if isinstance(exc, requests.ConnectTimeout):
        return FetchFailure("connect timeout", True, text)
    if isinstance(exc, requests.ReadTimeout) or "Read timed out" in text or name == "ReadTimeoutError":
        return FetchFailure("timeout", True, text)
    if "BadStatusLine" in text or "LineTooLong" in text or "got more than" in text or "InvalidHeader" in text:
        return FetchFailure("invalid response", False, text)
    if isinstance(exc, requests.exceptions.ContentDecodingError) or name == "DecodeError":
        return FetchFailure("bad content encoding", False, text)
    if isinstance(exc, (requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema,
                        requests.exceptions.MissingSchema, requests.exceptions.InvalidHeader)):
        return FetchFailure("invalid request", False, text)
    if "NameResolutionError" in text or "Name or service not known" in text or "getaddrinfo" in text:
        return FetchFailure("dns error", True, text)
    if isinstance(exc, requests.exceptions.ChunkedEncodingError) or name in ("ProtocolError", "IncompleteRead"):
        return FetchFailure("connection broken", True, text)
    if isinstance(exc, requests.ConnectionError):
        if "Connection refused" in text:
            return FetchFailure("connection refused", True, text)
        return FetchFailure("connection error", True, text)
    return FetchFailure(name.lower(), False, text)
