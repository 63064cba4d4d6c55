"""requests and urllib3 are imported on first need only (issue 15: ~50 ms of CPU at every start).

A fresh interpreter that imports spider.fetch and fetches plain http pages (a crawl's only path on
a site without cookies, redirects or https) never imports them; the first cookie, redirect, https
URL or refused connection imports them then, and the answer is what it was with them imported
from the start. What the direct path does in their place (the session's headers, the socket's
connect, its errors, the request target's encoding) is checked against them here."""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sitekit import TestSite
from test_fetch_direct import _failure as direct_failure
from spider import fetch
from spider.config import CrawlConfig
from spider.fetch import Fetcher, Response
from spider.policy import FetchFailure

ROOT = Path(__file__).resolve().parent.parent
PAGE = b"<html><body><a href='/b'>b</a></body></html>"
LAZY = ("requests", "urllib3")


def _run(script: str) -> dict:  # type: ignore[type-arg]
    """Run ``script`` in a fresh interpreter (this tree's spider first on the path); it prints one
    JSON object last."""
    code = f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n" + textwrap.dedent(script)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()   # nothing listens there now
    return port


def _masked(detail: str) -> str:
    return re.sub(r" at 0x[0-9a-f]+", "", detail)


def test_plain_http_pages_are_fetched_without_importing_requests_or_urllib3(site: TestSite) -> None:
    site.route("/a", body=PAGE)
    site.route("/caf%C3%A9", body=PAGE)
    site.route("/pic.png", body=b"\x89PNG" + b"x" * 5000, content_type="image/png")
    site.route("/gz", body=gzip.compress(b"<html>"), headers={"Content-Encoding": "gzip"})
    site.status("/gone", 404)
    urls = [site.url(p) for p in ("/a", "/caf%C3%A9", "/a?x=%7e", "/pic.png", "/gz", "/gone", "/a")]
    got = _run(f"""
        import json, sys
        from spider.config import CrawlConfig
        from spider.fetch import Fetcher, Response
        loaded = [m for m in {LAZY!r} if m in sys.modules]
        f = Fetcher(CrawlConfig(connect_timeout=2.0, read_timeout=2.0, max_time=5.0))
        out = []
        for url in {urls!r}:
            r = f.fetch(url)
            out.append([type(r).__name__, r.status, r.content_type, r.body.decode("latin-1"), r.size])
        r = f.fetch({urls[0]!r}, headers={{"If-None-Match": '"v1"'}})
        out.append([type(r).__name__, r.status])
        r = f.fetch({urls[0]!r}, method="HEAD")
        out.append([type(r).__name__, r.status])
        f.close()
        print(json.dumps({{"at_import": loaded, "after": [m for m in {LAZY!r} if m in sys.modules], "out": out}}))
    """)
    assert got["at_import"] == [] and got["after"] == [], got
    page = PAGE.decode("latin-1")
    assert got["out"] == [["Response", 200, "text/html", page, len(PAGE)],
                          ["Response", 200, "text/html", page, len(PAGE)],
                          ["Response", 200, "text/html", page, len(PAGE)],
                          ["Response", 200, "image/png", "", 5004],
                          ["Response", 200, "text/html", "<html>", 6],
                          ["Response", 404, "text/html", "", got["out"][5][4]],
                          ["Response", 200, "text/html", page, len(PAGE)],
                          ["Response", 200], ["Response", 200]]
    assert [q.target for q in site.requests] == ["/a", "/caf%C3%A9", "/a?x=%7E", "/pic.png", "/gz", "/gone", "/a", "/a", "/a"]
    assert site.requests[-2].headers["If-None-Match"] == '"v1"'


def test_a_crawl_of_a_plain_site_imports_neither_in_any_process(site: TestSite, tmp_path: Path) -> None:
    """The crawl's parent and its forked workers (``-X importtime`` logs every import, of each)."""
    site.route("/", body=b"<html><body><a href='/a'>a</a> <a href='/b'>b</a></body></html>")
    site.route("/a", body=PAGE)
    site.route("/b", body=PAGE)
    imported = crawl_imports(site.url("/"), tmp_path, "done: crawled 3, failed 0")
    assert "spider.fetch" in imported and "spider.spider" in imported
    assert not {m for m in imported if m.split(".")[0] in LAZY}, sorted(imported)


def test_a_cookie_a_redirect_https_and_a_refused_connection_import_them_and_answer_as_before(site: TestSite) -> None:
    """Each first need, in a fresh interpreter: requests is imported then, and the answer is the one
    a fetcher that made requests' session from its start (as before) gives."""
    site.route("/a", body=PAGE)
    site.route("/login", status=302, body=b"", headers={"Location": "/a", "Set-Cookie": "sid=7; Path=/"})
    site.route("/set", body=PAGE, headers={"Set-Cookie": "k=v; Path=/"})
    site.add_redirect("/moved", "/a")
    closed = _closed_port()
    https = site.url("/a").replace("http://", "https://")
    cases = {"cookie": site.url("/set"), "redirect": site.url("/moved"), "cookie+redirect": site.url("/login"),
             "https": https, "refused": f"http://127.0.0.1:{closed}/a"}
    got = _run(f"""
        import json, re, sys
        from spider.config import CrawlConfig
        from spider.fetch import Fetcher, Response

        def answer(r):
            if isinstance(r, Response):
                return ["Response", r.status, r.location, len(r.body)]
            return ["FetchFailure", r.kind, r.transient, re.sub(r" at 0x[0-9a-f]+", "", r.detail)]

        out = {{}}
        for name, url in {cases!r}.items():
            f = Fetcher(CrawlConfig(connect_timeout=2.0, read_timeout=2.0, max_time=5.0))
            assert isinstance(f.fetch({site.url("/a")!r}), Response)
            before = [m for m in {LAZY!r} if m in sys.modules]
            lazy = answer(f.fetch(url))
            after = [m for m in {LAZY!r} if m in sys.modules]
            then = answer(f.fetch({site.url("/a")!r}))
            f.close()
            eager = Fetcher(CrawlConfig(connect_timeout=2.0, read_timeout=2.0, max_time=5.0))
            eager.session   # made at once, as before
            assert isinstance(eager.fetch({site.url("/a")!r}), Response)
            out[name] = {{"before": before, "after": after, "lazy": lazy, "eager": answer(eager.fetch(url)),
                         "then": then}}
            eager.close()
            for m in [m for m in sys.modules if m.split(".")[0] in {LAZY!r} or m == "spider.fetch_requests"]:
                del sys.modules[m]   # the next case starts without them again
        print(json.dumps(out))
    """)
    for name, case in got.items():
        assert case["before"] == [], (name, case)
        assert case["after"] == list(LAZY), (name, case)
        assert case["lazy"] == case["eager"], (name, case)
        assert case["then"] == ["Response", 200, None, len(PAGE)], (name, case)
    assert got["redirect"]["lazy"] == ["Response", 301, "/a", 0]
    assert got["cookie+redirect"]["lazy"] == ["Response", 302, "/a", 0]
    assert got["refused"]["lazy"][:3] == ["FetchFailure", "connection refused", True]
    assert f"_Connection(host='127.0.0.1', port={closed}): Failed to establish a new connection" in got["refused"]["lazy"][3]
    assert got["https"]["lazy"][0] == "FetchFailure"
    cookies = [q.headers.get("Cookie") for q in site.requests if q.target == "/a"]
    assert "k=v" in cookies and "sid=7" in cookies   # sent back after the lazy import too


# ------------------------------------------------------------------- what stands in for requests


def test_the_headers_are_the_sessions_before_it_is_made() -> None:
    import requests

    f = Fetcher(CrawlConfig(user_agent="ua/1"))
    before = dict(f._headers)
    assert list(f.session.headers.items()) == list(before.items())
    extra = {"accept": "text/html", "If-None-Match": '"x"'}
    merged = requests.structures.CaseInsensitiveDict(f.session.headers)
    merged.update(extra)
    assert fetch._merged(before, extra) == fetch._plain(merged)
    assert fetch._merged(f.session.headers, extra) == fetch._plain(merged)
    f.close()


def test_the_redirect_statuses_are_requests() -> None:
    from requests.models import REDIRECT_STATI
    assert tuple(fetch.REDIRECT_STATI) == tuple(REDIRECT_STATI)


def test_the_address_family_and_socket_options_are_urllib3s(site: TestSite) -> None:
    got = _run("""
        import json
        from spider import fetch
        mine = int(fetch._gai_family())
        import urllib3.util.connection, urllib3.connection
        print(json.dumps({"mine": mine, "urllib3": int(urllib3.util.connection.allowed_gai_family()),
                          "options": urllib3.connection.HTTPConnection.default_socket_options}))
    """)
    assert got["mine"] == got["urllib3"]
    import socket as s
    assert got["options"] == [[s.IPPROTO_TCP, s.TCP_NODELAY, 1]]
    site.route("/a", body=PAGE)
    f = Fetcher(CrawlConfig())
    try:
        assert isinstance(f.fetch(site.url("/a")), Response)
        [direct] = f._direct.values()
        assert direct.wire is not None and direct.wire.sock is not None
        assert direct.wire.sock.getsockopt(s.IPPROTO_TCP, s.TCP_NODELAY) != 0
    finally:
        f.close()


def _failure(direct: bool, url: str) -> FetchFailure:
    return direct_failure(direct, url, connect_timeout=1.5)


@pytest.mark.parametrize("error", [
    ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
    TimeoutError("timed out"),
    socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
    OSError(errno.ENETUNREACH, "Network is unreachable"),
    OSError("getaddrinfo returns an empty list"),
], ids=lambda e: type(e).__name__ + ":" + str(e)[:24])
def test_connect_errors_are_urllib3s(error: OSError, monkeypatch: pytest.MonkeyPatch) -> None:
    """The direct path's own connect fails with the exception, kind and text urllib3's pool gives."""
    import urllib3.util.connection

    def fail(*args: object, **kwargs: object) -> socket.socket:
        raise error

    monkeypatch.setattr(urllib3.util.connection, "create_connection", fail)
    monkeypatch.setattr(fetch, "_create_connection", fail)
    url = f"http://127.0.0.1:{_closed_port()}/a"
    old, new = _failure(False, url), _failure(True, url)
    assert (new.kind, new.transient, _masked(new.detail)) == (old.kind, old.transient, _masked(old.detail))


def test_a_host_urllib3_refuses_fails_as_through_urllib3() -> None:
    """An empty label: urllib3's IDNA check refuses it before connecting; the direct path lets
    urllib3's connection try it."""
    url = "http://a..b:9/x"
    old, new = _failure(False, url), _failure(True, url)
    assert (new.kind, new.detail) == (old.kind, old.detail)


@pytest.mark.parametrize("host", ["example.com", "a.b.", "x" * 63 + ".com", "x" * 64 + ".com", "a..b", ".a", "a" * 64,
                                  "localhost", "127.0.0.1"])
def test_plain_hosts_are_the_ones_idna_encodes_as_they_are(host: str) -> None:
    try:
        ok = host.encode("idna") == host.encode("ascii")
    except UnicodeError:
        ok = False
    assert fetch._plain_host(host) == ok


_TARGET_CHARS = st.sampled_from(list("/?%aZ09-._~!$&'()*+,;=:@\"<>[]\\^`{|} é\x7f") + ["%41", "%4a", "%zz", "%2F", "%%"])


@settings(max_examples=500, deadline=None)
@given(st.lists(_TARGET_CHARS, max_size=12).map(lambda parts: "/" + "".join(parts)))
def test_the_request_target_is_encoded_as_urllib3_encodes_it(target: str) -> None:
    from urllib3.util.url import _encode_target
    want = _encode_target(target)
    assert fetch._encode_target(target) == want
    assert fetch._target(target) == want
    if fetch._SAFE_TARGET.fullmatch(target):
        assert want == target   # the fast path's claim


def test_the_parent_imports_requests_path_before_the_fork_only_when_the_workers_will_surely_need_it(monkeypatch):
    from spider.crawl import _will_need_requests

    for k in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(k)
    assert not _will_need_requests(("http://a.test/", "http://b.test/x"))
    assert _will_need_requests(("http://a.test/", "https://b.test/"))
    monkeypatch.setenv("NO_PROXY", "a.test")
    assert not _will_need_requests(("http://a.test/",))
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    assert _will_need_requests(("http://a.test/",))


def crawl_imports(url: str, tmp_path: Path, summary: str) -> set[str]:
    """The modules every process of a 2-worker crawl of ``url`` imported (``-X importtime`` logs
    each import, of each process); the crawl must end well, saying ``summary``."""
    done = subprocess.run([sys.executable, "-X", "importtime", str(ROOT / "main.py"), "crawl", "t", url,
                           "--workers", "2", "--delay", "0", "--projects-dir", str(tmp_path / "projects")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert summary in done.stdout + done.stderr, done.stdout + done.stderr[-3000:]
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
