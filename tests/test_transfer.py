"""push and pull (``spider/frontier/transfer.py``): a crawl moves from the project files to Redis
and back, both ways, with kills in between, and gives back the same URLs in the same states.

Real ``python main.py`` subprocesses against a loopback ``TestSite`` and a real redis-server
(``tests/redis_server.py``); a crawl done partly in Redis goes through ``RedisStore``'s own verbs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from redis_server import redis_server, start_redis  # noqa: F401  (pytest fixtures)
from sitekit import TestSite, tree_links
from spider import config as settings
from spider.config import CrawlConfig
from spider.records import QueueEntry, crawled_line
from spider.urls import host_key

MAIN = Path(__file__).resolve().parent.parent / "main.py"
TIMEOUT = 60
NAME = "site"
FILES = ("queue.txt", "crawled.txt", "failed.txt", "rejected.txt", "hosts.txt", "settings.txt", "fetch.log",
         "duplicates.txt", "links.txt", "schedule.txt")


@pytest.fixture
def store_url(redis_server) -> str:  # noqa: F811
    redis_server.client().flushall()
    return redis_server.url


@pytest.fixture
def r(redis_server):  # noqa: F811
    return redis_server.client()


def cli(projects: Path, *args: str) -> subprocess.CompletedProcess:
    """``python main.py ARGS --projects-dir PROJECTS``, its own process group; no traceback, ever."""
    proc = spawn(projects, *args)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{args} did not finish within {TIMEOUT} s")
    assert "Traceback" not in out + err, err
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def spawn(projects: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(MAIN), *args, "--projects-dir", str(projects)],
                            cwd=projects.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stderr
    assert "Error" not in result.stderr, result.stderr
    return result


def error_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def data(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [x for x in path.read_text(encoding="utf-8").splitlines() if x.strip() and not x.startswith("#")]


def urls(path: Path) -> list[str]:
    return [x.split("\t", 1)[0] for x in data(path)]


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:   # it ended already
        pass
    proc.communicate()


def tree_site(site: TestSite, n: int = 30, delay: float = 0.0) -> set[str]:
    """n pages and a home page; every page is an exact route, so the page set is known."""
    paths = site.add_tree(n, 3)
    if delay:
        for p in paths:   # the same pages, answered slowly: a kill finds some in flight
            route = site._routes[p]
            site.route(p, body=route.body, delay=delay)
    return {site.url(p) for p in paths}


def assert_each_page_crawled_once(folder: Path, pages: set[str]) -> None:
    crawled = Counter(urls(folder / "crawled.txt"))
    assert set(crawled) == pages, (pages - set(crawled), set(crawled) - pages)
    assert [u for u, n in crawled.items() if n > 1] == []
    assert data(folder / "failed.txt") == []
    assert data(folder / "queue.txt") == []


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())
            if p.is_file() and p.name not in ("crawl.lock", "frontier.lock")}


# -- files -> Redis -> files ---------------------------------------------------------------------

def test_push_then_pull_gives_back_every_url_in_its_state_and_crawl_finishes_it(tmp_path, site, store_url, r):
    pages = tree_site(site)
    site.route("/", body=site._routes["/"].body.replace(
        b"</body>", b'<a href="/missing">gone</a><a href="http://127.0.0.9:1/out">out</a></body>'))
    projects, other = tmp_path / "projects", tmp_path / "other"
    ok(cli(projects, "crawl", NAME, site.url("/"), "--max-pages", "8", "--delay", "0", "--workers", "2"))
    folder = projects / NAME
    # A retry with its time and a hand-added bare URL: pending lines with fields of their own.
    with open(folder / "queue.txt", "a", encoding="utf-8") as f:
        f.write(f"{site.url('/p/29.html')}\t3\t1\t{time.time() - 5:.3f}\t{site.url('/p/28.html')}\n"
                f"{site.url('/p/27.html')}\n")
    assert len(urls(folder / "crawled.txt")) + len(urls(folder / "failed.txt")) == 8
    ok(cli(projects, "crawl", NAME, "--max-pages", "8"))   # the hand edit taken in, queue.txt as a crawl writes it
    before = {name: (folder / name).read_bytes() for name in FILES if (folder / name).exists()}
    assert b"/missing" in before["failed.txt"] + before["queue.txt"] and b"127.0.0.9" in before["rejected.txt"]

    said = ok(cli(projects, "push", NAME, "--store", store_url)).stderr
    assert "pushed" in said and f"{len(data(folder / 'queue.txt'))} pending" in said
    assert r.hget(f"{NAME}:counts", "pending") == str(len(data(folder / "queue.txt"))).encode()
    assert error_line(cli(projects, "push", NAME, "--store", store_url)).startswith(
        "Error: Redis already holds a crawl named 'site'")
    ok(cli(projects, "push", NAME, "--store", store_url, "--replace"))

    ok(cli(other, "pull", NAME, "--store", store_url))
    back = other / NAME
    for name, text in before.items():
        assert (back / name).read_bytes() == text, name   # same lines, same order, same format
    assert sorted(data(back / "hashes.txt")) == sorted(data(folder / "hashes.txt"))
    assert (back / "robots").is_dir() and digest(back / "robots") == {
        k: v for k, v in digest(folder / "robots").items() if not k.endswith(".lock")}
    assert error_line(cli(other, "pull", NAME, "--store", store_url)).startswith(
        f"Error: {back} exists and is not empty")
    ok(cli(other, "pull", NAME, "--store", store_url, "--replace"))

    ok(cli(other, "crawl", NAME, "--max-pages", "1000", "--delay", "0", "--workers", "2"))
    crawled = Counter(urls(back / "crawled.txt"))
    assert set(crawled) == pages and max(crawled.values()) == 1
    assert urls(back / "failed.txt") == [site.url("/missing")]
    assert data(back / "queue.txt") == []


def test_the_queue_order_and_every_field_survive_the_round_trip(tmp_path, store_url):
    """bfs, dfs and best keys in Redis differ; each comes back as the same queue.txt, byte for byte."""
    from spider.frontier.transfer import pull, push

    for order in ("bfs", "dfs", "best"):
        folder = tmp_path / order / NAME
        folder.mkdir(parents=True)
        settings.save(folder, CrawlConfig(seeds=("http://a.test/", "http://b.test/"), order=order, defer=("later",)))
        lines = ["http://a.test/\t0\t0\t0\t-",
                 "http://a.test/later/1\t1\t0\t0\thttp://a.test/",
                 "http://b.test/x\t2\t1\t1764499300.125\thttp://a.test/y",
                 "http://a.test/done\t0\t0\t0\t-\trecheck",
                 "http://b.test/\t1\t0\t0\thttp://a.test/"]
        (folder / "queue.txt").write_text("# url\n" + "".join(x + "\n" for x in lines), encoding="utf-8")
        (folder / "crawled.txt").write_text(crawled_line("http://a.test/done", 200, "text/html", 5, 0, 0),
                                            encoding="utf-8")
        push(folder, store_url)
        pull(tmp_path / order / "back", NAME, store_url)
        assert data(tmp_path / order / "back" / NAME / "queue.txt") == lines, order
        from redis import Redis
        Redis.from_url(store_url).flushall()


# -- kills in between ----------------------------------------------------------------------------

def test_a_killed_file_crawl_is_recovered_by_push_and_finished_once_after_pull(tmp_path, site, store_url):
    pages = tree_site(site, 30, delay=0.3)
    projects, other = tmp_path / "projects", tmp_path / "other"
    proc = spawn(projects, "crawl", NAME, site.url("/"), "--delay", "0", "--workers", "3")
    folder = projects / NAME
    end = time.monotonic() + 30
    while len(data(folder / "crawled.txt")) < 4 or len(data(folder / "claims.txt")) < 2:
        assert time.monotonic() < end and proc.poll() is None, "the crawl did not get going"
        time.sleep(0.02)
    assert error_line(cli(projects, "push", NAME, "--store", store_url)) == \
        f"Error: a crawl of {folder} is running; stop it first (Ctrl-C)"
    kill_group(proc)   # kill -9 mid-way: claims in flight in claims.txt
    journal = [x.split("\t") for x in data(folder / "claims.txt")]
    in_flight = {f[5] for f in journal if f[0] == "C"} - {f[2] for f in journal if f[0] == "D"}
    assert in_flight

    ok(cli(projects, "push", NAME, "--store", store_url))
    assert data(folder / "claims.txt") == []   # recovered as a crawl start would
    ok(cli(other, "pull", NAME, "--store", store_url))
    pending = set(urls(other / NAME / "queue.txt"))   # what Redis holds as pending, as a Redis crawl would go on
    assert in_flight <= pending and not pending & set(urls(other / NAME / "crawled.txt"))
    for page in pages:
        site.route(page[len(site.url("/")) - 1:], body=site._routes[page[len(site.url("/")) - 1:]].body)  # fast now
    ok(cli(other, "crawl", NAME, "--delay", "0", "--workers", "2"))
    assert_each_page_crawled_once(other / NAME, pages)


def test_a_crawl_done_partly_in_redis_is_pulled_and_finished_by_crawl(tmp_path, site, store_url, r):
    from spider.frontier.redisstore import RedisStore

    pages = tree_site(site, 20)
    projects, other = tmp_path / "projects", tmp_path / "other"
    ok(cli(projects, "crawl", NAME, site.url("/"), "--max-pages", "1", "--delay", "0"))
    ok(cli(projects, "push", NAME, "--store", store_url))

    # Machine m1 crawls two pages through the Redis store's verbs (queueing their links), and
    # holds three more in flight when it dies.
    m1 = RedisStore(r, NAME, owner=7, machine="m1")
    got = m1.claim(3, time.time(), lambda h: 0.0).claims
    assert len(got) == 3
    by_redis = set()
    for claim in got[:2]:
        i = int(claim.url.rsplit("/", 1)[1].split(".")[0])
        m1.add(QueueEntry(site.url(f"/p/{t}.html"), claim.entry.depth + 1, 0, 0.0, claim.url)
               for t in tree_links(i, 20, 3))
        assert m1.settle(claim, "crawled", record=crawled_line(claim.url, 200, "text/html", 10, claim.entry.depth, 0))
        by_redis.add(claim.url)
    got = got[2:] + m1.claim(2, time.time(), lambda h: 0.0).claims
    assert len(got) == 3

    refused = error_line(cli(other, "pull", NAME, "--store", store_url))
    assert "running on m1" in refused and not (other / NAME).exists()
    assert "running on m1" in error_line(cli(projects, "push", NAME, "--store", store_url, "--replace"))

    host = host_key(site.url("/"))   # m1 died: its lease runs out
    r.hset(f"{NAME}:h:{{{host}}}", "luntil", 0)
    r.zadd(f"{NAME}:leases", {host: 0})
    ok(cli(other, "pull", NAME, "--store", store_url))
    back = other / NAME
    assert {c.url for c in got} <= set(urls(back / "queue.txt"))   # in flight on a dead machine: pending
    assert by_redis <= set(urls(back / "crawled.txt"))

    ok(cli(other, "crawl", NAME, "--max-pages", "1000", "--delay", "0", "--workers", "2"))
    assert_each_page_crawled_once(back, pages)
    assert not any(site.hits[u[len(site.url("/")) - 1:]] for u in by_redis)   # crawled in Redis: not fetched again


def _big_project(folder: Path, n: int) -> None:
    """A stopped project with n pending URLs over 50 hosts and a long fetch.log: push and pull take a while."""
    folder.mkdir(parents=True)
    settings.save(folder, CrawlConfig(seeds=tuple(f"http://h{i}.test/" for i in range(50))))
    (folder / "queue.txt").write_text("".join(f"http://h{i % 50}.test/page/{i}\t1\t0\t0\thttp://h0.test/\n"
                                              for i in range(n)), encoding="utf-8")
    (folder / "crawled.txt").write_text(crawled_line("http://h0.test/", 200, "text/html", 5, 0, 0), encoding="utf-8")
    (folder / "fetch.log").write_text("".join(f"2026-01-01T00:00:00Z\t1\t200\t5\t1\thttp://h0.test/{i}\n"
                                              for i in range(n * 4)), encoding="utf-8")


def _kill_once_started(proc: subprocess.Popen, started, extra: float) -> bool:
    """Wait until ``started()`` says the command is writing, then kill -9 it ``extra`` seconds
    later. True if it was killed still running (not already done)."""
    end = time.monotonic() + TIMEOUT
    while not started() and proc.poll() is None:
        assert time.monotonic() < end
        time.sleep(0.002)
    time.sleep(extra)
    alive = proc.poll() is None
    kill_group(proc)
    return alive


def test_a_killed_push_or_pull_leaves_the_source_intact_and_a_rerun_succeeds(tmp_path, store_url, r):
    from spider.frontier.transfer import crawl_keys, temp_prefix

    projects, other = tmp_path / "projects", tmp_path / "other"
    folder = projects / NAME
    _big_project(folder, 6000)
    ok(cli(projects, "push", NAME, "--store", store_url))   # recovery's one-time rewrite done: the source as it stays
    source = digest(folder)
    r.flushall()

    kills = 0
    for extra in (0.0, 0.05, 0.2):
        proc = spawn(projects, "push", NAME, "--store", store_url)
        kills += _kill_once_started(proc, lambda: bool(r.keys(f"{NAME}*")), extra)
        assert digest(folder) == source
        assert crawl_keys(r, NAME) == [] or r.hget(f"{NAME}:counts", "pending") == b"6000"   # nothing or all
        r.delete(*crawl_keys(r, NAME) or ["-"])
    assert kills >= 2
    ok(cli(projects, "push", NAME, "--store", store_url))
    assert crawl_keys(r, temp_prefix(NAME)) == []   # the killed runs' leftovers are gone
    assert r.hget(f"{NAME}:counts", "pending") == b"6000"

    ok(cli(tmp_path / "ref", "pull", NAME, "--store", store_url))
    whole = digest(tmp_path / "ref" / NAME)
    assert {k: whole[k] for k in ("queue.txt", "fetch.log", "settings.txt")} == \
        {k: source[k] for k in ("queue.txt", "fetch.log", "settings.txt")}
    assert data(tmp_path / "ref" / NAME / "crawled.txt") == data(folder / "crawled.txt")
    kills = 0
    for extra in (0.0, 0.01, 0.05):
        proc = spawn(other, "pull", NAME, "--store", store_url)
        kills += _kill_once_started(proc, lambda: (other / f".{NAME}.pull").is_dir() or (other / NAME).is_dir(),
                                    extra)
        back = other / NAME
        assert not back.exists() or digest(back) == whole   # nothing or all
        if back.exists():
            shutil.rmtree(back)
    assert kills >= 2
    ok(cli(other, "pull", NAME, "--store", store_url))
    assert digest(other / NAME) == whole
    assert [p.name for p in other.iterdir() if p.name.startswith(f".{NAME}.") and not p.name.endswith(".lock")] == []


# -- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("url, says", [
    ("redis://127.0.0.1:1/0", "cannot use Redis at redis://127.0.0.1:1/0"),
    ("http://127.0.0.1:1/", "cannot use Redis at http://127.0.0.1:1/"),
    ("redis://127.0.0.1:notaport/0", "cannot use Redis at"),
])
def test_an_unreachable_redis_or_a_bad_url_is_one_error_line(tmp_path, url, says):
    projects = tmp_path / "projects"
    _big_project(projects / NAME, 10)
    before = digest(projects / NAME)
    assert says in error_line(cli(projects, "push", NAME, "--store", url))
    assert says in error_line(cli(tmp_path / "other", "pull", NAME, "--store", url))
    assert digest(projects / NAME) == before and not (tmp_path / "other" / NAME).exists()


def test_pull_of_a_crawl_redis_does_not_hold_is_one_error_line(tmp_path, store_url):
    assert error_line(cli(tmp_path / "p", "pull", "nothing", "--store", store_url)) == \
        "Error: Redis holds no crawl named 'nothing'"
    assert "no project named 'nothing'" in error_line(cli(tmp_path / "p", "push", "nothing", "--store", store_url))


def test_a_crawl_in_redis_without_settings_or_with_a_bad_record_is_pulled_or_refused_in_one_line(
        tmp_path, store_url, r):
    projects = tmp_path / "p"
    r.zadd("bare:q:{a.test}", {"http://a.test/x\t1\t0\t0\thttp://a.test/": 1 * 2 ** 36 + 1})
    said = ok(cli(projects, "pull", "bare", "--store", store_url)).stderr
    assert "warning: Redis holds no settings for 'bare'" in said
    assert data(projects / "bare" / "queue.txt") == ["http://a.test/x\t1\t0\t0\thttp://a.test/"]

    r.hset("bare:h:{a.test}", "next", "soon")   # not a time
    line = error_line(cli(projects, "pull", "bare", "--store", store_url, "--replace"))
    assert "holds a record that is not one" in line
    assert data(projects / "bare" / "queue.txt") == ["http://a.test/x\t1\t0\t0\thttp://a.test/"]   # left as it was
    assert sorted(p.name for p in projects.iterdir()) == [".bare.pull.lock", "bare"]


def test_a_redis_that_goes_away_mid_push_is_one_error_line_and_a_rerun_succeeds(tmp_path, start_redis):
    from spider.frontier.transfer import temp_prefix

    server = start_redis()
    r = server.client()
    projects = tmp_path / "projects"
    _big_project(projects / NAME, 6000)
    proc = spawn(projects, "push", NAME, "--store", server.url)
    end = time.monotonic() + TIMEOUT
    while not r.keys(f"{temp_prefix(NAME)}:*") and proc.poll() is None:
        assert time.monotonic() < end
        time.sleep(0.002)
    server.kill()   # kill -9 of redis-server while push writes
    out, err = proc.communicate(timeout=TIMEOUT)
    assert "Traceback" not in err
    line = error_line(subprocess.CompletedProcess([], proc.returncode, out, err))
    assert line.startswith("Error: push failed: Redis: ConnectionError") and "nothing was changed" in line, line
    source = digest(projects / NAME)
    server.restart()
    said = ok(cli(projects, "push", NAME, "--store", server.url)).stderr
    assert "6000 pending" in said and digest(projects / NAME) == source


def test_robots_txt_moves_with_push_and_pull_and_is_not_fetched_again(tmp_path, site, store_url, r):
    """A host's robots.txt goes to the very key a crawl on Redis reads (``NAME:robots:{host}``)
    and comes back as its robots/ file: fetched once, whichever store crawls after a move."""
    from spider.robots import cache_name

    pages = tree_site(site, 12)
    site.route("/robots.txt", body="User-agent: *\nDisallow: /nothing\n", content_type="text/plain")
    projects, other = tmp_path / "projects", tmp_path / "other"
    ok(cli(projects, "crawl", NAME, site.url("/"), "--max-pages", "3", "--delay", "0"))
    assert site.hits["/robots.txt"] == 1
    host = host_key(site.url("/"))
    ok(cli(projects, "push", NAME, "--store", store_url))
    assert r.get(f"{NAME}:robots:{{{host}}}") == (projects / NAME / "robots" / cache_name(host)).read_bytes()
    assert r.ttl(f"{NAME}:robots:{{{host}}}") > 0   # kept as long as a crawl on Redis keeps it

    ok(cli(tmp_path / "machine", "crawl", NAME, "--store", store_url, "--max-pages", "8", "--delay", "0"))
    assert site.hits["/robots.txt"] == 1   # the crawl on Redis read it from Redis
    ok(cli(other, "pull", NAME, "--store", store_url))
    ok(cli(other, "crawl", NAME, "--max-pages", "1000", "--delay", "0"))
    assert_each_page_crawled_once(other / NAME, pages)
    assert site.hits["/robots.txt"] == 1   # nor the file crawl after pull
