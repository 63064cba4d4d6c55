"""The worker's resolved links, kept by directory (``spider.spider._ResolvedLinks``), give what
resolving each link afresh gives: the key (the base's directory, the href without its fragment)
holds everything the URL depends on, on every base and input of the URL Standard's test suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import spider.spider as worker
from spider.config import CrawlConfig
from spider.frontier.memory import MemoryStore
from spider.links import Link
from spider.spider import Spider, _ResolvedLinks, directory_of
from spider.urls import normalize, resolve

WPT = Path(__file__).parent / "data" / "wpt-url" / "urltestdata.json"

BASES = ["http://a/b/c/d;p?q", "http://a/b/c/d", "http://a/b/c/", "http://a/", "http://a/b/c/x?q=/d/e",
         "https://a:8080/x/y.html?b=2&z=1", "http://user:pw@a/b/c", "http://a/b/c/..", "http://a/b/./c",
         "http://a/b/c/%2e%2e", "HTTP://A/b/c", "http://a", "http://a/b\\c/d", "http://a/%7Eb/c",
         "https://a/b/c;jsessionid=0123456789ABCDEF0123456789ABCDEF/d?utm_source=x"]
HREFS = ["", "?", "?y", "#s", "g", "./g", "g/", "/g", "//g", "g?y", "g#s", "g?y#s", ";x", "g;x?y#s", ".", "./", "..",
         "../", "../g", "../../../g", "/./g", "/../g", "g.", "..g", "./../g", "g/./h", "g/../h", "http:g", "http:",
         "http:?x", "http:#x", "HTTP:g", "https:g", "https:", "http:/g", "http://h/g", "\\g", "\\\\h\\g", " ?x",
         "\t?x", "\tg", "g\t?x", "http\t:", "http\n:?x", "ht\ttp:", "/\t/h/g", "%2e%2e/g", "%2E./g", "mailto:x@y",
         "a:b", "a/b:c", "-x", "~u", "%41", "..\\g", "x?utm_source=1&a=2", "x;jsessionid=0123456789ABCDEF0123456789ABCDEF",
         "g#", "#", "?#", "http://h/g#s", "https://h:443/g?b=1&a=2#s", "//h/g#s", "/g#s?x", "g?y#s#t"]


def _worker(tmp_path: Path) -> Spider:
    config = CrawlConfig(seeds=("http://a/",), delay=0, ignore_robots=True)
    store = MemoryStore(max_pages=None)
    store.folder = tmp_path   # type: ignore[attr-defined]
    return Spider(config, store)


def _afresh(spider: Spider, base: str, href: str) -> str | None:
    url = resolve(base, href)
    return None if url is None else spider.admission.clean(url)


def _sibling(base: str) -> str | None:
    """Another page of ``base``'s directory, with another name and query."""
    directory = directory_of(base)
    return None if directory is None else directory + "zz-other-page.html?other=1"


def _check(spider: Spider, bases: list[str], hrefs: list[str]) -> int:
    """Resolve every href against a sibling page first (warming the directory's links), then
    against each base: each must be what resolving it afresh against that base gives."""
    warmed = 0
    for base in bases:
        sibling = _sibling(base)
        if sibling is not None:
            spider._resolve(hrefs, sibling)
            warmed += 1
        got = dict((href, url) for href, url in spider._resolve(hrefs, base))
        for href in hrefs:
            assert got.get(href) == _afresh(spider, base, href), (base, sibling, href)
    return warmed


def test_links_from_another_page_of_the_directory_resolve_as_afresh(tmp_path: Path) -> None:
    assert _check(_worker(tmp_path), BASES, HREFS) >= 6


def test_the_url_standard_suite_through_the_kept_links(tmp_path: Path) -> None:
    """Every http(s) base and input of the web-platform-tests URL suite (the base normalised),
    each input also with a fragment and as an absolute path."""
    cases = [c for c in json.loads(WPT.read_text(encoding="utf-8")) if isinstance(c, dict) and c.get("base")]
    bases = set()
    for case in cases:
        try:
            bases.add(normalize(case["base"]))
        except ValueError:
            continue
    inputs = sorted({c["input"] for c in cases} | set(HREFS))
    inputs += [i + "#frag" for i in inputs] + ["/" + i for i in inputs]
    assert _check(_worker(tmp_path), sorted(bases), inputs) > 10


def test_menu_links_are_resolved_once_per_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spider = _worker(tmp_path)
    calls: list[str] = []
    real = worker.resolve
    monkeypatch.setattr(worker, "resolve", lambda base, href: calls.append(href) or real(base, href))
    menu = [Link("index.html", False), Link("../up.html#top", False), Link("/about.html", False),
            Link("http://b/x", False), "./news.html#latest", "?page=2", ""]
    spider._resolve(menu, "http://a/docs/one.html")
    assert len(calls) == len(menu)
    calls.clear()
    second = spider._resolve(menu + [Link("../up.html#bottom", False)], "http://a/docs/two.html?x=1")
    assert calls == ["?page=2", ""]   # these depend on the page itself
    assert [url for _, url in second] == ["http://a/docs/index.html", "http://a/up.html", "http://a/about.html",
                                          "http://b/x", "http://a/docs/news.html",
                                          "http://a/docs/two.html?page=2", "http://a/docs/two.html?x=1",
                                          "http://a/up.html"]
    calls.clear()
    spider._resolve(menu, "http://a/other/one.html")   # another directory: resolved afresh
    assert len(calls) == len(menu)


def test_kept_links_are_bounded() -> None:
    kept = _ResolvedLinks(limit=100)
    for i in range(1000):
        done = kept.of(f"http://a/d{i}/page.html")
        assert done is not None
        kept.keep(done, "x.html", f"http://a/d{i}/x.html")
        assert kept.size <= 100
    assert sum(len(d) for d in kept._by_directory.values()) <= 100


def test_only_normal_bases_have_a_directory() -> None:
    assert directory_of("http://a/b/c.html?q=/d/e") == "http://a/b/"
    assert directory_of("https://a:8080/x/") == "https://a:8080/x/"
    for base in ("http://a/b/c/..", "http://a", "HTTP://a/", "ftp://a/b", "http://a/b/%2e%2e/c", "x" * 3000):
        assert directory_of(base) is None, base
