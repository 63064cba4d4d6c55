"""What spider writes, and what it makes of odd responses and its own cache files (issue 13).

- robots/ cache files with a nonsense fetch time, hosts too long for the old cache file names;
- control characters from a server (titles, Content-Type, reasons) in every file we write, and
  formula injection into the CSV export;
- interim ``1xx`` responses (``103 Early Hints``) before the real one, and a NUL in Content-Type.

Real crawls: ``python main.py crawl ...`` subprocesses against loopback servers, through the
helpers of ``tests/test_hostile.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sitekit import TestSite
from spider.robots import Rules, cache_name, dump, load
from test_hostile import assert_state_files_parse, cli, crawl, page_hits, rows, urls_in

LONG_HOST = ".".join(["a" * 63] * 3) + "." + "b" * 61     # 253 characters: the longest valid name


def _robots(site: TestSite, text: str = "User-agent: *\nAllow: /\n") -> None:
    site.route("/robots.txt", body=text, content_type="text/plain")


# =========================================================================== robots/ cache files


@pytest.mark.parametrize("fetched_at", ["nan", "inf", "1e12", "-1"])
def test_a_robots_cache_file_with_a_nonsense_fetch_time_is_fetched_again(
        projects_dir: Path, site: TestSite, fetched_at: str) -> None:
    # Before: 'fetched_at: nan' in a disallow-all file made the host's retry time nan, and every
    # URL of the host was claimed and released at full CPU for ever (queue.txt grew to 40k
    # lines and claims.txt to 120k in 30 s) without a request; 1e12 held the host until 33658.
    site.route("/", body='<a href="/a">a</a>')
    site.route("/a", body="a")
    _robots(site)
    crawl(projects_dir, "p", site.url("/"), "--max-pages", "1")
    cached = projects_dir / "p" / "robots" / cache_name(f"{site.host}:{site.port}")
    rules = load(cached.read_text())
    cached.write_text(dump(Rules(503, rules.fetched_at, "", "disallow-all"), site.url("/robots.txt"))
                      .replace(f"fetched_at: {rules.fetched_at:.3f}", f"fetched_at: {fetched_at}"))
    result = crawl(projects_dir, "p", "--max-pages", "10", timeout=20)
    assert "done: crawled 2" in result.stderr, result.stderr[-2000:]
    assert site.hits["/robots.txt"] == 2 and page_hits(site) == {"/": 1, "/a": 1}
    assert load(cached.read_text()).mode == "rules"
    assert_state_files_parse(projects_dir / "p")


def test_a_host_of_253_characters_is_crawled(projects_dir: Path, site: TestSite,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: its robots cache file name was longer than 255 bytes, and every URL of the host
    # was failed as 'internal error: OSError' (File name too long). The host cannot resolve
    # here, so the test site serves it as an HTTP proxy.
    site.route("/", body='<a href="/a">a</a>')
    site.route("/a", body="a")
    _robots(site, "User-agent: *\nDisallow: /a\n")
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.setenv("http_proxy", site.url("/"))
    seed = f"http://{LONG_HOST}/"
    crawl(projects_dir, "long", seed)
    folder = projects_dir / "long"
    assert urls_in(folder / "crawled.txt") == [seed]
    assert [r[:2] for r in rows(folder / "rejected.txt")] == [[seed + "a", "robots"]]
    assert not (folder / "failed.txt").exists() or urls_in(folder / "failed.txt") == []
    assert not (folder / "errors.log").exists()
    assert [r.target for r in site.requests] == [f"http://{LONG_HOST}/robots.txt", seed]
    assert (folder / "robots" / cache_name(LONG_HOST)).is_file()


# =========================================================================== interim responses


def _early_hints(*interim: bytes, body: bytes = b'<html><a href="/b">b</a></html>'):  # type: ignore[no-untyped-def]
    """A raw handler: the interim responses given, then a 200 HTML page."""
    def handler(req, info) -> None:  # type: ignore[no-untyped-def]
        req.wfile.write(b"".join(interim) + b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                        + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return handler


EARLY_HINTS = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"


@pytest.mark.parametrize("interim", [
    [EARLY_HINTS],
    [EARLY_HINTS, EARLY_HINTS, b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 102 Processing\r\n\r\n"],
], ids=["103", "several"])
def test_interim_responses_are_skipped_and_the_final_one_used(projects_dir: Path, site: TestSite,
                                                              interim: list[bytes]) -> None:
    # Before: http.client skips only '100 Continue', so the page was failed as '103', and the real
    # 200 stayed unread on the kept-alive connection for the next request to find.
    site.route("/", raw=_early_hints(*interim))
    site.route("/b", body="<html>b</html>")
    crawl(projects_dir, "p", site.url("/"), "--ignore-robots")
    folder = projects_dir / "p"
    assert {r[0]: r[1:3] for r in rows(folder / "crawled.txt")} == {
        site.url("/"): ["200", "text/html"], site.url("/b"): ["200", "text/html"]}
    assert not (folder / "failed.txt").exists() or urls_in(folder / "failed.txt") == []
    assert page_hits(site) == {"/": 1, "/b": 1}
    assert_state_files_parse(folder)


def test_endless_interim_responses_fail_as_an_invalid_response(projects_dir: Path, site: TestSite) -> None:
    site.route("/", raw=_early_hints(*[EARLY_HINTS] * 1000))
    crawl(projects_dir, "p", site.url("/"), "--ignore-robots", "--max-attempts", "1")
    assert [r[:2] for r in rows(projects_dir / "p" / "failed.txt")] == [[site.url("/"), "invalid response"]]


# =========================================================================== what we write

# What a terminal acts on or that reorders what it shows: none of it may reach a file we write.
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
EVIL_TITLE = "=HYPERLINK(\"http://evil/\")\x1b[2J\x1b]0;pwned\x07\x9b31m\u2028\u202eevil\x7f"


def _hostile_site(site: TestSite) -> None:
    site.route("/", body=f"<html><head><title>{EVIL_TITLE}</title></head><body>"
                         '<a href="/ct">ct</a> <a href="/plus">p</a> <a href="/go">go</a> <a href="/nul">n</a></body></html>')
    site.route("/plus", body="<html><head><title>+1 @me -x</title></head><body>x</body></html>")
    site.route("/ct", raw=_raw(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\x1b[31m\x07\x1b]0;pwned\x07\r\n"
                               b"Content-Length: 2\r\n\r\nok"))
    site.route("/go", raw=_raw(b"HTTP/1.1 302 Found\r\nLocation: /\x1b[31m\x07\r\nContent-Length: 0\r\n\r\n"))
    site.route("/nul", raw=_raw(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\x00\r\nContent-Length: 36\r\n\r\n"
                                b"<html><a href='/hidden'>h</a></html>"))
    site.route("/hidden", body="<html>h</html>")
    _robots(site, "# \x1b]0;pwned\x07\x1b[2J\u202e\nUser-agent: *\nDisallow: /\x1b[31m\n")


def _raw(data: bytes):  # type: ignore[no-untyped-def]
    def handler(req, info) -> None:  # type: ignore[no-untyped-def]
        req.wfile.write(data)
    return handler


def test_no_control_character_from_a_server_reaches_a_file_or_an_export(projects_dir: Path, site: TestSite) -> None:
    # Before: ESC and BEL of a title and a Content-Type went raw into crawled.txt and the CSV
    # export (`cat crawled.txt` ran the terminal's escape sequences: clear screen, set title),
    # and a title starting with '=' went into the CSV as a formula.
    _hostile_site(site)
    crawl(projects_dir, "p", site.url("/"), "--max-attempts", "1")
    folder = projects_dir / "p"
    crawled = {r[0]: r for r in rows(folder / "crawled.txt")}
    assert site.hits["/robots.txt"] == 1 and (folder / "robots").is_dir()
    assert crawled[site.url("/ct")][2] == "text/plain\\x1b[31m\\x07\\x1b]0"   # cut at the ";"
    assert crawled[site.url("/go")][:2] == [site.url("/go"), "302"]   # its target percent-encoded
    title = crawled[site.url("/")][10]
    assert title.startswith("=HYPERLINK(") and "\\x1b[2J" in title and "\\x9b31m" in title and "\\u202e" in title
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix in (".txt", ".log"):
            text = path.read_bytes().decode("utf-8")
            assert not RAW_CONTROLS.search(text), (path.name, RAW_CONTROLS.search(text))
    for fmt in ("csv", "jsonl"):
        result = cli(projects_dir, "export", "p", "--format", fmt)
        assert result.returncode == 0, result.stderr
        assert not RAW_CONTROLS.search(result.stdout), (fmt, RAW_CONTROLS.search(result.stdout))
    import csv
    import io
    table = {r["url"]: r for r in csv.DictReader(io.StringIO(cli(projects_dir, "export", "p", "--format", "csv").stdout))}
    assert table[site.url("/")]["title"] == "'" + title
    assert table[site.url("/plus")]["title"] == "'+1 @me -x"
    assert table[site.url("/ct")]["title"] == ""


def test_a_nul_in_content_type_is_recorded_as_sent_and_not_parsed(projects_dir: Path, site: TestSite) -> None:
    # Before: `text/html\0` was recorded as `text/html` (the record dropped the NUL) while the
    # parser, seeing `text/html\0`, did not parse it: the file said HTML, its links were missing.
    # Now one function (fetch.parse_content_type) gives the type both use: `text/html\x00`,
    # which is not HTML (browsers refuse a NUL in a header too).
    _hostile_site(site)
    crawl(projects_dir, "p", site.url("/nul"), "--ignore-robots")
    assert [r[:3] for r in rows(projects_dir / "p" / "crawled.txt")] == [[site.url("/nul"), "200", "text/html\\x00"]]
    assert site.hits["/hidden"] == 0


def test_an_error_message_quoting_a_server_is_escaped_in_errors_log(tmp_path: Path) -> None:
    from spider.config import CrawlConfig
    from spider.frontier.memory import MemoryStore
    from spider.spider import Spider
    store = MemoryStore()
    store.folder = tmp_path  # type: ignore[attr-defined]
    spider = Spider(CrawlConfig(seeds=("http://127.0.0.1:9/",), ignore_robots=True), store)
    try:
        spider._log_error("http://127.0.0.1:9/", ValueError("bad header \x1b[2J\x07 from server\u2028x"))
    finally:
        spider.close()
    [text] = store.logs["errors"]
    assert "bad header \\x1b[2J\\x07 from server x" in text and not RAW_CONTROLS.search(text)


def test_the_doctests_of_what_we_write() -> None:
    import doctest

    import spider.export
    import spider.fetch
    import spider.records
    for module in (spider.records, spider.fetch, spider.export):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


# =========================================================================== a big robots.txt


def test_a_crawl_under_a_big_wildcard_robots_txt_obeys_it_as_protego_does(projects_dir: Path, site: TestSite) -> None:
    """The rules are indexed for speed (robots._Matcher); what a crawl refuses is still exactly
    what Protego says (a 500 KiB file of 24k such rules took Protego ~20 ms per link)."""
    import random

    from protego import Protego
    rng = random.Random(3)
    text = "User-agent: *\n" + "".join(f"Disallow: /*/p{i}*x$\n" if i % 2 else f"Allow: /a{i}/*.html\n"
                                       for i in range(4000)) + "Disallow: /\nAllow: /$\n"
    paths = sorted({f"/{rng.choice('ax')}{rng.randrange(4000)}/p{rng.randrange(4000)}/{rng.choice(['x', 'y.html'])}"
                    for _ in range(150)})
    _robots(site, text)
    site.route("/", body="<html>" + "".join(f'<a href="{p}">l</a>' for p in paths) + "</html>")
    for p in paths:
        site.route(p, body="<html>leaf</html>")
    crawl(projects_dir, "big", site.url("/"), "--max-depth", "1", timeout=60)
    reference = Protego.parse(text)
    refused = {r[0] for r in rows(projects_dir / "big" / "rejected.txt") if r[1] == "robots"}
    assert refused == {site.url(p) for p in paths if not reference.can_fetch(site.url(p), "spider")}
    assert 0 < len(refused) < len(paths)
    assert set(page_hits(site)) == {"/"} | {p for p in paths if site.url(p) not in refused}
