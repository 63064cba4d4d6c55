"""Keeping a crawl fresh: recrawl with conditional requests, volatility tiers, removal and
inactive pages, and two-phase (discovery, then fetch) crawls. Real subprocess runs against
loopback sites whose pages change between runs."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import given, settings, strategies as st

from spider import recrawl
from spider.records import QueueEntry, is_data
from spider.frontier.recovery import recover
from sitekit import RequestInfo, TestSite

MAIN = str(Path(__file__).resolve().parent.parent / "main.py")
TIMEOUT = 60


def cli(projects: Path, *args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, MAIN, *args, "--projects-dir", str(projects)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def ok(r: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert r.returncode == 0, r.stderr
    return r


def rows(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.rstrip("\n").split("\t") for line in path.read_text().splitlines(True) if is_data(line)]


class Changing:
    """A site whose pages change on demand, with ETag, Last-Modified, or neither."""

    def __init__(self, site: TestSite) -> None:
        self.site = site
        self.version: dict[str, int] = {}
        self.links: dict[str, list[str]] = {}
        self.validators: dict[str, str] = {}
        self.gone: dict[str, int] = {}

    def page(self, path: str, links: list[str] = (), validators: str = "none") -> None:   # type: ignore[assignment]
        self.version.setdefault(path, 1)
        self.links[path] = list(links)
        self.validators[path] = validators
        self.site.route(path, handler=lambda info, p=path: self._answer(p, info))

    def change(self, path: str, links: Optional[list[str]] = None) -> None:
        self.version[path] += 1
        if links is not None:
            self.links[path] = links

    def _answer(self, path: str, info: RequestInfo):  # type: ignore[no-untyped-def]
        if path in self.gone:
            return self.gone[path], None, "gone"
        v = self.version[path]
        etag, stamp = f'"{path}-v{v}"', f"Mon, 0{v} Jan 2024 00:00:00 GMT"
        headers = {"Content-Type": "text/html"}
        kind = self.validators[path]
        if kind == "etag":
            headers["ETag"] = etag
            if info.headers.get("If-None-Match") == etag:
                return 304, headers, b""
        elif kind == "last-modified":
            headers["Last-Modified"] = stamp
            if info.headers.get("If-Modified-Since") == stamp:
                return 304, headers, b""
        body = "".join(f'<a href="{h}">{h}</a>' for h in self.links[path])
        return 200, headers, f"<title>{path}</title>{body}<p>{path} version {v}</p>"

    def requests(self, path: str) -> list[RequestInfo]:
        return [r for r in self.site.requests if r.path == path]


@pytest.fixture
def changing(site: TestSite) -> Changing:
    c = Changing(site)
    c.page("/", ["/etag", "/lm", "/plain", "/doomed"], "none")
    c.page("/etag", ["/"], "etag")
    c.page("/lm", [], "last-modified")
    c.page("/plain", [], "none")
    c.page("/doomed", [], "etag")
    return c


def next_second() -> None:
    """Sleep into the next whole second: checks are recorded to the second, and a sitemap read (a
    lastmod.txt written) in the second of a check does not count as after it."""
    import time

    time.sleep(1.001 - time.time() % 1)


def checks(folder: Path) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {}
    for r in rows(folder / "checks.txt"):
        out.setdefault(r[0], []).append(r[1:])
    return out


def test_recrawl_sends_validators_and_a_304_costs_no_parse(changing: Changing, projects_dir: Path) -> None:
    site = changing.site
    ok(cli(projects_dir, "crawl", "f", site.url("/"), "--delay", "0"))
    folder = projects_dir / "f"
    sched = recrawl.read_schedule(folder)
    assert sched[site.url("/etag")].etag == '"/etag-v1"'
    assert sched[site.url("/lm")].last_modified == "Mon, 01 Jan 2024 00:00:00 GMT"
    assert sched[site.url("/plain")].etag == "-" and sched[site.url("/plain")].last_modified == "-"

    result = ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    pages = len([u for u in recrawl.read_schedule(folder)])
    assert re.search(rf"^done: crawled \d+ \((?:[^)]*; )?0 in this run; {pages} rechecked\)", result.stderr, re.M), \
        result.stderr   # the summary counts the checks, and its pages/s is of them
    assert "(0.0 pages/s)" not in result.stderr
    assert changing.requests("/etag")[-1].headers.get("If-None-Match") == '"/etag-v1"'
    assert changing.requests("/lm")[-1].headers.get("If-Modified-Since") == "Mon, 01 Jan 2024 00:00:00 GMT"
    assert changing.requests("/plain")[-1].headers.get("If-None-Match") is None
    found = checks(folder)
    assert found[site.url("/etag")][-1][:2] == ["304", "unchanged"]
    assert found[site.url("/lm")][-1][:2] == ["304", "unchanged"]
    assert found[site.url("/plain")][-1][:2] == ["200", "unchanged"]   # same text: unchanged anyway
    # Every page is checked once per recrawl, and stays crawled (one line in crawled.txt).
    assert sorted(found) == sorted(site.url(p) for p in ("/", "/etag", "/lm", "/plain", "/doomed"))
    crawled = [r[0] for r in rows(folder / "crawled.txt")]
    assert len(crawled) == len(set(crawled)) == 5
    # Unchanged: checked half as often next time.
    after = recrawl.read_schedule(folder)
    assert after[site.url("/etag")].interval == 2 * recrawl.INITIAL_INTERVAL
    assert after[site.url("/etag")].checks == 1 and after[site.url("/etag")].changes == 0


def test_changed_pages_are_found_and_their_new_links_crawled(changing: Changing, projects_dir: Path) -> None:
    site = changing.site
    ok(cli(projects_dir, "crawl", "f", site.url("/"), "--delay", "0"))
    site.route("/new", body="<title>new</title>a new page")
    changing.change("/etag", ["/", "/new"])
    changing.change("/lm")
    changing.change("/plain")
    ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    folder = projects_dir / "f"
    found = checks(folder)
    for p in ("/etag", "/lm", "/plain"):
        assert found[site.url(p)][-1][:2] == ["200", "changed"], p
    assert found[site.url("/")][-1][:2] == ["200", "unchanged"]
    assert site.hits["/new"] == 1 and site.url("/new") in [r[0] for r in rows(folder / "crawled.txt")]
    sched = recrawl.read_schedule(folder)
    assert sched[site.url("/etag")].etag == '"/etag-v2"'          # the new validator is kept
    assert sched[site.url("/etag")].interval == recrawl.INITIAL_INTERVAL / 2
    assert sched[site.url("/etag")].changes == 1


def test_404_and_410_mark_pages_removed_and_they_are_not_checked_again(changing: Changing,
                                                                       projects_dir: Path) -> None:
    site = changing.site
    ok(cli(projects_dir, "crawl", "f", site.url("/"), "--delay", "0"))
    changing.gone["/doomed"] = 410
    changing.gone["/plain"] = 404
    ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    folder = projects_dir / "f"
    removed = {r[0]: r[1:] for r in rows(folder / "removed.txt")}
    assert {u: r[1] for u, r in removed.items()} == {site.url("/doomed"): "410", site.url("/plain"): "404"}
    assert all(r[0].endswith("Z") for r in removed.values())
    status = ok(cli(projects_dir, "status", "f")).stdout
    assert "removed   2" in status and site.url("/doomed") in status
    before = site.hits["/doomed"]
    ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    assert site.hits["/doomed"] == before   # a removed page is not checked again


def test_only_due_pages_are_checked_and_a_sitemap_lastmod_makes_one_due(changing: Changing,
                                                                      projects_dir: Path) -> None:
    site = changing.site
    ok(cli(projects_dir, "crawl", "f", site.url("/"), "--delay", "0"))
    folder = projects_dir / "f"
    assert "due       0" in ok(cli(projects_dir, "status", "f")).stdout
    hits = dict(site.hits)
    r = ok(cli(projects_dir, "recrawl", "f", "--delay", "0"))
    assert "nothing is due" in r.stderr and dict(site.hits) == hits   # nothing due yet
    # A sitemap says /lm changed after our last check: it is due at once.
    next_second()
    (folder / "lastmod.txt").write_text(f"{site.url('/lm')}\t2099-01-01\t{site.url('/sitemap.xml')}\n")
    assert "due       1" in ok(cli(projects_dir, "status", "f")).stdout
    ok(cli(projects_dir, "recrawl", "f", "--delay", "0"))
    assert site.hits["/lm"] == hits["/lm"] + 1 and site.hits["/etag"] == hits["/etag"]


def test_a_project_that_reached_max_pages_can_still_be_recrawled(changing: Changing, projects_dir: Path) -> None:
    """Rechecks do not count against --max-pages: a project stopped by its budget is checked in
    full, and a new page a changed page links to still waits for a higher budget."""
    site = changing.site
    r = ok(cli(projects_dir, "crawl", "f", site.url("/"), "--delay", "0", "--max-pages", "3", "--workers", "1"))
    assert "--max-pages 3 reached" in r.stderr
    folder = projects_dir / "f"
    crawled = {r[0] for r in rows(folder / "crawled.txt")}
    assert len(crawled) == 3
    changing.page("/new", [], "none")
    changing.change("/", ["/etag", "/lm", "/plain", "/doomed", "/new"])
    r = ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    assert "nothing to do" not in r.stderr, r.stderr
    assert sorted(checks(folder)) == sorted(crawled)                  # every crawled page checked once
    assert {r[0] for r in rows(folder / "crawled.txt")} == crawled    # no new page past the budget
    assert not changing.requests("/new")
    assert not [x for x in rows(folder / "queue.txt") if x[-1] == "recheck"]


def test_a_page_unlinked_in_three_recrawls_in_a_row_is_marked_inactive(changing: Changing,
                                                                       projects_dir: Path) -> None:
    site = changing.site
    ok(cli(projects_dir, "crawl", "f", site.url("/"), "--delay", "0"))
    folder = projects_dir / "f"
    changing.change("/", ["/etag", "/lm", "/doomed"])    # /plain no longer linked from anywhere
    for run in range(1, 4):
        ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
        inactive = [r[0] for r in rows(folder / "removed.txt") if r[2] == "inactive"]
        if run < 3:
            assert inactive == [], run
            assert rows(folder / "unlinked.txt") == [[site.url("/plain"), str(run)]]
        else:
            assert inactive == [site.url("/plain")]   # the seed "/" is never inactive
    assert "inactive" in ok(cli(projects_dir, "status", "f")).stdout


def test_a_link_coming_back_resets_the_count(changing: Changing, projects_dir: Path) -> None:
    site = changing.site
    ok(cli(projects_dir, "crawl", "f", site.url("/"), "--delay", "0"))
    folder = projects_dir / "f"
    changing.change("/", ["/etag", "/lm", "/doomed"])
    ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    changing.change("/", ["/etag", "/lm", "/doomed", "/plain"])
    ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    assert rows(folder / "unlinked.txt") == [] and not (folder / "removed.txt").exists()


def test_pending_rechecks_survive_recovery(tmp_path: Path) -> None:
    """A recrawl killed mid-way: its recheck lines are of crawled pages, and must stay pending."""
    url = "http://a.test/p"
    (tmp_path / "crawled.txt").write_text(f"{url}\t200\ttext/html\t10\t0\t2026-11-30T10:00:00Z\t-\n")
    (tmp_path / "queue.txt").write_text(QueueEntry(url, 0, 0, 0.0, "-", "recheck").line()
                                        + QueueEntry(url, 0).line())   # a plain duplicate goes
    rep = recover(tmp_path, lambda u, d: None)
    assert rep.pending == 1
    assert [r for r in rows(tmp_path / "queue.txt")] == [[url, "0", "0", "0", "-", "recheck"]]


def test_discovery_leaves_detail_pages_pending_then_the_fetch_run_takes_them(site: TestSite,
                                                                           projects_dir: Path) -> None:
    state = {"details": 5}

    def listing(info: RequestInfo):  # type: ignore[no-untyped-def]
        n = int(info.path.rsplit("/", 1)[1])
        links = "".join(f'<a href="/detail/{n}-{i}">d{i}</a>' for i in range(state["details"]))
        more = f'<a href="/list/{n + 1}">next</a>' if n < 3 else ""
        return 200, None, f"<title>list {n}</title>{links}{more}<p>{state['details']} items</p>"

    for n in range(1, 4):
        site.route(f"/list/{n}", handler=listing)
        for i in range(10):
            site.route(f"/detail/{n}-{i}", body=f"<title>detail {n}-{i}</title>item {n}-{i}")
    site.route("/", body='<a href="/list/1">catalogue</a>')
    r = ok(cli(projects_dir, "crawl", "d", site.url("/"), "--delay", "0", "--discover", "/list/"))
    assert "15 URL(s) left pending" in r.stderr
    assert not [p for p in site.hits if p.startswith("/detail/")]
    assert sorted(p for p in site.hits if p.startswith("/list/")) == ["/list/1", "/list/2", "/list/3"]
    # Discovery again later: the listings are fetched anew, only the new detail URLs are added.
    # Lines added by hand have no source page, like the seeds: they still wait for the fetch run.
    with open(projects_dir / "d" / "queue.txt", "a") as f:
        f.write(site.url("/detail/2-8") + "\n" + QueueEntry(site.url("/detail/3-8"), 0, 0, 0.0, "-").line())
    state["details"] = 7
    r = ok(cli(projects_dir, "crawl", "d", "--delay", "0", "--discover", "/list/"))
    assert "23 URL(s) left pending" in r.stderr
    assert site.hits["/list/1"] == 2 and not [p for p in site.hits if p.startswith("/detail/")]
    queued = [r[0] for r in rows(projects_dir / "d" / "queue.txt")]
    assert len(queued) == len(set(queued)) == 23
    # The fetch run: every detail page, once.
    ok(cli(projects_dir, "crawl", "d", "--delay", "0", "--workers", "4"))
    details = {p: n for p, n in site.hits.items() if p.startswith("/detail/")}
    assert len(details) == 23 and set(details.values()) == {1}
    assert "discover" not in (projects_dir / "d" / "settings.txt").read_text()   # a per-run option


# -- the policy, as pure functions ----------------------------------------------------------------

@pytest.mark.parametrize("interval, changed, expected", [
    (86400, False, 172800), (86400, True, 43200),
    (3600, True, 3600),                   # never below the floor
    (20 * 86400, False, 30 * 86400),      # never above the ceiling
])
def test_next_interval_is_multiplicative_within_bounds(interval: float, changed: bool, expected: float) -> None:
    assert recrawl.next_interval(interval, changed) == expected


@pytest.mark.parametrize("status, old, new, expected", [
    (304, "h", None, "unchanged"), (200, "h", "h", "unchanged"), (200, "h", "g", "changed"),
    (200, "-", "g", "changed"), (404, "h", None, "removed"), (410, "h", None, "removed"),
    (500, "h", None, "failed"), (None, "h", None, "failed"), (403, "h", None, "failed"),
])
def test_verdict(status: Optional[int], old: str, new: Optional[str], expected: str) -> None:
    assert recrawl.verdict(status, old, new) == expected


def test_is_due_and_after_check() -> None:
    page = recrawl.after_fetch("http://a.test/", 1000.0, '"e"', None, "h")
    assert page.due == 1000.0 + recrawl.INITIAL_INTERVAL and page.conditional_headers() == {"If-None-Match": '"e"'}
    assert not recrawl.is_due(page, 2000.0) and recrawl.is_due(page, page.due)
    assert recrawl.is_due(page, 2000.0, lastmod=1500.0) and not recrawl.is_due(page, 2000.0, lastmod=900.0)
    gone = recrawl.after_check(page, 5000.0, "removed", None, None, None)
    assert math.isinf(gone.due) and not recrawl.is_due(gone, 1e12, lastmod=1e12)
    again = recrawl.parse_schedule_line(gone.line().rstrip("\n").split("\t"))
    assert again is not None and math.isinf(again.due) and again.etag == '"e"'


@pytest.mark.parametrize("text, expected", [
    ("2026-11-30T10:50:08Z", 1796035808.0), ("2026-11-30", 1795996800.0),
    ("2026-11-30T11:50:08+01:00", 1796035808.0), ("Mon, 30 Nov 2026 10:50:08 GMT", 1796035808.0),
    ("yesterday", None), ("", None),
])
def test_parse_stamp(text: str, expected: Optional[float]) -> None:
    assert recrawl.parse_stamp(text) == expected


@settings(max_examples=500, deadline=None)
@given(st.tuples(st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32), st.integers(0, 24),
                 st.integers(0, 61), st.integers(0, 62)))
def test_our_stamps_parse_as_strptime_reads_them(parts) -> None:
    """The fast path for ``YYYY-MM-DDTHH:MM:SSZ`` gives what strptime gives, invalid dates included."""
    import calendar
    import time
    text = "%04d-%02d-%02dT%02d:%02d:%02dZ" % parts
    try:
        expected: Optional[float] = float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        expected = None   # no reading of it is a time
    assert recrawl.parse_stamp(text) == expected


def test_export_after_recrawls_shows_last_status_and_state(changing: Changing, projects_dir: Path) -> None:
    import csv
    import io
    import json

    site = changing.site
    ok(cli(projects_dir, "crawl", "f", site.url("/"), "--delay", "0"))
    changing.gone["/doomed"] = 410
    ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    out = ok(cli(projects_dir, "export", "f", "--format", "jsonl")).stdout
    recs = {r["url"]: r for r in map(json.loads, out.splitlines())}
    assert set(recs) == {site.url(p) for p in ("/", "/etag", "/lm", "/plain", "/doomed")}
    assert recs[site.url("/etag")]["status"] == 304 and recs[site.url("/etag")]["state"] == "crawled"
    assert recs[site.url("/doomed")]["status"] == 410 and recs[site.url("/doomed")]["state"] == "removed"
    assert recs[site.url("/")]["depth"] == 0 and recs[site.url("/")]["outlinks"] == 4
    assert recs[site.url("/")]["title"] == "/" and len(recs[site.url("/")]["content_hash"]) == 32
    target = projects_dir / "out.csv"
    r = ok(cli(projects_dir, "export", "f", "--format", "csv", "--output", str(target)))
    assert "5 records" in r.stderr
    rows_ = list(csv.DictReader(io.StringIO(target.read_text())))
    assert {x["url"]: x["state"] for x in rows_} == {u: v["state"] for u, v in recs.items()}
    bad = cli(projects_dir, "export", "f", "--format", "xml")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    missing = cli(projects_dir, "export", "nope", "--format", "csv")
    assert missing.returncode == 1 and missing.stderr.startswith("Error:")


def _sitemap_site(site: TestSite) -> None:
    import gzip

    site.route("/robots.txt", body=f"User-agent: *\nDisallow: /private/\nSitemap: {site.url('/sitemap-index.xml')}\n",
               content_type="text/plain")
    site.route("/", body='<title>home</title><a href="/linked">linked</a>')
    site.route("/linked", body="<title>linked</title>linked page")
    site.route("/orphan-1", body="<title>orphan 1</title>only in the sitemap")
    site.route("/orphan-2", body="<title>orphan 2</title>only in the gzip sitemap")
    index = ('<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
             f'<sitemap><loc>{site.url("/a.xml")}</loc></sitemap>'
             f'<sitemap><loc>{site.url("/b.xml.gz")}</loc></sitemap></sitemapindex>')
    site.route("/sitemap-index.xml", body=index, content_type="application/xml")
    site.route("/a.xml", content_type="application/xml", body=(
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f'<url><loc>{site.url("/orphan-1")}</loc><lastmod>2026-11-01</lastmod></url>'
        f'<url><loc>{site.url("/private/x")}</loc></url>'
        '<url><loc>http://elsewhere.test/page</loc></url></urlset>'))
    site.route("/b.xml.gz", content_type="application/gzip", body=gzip.compress((
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f'<url><loc>{site.url("/orphan-2")}</loc></url></urlset>').encode()))


def test_crawl_with_sitemaps_reaches_orphan_pages(site: TestSite, projects_dir: Path) -> None:
    _sitemap_site(site)
    r = ok(cli(projects_dir, "crawl", "s", site.url("/"), "--delay", "0", "--sitemaps"))
    assert "sitemaps: 3 read" in r.stderr
    folder = projects_dir / "s"
    crawled = {row[0] for row in rows(folder / "crawled.txt")}
    assert {site.url(p) for p in ("/", "/linked", "/orphan-1", "/orphan-2")} <= crawled
    assert site.hits["/private/x"] == 0 and site.hits["/sitemap-index.xml"] == 1
    refused = {row[0]: (row[1], row[2]) for row in rows(folder / "rejected.txt")}
    assert refused[site.url("/private/x")] == ("robots", site.url("/a.xml"))
    assert refused["http://elsewhere.test/page"] == ("scope", site.url("/a.xml"))
    assert [site.url("/orphan-1"), "2026-11-01", site.url("/a.xml")] in rows(folder / "lastmod.txt")
    assert "sitemaps" not in (folder / "settings.txt").read_text()   # a per-run option


def test_seed_queues_sitemap_urls_without_crawling(site: TestSite, projects_dir: Path) -> None:
    _sitemap_site(site)
    ok(cli(projects_dir, "crawl", "s", site.url("/"), "--delay", "0"))
    assert site.hits["/orphan-1"] == 0
    r = ok(cli(projects_dir, "seed", "s"))
    assert "2 queued" in r.stderr and site.hits["/orphan-1"] == 0
    assert {row[0] for row in rows(projects_dir / "s" / "queue.txt")} == {site.url("/orphan-1"), site.url("/orphan-2")}
    ok(cli(projects_dir, "crawl", "s", "--delay", "0"))
    assert site.hits["/orphan-1"] == 1 and site.hits["/orphan-2"] == 1
    assert cli(projects_dir, "seed", "missing").returncode == 1


def test_sitemap_entries_are_never_inactive_whatever_their_lastmod(site: TestSite, projects_dir: Path) -> None:
    """robots.txt -> sitemap index -> sitemaps whose entries have a lastmod, none, or one that does
    not parse: every listed page is exempt from ``inactive``, linked from anywhere or not."""
    u = site.url
    site.route("/robots.txt", body=f"User-agent: *\nSitemap: {u('/index.xml')}\n", content_type="text/plain")
    site.route("/", body='<title>home</title><a href="/linked">linked</a>')
    site.route("/linked", body="<title>linked</title>linked page")
    for name in ("g1", "g2", "g3", "h1"):
        site.route(f"/{name}.html", body=f"<title>{name}</title>only in a sitemap")
    site.route("/index.xml", content_type="application/xml", body=(
        '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f'<sitemap><loc>{u("/g.xml")}</loc></sitemap><sitemap><loc>{u("/h.xml")}</loc></sitemap></sitemapindex>'))
    site.route("/g.xml", content_type="application/xml", body=(
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f'<url><loc>{u("/g1.html")}</loc><lastmod>2026-11-01</lastmod></url>'
        f'<url><loc>{u("/g2.html")}</loc></url>'
        f'<url><loc>{u("/g3.html")}</loc><lastmod>last tuesday</lastmod></url></urlset>'))
    site.route("/h.xml", content_type="application/xml", body=(
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f'<url><loc>{u("/h1.html")}</loc></url></urlset>'))
    ok(cli(projects_dir, "crawl", "s", u("/"), "--delay", "0", "--sitemaps"))
    folder = projects_dir / "s"
    assert {u(f"/{n}.html") for n in ("g1", "g2", "g3", "h1")} <= {r[0] for r in rows(folder / "crawled.txt")}
    site.route("/", body="<title>home</title>no links any more")   # /linked is now linked from nowhere
    for _ in range(3):
        ok(cli(projects_dir, "recrawl", "s", "--all", "--delay", "0"))
    assert [r[0] for r in rows(folder / "removed.txt") if r[2] == "inactive"] == [u("/linked")]
    assert rows(folder / "unlinked.txt") == []


def test_a_future_sitemap_lastmod_makes_a_page_due_once_not_forever(changing: Changing,
                                                                   projects_dir: Path) -> None:
    site = changing.site
    ok(cli(projects_dir, "crawl", "f", site.url("/"), "--delay", "0"))
    folder = projects_dir / "f"
    next_second()
    (folder / "lastmod.txt").write_text(f"{site.url('/lm')}\t2099-01-01\t{site.url('/sitemap.xml')}\n")
    hits = site.hits["/lm"]
    ok(cli(projects_dir, "recrawl", "f", "--delay", "0"))
    assert site.hits["/lm"] == hits + 1                    # due: the sitemap was read after the last check
    for _ in range(2):   # checked since: a date in the future says nothing new
        r = ok(cli(projects_dir, "recrawl", "f", "--delay", "0"))
        assert "nothing is due" in r.stderr and site.hits["/lm"] == hits + 1
    assert "due       0" in ok(cli(projects_dir, "status", "f")).stdout


def test_read_lastmod_caps_a_date_at_when_it_was_read(tmp_path: Path) -> None:
    import os

    (tmp_path / "lastmod.txt").write_text("http://a.test/future\t2099-01-01\tx\n"
                                          "http://a.test/past\t2026-11-01\tx\n"
                                          "http://a.test/none\t-\tx\n"
                                          "http://a.test/bad\tlast tuesday\tx\n")
    read_at = recrawl.parse_stamp("2026-11-30T10:00:00Z")
    assert read_at is not None
    os.utime(tmp_path / "lastmod.txt", (read_at + 0.5, read_at + 0.5))   # whole seconds, like the files
    assert recrawl.read_lastmod(tmp_path) == {"http://a.test/future": read_at,
                                              "http://a.test/past": recrawl.parse_stamp("2026-11-01")}
    assert recrawl.read_lastmod(tmp_path, now=read_at - 60)["http://a.test/future"] == read_at - 60
    assert recrawl.cap_lastmod(5000.0, 1000.0) == 1000.0 and recrawl.cap_lastmod(500.0, 1000.0) == 500.0
    listed = recrawl.listed_urls(tmp_path)
    assert all(f"http://a.test/{p}" in listed for p in ("future", "past", "none", "bad"))
    assert "http://a.test/other" not in listed


def test_export_after_a_changed_recheck_shows_no_field_of_the_old_version(changing: Changing,
                                                                        projects_dir: Path) -> None:
    """checks.txt says changed, with a new hash: bytes, outlinks, title... are the new version's
    (when the check recorded them) or null, never the first crawl's next to the new hash."""
    import json

    site = changing.site
    ok(cli(projects_dir, "crawl", "f", site.url("/"), "--delay", "0"))
    folder = projects_dir / "f"
    first = next(r for r in rows(folder / "crawled.txt") if r[0] == site.url("/etag"))
    site.route("/new", body="<title>new</title>a new page")
    changing.change("/etag", ["/", "/new"])
    ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    check = checks(folder)[site.url("/etag")][-1]
    assert check[:2] == ["200", "changed"] and check[3] != first[7]
    out = ok(cli(projects_dir, "export", "f", "--format", "jsonl")).stdout
    rec = next(r for r in map(json.loads, out.splitlines()) if r["url"] == site.url("/etag"))
    assert rec["status"] == 200 and rec["content_hash"] == check[3] and rec["fetched_at"] == check[2]
    # the new version links to 2 pages (the old one to 1) and is longer; its title is the same
    assert rec["outlinks"] in (None, 2) and (rec["bytes"] is None or rec["bytes"] > int(first[3]))
    assert rec["title"] in (None, "/etag") and rec["content_type"] in (None, "text/html")
    assert (rec["bytes"], rec["outlinks"]) != (int(first[3]), int(first[9]))


def test_a_round_begins_on_the_next_whole_second(tmp_path: Path) -> None:
    """Checks are recorded to the second: a round that began at hh:mm:08.9 would count a check
    made at 08.95 (recorded as 08) as older than itself and make it again after a kill."""
    import time

    before = time.time()
    start = recrawl.open_round(tmp_path, before)
    assert start == float(int(before) + 1) and time.time() >= start
    assert recrawl.open_round(tmp_path, before + 100) == start     # an open round goes on
    url = "http://a.test/p"
    (tmp_path / "crawled.txt").write_text(f"{url}\t200\ttext/html\t10\t0\t2026-11-30T10:00:00Z\t-\n")
    (tmp_path / recrawl.SCHEDULE).write_text(recrawl.SCHEDULE_HEADER + recrawl.after_fetch(url, start, None, None, "h").line())
    assert recrawl.due_pages(tmp_path, start + 5, True, checked_since=start) == []
    (tmp_path / recrawl.SCHEDULE).write_text(recrawl.SCHEDULE_HEADER + recrawl.after_fetch(url, start - 0.01, None, None, "h").line())
    assert recrawl.due_pages(tmp_path, start + 5, True, checked_since=start) == [(url, 0)]


def test_rerunning_a_killed_recrawl_all_checks_only_what_it_had_not(changing: Changing, projects_dir: Path) -> None:
    """``recrawl --all`` opens a round (round.txt); a run killed halfway leaves it open, and the
    same command again checks only the pages the round has not checked yet."""
    import time

    site = changing.site
    ok(cli(projects_dir, "crawl", "f", site.url("/"), "--delay", "0"))
    folder = projects_dir / "f"
    next_second()
    started = time.time()
    # what a run killed halfway through a round leaves: the round open, /etag and /lm checked
    (folder / recrawl.ROUND).write_text(f"# round\nstarted {started:.3f}\n")
    next_second()
    with open(folder / recrawl.SCHEDULE, "a") as f:
        for path in ("/etag", "/lm"):
            f.write(recrawl.Page(site.url(path), checks=1, checked_at=time.time(), due=time.time() + 86400).line())
    before = {p: len(changing.requests(p)) for p in ("/", "/etag", "/lm", "/plain", "/doomed")}
    result = ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    assert "recrawl: 3 pages to check" in result.stderr, result.stderr
    after = {p: len(changing.requests(p)) for p in before}
    assert {p: after[p] - before[p] for p in before} == {"/": 1, "/etag": 0, "/lm": 0, "/plain": 1, "/doomed": 1}
    assert not (folder / recrawl.ROUND).exists()   # the round is over: the next --all checks everything
    result = ok(cli(projects_dir, "recrawl", "f", "--all", "--delay", "0"))
    assert "recrawl: 5 pages to check" in result.stderr, result.stderr


def test_compacting_the_schedule_keeps_the_latest_line_per_url_and_leaves_a_compact_file_alone(tmp_path: Path) -> None:
    first = recrawl.after_fetch("http://a.test/", 1000.0, '"e1"', None, "h1")
    other = recrawl.after_fetch("http://b.test/", 1000.0, None, None, "h2")
    later = recrawl.after_fetch("http://a.test/", 2000.0, '"e2"', None, "h3")
    path = tmp_path / recrawl.SCHEDULE
    path.write_text(recrawl.SCHEDULE_HEADER + first.line() + other.line() + later.line())
    recrawl.compact_schedule(tmp_path)
    assert path.read_text() == recrawl.SCHEDULE_HEADER + later.line() + other.line()
    before = path.stat()
    recrawl.compact_schedule(tmp_path)
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
