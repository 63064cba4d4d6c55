"""The fetcher's parts that need requests and urllib3, imported on first need (``fetch._parts``).

A crawl of plain http pages without cookies and redirects never needs them: ``Fetcher`` sends
those requests on its own kept connections (``fetch._Direct``), and importing requests costs
~50 ms of CPU at every start (issue 15). The first https URL, proxy, cookie set by a response,
redirect, or error to name as requests names it imports this module, and requests' session is
made then (``Fetcher.session``); that process then goes by requests' path for those as before.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
from typing import TYPE_CHECKING, Mapping

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.cookies import extract_cookies_to_jar
from requests.hooks import default_hooks
from requests.structures import CaseInsensitiveDict
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (ClosedPoolError, ConnectTimeoutError, LocationValueError, MaxRetryError,
                                NameResolutionError, NewConnectionError, ProtocolError, ReadTimeoutError,
                                ResponseError)
from urllib3.response import BaseHTTPResponse
from urllib3.util import Timeout as TimeoutSauce

from .fetch import MAX_INTERIM, _Reply, _Request, parse_headers

if TYPE_CHECKING:
    from .fetch import Fetcher, _Direct


class _FinalResponse(http.client.HTTPResponse):
    """http.client skips ``100 Continue`` and nothing else, so a ``103 Early Hints`` came back as
    the response (the page failed as ``103``) and the real one stayed unread on a connection
    kept for the next request. RFC 9110 15.2: a client ignores the 1xx responses it did not ask
    for (101 Switching Protocols ends the exchange: it stays the answer).

    ``begin`` is http.client's (Python 3.11), with the headers read by ``fetch.parse_headers``."""

    def begin(self) -> None:
        if self.headers is not None:
            return
        while True:   # interim responses other than 100 are skipped by _read_status
            version, status, reason = self._read_status()
            if status != http.client.CONTINUE:
                break
            http.client._read_headers(self.fp)  # type: ignore[attr-defined]
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = parse_headers(http.client._read_headers(self.fp))  # type: ignore[attr-defined]
        tr_enc = self.headers.get("transfer-encoding")
        self.chunked = bool(tr_enc and tr_enc.lower() == "chunked")
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()  # type: ignore[attr-defined]
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:   # nonsensical negative lengths are ignored
                    self.length = None
        if (status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or 100 <= status < 200
                or self._method == "HEAD"):  # type: ignore[attr-defined]
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True   # no length: the body ends when the connection does

    def _read_status(self):  # type: ignore[no-untyped-def]
        for _ in range(MAX_INTERIM):
            version, status, reason = super()._read_status()
            if not 100 < status < 200 or status == 101:
                return version, status, reason   # begin() itself skips 100
            http.client._read_headers(self.fp)  # type: ignore[attr-defined]  # the interim headers
        raise http.client.HTTPException(f"got more than {MAX_INTERIM} interim (1xx) responses")


class _Connection(HTTPConnection):
    response_class = _FinalResponse


class _TLSConnection(HTTPSConnection):
    response_class = _FinalResponse


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _TLSConnection


class _Adapter(HTTPAdapter):
    """requests' adapter, with connections that read past interim responses (``_FinalResponse``).

    Without a proxy, the connection pool of an origin is remembered: requests parses the URL and
    builds urllib3's pool key again on every request, and parses it once more for the request
    target (0.14 ms of a request's ~0.8 ms of CPU, measured on loopback). As many origins are
    remembered as the pool manager keeps (``pool_connections``); a closed pool is not reused.

    ``open`` sends a request through that pool itself, as ``send`` would (same pool, retries,
    timeouts, TLS settings, and requests' exception for each urllib3 error), without building a
    ``requests.Response`` (``Fetcher`` uses it when there is no proxy and no cookie)."""

    POOLS = {"http": _Pool, "https": _TLSPool}

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._origin_pools: dict[tuple[str, object], HTTPConnectionPool] = {}

    def get_connection_with_tls_context(self, request, verify, proxies=None, cert=None):  # type: ignore[no-untyped-def]
        url = request.url or ""
        if proxies or cert is not None or not url.startswith(("http://", "https://")):
            return super().get_connection_with_tls_context(request, verify, proxies, cert)
        end = url.find("/", url.find("//") + 2)
        key = (url if end < 0 else url[:end], verify)
        pool = self._origin_pools.get(key)
        if pool is None or pool.pool is None:   # new, or closed by the pool manager
            pool = super().get_connection_with_tls_context(request, verify, proxies, cert)
            if len(self._origin_pools) >= self._pool_connections:
                self._origin_pools.clear()
            self._origin_pools[key] = pool
        return pool

    def open(self, request: "_Request", target: str, verify: object, timeout: TimeoutSauce) -> BaseHTTPResponse:
        """The urllib3 response to ``request`` (no proxy, no client certificate), its body unread;
        ``target`` is the request target (path and query). Raises what ``send`` raises."""
        try:
            pool = self.get_connection_with_tls_context(request, verify)
        except LocationValueError as e:
            raise requests.exceptions.InvalidURL(e, request=request) from None
        if pool.scheme == "https":   # requests sets the CA bundle on the pool before each request
            self.cert_verify(pool, request.url, verify, None)
        try:
            return pool.urlopen(request.method, target, headers=request.headers, redirect=False,
                                assert_same_host=False, preload_content=False, decode_content=False,
                                retries=self.max_retries, timeout=timeout)
        except Exception as e:
            mapped = requests_error(e, request)
            if mapped is e:
                raise
            raise mapped from e

    def request_url(self, request, proxies):  # type: ignore[no-untyped-def]
        return request.path_url if not proxies else super().request_url(request, proxies)

    def init_poolmanager(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = self.POOLS

    def proxy_manager_for(self, proxy, **kwargs):  # type: ignore[no-untyped-def]
        manager = super().proxy_manager_for(proxy, **kwargs)
        if hasattr(manager, "pool_classes_by_scheme"):
            manager.pool_classes_by_scheme = self.POOLS
        return manager


def requests_error(e: Exception, request: "_Request") -> Exception:
    """requests' exception for a urllib3 error, as ``HTTPAdapter.send`` maps it (no proxy here)."""
    if isinstance(e, (ProtocolError, OSError)):
        return requests.ConnectionError(e, request=request)
    if isinstance(e, MaxRetryError):
        if isinstance(e.reason, ConnectTimeoutError) and not isinstance(e.reason, NewConnectionError):
            return requests.ConnectTimeout(e, request=request)
        if isinstance(e.reason, ResponseError):
            return requests.exceptions.RetryError(e, request=request)
        if isinstance(e.reason, urllib3.exceptions.SSLError):
            return requests.exceptions.SSLError(e, request=request)
        return requests.ConnectionError(e, request=request)
    if isinstance(e, ClosedPoolError):
        return requests.ConnectionError(e, request=request)
    if isinstance(e, urllib3.exceptions.SSLError):
        return requests.exceptions.SSLError(e, request=request)
    if isinstance(e, ReadTimeoutError):
        return requests.ReadTimeout(e, request=request)
    if isinstance(e, urllib3.exceptions.InvalidHeader):
        return requests.exceptions.InvalidHeader(e, request=request)
    return e


def new_session(headers: Mapping[str, str], trust_env: bool) -> tuple[requests.Session, _Adapter]:
    """requests' session as the fetcher used it from its start: our headers over requests'
    defaults, our adapter for http and https, and proxies from the environment only when one is set
    (requests re-reads the proxy environment on every request: 0.6 ms each, measured)."""
    session = requests.Session()
    session.headers.update(headers)
    adapter = _Adapter(pool_connections=64, pool_maxsize=4, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.trust_env = trust_env
    return session, adapter


def timeout(connect: float, read: float) -> TimeoutSauce:
    return TimeoutSauce(connect=connect, read=read)


def prepare(f: Fetcher, url: str, headers: dict[str, str] | None, method: str = "GET") -> requests.PreparedRequest:
    """The request ``Session.get`` would send, built directly: Session.request merges seven
    per-call settings we never vary (params, auth, hooks, cookies into a copied jar, ...),
    which cost about as much as parsing the page (profiled: 0.15 ms a request). The URL,
    the userinfo as Basic auth, the session's headers and its cookies are prepared as usual."""
    session = f.session
    p = requests.PreparedRequest()
    if "@" in url.split("/", 3)[2] or not url.isascii():   # userinfo, or not our normal form
        p.prepare(method=method, url=url,
                  headers=session.headers if not headers else {**session.headers, **headers},
                  cookies=session.cookies)
        return p
    # A normalised URL (spider.urls) is already what prepare_url would make of it.
    p.method, p.url, p.body = method, url, None
    p.headers = CaseInsensitiveDict(session.headers)
    if headers:
        p.headers.update(headers)
    p.hooks = default_hooks()
    if session.cookies:   # building a Cookie header costs even when there is none
        p.prepare_cookies(session.cookies)
    else:
        p._cookies = session.cookies   # type: ignore[attr-defined]  # redirects read it
    return p


def finish(f: Fetcher, raw: BaseHTTPResponse | _Reply, url: str, headers: dict[str, str] | None,
           method: str) -> requests.Response:
    """The rest of Session.send, as it would run, for a response that sets a cookie or redirects:
    the cookie is kept (and sent from then on, by requests' own path), and a redirect's body is
    read and its Location checked as before
    (``test_redirect_with_a_latin1_location_fails_as_invalid_response``)."""
    try:
        s = f.session
        if isinstance(raw, _Reply):
            raw = raw.for_requests()
        prepared = prepare(f, url, headers, method)
        r = f._adapter.build_response(prepared, raw)
        extract_cookies_to_jar(s.cookies, prepared, raw)
        with contextlib.suppress(StopIteration):   # for Response.next: reads a redirect's body
            r._next = next(s.resolve_redirects(r, prepared, yield_requests=True, stream=True,  # type: ignore[attr-defined]
                                               timeout=(f.config.connect_timeout, f.config.read_timeout),
                                               verify=s.verify, cert=None, proxies={}))
    except BaseException:
        raw.close()
        raise
    return r


def connect_error(direct: _Direct, error: OSError, timeout: float | None, target: str) -> MaxRetryError:
    """What urllib3's ``HTTPConnection.connect`` raised for ``error`` (with this connection
    class, host and timeout in its text), in the ``MaxRetryError`` ``urlopen`` raised it in."""
    conn = _Connection(direct.dns_host, direct.port, timeout=timeout)
    host = conn.host
    reason: NewConnectionError | ConnectTimeoutError
    if isinstance(error, socket.gaierror):
        reason = NameResolutionError(host, conn, error)
    elif isinstance(error, socket.timeout):
        reason = ConnectTimeoutError(conn, f"Connection to {host} timed out. (connect timeout={timeout})")
    else:
        reason = NewConnectionError(conn, f"Failed to establish a new connection: {error}")
    reason.__cause__ = error
    e = MaxRetryError(direct.keeper, target, reason)  # type: ignore[arg-type]
    e.__cause__ = reason
    return e


def connect(direct: _Direct, timeout: float | None, target: str) -> socket.socket:
    """A socket to the origin opened by urllib3's connection itself (a host that its
    ``create_connection`` checks against IDNA rules: ``fetch._plain_host`` said no)."""
    conn = _Connection(direct.dns_host, direct.port, timeout=timeout)
    try:
        conn.connect()
    except (ConnectTimeoutError, NewConnectionError) as e:
        raise MaxRetryError(direct.keeper, target, e) from e  # type: ignore[arg-type]
    sock, conn.sock = conn.sock, None   # ours now
    return sock
