"""A good citizen: robots.txt, nofollow, Retry-After, gone pages, per-host politeness and budgets.

Two kinds of tests:

- the worker (``spider.spider.Spider``) on a ``MemoryStore`` with a fake clock, against loopback
  TestSites: fast and deterministic, for what happens minutes later (robots.txt unavailable,
  parked hosts) and for exact orderings. Where a request time matters, the site's handler records
  the fake clock, so "server-side" times need no real waiting;
- real crawls, ``python main.py crawl ... --projects-dir``, as a user runs them, checked against
  the requests the sites saw (server-side counts and timestamps) and the project files.
"""

from __future__ import annotations

import calendar
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator, Optional

import pytest

from sitekit import TestSite, tree_links
from spider.config import CrawlConfig
from spider.crawl import budget_lines
from spider.frontier.memory import MemoryStore
from spider.politeness import PARK_FOR, HostState, parse_host_line
from spider.records import QueueEntry, is_data, parse_queue_line
from spider.robots import cache_name, load as load_robots
from conftest import FakeClock, run_until_done as run
from spider.spider import Spider, robots_hop_ready
from spider.urls import host_key

MAIN = str(Path(__file__).resolve().parent.parent / "main.py")
TIMEOUT = 60
TEXT = "text/plain"
TOLERANCE = 0.03   # server-side timestamps vs the crawler's reservations (clock granularity)
T0 = 1_700_000_000.0


# =========================================================================== helpers: files


def rows(path: Path) -> list[list[str]]:
    """Data lines of a TAB-separated state file, split into fields."""
    if not path.exists():
        return []
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if is_data(line)]


def urls_in(path: Path) -> list[str]:
    return [r[0] for r in rows(path)]


def queue_entries(folder: Path) -> list[QueueEntry]:
    return [parse_queue_line("\t".join(r)) for r in rows(folder / "queue.txt")]


def html(*hrefs: str, head: str = "", rel: Optional[dict[str, str]] = None) -> str:
    rel = rel or {}
    items = "".join(
        f'<a href="{h}"' + (f' rel="{rel[h]}"' if h in rel else "") + f">{h}</a>\n" for h in hrefs)
    return f"<!DOCTYPE html><html><head>{head}</head><body>{items}</body></html>"


def closed_port(host: str) -> int:
    """A port on ``host`` where nothing listens (connections are refused)."""
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def gaps(times: list[float]) -> list[float]:
    times = sorted(times)
    return [b - a for a, b in zip(times, times[1:])]


# =========================================================================== helpers: real crawls


def crawl(projects: Path, name: str, *args: str, timeout: float = TIMEOUT, ok: bool = True
          ) -> subprocess.CompletedProcess:
    """``python main.py crawl NAME ARGS --projects-dir PROJECTS``; the whole process group is
    killed if it outlives ``timeout`` (so a wedged crawl fails the test instead of hanging it)."""
    cmd = [sys.executable, MAIN, "crawl", name, *args, "--projects-dir", str(projects)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=10)
        pytest.fail(f"crawl did not finish within {timeout} s; stderr:\n{err}")
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    assert "Traceback" not in err, err
    if ok:
        assert result.returncode == 0, err
    return result


def status(projects: Path, name: str) -> str:
    result = subprocess.run([sys.executable, MAIN, "status", name, "--projects-dir", str(projects)],
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    return result.stdout


STATUS_ROW = re.compile(r"^(?P<host>\S+)\s+(?P<crawled>\d+)\s+(?P<failed>\d+)\s+(?P<pending>\d+)\s+"
                        r"(?P<flight>\d+)\s+(?P<delay>\d+\.\ds)\s+(?P<next>\S+)\s+(?P<rest>.*)$")


def status_rows(text: str) -> dict[str, dict[str, str]]:
    """The per-host table of ``status``: host -> its columns (``rest`` = robots and state)."""
    out = {}
    for line in text.splitlines():
        m = STATUS_ROW.match(line)
        if m:
            out[m["host"]] = m.groupdict()
    return out


def hosts_txt(folder: Path) -> dict[str, tuple]:
    out = {}
    for line in (folder / "hosts.txt").read_text(encoding="utf-8").splitlines():
        if is_data(line):
            host, state = parse_host_line(line)
            out[host] = state
    return out


def robots_route(site: TestSite, text: str, **kw) -> None:
    site.route("/robots.txt", body=text, content_type=TEXT, **kw)


def hkey(site: TestSite) -> str:
    return f"{site.host}:{site.port}"


# =========================================================================== helpers: the worker




Worker = Callable[..., "tuple[Spider, MemoryStore, FakeClock]"]


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    """Factory: ``worker(*seed_urls, **config)`` -> (spider, store, clock), seeds queued.

    robots.txt is obeyed (the point of this file); its cache lives in a folder under tmp_path.
    """
    spiders: list[Spider] = []

    def factory(*seeds: str, max_per_host: Optional[int] = None, **kw) -> tuple[Spider, MemoryStore, FakeClock]:
        store = MemoryStore(max_per_host=max_per_host)
        folder = tmp_path / f"worker{len(spiders)}"
        folder.mkdir()
        store.folder = folder  # type: ignore[attr-defined]  # where robots/ goes
        values = dict(seeds=seeds, workers=1, delay=0.0, max_depth=5, connect_timeout=1.0,
                      read_timeout=1.0, max_time=2.0, max_bytes=256 * 1024)
        values.update(kw)
        clock = FakeClock()
        spider = Spider(CrawlConfig(**values), store, clock=clock, wait=clock.wait)
        spiders.append(spider)
        store.add(QueueEntry(s) for s in seeds)
        return spider, store, clock

    yield factory
    for s in spiders:
        s.close()


def crawl_one(spider: Spider, store: MemoryStore, clock: FakeClock) -> str:
    result = store.claim(1, clock(), spider.delay_for)
    assert len(result.claims) == 1, result
    spider.crawl_page(result.claims[0])
    return result.claims[0].url


def record_lines(lines: list[str]) -> list[list[str]]:
    return [line.rstrip("\n").split("\t") for line in lines]


def logged(store: MemoryStore, name: str) -> list[list[str]]:
    return [line.split("\t") for text in store.logs.get(name, []) for line in text.splitlines()]


def stamped(site: TestSite, clock: FakeClock, times: list[tuple[float, str]], path: str,
            answers: Callable[[int], tuple[int, Optional[dict], str]], content_type: str = "text/html") -> None:
    """Route ``path`` to ``answers(count)``, recording the *fake* time of each request."""
    def handler(info):  # type: ignore[no-untyped-def]
        times.append((clock.now, info.path))
        return answers(info.count)
    site.route(path, handler=handler, content_type=content_type)


# =========================================================================== robots.txt: real crawls


def test_disallowed_urls_are_never_requested_and_rejected_with_their_source(site: TestSite, projects_dir: Path) -> None:
    robots_route(site, "User-agent: *\nDisallow: /private/\n")
    site.route("/", body=html("/private/a.html", "/public.html"))
    site.route("/public.html", body=html("/private/b.html", "/private/a.html", "/"))
    for p in ("/private/a.html", "/private/b.html", "/private/seed.html"):
        site.route(p, body=html())
    crawl(projects_dir, "r", site.url("/"), site.url("/private/seed.html"), "--workers", "2", "--delay", "0")
    folder = projects_dir / "r"
    assert not [p for p in site.hits if p.startswith("/private/")], site.hits
    assert site.hits["/robots.txt"] == 1
    assert sorted(urls_in(folder / "crawled.txt")) == [site.url("/"), site.url("/public.html")]
    rejected = {(r[0], r[1], r[2]) for r in rows(folder / "rejected.txt")}
    assert (site.url("/private/a.html"), "robots", site.url("/")) in rejected or \
        (site.url("/private/a.html"), "robots", site.url("/public.html")) in rejected
    assert (site.url("/private/b.html"), "robots", site.url("/public.html")) in rejected
    assert (site.url("/private/seed.html"), "robots", "-") in rejected    # a seed: refused just before the request
    assert {r[1] for r in rows(folder / "rejected.txt")} == {"robots"}
    assert urls_in(folder / "failed.txt") == [] and queue_entries(folder) == []
    cached = load_robots((folder / "robots" / cache_name(f"127.0.0.1:{site.port}")).read_text(encoding="utf-8"))
    assert cached.mode == "rules" and cached.status == 200


def test_allow_overrides_a_shorter_disallow(site: TestSite, projects_dir: Path) -> None:
    robots_route(site, "User-agent: *\nDisallow: /docs/\nAllow: /docs/public/\n")
    site.route("/", body=html("/docs/secret.html", "/docs/public/page.html", "/docs/publicity.html"))
    for p in ("/docs/secret.html", "/docs/public/page.html", "/docs/publicity.html"):
        site.route(p, body=html())
    crawl(projects_dir, "a", site.url("/"), "--delay", "0")
    assert site.hits["/docs/public/page.html"] == 1
    assert site.hits["/docs/secret.html"] == 0 and site.hits["/docs/publicity.html"] == 0
    rejected = {r[0]: r[1] for r in rows(projects_dir / "a" / "rejected.txt")}
    assert rejected == {site.url("/docs/secret.html"): "robots", site.url("/docs/publicity.html"): "robots"}


def test_wildcard_rules(site: TestSite, projects_dir: Path) -> None:
    robots_route(site, "User-agent: *\nDisallow: /*.pdf$\nDisallow: /*?sort=\n")
    site.route("/", body=html("/files/a.pdf", "/files/a.pdf?download=1", "/list?sort=asc", "/list?page=2",
                              "/files/a.pdf.html"))
    site.route("/files/a.pdf", body=html())
    site.route("/files/a.pdf.html", body=html())
    site.route("/list", body=html())
    # ?sort= is also a presentation parameter, which the trap rules refuse first
    crawl(projects_dir, "w", site.url("/"), "--delay", "0", "--trap", "presentation-params=off")
    hits = site.hits
    assert hits["/files/a.pdf"] == 0 and hits["/list?sort=asc"] == 0
    assert hits["/files/a.pdf?download=1"] == 1 and hits["/list?page=2"] == 1 and hits["/files/a.pdf.html"] == 1
    rejected = {r[0] for r in rows(projects_dir / "w" / "rejected.txt") if r[1] == "robots"}
    assert rejected == {site.url("/files/a.pdf"), site.url("/list?sort=asc")}


def test_robots_404_allows_everything(site: TestSite, projects_dir: Path) -> None:
    site.route("/", body=html("/private/a.html", "/b.html"))
    site.route("/private/a.html", body=html())
    site.route("/b.html", body=html())
    crawl(projects_dir, "n", site.url("/"), "--delay", "0")
    folder = projects_dir / "n"
    assert site.hits["/robots.txt"] == 1
    assert sorted(urls_in(folder / "crawled.txt")) == sorted(site.url(p) for p in ("/", "/private/a.html", "/b.html"))
    assert rows(folder / "rejected.txt") == []
    cached = load_robots((folder / "robots" / cache_name(f"127.0.0.1:{site.port}")).read_text(encoding="utf-8"))
    assert (cached.mode, cached.status) == ("allow-all", 404)


@pytest.mark.parametrize("unavailable", ["500", "refused"])
def test_a_host_whose_robots_txt_is_unavailable_is_not_crawled_while_the_rest_goes_on(
        unavailable: str, make_site: Callable[..., TestSite], projects_dir: Path) -> None:
    """robots.txt answering 500 (or not answering at all): no page of that host is requested, its
    URL stays pending with no attempt spent, and the other host is crawled. (The paused host would
    keep the crawl waiting for 5 minutes, so --max-pages ends it.)"""
    good = make_site("127.0.0.2")
    good.route("/", body=html("/a", "/b"))
    good.route("/a", body=html())
    good.route("/b", body=html())
    if unavailable == "500":
        bad = make_site("127.0.0.1")
        bad.route("/robots.txt", status=500, body="oops", content_type=TEXT)
        bad.route("/", body=html("/x"))
        bad_seed = bad.url("/")
    else:
        bad = None
        bad_seed = f"http://127.0.0.4:{closed_port('127.0.0.4')}/"
    result = crawl(projects_dir, "u", bad_seed, good.url("/"), "--workers", "2", "--delay", "0",
                   "--max-pages", "3", "--max-attempts", "2")
    folder = projects_dir / "u"
    assert sorted(urls_in(folder / "crawled.txt")) == sorted(good.url(p) for p in ("/", "/a", "/b"))
    assert urls_in(folder / "failed.txt") == []
    if bad is not None:
        assert bad.hits == Counter({"/robots.txt": 1})
    fetched = [r[5] for r in rows(folder / "fetch.log")]
    assert [u for u in fetched if u.startswith(bad_seed)] == [bad_seed + "robots.txt"]
    assert [(e.url, e.attempts) for e in queue_entries(folder)] == [(bad_seed, 0)]
    bad_host = host_key(bad_seed)
    state = hosts_txt(folder)[bad_host]
    assert state.next_allowed > time.time() + 240          # paused until robots.txt is tried again
    assert "--max-pages 3 reached; 1 URLs still pending" in result.stderr, result.stderr
    row = status_rows(status(projects_dir, "u"))[bad_host]
    assert row["pending"] == "1" and row["crawled"] == "0"
    assert row["rest"].startswith("disallow-all (500)" if unavailable == "500" else "disallow-all (no")


def test_robots_txt_redirect_is_followed(site: TestSite, projects_dir: Path) -> None:
    site.add_redirect("/robots.txt", "/real-robots.txt")
    site.route("/real-robots.txt", body="User-agent: *\nDisallow: /secret\n", content_type=TEXT)
    site.route("/", body=html("/secret", "/open"))
    site.route("/secret", body=html())
    site.route("/open", body=html())
    crawl(projects_dir, "rr", site.url("/"), "--delay", "0")
    folder = projects_dir / "rr"
    assert site.hits["/robots.txt"] == 1 and site.hits["/real-robots.txt"] == 1
    assert site.hits["/secret"] == 0 and site.hits["/open"] == 1
    assert [r[:2] for r in rows(folder / "rejected.txt")] == [[site.url("/secret"), "robots"]]
    cached = load_robots((folder / "robots" / cache_name(f"127.0.0.1:{site.port}")).read_text(encoding="utf-8"))
    assert cached.mode == "rules" and "Disallow: /secret" in cached.body
    # --delay 0: the hop is sent at once (it used to wait for the 30 s hold of robots.txt pending)
    times = {path: t for t, path, _ in site.log}
    assert times["/real-robots.txt"] - times["/robots.txt"] < 5, site.log


def test_robots_txt_redirect_hops_respect_the_delay(site: TestSite, projects_dir: Path) -> None:
    site.add_redirect("/robots.txt", "/real-robots.txt")
    site.route("/real-robots.txt", body="User-agent: *\nDisallow:\n", content_type=TEXT)
    site.route("/", body=html())
    crawl(projects_dir, "rd", site.url("/"), "--delay", "0.5", "--workers", "1")
    times = [t for t, _, _ in site.log]
    assert len(times) == 3
    assert min(gaps(times)) >= 0.5 - TOLERANCE, gaps(times)


@pytest.mark.parametrize("delay", [0.0, 0.5])
def test_robots_txt_redirect_hops_wait_only_the_real_delay(site: TestSite, worker: Worker, delay: float) -> None:
    # The fetch holds the host for ROBOTS_PENDING (30 s) so no other worker asks it before its
    # rules are known; a same-host hop must not wait for that hold, only for --delay.
    spider, store, clock = worker(site.url("/"), delay=delay)
    times: list[tuple[float, str]] = []
    stamped(site, clock, times, "/robots.txt", lambda n: (301, {"Location": "/real-robots.txt"}, ""), TEXT)
    stamped(site, clock, times, "/real-robots.txt", lambda n: (200, None, "User-agent: *\nDisallow:\n"), TEXT)
    stamped(site, clock, times, "/", lambda n: (200, None, html()))
    run(spider)
    assert [p for _, p in times] == ["/robots.txt", "/real-robots.txt", "/"]
    assert [t - T0 for t, _ in times] == pytest.approx([0.0, delay, 2 * delay], abs=0.01)


def test_robots_hop_ready() -> None:
    pending = HostState(next_allowed=T0 + 30)                   # this fetch's own ROBOTS_PENDING hold
    assert robots_hop_ready(pending, T0, 0.0) == T0
    assert robots_hop_ready(pending, T0, 2.0) == T0 + 2
    assert robots_hop_ready(replace(pending, reason="retry-after 429"), T0, 2.0) == T0 + 30   # the host's own
    assert robots_hop_ready(HostState(next_allowed=T0 + 4), None, 2.0) == T0 + 4   # a host not asked yet


def test_robots_txt_is_fetched_once_per_host_by_four_workers(site: TestSite, make_site: Callable[..., TestSite],
                                                          projects_dir: Path) -> None:
    other = make_site("127.0.0.2")
    seeds = []
    for s in (site, other):
        robots_route(s, "User-agent: *\nDisallow: /no\n", delay=0.4)    # slow: the workers pile up on it
        for i in range(10):
            s.route(f"/s{i}", body=html("/no"))
            seeds.append(s.url(f"/s{i}"))
        s.route("/no", body=html())
    crawl(projects_dir, "once", *seeds, "--workers", "4", "--delay", "0")
    folder = projects_dir / "once"
    for s in (site, other):
        assert s.hits["/robots.txt"] == 1, s.hits
        assert s.hits["/no"] == 0
        assert sum(s.hits.values()) == 11
    assert len(urls_in(folder / "crawled.txt")) == 20
    pids = {r[1] for r in rows(folder / "fetch.log") if not r[5].endswith("/robots.txt")}
    assert len(pids) >= 2, "only one worker fetched pages: the test did not exercise concurrency"
    assert sorted(p.name for p in (folder / "robots").glob("*.txt")) == sorted(
        [cache_name(f"127.0.0.1:{site.port}"), cache_name(f"127.0.0.2:{other.port}")])


def test_crawl_delay_spaces_the_requests(site: TestSite, projects_dir: Path) -> None:
    robots_route(site, "User-agent: *\nCrawl-delay: 1\n")
    site.route("/", body=html("/a", "/b"))
    site.route("/a", body=html("/b"))
    site.route("/b", body=html())
    crawl(projects_dir, "cd", site.url("/"), "--workers", "2", "--delay", "0")
    times = [t for t, _, _ in site.log]
    assert len(times) == 4                                  # robots.txt, /, /a, /b
    assert min(gaps(times)) >= 1.0 - TOLERANCE, gaps(times)


def test_ignore_robots_warns_and_fetches_disallowed_pages(site: TestSite, projects_dir: Path) -> None:
    robots_route(site, "User-agent: *\nDisallow: /\n")
    site.route("/", body=html("/private/a.html"))
    site.route("/private/a.html", body=html())
    result = crawl(projects_dir, "ig", site.url("/"), "--ignore-robots", "--delay", "0")
    assert re.search(r"warning: --ignore-robots", result.stderr), result.stderr
    assert site.hits["/robots.txt"] == 0
    assert site.hits["/"] == 1 and site.hits["/private/a.html"] == 1
    folder = projects_dir / "ig"
    assert rows(folder / "rejected.txt") == []
    assert not (folder / "robots").exists() or not list((folder / "robots").glob("*.txt"))
    # the setting is saved: a resume obeys it too, and says so again
    again = crawl(projects_dir, "ig", site.url("/new"), "--delay", "0")
    assert "--ignore-robots" in again.stderr and site.hits["/robots.txt"] == 0


# =========================================================================== robots.txt: the worker


def test_robots_5xx_releases_the_claim_and_pauses_the_host_for_5_minutes(site: TestSite, worker: Worker) -> None:
    site.route("/robots.txt", content_type=TEXT, handler=lambda info: (
        (500, None, "down") if info.count == 1 else (200, None, "User-agent: *\nDisallow: /private/\n")))
    site.route("/", body=html("/a", "/private/x"))
    site.route("/a", body=html())
    seed = site.url("/")
    spider, store, clock = worker(seed)
    host = host_key(seed)
    crawl_one(spider, store, clock)
    assert site.hits == Counter({"/robots.txt": 1})          # the page itself was not requested
    assert [(e.url, e.attempts) for e in store.pending] == [(seed, 0)] and not store.inflight
    assert not store.crawled and not store.failed and not store.logs.get("rejected")
    assert spider.robots.known(host).label() == "disallow-all (500)"
    # whatever the worker does now, the host waits: claims (if any) are handed back untouched
    for _ in range(5):
        result = store.claim(4, clock(), spider.delay_for)
        for c in result.claims:
            spider.crawl_page(c)
    assert site.hits == Counter({"/robots.txt": 1})
    assert [(e.url, e.attempts) for e in store.pending] == [(seed, 0)] and not store.inflight
    assert store.host_state(host).next_allowed == pytest.approx(T0 + 300, abs=1)
    clock.now = T0 + 299
    waiting = store.claim(4, clock(), spider.delay_for)
    assert waiting.claims == [] and waiting.wait_until == pytest.approx(T0 + 300, abs=1)
    assert not waiting.finished
    clock.now = T0 + 301
    run(spider)                                               # robots.txt is asked again, then the pages
    assert site.hits["/robots.txt"] == 2 and site.hits["/"] == 1
    assert site.hits["/a"] == 1 and site.hits["/private/x"] == 0
    assert sorted(r[0] for r in record_lines(store.crawled)) == [seed, site.url("/a")]
    assert [r[:3] for r in logged(store, "rejected")] == [[site.url("/private/x"), "robots", seed]]


def test_robots_unreachable_host_is_given_up_after_max_attempts(site: TestSite, worker: Worker) -> None:
    dead = f"http://127.0.0.4:{closed_port('127.0.0.4')}/"
    site.route("/", body=html("/a"))
    site.route("/a", body=html())
    spider, store, clock = worker(dead, site.url("/"), max_attempts=2)
    for round_ in range(3):       # "try robots.txt, wait 5 minutes", until it is given up on
        for _ in range(50):
            result = store.claim(4, clock(), spider.delay_for)
            for c in result.claims:
                spider.crawl_page(c)
            if not result.claims:
                break
        if round_ == 0:           # the first failure keeps the URL, without spending an attempt
            assert [(e.url, e.attempts) for e in store.pending] == [(dead, 0)]
        clock.now = max(clock.now, store.host_state(host_key(dead)).next_allowed) + 1
    fetched = [r[5] for r in logged(store, "fetch")]
    assert fetched.count(dead + "robots.txt") == 2 and dead not in fetched   # the page: never
    assert sorted(r[0] for r in record_lines(store.crawled)) == [site.url("/"), site.url("/a")]
    assert [r[:2] for r in record_lines(store.failed)] == [[dead, "robots.txt unavailable after 2 attempts"]]
    assert store.pending == []


@pytest.mark.parametrize("crawl_delay, delay, max_delay, expected", [
    ("3", 0.5, 60.0, 3.0),          # Crawl-delay raises the delay
    ("0.1", 0.5, 60.0, 0.5),        # never below --delay
    ("1000", 0.0, 5.0, 5.0),        # capped by --max-delay
])
def test_crawl_delay_sets_the_floor(site: TestSite, worker: Worker, crawl_delay: str, delay: float,
                                    max_delay: float, expected: float) -> None:
    spider, store, clock = worker(site.url("/"), delay=delay, max_delay=max_delay)
    times: list[tuple[float, str]] = []
    stamped(site, clock, times, "/robots.txt", lambda n: (200, None, f"User-agent: *\nCrawl-delay: {crawl_delay}\n"), TEXT)
    stamped(site, clock, times, "/", lambda n: (200, None, html("/a")))
    stamped(site, clock, times, "/a", lambda n: (200, None, html()))
    host = host_key(site.url("/"))
    assert spider.floor(host) == delay                        # robots.txt not fetched yet
    run(spider)
    assert spider.floor(host) == expected and spider.delay_for(host) == expected
    # robots.txt took the first slot; each page waited one (Crawl-)delay after the previous request
    assert [p for _, p in times] == ["/robots.txt", "/", "/a"]
    assert [t - T0 for t, _ in times] == pytest.approx([0.0, expected, 2 * expected], abs=0.01)


def test_crawl_delay_holds_for_several_start_urls_of_one_host(site: TestSite, worker: Worker) -> None:
    seeds = [site.url(p) for p in ("/", "/c", "/d")]
    spider, store, clock = worker(*seeds)
    times: list[tuple[float, str]] = []
    stamped(site, clock, times, "/robots.txt", lambda n: (200, None, "User-agent: *\nCrawl-delay: 1\n"), TEXT)
    for p in ("/", "/c", "/d"):
        stamped(site, clock, times, p, lambda n: (200, None, html()))
    run(spider)
    assert len(times) == 4 and times[0][1] == "/robots.txt"
    assert min(gaps([t for t, _ in times])) >= 1.0, times


def test_crawl_delay_holds_across_workers_right_after_robots_was_fetched(site: TestSite, tmp_path: Path) -> None:
    store = MemoryStore()
    store.folder = tmp_path  # type: ignore[attr-defined]
    clock = FakeClock()
    times: list[tuple[float, str]] = []
    stamped(site, clock, times, "/robots.txt", lambda n: (200, None, "User-agent: *\nCrawl-delay: 0.5\n"), TEXT)
    for p in ("/x", "/y", "/z"):
        stamped(site, clock, times, p, lambda n: (200, None, html()))
    config = CrawlConfig(seeds=(site.url("/"),), workers=2, delay=0.0, connect_timeout=1.0, read_timeout=1.0,
                         max_time=2.0)
    a = Spider(config, store, clock=clock, wait=clock.wait)
    b = Spider(config, store, clock=clock, wait=clock.wait)
    try:
        b.add_links_to_queue("http://other.example/page", [site.url("/x"), site.url("/y"), site.url("/z")], 0)
        first = store.claim(1, clock(), a.delay_for).claims
        a.crawl_page(first[0])                                # worker A fetches robots.txt (and hands /x back)
        assert [p for _, p in times] == ["/robots.txt"]
        clock.now = T0 + 0.6                                  # the host's slot has come
        claims = [(b, store.claim(1, clock(), b.delay_for).claims), (a, store.claim(1, clock(), a.delay_for).claims)]
        for spider, taken in claims:
            for c in taken:
                spider.crawl_page(c)
        assert min(gaps([t for t, _ in times])) >= 0.5, times
    finally:
        a.close()
        b.close()


def test_robots_txt_longer_than_max_bytes_still_applies(site: TestSite, worker: Worker) -> None:
    robots_route(site, "User-agent: *\nDisallow: /secret\n" + "# padding padding padding\n" * 200)
    site.route("/", body=html("/secret", "/a"))
    site.route("/a", body=html())
    spider, store, clock = worker(site.url("/"), max_bytes=1000)
    crawl_one(spider, store, clock)   # robots.txt (the page goes back to the queue meanwhile)
    crawl_one(spider, store, clock)
    assert site.hits["/"] == 1, "the start page was not requested: robots.txt counted as unavailable"
    assert site.hits["/secret"] == 0 and site.url("/secret") not in {e.url for e in store.pending}


# =========================================================================== nofollow


def _nofollow_site(site: TestSite) -> None:
    site.route("/", body=html("/a", "/b", rel={"/a": "nofollow"}))
    site.route("/a", body=html())
    site.route("/b", body=html("/c", "/d", head='<meta name="robots" content="index, nofollow">'))
    site.route("/c", body=html())
    site.route("/d", body=html())


def test_nofollow_links_and_pages_are_not_followed(site: TestSite, projects_dir: Path) -> None:
    _nofollow_site(site)
    crawl(projects_dir, "nf", site.url("/"), "--delay", "0")
    hits = site.hits
    assert hits["/"] == hits["/b"] == 1
    assert hits["/a"] == hits["/c"] == hits["/d"] == 0
    rejected = sorted((r[0], r[1], r[2]) for r in rows(projects_dir / "nf" / "rejected.txt"))
    assert rejected == sorted([(site.url("/a"), "nofollow", site.url("/")),
                               (site.url("/c"), "nofollow", site.url("/b")),
                               (site.url("/d"), "nofollow", site.url("/b"))])


def test_follow_nofollow_follows_both(site: TestSite, projects_dir: Path) -> None:
    _nofollow_site(site)
    crawl(projects_dir, "ff", site.url("/"), "--delay", "0", "--follow-nofollow")
    for p in ("/", "/a", "/b", "/c", "/d"):
        assert site.hits[p] == 1, p
    assert rows(projects_dir / "ff" / "rejected.txt") == []


# =========================================================================== Retry-After, 503, 410, 404


def test_429_retry_after_pauses_the_host_then_the_url_is_crawled(site: TestSite, projects_dir: Path) -> None:
    site.route("/", body=html("/a"))
    site.route("/a", handler=lambda info: (429, {"Retry-After": "2"}, "slow down") if info.count == 1
               else (200, None, html("/b")))
    site.route("/b", body=html())
    crawl(projects_dir, "ra", site.url("/"), "--workers", "2", "--delay", "0")
    log = site.log
    refused_at = next(t for t, p, _ in log if p == "/a")
    later = [(t - refused_at, p) for t, p, _ in log if t > refused_at]
    assert later and all(dt >= 2.0 - TOLERANCE for dt, _ in later), later
    assert site.hits["/a"] == 2 and site.hits["/b"] == 1
    folder = projects_dir / "ra"
    crawled = {r[0]: r[1] for r in rows(folder / "crawled.txt")}
    assert crawled == {site.url("/"): "200", site.url("/a"): "200", site.url("/b"): "200"}
    assert rows(folder / "failed.txt") == []


def test_retry_after_holds_for_the_other_urls_of_the_host(site: TestSite, worker: Worker) -> None:
    spider, store, clock = worker(site.url("/"), ignore_robots=True)
    times: list[tuple[float, str]] = []
    stamped(site, clock, times, "/", lambda n: (200, None, html("/a", "/b", "/c")))
    stamped(site, clock, times, "/a", lambda n: (429, {"Retry-After": "5"}, "no") if n == 1 else (200, None, html()))
    stamped(site, clock, times, "/b", lambda n: (200, None, html()))
    stamped(site, clock, times, "/c", lambda n: (200, None, html()))
    run(spider)
    assert sorted(p for _, p in times) == ["/", "/a", "/a", "/b", "/c"]
    i = [p for _, p in times].index("/a")
    refused_at = times[i][0]
    too_soon = [(t - refused_at, p) for t, p in times[i + 1:] if t < refused_at + 5]
    assert too_soon == [], times


def test_a_success_clears_the_retry_after_state(site: TestSite, worker: Worker) -> None:
    site.route("/", body=html("/a"))
    site.route("/a", handler=lambda info: (429, {"Retry-After": "1"}, "no") if info.count == 1
               else (200, None, html("/b")))
    site.route("/b", body=html())
    spider, store, clock = worker(site.url("/"), ignore_robots=True)
    run(spider)
    assert site.hits["/a"] == 2 and site.hits["/b"] == 1
    assert store.host_state(host_key(site.url("/"))).reason == "-"


def test_a_garbage_retry_after_counts_as_none(site: TestSite, worker: Worker) -> None:
    """Superscript two (one Latin-1 byte in a header) passes str.isdigit(); it must not break the worker."""
    site.route("/", body=html("/a"))
    site.route("/a", handler=lambda info: (429, {"Retry-After": "\xb2"}, "no") if info.count == 1
               else (200, None, html()))
    spider, store, clock = worker(site.url("/"), ignore_robots=True)
    run(spider)
    assert site.hits["/a"] == 2
    assert sorted(r[0] for r in record_lines(store.crawled)) == [site.url("/"), site.url("/a")]
    assert store.failed == [] and not store.logs.get("errors")
    assert store.host_state(host_key(site.url("/"))).delay == pytest.approx(0.75)   # slowed to 1 s, then x0.75


def test_503_then_200_is_retried_and_crawled(site: TestSite, projects_dir: Path) -> None:
    site.route("/", body=html("/a"))
    site.route("/a", handler=lambda info: (503, None, "busy") if info.count == 1 else (200, None, html()))
    crawl(projects_dir, "s5", site.url("/"), "--delay", "0")
    folder = projects_dir / "s5"
    assert site.hits["/a"] == 2
    t503, t200 = [t for t, p, _ in site.log if p == "/a"]
    assert t200 - t503 >= 1.0 - TOLERANCE                     # the delay doubled to at least 1 s
    assert {r[0]: r[1] for r in rows(folder / "crawled.txt")} == {site.url("/"): "200", site.url("/a"): "200"}
    assert rows(folder / "failed.txt") == []
    state = hosts_txt(folder)[hkey(site)]
    assert state.delay == pytest.approx(0.75)                 # 1 s after the 503, x0.75 after the success


def test_410_is_fetched_once_and_never_again(site: TestSite, projects_dir: Path) -> None:
    site.status("/gone", 410)
    site.route("/", body=html("/gone", "/a", "/b"))
    site.route("/a", body=html("/gone", "/b"))
    site.route("/b", body=html("/gone", "/a"))
    site.route("/later", body=html("/gone", "/c"))
    site.route("/c", body=html("/gone"))
    crawl(projects_dir, "g", site.url("/"), "--workers", "2", "--delay", "0")
    folder = projects_dir / "g"
    assert site.hits["/gone"] == 1
    failed = rows(folder / "failed.txt")
    assert [(r[0], r[1]) for r in failed] == [(site.url("/gone"), "410")]
    crawl(projects_dir, "g", site.url("/later"), "--delay", "0")      # resume with a page linking to it
    assert site.hits["/gone"] == 1 and site.hits["/later"] == 1 and site.hits["/c"] == 1
    assert [(r[0], r[1]) for r in rows(folder / "failed.txt")] == [(site.url("/gone"), "410")]
    assert site.url("/gone") not in {e.url for e in queue_entries(folder)}


def test_confirm_404_asks_twice(site: TestSite, projects_dir: Path) -> None:
    site.route("/", body=html("/missing"))
    crawl(projects_dir, "c4", site.url("/"), "--delay", "0", "--confirm-404")
    assert site.hits["/missing"] == 2
    first, second = [t for t, p, _ in site.log if p == "/missing"]
    assert second - first >= 1.0 - TOLERANCE                 # a retry later, not back to back
    assert [(r[0], r[1]) for r in rows(projects_dir / "c4" / "failed.txt")] == [(site.url("/missing"), "404")]
    site.reset()
    crawl(projects_dir, "n4", site.url("/"), "--delay", "0")
    assert site.hits["/missing"] == 1
    assert [(r[0], r[1]) for r in rows(projects_dir / "n4" / "failed.txt")] == [(site.url("/missing"), "404")]


# =========================================================================== refusing hosts


def test_a_refusing_host_is_tried_max_attempts_times_and_the_rest_goes_on(site: TestSite, projects_dir: Path) -> None:
    # --ignore-robots: with robots.txt obeyed, a refusing host is "robots.txt unavailable" and its
    # URLs wait without attempts (test_a_host_whose_robots_txt_is_unavailable_...)
    dead = f"http://127.0.0.4:{closed_port('127.0.0.4')}/x"
    site.route("/", body=html("/a"))
    site.route("/a", body=html())
    crawl(projects_dir, "dead", dead, site.url("/"), "--ignore-robots", "--delay", "0", "--max-attempts", "2",
          "--connect-timeout", "1")
    folder = projects_dir / "dead"
    assert [r[5] for r in rows(folder / "fetch.log")].count(dead) == 2
    assert [(r[0], r[1]) for r in rows(folder / "failed.txt")] == [(dead, "connection refused after 2 attempts")]
    assert sorted(urls_in(folder / "crawled.txt")) == [site.url("/"), site.url("/a")]
    assert queue_entries(folder) == []
    assert hosts_txt(folder)[host_key(dead)].failures == 2


def test_a_host_is_parked_after_ten_connection_errors(site: TestSite, worker: Worker) -> None:
    port = closed_port("127.0.0.4")
    dead = [f"http://127.0.0.4:{port}/{i}" for i in range(4)]
    site.route("/", body=html("/a", "/b"))
    site.route("/a", body=html())
    site.route("/b", body=html())
    random.seed(7)                                            # retry jitter: a fixed order
    spider, store, clock = worker(*dead, site.url("/"), ignore_robots=True, max_attempts=3)
    run(spider)
    fetches = logged(store, "fetch")                          # utc stamp, pid, what, size, ms, url
    dead_fetches = [r for r in fetches if r[5] in dead]
    assert Counter(r[5] for r in dead_fetches) == Counter({u: 3 for u in dead})    # never beyond --max-attempts
    stamps = [calendar.timegm(time.strptime(r[0], "%Y-%m-%dT%H:%M:%SZ")) for r in dead_fetches]
    assert all(s < T0 + 60 for s in stamps[:10])
    assert all(s >= T0 + PARK_FOR for s in stamps[10:])       # the 11th and 12th wait out the park
    good = [r for r in fetches if r[5].startswith(site.url("/"))]
    assert len(good) == 3
    assert sorted(r[0] for r in record_lines(store.failed)) == sorted(dead)
    assert {r[1] for r in record_lines(store.failed)} == {"connection refused after 3 attempts"}


# =========================================================================== politeness across workers


def test_politeness_across_workers_and_hosts(site: TestSite, make_site: Callable[..., TestSite],
                                             projects_dir: Path) -> None:
    sites = [site, make_site("127.0.0.2"), make_site("127.0.0.3")]
    for s in sites:
        s.add_tree(7, 3)
    crawl(projects_dir, "pol", *(s.url("/") for s in sites), "--workers", "4", "--delay", "0.5",
          "--max-depth", "20")
    spans = []
    everything = []
    for s in sites:
        times = sorted(t for t, _, _ in s.log)
        assert len(times) == 9, s.hits                         # robots.txt + / + 7 pages
        assert min(gaps(times)) >= 0.5 - TOLERANCE, (s.host, gaps(times))
        spans.append(times[-1] - times[0])
        everything += times
    overall = max(everything) - min(everything)
    assert overall < 0.6 * sum(spans), (overall, spans)       # the hosts went on in parallel


# =========================================================================== budgets, status, hosts.txt


def test_max_pages_per_host(site: TestSite, make_site: Callable[..., TestSite], projects_dir: Path) -> None:
    sites = [site, make_site("127.0.0.2")]
    for s in sites:
        s.add_tree(12, 4)
    result = crawl(projects_dir, "hb", *(s.url("/") for s in sites), "--workers", "2", "--delay", "0",
                   "--max-pages-per-host", "5", "--max-depth", "20")
    folder = projects_dir / "hb"
    admitted = Counter(host_key(u) for u in urls_in(folder / "crawled.txt") + urls_in(folder / "failed.txt")
                       + [e.url for e in queue_entries(folder)])
    assert admitted == Counter({hkey(s): 5 for s in sites})
    for s in sites:
        hits = s.hits
        assert hits.pop("/robots.txt") == 1                  # robots.txt is not a page of the budget
        assert sum(hits.values()) == 5 and max(hits.values()) == 1
    over = [r for r in rows(folder / "rejected.txt") if r[1] == "host budget"]
    crawled = set(urls_in(folder / "crawled.txt"))
    for s in sites:                    # every link of an admitted page that did not fit is there
        linked = {s.url(f"/p/{t}.html") for u in crawled if u.startswith(s.url("/p/"))
                  for t in tree_links(int(u.rsplit("/", 1)[1].split(".")[0]), 12, 4)}
        linked |= {s.url(f"/p/{i}.html") for i in range(4)}          # the links of /
        assert {r[0] for r in over if host_key(r[0]) == hkey(s)} == linked - crawled
    assert all(r[2] in crawled for r in over)                          # the page that linked it
    assert re.search(r"--max-pages-per-host 5 reached for 2 host\(s\)", result.stderr), result.stderr
    for s in sites:
        assert hkey(s) in result.stderr
    text = status(projects_dir, "hb")
    table = status_rows(text)
    for s in sites:
        assert table[hkey(s)]["crawled"] == "5"
        assert "host budget reached" in table[hkey(s)]["rest"]
    assert re.search(r"^rejected\s+(\d+)\s+\(host budget \1\)$", text, re.M), text


def test_a_raised_host_budget_is_not_said_to_be_reached(site: TestSite, make_site: Callable[..., TestSite],
                                                        projects_dir: Path) -> None:
    # rejected.txt keeps the 'host budget' lines of every run: the summary used to name every
    # host in them, whatever the budget now. The refused URLs stay refused: the summary says so.
    sites = [site, make_site("127.0.0.2")]
    for s in sites:
        s.add_tree(8, 3)
    seeds = [s.url("/") for s in sites]
    first = crawl(projects_dir, "mph", *seeds, "--delay", "0", "--max-pages-per-host", "5", "--max-depth", "20")
    assert "--max-pages-per-host 5 reached for 2 host(s)" in first.stderr, first.stderr
    assert "rejected.txt ('host budget') and are not queued again" in first.stderr
    again = crawl(projects_dir, "mph", "--max-pages-per-host", "10")
    assert "reached" not in again.stderr, again.stderr
    assert re.search(r"note: \d+ URL\(s\) of 2 host\(s\) refused as 'host budget' by an earlier, lower "
                     r"--max-pages-per-host stay in rejected.txt", again.stderr), again.stderr
    table = status_rows(status(projects_dir, "mph"))
    for s in sites:
        assert table[hkey(s)]["crawled"] == "5" and table[hkey(s)]["rest"].endswith(" ok")
    lowered = crawl(projects_dir, "mph", "--max-pages-per-host", "4")
    assert "--max-pages-per-host 4 reached for 2 host(s)" in lowered.stderr, lowered.stderr


def test_a_host_budget_given_on_resume_holds_for_urls_queued_before(site: TestSite, projects_dir: Path) -> None:
    site.add_tree(12, 4)
    crawl(projects_dir, "late", site.url("/"), "--delay", "0", "--max-pages", "3", "--max-depth", "20")
    queued = [r for r in rows(projects_dir / "late" / "queue.txt")]
    assert len(queued) > 5
    again = crawl(projects_dir, "late", "--max-pages", "200", "--max-pages-per-host", "5")
    assert re.search(r"note: \d+ queued URL\(s\) moved to rejected.txt \(host budget\)", again.stderr), again.stderr
    assert "--max-pages-per-host 5 reached for 1 host(s)" in again.stderr, again.stderr
    table = status_rows(status(projects_dir, "late"))
    assert table[hkey(site)]["crawled"] == "5" and table[hkey(site)]["pending"] == "0"


@pytest.mark.parametrize("refused, known, says", [
    ({}, {}, []),
    ({"a": 3}, {"a": 5}, ["reached for 1 host(s): a;"]),
    ({"a": 3}, {"a": 7}, ["reached for 1 host(s): a;"]),                 # a lower budget now
    ({"a": 3}, {"a": 4}, ["note: 3 URL(s) of 1 host(s)"]),              # raised since the refusals
    ({"a": 3, "b": 2}, {"a": 5, "b": 1}, ["reached for 1 host(s): a;", "note: 2 URL(s) of 1 host(s)"]),
])
def test_budget_lines(refused: dict, known: dict, says: list[str]) -> None:
    lines = budget_lines(5, refused, known)
    assert len(lines) == len(says) and all(part in line for part, line in zip(says, lines)), lines


def test_a_host_budget_refusal_is_logged_once(site: TestSite, projects_dir: Path) -> None:
    site.add_tree(12, 4)
    crawl(projects_dir, "hb1", site.url("/"), "--workers", "1", "--delay", "0", "--max-pages-per-host", "5",
          "--max-depth", "20")
    over = Counter(r[0] for r in rows(projects_dir / "hb1" / "rejected.txt") if r[1] == "host budget")
    assert over and max(over.values()) == 1, over


def test_status_shows_hosts_with_delay_and_robots(site: TestSite, make_site: Callable[..., TestSite],
                                                  projects_dir: Path) -> None:
    other = make_site("127.0.0.2")
    robots_route(site, "User-agent: *\nDisallow: /x\n")
    site.route("/", body=html("/x", "/missing", "/ok"))
    site.route("/ok", body=html())
    other.route("/", body=html())                              # no robots.txt: 404
    crawl(projects_dir, "st", site.url("/"), other.url("/"), "--delay", "0")
    text = status(projects_dir, "st")
    assert re.search(r"^host\s+crawled\s+failed\s+pending\s+flight\s+delay\s+next\s+robots\s+state$", text, re.M), text
    table = status_rows(text)
    assert set(table) == {hkey(site), hkey(other)}
    a, b = table[hkey(site)], table[hkey(other)]
    assert (a["crawled"], a["failed"], a["pending"], a["flight"]) == ("2", "1", "0", "0")
    assert (b["crawled"], b["failed"], b["pending"]) == ("1", "0", "0")
    assert re.match(r"ok \(200\)\s+ok$", a["rest"]), a
    assert re.match(r"allow-all \(404\)\s+ok$", b["rest"]), b
    assert a["delay"] == b["delay"] == "0.0s"
    assert re.search(r"^\s+failed: 404 1$", text, re.M), text
    assert re.search(r"rejected\s+1\s+\(robots 1\)", text), text


def test_status_delay_column_shows_the_crawl_delay(site: TestSite, projects_dir: Path) -> None:
    robots_route(site, "User-agent: *\nCrawl-delay: 2\n")
    site.route("/", body=html())
    crawl(projects_dir, "sd", site.url("/"), "--delay", "0")
    assert status_rows(status(projects_dir, "sd"))[hkey(site)]["delay"] == "2.0s"


def test_hosts_txt_after_a_crawl(site: TestSite, make_site: Callable[..., TestSite], projects_dir: Path) -> None:
    other = make_site("127.0.0.2")
    for s in (site, other):
        s.route("/", body=html("/a"))
        s.route("/a", body=html())
    started = time.time()
    crawl(projects_dir, "ht", site.url("/"), other.url("/"), "--delay", "0.2")
    folder = projects_dir / "ht"
    lines = (folder / "hosts.txt").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# host\tnext_allowed\tdelay\tfailures\treason"
    data = [line for line in lines if is_data(line)]
    assert all(len(line.split("\t")) == 5 for line in data), data
    states = hosts_txt(folder)
    assert set(states) == {hkey(site), hkey(other)}
    for s in (site, other):
        st = states[hkey(s)]
        last_request = max(t for t, _, _ in s.log)
        assert started < last_request < st.next_allowed <= last_request + 1.5   # reserved past the last request
        assert (st.failures, st.reason) == (0, "-")


def test_a_garbage_line_in_hosts_txt_is_reported_and_moved_to_rejected(site: TestSite, projects_dir: Path) -> None:
    site.route("/", body=html())
    site.route("/next", body=html())
    crawl(projects_dir, "hg", site.url("/"), "--delay", "0")
    folder = projects_dir / "hg"
    (folder / "frontier.txt").unlink()        # as after a run that did not stop cleanly (a cache; safe to delete)
    with open(folder / "hosts.txt", "a", encoding="utf-8") as f:
        f.write("this line is not a host record\n")
        f.write("example.org\tsoon\t1\t0\t-\n")
    result = crawl(projects_dir, "hg", "--delay", "0")
    assert re.search(r"warning: hosts\.txt:\d+: .*this line is not a host record", result.stderr), result.stderr
    assert re.search(r"warning: hosts\.txt:\d+: .*example\.org", result.stderr), result.stderr
    rejected = rows(folder / "rejected.txt")
    assert [r[0] for r in rejected if r[1].startswith("hosts.txt:")] == ["this line is not a host record",
                                                                         "example.org soon 1 0 -"]
    text = (folder / "hosts.txt").read_text(encoding="utf-8")
    assert "not a host record" not in text and "soon" not in text
    assert hkey(site) in hosts_txt(folder)                    # the good line is kept


def test_a_garbage_line_in_hosts_txt_after_a_clean_stop_is_reported(site: TestSite, projects_dir: Path) -> None:
    site.route("/", body=html())
    crawl(projects_dir, "hc", site.url("/"), "--delay", "0")
    folder = projects_dir / "hc"
    with open(folder / "hosts.txt", "a", encoding="utf-8") as f:
        f.write("this line is not a host record\n")
    result = crawl(projects_dir, "hc", "--delay", "0")
    assert re.search(r"warning: hosts\.txt:\d+: .*this line is not a host record", result.stderr), result.stderr
    assert [r[0] for r in rows(folder / "rejected.txt")] == ["this line is not a host record"]
    assert "not a host record" not in (folder / "hosts.txt").read_text(encoding="utf-8")
