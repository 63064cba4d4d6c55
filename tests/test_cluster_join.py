"""Machines of a Redis crawl started together: ``crawl NAME --store URL --join-wait SECONDS``.

A cluster's machines are often started by one script at once, so a joining machine (no
START_URL) may ask Redis before the first machine has started the crawl. With ``--join-wait``
it waits for the crawl instead of failing; without it, the same start is still a usage error
(a mistyped crawl name says so at once). Real redis-server and loopback sites, as test_cluster.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

from redis_server import RedisServer, redis_server  # noqa: F401  (pytest fixture)
from sitekit import TestSite
from test_cluster import MAIN, TIMEOUT, Machine, assert_polite, machines, make_sites, page_fetches, recorded, wait_for  # noqa: F401

from spider.crawl import EXIT_INTERRUPTED


def test_a_machine_started_before_the_crawl_waits_for_it_and_takes_part(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite],
        machines: list[Machine]) -> None:
    sites, urls = make_sites(make_site)
    r = redis_server.client()
    name = "together"
    b = Machine(tmp_path / "b", name, redis_server.url, "--join-wait", "30")   # first, with no START_URL
    machines.append(b)
    time.sleep(1.0)   # b is up and waiting: nothing of the crawl is in Redis yet
    assert b.proc.poll() is None and not list(r.scan_iter(f"{name}:*"))
    a = Machine(tmp_path / "a", name, redis_server.url, *(s.url("/") for s in sites))
    machines.append(a)
    assert a.finish() == 0, a.err
    assert b.finish() == 0, b.err
    assert f"waiting up to 30 s for crawl '{name}'" in b.err
    assert "done: crawled" in b.err
    fetchers = {line.split(b"\t")[1] for line in r.lrange(f"{name}:log:fetch", 0, -1)}
    assert len(fetchers) >= 2, "the waiting machine fetched nothing"   # both machines' workers
    assert recorded(r, name) == Counter({u: 1 for u in urls})   # every URL once
    for s in sites:
        assert set(page_fetches(s).values()) == {1}, s.hits
    assert_polite(sites)


def test_a_new_crawls_seeds_are_queued_before_its_settings_are_saved(
        tmp_path: Path, redis_server: RedisServer, make_site: Callable[..., TestSite]) -> None:
    """A machine that joins the instant the settings appear must find work queued: its workers
    take a crawl with nothing pending and nothing in flight for a finished one."""
    site = make_site("127.0.0.2")
    site.route("/", body="<p>one page</p>", delay=0.5)
    r = redis_server.client()
    name = "order"
    watcher = r.pubsub()
    r.config_set("notify-keyspace-events", "KA")
    watcher.psubscribe(f"__keyspace@0__:{name}:*")
    a = subprocess.Popen([sys.executable, MAIN, "crawl", name, site.url("/"), "--store", redis_server.url,
                          "--projects-dir", str(tmp_path / "projects")], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    order: list[str] = []
    end = time.monotonic() + TIMEOUT
    while time.monotonic() < end and f"{name}:settings" not in order:
        msg = watcher.get_message(timeout=1.0)
        if msg and msg["type"] == "pmessage":
            order.append(msg["channel"].decode().split(":", 1)[1])
    out, err = a.communicate(timeout=TIMEOUT)
    assert a.returncode == 0, err
    assert f"{name}:settings" in order, order
    before = order[:order.index(f"{name}:settings")]
    assert f"{name}:hosts" in before, order   # the index of hosts with pending URLs


def test_a_wait_that_runs_out_is_the_usual_usage_error(tmp_path: Path, redis_server: RedisServer) -> None:
    started = time.monotonic()
    result = subprocess.run([sys.executable, MAIN, "crawl", "nobody", "--store", redis_server.url,
                             "--join-wait", "0.5", "--projects-dir", str(tmp_path / "projects")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert time.monotonic() - started >= 0.5
    assert "no crawl named 'nobody' in Redis" in result.stderr and "(waited 0.5 s)" in result.stderr
    assert not (tmp_path / "projects" / "nobody").exists()


def test_ctrl_c_while_waiting_is_an_interrupted_run(tmp_path: Path, redis_server: RedisServer) -> None:
    p = subprocess.Popen([sys.executable, MAIN, "crawl", "later", "--store", redis_server.url,
                          "--join-wait", "60", "--projects-dir", str(tmp_path / "projects")],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r = redis_server.client()
    before = len(r.client_list())
    wait_for(lambda: len(r.client_list()) > before, message="the waiting machine to connect")
    time.sleep(0.5)   # past its first look: in the wait
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=TIMEOUT)
    assert p.returncode == EXIT_INTERRUPTED and "Traceback" not in err, err
    assert "interrupted while waiting for crawl 'later'" in err


def test_join_wait_without_a_store_is_a_usage_error(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, MAIN, "crawl", "x", "http://127.0.0.1:1/", "--join-wait", "5",
                             "--projects-dir", str(tmp_path / "projects")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 2 and "--join-wait is for a crawl on Redis" in result.stderr
