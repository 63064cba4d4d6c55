"""The fetcher's remembered connection pools (one per origin, looked up without requests'
per-request URL parsing) behave as requests' own lookup: a closed pool is never used again, each
origin gets its own, and a configured proxy still takes requests' path."""

from __future__ import annotations

from sitekit import TestSite
from spider.config import CrawlConfig
from spider.fetch import Fetcher, Response


def _fetcher() -> Fetcher:
    f = Fetcher(CrawlConfig(connect_timeout=1.0, read_timeout=1.0, max_time=2.0))
    f.direct_http = False   # the pools of urllib3 (https, or with the direct http path off)
    return f


def _adapter(f: Fetcher):  # type: ignore[no-untyped-def]
    return f.session.get_adapter("http://x/")


def test_one_pool_per_origin_reused_across_pages(site: TestSite, make_site) -> None:
    other = make_site("127.0.0.2")
    for s in (site, other):
        s.route("/a", body=b"<html>a</html>", content_type="text/html")
        s.route("/b", body=b"<html>b</html>", content_type="text/html")
    f = _fetcher()
    try:
        for s in (site, other, site, other):
            for path in ("/a", "/b"):
                r = f.fetch(s.url(path))
                assert isinstance(r, Response) and r.status == 200, r
        pools = _adapter(f)._origin_pools
        assert sorted(k[0] for k in pools) == sorted(s.url("/").rstrip("/") for s in (site, other))
        assert all(p.num_requests == 4 for p in pools.values())   # every request of an origin on its pool
    finally:
        f.close()


def test_a_pool_the_manager_closed_is_not_used_again(site: TestSite) -> None:
    """A closed pool (urllib3 1.x closes the pools its manager drops; ``close`` closes them all)
    would fail every later request to its origin (ClosedPoolError) if it were used again."""
    site.route("/a", body=b"<html>a</html>", content_type="text/html")
    f = _fetcher()
    try:
        assert isinstance(f.fetch(site.url("/a")), Response)
        adapter = _adapter(f)
        for pool in adapter._origin_pools.values():
            pool.close()
        adapter.poolmanager.clear()   # dropped by the manager too, as urllib3 1.x evicts
        r = f.fetch(site.url("/a"))
        assert isinstance(r, Response) and r.status == 200, r
        assert site.hits["/a"] == 2
    finally:
        f.close()


def test_a_proxy_set_later_is_used_though_the_origin_has_a_pool(site: TestSite, make_site) -> None:
    """With a proxy, requests' own lookup runs, whatever pool the origin has: the request goes to
    the proxy, in absolute form (the session's proxies are handed to every request)."""
    proxy = make_site("127.0.0.2")
    proxy.route("/a", body=b"<html>via proxy</html>", content_type="text/html")
    site.route("/a", body=b"<html>direct</html>", content_type="text/html")
    f = _fetcher()
    try:
        r = f.fetch(site.url("/a"))
        assert isinstance(r, Response) and r.body == b"<html>direct</html>", r   # the origin's pool now
        f.session.proxies = {"http": proxy.url("/").rstrip("/")}
        r = f.fetch(site.url("/a"))
        assert isinstance(r, Response) and r.body == b"<html>via proxy</html>", r
        assert site.hits["/a"] == 1
    finally:
        f.close()


def test_a_proxy_from_the_environment_is_still_used(site: TestSite, make_site, monkeypatch) -> None:
    """A proxy in the environment: requests merges it (``trust_env``), and the request goes there."""
    proxy = make_site("127.0.0.2")
    proxy.route("/a", body=b"<html>via proxy</html>", content_type="text/html")
    monkeypatch.setenv("http_proxy", proxy.url("/").rstrip("/"))
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    f = _fetcher()
    try:
        r = f.fetch(site.url("/a"))
        assert isinstance(r, Response) and r.body == b"<html>via proxy</html>", r
        assert site.hits.get("/a", 0) == 0
    finally:
        f.close()
