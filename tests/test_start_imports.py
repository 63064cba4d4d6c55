"""What a crawl's start imports (issue 15): every module imported is CPU of every start and of
every small command; the parent imports the workers' modules before the fork, so all of them are
paid there once. What a plain http crawl never needs, in the parent or in a worker, is not
imported: http.client (with ssl and the email parser), email.utils, calendar, hashlib's OpenSSL,
idna and the "idna" codec (until a punycode label), multiprocessing (the workers are forked by ``crawl._Child``).
What the direct path did with them is done without them, and checked against them here."""

from __future__ import annotations

import hashlib
import http.client
import multiprocessing
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sitekit import TestSite
from spider import fetch, hashes, politeness, recrawl
from spider.crawl import _Child, _wait_any
from test_fetch_lazy import _run, crawl_imports   # _run: a script in a fresh interpreter, its last line JSON

# Never imported by a plain http crawl (its parent, its workers).
UNUSED = ("http.client", "ssl", "_ssl", "email.parser", "email.utils", "email.message", "calendar",
          "hashlib", "_hashlib", "idna", "encodings.idna", "multiprocessing", "pickle")
CRAWL_MODULES = ("spider.cli", "spider.crawl", "spider.spider", "spider.fetch")


def test_the_crawls_modules_import_none_of_them() -> None:
    got = _run(f"""
        import json, sys
        for name in {CRAWL_MODULES!r}:
            __import__(name)
        print(json.dumps([m for m in {UNUSED!r} if m in sys.modules]))
    """)
    assert got == []


def test_a_crawl_of_a_plain_site_imports_none_of_them_in_any_process(site: TestSite, tmp_path: Path) -> None:
    """The crawl's parent and its forked workers (``-X importtime`` logs every import, of each):
    pages with links, a 404, robots.txt read."""
    site.route("/", body=b"<html><body><a href='/a'>a</a> <a href='/b'>b</a> <a href='/c'>c</a></body></html>")
    site.route("/a", body=b"<html><title>a</title><body><a href='/'>home</a> <img src='/i.png'></body></html>")
    site.route("/b", body=b"<html><body>b</body></html>")
    site.route("/i.png", body=b"\x89PNG" + b"x" * 100, content_type="image/png")
    site.route("/robots.txt", body=b"User-agent: *\nDisallow: /private\n", content_type="text/plain")
    imported = crawl_imports(site.url("/"), tmp_path, "done: crawled 3, failed 1")
    assert "spider.fetch" in imported and "spider.spider" in imported and "spider.robots" in imported
    assert not imported & set(UNUSED), sorted(imported & set(UNUSED))


def _by_http_client(host: str, port: int, method: str, headers: dict[str, str]) -> bytes:
    """What ``_Direct._head_after_line`` wrote before: http.client's own lines."""
    lines = http.client.HTTPConnection(host, port)
    names = {k.lower() for k in headers}
    lines.putrequest(method, "/", skip_host="host" in names, skip_accept_encoding="accept-encoding" in names)
    for name, value in headers.items():
        lines.putheader(name, value)
    return b"\r\n".join(lines._buffer[1:] + [b"", b""])  # type: ignore[attr-defined]


UA = {"User-Agent": "spider/0.1 (+https://example.test/bot)"}
_names = st.sampled_from(["Accept", "accept-encoding", "Host", "If-None-Match", "X-A_b.c~1", "Bad Name",
                          "Bad:Name", "", "Naïve", "Cookie"])
_values = st.text(st.characters(min_codepoint=0, max_codepoint=0x1FF), max_size=12) | st.sampled_from(
    ['"v1"', "gzip, deflate", "*/*", "a\r\n b", "a\tb", "é"])
_hosts = st.sampled_from(["a.test", "127.0.0.1", "EXAMPLE.com.", "xn--bcher-kva.example", "::1", "[::1]",
                          "a b", "bücher.example", "a%20b", "a.test:81"])


@settings(max_examples=400, deadline=None)
@given(host=_hosts, port=st.sampled_from([80, 8080, 443]), method=st.sampled_from(["GET", "HEAD", "G T", "GE\x01"]),
       headers=st.dictionaries(_names, _values, max_size=4))
@example(host="a.test", port=80, method="GET", headers={})
@example(host="a.test", port=8080, method="GET", headers={"Host": "b", "Accept-Encoding": "br"})
def test_the_plain_head_lines_are_http_clients(host: str, port: int, method: str, headers: dict[str, str]) -> None:
    """Either http.client's bytes, or None (then http.client writes them, errors included)."""
    headers = {**UA, **headers}
    host = host.rstrip(".")   # as _Direct names it
    try:
        want: bytes | type[BaseException] = _by_http_client(host, port, method, headers)
    except Exception as e:  # noqa: BLE001 - whatever http.client raises, the fallback raises it
        want = type(e)
    got = fetch._plain_head_lines(host, port, method, headers)
    if got is not None:
        assert got == want
    direct = fetch._Direct(host, port)
    if isinstance(want, bytes):
        assert direct._head_after_line(method, headers) == want
    else:
        with pytest.raises(want):
            direct._head_after_line(method, headers)


def test_the_usual_heads_are_plain() -> None:
    """A crawl's own requests (our headers, a validator) never need http.client."""
    from spider.config import CrawlConfig

    headers = fetch.Fetcher(CrawlConfig())._headers
    for more in ({}, {"If-None-Match": '"abc"', "If-Modified-Since": "Wed, 02 Dec 2026 10:00:00 GMT"}):
        sent = fetch._merged(headers, more) if more else fetch._plain(headers)
        assert fetch._plain_head_lines("a.test", 80, "GET", sent) == _by_http_client("a.test", 80, "GET", sent)
        assert fetch._plain_head_lines("a.test", 8080, "HEAD", sent) == _by_http_client("a.test", 8080, "HEAD", sent)


def test_a_connection_the_server_closed_is_still_stale() -> None:
    """_STALE lost http.client's RemoteDisconnected by name, not in effect."""
    assert isinstance(http.client.RemoteDisconnected("x"), fetch._STALE)


def test_http_client_and_the_email_parser_are_named_as_before() -> None:
    assert fetch.http.client is http.client
    assert fetch.email.parser is sys.modules["email.parser"]
    assert not hasattr(fetch.http, "__wrapped__")   # (doctest, inspect.unwrap)
    from spider import fetch_requests

    assert fetch._FinalResponse is fetch_requests._FinalResponse
    assert issubclass(fetch._FinalResponse, http.client.HTTPResponse)


@pytest.mark.parametrize("data", [b"", b"a", "bücher.example".encode(), bytes(range(256)) * 5])
def test_the_hashes_are_hashlibs(data: bytes) -> None:
    assert hashes.sha1(data).hexdigest() == hashlib.sha1(data).hexdigest()
    assert hashes.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
    assert hashes.blake2b(data, digest_size=8).digest() == hashlib.blake2b(data, digest_size=8).digest()
    assert hashes.blake2b(data, digest_size=16).hexdigest() == hashlib.blake2b(data, digest_size=16).hexdigest()


def test_the_dates_that_need_email_utils_import_it_then() -> None:
    """An HTTP date (a sitemap's lastmod, Retry-After) is read as before, in a fresh interpreter."""
    got = _run("""
        import json, sys
        from spider import politeness, recrawl
        before = [m for m in ("email.utils", "calendar") if m in sys.modules]
        out = [recrawl.parse_stamp("Wed, 02 Dec 2026 10:00:00 GMT"), recrawl.parse_stamp("2026-12-02"),
               recrawl.parse_stamp("2026-12-02T10:00:00Z"), recrawl.parse_stamp("soon"),
               politeness.parse_retry_after("Wed, 02 Dec 2026 10:01:00 GMT", 1796205600.0)]
        print(json.dumps({"before": before, "out": out}))
    """)
    assert got["before"] == []
    assert got["out"] == [1796205600.0, 1796169600.0, 1796205600.0, None, 60.0]
    assert recrawl.parse_stamp("Wed, 02 Dec 2026 10:00:00 GMT") == 1796205600.0
    assert politeness.parse_retry_after("Wed, 02 Dec 2026 10:01:00 GMT", 1796205600.0) == 60.0


def test_a_punycode_label_imports_idna_and_is_checked_as_before() -> None:
    got = _run("""
        import json, sys
        from spider.urls import normalize
        before = "idna" in sys.modules
        out = [normalize("http://xn--bcher-kva.example/")]
        try:
            normalize("http://xn--pokxncvks.example/")   # circled digits: UTS #46 maps them
        except ValueError as e:
            out.append(str(e))
        print(json.dumps({"before": before, "after": "idna" in sys.modules, "out": out}))
    """)
    assert got == {"before": False, "after": True,
                   "out": ["http://xn--bcher-kva.example/", "invalid punycode label 'xn--pokxncvks'"]}


def _exits_with(code: object) -> None:
    raise SystemExit(code)


def _fails() -> None:
    raise RuntimeError("boom")


def _reads_stdin(path: str) -> None:
    with open(path, "w") as f:
        f.write(repr(sys.stdin.read()) + " " + str(os.fstat(sys.stdin.fileno()).st_rdev == os.stat(os.devnull).st_rdev))


def _ends(p, capfd: pytest.CaptureFixture[str]) -> tuple[int | None, bool, str]:  # type: ignore[no-untyped-def]
    p.start()
    p.join()
    err = capfd.readouterr().err
    return p.exitcode, p.is_alive(), err


@pytest.mark.parametrize("target, args", [(time.sleep, (0,)), (_exits_with, (3,)), (_exits_with, (None,)),
                                          (_exits_with, ("a message",)), (_fails, ())])
def test_a_child_ends_as_a_multiprocessing_process_does(target, args, capfd: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """Exit code, and what it writes to standard error (a traceback after "Process NAME:")."""
    ours = _Child(target, args)
    theirs = multiprocessing.get_context("fork").Process(target=target, args=args)
    code, alive, err = _ends(ours, capfd)
    their_code, their_alive, their_err = _ends(theirs, capfd)
    assert (code, alive) == (their_code, their_alive)
    assert err.replace(ours.name, "NAME").splitlines()[:1] == their_err.replace(theirs.name, "NAME").splitlines()[:1]
    assert err.splitlines()[-1:] == their_err.splitlines()[-1:]
    assert ours.name.startswith("ForkProcess-")


def test_a_child_reads_nothing_from_stdin(tmp_path: Path) -> None:
    ours = _Child(_reads_stdin, (str(tmp_path / "a"),))
    ours.start()
    ours.join()
    theirs = multiprocessing.get_context("fork").Process(target=_reads_stdin, args=(str(tmp_path / "b"),))
    theirs.start()
    theirs.join()
    assert ours.exitcode == theirs.exitcode == 0
    assert (tmp_path / "a").read_text() == (tmp_path / "b").read_text() == "'' True"


def test_a_running_child_is_waited_for_killed_and_reaped() -> None:
    p = _Child(time.sleep, (30,))
    assert not p.is_alive() and p.exitcode is None   # not started
    p.start()
    started = time.monotonic()
    p.join(0.2)
    assert time.monotonic() - started >= 0.15
    assert p.is_alive() and p.exitcode is None
    assert _wait_any([p.sentinel], 0) == []
    p.kill()
    assert _wait_any([p.sentinel], 10) == [p.sentinel]   # ready once it has ended
    p.join()
    assert p.exitcode == -9 and not p.is_alive()
    p.kill()   # nothing left to kill
    p.join(1)
    assert p.exitcode == -9
