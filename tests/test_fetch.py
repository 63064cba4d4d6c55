"""Tests for spider.fetch: one request, one hop, against a loopback `TestSite`.

Every misbehaving endpoint must end in a bounded time with the right verdict; nothing here
asserts how fast anything is.
"""

from __future__ import annotations

import gzip
import socket
import tracemalloc
from typing import Iterator

import pytest

from sitekit import TestSite
from spider.config import DEFAULT_USER_AGENT, CrawlConfig
from spider.fetch import Fetcher, Response, parse_content_type
from spider.policy import FetchFailure

MAX_BYTES = 64 * 1024


def config(**kw) -> CrawlConfig:
    values = dict(connect_timeout=1.0, read_timeout=1.0, max_time=2.0, max_bytes=MAX_BYTES)
    values.update(kw)
    return CrawlConfig(**values)


@pytest.fixture
def fetcher() -> Iterator[Fetcher]:
    f = Fetcher(config())
    yield f
    f.close()


def fetch_with(url: str, **kw) -> Response | FetchFailure:
    f = Fetcher(config(**kw))
    try:
        return f.fetch(url)
    finally:
        f.close()


def ok(result: Response | FetchFailure) -> Response:
    assert isinstance(result, Response), result
    return result


def failed(result: Response | FetchFailure) -> FetchFailure:
    assert isinstance(result, FetchFailure), result
    return result


# --------------------------------------------------------------------------- plain responses


def test_html_200_body_and_charset(site: TestSite, fetcher: Fetcher) -> None:
    body = "<!DOCTYPE html><html><body><p>caf\u00e9</p><a href='/a'>a</a></body></html>".encode("utf-8")
    site.route("/page.html", body=body, content_type="text/html; charset=utf-8")
    r = ok(fetcher.fetch(site.url("/page.html")))
    assert r.status == 200
    assert r.content_type == "text/html"
    assert r.charset == "utf-8"
    assert r.is_html
    assert r.body == body
    assert r.size == len(body)
    assert r.location is None
    assert r.url == site.url("/page.html")
    assert site.hits["/page.html"] == 1


def test_content_type_is_lowercased_and_charset_unquoted(site: TestSite, fetcher: Fetcher) -> None:
    site.route("/p", body=b"<html>x</html>", content_type='TEXT/HTML; Charset="ISO-8859-1"')
    r = ok(fetcher.fetch(site.url("/p")))
    assert (r.content_type, r.charset) == ("text/html", "ISO-8859-1")
    assert r.body == b"<html>x</html>"


def test_xhtml_is_downloaded_as_html(site: TestSite, fetcher: Fetcher) -> None:
    body = b'<html xmlns="http://www.w3.org/1999/xhtml"><body><a href="/x">x</a></body></html>'
    site.route("/x.xhtml", body=body, content_type="application/xhtml+xml")
    r = ok(fetcher.fetch(site.url("/x.xhtml")))
    assert r.is_html and r.body == body


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ("", None)),
        ("", ("", None)),
        ("text/html", ("text/html", None)),
        ("Text/HTML ; charset=UTF-8", ("text/html", "UTF-8")),
        ("text/html; charset='latin1'; foo=bar", ("text/html", "latin1")),
        ("application/pdf", ("application/pdf", None)),
        ("text/html; charset=", ("text/html", None)),
    ],
)
def test_parse_content_type(value, expected) -> None:
    assert parse_content_type(value) == expected


@pytest.mark.parametrize("content_type", ["image/png", "application/pdf", "text/plain; charset=utf-8"])
def test_non_html_not_downloaded_but_recorded(site: TestSite, content_type: str) -> None:
    # Far over max_bytes: downloading it would fail with "too large".
    body = b"%PDF-1.4 <html><a href='/hidden'>x</a>" + b"\x00" * (4 * MAX_BYTES)
    site.route("/file", body=body, content_type=content_type)
    r = ok(fetch_with(site.url("/file")))
    assert r.status == 200
    assert r.content_type == content_type.split(";")[0]
    assert not r.is_html
    assert r.body == b""
    assert r.size == len(body)  # the declared Content-Length


def test_missing_content_type_sniffed_as_html(site: TestSite, fetcher: Fetcher) -> None:
    body = b"<!doctype html>\n<title>t</title><a href='/a'>a</a>"
    site.route("/noct", body=body, content_type=None)
    r = ok(fetcher.fetch(site.url("/noct")))
    assert r.content_type == "text/html"
    assert r.is_html
    assert r.body == body


def test_missing_content_type_not_html_is_not_kept(site: TestSite, fetcher: Fetcher) -> None:
    site.route("/blob", body=b"\x89PNG\r\n\x1a\n plain bytes", content_type=None)
    r = ok(fetcher.fetch(site.url("/blob")))
    assert r.content_type == ""
    assert not r.is_html
    assert r.body == b""


def test_non_2xx_html_body_is_not_downloaded(site: TestSite, fetcher: Fetcher) -> None:
    site.status("/missing", 404)
    r = ok(fetcher.fetch(site.url("/missing")))
    assert r.status == 404
    assert r.body == b""


def test_retry_after_header_returned(site: TestSite, fetcher: Fetcher) -> None:
    site.status("/busy", 503, headers={"Retry-After": "120"})
    r = ok(fetcher.fetch(site.url("/busy")))
    assert r.status == 503 and r.retry_after == "120"


# --------------------------------------------------------------------------- redirects


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirect_returned_not_followed(site: TestSite, fetcher: Fetcher, status: int) -> None:
    site.route("/target", body="<html>target</html>")
    site.add_redirect("/from", "/target?x=1#frag", status=status)
    r = ok(fetcher.fetch(site.url("/from")))
    assert r.status == status
    assert r.location == "/target?x=1#frag"  # raw, as the server sent it
    assert r.url == site.url("/from")
    assert site.hits["/from"] == 1
    assert site.hits["/target"] == 0 and site.hits["/target?x=1"] == 0
    assert [target for _, target, _ in site.log] == ["/from"]


def test_absolute_redirect_to_another_host_not_requested(site: TestSite, make_site, fetcher: Fetcher) -> None:
    other = make_site("127.0.0.2")
    other.route("/", body="<html>other</html>")
    site.add_redirect("/away", other.url("/"), status=302)
    r = ok(fetcher.fetch(site.url("/away")))
    assert (r.status, r.location) == (302, other.url("/"))
    assert other.log == []


# --------------------------------------------------------------------------- size and time limits


def test_body_of_exactly_max_bytes_is_accepted(site: TestSite) -> None:
    body = b"<html>" + b"a" * (1000 - 6)
    site.route("/exact", body=body)
    r = ok(fetch_with(site.url("/exact"), max_bytes=1000))
    assert r.body == body and r.size == 1000


def test_body_over_max_bytes_is_too_large(site: TestSite) -> None:
    site.route("/big", body=b"<html>" + b"a" * (1001 - 6))
    f = failed(fetch_with(site.url("/big"), max_bytes=1000))
    assert f.kind == "too large"
    assert not f.transient


def test_gzip_body_is_decoded_and_capped_after_decompression(site: TestSite) -> None:
    plain = b"<html>" + b"spider " * 1000 + b"</html>"
    packed = gzip.compress(plain)
    site.route("/gz", body=packed, headers={"Content-Encoding": "gzip"})
    r = ok(fetch_with(site.url("/gz"), max_bytes=len(plain)))
    assert r.body == plain and r.size == len(plain)
    # the compressed body fits the cap, the decoded one does not
    assert len(packed) < 2000
    f = failed(fetch_with(site.url("/gz"), max_bytes=2000))
    assert f.kind == "too large"


def test_gzip_bomb_stops_at_the_cap_without_using_lots_of_memory(site: TestSite) -> None:
    site.gzip_bomb("/bomb", decompressed_size=1 << 30)  # 1 GiB of zeros, ~1 MB on the wire
    fetcher = Fetcher(config(max_bytes=1 << 20))
    try:
        tracemalloc.start()
        try:
            result = fetcher.fetch(site.url("/bomb"))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        fetcher.close()
    f = failed(result)
    assert f.kind == "too large" and not f.transient
    assert peak < 32 * (1 << 20), f"peak Python allocation {peak} bytes while reading a gzip bomb"


def test_trickle_is_too_slow(site: TestSite) -> None:
    site.trickle("/drip", total_bytes=5000, bytes_per_second=10)  # 1 byte every 0.1 s
    f = failed(fetch_with(site.url("/drip"), max_time=1.0, read_timeout=1.0))
    assert f.kind == "too slow"
    assert not f.transient


@pytest.mark.parametrize("chunked", [True, False])
def test_endless_body_is_stopped(site: TestSite, chunked: bool) -> None:
    site.endless("/forever", chunked=chunked)
    f = failed(fetch_with(site.url("/forever"), max_time=1.0))
    assert f.kind in ("too large", "too slow")
    assert not f.transient


def test_slow_headers_are_a_transient_timeout(site: TestSite) -> None:
    site.slow("/slow", seconds=3)
    f = failed(fetch_with(site.url("/slow"), read_timeout=0.5, max_time=2.0))
    assert f.kind == "timeout"
    assert f.transient


def test_slow_but_within_read_timeout_succeeds(site: TestSite) -> None:
    site.slow("/slowish", seconds=0.2, body="<html>late</html>")
    r = ok(fetch_with(site.url("/slowish"), read_timeout=2.0, max_time=3.0))
    assert r.body == b"<html>late</html>"


# --------------------------------------------------------------------------- broken connections


def test_reset_mid_body_is_transient(site: TestSite, fetcher: Fetcher) -> None:
    site.reset_mid_body("/cut", total_bytes=20_000)
    f = failed(fetcher.fetch(site.url("/cut")))
    assert f.kind in ("connection broken", "connection error")
    assert f.transient


def test_closed_port_is_connection_refused(fetcher: Fetcher) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    f = failed(fetcher.fetch(f"http://127.0.0.1:{port}/"))
    assert f.kind == "connection refused"
    assert f.transient


def test_invalid_url_is_a_permanent_failure(fetcher: Fetcher) -> None:
    f = failed(fetcher.fetch("http://"))
    assert not f.transient


def test_fetcher_keeps_working_after_a_failure(site: TestSite, fetcher: Fetcher) -> None:
    site.reset_mid_body("/cut")
    site.route("/fine", body="<html>fine</html>")
    assert isinstance(fetcher.fetch(site.url("/cut")), FetchFailure)
    assert ok(fetcher.fetch(site.url("/fine"))).body == b"<html>fine</html>"


# --------------------------------------------------------------------------- request headers


def test_user_agent_header_is_the_configured_one(site: TestSite) -> None:
    site.route("/ua", body="<html>ua</html>")
    agent = "test-spider/9.9 (+http://127.0.0.1/about)"
    ok(fetch_with(site.url("/ua"), user_agent=agent))
    [request] = site.requests
    assert request.method == "GET"
    assert request.headers["User-Agent"] == agent


def test_default_user_agent(site: TestSite, fetcher: Fetcher) -> None:
    site.route("/ua", body="<html>ua</html>")
    ok(fetcher.fetch(site.url("/ua")))
    assert site.requests[0].headers["user-agent"] == DEFAULT_USER_AGENT


# --------------------------------------------------------------------------- documented but not done


@pytest.mark.parametrize("encoding", ["compress", "x-custom"])
def test_unsupported_content_encoding_fails(site: TestSite, fetcher: Fetcher, encoding: str) -> None:
    site.route("/enc", body=b"\x1f\x9d\x90encoded-bytes", headers={"Content-Encoding": encoding})
    f = failed(fetcher.fetch(site.url("/enc")))
    assert not f.transient


def test_broken_gzip_is_bad_content_encoding(site: TestSite, fetcher: Fetcher) -> None:
    site.route("/badgz", body=b"this is not gzip data", headers={"Content-Encoding": "gzip"})
    f = failed(fetcher.fetch(site.url("/badgz")))
    assert f.kind == "bad content encoding" and not f.transient


def _garbage_status_line(req, info) -> None:
    req.wfile.write(b"HELLO THIS IS NOT HTTP\r\n\r\n")
    req.close_connection = True


def _huge_header_line(req, info) -> None:
    req.send_head(200, {"X-Big": "a" * 70_000, "Content-Length": "2"})
    req.wfile.write(b"ok")


@pytest.mark.parametrize("raw", [_garbage_status_line, _huge_header_line], ids=["status-line", "header-line"])
def test_invalid_response_is_a_permanent_failure(site: TestSite, fetcher: Fetcher, raw) -> None:
    site.route("/bad", raw=raw)
    f = failed(fetcher.fetch(site.url("/bad")))
    assert not f.transient


def _trickled_headers(content_type: str):
    def raw(req, info) -> None:
        req.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        for _ in range(15):  # 15 header bytes, one per 0.1 s: at least 1.5 s in all
            req.wfile.write(b"a")
            if req.wait(0.1):
                return
        req.wfile.write(b"\r\nContent-Type: %s\r\nContent-Length: 2\r\n\r\nok" % content_type.encode())
        req.close_connection = True

    return raw


def test_trickled_headers_of_an_html_page_are_too_slow(site: TestSite) -> None:
    site.route("/th", raw=_trickled_headers("text/html"))
    f = failed(fetch_with(site.url("/th"), max_time=0.5, read_timeout=1.0))
    assert f.kind == "too slow"


def test_trickled_headers_of_a_non_html_response_are_too_slow(site: TestSite) -> None:
    site.route("/th", raw=_trickled_headers("image/png"))
    f = failed(fetch_with(site.url("/th"), max_time=0.5, read_timeout=1.0))
    assert f.kind == "too slow"
