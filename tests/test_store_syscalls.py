"""The file store's system calls per page (issue 15): a lock hold looks at each file once and
knows the journal's size from then on (a page's D record, a claim's C records: one write, no
fstat), rejected.txt is looked at only when a refusal is to be logged and not read back after
our own lines, a link found missing keeps its fingerprint. Each keeps what it replaced: another
process's lines are seen, a hand-typed fragment is ended before our record, a refused URL is
logged once, a kill between a page's writes loses nothing."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import FakeClock
from sitekit import TestSite
from spider import safefs
from spider.config import CrawlConfig
from spider.frontier import files
from spider.frontier.files import CLAIMS, CRAWLED, QUEUE, REJECTED, FileStore
from spider.frontier.recovery import recover
from spider.records import QueueEntry, crawled_line, rejected_line
from spider.spider import Spider
from test_store_page import _close_stores, opened   # noqa: F401  (the fixture closes what opened() opens)

A = "http://a.test/"
STORE_MODULES = ("spider.frontier.files", "spider.safefs")



def no_delay(host: str) -> float:
    return 0.0


def data_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def urls_of(path: Path) -> set[str]:
    return {line.split("\t")[0] for line in data_lines(path)}


def store_calls(monkeypatch) -> Counter:  # type: ignore[no-untyped-def]
    """Count the calls of ``os.stat``, ``fstat``, ``pread`` and ``write`` that the store makes
    (files.py and safefs.py; the test site's threads and everything else are left out)."""
    calls: Counter = Counter()
    for name in ("stat", "fstat", "pread", "write"):
        real = getattr(os, name)

        def counted(*a, _real=real, _name=name, **kw):  # type: ignore[no-untyped-def]
            if sys._getframe(1).f_globals.get("__name__") in STORE_MODULES:
                calls[_name] += 1
            return _real(*a, **kw)

        monkeypatch.setattr(os, name, counted)
    return calls


def linked_site(site: TestSite, n: int) -> list[str]:
    """n pages, each linking to three others and to a page of another site (refused: scope)."""
    paths = [f"/p/{i}" for i in range(n)]
    for i, p in enumerate(paths):
        links = "".join(f'<a href="/p/{(i * 7 + k) % n}">x</a>' for k in (1, 2, 3))
        site.route(p, body=f"<html><title>{i}</title><p>text of page {i}</p>{links}"
                            f'<a href="http://elsewhere.test/{i % 5}">out</a>'.encode())
    return paths


def crawl(site: TestSite, folder: Path, **kw) -> tuple[Spider, FileStore]:  # type: ignore[no-untyped-def]
    store = opened(folder, owner=1, shared=True)
    store.add([QueueEntry(site.url("/p/0"))])
    clock = FakeClock()
    values = dict(seeds=(site.url("/p/0"),), delay=0.0, ignore_robots=True, max_depth=50, workers=1,
                  connect_timeout=1.0, read_timeout=1.0, max_time=2.0)
    values.update(kw)
    return Spider(CrawlConfig(**values), store, clock=clock, wait=clock.wait), store


def run(spider: Spider, pages: int = 2000) -> None:
    steps = iter(range(pages + 1))
    try:
        spider.run(lambda: next(steps, None) is None)
    finally:
        spider.close()


# -- what a page costs ----------------------------------------------------------------------------

def test_a_crawled_page_costs_a_few_looks_and_one_write_per_file(site: TestSite, tmp_path: Path,
                                                                  monkeypatch) -> None:
    paths = linked_site(site, 40)
    spider, store = crawl(site, tmp_path)
    calls = store_calls(monkeypatch)
    run(spider)
    monkeypatch.undo()
    crawled = [line.split("\t")[0] for line in data_lines(tmp_path / CRAWLED)]
    assert sorted(crawled) == sorted(site.url(p) for p in paths)
    n = len(paths)
    # Per page: a hold (queue.txt, claims.txt, seen.bin), hashes.txt, crawled.txt's last byte, and
    # a quarter of a claim's hold (batches of 4): 5.8 a page here. Before: the journal's size
    # asked per record (fstat), rejected.txt looked at for every new link and read back after our
    # own lines: 7.8.
    looks = calls["stat"] + calls["fstat"]
    assert looks <= 6.5 * n, (dict(calls), n)
    # One write per file a page: fetch.log, links.txt, schedule.txt, hashes.txt, crawled.txt,
    # claims.txt, queue.txt for new links, rejected.txt for refusals new to the crawl.
    assert calls["write"] <= 8 * n, (dict(calls), n)


def test_the_journal_size_a_hold_knows_is_not_trusted_in_the_next_hold(tmp_path: Path) -> None:
    """Two processes take turns: each hold writes its records where the file ends then, after the
    other's (a size remembered from an earlier hold would put them in the wrong place, and the
    next reader would take parts of two records for one)."""
    one, two = opened(tmp_path, owner=1), opened(tmp_path, owner=2)
    one.add([QueueEntry(f"{A}{i}") for i in range(8)])
    for _ in range(4):
        (c1,) = one.claim(1, 0.0, no_delay).claims
        (c2,) = two.claim(1, 0.0, no_delay).claims
        with one.hold():
            one.settle(c1, "crawled", record=crawled_line(c1.url, 200, "text/html", 1, 0, 0))
        two.settle(c2, "crawled", record=crawled_line(c2.url, 200, "text/html", 1, 0, 0))
    records = data_lines(tmp_path / CLAIMS)
    assert [r[:2] for r in records] == ["C\t", "C\t", "D\t", "D\t"] * 4
    three = opened(tmp_path, owner=3)
    counts = three.counts()
    assert (counts.crawled, counts.pending, counts.in_flight) == (8, 0, 0)
    assert one.refresh().crawled == two.refresh().crawled == 8


def test_a_link_found_missing_is_found_once_another_process_queues_it(tmp_path: Path) -> None:
    one, two = opened(tmp_path, owner=1, shared=True), opened(tmp_path, owner=2, shared=True)
    one.add([QueueEntry(A + "known")])
    with one.hold():
        assert one.known([A + "known", A + "new"]) == {A + "known"}
        assert one.known([A + "new"]) == set()   # (asked again: its fingerprint is kept)
    two.add([QueueEntry(A + "new")])
    with one.hold():
        assert one.known([A + "known", A + "new", A + "new"]) == {A + "known", A + "new"}
        assert one.add([QueueEntry(A + "new")]) == []


def test_a_refusal_is_logged_once_whoever_logs_it_and_after_a_hand_typed_fragment(tmp_path: Path) -> None:
    one, two = opened(tmp_path, owner=1), opened(tmp_path, owner=2)
    one.log("rejected", rejected_line(A + "1", "scope", A))
    two.log("rejected", rejected_line(A + "1", "scope", A) + rejected_line(A + "2", "scope", A))
    one.log("rejected", rejected_line(A + "2", "depth", A) + rejected_line(A + "3", "scope", A))
    with open(tmp_path / REJECTED, "a") as f:
        f.write(A + "typed-by-hand")   # no newline yet
    one.log("rejected", rejected_line(A + "4", "scope", A))
    two.log("rejected", rejected_line(A + "4", "scope", A) + rejected_line(A + "3", "scope", A))
    one.log("rejected", rejected_line(A + "5", "scope", A))
    two.log("rejected", rejected_line(A + "5", "scope", A))
    assert [line.split("\t")[0] for line in data_lines(tmp_path / REJECTED)] == \
        [A + "1", A + "2", A + "3", A + "typed-by-hand", A + "4", A + "5"]


def test_lines_written_by_hand_into_queue_txt_between_two_holds_are_taken(tmp_path: Path) -> None:
    store = opened(tmp_path, owner=1)
    store.add([QueueEntry(A + "1")])
    (c,) = store.claim(1, 0.0, no_delay).claims
    with store.hold():
        store.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 1, 0, 0))
    with open(tmp_path / QUEUE, "a") as f:
        f.write(A + "by-hand\n")
    assert [c.url for c in store.claim(1, 0.0, no_delay).claims] == [A + "by-hand"]


# -- a kill between a page's writes -----------------------------------------------------------------

@pytest.mark.parametrize("at", range(1, 10))
def test_a_worker_killed_at_any_write_of_a_page_loses_nothing(site: TestSite, tmp_path: Path, at: int) -> None:
    """A worker killed (os._exit, no cleanup: as SIGKILL) at the ``at``-th store write of its
    third page's hold; the next run recovers the journal and crawls the rest: every page is
    crawled, each recorded once."""
    paths = linked_site(site, 12)
    pid = os.fork()
    if pid == 0:   # the worker
        try:
            spider, _ = crawl(site, tmp_path)
            real, writes = safefs.write_whole, [0]
            pages = [0]
            settle = Spider._settle

            def counting_settle(self, *a, **kw):  # type: ignore[no-untyped-def]
                pages[0] += 1
                return settle(self, *a, **kw)

            def write_whole(fd: int, data: bytes, path) -> None:  # type: ignore[no-untyped-def]
                if pages[0] == 3:
                    writes[0] += 1
                    if writes[0] == at:
                        os._exit(9)
                real(fd, data, path)

            safefs.write_whole = write_whole   # type: ignore[assignment]
            Spider._settle = counting_settle   # type: ignore[method-assign]
            run(spider)
        finally:
            os._exit(0)
    deadline = time.monotonic() + 60
    while True:   # (a worker hung would hang the suite: bounded)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the worker hung")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 9, "the worker was not killed"
    known = urls_of(tmp_path / QUEUE) | urls_of(tmp_path / CRAWLED)   # (claimed lines stay in queue.txt)
    recover(tmp_path, lambda url, depth: None)
    after = urls_of(tmp_path / QUEUE) | urls_of(tmp_path / CRAWLED)
    assert known <= after, f"lost by the kill: {sorted(known - after)}"   # (no other page may bring it back)
    spider, store = crawl(site, tmp_path)
    run(spider)
    crawled = [line.split("\t")[0] for line in data_lines(tmp_path / CRAWLED)]
    assert sorted(crawled) == sorted(site.url(p) for p in paths), "a page lost or recorded twice"
    assert store.counts().pending == 0
