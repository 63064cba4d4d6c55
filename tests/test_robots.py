"""Unit tests for spider.robots: what a robots.txt fetch means, the rules, and the per-host cache.

No network here: ``from_fetch`` is fed statuses and bodies, ``RobotsCache.get`` a counting fake
fetch function, and time is a fake clock.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from protego import Protego

from spider.config import DEFAULT_USER_AGENT
from spider.robots import (BIG, FRESH_FOR, MAX_BODY, RETRY_UNAVAILABLE, RobotsCache, Rules, cache_name,
                           dump, from_fetch, load, product_token)

T0 = 1_700_000_000.0


def rules_of(text: str | bytes) -> Rules:
    body = text.encode("utf-8") if isinstance(text, str) else text
    return from_fetch(200, body, T0)


def url(path: str) -> str:
    return "http://example.com" + path


# ============================================================================ from_fetch table


@pytest.mark.parametrize("status", [200, 203, 206, 299])
def test_2xx_gives_parsed_rules_fresh_for_24_hours(status: int) -> None:
    r = from_fetch(status, b"User-agent: *\nDisallow: /private/\n", T0)
    assert r.mode == "rules"
    assert r.status == status
    assert r.fetched_at == T0
    assert r.fresh_until == T0 + 24 * 3600 == T0 + FRESH_FOR
    assert not r.allowed(url("/private/x.html"), "spider")
    assert r.allowed(url("/public.html"), "spider")
    assert r.label() == f"ok ({status})"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 418, 429, 451, 499])
def test_4xx_means_allow_all(status: int) -> None:
    # A 4xx body is ignored even when it looks like rules (a custom 404 page, say).
    r = from_fetch(status, b"User-agent: *\nDisallow: /\n", T0)
    assert r.mode == "allow-all"
    assert r.status == status
    assert r.allowed(url("/"), "spider")
    assert r.allowed(url("/anything/at/all?q=1"), "spider")
    assert r.fresh_until == T0 + FRESH_FOR
    assert r.crawl_delay("spider") is None
    assert r.sitemaps() == []
    assert r.label() == f"allow-all ({status})"


@pytest.mark.parametrize("status", [500, 502, 503, 504, 599, None])
def test_5xx_or_no_response_means_disallow_all_for_5_minutes(status: int | None) -> None:
    r = from_fetch(status, b"User-agent: *\nAllow: /\n", T0)
    assert r.mode == "disallow-all"
    assert r.status == status
    assert not r.allowed(url("/"), "spider")
    assert not r.allowed(url("/robots.txt"), "*")
    assert r.fresh_until == T0 + 300 == T0 + RETRY_UNAVAILABLE
    assert r.crawl_delay("spider") is None
    assert r.sitemaps() == []
    expected = "disallow-all (no response)" if status is None else f"disallow-all ({status})"
    assert r.label() == expected


def test_only_the_first_500_kib_of_a_2xx_body_is_parsed() -> None:
    filler = b"# " + b"x" * (MAX_BODY - 3) + b"\n"            # exactly MAX_BODY bytes of comment
    assert len(filler) == MAX_BODY
    r = from_fetch(200, filler + b"User-agent: *\nDisallow: /\n", T0)
    assert len(r.body) == MAX_BODY
    assert r.allowed(url("/x"), "spider"), "rules past 500 KiB must not apply"
    short = from_fetch(200, b"User-agent: *\nDisallow: /\n", T0)
    assert not short.allowed(url("/x"), "spider")


def test_product_token() -> None:
    assert product_token("spider/0.1.0 (x)") == "spider"
    assert product_token(DEFAULT_USER_AGENT) == "spider"
    assert product_token("  my-bot_2/1.0") == "my-bot_2"
    assert product_token("") == "*"
    assert product_token("/weird") == "*"


# ============================================================================ the rules (Protego)


def test_disallow_blocks_the_prefix_only() -> None:
    r = rules_of("User-agent: *\nDisallow: /private/\n")
    assert not r.allowed(url("/private/"), "spider")
    assert not r.allowed(url("/private/deep/page.html?x=1"), "spider")
    assert r.allowed(url("/private"), "spider")                   # no trailing slash: not the prefix
    assert r.allowed(url("/privateer.html"), "spider")
    assert r.allowed(url("/"), "spider")


def test_allow_longer_than_disallow_wins() -> None:
    r = rules_of("User-agent: *\nDisallow: /private/\nAllow: /private/public/\n")
    assert not r.allowed(url("/private/secret.html"), "spider")
    assert r.allowed(url("/private/public/page.html"), "spider")


def test_longer_disallow_beats_shorter_allow() -> None:
    r = rules_of("User-agent: *\nAllow: /docs/\nDisallow: /docs/drafts/\n")
    assert r.allowed(url("/docs/intro.html"), "spider")
    assert not r.allowed(url("/docs/drafts/next.html"), "spider")


def test_allow_wins_a_tie_and_order_does_not_matter() -> None:
    for text in ("User-agent: *\nDisallow: /page\nAllow: /page\n",
                 "User-agent: *\nAllow: /page\nDisallow: /page\n"):
        assert rules_of(text).allowed(url("/page.html"), "spider"), text


def test_star_wildcard() -> None:
    r = rules_of("User-agent: *\nDisallow: /*.pdf\nDisallow: /*?sort=\nDisallow: /a*/b/\n")
    assert not r.allowed(url("/files/report.pdf"), "spider")
    assert not r.allowed(url("/report.pdf?download=1"), "spider")   # no $: a prefix match
    assert not r.allowed(url("/list?sort=asc"), "spider")
    assert r.allowed(url("/list?page=2"), "spider")
    assert not r.allowed(url("/abc/b/x.html"), "spider")
    assert r.allowed(url("/b/x.html"), "spider")


def test_dollar_anchors_the_end() -> None:
    r = rules_of("User-agent: *\nDisallow: /*.pdf$\nDisallow: /exact$\n")
    assert not r.allowed(url("/files/report.pdf"), "spider")
    assert r.allowed(url("/files/report.pdf?download=1"), "spider")
    assert r.allowed(url("/files/report.pdf.html"), "spider")
    assert not r.allowed(url("/exact"), "spider")
    assert r.allowed(url("/exact/more"), "spider")


def test_the_named_group_replaces_the_star_group() -> None:
    text = ("User-agent: *\nDisallow: /\n\n"
            "User-agent: spider\nDisallow: /not-for-spider/\n")
    r = rules_of(text)
    agent = product_token("spider/0.1.0 (x)")
    assert r.allowed(url("/page.html"), agent)                # the star group's Disallow: / does not apply
    assert not r.allowed(url("/not-for-spider/x.html"), agent)
    assert not r.allowed(url("/page.html"), "otherbot")       # other agents get the star group
    assert not r.allowed(url("/not-for-spider/x.html"), "otherbot")


def test_the_star_group_applies_when_no_group_names_us() -> None:
    r = rules_of("User-agent: googlebot\nDisallow: /\n\nUser-agent: *\nDisallow: /tmp/\n")
    assert r.allowed(url("/page.html"), "spider")
    assert not r.allowed(url("/tmp/x"), "spider")
    assert not r.allowed(url("/page.html"), "googlebot")


def test_user_agent_matching_is_case_insensitive() -> None:
    r = rules_of("User-agent: SPIDER\nDisallow: /x/\n")
    assert not r.allowed(url("/x/1"), "spider")


def test_directives_are_case_insensitive() -> None:
    r = rules_of("USER-AGENT: *\nDISALLOW: /a/\nallow: /a/b/\ncrawl-DELAY: 3\nSITEMAP: http://example.com/s.xml\n")
    assert not r.allowed(url("/a/x"), "spider")
    assert r.allowed(url("/a/b/x"), "spider")
    assert r.crawl_delay("spider") == 3.0
    assert r.sitemaps() == ["http://example.com/s.xml"]


def test_a_non_utf8_body_is_tolerated() -> None:
    body = b"User-agent: *\nDisallow: /caf\xe9/\nDisallow: /\xff\xfe/\nDisallow: /after/\n"
    r = from_fetch(200, body, T0)
    assert r.mode == "rules"
    assert "\ufffd" in r.body                         # replaced, not an exception
    assert not r.allowed(url("/after/page.html"), "spider")   # rules after the bad bytes still apply
    assert r.allowed(url("/elsewhere.html"), "spider")


def test_crawl_delay_per_group() -> None:
    r = rules_of("User-agent: *\nCrawl-delay: 2.5\n\nUser-agent: slowbot\nCrawl-delay: 10\n")
    assert r.crawl_delay("spider") == 2.5
    assert r.crawl_delay("slowbot") == 10.0
    assert rules_of("User-agent: *\nDisallow: /x\n").crawl_delay("spider") is None


def test_sitemap_lines_are_collected_whatever_the_group() -> None:
    r = rules_of("Sitemap: http://example.com/a.xml\nUser-agent: *\nDisallow:\n"
                 "Sitemap: http://example.com/b.xml\n")
    assert sorted(r.sitemaps()) == ["http://example.com/a.xml", "http://example.com/b.xml"]
    assert r.allowed(url("/anything"), "spider")   # an empty Disallow allows everything


def test_comments_and_blank_robots_allow_everything() -> None:
    for text in ("", "# nothing here\n", "\n\n\n"):
        r = rules_of(text)
        assert r.mode == "rules"
        assert r.allowed(url("/x"), "spider")


# ============================================================================ dump / load


@pytest.mark.parametrize("rules", [
    from_fetch(200, b"User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n\n\nUser-agent: x\nAllow: /\n", T0 + 0.25),
    from_fetch(200, b"\nUser-agent: *\nDisallow: /lead-blank/\n", T0),     # a body starting with a blank line
    from_fetch(200, b"", T0),
    from_fetch(404, b"ignored", T0),
    from_fetch(503, b"", T0),
    from_fetch(None, b"", T0 + 0.5),
], ids=["rules", "leading-blank", "empty-body", "404", "503", "no-response"])
def test_dump_load_round_trip(rules: Rules) -> None:
    text = dump(rules, "http://example.com/robots.txt")
    assert text.startswith("url: http://example.com/robots.txt\n")
    back = load(text)
    assert (back.status, back.fetched_at, back.body, back.mode) == (
        rules.status, rules.fetched_at, rules.body, rules.mode)
    assert back.fresh_until == rules.fresh_until
    assert back.label() == rules.label()
    for path in ("/", "/private/x", "/lead-blank/y"):
        assert back.allowed(url(path), "spider") == rules.allowed(url(path), "spider")


def test_load_rejects_an_unknown_mode_and_a_missing_time() -> None:
    good = dump(from_fetch(200, b"", T0), "http://e/robots.txt")
    with pytest.raises(ValueError):
        load(good.replace("mode: rules", "mode: maybe"))
    with pytest.raises(KeyError):
        load(good.replace("fetched_at: ", "fetched: "))


def test_cache_name_is_a_safe_file_name() -> None:
    assert re.fullmatch(r"example\.com-[0-9a-f]{16}\.txt", cache_name("Example.COM"))
    assert cache_name("Example.COM") == cache_name("example.com")
    assert re.fullmatch(r"127\.0\.0\.1_8080-[0-9a-f]{16}\.txt", cache_name("127.0.0.1:8080"))
    assert "/" not in cache_name("../../etc/passwd") and cache_name("../x").endswith(".txt")
    # the old names were the host with [^a-z0-9.-] made "_": these two shared one file
    assert cache_name("a:8080") != cache_name("a_8080")


@pytest.mark.parametrize("host", [
    ".".join(["a" * 63] * 3) + "." + "b" * 61,              # 253 characters: the longest valid host
    ".".join(["a" * 63] * 3) + "." + "b" * 61 + ":65535",
    "x" * 5000, "\u00e9" * 300, "\udcff" * 10,
])
def test_cache_name_stays_short_for_any_host(host: str, tmp_path: Path) -> None:
    # A 253-character host failed every URL as 'internal error' (OSError: File name too long).
    name = cache_name(host)
    assert re.fullmatch(r"[a-z0-9._-]+-[0-9a-f]{16}\.txt", name) and len(name) <= 90
    clock = Clock()
    cache = RobotsCache(tmp_path, clock)
    r, fetched = cache.get(host, CountingFetch(clock, (200, b"User-agent: *\nDisallow: /x\n")))
    assert fetched and (tmp_path / "robots" / name).is_file()
    assert not RobotsCache(tmp_path, clock).known(host).allowed("http://h/x", "spider")


# ============================================================================ RobotsCache


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CountingFetch:
    """A robots.txt fetch function: answers the next (status, body) and counts its calls."""

    def __init__(self, clock: Clock, *answers: tuple[int | None, bytes]) -> None:
        self.clock = clock
        self.answers = list(answers)
        self.calls = 0

    def __call__(self, previous: Rules | None = None) -> tuple[Rules, str]:
        status, body = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return from_fetch(status, body, self.clock(), previous), "http://example.com/robots.txt"


def test_get_fetches_once_and_writes_the_cache_file(tmp_path: Path) -> None:
    clock = Clock()
    cache = RobotsCache(tmp_path, clock)
    fetch = CountingFetch(clock, (200, b"User-agent: *\nDisallow: /private/\n"))
    assert cache.known("example.com") is None
    r, fetched = cache.get("example.com", fetch)
    assert fetched and fetch.calls == 1
    assert not r.allowed(url("/private/x"), "spider")
    path = tmp_path / "robots" / cache_name("example.com")
    text = path.read_text(encoding="utf-8")
    assert "url: http://example.com/robots.txt\n" in text
    assert "status: 200\n" in text and "mode: rules\n" in text
    assert text.endswith("\n\nUser-agent: *\nDisallow: /private/\n")
    r2, fetched2 = cache.get("example.com", fetch)           # the same worker: from memory
    assert not fetched2 and fetch.calls == 1
    assert r2.body == r.body


def test_a_second_worker_reads_the_file_without_fetching(tmp_path: Path) -> None:
    clock = Clock()
    first = CountingFetch(clock, (200, b"User-agent: *\nDisallow: /x/\nCrawl-delay: 4\n"))
    RobotsCache(tmp_path, clock).get("example.com", first)
    other = CountingFetch(clock, (200, b"User-agent: *\nAllow: /\n"))
    cache2 = RobotsCache(tmp_path, clock)                     # another process, same project folder
    assert cache2.known("example.com") is not None
    r, fetched = cache2.get("example.com", other)
    assert not fetched and other.calls == 0
    assert not r.allowed(url("/x/page"), "spider")
    assert r.crawl_delay("spider") == 4.0


def test_hosts_are_cached_separately(tmp_path: Path) -> None:
    clock = Clock()
    cache = RobotsCache(tmp_path, clock)
    a = CountingFetch(clock, (200, b"User-agent: *\nDisallow: /\n"))
    b = CountingFetch(clock, (404, b""))
    cache.get("a.example", a)
    cache.get("b.example:8080", b)
    assert a.calls == b.calls == 1
    assert not cache.known("a.example").allowed("http://a.example/x", "spider")
    assert cache.known("b.example:8080").allowed("http://b.example:8080/x", "spider")
    assert sorted(p.name for p in (tmp_path / "robots").glob("*.txt")) == sorted(
        [cache_name("a.example"), cache_name("b.example:8080")])


def test_rules_older_than_24_hours_are_fetched_again(tmp_path: Path) -> None:
    clock = Clock()
    cache = RobotsCache(tmp_path, clock)
    fetch = CountingFetch(clock, (200, b"User-agent: *\nDisallow: /old/\n"),
                          (200, b"User-agent: *\nDisallow: /new/\n"))
    cache.get("example.com", fetch)
    clock.now = T0 + FRESH_FOR - 1
    r, fetched = cache.get("example.com", fetch)
    assert not fetched and fetch.calls == 1
    clock.now = T0 + FRESH_FOR + 1
    assert cache.known("example.com") is None
    assert RobotsCache(tmp_path, clock).known("example.com") is None   # the file is stale too
    r, fetched = cache.get("example.com", fetch)
    assert fetched and fetch.calls == 2
    assert r.allowed(url("/old/x"), "spider") and not r.allowed(url("/new/x"), "spider")
    assert load((tmp_path / "robots" / cache_name("example.com")).read_text()).fetched_at == clock.now
    # another worker now sees the new rules from the file
    assert not RobotsCache(tmp_path, clock).known("example.com").allowed(url("/new/x"), "spider")


def test_disallow_all_is_fetched_again_after_5_minutes(tmp_path: Path) -> None:
    clock = Clock()
    cache = RobotsCache(tmp_path, clock)
    fetch = CountingFetch(clock, (503, b""), (200, b"User-agent: *\nDisallow: /x/\n"))
    r, fetched = cache.get("example.com", fetch)
    assert fetched and r.mode == "disallow-all"
    clock.now = T0 + 299
    r, fetched = cache.get("example.com", fetch)
    assert not fetched and r.mode == "disallow-all" and fetch.calls == 1
    assert RobotsCache(tmp_path, clock).known("example.com").mode == "disallow-all"
    clock.now = T0 + 301
    r, fetched = cache.get("example.com", fetch)
    assert fetched and fetch.calls == 2
    assert r.mode == "rules" and r.allowed(url("/"), "spider")


def test_a_broken_cache_file_is_fetched_again(tmp_path: Path) -> None:
    clock = Clock()
    (tmp_path / "robots").mkdir()
    (tmp_path / "robots" / cache_name("example.com")).write_text("this is not a cache file\n")
    cache = RobotsCache(tmp_path, clock)
    assert cache.known("example.com") is None
    fetch = CountingFetch(clock, (404, b""))
    r, fetched = cache.get("example.com", fetch)
    assert fetched and r.mode == "allow-all" and fetch.calls == 1
    assert load((tmp_path / "robots" / cache_name("example.com")).read_text()).mode == "allow-all"


def test_a_worker_that_just_missed_the_file_still_does_not_fetch_again(tmp_path: Path) -> None:
    """Worker B looks (no file yet), worker A fetches and writes it, B asks at the same instant:
    B must read A's file rather than fetch robots.txt a second time."""
    clock = Clock()
    a, b = RobotsCache(tmp_path, clock), RobotsCache(tmp_path, clock)
    assert b.known("example.com") is None
    fetch_a = CountingFetch(clock, (200, b"User-agent: *\nDisallow: /a/\n"))
    a.get("example.com", fetch_a)
    fetch_b = CountingFetch(clock, (200, b"User-agent: *\nDisallow: /b/\n"))
    r, fetched = b.get("example.com", fetch_b)
    assert not fetched and fetch_b.calls == 0
    assert not r.allowed(url("/a/x"), "spider") and r.allowed(url("/b/x"), "spider")
    clock.now += 2
    assert b.known("example.com") is not None                 # and a plain look finds it a moment later


@pytest.mark.parametrize("fetched_at", ["nan", "inf", "-inf", "-5", "1e300", "T0+7200", "abc", ""])
@pytest.mark.parametrize("mode", ["rules", "allow-all", "disallow-all"])
def test_a_cache_file_with_a_nonsense_fetch_time_is_fetched_again(tmp_path: Path, fetched_at: str, mode: str) -> None:
    # fetched_at: nan in a disallow-all file made the host's retry time nan: every URL of the
    # host was claimed and released again at full speed, for ever, with no request sent.
    clock = Clock()
    when = str(T0 + 7200) if fetched_at == "T0+7200" else fetched_at   # two hours in the future
    folder = tmp_path / "robots"
    folder.mkdir()
    text = dump(Rules(503, T0, "", mode), "http://example.com/robots.txt")
    (folder / cache_name("example.com")).write_text(text.replace(f"fetched_at: {T0:.3f}", f"fetched_at: {when}"))
    cache = RobotsCache(tmp_path, clock)
    assert cache.known("example.com") is None
    fetch = CountingFetch(clock, (200, b"User-agent: *\nDisallow: /x\n"))
    r, fetched = cache.get("example.com", fetch)
    assert fetched and fetch.calls == 1 and r.mode == "rules" and r.fresh_until == T0 + FRESH_FOR
    assert load((folder / cache_name("example.com")).read_text()).fetched_at == T0


@pytest.mark.parametrize("edit", [
    ("status: 503", "status: 12345"), ("status: 503", "status: x"), ("attempts: 1", "attempts: 0"),
    ("attempts: 1", "attempts: many"), ("mode: disallow-all", "mode: "),
])
def test_any_garbage_in_a_cache_file_means_not_cached(tmp_path: Path, edit: tuple[str, str]) -> None:
    clock = Clock()
    folder = tmp_path / "robots"
    folder.mkdir()
    text = dump(Rules(503, T0, "", "disallow-all"), "http://example.com/robots.txt")
    assert edit[0] in text
    (folder / cache_name("example.com")).write_text(text.replace(edit[0], edit[1]))
    assert RobotsCache(tmp_path, clock).known("example.com") is None
    with pytest.raises((ValueError, KeyError)):
        load(text.replace(edit[0], edit[1]))


def test_a_cache_file_written_a_moment_ahead_is_believed(tmp_path: Path) -> None:
    """Another worker's clock a few seconds ahead is not garbage (the limit is a minute)."""
    clock = Clock()
    RobotsCache(tmp_path, Clock(T0 + 5)).get("example.com", CountingFetch(clock, (404, b"")))
    assert RobotsCache(tmp_path, clock).known("example.com") is not None


# ============================================================================ answers equal Protego's


def _robots_of(rng: random.Random, n: int) -> str:
    pieces = ["a", "b", "ab", "/", ".html", "%2F", "x=1", "?", "=", "$", "*", "%", "\u00e9", "index.html"]
    lines = []
    for group in ("*", "spider", "other"):
        lines.append(f"User-agent: {group}")
        for _ in range(n):
            pattern = rng.choice(["/", "/", "*", ""]) + "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 5)))
            lines.append(f"{rng.choice(['Allow', 'Disallow'])}: {pattern}")
        lines.append("")
    return "\n".join(lines)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), paths=st.lists(st.lists(
    st.sampled_from(list("ab/.?=x1%*$\u00e9") + ["html", "index.html", "%2F", "%61"]), max_size=12).map("".join),
    min_size=1, max_size=30))
def test_answers_are_protegos_on_random_rules_and_paths(seed: int, paths: list[str]) -> None:
    rng = random.Random(seed)
    text = _robots_of(rng, rng.randrange(1, 40))
    rules = from_fetch(200, text.encode(), T0)
    reference = Protego.parse(text)
    for agent in ("spider", "otherbot", "nobody"):
        for path in paths + ["", "/", "/robots.txt"]:
            u = url("/" + path.lstrip("/")) if path else url("")
            assert rules.allowed(u, agent) == reference.can_fetch(u, agent), (text, u, agent)
            assert rules.allowed(u, agent) == reference.can_fetch(u, agent)   # the kept answer too


def test_answers_are_protegos_on_a_big_wildcard_file() -> None:
    """The issue's case: thousands of wildcard rules (Protego took ~20 ms per URL here)."""
    lines = ["User-agent: *"] + [f"Disallow: /*/p{i}*x$" if i % 2 else f"Allow: /a{i}/*.html" for i in range(4000)]
    text = "\n".join(lines) + "\n"
    assert len(text) > BIG   # big enough for the answers to be kept
    rules, reference = from_fetch(200, text.encode(), T0), Protego.parse(text)
    rng = random.Random(7)
    urls = [url(f"/{rng.choice('ax')}{rng.randrange(4000)}/p{rng.randrange(4000)}/{rng.choice(['x', 'y.html', 'p.htmlx'])}")
            for _ in range(300)]
    for u in urls + urls:   # the second time, the kept answers
        assert rules.allowed(u, "spider") == reference.can_fetch(u, "spider"), u
    assert {rules.allowed(u, "spider") for u in urls} == {True, False}


_CONTROL_PIECES = ["\x1b[31m", "\x07", "\x00", "\x7f", "\x9b", "\u202e", "\r", "\r\n", "\x0b", "\x0c", "\x85",
                   "\u2028", "\x1c", "\t", " ", "/", "a", "*", "$", "#", "\n", "Disallow: ", "Allow: ",
                   "User-agent: *\n", "User-agent: spider\n", "%1B", "%"]


@settings(max_examples=150, deadline=None)
@given(body=st.lists(st.sampled_from(_CONTROL_PIECES), max_size=40).map("".join),
       paths=st.lists(st.lists(st.sampled_from(["a", "/", "%1B", "\x1b", "%07", "\u202e", "%E2%80%AE", "x"]),
                               max_size=6).map("".join), min_size=1, max_size=10))
def test_a_body_with_control_characters_is_kept_without_them_and_means_the_same(body: str, paths: list[str]) -> None:
    # robots/*.txt held the body as received: ESC and BEL went to the terminal of whoever ran cat.
    rules = from_fetch(200, body.encode("utf-8"), T0)
    back = load(dump(rules, "http://example.com/robots.txt"))
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e]", back.body)
    reference = Protego.parse(body)
    for path in paths:
        u = url("/" + path)
        assert rules.allowed(u, "spider") == back.allowed(u, "spider") == reference.can_fetch(u, "spider"), (body, u)


def test_a_body_of_control_characters_is_read_back_by_another_worker(tmp_path: Path) -> None:
    """Escaped, the body can be three times its 500 KiB: still a cache file, not garbage."""
    clock = Clock()
    body = b"User-agent: *\nDisallow: /x\n" + "\u202e".encode() * (MAX_BODY // 3)
    r, fetched = RobotsCache(tmp_path, clock).get("example.com", CountingFetch(clock, (200, body)))
    assert fetched and len(r.body) > 2 * MAX_BODY
    other = RobotsCache(tmp_path, clock).known("example.com")
    assert other is not None and other.body == r.body and not other.allowed(url("/x"), "spider")
