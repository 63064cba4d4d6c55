"""The commands on a crawl in Redis (``--store``) work as on files: ``seed``, ``crawl --sitemaps``,
``recrawl`` (due, ``--all``, ``--failed``), the stats rows (report charts, the trap alarm, pull
writes stats.txt) and ``status``. Each is run as a user runs it (``python main.py ...``
subprocesses on the tests' loopback sites), against a real redis-server, and where the file
store does the same thing the two are run side by side and compared.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from redis_server import RedisServer, redis_server  # noqa: F401  (pytest fixtures)
from sitekit import TestSite
from test_cluster import MAIN, TIMEOUT, error_line, recorded

DELAY = "0.05"


def run(cwd: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    """``python main.py ARGS --projects-dir cwd/projects``: its exit code checked, no traceback."""
    result = subprocess.run([sys.executable, MAIN, *args, "--projects-dir", str(cwd / "projects")],
                            cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, (args, result.returncode, result.stderr)
    return result


def crawl(cwd: Path, name: str, *args: str, store: str | None = None, code: int = 0) -> subprocess.CompletedProcess:
    where = ("--store", store) if store else ()
    return run(cwd, "crawl", name, *args, "--delay", DELAY, "--workers", "2", *where, code=code)


def data_lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.strip() and not x.startswith("#")]


def redis_log(server: RedisServer, name: str, log: str) -> list[str]:
    return data_lines("".join(x.decode() for x in server.client().lrange(f"{name}:log:{log}", 0, -1)))


def file_log(cwd: Path, name: str, file: str) -> list[str]:
    path = cwd / "projects" / name / file
    return data_lines(path.read_text()) if path.exists() else []


def fields(lines: list[str], *which: int) -> set[tuple[str, ...]]:
    return {tuple(line.split("\t")[i] for i in which) for line in lines}


def counts(server: RedisServer, name: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in server.client().hgetall(f"{name}:counts").items()}


def exported(cwd: Path, name: str, store: str | None = None) -> dict[str, str]:
    """url -> state, as ``export`` writes them."""
    out = run(cwd, "export", name, *(("--store", store) if store else ())).stdout
    return {r["url"]: r["state"] for r in map(json.loads, out.splitlines())}


# ---------------------------------------------------------------------------- sitemaps


def sitemap_site(make_site: Callable[..., TestSite]) -> TestSite:
    """/ links to /a; the sitemap (named in robots.txt) lists /s1, /s2 (never linked), / again,
    a URL robots.txt disallows and one off the crawl's host."""
    site = make_site("127.0.0.2")
    site.route("/", body='<a href="/a">a</a>')
    site.route("/a", body="<p>a</p>")
    for p in ("/s1", "/s2"):
        site.route(p, body=f"<p>{p}</p>")
    site.route("/robots.txt", body=f"User-agent: *\nDisallow: /private/\nSitemap: {site.url('/sitemap.xml')}\n",
               content_type="text/plain")
    urls = [site.url("/s1"), site.url("/s2"), site.url("/"), site.url("/private/x"), "http://elsewhere.test/p"]
    site.route("/sitemap.xml", content_type="application/xml", body=(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<url><loc>{u}</loc><lastmod>2026-01-0{i + 1}</lastmod></url>" for i, u in enumerate(urls))
        + "</urlset>"))
    return site


def test_seed_queues_the_sitemaps_urls_in_redis_as_on_files(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite]) -> None:
    site = sitemap_site(make_site)
    files, redis_ = tmp_path / "files", tmp_path / "redis"
    for cwd, store in ((files, None), (redis_, redis_server.url)):
        cwd.mkdir()
        crawl(cwd, "sm", site.url("/"), "--max-pages", "1", store=store)
        where = ("--store", store) if store else ()
        out = run(cwd, "seed", "sm", *where).stderr
        assert "sitemaps: 1 read, 5 URLs found, 2 queued, 1 already known, 2 refused (robots 1, scope 1)" in out, out
        assert "pending 3; crawl them with: crawl sm" in out, out
    robots_fetches = site.hits["/robots.txt"]
    assert robots_fetches == 2, site.hits   # once per crawl: Redis's robots.txt is the cluster's cache

    # The same URLs pending, the same refusals (robots, scope) with the sitemap as source, the
    # same lastmod lines.
    from spider.cluster import ClusterStore, pending_queue_lines
    store = ClusterStore.connect(redis_server.url, "sm")
    pending = {line.split("\t")[0] for line in pending_queue_lines(store)}
    assert pending == {line.split("\t")[0] for line in file_log(files, "sm", "queue.txt")}
    assert pending == {site.url(p) for p in ("/a", "/s1", "/s2")}
    assert counts(redis_server, "sm")["pending"] == 3
    assert fields(redis_log(redis_server, "sm", "rejected"), 0, 1, 2) == \
        fields(file_log(files, "sm", "rejected.txt"), 0, 1, 2)
    assert (site.url("/private/x"), "robots", site.url("/sitemap.xml")) in \
        fields(redis_log(redis_server, "sm", "rejected"), 0, 1, 2)
    assert redis_log(redis_server, "sm", "lastmod") == file_log(files, "sm", "lastmod.txt")
    assert len(redis_log(redis_server, "sm", "lastmod")) == 3   # /s1, /s2 and / (in scope, allowed)

    # The next crawl fetches them; a seed again queues nothing new.
    crawl(redis_, "sm", "--max-pages", "100", store=redis_server.url)
    assert set(recorded(redis_server.client(), "sm")) == {site.url(p) for p in ("/", "/a", "/s1", "/s2")}
    assert "2 queued" not in run(redis_, "seed", "sm", "--store", redis_server.url).stderr


def test_crawl_with_sitemaps_on_redis(tmp_path: Path, redis_server: RedisServer,
                                      make_site: Callable[..., TestSite]) -> None:
    site = sitemap_site(make_site)
    out = crawl(tmp_path, "sm2", site.url("/"), "--sitemaps", store=redis_server.url).stderr
    assert "sitemaps: 1 read" in out and "done: crawled 4" in out, out
    assert recorded(redis_server.client(), "sm2") == {site.url(p): 1 for p in ("/", "/a", "/s1", "/s2")}
    assert site.hits["/robots.txt"] == 1 and site.hits["/sitemap.xml"] == 1, site.hits


def test_seed_of_a_crawl_not_in_redis_is_one_error_line(tmp_path: Path, redis_server: RedisServer) -> None:
    for command in (["seed", "nothere"], ["recrawl", "nothere"], ["recrawl", "nothere", "--failed"]):
        line = error_line(run(tmp_path, *command, "--store", redis_server.url, code=1))
        assert f"no crawl named 'nothere' in Redis at {redis_server.url}" in line
    assert not redis_server.client().keys("nothere:*")


def shop(make_site: Callable[..., TestSite]) -> TestSite:
    """Listing pages /list/N link to detail pages /item/N."""
    site = make_site("127.0.0.2")
    site.route("/", body='<a href="/list/1">l1</a><a href="/item/1">1</a><a href="/item/2">2</a>')
    site.route("/list/1", body='<a href="/list/2">l2</a><a href="/item/3">3</a><a href="/item/4">4</a>')
    site.route("/list/2", body='<a href="/item/5">5</a>')
    for i in range(1, 9):
        site.route(f"/item/{i}", body=f"<p>item {i}</p>")
    return site


def test_discover_on_redis_fetches_listings_and_leaves_the_rest_pending_as_on_files(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite]) -> None:
    site = shop(make_site)
    store = redis_server.url
    files, redis_ = tmp_path / "files", tmp_path / "redis"
    listings = {site.url(p) for p in ("/", "/list/1", "/list/2")}
    for cwd, s in ((files, None), (redis_, store)):
        cwd.mkdir()
        out = crawl(cwd, "shop", site.url("/"), "--discover", "/list/", store=s).stderr
        assert "discovery done: 5 URL(s) left pending for the fetch run" in out, out
    assert not any(t.startswith("/item/") for t in site.hits), site.hits
    assert set(recorded(redis_server.client(), "shop")) == listings
    assert exported(redis_, "shop", store) == exported(files, "shop")
    status = run(redis_, "status", "shop", "--store", store).stdout
    assert "pending   5" in status, status
    # Pulled now, the parked URLs are pending lines of queue.txt, as on files.
    other = tmp_path / "other"
    other.mkdir()
    run(other, "pull", "shop", "--store", store)
    queued = {line.split("\t")[0] for line in file_log(other, "shop", "queue.txt")}
    assert queued == {line.split("\t")[0] for line in file_log(files, "shop", "queue.txt")} == \
        {site.url(f"/item/{i}") for i in range(1, 6)}

    # Discovery again: the listing pages are checked anew, only the new detail page is added.
    site.route("/list/2", body='<a href="/item/5">5</a><a href="/item/6">6</a>')
    out = crawl(redis_, "shop", "--discover", "/list/", store=store).stderr
    assert "recrawl: 3 pages to check" in out and "discovery done: 6 URL(s) left pending" in out, out
    assert not any(t.startswith("/item/") for t in site.hits), site.hits
    # The fetch run fetches them all.
    out = crawl(redis_, "shop", store=store).stderr
    assert set(recorded(redis_server.client(), "shop")) == listings | {site.url(f"/item/{i}") for i in range(1, 7)}
    assert counts(redis_server, "shop").get("parked", 0) == 0 and counts(redis_server, "shop")["pending"] == 0


@pytest.mark.parametrize("defer", [False, True])
def test_a_discovery_worker_parks_what_it_claims_and_is_not_to_fetch(
        tmp_path: Path, redis_server: RedisServer, defer: bool) -> None:
    """A URL queued unparked (admitted by a worker an instant before it parks it, a retry of an
    earlier run) and claimed by a discovery worker is given back and parked, not fetched; also
    by a crawl's worker, whose give-back settle is buffered until its next script (defer)."""
    from spider.cluster import ClusterStore
    from spider.config import CrawlConfig
    from spider.frontier.redisstore import RedisStore
    from spider.records import QueueEntry

    name = f"race{int(defer)}"
    store = ClusterStore.connect(redis_server.url, name, tmp_path, defer=defer)
    store.discover(CrawlConfig(seeds=("http://a.test/",), discover=("/list/",)))
    RedisStore.add(store, [QueueEntry("http://a.test/item/1", 1), QueueEntry("http://b.test/list/1", 1)])
    got = store.claim(10, 0.0, lambda host: 0.0)
    assert [c.url for c in got.claims] == ["http://b.test/list/1"]
    c = store.counts()
    assert (c.pending, c.in_flight, got.pending) == (1, 1, 0)
    assert redis_server.client().hget(f"{name}:counts", "parked") == b"1"
    assert store.claim(10, 0.0, lambda host: 0.0).claims == []   # parked: claimed by no one
    assert store.unpark() == 1 and redis_server.client().hget(f"{name}:counts", "parked") is None
    store.only = ()
    assert [c.url for c in store.claim(10, 0.0, lambda host: 0.0).claims] == ["http://a.test/item/1"]


def test_a_due_retry_claimed_by_a_discovery_worker_is_parked_not_claimed_again(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """A retry of an earlier run that comes due in a discovery run, and is not to be fetched, is
    given back ready and parked: not put back among the retries, due at once, claimed again."""
    from spider.cluster import ClusterStore
    from spider.config import CrawlConfig
    from spider.frontier.redisstore import RedisStore
    from spider.records import QueueEntry

    store = ClusterStore.connect(redis_server.url, "dueretry", tmp_path, defer=True)
    store.discover(CrawlConfig(seeds=("http://a.test/",), discover=("/list/",)))
    RedisStore.requeue(store, [QueueEntry("http://a.test/item/1", 1, 1, 5.0, "http://a.test/")])
    got = store.claim(1, 10.0, lambda host: 0.0)
    assert (got.claims, got.pending) == ([], 0)
    assert redis_server.client().hget("dueretry:counts", "parked") == b"1"
    assert store.claim(1, 20.0, lambda host: 0.0).claims == []
    assert store.counts().pending == 1 and store.unpark() == 1


def test_a_discovery_run_parks_lines_inside_pending_blocks_and_only_those(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """On Redis a page's links to one host wait as one member of the host's queue (a block of
    up to 64 lines): a discovery run parks the lines it is not to fetch out of the blocks (those
    queued before it started, and those it adds), and only those; the counts stay exact, the
    wanted lines are claimed in order, and unparking gives every line back, with its source, in
    the crawl's order."""
    from spider.cluster import ClusterStore, pending_queue_lines
    from spider.config import CrawlConfig
    from spider.records import QueueEntry

    page = "http://a.test/"
    links = [QueueEntry(f"http://a.test/{'list' if i % 3 == 0 else 'item'}/{i}", 1, 0, 0.0, page)
             for i in range(150)]
    client = redis_server.client()
    plain = ClusterStore.connect(redis_server.url, "blk", tmp_path)
    assert len(plain.add(links[:100])) == 100
    assert client.zcard("blk:q:{a.test}") == 2   # two blocks (64 + 36 lines)
    disc = ClusterStore.connect(redis_server.url, "blk", tmp_path)
    disc.discover(CrawlConfig(seeds=(page,), discover=("/list/",)))
    items = [e.url for e in links if "/item/" in e.url]
    assert disc.park_pending() == 66                       # the items of the first 100
    assert len(disc.add(links[100:])) == 50                # a page's links, in a discovery run
    assert client.hget("blk:counts", "parked") == b"100"
    assert (disc.counts().pending, client.zcard("blk:d:{a.test}")) == (150, 100)
    assert sorted(line.split("\t")[0] for line in pending_queue_lines(disc, kinds=("d",))) == sorted(items)

    claimed, left = claim_all(disc)
    assert claimed == [e.url for e in links if "/list/" in e.url]   # in order, no item
    assert left == 0 and disc.counts().pending == 100

    assert disc.unpark() == 100 and client.hget("blk:counts", "parked") is None
    assert sorted(pending_queue_lines(disc)) == sorted(e.line()[:-1] for e in links if "/item/" in e.url)
    disc.only = ()
    assert claim_all(disc) == (items, 0) and disc.counts().pending == 0


def claim_all(store: Any) -> tuple[list[str], int]:
    """Claim and settle one URL at a time until none comes: the URLs, and the last pending count."""
    claimed: list[str] = []
    while True:
        got = store.claim(1, 0.0, lambda host: 0.0)
        if not got.claims:
            return claimed, got.pending
        claimed.append(got.claims[0].url)
        assert store.settle(got.claims[0], "crawled", record=got.claims[0].url + "\t200\n")


# ---------------------------------------------------------------------------- recrawl


def three_pages(make_site: Callable[..., TestSite]) -> TestSite:
    site = make_site("127.0.0.2")
    site.route("/", body='<title>home</title><a href="/a">a</a><a href="/b">b</a>')
    site.route("/a", body="<title>a</title><p>version 1</p>")
    site.route("/b", body="<title>b</title><p>b</p>")
    return site


def test_recrawl_all_on_redis_checks_every_page_as_on_files(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite]) -> None:
    site = three_pages(make_site)
    files, redis_ = tmp_path / "files", tmp_path / "redis"
    store = redis_server.url
    for cwd, s in ((files, None), (redis_, store)):
        cwd.mkdir()
        crawl(cwd, "rc", site.url("/"), store=s)
    site.route("/a", body='<title>a</title><p>version 2</p><a href="/c">c</a>')
    site.route("/c", body="<title>c</title>")
    results = {}
    for cwd, s in ((files, None), (redis_, store)):
        where = ("--store", s) if s else ()
        out = run(cwd, "recrawl", "rc", "--all", "--delay", DELAY, *where).stderr
        assert "recrawl: 3 pages to check" in out, out
        results[s] = out
    checks = fields(redis_log(redis_server, "rc", "checks"), 0, 2)
    assert checks == fields(file_log(files, "rc", "checks.txt"), 0, 2)
    assert checks == {(site.url("/"), "unchanged"), (site.url("/a"), "changed"), (site.url("/b"), "unchanged")}
    assert site.url("/c") in recorded(redis_server.client(), "rc")   # a changed page's new link is crawled
    # The round of checks closed, the schedule carried in Redis, as the files have them.
    assert redis_server.client().hget("rc:files", "round.txt") is None
    assert not (files / "projects" / "rc" / "round.txt").exists()
    schedule = redis_log(redis_server, "rc", "schedule")   # compacted: the latest line of each URL
    assert len(schedule) == 4 and fields(schedule, 0, 5) == \
        {(site.url(p), "1") for p in ("/", "/a", "/b")} | {(site.url("/c"), "0")}
    assert redis_server.client().hget("rc:files", "unlinked.txt") is not None

    # status, export and report tell the same story.
    on_files = run(files, "status", "rc").stdout
    on_redis = run(redis_, "status", "rc", "--store", store).stdout
    line = next(x for x in on_files.splitlines() if x.startswith("recrawl "))
    twin = next(x for x in on_redis.splitlines() if x.startswith("recrawl "))
    assert line.split(": ", 1)[1] == twin.split(": ", 1)[1] == \
        "3 checked: 1 changed, 2 unchanged, 0 removed, 0 failed; 1 new page"
    assert any(x.startswith("due       0 crawled pages due") and "--store" in x for x in on_redis.splitlines()), on_redis
    assert exported(redis_, "rc", store) == exported(files, "rc")
    page = Path(run(redis_, "report", "rc", "--store", store).stdout.strip()).read_text()
    assert "<h2>Recrawl</h2>" in page

    # Nothing due now: said as on files, with --all's hint.
    out = run(redis_, "recrawl", "rc", "--delay", DELAY, "--store", store).stderr
    assert "recrawl: nothing is due" in out and "recrawl rc --all" in out, out


def test_a_recheck_on_redis_sends_the_validators_it_was_served(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite]) -> None:
    """The worker reads the schedule from Redis: its conditional request carries the ETag."""
    site = make_site("127.0.0.2")
    site.route("/", body="<p>same</p>", headers={"ETag": '"v1"'})
    crawl(tmp_path, "etag", site.url("/"), store=redis_server.url)
    site.route("/", handler=lambda info: (304, {"ETag": '"v1"'}, b"")
               if info.headers.get("If-None-Match") == '"v1"' else (200, {"ETag": '"v1"'}, b"<p>same</p>"))
    run(tmp_path, "recrawl", "etag", "--all", "--delay", DELAY, "--store", redis_server.url)
    assert fields(redis_log(redis_server, "etag", "checks"), 0, 1, 2) == {(site.url("/"), "304", "unchanged")}


def test_recrawl_failed_on_redis_fetches_failed_urls_again_as_on_files(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite]) -> None:
    site = make_site("127.0.0.2")
    site.route("/", body='<a href="/gone">g</a><a href="/ok">o</a>')
    site.route("/ok", body="<p>ok</p>")
    site.route("/gone", status=404, body="no")
    files, redis_ = tmp_path / "files", tmp_path / "redis"
    store = redis_server.url
    for cwd, s in ((files, None), (redis_, store)):
        cwd.mkdir()
        crawl(cwd, "rf", site.url("/"), store=s)
    assert counts(redis_server, "rf")["failed"] == 1
    site.route("/gone", body="<p>back</p>")
    for cwd, s in ((files, None), (redis_, store)):
        where = ("--store", s) if s else ()
        out = run(cwd, "recrawl", "rf", "--failed", "--delay", DELAY, *where).stderr
        assert "recrawl: 1 failed URL queued again" in out, out
    assert counts(redis_server, "rf")["failed"] == 0
    assert redis_log(redis_server, "rf", "failed") == file_log(files, "rf", "failed.txt") == []
    assert recorded(redis_server.client(), "rf") == {site.url(p): 1 for p in ("/", "/ok", "/gone")}
    assert exported(redis_, "rf", store) == exported(files, "rf") == \
        {site.url(p): "crawled" for p in ("/", "/ok", "/gone")}
    status = run(redis_, "status", "rf", "--store", store).stdout
    assert "failed    0" in status and "crawled   3" in status, status


# ---------------------------------------------------------------------------- stats


def test_a_redis_crawl_keeps_stats_rows_for_report_status_and_pull(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite]) -> None:
    site = make_site("127.0.0.2")
    n = 40
    for i in range(n):
        site.route("/" if i == 0 else f"/p{i}", body="".join(f'<a href="/p{k}">{k}</a>' for k in (2 * i + 1, 2 * i + 2)
                                                               if k < n), delay=0.02)
    store = redis_server.url
    out = crawl(tmp_path, "st", site.url("/"), store=store).stderr
    summary = next(x for x in out.splitlines() if x.startswith("done: crawled 40"))
    assert "(0.0 pages/s)" not in summary, summary
    rows = redis_log(redis_server, "st", "stats")
    assert len(rows) >= 2, rows
    last = rows[-1].split("\t")
    assert last[2:6] == ["0", "0", "40", "0"] and last[6] == "40", last   # pending, flight, crawled, failed, discovered
    assert int(last[8]) > 0   # bytes, from the crawled log in Redis
    page = Path(run(tmp_path, "report", "st", "--store", store).stdout.strip()).read_text()
    assert "no data yet (needs two stats samples)" not in page
    assert "Frontier size" in page
    status = run(tmp_path, "status", "st", "--store", store).stdout
    assert "due       40 crawled pages due" not in status and "due       0 crawled pages due" in status, status
    # pull writes them as stats.txt; status and report on the files read them.
    other = tmp_path / "other"
    other.mkdir()
    run(other, "pull", "st", "--store", store)
    pulled = other / "projects" / "st"
    assert data_lines((pulled / "stats.txt").read_text()) == rows
    on_files = run(other, "status", "st").stdout
    assert "discovery " in on_files, on_files
    # push it back: the rows go back to the log they came from, not to a file of their own
    run(other, "push", "st", "--store", store, "--replace")
    assert redis_log(redis_server, "st", "stats") == rows
    assert redis_server.client().hget("st:files", "stats.txt") is None


def test_redis_stats_feed_the_trap_alarm(tmp_path: Path, redis_server: RedisServer) -> None:
    """The census of a crawl in Redis, from its pending URLs: a pattern taking over the queue
    and growing fires the alarm, as the file store's recorder does (test_traps)."""
    from spider.cluster import ClusterStore, RedisStats
    from spider.records import QueueEntry

    store = ClusterStore.connect(redis_server.url, "trap", tmp_path)
    store.add(QueueEntry(f"http://a.test/doc/{i}", 1) for i in range(50))
    rec = RedisStats(store)
    n = 0
    for step in range(4):
        store.add(QueueEntry(f"http://a.test/cal/{n + i}/x", 1) for i in range(60))
        n += 60
        rec.sample(50 + n, 0, 0, 0, 0, when=2.0 * step)
        if step < 3:
            assert rec.alarm() is None
    assert rec.alarm() == ("possible trap: a.test/cal/{n}/x is 82% of the pending queue (240 of 290) "
                           "and growing; see --trap and --deny")
    assert len(redis_log(redis_server, "trap", "stats")) == 4


def test_the_census_of_a_big_redis_queue_is_scaled_from_a_sample(
        tmp_path: Path, redis_server: RedisServer, monkeypatch: Any) -> None:
    from spider import cluster
    from spider.records import QueueEntry

    store = cluster.ClusterStore.connect(redis_server.url, "big", tmp_path)
    store.add(QueueEntry(f"http://a.test/cal/{i}", 1) for i in range(300))
    store.add(QueueEntry(f"http://b.test/doc/{i}", 1) for i in range(100))
    monkeypatch.setattr(cluster, "CENSUS_BUDGET", 40)
    census, rechecks, flight = cluster.census_of(store)
    assert census.top(2) == [("a.test/cal/{n}", 300), ("b.test/doc/{n}", 100)]
    assert (rechecks, flight) == (0, set())


def test_status_on_redis_shows_the_trap_alarm_from_the_stats_rows(
        tmp_path: Path, redis_server: RedisServer) -> None:
    from spider.cluster import ClusterStore, RedisStats
    from spider.config import CrawlConfig
    from spider.records import QueueEntry

    store = ClusterStore.connect(redis_server.url, "warn", tmp_path)
    store.save_settings(CrawlConfig(seeds=("http://a.test/",)))
    rec = RedisStats(store)
    for step in range(5):
        store.add(QueueEntry(f"http://a.test/cal/{step * 100 + i}/x", 1) for i in range(100))
        rec.sample(100 * (step + 1), 0, 0, 0, 0, when=1_800_000_000.0 + 2.0 * step)
    status = run(tmp_path, "status", "warn", "--store", redis_server.url).stdout
    assert "WARNING   possible trap: a.test/cal/{n}/x" in status, status


def future_sitemap_site(make_site: Callable[..., TestSite]) -> TestSite:
    """/ and /s1, which the sitemap lists with a lastmod in 2099."""
    site = make_site("127.0.0.2")
    site.route("/", body="<p>home</p>")
    site.route("/s1", body="<p>s1</p>")
    site.route("/sitemap.xml", content_type="application/xml", body=(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{site.url('/s1')}</loc><lastmod>2099-01-01</lastmod></url></urlset>"))
    return site


def test_a_sitemap_lastmod_in_the_future_makes_no_page_due_on_redis(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite]) -> None:
    """A lastmod later than when the sitemap was read counts as that moment (recrawl.cap_lastmod):
    in Redis that moment is a comment line of the lastmod log, as the file's mtime says it."""
    site = future_sitemap_site(make_site)
    crawl(tmp_path, "future", site.url("/"), "--sitemaps", store=redis_server.url)
    assert len(recorded(redis_server.client(), "future")) == 2
    out = run(tmp_path, "recrawl", "future", "--delay", DELAY, "--store", redis_server.url).stderr
    assert "recrawl: nothing is due" in out, out


def test_push_and_pull_keep_when_the_sitemaps_were_read(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite]) -> None:
    """lastmod.txt's mtime (the cap of a lastmod in the future) goes to Redis with its lines and
    comes back as the pulled file's mtime; the file itself comes back byte for byte."""
    import os
    import time

    site = future_sitemap_site(make_site)
    crawl(tmp_path, "moved", site.url("/"), "--sitemaps")
    lastmod = tmp_path / "projects" / "moved" / "lastmod.txt"
    text, read_at = lastmod.read_bytes(), int(lastmod.stat().st_mtime)
    time.sleep(1.1)   # a recrawl now must not take now for when the sitemap was read
    run(tmp_path, "push", "moved", "--store", redis_server.url)
    out = run(tmp_path, "recrawl", "moved", "--delay", DELAY, "--store", redis_server.url).stderr
    assert "recrawl: nothing is due" in out, out
    other = tmp_path / "other"
    other.mkdir()
    run(other, "pull", "moved", "--store", redis_server.url)
    pulled = other / "projects" / "moved" / "lastmod.txt"
    assert pulled.read_bytes() == text and int(os.stat(pulled).st_mtime) == read_at


def test_status_on_redis_lists_each_machine_with_its_hosts_and_rate(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite]) -> None:
    import re
    import time

    from test_cluster import Machine, make_sites

    sites, _ = make_sites(make_site, hosts=2, pages=30)
    m = Machine(tmp_path / "a", "rates", redis_server.url, *(s.url("/") for s in sites))
    try:
        row = None
        end = time.monotonic() + TIMEOUT
        while row is None and m.proc.poll() is None and time.monotonic() < end:
            if not redis_server.client().exists("rates:settings"):   # the crawl is not in Redis yet
                time.sleep(0.05)
                continue
            out = run(tmp_path, "status", "rates", "--store", redis_server.url).stdout
            for line in out.splitlines():
                f = line.split()
                if line.startswith("  ") and f and f[0] == m.owner_prefix.rstrip("/") and int(f[4]) > 0:
                    row = f
            time.sleep(0.2)
        assert row is not None, "status never showed the machine with pages crawled"
        workers, hosts, flight, pages, rate = int(row[1]), int(row[2]), int(row[3]), int(row[4]), float(row[5])
        assert workers == 2 and 1 <= hosts <= 2 and 0 <= flight <= 2 and pages > 0 and rate > 0, row
        assert re.search(r"machines  1 taking part", out), out
    finally:
        m.kill()
        m.proc.communicate()


def test_a_trap_on_a_redis_crawl_is_said_on_the_terminal(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite]) -> None:
    """A calendar that links to ten new days from every day: the pending queue fills with one
    pattern, and the machine's parent warns as a file crawl's does."""
    site = make_site("127.0.0.2")

    def day(info: Any) -> tuple[int, dict[str, str], bytes]:
        n = int(info.path.rsplit("/", 1)[1]) if info.path.startswith("/cal/") else 0
        links = "".join(f'<a href="/cal/{10 * n + k}">{k}</a>' for k in range(1, 11))
        return 200, {"Content-Type": "text/html"}, f"<p>day {n}</p>{links}".encode()

    site.route("/", handler=day)
    for n in range(1, 200):
        site.route(f"/cal/{n}", handler=day)
    out = run(tmp_path, "crawl", "cal", site.url("/"), "--no-traps", "--delay", "0.1", "--workers", "1",
              "--max-pages", "90", "--store", redis_server.url).stderr
    assert "warning: possible trap: 127.0.0.2" in out and "/cal/{n} is" in out, out
