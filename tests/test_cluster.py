"""A crawl on several machines, its frontier in Redis: ``crawl NAME --store redis://...``.

Each "machine" is a separate ``python main.py crawl NAME --store URL`` process tree, in its own
process group, with its own working directory and --projects-dir; they share a real
redis-server (tests/redis_server.py) and a site of several loopback hosts (127.0.0.2 ...), each a
``TestSite`` that records when every request arrived. After each scenario the records in Redis
(the crawled and failed lists) hold every URL of the site exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest

from redis_server import RedisServer, redis_server, start_redis  # noqa: F401  (pytest fixtures)
from sitekit import TestSite

from spider.cluster import machine_name

MAIN = str(Path(__file__).resolve().parent.parent / "main.py")
DELAY = 0.1          # --delay of every crawl here
PAGE_TIME = 0.05     # each page answers after this long
TOLERANCE = 0.03     # server-side timestamps vs the crawler's reservations (as test_citizen)
TIMEOUT = 60


# ---------------------------------------------------------------------------- helpers


class Machine:
    """One machine's ``crawl --store`` process tree (its own process group and folder); ``wrap``
    is a command prefix that keeps the pid (``ip netns exec NS``: tests/test_netns.py)."""

    def __init__(self, root: Path, name: str, url: str, *args: str, workers: int = 2,
                 wrap: Sequence[str] = (), delay: float = DELAY) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.name = name
        cmd = [*wrap, sys.executable, MAIN, "crawl", name, "--store", url, "--workers", str(workers),
               "--delay", str(delay), "--max-depth", "20", "--projects-dir", str(root / "projects"), *args]
        self.proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.out = self.err = ""

    @property
    def owner_prefix(self) -> str:
        """What every owner id of this machine's workers starts with."""
        return f"{machine_name()}:{self.proc.pid}/"

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def finish(self, timeout: float = TIMEOUT) -> int:
        try:
            self.out, self.err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.out, self.err = self.proc.communicate()
            pytest.fail(f"machine {self.root.name} did not finish in {timeout} s:\n{self.err}")
        assert "Traceback" not in self.err, self.err
        return self.proc.returncode

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def machines() -> Iterator[list[Machine]]:
    """Machines started by a test; whatever is left is killed at the end."""
    started: list[Machine] = []
    yield started
    for m in started:
        m.kill()
        if m.proc.returncode is None:
            m.proc.communicate()


def make_sites(make_site: Callable[..., TestSite], hosts: int = 4, pages: int = 30,
               page_time: float = PAGE_TIME) -> tuple[list[TestSite], set[str]]:
    """``hosts`` loopback sites of ``pages`` pages each (a binary tree under /), every page slow
    by ``page_time``; returns the sites and every URL of them."""
    sites, urls = [], set()
    for i in range(hosts):
        site = make_site(f"127.0.0.{i + 2}")
        paths = ["/"] + [f"/p/{n}.html" for n in range(pages)]
        for n, path in enumerate(paths):
            kids = [paths[k] for k in (2 * n + 1, 2 * n + 2) if k < len(paths)]
            body = (f"<html><head><title>{site.host} {n}</title></head><body>{site.host}:{site.port} page {n}"
                    + "".join(f'<a href="{k}">{k}</a>' for k in kids) + "</body></html>")
            site.route(path, body=body, delay=page_time)
        site.route("/robots.txt", body="User-agent: *\nDisallow: /private/\n", content_type="text/plain")
        sites.append(site)
        urls |= {site.url(p) for p in paths}
    return sites, urls


def recorded(r: Any, name: str) -> Counter[str]:
    """URL -> how many lines the crawled and failed records in Redis hold for it."""
    return Counter(line.split(b"\t", 1)[0].decode() for kind in ("crawled", "failed")
                   for line in r.lrange(f"{name}:log:{kind}", 0, -1))


def in_flight_of(r: Any, name: str, prefix: str) -> set[str]:
    """The URLs in flight under owners whose id starts with ``prefix`` (one machine)."""
    urls = set()
    for key in r.scan_iter(f"{name}:f:*"):
        for url, value in r.hgetall(key).items():
            if value.decode().startswith(prefix):
                urls.add(url.decode())
    return urls


def wait_for(what: Callable[[], Any], timeout: float = 30.0, message: str = "") -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = what()
        if got:
            return got
        time.sleep(0.02)
    pytest.fail(f"waited {timeout} s for {message or what}")


def robots_known(r: Any, name: str, n: int) -> bool:
    return len(list(r.scan_iter(f"{name}:robots:*"))) >= n


def page_fetches(site: TestSite) -> Counter[str]:
    return Counter({p: n for p, n in site.hits.items() if p != "/robots.txt"})


def gaps(times: list[float]) -> list[float]:
    times = sorted(times)
    return [b - a for a, b in zip(times, times[1:])]


def short_gaps(times: list[float], delay: float) -> list[tuple[float, float]]:
    """The gaps under ``delay`` that a request sent too early explains, with the gap before each.

    The test server stamps a request when its handler runs, so on a loaded machine one request
    may be stamped late: the gap before it grows and the gap after it shrinks by the same amount,
    while the two together still span two delays. An extra request (a stale machine's) makes two
    gaps that together span one delay. So a short gap counts only where it and the gap before
    it span less than two delays. (Blind spot: an extra request right after an idle stretch
    looks like a late stamp; tests/test_cluster.py's pause tests keep their hosts busy.)"""
    g, low = gaps(times), delay - TOLERANCE
    return [(g[i - 1] if i else 0.0, x) for i, x in enumerate(g)
            if x < low and (i == 0 or g[i - 1] + x < 2 * low)]


def assert_polite(sites: list[TestSite]) -> None:
    """Every host saw its requests at least --delay apart, whichever machine sent them."""
    for s in sites:
        times = [t for t, _, _ in s.log]
        assert not short_gaps(times, DELAY), (s.host, gaps(times))


def refetched(sites: list[TestSite]) -> int:
    """Page requests beyond the first of each page, on every host."""
    return sum(n - 1 for s in sites for n in page_fetches(s).values())


def assert_each_once(r: Any, name: str, sites: list[TestSite], urls: set[str], in_flight: set[str]) -> None:
    """Every URL crawled or failed exactly once in the records, none lost; pages fetched twice no
    more than ``in_flight`` (what was in flight where the trouble struck); every host's requests
    at least --delay apart, whichever machine sent them."""
    assert recorded(r, name) == Counter({u: 1 for u in urls})
    assert refetched(sites) <= len(in_flight), (refetched(sites), in_flight)
    assert_polite(sites)


def busy(r: Any, name: str, m: Machine, hosts: int) -> bool:
    """The machine has URLs in flight, every host's robots.txt is known and no host is held
    for a robots.txt fetch (a machine killed in the middle of one holds its host 30 s)."""
    return (robots_known(r, name, hosts) and bool(in_flight_of(r, name, m.owner_prefix))
            and all(float(r.hget(k, "next") or 0) < time.time() + 5 for k in r.scan_iter(f"{name}:h:*")))


def pause_mid_fetch(r: Any, name: str, sites: list[TestSite], b: Machine) -> set[str]:
    """Stop machine b (SIGSTOP) in the middle of a fetch (its request is at the server), wait
    until the others have taken its hosts back, once its leases expired, and recorded what it
    was fetching; then continue it (it settles what it was fetching: refused). Returns the URLs
    it held when stopped."""
    asked = {s.url(p) for s in sites for p in s.hits}

    def mid_fetch() -> set[str]:   # b's in-flight URLs whose request the server has
        asked.update(s.url(p) for s in sites for p in s.hits)
        return in_flight_of(r, name, b.owner_prefix) & (asked - set(recorded(r, name)))

    wait_for(lambda: robots_known(r, name, len(sites)) and mid_fetch(), message="b in the middle of a fetch")
    b.signal(signal.SIGSTOP)
    held = in_flight_of(r, name, b.owner_prefix)
    wait_for(lambda: not in_flight_of(r, name, b.owner_prefix) and set(recorded(r, name)) >= held,
             message="the other machines to take over b's URLs")
    b.signal(signal.SIGCONT)
    return held


def start_two(tmp_path: Path, name: str, server: RedisServer, sites: list[TestSite],
              machines: list[Machine], *args: str) -> tuple[Machine, Machine]:
    """Machine a starts the crawl; machine b joins it as soon as it is there."""
    a = Machine(tmp_path / "a", name, server.url, *(s.url("/") for s in sites), *args)
    machines.append(a)
    r = server.client()
    wait_for(lambda: r.exists(f"{name}:settings"), message="the crawl to start")
    b = Machine(tmp_path / "b", name, server.url, *args)
    machines.append(b)
    return a, b


def two_busy(tmp_path: Path, name: str, server: RedisServer, make_site: Callable[..., TestSite],
             machines: list[Machine], *args: str, **site: Any) -> tuple[list[TestSite], set[str], Machine, Machine]:
    """The site, its URLs, and two machines crawling it, b with URLs in flight."""
    sites, urls = make_sites(make_site, **site)
    a, b = start_two(tmp_path, name, server, sites, machines, *args)
    r = server.client()
    wait_for(lambda: busy(r, name, b, len(sites)), message="machine b to have URLs in flight")
    return sites, urls, a, b


# ---------------------------------------------------------------------------- the scenarios


def test_a_crawl_started_on_one_machine_is_joined_by_another(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite],
        machines: list[Machine]) -> None:
    sites, urls = make_sites(make_site)
    r = redis_server.client()
    name = "join"
    a = Machine(tmp_path / "a", name, redis_server.url, *(s.url("/") for s in sites), "--warc")
    machines.append(a)
    wait_for(lambda: r.hget(f"{name}:counts", "crawled"), message="machine a to crawl")
    b = Machine(tmp_path / "b", name, redis_server.url, "--workers", "2")   # joins: no START_URL
    machines.append(b)
    seen_two = False
    while a.proc.poll() is None or b.proc.poll() is None:   # status lists both machines meanwhile
        status = subprocess.run([sys.executable, MAIN, "status", name, "--store", redis_server.url],
                                cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
        assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
        if "machines  2 taking part" in status.stdout:
            seen_two = True
            assert a.owner_prefix.rstrip("/") in status.stdout and b.owner_prefix.rstrip("/") in status.stdout
            break
        time.sleep(0.1)
    assert a.finish() == 0, a.err
    assert b.finish() == 0, b.err
    assert seen_two, "status never listed the two machines"
    assert "done: crawled" in a.err and "done: crawled" in b.err

    assert recorded(r, name) == Counter({u: 1 for u in urls})      # every URL once, across machines
    for s in sites:
        assert s.hits["/robots.txt"] == 1, s.hits                   # once for the whole cluster
        assert set(page_fetches(s).values()) == {1}, s.hits        # no page fetched twice
    assert_polite(sites)                                            # politeness across machines
    # Both machines fetched, each keeping its WARC files on its own disk, named by machine.
    for m in (a, b):
        warcs = list((m.root / "projects" / name / "warc").glob("*.warc.gz"))
        assert warcs and all(w.name.startswith(f"spider-{machine_name()}-") for w in warcs), warcs
    assert not list((b.root / "projects" / name).glob("settings.txt"))   # the settings are in Redis
    assert b"delay = 0.1" in r.get(f"{name}:settings")

    exported = subprocess.run([sys.executable, MAIN, "export", name, "--format", "csv", "--store",
                               redis_server.url], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert exported.returncode == 0, exported.stderr
    assert {line.split(",", 1)[0] for line in exported.stdout.splitlines()[1:]} == urls


def test_a_machine_killed_mid_crawl_loses_nothing(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite],
        machines: list[Machine]) -> None:
    """Three machines; b is killed (its whole process group) while it has URLs in flight."""
    name = "kill"
    sites, urls, a, b = two_busy(tmp_path, name, redis_server, make_site, machines, "--lease", "2")
    c = Machine(tmp_path / "c", name, redis_server.url, "--lease", "2", workers=1)
    machines.append(c)
    r = redis_server.client()
    wait_for(lambda: busy(r, name, b, len(sites)), message="machine b to have URLs in flight")
    b.signal(signal.SIGKILL)   # the whole machine: parent and workers at once
    b.proc.wait()
    lost_with_b = in_flight_of(r, name, b.owner_prefix)
    assert a.finish() == 0, a.err
    assert c.finish() == 0, c.err
    assert not in_flight_of(r, name, b.owner_prefix)
    assert_each_once(r, name, sites, urls, lost_with_b)   # refetched: only what b had in flight


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_on_one_machine_stops_only_it(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite],
        machines: list[Machine], presses: int) -> None:
    """Once: b's workers finish their page and give their claims back. Twice: they are killed at
    once, in the middle of slow pages, and b's parent gives their claims back."""
    # Leases of a minute: if b's claims were not given back at its clean stop, a would wait for
    # them past the test's timeout.
    name = f"ctrlc{presses}"
    slow = {} if presses == 1 else {"pages": 8, "page_time": 0.6}
    sites, urls, a, b = two_busy(tmp_path, name, redis_server, make_site, machines, "--lease", "60", **slow)
    r = redis_server.client()
    for _ in range(presses):
        b.signal(signal.SIGINT)
        time.sleep(0.05)
    assert b.finish(20) == 130, b.err
    assert "interrupted" in b.err
    assert a.proc.poll() is None, a.err   # the other machine goes on
    assert not in_flight_of(r, name, b.owner_prefix)
    assert a.finish(30) == 0, a.err
    assert recorded(r, name) == Counter({u: 1 for u in urls})


def test_short_gaps_tells_a_late_stamp_from_an_extra_request() -> None:
    late = [0.0, 0.1, 0.245, 0.3, 0.4]      # the third request stamped 45 ms late
    extra = [0.0, 0.1, 0.155, 0.2, 0.3]     # a request between two others
    assert short_gaps(late, 0.1) == []
    assert short_gaps(extra, 0.1)            # the two gaps around it span one delay
    assert short_gaps([0.0, 0.01], 0.1)     # two requests at once


def test_a_machine_paused_past_its_lease_records_nothing_twice(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite],
        machines: list[Machine]) -> None:
    """b (one worker) is stopped in the middle of a fetch (its request is at the server), past
    its lease; a takes the host back and records the URL; b, continued, records nothing."""
    name = "pause"
    sites, urls = make_sites(make_site)
    a = Machine(tmp_path / "a", name, redis_server.url, *(s.url("/") for s in sites), "--lease", "2")
    machines.append(a)
    r = redis_server.client()
    wait_for(lambda: r.exists(f"{name}:settings"), message="the crawl to start")
    b = Machine(tmp_path / "b", name, redis_server.url, "--lease", "2", workers=1)
    machines.append(b)
    pause_mid_fetch(r, name, sites, b)
    assert a.finish() == 0, a.err
    assert b.finish() == 0, b.err
    assert recorded(r, name) == Counter({u: 1 for u in urls})
    assert_polite(sites)


def test_workers_share_a_host_with_no_delay_and_record_each_page_once(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite],
        machines: list[Machine]) -> None:
    """One host, --delay 0, three workers: the host has several holders, so the server has
    requests of more than one worker in progress at once (one holder sends one at a time), and
    every page is recorded exactly once."""
    import threading
    site = make_site("127.0.0.2")
    lock, now, most = threading.Lock(), [0], [0]
    pages = 40

    def page(info: Any) -> tuple[int, dict[str, str], str]:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.05)
        with lock:
            now[0] -= 1
        n = 0 if info.path == "/" else int(info.path.rsplit("/", 1)[1])
        return 200, {}, "".join(f'<a href="/p/{k}">{k}</a>' for k in (2 * n + 1, 2 * n + 2) if k < pages)
    site.route("/", handler=page)
    for n in range(1, pages):
        site.route(f"/p/{n}", handler=page)
    name = "shared"
    m = Machine(tmp_path / "a", name, redis_server.url, site.url("/"), workers=3, delay=0)
    machines.append(m)
    assert m.finish() == 0, m.err
    assert recorded(redis_server.client(), name) == Counter(
        {site.url("/"): 1, **{site.url(f"/p/{n}"): 1 for n in range(1, pages)}})
    assert most[0] >= 2, "one worker at a time on the host: its lease had one holder"


# ---------------------------------------------------------------------------- bad input


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, MAIN, *args, "--projects-dir", str(tmp_path / "projects")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, (result.returncode, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def closed_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command", [["crawl", "x", "http://127.0.0.2:9/"], ["status", "x"],
                                     ["export", "x", "--format", "csv"]])
def test_an_unreachable_redis_or_a_wrong_url_is_one_error_line(tmp_path: Path, command: list[str]) -> None:
    pytest.importorskip("redis")
    port = closed_port()
    line = error_line(cli(tmp_path, *command, "--store", f"redis://127.0.0.1:{port}/0"))
    assert f"cannot use Redis at redis://127.0.0.1:{port}/0" in line
    line = error_line(cli(tmp_path, *command, "--store", "foo://x"))
    assert "not a Redis URL" in line and "redis://HOST:PORT/DB" in line




def test_lease_without_store_is_a_usage_error(tmp_path: Path) -> None:
    result = cli(tmp_path, "crawl", "x", "http://127.0.0.2:9/", "--lease", "5")
    assert result.returncode == 2 and "--lease is for a crawl on Redis" in result.stderr
    assert not (tmp_path / "projects" / "x").exists()


def test_joining_a_crawl_that_is_not_there_is_a_usage_error(tmp_path: Path, redis_server: RedisServer) -> None:
    result = cli(tmp_path, "crawl", "nothing-here", "--store", redis_server.url)
    assert result.returncode == 2 and "no crawl named 'nothing-here' in Redis" in result.stderr


def test_a_redis_that_goes_away_mid_crawl_is_one_error_and_loses_nothing(
        tmp_path: Path, start_redis: Callable[..., RedisServer], make_site: Callable[..., TestSite],
        machines: list[Machine]) -> None:
    server = start_redis(appendonly="yes", appendfsync="always")
    sites, urls = make_sites(make_site, hosts=2)
    r = server.client()
    name = "gone"
    a = Machine(tmp_path / "a", name, server.url, *(s.url("/") for s in sites), "--lease", "2")
    machines.append(a)
    wait_for(lambda: busy(r, name, a, len(sites)), message="machine a to have URLs in flight")
    server.kill()
    assert a.finish(40) == 1
    assert len([line for line in a.err.splitlines() if line.startswith("Error:")]) == 1, a.err
    assert "Redis" in a.err
    server.restart()   # the same data (AOF): the same command goes on where it stopped
    again = Machine(tmp_path / "a", name, server.url, "--lease", "2")
    machines.append(again)
    assert again.finish() == 0, again.err
    assert recorded(server.client(), name) == Counter({u: 1 for u in urls})


def test_a_fetch_longer_than_the_lease_keeps_its_host(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite],
        machines: list[Machine]) -> None:
    """The lease thread renews the host while a page takes longer than a lease: no other worker
    takes the host back and fetches the page a second time."""
    site = make_site("127.0.0.2")
    site.route("/", body='<a href="/slow">slow</a><a href="/b">b</a>')
    site.route("/slow", body="<p>slow</p>", delay=3.0)
    site.route("/b", body="<p>b</p>")
    name = "long"
    m = Machine(tmp_path / "a", name, redis_server.url, site.url("/"), "--lease", "1", workers=3)
    machines.append(m)
    assert m.finish() == 0, m.err
    assert site.hits["/slow"] == 1, site.hits
    assert recorded(redis_server.client(), name) == Counter({site.url(p): 1 for p in ("/", "/slow", "/b")})


def test_a_worker_that_dies_gives_its_claims_back_at_once(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite],
        machines: list[Machine]) -> None:
    """The machine's parent sees its worker die and gives its claims back (``reissue``) without
    waiting for the lease (a minute here, longer than the test may take)."""
    sites, urls = make_sites(make_site, hosts=2)
    r = redis_server.client()
    name = "onedies"
    m = Machine(tmp_path / "a", name, redis_server.url, *(s.url("/") for s in sites), "--lease", "60")
    machines.append(m)
    wait_for(lambda: busy(r, name, m, len(sites)), message="URLs in flight")
    owner = wait_for(lambda: next((v.decode().split("\t")[0] for k in r.scan_iter(f"{name}:f:*")
                                   for v in r.hvals(k) if v.decode().startswith(m.owner_prefix)), None))
    os.kill(int(owner.rsplit("/", 1)[1]), signal.SIGKILL)
    assert m.finish(40) == 0, m.err
    assert "died" in m.err
    assert recorded(r, name) == Counter({u: 1 for u in urls})


def test_report_reads_the_crawl_in_redis(tmp_path: Path, redis_server: RedisServer,
                                        make_site: Callable[..., TestSite], machines: list[Machine]) -> None:
    """report --store: the counts of the crawl in Redis, pending URLs included (a crawl stopped by
    --max-pages), written on this machine."""
    import re

    sites, urls = make_sites(make_site, hosts=1, pages=12)
    name = "rep"
    m = Machine(tmp_path / "a", name, redis_server.url, sites[0].url("/"), "--max-pages", "5")
    machines.append(m)
    assert m.finish() == 0, m.err
    counts = {k.decode(): int(v) for k, v in redis_server.client().hgetall(f"{name}:counts").items()}
    assert counts["crawled"] == 5 and counts["pending"] > 0, counts
    result = cli(tmp_path / "a", "report", name, "--store", redis_server.url)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "a" / "projects" / name / "report.html").read_text()
    assert result.stdout.strip().endswith("report.html") and f"spider report: {name}" in page
    cards = dict(re.findall(r'<div class="k">(\w+)</div><div class="v">([\d,]+)</div>', page))
    assert cards["crawled"] == "5" and cards["pending"] == str(counts["pending"]), cards


def test_a_host_held_back_is_said_on_the_terminal(
        tmp_path: Path, redis_server: RedisServer, machines: list[Machine]) -> None:
    """A START_URL nobody answers at: robots.txt is unavailable, the host waits 5 minutes, and
    the machine says so instead of looking idle."""
    name = "held"
    m = Machine(tmp_path / "a", name, redis_server.url, f"http://127.0.0.2:{closed_port()}/")
    machines.append(m)
    r = redis_server.client()
    wait_for(lambda: any(r.hget(k, "reason") == b"robots.txt unavailable" for k in r.scan_iter(f"{name}:h:*")),
             message="robots.txt to be found unavailable")
    time.sleep(2.5)   # the parent looks every 2 s
    m.signal(signal.SIGINT)
    assert m.finish() == 130, m.err
    assert "robots.txt unavailable; its URLs wait until" in m.err, m.err


def test_a_machine_paused_before_its_request_does_not_send_it(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite],
        machines: list[Machine]) -> None:
    """A worker paused (SIGSTOP) while it waits for its host's slot, holding a claim, past its
    lease: the other machine takes the host back and keeps its pace; the paused one, continued,
    must not send its stale request (it would land within --delay of the new holder's)."""
    delay, pages = 0.5, 6
    site = make_site("127.0.0.2")
    site.route("/", body="".join(f'<a href="/r/{i}">{i}</a>' for i in range(pages)))
    for i in range(pages):   # each link redirects: the target waits for the slot, claimed
        site.add_redirect(f"/r/{i}", f"/p/{i}")
        site.route(f"/p/{i}", body=f"<p>page {i}</p>")
    urls = {site.url("/")} | {site.url(f"/{d}/{i}") for d in "rp" for i in range(pages)}
    name = "stale"
    args = ("--lease", "2", "--delay", str(delay))
    a = Machine(tmp_path / "a", name, redis_server.url, site.url("/"), *args, workers=1)
    machines.append(a)
    r = redis_server.client()
    wait_for(lambda: r.exists(f"{name}:settings"), message="the crawl to start")
    b = Machine(tmp_path / "b", name, redis_server.url, *args, workers=1)
    machines.append(b)

    def waiting_holder() -> Machine | None:   # the holder, with a redirect target claimed
        for m in (a, b):
            if any("/p/" in u for u in in_flight_of(r, name, m.owner_prefix)):
                return m
        return None

    paused = wait_for(waiting_holder, message="a redirect target waiting for its slot")
    paused.signal(signal.SIGSTOP)
    held = in_flight_of(r, name, paused.owner_prefix)
    # only the other machine can have recorded what the paused one held
    wait_for(lambda: not in_flight_of(r, name, paused.owner_prefix) and set(recorded(r, name)) >= held,
             message="the other machine to take the host back")
    paused.signal(signal.SIGCONT)
    assert a.finish() == 0, a.err
    assert b.finish() == 0, b.err
    assert recorded(r, name) == Counter({u: 1 for u in urls})
    times = [t for t, _, _ in site.log]
    assert not short_gaps(times, delay), gaps(times)


def test_a_worker_joining_gets_hosts_before_the_holders_next_tick(redis_server: RedisServer) -> None:
    """A worker holding every host lets go of those beyond its share as soon as another
    worker's heartbeat appears, not at its lease thread's next full tick (a minute away here):
    a machine joining a crawl gets hosts at once instead of idling (bench/scaleout.py)."""
    from spider.cluster import ClusterStore, _Lease
    from spider.records import QueueEntry, crawled_line

    r = redis_server.client()
    name = "share"
    one = ClusterStore(redis_server.client(), name, owner=1, machine="m1", lease=600)
    one.add([QueueEntry(f"http://h{i}.test/{j}") for i in range(4) for j in range(2)])
    one.beat()
    one.update_share(180)
    claims = one.claim(4, time.time(), lambda host: 1.0).claims   # one URL of each host
    assert len({c.url.split("/")[2] for c in claims}) == 4
    for c in claims:
        assert one.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 10, 0, 0))
    assert r.scard(f"{name}:held:m1/1") == 4   # held, with a URL each still pending
    thread = _Lease(one, 60.0, "-")
    thread.start()
    try:
        two = ClusterStore(redis_server.client(), name, owner=2, machine="m2", lease=600)
        two.beat()
        wait_for(lambda: r.scard(f"{name}:held:m1/1") == 2, timeout=20,
                 message="the holder to let go of the hosts beyond its share")
        two.update_share(180)
        assert len(two.claim(4, time.time() + 5, lambda host: 1.0).claims) == 2
    finally:
        thread.stop()


def test_what_lives_before_a_workers_fork_is_kept_out_of_the_collectors_sight(monkeypatch):
    """The parent freezes its objects (gc.freeze) right before each worker's fork: no worker's
    cyclic collection walks the modules it inherits, and the parent's exit does not either."""
    import gc
    from spider import crawl
    from spider.cluster import ClusterCrawl
    seen = []
    monkeypatch.setattr(crawl.Crawl, "_start_worker", lambda self, store: seen.append(gc.get_freeze_count()) or "p")
    gc.unfreeze()
    try:
        assert ClusterCrawl.__new__(ClusterCrawl)._start_worker(None) == "p"
    finally:
        gc.unfreeze()
    assert seen and seen[0] > 1000
