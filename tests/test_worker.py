"""Tests for the worker (spider.spider.Spider) on a MemoryStore, against loopback TestSites.

A fake clock drives time: the worker's ``wait`` advances it instead of sleeping, so retries
scheduled seconds ahead come due at once and every loop here is bounded.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterator

import pytest

from sitekit import TestSite, tree_links
from spider.config import CrawlConfig
from spider.links import Link
from spider.frontier.memory import MemoryStore
from spider.records import QueueEntry, first_field
from conftest import FakeClock, run_until_done as run
from spider.spider import EXIT_INTERNAL_ERROR, LinkReport, Spider

T0 = 1_700_000_000.0




def make_config(seed: str, **kw) -> CrawlConfig:
    # robots.txt has its own tests (test_robots.py); here it would only add requests to count
    values = dict(seeds=(seed,), workers=1, delay=0.0, max_depth=5, connect_timeout=1.0,
                  read_timeout=1.0, max_time=2.0, max_bytes=256 * 1024, ignore_robots=True)
    values.update(kw)
    return CrawlConfig(**values)


@pytest.fixture
def worker() -> Iterator[Callable[..., tuple[Spider, MemoryStore, FakeClock]]]:
    """Factory: ``worker(seed_url, *extra_seed_entries, **config)`` -> (spider, store, clock)."""
    spiders: list[Spider] = []

    def factory(seed: str, **kw) -> tuple[Spider, MemoryStore, FakeClock]:
        store = MemoryStore()
        clock = FakeClock()
        spider = Spider(make_config(seed, **kw), store, clock=clock, wait=clock.wait)
        spiders.append(spider)
        return spider, store, clock

    yield factory
    for s in spiders:
        s.close()


def crawl_one(spider: Spider, store: MemoryStore, clock: FakeClock) -> str:
    """Claim the next URL and crawl it; returns its URL."""
    result = store.claim(1, clock(), spider.delay_for)
    assert len(result.claims) == 1, result
    claim = result.claims[0]
    spider.crawl_page(claim)
    return claim.url


def fields(line: str) -> list[str]:
    assert line.endswith("\n")
    return line.rstrip("\n").split("\t")


def crawled(store: MemoryStore) -> dict[str, list[str]]:
    """url -> fields after the URL: status, content type, bytes, depth, fetched_at, final URL."""
    out: dict[str, list[str]] = {}
    for line in store.crawled:
        f = fields(line)
        assert f[0] not in out, f"{f[0]} recorded twice as crawled"
        out[f[0]] = f[1:]
    return out


def failed(store: MemoryStore) -> dict[str, list[str]]:
    """url -> fields after the URL: reason, depth, fetched_at."""
    out: dict[str, list[str]] = {}
    for line in store.failed:
        f = fields(line)
        assert f[0] not in out, f"{f[0]} recorded twice as failed"
        out[f[0]] = f[1:]
    return out


def rejected(store: MemoryStore) -> list[list[str]]:
    return [fields(line) for text in store.logs.get("rejected", []) for line in text.splitlines(True)]


def html(*hrefs: str, head: str = "") -> str:
    items = "".join(f'<a href="{h}">{h}</a>\n' for h in hrefs)
    return f"<!DOCTYPE html><html><head>{head}</head><body>{items}</body></html>"


# =========================================================================== add_links_to_queue

PAGE = "http://example.com/dir/sub/page.html"


@pytest.fixture
def linker(worker) -> tuple[Spider, MemoryStore]:
    spider, store, _ = worker("http://example.com/", max_depth=3)
    store.add([QueueEntry("http://example.com/")])
    return spider, store


def queued(store: MemoryStore) -> dict[str, QueueEntry]:
    return {e.url: e for e in store.pending}


def test_links_resolved_against_the_page_and_normalised(linker) -> None:
    spider, store = linker
    hrefs = [
        "a.html",                                   # relative to /dir/sub/
        "../up.html",                               # dot segments removed
        "./b/../c.html",
        "/root.html#section",                       # fragment dropped
        "q.html?utm_source=news&b=2&a=1",           # utm_ stripped, query sorted
        "HTTP://EXAMPLE.COM:80/Case.html",          # scheme/host lowercased, default port dropped
        "//example.com/proto-relative.html",
    ]
    report = spider.add_links_to_queue(PAGE, hrefs, 1)
    expected = {
        "http://example.com/dir/sub/a.html",
        "http://example.com/dir/up.html",
        "http://example.com/dir/sub/c.html",
        "http://example.com/root.html",
        "http://example.com/dir/sub/q.html?a=1&b=2",
        "http://example.com/Case.html",
        "http://example.com/proto-relative.html",
    }
    assert report == LinkReport(found=7, added=7, duplicates=0, rejected=0)
    q = queued(store)
    assert set(q) == expected | {"http://example.com/"}
    for url in expected:
        assert q[url].depth == 2 and q[url].source == PAGE
        assert q[url].attempts == 0 and q[url].not_before == 0.0
    assert "rejected" not in store.logs


def test_links_resolved_against_base_url_when_given(linker) -> None:
    spider, store = linker
    report = spider.add_links_to_queue(PAGE, ["x.html", "../y.html", "/abs.html"], 0,
                                       base_url="http://example.com/other/deep/")
    assert report.added == 3
    assert set(queued(store)) - {"http://example.com/"} == {
        "http://example.com/other/deep/x.html",
        "http://example.com/other/y.html",
        "http://example.com/abs.html",
    }
    # the source is still the page, not the base
    assert {e.source for e in store.pending if e.depth == 1} == {PAGE}


def test_link_objects_and_strings_both_accepted(linker) -> None:
    spider, store = linker
    report = spider.add_links_to_queue(PAGE, [Link("one.html", False), "two.html", Link("three.html", True)], 0)
    assert report.added == 2 and report.rejected == 1   # rel="nofollow" is not followed by default
    assert {"http://example.com/dir/sub/one.html", "http://example.com/dir/sub/two.html"} <= set(queued(store))
    assert "http://example.com/dir/sub/three.html\tnofollow\t" + PAGE + "\n" in store.logs["rejected"]


def test_nofollow_page_refuses_all_its_links(linker) -> None:
    spider, store = linker
    report = spider.add_links_to_queue(PAGE, ["one.html", "two.html"], 0, nofollow_page=True)
    assert (report.added, report.rejected) == (0, 2)


def test_non_http_and_fragment_only_links_ignored(linker) -> None:
    spider, store = linker
    hrefs = ["mailto:someone@example.com", "javascript:void(0)", "#top", "tel:+100",
             "ftp://example.com/file", "data:text/html,<a>"]
    report = spider.add_links_to_queue(PAGE, hrefs, 0)
    assert report == LinkReport(found=len(hrefs), added=0, duplicates=0, rejected=0)
    assert set(queued(store)) == {"http://example.com/"}
    assert "rejected" not in store.logs


def test_duplicates_within_page_and_known_urls_not_added(linker) -> None:
    spider, store = linker
    hrefs = ["a.html", "a.html#x", "./a.html", "a.html?utm_medium=mail",  # one URL, four spellings
             "http://example.com/",                                          # the seed: known
             "b.html"]
    report = spider.add_links_to_queue(PAGE, hrefs, 0)
    assert report == LinkReport(found=6, added=2, duplicates=4, rejected=0)
    urls = [e.url for e in store.pending]
    assert urls == ["http://example.com/", "http://example.com/dir/sub/a.html",
                    "http://example.com/dir/sub/b.html"]
    # a second page with the same links adds nothing
    again = spider.add_links_to_queue("http://example.com/other.html", ["/dir/sub/a.html", "/dir/sub/b.html"], 0)
    assert again == LinkReport(found=2, added=0, duplicates=2, rejected=0)
    assert len(store.pending) == 3


def test_already_crawled_or_failed_urls_are_duplicates(linker) -> None:
    spider, store = linker
    spider.add_links_to_queue(PAGE, ["a.html"], 0)
    # crawl it "by hand": claim and settle
    result = store.claim(10, T0, spider.delay_for)
    for claim in result.claims:
        store.settle(claim, "crawled", record=f"{claim.url}\t200\ttext/html\t1\t0\t-\t-\n")
    assert not store.pending
    report = spider.add_links_to_queue(PAGE, ["a.html", "/"], 0)
    assert report == LinkReport(found=2, added=0, duplicates=2, rejected=0)
    assert not store.pending


def test_out_of_scope_and_too_deep_links_rejected_and_logged(linker) -> None:
    spider, store = linker
    hrefs = ["http://other.example/x", "https://evil.example.org/", "near.html"]
    report = spider.add_links_to_queue(PAGE, hrefs, 2)  # links at depth 3 == max_depth: fine
    assert report == LinkReport(found=3, added=1, duplicates=0, rejected=2)
    assert rejected(store) == [
        ["http://other.example/x", "scope", PAGE],
        ["https://evil.example.org/", "scope", PAGE],
    ]
    deep_page = "http://example.com/deep/page.html"
    report = spider.add_links_to_queue(deep_page, ["d.html", "http://other.example/y"], 3)  # depth 4 > 3
    assert report == LinkReport(found=2, added=0, duplicates=0, rejected=2)
    assert rejected(store)[2:] == [
        ["http://example.com/deep/d.html", "depth", deep_page],
        ["http://other.example/y", "scope", deep_page],   # scope is named before depth
    ]
    assert set(queued(store)) == {"http://example.com/", "http://example.com/dir/sub/near.html"}


def test_rejected_url_logged_once(linker) -> None:
    spider, store = linker
    first = spider.add_links_to_queue(PAGE, ["http://other.example/menu"], 0)
    second = spider.add_links_to_queue("http://example.com/b.html", ["http://other.example/menu"], 0)
    assert first.rejected == 1 and second.rejected == 1
    assert rejected(store) == [["http://other.example/menu", "scope", PAGE]]


def test_too_deep_link_admitted_later_from_a_shallower_page(linker) -> None:
    spider, store = linker
    assert spider.add_links_to_queue("http://example.com/deep.html", ["/late.html"], 3).rejected == 1
    report = spider.add_links_to_queue("http://example.com/", ["/late.html"], 0)
    assert report.added == 1
    assert queued(store)["http://example.com/late.html"].depth == 1


def test_www_and_https_of_the_seed_host_are_in_scope_another_port_is_not(linker) -> None:
    # The port is part of the scope, as of a browser's origin (any port was in: a page could make
    # the crawler knock on every port of its host); 80 and 443 count as no port.
    spider, store = linker
    report = spider.add_links_to_queue(PAGE, ["http://www.example.com/w", "https://example.com/s",
                                              "https://example.com:443/t", "https://example.com:8443/p"], 0)
    assert report.added == 3 and report.rejected == 1
    assert "https://example.com:8443/p" not in queued(store)


def test_any_port_takes_in_every_port_of_the_seed_host(worker) -> None:
    spider, store, _ = worker("http://example.com/", any_port=True)
    report = spider.add_links_to_queue(PAGE, ["http://www.example.com:81/w", "https://example.com:8443/s"], 0)
    assert report.added == 2 and report.rejected == 0


# =========================================================================== a whole crawl


def bfs_depths(n_pages: int, links_per_page: int) -> dict[str, int]:
    first = list(range(n_pages)) if links_per_page <= 0 else list(range(max(1, links_per_page)))
    depth = {"/": 0}
    todo: deque[tuple[int, int]] = deque((i, 1) for i in first)
    seen = set(first)
    for i in first:
        depth[f"/p/{i}.html"] = 1
    while todo:
        i, d = todo.popleft()
        for t in tree_links(i, n_pages, links_per_page):
            if t not in seen:
                seen.add(t)
                depth[f"/p/{t}.html"] = d + 1
                todo.append((t, d + 1))
    return depth


def test_full_crawl_of_a_tree_crawls_every_page_once(site: TestSite, worker) -> None:
    paths = site.add_tree(15, 3)
    spider, store, _ = worker(site.url("/"), max_depth=20)
    store.add([QueueEntry(site.url("/"))])
    run(spider)
    hits = site.hits
    assert set(hits) == paths
    assert all(n == 1 for n in hits.values()), hits
    depths = bfs_depths(15, 3)
    rows = crawled(store)
    assert set(rows) == {site.url(p) for p in paths}
    for path in paths:
        status, ctype, size, depth, stamp, final = rows[site.url(path)][:6]
        assert status == "200" and ctype == "text/html" and int(size) > 0
        assert int(depth) == depths[path], path
        assert stamp.endswith("Z") and final == "-"
    assert store.failed == []
    assert "rejected" not in store.logs
    assert site.errors == []


def test_crawl_respects_max_depth(site: TestSite, worker) -> None:
    site.route("/", body=html("/d1.html"))
    site.route("/d1.html", body=html("/d2.html"))
    site.route("/d2.html", body=html("/d3.html"))
    site.route("/d3.html", body=html())
    spider, store, _ = worker(site.url("/"), max_depth=2)
    store.add([QueueEntry(site.url("/"))])
    run(spider)
    assert site.hits == {"/": 1, "/d1.html": 1, "/d2.html": 1}
    assert rejected(store) == [[site.url("/d3.html"), "depth", site.url("/d2.html")]]


# =========================================================================== redirects


def test_redirect_chain_of_three_hops(site: TestSite, worker) -> None:
    site.add_redirect("/r1", "/r2", status=301)
    site.add_redirect("/r2", site.url("/r3"), status=302)  # absolute Location
    site.add_redirect("/r3", "final.html", status=307)     # relative Location
    site.route("/final.html", body=html("/child.html"))
    site.route("/child.html", body=html())
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/r1"), depth=1)])
    run(spider)
    rows = crawled(store)
    assert rows[site.url("/r1")][0] == "301" and rows[site.url("/r1")][-1] == site.url("/r2")
    assert rows[site.url("/r2")][0] == "302" and rows[site.url("/r2")][-1] == site.url("/r3")
    assert rows[site.url("/r3")][0] == "307" and rows[site.url("/r3")][-1] == site.url("/final.html")
    for hop in ("/r1", "/r2", "/r3"):
        assert rows[site.url(hop)][3] == "1"  # a hop keeps the depth of the URL it came from
    final = rows[site.url("/final.html")]
    assert final[0] == "200" and final[3] == "1" and final[-1] == "-"
    assert rows[site.url("/child.html")][3] == "2"  # the final page's links were followed
    assert site.hits == {"/r1": 1, "/r2": 1, "/r3": 1, "/final.html": 1, "/child.html": 1}
    assert store.failed == []


def test_redirect_loop_fails(site: TestSite, worker) -> None:
    site.add_redirect("/a", "/b")
    site.add_redirect("/b", "/a")
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/a"))])
    run(spider)
    assert failed(store)[site.url("/b")][0] == "redirect loop"
    assert crawled(store)[site.url("/a")][0] == "301"
    assert site.hits == {"/a": 1, "/b": 1}


def test_redirect_to_itself_fails(site: TestSite, worker) -> None:
    site.add_redirect("/self", "/self?utm_source=loop#x")
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/self"))])
    run(spider)
    assert failed(store)[site.url("/self")][0] == "redirect loop"
    assert site.hits == {"/self": 1}


def test_redirect_off_scope_not_requested_and_rejected(site: TestSite, make_site, worker) -> None:
    other = make_site("127.0.0.2")
    other.route("/landing", body=html())
    site.add_redirect("/out", other.url("/landing"), status=302)
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/out"))])
    run(spider)
    assert other.log == []
    assert rejected(store) == [[other.url("/landing"), "scope", site.url("/out")]]
    row = crawled(store)[site.url("/out")]
    assert row[0] == "302" and row[-1] == other.url("/landing")
    assert store.failed == []


def test_redirect_to_a_file_url_fails_and_requests_nothing(site: TestSite, worker) -> None:
    site.add_redirect("/passwd", "file:///etc/passwd", status=302)
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/passwd"))])
    run(spider)
    [(url, row)] = failed(store).items()
    assert url == site.url("/passwd")
    assert "non-http" in row[0]
    assert [t for _, t, _ in site.log] == ["/passwd"]
    assert store.crawled == []


def test_redirect_without_location_fails_with_status(site: TestSite, worker) -> None:
    site.route("/nowhere", status=302, body="moved, but where?")
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/nowhere"))])
    run(spider)
    assert failed(store)[site.url("/nowhere")][0] == "302"


def chain(site: TestSite, n: int) -> None:
    """/c0 -> /c1 -> ... -> /c{n} (a page): n redirects."""
    for i in range(n):
        site.add_redirect(f"/c{i}", f"/c{i + 1}")
    site.route(f"/c{n}", body=html())


def test_max_redirects_hops_are_followed(site: TestSite, worker) -> None:
    chain(site, 3)
    spider, store, _ = worker(site.url("/"), max_redirects=3)
    store.add([QueueEntry(site.url("/c0"))])
    run(spider)
    assert crawled(store)[site.url("/c3")][0] == "200"
    assert store.failed == []


def test_more_than_max_redirects_fails(site: TestSite, worker) -> None:
    chain(site, 4)
    spider, store, _ = worker(site.url("/"), max_redirects=3)
    store.add([QueueEntry(site.url("/c0"))])
    run(spider)
    rows = failed(store)
    assert len(rows) == 1
    [(url, (reason, *_))] = rows.items()
    assert "redirects" in reason and "3" in reason
    assert site.hits["/c4"] == 0
    assert site.url("/c4") not in crawled(store)
    assert sum(site.hits.values()) == 4


def test_redirect_to_an_already_crawled_url_not_fetched_again(site: TestSite, worker) -> None:
    site.route("/page.html", body=html())
    site.add_redirect("/alias", "/page.html")
    spider, store, clock = worker(site.url("/"))
    store.add([QueueEntry(site.url("/page.html")), QueueEntry(site.url("/alias"))])
    assert crawl_one(spider, store, clock) == site.url("/page.html")
    assert crawl_one(spider, store, clock) == site.url("/alias")
    assert site.hits == {"/page.html": 1, "/alias": 1}
    rows = crawled(store)
    assert rows[site.url("/alias")][0] == "301" and rows[site.url("/alias")][-1] == site.url("/page.html")
    assert not store.pending and not store.inflight


def test_redirect_target_already_queued_is_not_fetched_twice(site: TestSite, worker) -> None:
    site.route("/page.html", body=html())
    site.add_redirect("/alias", "/page.html")
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/alias")), QueueEntry(site.url("/page.html"))])
    run(spider)
    assert site.hits == {"/page.html": 1, "/alias": 1}
    assert crawled(store)[site.url("/page.html")][0] == "200"


# =========================================================================== failure policy


def test_503_then_200_is_crawled_after_a_retry(site: TestSite, worker) -> None:
    site.route("/flaky", handler=lambda info: (503, None, "busy") if info.count == 1 else (200, None, html()))
    spider, store, clock = worker(site.url("/"))
    store.add([QueueEntry(site.url("/flaky"))])
    crawl_one(spider, store, clock)
    assert store.crawled == [] and store.failed == []
    [again] = store.pending
    assert again.url == site.url("/flaky")
    assert again.attempts == 1
    assert clock() < again.not_before <= clock() + 2.0  # retry_delay(1): between 1 and 2 s
    # not claimable yet
    result = store.claim(4, clock(), spider.delay_for)
    assert result.claims == [] and result.wait_until == again.not_before
    run(spider)
    assert crawled(store)[site.url("/flaky")][0] == "200"
    assert site.hits["/flaky"] == 2
    assert clock() >= again.not_before


@pytest.mark.parametrize("status", [404, 403, 401, 400, 501])
def test_permanent_status_fails_with_the_status(site: TestSite, worker, status: int) -> None:
    site.status("/bad", status)
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/bad"), depth=2)])
    run(spider)
    row = failed(store)[site.url("/bad")]
    assert row[0] == str(status) and row[1] == "2"
    assert site.hits["/bad"] == 1
    assert store.crawled == []


def test_410_fails_and_is_never_fetched_again(site: TestSite, worker) -> None:
    site.status("/gone", 410)
    site.route("/", body=html("/gone", "/later.html"))
    site.route("/later.html", body=html("/gone", "/gone?utm_source=x"))
    spider, store, clock = worker(site.url("/"))
    store.add([QueueEntry(site.url("/"))])
    assert crawl_one(spider, store, clock) == site.url("/")
    assert crawl_one(spider, store, clock) == site.url("/gone")
    assert failed(store)[site.url("/gone")][0] == "410"
    run(spider)  # /later.html rediscovers /gone twice
    assert site.hits["/gone"] == 1
    report = spider.add_links_to_queue(site.url("/elsewhere.html"), ["/gone"], 0)
    assert report.added == 0 and report.duplicates == 1
    run(spider)
    assert site.hits["/gone"] == 1
    assert len(store.failed) == 1


def test_transient_failure_every_time_fails_after_three_attempts(site: TestSite, worker) -> None:
    site.reset_mid_body("/broken")
    spider, store, clock = worker(site.url("/"))
    store.add([QueueEntry(site.url("/broken"))])
    run(spider)
    row = failed(store)[site.url("/broken")]
    assert row[0] in ("connection broken after 3 attempts", "connection error after 3 attempts")
    assert site.hits["/broken"] == 3
    assert store.crawled == []
    # the attempts were spread out in (fake) time, not back to back
    assert clock() - T0 >= 1.0 + 2.0


def test_transient_status_every_time_fails_with_the_status(site: TestSite, worker) -> None:
    site.status("/down", 503)
    spider, store, _ = worker(site.url("/"), max_attempts=4)
    store.add([QueueEntry(site.url("/down"))])
    run(spider)
    assert failed(store)[site.url("/down")][0] == "503"
    assert site.hits["/down"] == 4


def test_too_large_is_not_retried(site: TestSite, worker) -> None:
    site.route("/huge", body=html() + "x" * 5000)
    spider, store, _ = worker(site.url("/"), max_bytes=1000)
    store.add([QueueEntry(site.url("/huge"))])
    run(spider)
    assert failed(store)[site.url("/huge")][0] == "too large"
    assert site.hits["/huge"] == 1


def test_refused_connection_retried_then_failed(worker) -> None:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    url = f"http://127.0.0.1:{port}/"
    spider, store, _ = worker(url)
    store.add([QueueEntry(url)])
    run(spider)
    assert failed(store)[url][0] == "connection refused after 3 attempts"


# =========================================================================== parsing


def test_base_href_resolves_links(site: TestSite, worker) -> None:
    site.route("/dir/page.html", body=html("x.html", "../y.html", head='<base href="/other/sub/">'))
    site.route("/other/sub/x.html", body=html())
    site.route("/other/y.html", body=html())
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/dir/page.html"))])
    run(spider)
    assert site.hits == {"/dir/page.html": 1, "/other/sub/x.html": 1, "/other/y.html": 1}
    rows = crawled(store)
    assert rows[site.url("/other/sub/x.html")][3] == "1"
    assert site.url("/dir/x.html") not in store.seen


def test_absolute_off_scope_base_href(site: TestSite, worker) -> None:
    site.route("/page.html", body=html("x.html", head='<base href="http://elsewhere.example/b/">'))
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/page.html"))])
    run(spider)
    assert rejected(store) == [["http://elsewhere.example/b/x.html", "scope", site.url("/page.html")]]
    assert site.hits == {"/page.html": 1}


@pytest.mark.parametrize("content_type", ["image/png", "application/pdf", "text/plain"])
def test_non_html_recorded_as_crawled_and_not_parsed(site: TestSite, worker, content_type: str) -> None:
    body = b'<html><a href="/hidden.html">hidden</a></html>' + b"\x00" * 3000
    site.route("/file", body=body, content_type=content_type)
    site.route("/hidden.html", body=html())
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/file"))])
    run(spider)
    status, ctype, size, depth, _, final = crawled(store)[site.url("/file")]
    assert (status, ctype, int(size), depth, final) == ("200", content_type, len(body), "0", "-")
    assert site.hits["/hidden.html"] == 0
    assert store.seen == {site.url("/file")}


def test_untyped_html_is_sniffed_and_parsed(site: TestSite, worker) -> None:
    site.route("/untyped", body=html("/found.html"), content_type=None)
    site.route("/found.html", body=html())
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/untyped"))])
    run(spider)
    assert crawled(store)[site.url("/untyped")][1] == "text/html"
    assert site.hits["/found.html"] == 1


def test_fetch_log_has_one_line_per_request(site: TestSite, worker) -> None:
    site.route("/", body=html("/missing"))
    spider, store, _ = worker(site.url("/"))
    store.add([QueueEntry(site.url("/"))])
    run(spider)
    lines = [line for text in store.logs["fetch"] for line in text.splitlines()]
    assert [(f.split("\t")[2], f.split("\t")[-1]) for f in lines] == [
        ("200", site.url("/")),
        ("404", site.url("/missing")),
    ]
    assert [first_field(line) for line in store.failed] == [site.url("/missing")]


# =========================================================================== internal errors


class ExplodingFetcher:
    """Wraps a real Fetcher; raises (like a crawler bug would) for URLs ending in ``boom``, the
    first ``times`` times (None: always)."""

    def __init__(self, config: CrawlConfig, times: int | None = None) -> None:
        from spider.fetch import Fetcher

        self.inner = Fetcher(config)
        self.left = times

    def fetch(self, url: str):
        if url.endswith("boom") and (self.left is None or self.left > 0):
            if self.left is not None:
                self.left -= 1
            raise RuntimeError("simulated bug")
        return self.inner.fetch(url)

    def close(self) -> None:
        self.inner.close()


def exploding_worker(seed: str, times: int | None = None) -> tuple[Spider, MemoryStore, FakeClock]:
    config = make_config(seed)
    store, clock = MemoryStore(), FakeClock()
    spider = Spider(config, store, fetcher=ExplodingFetcher(config, times), clock=clock, wait=clock.wait)  # type: ignore[arg-type]
    return spider, store, clock


def test_internal_error_is_retried_later_not_failed(site: TestSite) -> None:
    # An internal error failed the URL for good ('internal error: RuntimeError'), and failed URLs
    # are never queued again: --max-time 1e10 failed every URL that way.
    site.route("/", body=html("/boom", "/fine.html"))
    site.route("/boom", body=html())
    site.route("/fine.html", body=html())
    spider, store, _ = exploding_worker(site.url("/"), times=2)   # max_attempts is 3
    try:
        store.add([QueueEntry(site.url("/"))])
        run(spider)
    finally:
        spider.close()
    assert failed(store) == {}
    assert crawled(store)[site.url("/boom")][0] == "200"
    assert crawled(store)[site.url("/fine.html")][0] == "200"
    assert "".join(store.logs["errors"]).count("RuntimeError: simulated bug") == 2


def test_internal_error_every_time_leaves_the_url_pending_and_stops_the_worker(site: TestSite) -> None:
    site.route("/", body=html("/boom", "/fine.html"))
    site.route("/fine.html", body=html())
    spider, store, _ = exploding_worker(site.url("/"))
    try:
        store.add([QueueEntry(site.url("/"))])
        with pytest.raises(SystemExit) as stopped:
            spider.run(lambda: False)
    finally:
        spider.close()
    assert stopped.value.code == EXIT_INTERNAL_ERROR
    assert failed(store) == {} and store.inflight == {}
    assert [(e.url, e.attempts) for e in store.pending] == [(site.url("/boom"), 2)]
    assert crawled(store)[site.url("/fine.html")][0] == "200"
    assert "".join(store.logs["errors"]).count("RuntimeError: simulated bug") == 3


def test_internal_error_on_a_redirect_target_settles_the_target(site: TestSite) -> None:
    site.add_redirect("/from", "/boom")
    spider, store, clock = exploding_worker(site.url("/"))
    try:
        store.add([QueueEntry(site.url("/from"))])
        crawl_one(spider, store, clock)
    finally:
        spider.close()
    assert store.inflight == {} and failed(store) == {}
    assert [(e.url, e.attempts) for e in store.pending] == [(site.url("/boom"), 1)]   # tried again later
    assert crawled(store)[site.url("/from")][0] == "301"


class SlowHoldStore(MemoryStore):
    """A store whose host updates take ``lag`` seconds of the fake clock the first time and none
    after: a round trip that was slow once, as a loaded Redis or disk makes it."""

    def __init__(self, clock: FakeClock, lag: float) -> None:
        super().__init__()
        self.clock, self.lag = clock, lag

    def update_host(self, host, change):  # type: ignore[no-untyped-def]
        self.clock.now += self.lag
        self.lag = 0.0
        return super().update_host(host, change)


class SendTimes:
    """A real Fetcher that notes the fake clock as each request leaves."""

    def __init__(self, config: CrawlConfig, clock: FakeClock) -> None:
        from spider.fetch import Fetcher

        self.inner, self.clock, self.sent = Fetcher(config), clock, []

    def fetch(self, url: str, **kw):  # type: ignore[no-untyped-def]
        self.sent.append(self.clock())
        return self.inner.fetch(url, **kw)

    def close(self) -> None:
        self.inner.close()


def test_a_slow_store_round_trip_never_shortens_the_gap_between_two_requests(site: TestSite) -> None:
    # _hold_host sets the host's slot from a time read before its store round trip; when that
    # round trip is slow once, the next request (slot = that time + delay) left less than one
    # delay after this one (seen on Redis under load: 0.185 s against --delay 0.2).
    site.route("/", body='<a href="/a">a</a>')
    site.route("/a", body='<a href="/b">b</a>')
    site.route("/b", body="done")
    clock = FakeClock()
    config = make_config(site.url("/"), delay=0.2)
    store = SlowHoldStore(clock, lag=0.05)
    fetcher = SendTimes(config, clock)
    spider = Spider(config, store, fetcher=fetcher, clock=clock, wait=clock.wait)  # type: ignore[arg-type]
    try:
        store.add([QueueEntry(site.url("/"))])
        run(spider)
    finally:
        spider.close()
    assert len(fetcher.sent) == 3, fetcher.sent
    gaps = [b - a for a, b in zip(fetcher.sent, fetcher.sent[1:])]
    assert all(g >= 0.2 - 1e-9 for g in gaps), gaps
