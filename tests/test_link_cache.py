"""The worker's cache of resolved links gives what resolving each link afresh gives.

A menu link is cached once per directory (``spider.spider.link_base``), so the key must hold
everything the result depends on: a reference that takes the base's query or whole path
("", "?q", "http:?q") is keyed by the whole base."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from spider.config import CrawlConfig
from spider.frontier.memory import MemoryStore
from spider.spider import LINK_CACHE_SIZE, Spider, directory_of, link_base
from spider.urls import normalize, resolve

WPT = Path(__file__).parent / "data" / "wpt-url" / "urltestdata.json"

BASES = ["http://a/b/c/d;p?q", "http://a/b/c/d", "http://a/b/c/", "http://a/", "http://a/b/c/x?q=/d/e",
         "https://a:8080/x/y.html?b=2&z=1", "http://user:pw@a/b/c", "http://a/b/c/..", "http://a/b/./c",
         "http://a/b/c/%2e%2e", "HTTP://A/b/c", "http://a", "http://a/b\\c/d", "http://a/%7Eb/c"]
HREFS = ["", "?", "?y", "#s", "g", "./g", "g/", "/g", "//g", "g?y", "g#s", "g?y#s", ";x", "g;x?y#s", ".", "./", "..",
         "../", "../g", "../../../g", "/./g", "/../g", "g.", "..g", "./../g", "g/./h", "g/../h", "http:g", "http:",
         "http:?x", "http:#x", "HTTP:g", "https:g", "https:", "http:/g", "http://h/g", "\\g", "\\\\h\\g", " ?x",
         "\t?x", "\tg", "g\t?x", "%2e%2e/g", "%2E./g", "mailto:x@y", "a:b", "a/b:c", "-x", "~u", "%41", "..\\g",
         "x?utm_source=1&a=2", "x;jsessionid=0123456789ABCDEF0123456789ABCDEF"]


def _resolved(base: str, href: str) -> str | None:
    """Through the cache's key: what the worker resolves."""
    return resolve(link_base(base, href, directory_of(base)), href)


@pytest.mark.parametrize("base", BASES)
def test_link_base_resolves_as_the_page_itself(base: str) -> None:
    for href in HREFS:
        assert _resolved(base, href) == resolve(base, href), (base, href)


def test_link_base_is_the_directory_for_a_menu_link_and_the_page_for_a_query() -> None:
    assert directory_of("http://a/b/c.html?x=1") == "http://a/b/"
    assert link_base("http://a/b/c.html", "../index.html", "http://a/b/") == "http://a/b/"
    for href in ("", "?x=2", "#top", "http:?x", " x"):
        assert link_base("http://a/b/c.html", href, "http://a/b/") == "http://a/b/c.html"
    assert directory_of("http://a/b/c/..") is None   # not normal: the text before "/" misleads


def test_link_base_on_the_url_standard_suite() -> None:
    """Every http(s) base and input of the web-platform-tests URL suite, the base normalised."""
    cases = [c for c in json.loads(WPT.read_text(encoding="utf-8")) if isinstance(c, dict) and c.get("base")]
    bases = set()
    for case in cases:
        try:
            bases.add(normalize(case["base"]))
        except ValueError:
            continue
    inputs = sorted({c["input"] for c in cases} | set(HREFS))
    directories = [b for b in bases if directory_of(b)]
    assert len(directories) > 10
    for base, href in itertools.product(sorted(bases), inputs):
        assert _resolved(base, href) == resolve(base, href), (base, href)


def _linker(tmp_path: Path, **kw) -> Spider:   # type: ignore[no-untyped-def]
    seed = "http://a/"
    config = CrawlConfig(seeds=(seed,), delay=0, max_depth=50, scope="host", ignore_robots=True, **kw)
    store = MemoryStore(max_pages=None)
    store.folder = tmp_path   # type: ignore[attr-defined]
    return Spider(config, store)


def test_worker_queues_the_same_links_with_a_warm_cache(tmp_path: Path) -> None:
    """Two pages of one directory: the second page's links come from the first page's entries
    where the key allows, and still resolve against the second page."""
    spider = _linker(tmp_path)
    pages = ["http://a/b/one.html?p=1", "http://a/b/two.html?p=2", "http://a/c/three.html"]
    for page in pages:
        for href in HREFS:
            url = resolve(page, href)
            want = None if url is None else spider.admission.clean(url)
            assert spider._link_url(link_base(page, href, directory_of(page)), href) == want, (page, href)
    hits = spider._link_url.cache_info().hits
    assert hits > len(HREFS) / 2   # the second page of http://a/b/ reused the first page's entries


def test_link_cache_is_bounded(tmp_path: Path) -> None:
    spider = _linker(tmp_path)
    for i in range(LINK_CACHE_SIZE + 100):
        spider.add_links_to_queue(f"http://a/d{i}/page.html", ["x.html"], 0)
    info = spider._link_url.cache_info()
    assert info.maxsize == LINK_CACHE_SIZE and info.currsize == LINK_CACHE_SIZE
