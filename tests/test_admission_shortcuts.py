"""The shortcuts of ``spider.scope.Admission`` give the answers of the full rules.

A paste of a million URLs is admitted URL by URL, so ``Admission.check`` keeps two shortcuts: the
scope's answer per host (``Scope.allows``), and a cheap test that no trap rule can refuse a URL
(``_PlainTest``), true of most URLs, after which ``TrapRules.check`` is not asked. Neither may
change an answer: checked here against the rules asked every time, on URLs made to trip them.
"""

from __future__ import annotations

import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spider.config import CrawlConfig
from spider.scope import MAX_URL_LENGTH, Admission, Scope, _PlainTest
from spider.traps import TrapRules

TODAY = datetime.date(2026, 12, 2)

RULES = [
    TrapRules(),
    TrapRules.from_settings(["path-segments=3", "repeated-segments=2", "query-params=1", "url-length=60",
                             "presentation-params=View,page,Sort_By", "calendar=10", "calendar-past=off"]),
    TrapRules.from_settings(["calendar=off", "calendar-past=off", "presentation-params=off", "query-params=off"]),
    TrapRules.from_settings([], enabled=False),
    TrapRules(repeated_segments=1),   # (not allowed from the command line, but a TrapRules can be made so)
]

_SEGMENTS = st.sampled_from(["a", "b", "A", "", "p", "2024-01-05", "1999", "2031", "12", "2031_12_01", "2199.01",
                             "x2024-01-05", "2024-13-01", "news", "1900-01", "2100-1-1", "\u00e9", "ab", "a.b",
                             "index.html", "%2F"])
_PARAMS = st.sampled_from(["v=1", "page=2", "sort=1", "Sort=1", "SORT", "view", "sort_by=x", "sortby", "x=sort",
                           "year=2090", "YEAR=2090", "year=1990", "month=3", "q=2024-01-05", "a=1", "", "b",
                           "\u017fort=1", "orderby=a", "s&t", "lim\u0130t=1"])
URLS = st.builds(
    lambda scheme, userinfo, host, port, segments, params, filler: (
        f"{scheme}://{userinfo}{host}{port}/" + "/".join(segments) + filler
        + ("?" + "&".join(params) if params is not None else "")),
    st.sampled_from(["http", "https"]),
    st.sampled_from(["", "u@", "u:p@"]),
    st.sampled_from(["a.test", "www.a.test", "sub.a.test", "a.test.other", "other.test", "127.0.0.1", "[::1]",
                     "www.127.0.0.1", "2024-01-05.test"]),
    st.sampled_from(["", ":80", ":443", ":8080"]),
    st.lists(_SEGMENTS, max_size=14),
    st.one_of(st.none(), st.lists(_PARAMS, max_size=6)),
    st.sampled_from(["", "x" * 50, "y" * 2100, "z" * (MAX_URL_LENGTH + 1)]),
)
ODD = st.builds(lambda head, url, cut: head + (url.partition("://")[2] if cut else url),   # not what Admission
                st.sampled_from(["a/b/c/d/", "x?view=1", "?", "a?b"]), URLS, st.booleans())  # is given, but still
PROPERTY = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.one_of(URLS, ODD), st.sampled_from(RULES))
def test_a_url_the_plain_test_clears_is_refused_by_no_trap_rule(url: str, rules: TrapRules) -> None:
    if _PlainTest(rules).clear(url):
        assert rules.check(url, TODAY) is None, url


def test_the_plain_test_clears_the_common_urls() -> None:
    plain = _PlainTest(TrapRules())
    for url in ("http://paste.test/p/1.html?v=2", "https://a.test/docs/library/os.html", "http://a.test/",
                "http://a.test/a/b/c/d/e/f?id=7&page=3", "https://a.test/2024/notes"):
        assert plain.clear(url), url
    for url in ("http://a.test/2024-01-05/x", "http://a.test/?Sort=1", "http://a.test/?year=2024",
                "http://a.test/a/b/a/b/a/b", "http://a.test/?a&b&c&d&e", "http://a.test/\u00e9"):
        assert not plain.clear(url), url


def _config(mode: str, any_port: bool = False) -> CrawlConfig:
    return CrawlConfig(seeds=("http://a.test/docs/", "https://127.0.0.1:8080/x"), scope=mode, any_port=any_port,
                       deny=(r"/deny/",), traps=("path-segments=6",))


@PROPERTY
@given(st.lists(URLS, min_size=1, max_size=20), st.sampled_from(["host", "domain", "prefix"]), st.booleans(),
       st.integers(0, 3))
def test_admission_answers_as_the_rules_asked_every_time(urls: list[str], mode: str, any_port: bool,
                                                         depth: int) -> None:
    admission = Admission(_config(mode, any_port), clock=lambda: 1796169600.0)   # 2026-12-02
    scope, rules = admission.scope, admission.traps
    for url in urls + urls[::-1]:   # (the second time, the scope's answer is the one kept)
        if len(url) > MAX_URL_LENGTH:
            want: str | None = "url too long"
        elif not scope._allows(url):
            want = "scope"
        elif "/deny/" in url:
            want = "deny"
        else:
            want = rules.check(url, TODAY) or ("depth" if depth > admission.max_depth else None)
        assert admission.check(url, depth) == want, url


def _clear_searching_first(plain: _PlainTest, url: str) -> bool:
    """``_PlainTest.clear`` as it was: the whole URL searched for a key, "year=" and a date first,
    and ``_each`` told to look for only what was found (as ``clear_many`` does for a run)."""
    if plain.off:
        return False
    low = url.lower()
    keys = plain.keys if plain.key_at is not None and plain.key_at.search(low) else ()
    dated = plain.dated and plain.DATE.search(url) is not None
    return plain._each([url], keys, plain.dated and "year=" in low, dated)[0]


@PROPERTY
@given(st.one_of(URLS, ODD), st.sampled_from(RULES))
def test_one_url_is_cleared_as_when_searched_first(url: str, rules: TrapRules) -> None:
    """``clear`` of one URL, which lets ``_each`` look where a key, "year=" or a date could be,
    answers as the whole URL searched first: those searches only spare ``_each`` its looks."""
    plain = _PlainTest(rules)
    assert plain.clear(url) == _clear_searching_first(plain, url), url


def test_a_scope_keeps_its_answers_per_host_and_port() -> None:
    scope = Scope("host", ("http://a.test/",))
    asked = [("http://a.test/x", True), ("http://a.test:8080/x", False), ("http://u@a.test/y", True),
             ("https://www.a.test/z", True), ("http://b.test/a.test/", False), ("http://a.test", True),
             ("http://a.test.b.test/", False), ("https://a.test:443/", True)]
    for _ in range(2):
        assert [(url, scope.allows(url)) for url in [u for u, _ in asked]] == asked


def test_at_each_limit_the_plain_test_clears_and_one_over_it_asks_the_rules() -> None:
    rules = TrapRules.from_settings(["path-segments=4", "query-params=2", "url-length=40", "repeated-segments=3"])
    plain = _PlainTest(rules)
    at_limit = ["http://a.test/a/b/c/d", "http://a.test/?a=1&b=2", "http://a.test/" + "x" * 26, "http://a.test/a/b/c"]
    over = ["http://a.test/a/b/c/d/e", "http://a.test/?a=1&b=2&c=3", "http://a.test/" + "x" * 27, "http://a.test/a/a/a"]
    assert [len(u) for u in (at_limit[2], over[2])] == [40, 41]
    for url in at_limit:
        assert rules.check(url, TODAY) is None and plain.clear(url), url
    for url in over:
        assert rules.check(url, TODAY) is not None and not plain.clear(url), url


def test_the_plain_test_reads_the_query_where_the_rules_do() -> None:
    # The rules read what follows the first "://"; a "?" before it starts no query.
    url = "a?b" + "http://a.test/p?view=1"
    assert TrapRules().check(url, TODAY) == "presentation-params"
    assert not _PlainTest(TrapRules()).clear(url)


def _admission(rules: TrapRules, mode: str, any_port: bool, patterns: int) -> Admission:
    cfg = _config(mode, any_port)
    if patterns == 0:
        cfg = CrawlConfig(seeds=cfg.seeds, scope=mode, any_port=any_port)
    elif patterns == 2:
        cfg = CrawlConfig(seeds=cfg.seeds, scope=mode, any_port=any_port, allow=(r"a\.test",))
    admission = Admission(cfg, clock=lambda: 1796169600.0)   # 2026-12-02
    admission.traps, admission._plain = rules, _PlainTest(rules)   # (each rule set of RULES)
    return admission


@pytest.mark.slow   # (500 examples: ~4 s; out of the fast subset)
@PROPERTY
@given(st.lists(st.one_of(URLS, ODD), max_size=30), st.sampled_from(RULES), st.sampled_from(["host", "domain", "prefix"]),
       st.booleans(), st.integers(0, 2), st.integers(0, 3))
def test_a_run_admitted_at_once_gets_the_answers_of_each_url_asked_alone(urls: list[str], rules: TrapRules, mode: str,
                                                                       any_port: bool, patterns: int, depth: int) -> None:
    alone, at_once = _admission(rules, mode, any_port, patterns), _admission(rules, mode, any_port, patterns)
    want = [alone.check(url, depth) for url in urls]
    assert at_once.check_many(urls, depth) == want
    assert at_once.check_many(urls[::-1], depth) == want[::-1]   # (the scope's answers kept from the first time)


@pytest.mark.slow   # (500 examples: ~4 s; out of the fast subset)
@PROPERTY
@given(st.lists(st.one_of(URLS, ODD), max_size=30), st.sampled_from(RULES))
def test_the_plain_test_of_a_run_is_that_of_each_url_alone(urls: list[str], rules: TrapRules) -> None:
    plain = _PlainTest(rules)
    got = plain.clear_many(urls)
    assert got == [plain.clear_many([url])[0] for url in urls]
    for url, clear in zip(urls, got):
        assert not clear or rules.check(url, TODAY) is None, url


def test_a_run_searched_at_once_still_asks_each_url_that_may_trip_a_rule() -> None:
    # The run as a whole has a presentation key, "year=", a date: only the URLs that have it are not cleared.
    plain = _PlainTest(TrapRules())
    urls = ["http://a.test/p?v=1", "http://a.test/q?sort=1", "http://a.test/r?x=1&year=2024", "http://a.test/2024-01-05/x",
            "http://a.test/s?page=2", "http://a.test/t?id=view", "http://a.test/u?v=1&Sort=2", "http://a.test/v?v=sort"]
    assert plain.clear_many(urls) == [True, False, False, False, True, True, False, True]
    assert plain.clear_many(urls[:1] + urls[4:6] + urls[7:]) == [True] * 4
