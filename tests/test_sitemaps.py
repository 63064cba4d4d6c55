"""Sitemaps: the pure parser (tables of inputs, hostile ones included) and the seeding procedure
end to end against loopback sites (robots.txt Sitemap: lines, nested indexes, gzip, orphan pages,
fallback, recursion, limits, refusals with their reasons and sources, politeness)."""

from __future__ import annotations

import gzip
import time
import tracemalloc
from pathlib import Path

import pytest

from conftest import FakeClock
from sitekit import TestSite, _gzip_bomb_parts
from spider.config import CrawlConfig
from spider.fetch import Fetcher
from spider.frontier.memory import MemoryStore
from spider.records import QueueEntry, is_data
from spider.sitemaps import (Entry, Limits, SeedReport, entry_verdict, origin, parse_sitemap,
                             root_sitemaps, seed_from_sitemaps)
from spider.robots import from_fetch
from spider.scope import Admission
from spider.frontier.files import FileStore

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*entries: str | tuple[str, str], ns: str = NS) -> bytes:
    rows = []
    for e in entries:
        loc, lastmod = (e, None) if isinstance(e, str) else e
        rows.append(f"<url><loc>{loc}</loc>{f'<lastmod>{lastmod}</lastmod>' if lastmod else ''}</url>")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {ns}>\n{"".join(rows)}\n</urlset>\n'.encode()


def index(*locs: str, ns: str = NS) -> bytes:
    rows = "".join(f"<sitemap><loc>{loc}</loc><lastmod>2024-05-01</lastmod></sitemap>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex {ns}>{rows}</sitemapindex>'.encode()


# ================================================================================= the parser


@pytest.mark.parametrize("body, kind, entries", [
    (urlset(("http://a.example/1", "2024-01-02"), " http://a.example/2 "), "urlset",
     [Entry("http://a.example/1", "2024-01-02"), Entry("http://a.example/2", None)]),
    (urlset("http://a.example/1", ns=""), "urlset", [Entry("http://a.example/1")]),           # no xmlns
    (urlset("http://a.example/1", ns='xmlns="urn:other"'), "urlset", [Entry("http://a.example/1")]),
    (index("http://a.example/s1.xml", "http://a.example/s2.xml.gz"), "sitemapindex",
     [Entry("http://a.example/s1.xml", "2024-05-01"), Entry("http://a.example/s2.xml.gz", "2024-05-01")]),
    (index("http://a.example/s1.xml", ns=""), "sitemapindex", [Entry("http://a.example/s1.xml", "2024-05-01")]),
    (gzip.compress(urlset("http://a.example/z")), "urlset", [Entry("http://a.example/z")]),
    (b"\xef\xbb\xbf" + urlset("http://a.example/bom"), "urlset", [Entry("http://a.example/bom")]),
    (b"http://a.example/1\r\nhttps://a.example/2\n\n   http://a.example/3  \n", "text",
     [Entry("http://a.example/1"), Entry("https://a.example/2"), Entry("http://a.example/3")]),
    (gzip.compress(b"http://a.example/t\n"), "text", [Entry("http://a.example/t")]),
    # entries without <loc> and empty locs are skipped; extension elements are not entries
    (f'<urlset {NS} xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
     '<url><lastmod>2024-01-01</lastmod></url><url><loc>  </loc></url>'
     '<url><loc>http://a.example/p</loc><image:image><image:loc>http://img.example/i.png</image:loc>'
     '</image:image></url></urlset>'.encode(), "urlset", [Entry("http://a.example/p")]),
    # CDATA, escaped and bare ampersands all give the same URL
    (f'<urlset {NS}><url><loc><![CDATA[http://a.example/?a=1&b=2]]></loc></url>'
     '<url><loc>http://a.example/?c=1&amp;d=2</loc></url>'
     '<url><loc>http://a.example/?e=1&f=2</loc></url></urlset>'.encode(), "urlset",
     [Entry("http://a.example/?a=1&b=2"), Entry("http://a.example/?c=1&d=2"), Entry("http://a.example/?e=1&f=2")]),
])
def test_parse_table(body: bytes, kind: str, entries: list[Entry]) -> None:
    sm = parse_sitemap(body)
    assert sm.kind == kind
    assert sm.entries == entries


@pytest.mark.parametrize("body, problem", [
    (b"", "empty file"),
    (b"   \n\t", "empty file"),
    (b"<!DOCTYPE html><html><body>Not found</body></html>", "HTML page"),
    (b'<html xmlns="http://www.w3.org/1999/xhtml"><body/></html>', "HTML page"),
    (b"<rss version='2.0'><channel/></rss>", "root element <rss>"),
    (b"this is not a sitemap\nat all\n", "none an http(s) URL"),
    (b"\x1f\x8b\x08\x00garbage-not-deflate", "bad gzip data"),
])
def test_not_sitemaps_are_reported_not_raised(body: bytes, problem: str) -> None:
    sm = parse_sitemap(body)
    assert sm.kind == "unknown" and sm.entries == []
    assert any(problem in p for p in sm.problems), sm.problems


@pytest.mark.parametrize("body, locs", [
    (f'<urlset {NS}><url><loc>http://a.example/1</loc></url><url><loc>http://a.example/2', ["1", "2"]),
    (f'<urlset {NS}><url><loc>http://a.example/1</loc></url><url><loc>http://a.example/2</loc>', ["1", "2"]),
    (f'<urlset {NS}><url><loc>http://a.example/1</loc></url></urlset><junk>', ["1"]),
    (f'<urlset {NS}><url><loc>http://a.example/1</loc></url><url><loc>http://a.example/2</loc><junk <<< ', ["1"]),
])
def test_broken_xml_is_recovered_up_to_the_break_and_reported(body: str, locs: list[str]) -> None:
    sm = parse_sitemap(body.encode())
    assert sm.kind == "urlset"
    assert [e.loc for e in sm.entries][:len(locs)] == [f"http://a.example/{n}" for n in locs]
    assert any("XML ends early or is malformed" in p for p in sm.problems)


def test_a_well_formed_file_has_no_problems_even_with_trailing_comments() -> None:
    body = urlset("http://a.example/1") + b"<!-- XML Sitemap generated by a plugin -->\n<?pi x?>\n"
    sm = parse_sitemap(body)
    assert sm.entries == [Entry("http://a.example/1")] and sm.problems == []
    prefixed = (b'<s:urlset xmlns:s="http://www.sitemaps.org/schemas/sitemap/0.9"><s:url>'
                b'<s:loc>http://a.example/1</s:loc></s:url></s:urlset >')
    assert parse_sitemap(prefixed) == parse_sitemap(urlset("http://a.example/1"))


def test_bare_ampersands_are_counted_as_a_problem() -> None:
    sm = parse_sitemap(urlset("http://a.example/?a=1&b=2"))
    assert sm.entries == [Entry("http://a.example/?a=1&b=2")]
    assert any("unescaped '&'" in p for p in sm.problems)


def test_ampersand_fix_does_not_depend_on_slice_boundaries() -> None:
    from spider.sitemaps import _escape_bare_ampersands
    data = (b'<a>x&y &amp; &#38; <![CDATA[a&b]]> & end&' + b'&lt;&#x26; &bad &' * 5
            + b'<![CDATA[ & ]]]]><![CDATA[&]]>&')
    results = set()
    for size in list(range(1, 40)) + [10_000]:
        fixed = [0]
        out = b"".join(_escape_bare_ampersands([data[i:i + size] for i in range(0, len(data), size)], fixed))
        results.add((out, fixed[0]))
    assert len(results) == 1
    out, n = results.pop()
    assert b"<![CDATA[a&b]]>" in out and b"&amp;amp;" not in out and n == 14


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<urlset><url><loc>http://a.example/&lol9;</loc></url><url><loc>http://a.example/ok</loc></url></urlset>"""


def test_entity_expansion_is_not_done() -> None:
    start = time.monotonic()
    sm = parse_sitemap(BILLION_LAUGHS)
    assert time.monotonic() - start < 2
    assert all("lollol" not in e.loc and len(e.loc) < 100 for e in sm.entries)


def test_external_entities_and_dtds_are_not_fetched_or_read(site: TestSite, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    site.route("/evil.dtd", body='<!ENTITY x "EVIL">', content_type="application/xml-dtd")
    body = (f'<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "{site.url("/evil.dtd")}" ['
            f'<!ENTITY file SYSTEM "file://{secret}"><!ENTITY net SYSTEM "{site.url("/net")}">]>'
            '<urlset><url><loc>http://a.example/&file;&net;&x;</loc></url></urlset>').encode()
    sm = parse_sitemap(body)
    assert all("SECRET" not in e.loc and "EVIL" not in e.loc for e in sm.entries)
    assert site.hits == {}


def test_gzip_bomb_stops_at_the_cap_without_holding_it() -> None:
    _, chunks = _gzip_bomb_parts(1 << 30)   # 1 GiB of zeros in about 1 MB
    bomb = b"".join(chunks())
    tracemalloc.start()
    try:
        start = time.monotonic()
        sm = parse_sitemap(bomb, max_bytes=50 * 1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 10
    assert any("over 52428800 bytes decompressed" in p for p in sm.problems)
    assert peak < 20 * 1024 * 1024, "the decompressed body must be streamed, not held"


def test_a_gzipped_xml_over_the_cap_keeps_what_came_before_it() -> None:
    body = gzip.compress(urlset(*[f"http://a.example/{i}" for i in range(20_000)]))
    sm = parse_sitemap(body, max_bytes=100_000)
    assert 1000 < len(sm.entries) < 20_000
    assert any("over 100000 bytes decompressed" in p for p in sm.problems)


def test_url_limit_per_file_reports_the_excess() -> None:
    sm = parse_sitemap(urlset(*[f"http://a.example/{i}" for i in range(120)]), max_urls=100)
    assert len(sm.entries) == 100 and sm.entries[-1].loc == "http://a.example/99"
    assert any("20 entries beyond the first 100" in p for p in sm.problems)
    text = "".join(f"http://a.example/{i}\n" for i in range(105)).encode()
    sm = parse_sitemap(text, max_urls=100)
    assert len(sm.entries) == 100 and any("5 URLs beyond the first 100" in p for p in sm.problems)


def test_default_url_limit_is_the_protocols_50000() -> None:
    sm = parse_sitemap("".join(f"http://a.example/{i}\n" for i in range(50_003)).encode())
    assert len(sm.entries) == 50_000
    assert any("3 URLs beyond the first 50000" in p for p in sm.problems)


# ================================================================================= small policies


def test_root_sitemaps_from_robots_or_the_fallback() -> None:
    rules = from_fetch(200, b"User-agent: *\nDisallow:\nSitemap: /rel.xml\nSitemap: http://x.example/a.xml\n"
                       b"sitemap: http://x.example/a.xml\n", 0.0)
    assert root_sitemaps("http://x.example/", rules) == ["http://x.example/rel.xml", "http://x.example/a.xml"]
    assert root_sitemaps("http://x.example/", from_fetch(404, b"", 0.0)) == ["http://x.example/sitemap.xml"]
    assert root_sitemaps("http://x.example/", None) == ["http://x.example/sitemap.xml"]
    assert origin("HTTP://X.example:80/a/b?c") == "http://x.example/"


def test_entry_verdict_is_link_admission_at_depth_0() -> None:
    adm = Admission(CrawlConfig(seeds=("http://x.example/",), max_depth=0, deny=("/denied/",)))
    rules = from_fetch(200, b"User-agent: *\nDisallow: /private/\n", 0.0)
    assert entry_verdict("http://X.example/a?utm_source=s", adm, lambda u: rules, "spider") == ("http://x.example/a", None)
    assert entry_verdict("http://other.example/", adm, lambda u: rules, "spider")[1] == "scope"
    assert entry_verdict("http://x.example/denied/1", adm, lambda u: rules, "spider")[1] == "deny"
    assert entry_verdict("http://x.example/private/1", adm, lambda u: rules, "spider")[1] == "robots"
    assert entry_verdict("http://x.example/private/1", adm, lambda u: None, "spider")[1] is None
    assert entry_verdict("ftp://x.example/f", adm, lambda u: None, "spider") == ("ftp://x.example/f", "not http")
    assert entry_verdict("/relative", adm, lambda u: None, "spider")[1] == "invalid url"
    long = "http://x.example/" + "a" * 10_000
    url, reason = entry_verdict(long, adm, lambda u: None, "spider")
    assert reason == "url too long" and len(url) < 300


# ================================================================================= seeding end to end


def config_for(site: TestSite, **kw: object) -> CrawlConfig:
    kw.setdefault("delay", 0.0)
    return CrawlConfig(seeds=(site.url("/"),), **kw)  # type: ignore[arg-type]


def seed(folder: Path, config: CrawlConfig, **kw: object) -> tuple[SeedReport, FileStore, list[str]]:
    store = FileStore(folder).open()
    lines: list[str] = []
    fetcher = Fetcher(config)
    try:
        report = seed_from_sitemaps(store, config, fetcher, log=lines.append, **kw)  # type: ignore[arg-type]
    finally:
        fetcher.close()
    return report, store, lines


def data_lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.rstrip("\n").split("\t") for line in path.read_text().splitlines() if is_data(line)]


def queued(store: FileStore) -> dict[str, tuple[int, str]]:
    return {e.url: (e.depth, e.source) for e in store.pending_entries()}


def build_site(site: TestSite) -> dict[str, str]:
    """robots.txt -> index (depth 1) -> nested index (depth 2) -> gzip urlset (depth 3), plus a
    transport-gzipped urlset, a gzip file urlset and a plain-text sitemap; orphan pages only
    reachable through them; hostile entries mixed in. Returns the sitemap URLs by name."""
    u = site.url
    sm = {"index": u("/sitemap_index.xml"), "nested": u("/maps/nested-index.xml"),
          "deep": u("/maps/deep.xml.gz"), "pages": u("/maps/pages.xml.gz"),
          "news": u("/maps/news.xml"), "text": u("/maps/extra.txt")}
    site.route("/robots.txt", content_type="text/plain", body=(
        "User-agent: *\nDisallow: /private/\n\n"
        f"Sitemap: {sm['index']}\nSitemap: /maps/extra.txt\n"))
    site.route("/", body='<a href="/orphan/none">home</a>')
    site.route("/sitemap_index.xml", content_type="application/xml",
               body=index(sm["nested"], sm["pages"], sm["news"]))
    site.route("/maps/nested-index.xml", content_type="text/xml", body=index(sm["deep"]))
    site.route("/maps/deep.xml.gz", content_type="application/x-gzip", body=gzip.compress(urlset(
        (u("/orphan/deep-1.html"), "2024-03-01T10:00:00+00:00"), u("/orphan/deep-2.html"))))
    site.route("/maps/pages.xml.gz", content_type="application/gzip", body=gzip.compress(urlset(
        (u("/orphan/1.html"), "2024-01-01"), (u("/orphan/2.html?utm_source=map"), "2024-01-02"),
        u("/"),                                                  # already known (the seed)
        ("http://elsewhere.example/x.html", "2024-01-03"),       # off scope
        u("/private/secret.html"),                               # robots.txt disallows
        "ftp://files.example/x.zip",                             # not http
        u("/orphan/1.html"))))                                   # listed twice
    site.route("/maps/news.xml", content_type="application/xml", headers={"Content-Encoding": "gzip"},
               body=gzip.compress(urlset((u("/orphan/news.html"), "2024-06-30"))))
    site.route("/maps/extra.txt", content_type="text/plain",
               body=f"{u('/orphan/text-1.html')}\n{u('/orphan/text-2.html')}\n")
    return sm


def test_seeding_end_to_end(site: TestSite, tmp_path: Path) -> None:
    sm = build_site(site)
    u = site.url
    config = config_for(site)
    store = FileStore(tmp_path).open()
    store.add([QueueEntry(u("/"))])   # the seed, as a crawl queues it first
    lines: list[str] = []
    report = seed_from_sitemaps(store, config, Fetcher(config), log=lines.append)

    q = queued(store)
    expected = {
        u("/orphan/deep-1.html"): (0, sm["deep"]), u("/orphan/deep-2.html"): (0, sm["deep"]),
        u("/orphan/1.html"): (0, sm["pages"]), u("/orphan/2.html"): (0, sm["pages"]),
        u("/orphan/news.html"): (0, sm["news"]),
        u("/orphan/text-1.html"): (0, sm["text"]), u("/orphan/text-2.html"): (0, sm["text"]),
    }
    assert {k: v for k, v in q.items() if k != u("/")} == expected
    assert report.sitemaps == 6 and report.queued == 7
    assert report.found == 12 and report.duplicates == 2      # the seed, and /orphan/1.html again
    assert dict(report.refused) == {"scope": 1, "robots": 1, "not http": 1}

    rejected = {r[0]: (r[1], r[2]) for r in data_lines(tmp_path / "rejected.txt")}
    assert rejected == {"http://elsewhere.example/x.html": ("scope", sm["pages"]),
                        u("/private/secret.html"): ("robots", sm["pages"]),
                        "ftp://files.example/x.zip": ("not http", sm["pages"])}

    lastmod = {r[0]: (r[1], r[2]) for r in data_lines(tmp_path / "lastmod.txt")}
    assert lastmod[u("/orphan/deep-1.html")] == ("2024-03-01T10:00:00+00:00", sm["deep"])
    assert lastmod[u("/orphan/deep-2.html")] == ("-", sm["deep"])
    assert lastmod[u("/orphan/2.html")] == ("2024-01-02", sm["pages"])
    assert lastmod[u("/orphan/news.html")] == ("2024-06-30", sm["news"])
    assert lastmod[u("/")] == ("-", sm["pages"])               # known URLs keep their lastmod too
    assert "http://elsewhere.example/x.html" not in lastmod

    # every file once, robots.txt once (then cached in robots/ for the workers)
    hits = site.hits
    assert hits["/robots.txt"] == 1 and (tmp_path / "robots").is_dir()
    for path in ("/sitemap_index.xml", "/maps/nested-index.xml", "/maps/deep.xml.gz", "/maps/pages.xml.gz",
                 "/maps/news.xml", "/maps/extra.txt"):
        assert hits[path] == 1, path
    assert not any(p.startswith("/orphan/") for p in hits), "seeding fetches sitemaps, not pages"
    fetch_log = data_lines(tmp_path / "fetch.log")
    assert len(fetch_log) == 7 and {r[2] for r in fetch_log} == {"200"}
    assert report.problems == [] and lines == []
    assert "7 queued" in report.line()

    # a second seeding adds nothing new and appends lastmods again (the last line wins)
    again = seed_from_sitemaps(store, config, Fetcher(config), log=lines.append)
    assert again.queued == 0 and again.duplicates == 9


def test_fallback_to_sitemap_xml_and_redirects(site: TestSite, tmp_path: Path) -> None:
    u = site.url
    site.add_redirect("/sitemap.xml", "/real-sitemap.xml")           # no robots.txt at all (404)
    site.route("/real-sitemap.xml", content_type="application/xml", body=urlset(u("/only-in-sitemap")))
    report, store, lines = seed(tmp_path, config_for(site))
    assert queued(store) == {u("/only-in-sitemap"): (0, u("/real-sitemap.xml"))}
    assert site.hits["/robots.txt"] == 1 and site.hits["/sitemap.xml"] == 1
    assert report.sitemaps == 1 and report.problems == []


def test_robots_without_sitemap_lines_falls_back_too(site: TestSite, tmp_path: Path) -> None:
    u = site.url
    site.route("/robots.txt", content_type="text/plain", body="User-agent: *\nDisallow: /no/\n")
    site.route("/sitemap.xml", content_type="application/xml", body=urlset(u("/yes"), u("/no/x")))
    report, store, _ = seed(tmp_path, config_for(site))
    assert set(queued(store)) == {u("/yes")} and dict(report.refused) == {"robots": 1}


def test_missing_sitemap_is_reported(site: TestSite, tmp_path: Path) -> None:
    report, store, lines = seed(tmp_path, config_for(site))
    assert report.sitemaps == 1 and report.queued == 0
    assert [str(p) for p in report.problems] == [f"sitemaps: {site.url('/sitemap.xml')}: HTTP 404"]
    assert lines == [str(p) for p in report.problems]


def test_recursive_indexes_are_read_once_each(site: TestSite, tmp_path: Path) -> None:
    u = site.url
    site.route("/robots.txt", content_type="text/plain",
               body=f"Sitemap: {u('/a.xml')}\nSitemap: {u('/a.xml')}\nSitemap: {u('/self.xml')}\n")
    site.route("/a.xml", content_type="application/xml", body=index(u("/b.xml"), u("/pages.xml")))
    site.route("/b.xml", content_type="application/xml", body=index(u("/a.xml"), u("/pages.xml")))
    site.route("/self.xml", content_type="application/xml", body=index(u("/self.xml")))
    site.route("/pages.xml", content_type="application/xml", body=urlset(u("/p")))
    report, store, lines = seed(tmp_path, config_for(site))
    assert all(site.hits[p] == 1 for p in ("/a.xml", "/b.xml", "/self.xml", "/pages.xml")), site.hits
    assert report.sitemaps == 4 and set(queued(store)) == {u("/p")}
    text = "\n".join(lines)
    assert f"sitemaps: {u('/a.xml')}: listed again in {u('/b.xml')}" in text
    assert f"sitemaps: {u('/self.xml')}: listed again in {u('/self.xml')}" in text


def test_index_nesting_deeper_than_3_is_not_fetched(site: TestSite, tmp_path: Path) -> None:
    u = site.url
    site.route("/robots.txt", content_type="text/plain", body=f"Sitemap: {u('/i1.xml')}\n")
    site.route("/i1.xml", content_type="application/xml", body=index(u("/i2.xml")))
    site.route("/i2.xml", content_type="application/xml", body=index(u("/s3.xml"), u("/i3.xml")))
    site.route("/s3.xml", content_type="application/xml", body=urlset(u("/at-depth-3")))
    site.route("/i3.xml", content_type="application/xml", body=index(u("/s4.xml")))
    site.route("/s4.xml", content_type="application/xml", body=urlset(u("/at-depth-4")))
    report, store, lines = seed(tmp_path, config_for(site))
    assert set(queued(store)) == {u("/at-depth-3")}
    assert site.hits["/s4.xml"] == 0 and site.hits["/i3.xml"] == 1
    assert [str(p) for p in report.problems] == [
        f"sitemaps: {u('/i3.xml')}: an index at depth 3 listing 1 sitemaps: nesting deeper than 3 is not followed"]


def test_file_limit_stops_the_walk(site: TestSite, tmp_path: Path) -> None:
    u = site.url
    site.route("/sitemap.xml", content_type="application/xml", body=index(*[u(f"/s{i}.xml") for i in range(10)]))
    for i in range(10):
        site.route(f"/s{i}.xml", content_type="application/xml", body=urlset(u(f"/p{i}")))
    report, store, lines = seed(tmp_path, config_for(site), limits=Limits(max_files=5))
    assert report.sitemaps == 5 and len(queued(store)) == 4       # the index + 4 urlsets
    assert sum(site.hits[f"/s{i}.xml"] for i in range(10)) == 4
    assert lines == [f"sitemaps: {u('/sitemap.xml')}: 6 of its 10 sitemaps not read: limit of 5 sitemap files"]


def test_file_limit_counts_files_across_indexes(site: TestSite, tmp_path: Path) -> None:
    u = site.url
    site.route("/robots.txt", content_type="text/plain", body=f"Sitemap: {u('/i.xml')}\nSitemap: {u('/j.xml')}\n")
    site.route("/i.xml", content_type="application/xml", body=index(*[u(f"/s{i}.xml") for i in range(3)]))
    site.route("/j.xml", content_type="application/xml", body=index(*[u(f"/t{i}.xml") for i in range(3)]))
    for i in range(3):
        site.route(f"/s{i}.xml", content_type="application/xml", body=urlset(u(f"/p{i}")))
        site.route(f"/t{i}.xml", content_type="application/xml", body=urlset(u(f"/q{i}")))
    report, store, lines = seed(tmp_path, config_for(site), limits=Limits(max_files=4))
    assert report.sitemaps == 4 and len(queued(store)) == 2
    assert any("limit of 4 sitemap files" in line for line in lines), lines


def test_sitemaps_off_scope_or_disallowed_are_not_fetched(site: TestSite, make_site, tmp_path: Path) -> None:
    other = make_site("127.0.0.2")
    u = site.url
    other.route("/sitemap.xml", content_type="application/xml", body=urlset(u("/from-other")))
    site.route("/robots.txt", content_type="text/plain",
               body=f"User-agent: *\nDisallow: /private/\nSitemap: {other.url('/sitemap.xml')}\n"
                    f"Sitemap: {u('/private/sitemap.xml')}\nSitemap: {u('/moved.xml')}\n")
    site.route("/private/sitemap.xml", content_type="application/xml", body=urlset(u("/hidden")))
    site.add_redirect("/moved.xml", other.url("/sitemap.xml"))
    report, store, lines = seed(tmp_path, config_for(site))
    assert queued(store) == {} and other.hits == {} and site.hits["/private/sitemap.xml"] == 0
    text = "\n".join(lines)
    assert f"{other.url('/sitemap.xml')}: listed in {u('/robots.txt')}: not on a host of this crawl" in text
    assert f"{u('/private/sitemap.xml')}: listed in {u('/robots.txt')}: disallowed by robots.txt" in text
    assert f"{u('/moved.xml')}: redirects to {other.url('/sitemap.xml')}: not on a host" in text


def test_hostile_sitemaps_are_reported_and_the_rest_still_read(site: TestSite, tmp_path: Path) -> None:
    u = site.url
    names = ["/html.xml", "/gone.xml", "/broken.xml", "/bomb.xml", "/reset.xml", "/good.xml"]
    site.route("/robots.txt", content_type="text/plain", body="".join(f"Sitemap: {u(n)}\n" for n in names))
    site.route("/html.xml", body="<!DOCTYPE html><html><body>Soft 404</body></html>")
    site.status("/gone.xml", 410)
    site.route("/broken.xml", content_type="application/xml", body=b"<urlset><url><loc>" + bytes(range(256)) * 4)
    site.gzip_bomb("/bomb.xml", 1 << 30, content_type="application/xml")
    site.reset_mid_body("/reset.xml")
    site.route("/good.xml", content_type="application/xml", body=urlset(u("/good")))
    report, store, lines = seed(tmp_path, config_for(site, max_attempts=1), limits=Limits(max_bytes=2 << 20))
    assert set(queued(store)) == {u("/good")}
    text = "\n".join(lines)
    assert f"{u('/html.xml')}: not a sitemap: an HTML page" in text
    assert f"{u('/broken.xml')}: XML ends early or is malformed" in text
    assert f"{u('/gone.xml')}: HTTP 410" in text
    assert f"{u('/bomb.xml')}: over {2 << 20} bytes" in text
    assert f"{u('/reset.xml')}: fetch failed" in text
    assert report.sitemaps == 6
    assert len(lines) == len(report.problems)


def test_politeness_between_requests_to_one_host(site: TestSite, tmp_path: Path) -> None:
    u = site.url
    clock = FakeClock()
    arrivals: list[float] = []

    def at(body: bytes):  # type: ignore[no-untyped-def]
        def handler(info):  # type: ignore[no-untyped-def]
            arrivals.append(clock())
            return 200, {"Content-Type": "application/xml"}, body
        return handler

    site.route("/robots.txt", handler=at(f"Sitemap: {u('/i.xml')}\n".encode()))
    site.route("/i.xml", handler=at(index(u("/a.xml"), u("/b.xml"))))
    site.route("/a.xml", handler=at(urlset(u("/a"))))
    site.route("/b.xml", handler=at(urlset(u("/b"))))
    report, store, _ = seed(tmp_path, config_for(site, delay=2.5), clock=clock, wait=clock.wait)
    assert len(arrivals) == 4 and report.queued == 2
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    assert all(g >= 2.5 for g in gaps), gaps
    host = f"127.0.0.1:{site.port}"
    assert store.host_state(host).next_allowed >= arrivals[-1] + 2.5, "the workers' first request waits too"


def test_a_host_asking_for_a_long_pause_is_not_waited_for(site: TestSite, tmp_path: Path) -> None:
    u = site.url
    site.route("/robots.txt", content_type="text/plain", body=f"Sitemap: {u('/a.xml')}\nSitemap: {u('/b.xml')}\n")
    site.status("/a.xml", 429, headers={"Retry-After": "3600"})
    site.route("/b.xml", content_type="application/xml", body=urlset(u("/b")))
    clock = FakeClock()
    report, store, lines = seed(tmp_path, config_for(site, delay=1.0), clock=clock, wait=clock.wait)
    assert sum(clock.waits) <= 2.0 and site.hits["/b.xml"] == 0
    assert report.sitemaps == 1
    assert f"{u('/a.xml')}: HTTP 429" in lines[0]
    assert f"{u('/b.xml')}: not read: 127.0.0.1:{site.port} asks for a pause of 3600 s" in lines[1]
    assert store.host_state(f"127.0.0.1:{site.port}").next_allowed >= clock() + 3000, "the workers wait"


def test_a_wait_asking_to_stop_interrupts(site: TestSite, tmp_path: Path) -> None:
    u = site.url
    site.route("/sitemap.xml", content_type="application/xml", body=index(u("/a.xml")))
    site.route("/a.xml", content_type="application/xml", body=urlset(u("/a")))
    report, store, _ = seed(tmp_path, config_for(site, delay=5.0), wait=lambda s: True)
    assert report.interrupted and "interrupted" in report.line()
    assert site.hits["/a.xml"] == 0


def test_ignore_robots_reads_only_sitemap_xml(site: TestSite, tmp_path: Path) -> None:
    u = site.url
    site.route("/robots.txt", content_type="text/plain", body=f"User-agent: *\nDisallow: /\nSitemap: {u('/x.xml')}\n")
    site.route("/sitemap.xml", content_type="application/xml", body=urlset(u("/p")))
    report, store, _ = seed(tmp_path, config_for(site, ignore_robots=True))
    assert set(queued(store)) == {u("/p")} and site.hits["/robots.txt"] == 0 and site.hits["/x.xml"] == 0


def test_memory_store_and_given_hosts(site: TestSite, make_site) -> None:
    other = make_site("127.0.0.2")
    other.route("/sitemap.xml", content_type="application/xml",
                body=urlset((other.url("/o"), "2024-02-02"), site.url("/from-other")))
    config = CrawlConfig(seeds=(site.url("/"), other.url("/")), delay=0.0)
    store = MemoryStore()
    lines: list[str] = []
    report = seed_from_sitemaps(store, config, hosts=[other.url("/anything")], log=lines.append)
    assert {e.url: e.source for e in store.pending} == {other.url("/o"): other.url("/sitemap.xml"),
                                                        site.url("/from-other"): other.url("/sitemap.xml")}
    assert site.hits == {} and report.queued == 2
    lastmod = (Path(store.folder) / "lastmod.txt").read_text()  # type: ignore[attr-defined]
    assert f"{other.url('/o')}\t2024-02-02\t{other.url('/sitemap.xml')}\n" in lastmod


def test_workers_then_crawl_the_orphans_with_the_cached_robots(site: TestSite) -> None:
    from conftest import run_until_done
    from spider.spider import Spider

    u = site.url
    site.route("/robots.txt", content_type="text/plain", body=f"User-agent: *\nDisallow: /private/\nSitemap: {u('/s.xml')}\n")
    site.route("/", body="<p>no links at all</p>")
    site.route("/s.xml", content_type="application/xml", body=urlset(u("/orphan"), u("/private/x")))
    site.route("/orphan", body="<p>only in the sitemap</p>")
    config = config_for(site)
    store = MemoryStore()
    store.add([QueueEntry(u("/"))])
    report = seed_from_sitemaps(store, config, log=lambda line: None)
    assert report.queued == 1 and dict(report.refused) == {"robots": 1}
    spider = Spider(config, store)
    try:
        run_until_done(spider)
    finally:
        spider.close()
    crawled = {line.split("\t")[0]: line.split("\t")[4] for line in store.crawled}
    assert crawled == {u("/"): "0", u("/orphan"): "0"}       # depth 0: a sitemap URL is a seed of a kind
    assert site.hits["/robots.txt"] == 1 and site.hits["/private/x"] == 0
