"""The worker's shortcuts on its per-page path give what the slow path they replace gives."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

import spider.spider as worker
from conftest import FakeClock
from spider import recrawl, robots
from spider.config import CrawlConfig
from spider.frontier.memory import MemoryStore
from spider.links import Link
from spider.politeness import effective_delay
from spider.robots import PENDING as ROBOTS_PENDING
from spider.spider import Spider


def test_first_schedule_line_is_the_pages_line() -> None:
    """``recrawl.first_line`` (no ``Page`` made) writes ``after_fetch(...).line()``, byte for byte."""
    validators = [None, "", "-", " ", '"e"', 'W/"x y"', "\tx\x1b[31m\n", " padded ", "Wed, 21 Oct 2015 07:28:00 GMT",
                  "é\u202e"]
    hashes = [None, "", "-", "b2:0123456789abcdef", "text/html:123", "x\ty", " h "]
    bounds = [(recrawl.MIN_INTERVAL, recrawl.MAX_INTERVAL), (0.0, 60.0), (90000.0, 1e9), (0.0, float("inf")),
              (1e400, 1e400)]
    urls = ["http://a.test/", "https://b.test:8443/x?y=1"]
    times = [0.0, 1000.4, 1764693000.5, 1764693000.49999]
    n = 0
    for url, now, etag, modified, text_hash, (lo, hi) in itertools.product(
            urls, times, validators, validators[:4], hashes, bounds):
        try:
            want = recrawl.after_fetch(url, now, etag, modified, text_hash, lo, hi).line()
        except (ValueError, OverflowError) as exc:   # (an infinite due time's stamp: same error)
            try:
                recrawl.first_line(url, now, etag, modified, text_hash, lo, hi)
            except type(exc):
                continue
            raise AssertionError("first_line did not raise as after_fetch().line()")
        assert recrawl.first_line(url, now, etag, modified, text_hash, lo, hi) == want, (etag, modified, text_hash, lo, hi)
        n += 1
    assert n > 1000


def _floor_afresh(spider, host: str) -> float:   # type: ignore[no-untyped-def]
    """The floor as worked out before ``Spider._floor`` kept it: asked of the rules each time."""
    rules = spider.robots.known(host)
    cd = rules.crawl_delay(spider.agent) if rules else None
    cfg = spider.config
    return cfg.delay if cd is None else max(cfg.delay, min(cd, cfg.max_delay))


def _delay_afresh(spider, host: str) -> float:   # type: ignore[no-untyped-def]
    if spider.robots.known(host) is None:
        return ROBOTS_PENDING
    return min(spider.config.max_delay, effective_delay(spider.store.host_state(host), _floor_afresh(spider, host)))


def test_a_hosts_kept_floor_follows_its_rules(tmp_path: Path) -> None:
    """The floor kept per host (``Spider._floor``) is that of the host's rules as they are now: new
    rules (robots.txt fetched again, another Crawl-delay) give a new floor, never the kept one; and
    ``delay_for`` (rules asked once) gives what asking ``floor`` and the host's state gives."""
    clock = FakeClock()
    store = MemoryStore()
    store.folder = tmp_path   # type: ignore[attr-defined]
    spider = Spider(CrawlConfig(seeds=("http://a.test/",), delay=0.5, max_delay=8.0), store, clock=clock, wait=clock.wait)
    hosts = ["a.test", "b.test:8080"]
    seen: list[float] = []
    for step, body in enumerate(["User-agent: *\nCrawl-delay: 3\n", "User-agent: *\nCrawl-delay: 0.1\n",
                                 "User-agent: *\nCrawl-delay: 100\n", "User-agent: *\nDisallow: /x\n",
                                 "User-agent: other\nCrawl-delay: 7\n", "User-agent: *\nCrawl-delay: 2\n"]):
        for host in hosts:
            assert spider.delay_for(host) == _delay_afresh(spider, host) == ROBOTS_PENDING
            assert spider.floor(host) == _floor_afresh(spider, host)
            # robots.txt fetched again: new rules with another Crawl-delay
            rules, _ = spider.robots.get(host, lambda previous: (robots.from_fetch(200, body.encode(), clock()), "u"))
            floor = spider.floor(host)
            assert floor == _floor_afresh(spider, host)
            assert spider.delay_for(host) == _delay_afresh(spider, host) == floor
            store.update_host(host, lambda s: replace(s, delay=2.0 * step))   # a host slowed down (429s)
            assert spider.delay_for(host) == _delay_afresh(spider, host) == min(8.0, max(2.0 * step, floor))
            store.update_host(host, lambda s: replace(s, delay=0.0))
            clock.wait(robots.FRESH_FOR + 1)   # stale: no rules until fetched again
            assert spider.floor(host) == _floor_afresh(spider, host) == 0.5
            assert spider.delay_for(host) == ROBOTS_PENDING
            spider.robots._missing.clear()   # (a file looked for a moment ago is looked for again)
        seen.append(floor)
    assert seen == [3.0, 0.5, 8.0, 0.5, 0.5, 2.0]


def test_a_url_refused_lately_by_a_rule_of_the_url_alone_is_refused_as_when_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``add_links_to_queue`` refuses a URL refused lately for a reason of the URL alone (scope,
    deny, allow, length) without asking ``Admission.check`` again: pages' reports, rejected.txt's
    lines and the queue are those of a worker that asks every time; a URL refused for its depth, a
    nofollow link or robots.txt is asked again (a shallower page, a followed link, may add it)."""
    def crawl(shortcut: bool) -> tuple[list, list, list]:
        if not shortcut:
            monkeypatch.setattr(worker, "BY_URL_ALONE", frozenset())
        store = MemoryStore()
        store.folder = tmp_path / f"w{shortcut}"   # type: ignore[attr-defined]
        store.folder.mkdir()
        clock = FakeClock()
        spider = Spider(CrawlConfig(seeds=("http://a.test/",), max_depth=3, deny=("secret",), allow=(r"a\.test/[^x]",),
                                    delay=0), store, clock=clock, wait=clock.wait)
        spider.robots.get("a.test", lambda previous: (robots.from_fetch(200, b"User-agent: *\nDisallow: /private\n",
                                                                        clock()), "u"))
        refused = ["http://b.test/p", "http://a.test:8080/p", "http://a.test/secret", "http://a.test/x1",
                   "http://a.test/" + "y" * 9000, "http://a.test/private/1"]
        reports = []
        for page in range(12):
            depth = [1, 3, 2, 0, 3, 3, 2][page % 7]   # a link refused for its depth, then from a shallower page
            links = [Link(u, False) for u in refused] + [Link(f"/d{page % 3}", False), Link(f"/n{page % 2}", page % 4 < 2)]
            if page % 5 == 0:
                links = links[::-1]
            reports.append(spider.add_links_to_queue(f"http://a.test/page{page}", links, depth,
                                                     nofollow_page=page == 6))
        return reports, store.logs.get("rejected", []), [e.line() for e in store.pending]

    fast = crawl(True)
    slow = crawl(False)
    monkeypatch.undo()
    assert fast == slow
    reports, rejected, queued = fast
    assert sum(r.rejected for r in reports) >= 6 * 12 and len(queued) >= 3
    assert {line.split("\t")[1] for line in "".join(rejected).splitlines()} >= {
        "scope", "deny", "allow", "url too long", "robots", "depth", "nofollow"}
