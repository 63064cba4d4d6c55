"""Fast checks that the test kit (tests/sitekit.py) and the demo site server behave as promised.

Everything here talks to 127.0.0.0/8 only.
"""

from __future__ import annotations

import gzip
import http.client
import os
import re
import time
import zlib
from collections import deque
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import urldefrag, urljoin, urlsplit

import lxml.html
import pytest
import requests

from sitekit import (
    DEMO_BROKEN,
    DEMO_DISALLOWED,
    DEMO_EXTERNAL,
    DEMO_FILES,
    DEMO_HTML_PAGES,
    DEMO_NON_HTTP,
    DEMO_ONLY_VIA_BASE,
    DEMO_QUERY_VARIANTS,
    DEMO_REDIRECTS,
    RequestInfo,
    TestSite,
    tree_links,
)
from spider.demo import SITE_DIR, serve

HREF = re.compile(r'href="([^"]+)"')


# ------------------------------------------------------------------------------ fixtures & env


def test_proxy_variables_are_cleared() -> None:
    assert os.environ["NO_PROXY"] == "*"
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy"):
        assert name not in os.environ


def test_projects_dir(projects_dir: Path) -> None:
    assert projects_dir.is_dir() and projects_dir.name == "projects" and not any(projects_dir.iterdir())


# ------------------------------------------------------------------------------ TestSite basics


def test_routes_and_404(site: TestSite) -> None:
    site.route("/a", body="<p>hello</p>", headers={"X-Test": "yes"})
    site.route("/data.txt", body=b"plain", content_type="text/plain")
    r = requests.get(site.url("/a"), timeout=5)
    assert (r.status_code, r.text, r.headers["X-Test"]) == (200, "<p>hello</p>", "yes")
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.headers["Content-Length"] == "12"
    r = requests.get(site.url("data.txt"), timeout=5)
    assert (r.headers["Content-Type"], r.content) == ("text/plain", b"plain")
    r = requests.get(site.url("/nope"), timeout=5)
    assert r.status_code == 404 and "Content-Length" in r.headers
    assert site.url("/x?y=1") == f"http://127.0.0.1:{site.port}/x?y=1" and site.host == "127.0.0.1"
    assert site.errors == []


def test_hits_log_and_reset(site: TestSite) -> None:
    site.route("/a", body="a")
    with requests.Session() as session:
        for target in ("/a?utm_source=x", "/a", "/a", "/missing"):
            session.get(site.url(target), timeout=5)
    assert site.hits == {"/a?utm_source=x": 1, "/a": 2, "/missing": 1}
    log = site.log
    assert [path for _, path, _ in log] == ["/a?utm_source=x", "/a", "/a", "/missing"]
    assert len({client for _, _, client in log}) == 1, "keep-alive: one connection for the session"
    assert all(client[0] == "127.0.0.1" for _, _, client in log)
    assert [info.count for info in site.requests] == [1, 2, 3, 1]
    site.reset()
    assert site.hits == {} and site.log == [] and site.requests == []


def test_dynamic_handler(site: TestSite) -> None:
    def flaky(info: RequestInfo) -> tuple[int, Optional[dict[str, str]], str]:
        if info.count == 1:
            return 503, {"Retry-After": "1"}, "busy"
        return 200, None, f"ok for {info.headers['User-Agent']} query={info.query}"

    site.route("/flaky", handler=flaky)
    first = requests.get(site.url("/flaky"), timeout=5)
    second = requests.get(site.url("/flaky?q=1"), headers={"User-Agent": "spider-test"}, timeout=5)
    assert (first.status_code, first.headers["Retry-After"], first.text) == (503, "1", "busy")
    assert (second.status_code, second.text) == (200, "ok for spider-test query=q=1")


def test_handler_errors_become_500_and_are_recorded(site: TestSite) -> None:
    site.route("/boom", handler=lambda info: 1 / 0)  # type: ignore[arg-type,return-value]
    assert requests.get(site.url("/boom"), timeout=5).status_code == 500
    assert len(site.errors) == 1 and "ZeroDivisionError" in site.errors[0]
    site.reset()


def test_redirects_and_status(site: TestSite) -> None:
    site.route("/new", body="new")
    site.add_redirect("/old", "/new")
    site.add_redirect("/older", "/old", status=308)
    site.status("/gone", 410)
    r = requests.get(site.url("/older"), timeout=5)
    assert r.text == "new" and [h.status_code for h in r.history] == [308, 301]
    r = requests.get(site.url("/old"), allow_redirects=False, timeout=5)
    assert (r.status_code, r.headers["Location"]) == (301, "/new")
    assert requests.get(site.url("/gone"), timeout=5).status_code == 410
    assert requests.head(site.url("/new"), timeout=5).headers["Content-Length"] == "3"


def test_multiple_hosts(make_site: Callable[..., TestSite]) -> None:
    one, two = make_site(), make_site("127.0.0.2")
    one.route("/", body="one")
    two.route("/", body="two")
    assert requests.get(one.url(), timeout=5).text == "one"
    assert requests.get(two.url(), timeout=5).text == "two"
    assert two.url().startswith("http://127.0.0.2:")
    assert two.log[0][2][0].startswith("127.")


def test_refuses_non_loopback_host() -> None:
    with pytest.raises(ValueError):
        TestSite("10.0.0.1")
    with pytest.raises(ValueError):
        TestSite("example.org")


# ------------------------------------------------------------------------------ tree generator


def test_tree_is_deterministic_and_reachable(site: TestSite) -> None:
    paths = site.add_tree(60, 3, page_size=2000)
    assert len(paths) == 61 and "/" in paths and "/p/59.html" in paths
    assert tree_links(5, 60, 3) == tree_links(5, 60, 3) == [6, 36, 37]
    seen, queue = {"/"}, deque(["/"])
    with requests.Session() as session:
        while queue:
            r = session.get(site.url(queue.popleft()), timeout=5)
            assert r.status_code == 200 and abs(len(r.content) - 2000) <= 100
            for href in HREF.findall(r.text):
                if href not in seen:
                    seen.add(href)
                    queue.append(href)
    assert seen == paths
    assert sum(site.hits.values()) == 61


def test_tree_edge_cases() -> None:
    assert tree_links(0, 1, 5) == []
    assert tree_links(2, 4, 10) == [3, 0, 1]  # capped at n-1 distinct targets, never itself
    with TestSite() as s:
        assert s.add_tree(5, 0, prefix="/q/", home=True) == {"/"} | {f"/q/{i}.html" for i in range(5)}
        assert len(HREF.findall(requests.get(s.url("/"), timeout=5).text)) == 5


# ------------------------------------------------------------------------------ misbehaving routes


def test_slow_times_out(site: TestSite) -> None:
    site.slow("/slow", 1.0)
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(site.url("/slow"), timeout=0.2)


def test_trickle_timing(site: TestSite) -> None:
    site.trickle("/drip", total_bytes=3000, bytes_per_second=10_000)
    start = time.monotonic()
    r = requests.get(site.url("/drip"), timeout=5)
    elapsed = time.monotonic() - start
    assert len(r.content) == 3000 and r.headers["Content-Length"] == "3000"
    assert 0.2 <= elapsed < 2.0, elapsed


def test_trickle_headers_arrive_first(site: TestSite) -> None:
    site.trickle("/drip", total_bytes=2000, bytes_per_second=2000)
    start = time.monotonic()
    with requests.get(site.url("/drip"), stream=True, timeout=5) as r:
        assert r.status_code == 200 and time.monotonic() - start < 0.5
        first = r.raw.read(10)
        assert first and time.monotonic() - start < 0.5


@pytest.mark.parametrize("chunked", [True, False])
def test_endless(site: TestSite, chunked: bool) -> None:
    site.endless("/forever", chunked=chunked)
    with requests.get(site.url("/forever"), stream=True, timeout=5) as r:
        assert (r.headers.get("Transfer-Encoding") == "chunked") is chunked
        got = 0
        for chunk in r.iter_content(64 * 1024):
            got += len(chunk)
            if got >= 2_000_000:
                break
    assert got >= 2_000_000
    assert site.errors == []


def test_gzip_bomb(site: TestSite) -> None:
    size = 200 * 1024 * 1024
    site.gzip_bomb("/bomb", decompressed_size=size)
    head = requests.head(site.url("/bomb"), timeout=5)
    assert head.headers["Content-Encoding"] == "gzip"
    assert int(head.headers["Content-Length"]) < size // 500
    with requests.get(site.url("/bomb"), stream=True, timeout=5) as r:
        compressed = r.raw.read(64 * 1024, decode_content=False)
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = inflater.decompress(compressed, 1_000_000)
    assert len(out) == 1_000_000 and not out.strip(b"\0")


def test_gzip_bomb_is_a_valid_stream(site: TestSite) -> None:
    site.gzip_bomb("/small-bomb", decompressed_size=3 * 1024 * 1024 + 17)
    with requests.get(site.url("/small-bomb"), stream=True, timeout=5) as r:
        body = r.raw.read(decode_content=False)
    assert gzip.decompress(body) == bytes(3 * 1024 * 1024 + 17)


def test_reset_mid_body(site: TestSite) -> None:
    site.reset_mid_body("/cut", total_bytes=50_000)
    site.route("/ok", body="fine")
    with pytest.raises((requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError)):
        requests.get(site.url("/cut"), timeout=5)
    assert requests.get(site.url("/ok"), timeout=5).text == "fine"
    assert site.errors == []


def test_stop_ends_stuck_responses() -> None:
    s = TestSite().start()
    s.endless("/forever")
    r = requests.get(s.url("/forever"), stream=True, timeout=5)
    start = time.monotonic()
    s.stop()
    r.close()
    assert time.monotonic() - start < 2


# ------------------------------------------------------------------------------ demo server


def _raw_get(url: str, target: str) -> int:
    """GET with the target sent verbatim (requests would normalise away dot segments)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        conn.request("GET", target)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_demo_serves_pages_and_types(demo_url: str) -> None:
    with requests.Session() as s:
        home = s.get(demo_url, timeout=5)
        assert home.status_code == 200 and home.headers["Content-Type"] == "text/html; charset=utf-8"
        assert home.content == (SITE_DIR / "index.html").read_bytes()
        assert s.get(demo_url + "guides/", timeout=5).content == (SITE_DIR / "guides/index.html").read_bytes()
        assert s.get(demo_url + "species/index.html?utm_source=x", timeout=5).status_code == 200
        robots = s.get(demo_url + "robots.txt", timeout=5)
        assert robots.headers["Content-Type"] == "text/plain; charset=utf-8" and "Disallow: /private/" in robots.text
        assert s.get(demo_url + "img/spider-icon.png", timeout=5).headers["Content-Type"] == "image/png"
        assert s.get(demo_url + "img/orb-web.svg", timeout=5).headers["Content-Type"] == "image/svg+xml"
        missing = s.get(demo_url + "no/such/page.html", timeout=5)
        assert missing.status_code == 404 and missing.headers["Content-Type"].startswith("text/html")
        assert "404" in missing.text
        assert s.get(demo_url + "index.html/", timeout=5).status_code == 404
        assert s.get(demo_url + "files/", timeout=5).status_code == 404  # a folder without index.html
        head = s.head(demo_url + "about.html", timeout=5)
        assert head.content == b"" and int(head.headers["Content-Length"]) == (SITE_DIR / "about.html").stat().st_size


def test_demo_redirects(demo_url: str) -> None:
    r = requests.get(demo_url + "old-index.html", allow_redirects=False, timeout=5)
    assert (r.status_code, r.headers["Location"]) == (301, "/index.html")
    r = requests.get(demo_url + "old/spotting-guide.html", timeout=5)
    assert r.url.endswith("/guides/identification.html") and [h.status_code for h in r.history] == [301, 302]
    r = requests.get(demo_url + "species?x=1", allow_redirects=False, timeout=5)
    assert (r.status_code, r.headers["Location"]) == (301, "/species/?x=1")


@pytest.mark.parametrize(
    "target",
    [
        "/../setup.cfg",
        "/species/../../setup.cfg",
        "/%2e%2e/setup.cfg",
        "/species/..%2f..%2fsetup.cfg",
        "/./index.html",
        "/_redirects.txt",
    ],
)
def test_demo_refuses_traversal_and_config(demo_url: str, target: str) -> None:
    assert _raw_get(demo_url, target) == 404


def test_demo_serve_is_loopback_only() -> None:
    with pytest.raises(ValueError):
        serve(host="0.0.0.0")


def _links(page: bytes, page_url: str) -> set[str]:
    """Absolute link targets of an HTML page (a and link elements), honouring <base href>."""
    doc = lxml.html.fromstring(page)
    bases = doc.xpath("//base/@href")
    base = urljoin(page_url, bases[0]) if bases else page_url
    return {urljoin(base, href.strip()) for href in doc.xpath("//a/@href | //link/@href")}


def test_demo_site_matches_documented_facts(demo_url: str) -> None:
    """Crawl the demo site like a careful crawler would and check the facts in sitekit.DEMO_*."""
    origin = demo_url.rstrip("/")
    status: dict[str, int] = {}
    linked: set[str] = set()
    queue = deque([demo_url])
    with requests.Session() as session:
        while queue:
            url = queue.popleft()
            if url in status:
                continue
            r = session.get(url, allow_redirects=False, timeout=5)
            status[url] = r.status_code
            found: set[str] = set()
            if r.is_redirect:
                found.add(urljoin(url, r.headers["Location"]))
            elif r.headers.get("Content-Type", "").startswith("text/html") and r.status_code == 200:
                found = _links(r.content, url)
            for link in found:
                linked.add(link)
                link = urldefrag(link)[0]
                if link.startswith(origin + "/") and not urlsplit(link).path.startswith("/private/"):
                    queue.append(link)

    def paths(code: Callable[[int], bool]) -> set[str]:
        return {url[len(origin):] for url, c in status.items() if code(c)}

    assert paths(lambda c: c == 404) == set(DEMO_BROKEN)
    assert paths(lambda c: 300 <= c < 400) == set(DEMO_REDIRECTS)
    for path, (code, location) in DEMO_REDIRECTS.items():
        r = requests.get(origin + path, allow_redirects=False, timeout=5)
        assert (r.status_code, r.headers["Location"]) == (code, location)
    ok = paths(lambda c: c == 200)
    assert DEMO_QUERY_VARIANTS <= ok and DEMO_FILES <= ok and DEMO_ONLY_VIA_BASE in ok
    # Every file of the site except the config and the robots-disallowed area is reachable.
    served = {urlsplit(p).path for p in ok}
    served = {p + "index.html" if p.endswith("/") else p for p in served}
    on_disk = {"/" + f.relative_to(SITE_DIR).as_posix() for f in SITE_DIR.rglob("*") if f.is_file()}
    assert served == {p for p in on_disk if p != "/_redirects.txt" and not p.startswith("/private/")}
    assert len([p for p in on_disk if p.endswith(".html")]) == DEMO_HTML_PAGES
    # Links that a crawler must not follow.
    site_links = {urldefrag(link)[0] for link in linked}
    assert {origin + p for p in DEMO_DISALLOWED} <= site_links
    assert {link for link in site_links if link.startswith(("http:", "https:")) and not link.startswith(origin)} == set(
        DEMO_EXTERNAL
    )
    assert {link for link in linked if not link.startswith(("http:", "https:"))} == set(DEMO_NON_HTTP)
    for path in DEMO_DISALLOWED:
        assert requests.get(origin + path, timeout=5).status_code == 200
