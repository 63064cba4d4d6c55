"""The protocol under real processes: N workers, kill -9 at random instants, dead workers, Ctrl-C.

Every crawl here is `python main.py crawl ...` in a subprocess, as a user runs it, against a
loopback site that counts requests server-side.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from spider.records import is_data, parse_queue_line

MAIN = str(Path(__file__).resolve().parent.parent / "main.py")


def crawl_cmd(projects: Path, name: str, *args: str) -> list[str]:
    return [sys.executable, MAIN, "crawl", name, *args, "--projects-dir", str(projects)]


def data_lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [x for x in path.read_text().splitlines() if is_data(x)]


def urls_of(path: Path) -> list[str]:
    return [x.split("\t", 1)[0] for x in data_lines(path)]


def check_consistent(folder: Path) -> tuple[list[str], list[str], list[str]]:
    """Every state file parses, and no URL is in two states or twice in one."""
    crawled, failed = urls_of(folder / "crawled.txt"), urls_of(folder / "failed.txt")
    queue = [parse_queue_line(x).url for x in data_lines(folder / "queue.txt")]
    for name, urls in (("crawled", crawled), ("failed", failed)):
        dup = [u for u, n in Counter(urls).items() if n > 1]
        assert not dup, f"{name}.txt holds URLs twice: {dup[:5]}"
    assert not set(crawled) & set(failed)
    for line in data_lines(folder / "crawled.txt"):
        assert len(line.split("\t")) in (7, 11), line
    return crawled, failed, queue


@pytest.fixture
def tree_site(site):
    paths = site.add_tree(150, 8, page_size=2000)
    return site, {site.url(p) for p in paths}


def test_eight_workers_fetch_every_page_exactly_once(tree_site, projects_dir):
    site, pages = tree_site
    run = subprocess.run(crawl_cmd(projects_dir, "p", site.url("/"), "--workers", "8", "--delay", "0",
                                   "--max-depth", "100"), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    hits = site.hits
    assert hits.pop("/robots.txt") == 1          # fetched once for all 8 workers (it is a 404 here)
    assert {site.url(p) for p in hits} == pages
    assert max(hits.values()) == 1, [p for p, n in hits.items() if n > 1]
    crawled, failed, queue = check_consistent(projects_dir / "p")
    assert set(crawled) == pages and failed == [] and queue == []


def _children(pid: int) -> list[psutil.Process]:
    try:
        kids = psutil.Process(pid).children(recursive=True)
        return [k for k in kids if "resource_tracker" not in " ".join(k.cmdline())]
    except psutil.NoSuchProcess:
        return []


def test_kill_9_at_random_instants_then_resume(site, projects_dir):
    paths = site.add_tree(300, 8, page_size=2000)
    pages = {site.url(p) for p in paths}
    for p in paths:   # server time per page: a full crawl takes seconds, so kills land mid-crawl
        site.route(p, body=site_body(site, p), delay=0.02)
    site.reset()
    workers, kills, rng = 4, 0, random.Random(7)
    cmd = crawl_cmd(projects_dir, "k", site.url("/"), "--workers", str(workers), "--delay", "0",
                    "--max-depth", "100")
    for attempt in range(12):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        if kills < 3:
            time.sleep(rng.uniform(0.2, 0.7))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)   # the whole crawl, at once
                kills += 1
            proc.wait(timeout=30)
            proc.stderr.close()
            check_consistent(projects_dir / "k")   # parseable and single-state even right after a kill
            continue
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        break
    assert kills == 3
    crawled, failed, queue = check_consistent(projects_dir / "k")
    assert set(crawled) == pages and failed == [] and queue == []
    refetched = sum(site.hits.values()) - len(pages) - 1   # robots.txt once
    assert refetched <= kills * workers, f"{refetched} refetches after {kills} kills"


def site_body(site, path: str) -> bytes:
    """The body the tree generator served for ``path`` (fetched once from the server itself)."""
    import requests
    return requests.get(site.url(path), timeout=5).content


def _wait_for_pages(folder: Path, n: int = 3, limit: float = 30.0) -> None:
    """Until the crawl has recorded ``n`` pages (no fixed sleep: a loaded machine starts slower)."""
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            if len(data_lines(folder / "crawled.txt")) >= n:
                return
        except OSError:
            pass
        time.sleep(0.05)
    pytest.fail(f"no {n} pages crawled within {limit} s")


def test_a_dead_worker_is_replaced_and_its_claims_reissued(site, projects_dir):
    paths = site.add_tree(120, 6, page_size=1000)
    pages = {site.url(p) for p in paths}
    for p in paths:
        site.route(p, body=site_body(site, p), delay=0.02)
    site.reset()
    proc = subprocess.Popen(crawl_cmd(projects_dir, "d", site.url("/"), "--workers", "3", "--delay", "0",
                                      "--max-depth", "100"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        # Workers exist once pages are being recorded (before that, a child may be the start-up
        # check of the files, whose death is an error of its own).
        _wait_for_pages(projects_dir / "d")
        victims = _children(proc.pid)
        assert victims, "no worker process found"
        victims[0].kill()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert "died" in err and "replacement" in err
    crawled, failed, queue = check_consistent(projects_dir / "d")
    assert set(crawled) == pages and queue == []


def test_ctrl_c_stops_gracefully_and_the_rerun_finishes(site, projects_dir):
    paths = site.add_tree(100, 6, page_size=1000)
    pages = {site.url(p) for p in paths}
    for p in paths:
        site.route(p, body=site_body(site, p), delay=0.05)
    site.reset()
    cmd = crawl_cmd(projects_dir, "c", site.url("/"), "--workers", "2", "--delay", "0", "--max-depth", "100")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for_pages(folder := projects_dir / "c")
        os.killpg(proc.pid, signal.SIGINT)   # what a terminal's Ctrl-C does: the whole group
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "resume" in err
    crawled, failed, queue = check_consistent(folder)
    assert 0 < len(crawled) < len(pages)
    assert not set(queue) & set(crawled)                  # folded: exactly the pending URLs remain
    assert [x for x in data_lines(folder / "claims.txt")] == []
    rerun = subprocess.run(cmd[:4] + cmd[5:], capture_output=True, text=True, timeout=120)  # no URL
    assert rerun.returncode == 0, rerun.stderr
    crawled, failed, queue = check_consistent(folder)
    assert set(crawled) == pages and queue == []
    assert sum(site.hits.values()) - len(pages) - 1 <= 2   # robots.txt once; the pages in flight at the stop


@pytest.mark.parametrize("after", [0.15, 0.6])
def test_ctrl_c_during_start_up_exits_130_and_keeps_every_line(site, projects_dir, after: float):
    """Ctrl-C while the modules load (0.15 s) or while 200,000 hand-added lines are checked (0.6 s),
    before the crawl's own handler is in place: exit 130 and one line, no traceback, no "Aborted!"."""
    site.route("/", body=b"<a href='/a'>a</a>")
    first = subprocess.run(crawl_cmd(projects_dir, "s", site.url("/"), "--max-pages", "1", "--delay", "0"),
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    # Written as an editor writes (a new file): lines only appended to the file a clean stop left
    # are judged during the crawl instead (spider/frontier/paste.py), with no start-up check.
    queue = projects_dir / "s" / "queue.txt"
    edited = queue.with_name("queue.txt.edited")
    edited.write_text(queue.read_text() + "".join(f"{site.url('/x')}{i}\n" for i in range(200_000)))
    os.replace(edited, queue)
    cmd = crawl_cmd(projects_dir, "s", "--max-pages", "1", "--delay", "0")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        time.sleep(after)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Aborted" not in err, err
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=120)   # budget reached: no fetch
    assert rerun.returncode == 0, rerun.stderr
    assert len(urls_of(projects_dir / "s" / "queue.txt")) == 200_001   # /a and every hand-added line


def test_politeness_holds_across_workers(site, projects_dir):
    paths = site.add_tree(12, 4)
    run = subprocess.run(crawl_cmd(projects_dir, "slow", site.url("/"), "--workers", "4", "--delay", "0.3",
                                   "--max-depth", "100"), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    times = sorted(t for t, path, _ in site.log)
    assert len(times) == len(paths) + 1           # robots.txt is a request to the host too
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) >= 0.3 - 0.03, gaps   # small tolerance for clock granularity


def test_second_ctrl_c_stops_at_once_and_the_rerun_recovers(site, projects_dir):
    paths = site.add_tree(60, 6, page_size=1000)
    pages = {site.url(p) for p in paths}
    for p in paths:   # slow pages: a graceful stop would have to wait for them
        site.route(p, body=site_body(site, p), delay=0.5)
    site.reset()
    cmd = crawl_cmd(projects_dir, "cc", site.url("/"), "--workers", "3", "--delay", "0", "--max-depth", "100")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        time.sleep(2.0)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)          # the second Ctrl-C: workers killed, no waiting
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    check_consistent(projects_dir / "cc")
    rerun = subprocess.run(cmd[:4] + cmd[5:], capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    crawled, failed, queue = check_consistent(projects_dir / "cc")
    assert set(crawled) == pages and queue == []


def test_eight_workers_five_thousand_pages_each_fetched_once(site, projects_dir):
    paths = site.add_tree(5000, 6)
    pages = {site.url(p) for p in paths}
    run = subprocess.run(crawl_cmd(projects_dir, "big", site.url("/"), "--workers", "8", "--delay", "0",
                                   "--max-depth", "10000"), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    hits = site.hits
    assert hits.pop("/robots.txt") == 1
    assert {site.url(p) for p in hits} == pages
    assert max(hits.values()) == 1, [p for p, n in hits.items() if n > 1][:10]
    crawled, failed, queue = check_consistent(projects_dir / "big")
    assert set(crawled) == pages and failed == [] and queue == []
