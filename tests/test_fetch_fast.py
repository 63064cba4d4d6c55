"""The fetcher's short path: a plain URL, with no proxy and no cookie, is sent through the origin's
connection pool directly (``_Adapter.open``) instead of requests' Session.send, and answers as
Session.send did: cookies a server sets are kept and sent back, a redirect's Location is checked
as requests checks it, connections are reused exactly when a body was read to its end, and the
per-call headers (conditional requests) go out with the session's. The --max-time timer's handler
is installed once and a late alarm is harmless. Response headers read without the email parser
give the same message as with it."""

from __future__ import annotations

import email.parser
import http.client
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sitekit import TestSite
from spider.config import CrawlConfig
from spider.fetch import Fetcher, Response, parse_headers
from spider.policy import FetchFailure

ROOT = Path(__file__).resolve().parent.parent
PAGE = b"<html><body><a href='/b'>b</a></body></html>"


@pytest.fixture
def fetcher():  # type: ignore[no-untyped-def]
    f = Fetcher(CrawlConfig(connect_timeout=1.0, read_timeout=1.0, max_time=2.0))
    yield f
    f.close()


def _ok(r: Response | FetchFailure) -> Response:
    assert isinstance(r, Response), r
    return r


def test_a_plain_url_does_not_go_through_session_send(site: TestSite, fetcher: Fetcher, monkeypatch) -> None:
    """The short path is taken (what it saves is measured in bench/, not here)."""
    site.route("/a", body=PAGE)

    def no(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("Session.send used")

    monkeypatch.setattr(fetcher.session, "send", no)
    monkeypatch.setattr(fetcher.session, "request", no)
    r = _ok(fetcher.fetch(site.url("/a")))
    assert (r.status, r.body, r.content_type, r.url) == (200, PAGE, "text/html", site.url("/a"))


def test_a_cookie_the_server_sets_is_sent_back(site: TestSite, fetcher: Fetcher) -> None:
    """As requests' session did: a Set-Cookie on the short path goes into the session's jar, and
    the next request to that host carries it."""
    site.route("/a", body=PAGE, headers={"Set-Cookie": "sid=42; Path=/"})
    site.route("/b", body=PAGE)
    _ok(fetcher.fetch(site.url("/a")))
    _ok(fetcher.fetch(site.url("/b")))
    [first, second] = site.requests
    assert first.headers.get("Cookie") is None
    assert second.headers.get("Cookie") == "sid=42"


def test_a_cookie_set_by_a_redirect_is_sent_back(site: TestSite, fetcher: Fetcher) -> None:
    site.route("/login", status=302, body=b"", headers={"Location": "/b", "Set-Cookie": "sid=7; Path=/"})
    site.route("/b", body=PAGE)
    r = _ok(fetcher.fetch(site.url("/login")))
    assert (r.status, r.location) == (302, "/b")
    _ok(fetcher.fetch(site.url("/b")))
    assert site.requests[-1].headers.get("Cookie") == "sid=7"


def test_a_redirect_whose_location_is_not_utf8_is_an_invalid_response(site: TestSite, fetcher: Fetcher) -> None:
    """requests decodes a redirect's Location as UTF-8 (Session.send works out Response.next);
    the short path hands a redirect to the same code, so the answer stays the same."""
    def raw(req, info) -> None:  # type: ignore[no-untyped-def]
        req.wfile.write(b"HTTP/1.1 302 Found\r\nLocation: /caf\xe9\r\nContent-Length: 0\r\n\r\n")
        req.close_connection = True

    site.route("/latin1", raw=raw)
    r = fetcher.fetch(site.url("/latin1"))
    assert isinstance(r, FetchFailure) and r.kind == "invalid response", r
    site.add_redirect("/moved", "/t/caf\u00e9".encode("utf-8").decode("latin-1"))
    assert _ok(fetcher.fetch(site.url("/moved"))).location == "/t/caf\u00e9"


def test_a_connection_is_reused_after_a_body_read_to_its_end_only(site: TestSite, fetcher: Fetcher) -> None:
    """A page read whole leaves its connection to the next request; a body not read (an image,
    an error page) closes it, as requests.Response.close does, so no unread bytes are taken for
    the next response."""
    site.route("/a", body=PAGE)
    site.route("/b", body=PAGE)
    site.route("/pic.png", body=b"\x89PNG" + b"x" * 50_000, content_type="image/png")
    site.status("/gone", 404)
    for path in ("/a", "/b", "/pic.png", "/a", "/gone", "/b"):
        _ok(fetcher.fetch(site.url(path)))
    ports = [info.client_address[1] for info in site.requests]
    assert ports[0] == ports[1] == ports[2]   # /a and /b read whole: one connection
    assert ports[3] != ports[2] and ports[4] == ports[3]   # the image was not read: a new one
    assert ports[5] != ports[4]   # nor the 404 page's body


def test_per_call_headers_go_with_the_session_headers(site: TestSite, fetcher: Fetcher) -> None:
    """A conditional request's validators are added to the session's headers, and replace one
    of the same name whatever its case."""
    site.route("/a", body=PAGE)
    _ok(fetcher.fetch(site.url("/a"), headers={"If-None-Match": '"v1"', "accept": "text/html"}))
    [info] = site.requests
    assert info.headers["If-None-Match"] == '"v1"'
    assert info.headers.get_all("Accept") == ["text/html"]
    assert info.headers["User-Agent"] == fetcher.config.user_agent
    assert fetcher.session.headers["Accept"] != "text/html"   # the session's own are unchanged


@pytest.mark.parametrize("url", ["/a?", "/a#frag", "/caf\u00e9"])
def test_urls_not_in_normal_form_still_take_requests_path(site: TestSite, fetcher: Fetcher, url: str) -> None:
    """What requests would change in a URL (an empty query, a fragment, a non-ASCII path) is left
    to requests: the request target is the one it sends."""
    site.route("/a", body=PAGE)
    site.route("/caf%C3%A9", body=PAGE)
    _ok(fetcher.fetch(site.url("/") + url[1:]))
    assert site.requests[-1].target in ("/a", "/caf%C3%A9")


def test_the_timer_is_off_once_the_fetcher_is_closed_and_its_handler_stays(site: TestSite, fetcher: Fetcher) -> None:
    """Between fetches the --max-time timer may run on (it is not set again for every fetch,
    ``test_fetch_syscalls``), to ring within --max-time at most; closing the fetcher stops it."""
    site.route("/a", body=PAGE)
    _ok(fetcher.fetch(site.url("/a")))
    assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 2.0
    fetcher.close()
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    from spider import fetch
    assert signal.getsignal(signal.SIGALRM) is fetch._on_alarm


def test_an_alarm_after_a_fetch_ended_is_harmless(site: TestSite) -> None:
    """The --max-time timer running out just as a fetch ends (its SIGALRM comes after the fetch
    returned) must not stop the worker: before, the handler was swapped back after every fetch,
    so such a late alarm met the default action and ended the process."""
    site.route("/a", body=PAGE)
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from spider.config import CrawlConfig
        from spider.fetch import Fetcher, Response, parse_headers
        f = Fetcher(CrawlConfig(connect_timeout=1.0, read_timeout=1.0, max_time=2.0))
        assert isinstance(f.fetch({site.url("/a")!r}), Response)
        os.kill(os.getpid(), signal.SIGALRM)
        assert isinstance(f.fetch({site.url("/a")!r}), Response)
        print("still here")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "still here"), done.stderr[-2000:]


# ------------------------------------------------------------------ header parsing without email

def _by_email(lines: list[bytes]) -> http.client.HTTPMessage:
    return email.parser.Parser(_class=http.client.HTTPMessage).parsestr(b"".join(lines).decode("iso-8859-1"))


def _payload(m: http.client.HTTPMessage) -> object:
    p = m.get_payload()
    return [(part.items(), _payload(part)) for part in p] if isinstance(p, list) else p


def _same_message(lines: list[bytes]) -> None:
    got, want = parse_headers(lines), _by_email(lines)
    assert type(got) is type(want)
    assert got.items() == want.items()
    assert _payload(got) == _payload(want)
    assert [type(d) for d in got.defects] == [type(d) for d in want.defects]
    assert (got.is_multipart(), got.get_content_type(), got.get_unixfrom()) == \
        (want.is_multipart(), want.get_content_type(), want.get_unixfrom())


@pytest.mark.parametrize("block", [
    b"Server: nginx\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 12\r\n\r\n",
    b"A:b\r\nB:   spaced  \t\r\nC:\r\nD: a:b:c\r\n\r\n",
    b"A: b\nB: c\n\n",                                  # bare LF line ends
    b"A: b\r\n",                                        # no blank line (the server closed)
    b"A: b",                                            # a last line without its end
    b"\r\n",                                            # no header at all
    b"A: b\r\n  folded\r\n\r\n",                        # obsolete line folding
    b"\tA: b\r\n\r\n",                                  # a continuation first
    b"From nobody\r\nA: b\r\n\r\n",                     # the mbox "From " line
    b"Bad Header: x\r\nA: b\r\n\r\n",                   # a space in a name: the rest is "body"
    b": empty name\r\nA: b\r\n\r\n",
    b"no colon here\r\nA: b\r\n\r\n",
    b"A: one\rtwo\r\n\r\n",                             # a lone CR inside a value
    b"A: x\x0by\r\nB: \x85\r\n\x1c: z\r\n\r\n",           # other line breaks of str.splitlines
    b"A: caf\xe9 \xff\r\n\r\n",                         # Latin-1 bytes
    b"Content-Type: multipart/byteranges; boundary=x\r\n\r\n",
    b"Content-Type: message/rfc822\r\n\r\n",
    b"Content-Type: MULTIPART/mixed\r\n\r\n",
    b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nset-cookie: c=3\r\n\r\n",
])
def test_parse_headers_reads_as_the_email_parser_does(block: bytes) -> None:
    _same_message(block.splitlines(keepends=True) or [b""])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from([b"A: b\r\n", b"Content-Type: text/html\r\n", b"Content-Type: multipart/x\r\n", b" cont\r\n",
                     b"\tcont\n", b"From x\r\n", b"x y: z\r\n", b":\r\n", b"K:\r\n", b"\r\n", b"\n", b"\r", b"B:  v \r\n"]),
    st.binary(max_size=12).map(lambda b: b + b"\r\n"),
    st.binary(max_size=12)), max_size=8))
def test_parse_headers_agrees_with_the_email_parser_on_anything(lines: list[bytes]) -> None:
    _same_message(lines)


# ---------------------------------------------------------- urllib3's errors, as requests names them

def _errors() -> list[Exception]:
    from urllib3 import exceptions as u
    return [u.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")), OSError("no route"),
            u.MaxRetryError(None, "/", u.ConnectTimeoutError("connect timed out")),  # type: ignore[arg-type]
            u.MaxRetryError(None, "/", u.NewConnectionError(None, "Connection refused")),  # type: ignore[arg-type]
            u.MaxRetryError(None, "/", u.NameResolutionError("h", None, OSError("no name"))),  # type: ignore[arg-type]
            u.MaxRetryError(None, "/", u.ResponseError("too many")),  # type: ignore[arg-type]
            u.MaxRetryError(None, "/", u.SSLError("bad cert")),  # type: ignore[arg-type]
            u.ClosedPoolError(None, "closed"), u.SSLError("handshake"),  # type: ignore[arg-type]
            u.ReadTimeoutError(None, "/", "Read timed out."), u.InvalidHeader("two Content-Length"),  # type: ignore[arg-type]
            u.LocationParseError("/x"), u.DecodeError("bad"), ValueError("odd")]


@pytest.mark.parametrize("error", _errors(), ids=lambda e: type(e).__name__ + ":" + str(e)[:20])
def test_urllib3_errors_become_what_the_adapters_send_raises(error: Exception, monkeypatch) -> None:
    """``_Adapter.open`` raises, for every urllib3 error, the exception requests' own
    ``HTTPAdapter.send`` raises (same type, same text), so ``failure_of`` names it as before."""
    from urllib3.connectionpool import HTTPConnectionPool

    from spider import fetch

    def fail(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise error

    monkeypatch.setattr(HTTPConnectionPool, "urlopen", fail)
    f = Fetcher(CrawlConfig(connect_timeout=1.0, read_timeout=1.0, max_time=2.0))
    url = "http://127.0.0.1:9/a"
    try:
        with pytest.raises(BaseException) as want:
            f._adapter.send(f._prepare(url, None), stream=True, timeout=(1.0, 1.0), proxies={})
        with pytest.raises(BaseException) as got:
            f._adapter.open(fetch._Request("GET", url, {}), "/a", True, f._timeout)
        assert (type(got.value), str(got.value)) == (type(want.value), str(want.value))
        assert fetch.failure_of(got.value) == fetch.failure_of(want.value)
    finally:
        f.close()
