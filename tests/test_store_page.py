"""The file store's page path (issue 15): a page's store calls after its fetch in one lock hold,
claims of a few URLs at once at --delay 0 while their hosts keep no pace, and the second's time
stamp kept instead of formatted again. Each keeps what it replaced: every page crawled once, its
links queued before it is recorded, a kill recovering every claim, the budget never overshot."""

from __future__ import annotations

import fcntl
import itertools
import time
from pathlib import Path

import pytest

from conftest import FakeClock
from sitekit import TestSite
from spider import records
from spider.config import CrawlConfig
from spider.frontier import files
from spider.frontier.files import CLAIM_BATCH, CLAIMS, CRAWLED, HASHES, QUEUE, FileStore, batch_size
from spider.records import QueueEntry, crawled_line, utc_stamp
from spider.spider import Spider

A, B = "http://a.test/", "http://b.test/"


def no_delay(host: str) -> float:
    return 0.0


_OPEN: list[FileStore] = []


@pytest.fixture(autouse=True)
def _close_stores():
    """Every store a test opens is closed after it (the suite runs in one process)."""
    yield
    while _OPEN:
        _OPEN.pop().close()


def opened(folder: Path, **kw) -> FileStore:  # type: ignore[no-untyped-def]
    store = FileStore(folder, **kw).open()
    _OPEN.append(store)
    return store


def data_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def lock_counter(monkeypatch) -> list[int]:
    """Count the frontier lock's acquisitions (flock LOCK_EX) in this process."""
    taken = [0]
    real = fcntl.flock

    def flock(fd, op):  # type: ignore[no-untyped-def]
        if op == fcntl.LOCK_EX:
            taken[0] += 1
        return real(fd, op)

    monkeypatch.setattr(files.fcntl, "flock", flock)
    return taken


def crawl(site: TestSite, folder: Path, **kw) -> tuple[Spider, FileStore]:   # type: ignore[no-untyped-def]
    store = opened(folder, owner=1)
    store.add([QueueEntry(site.url("/"))])
    clock = FakeClock()
    values = dict(seeds=(site.url("/"),), delay=0.0, ignore_robots=True, max_depth=50, workers=1,
                  connect_timeout=1.0, read_timeout=1.0, max_time=2.0)
    values.update(kw)
    spider = Spider(CrawlConfig(**values), store, clock=clock, wait=clock.wait)
    return spider, store


def run(spider: Spider) -> None:
    calls = itertools.count()
    try:
        spider.run(lambda: next(calls) > 2000)
    finally:
        spider.close()
    assert next(calls) <= 2001, "the worker did not finish on its own"


# -- one hold per page --------------------------------------------------------------------------

def test_a_crawled_page_takes_the_lock_about_once(site: TestSite, tmp_path: Path, monkeypatch) -> None:
    paths = site.add_tree(30, 4)
    spider, store = crawl(site, tmp_path)
    holds = lock_counter(monkeypatch)
    run(spider)
    crawled = [line.split("\t")[0] for line in data_lines(tmp_path / CRAWLED)]
    assert sorted(crawled) == sorted(site.url(p) for p in paths)   # each once
    assert all(n == 1 for n in site.hits.values())
    # Before: a claim, the text hash, the new links and the outcome: 3 or 4 holds a page (140
    # for these 31 pages); one hold after the fetch makes it 2, and claims in batches ~1.3.
    assert holds[0] <= 1.5 * len(paths), (holds[0], len(paths))
    assert len(data_lines(tmp_path / HASHES)) == len(paths)
    linked = {line.split("\t")[0] for line in data_lines(tmp_path / "links.txt")}
    assert linked == set(crawled)


def test_inside_a_hold_the_files_are_looked_at_once_and_other_processes_lines_are_seen(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    one, two = opened(tmp_path, owner=1), opened(tmp_path, owner=2)
    one.add([QueueEntry(A + "1")])
    (claim,) = one.claim(1, 0.0, no_delay).claims
    two.add([QueueEntry(A + "2")])   # another process, before the hold: read when the hold begins
    looks = []
    real = files._File.look
    monkeypatch.setattr(files._File, "look", lambda self: looks.append(self.path.name) or real(self))
    holds = lock_counter(monkeypatch)
    with one.hold():
        assert one.known([A + "2"]) == {A + "2"}
        assert one.first_with_text("0123456789abcdef0123", claim.url) == claim.url
        assert [e.url for e in one.add([QueueEntry(A + "2"), QueueEntry(A + "3")])] == [A + "3"]
        one.log("links", f"{claim.url}\t1\t1\t{A}2 {A}3\n")
        one.settle(claim, "crawled", record=crawled_line(claim.url, 200, "text/html", 1, 0, 0))
    assert holds[0] == 1
    assert looks.count(QUEUE) == 1 and looks.count(CLAIMS) == 1
    # and what it wrote is what separate holds write
    assert [line.split("\t")[0] for line in data_lines(tmp_path / QUEUE)] == [A + "1", A + "2", A + "3"]
    assert data_lines(tmp_path / CLAIMS)[-1] == f"D\tcrawled\t{A}1"
    assert two.refresh().crawled == 1 and two.counts().pending == 2


def test_the_next_claim_may_be_taken_inside_the_page_hold(tmp_path: Path, monkeypatch) -> None:
    """What a caller that claims its next batch at the end of a page's hold relies on (one hold
    a batch less; see notes/w-files.md): the claim inside the hold takes what the hold's own
    add queued, its records follow the page's D record whole, and another process reads both."""
    one, two = opened(tmp_path, owner=1), opened(tmp_path, owner=2)
    one.batch = CLAIM_BATCH
    one.add([QueueEntry(A + "0")])
    (claim,) = one.claim(1, 0.0, no_delay).claims
    holds = lock_counter(monkeypatch)
    with one.hold():
        one.add([QueueEntry(f"{A}{i}", 1) for i in range(1, 6)])
        one.settle(claim, "crawled", record=crawled_line(claim.url, 200, "text/html", 1, 0, 0))
        got = [c.url for c in one.claim(1, 0.0, no_delay).claims]
    assert holds[0] == 1
    assert got == [f"{A}{i}" for i in range(1, 4)]   # a batch: at most half of what is pending
    kinds = [r.split("\t")[0] for r in data_lines(tmp_path / CLAIMS)]
    assert kinds == ["C", "D", "C", "C", "C"]
    counts = two.refresh()
    assert (counts.crawled, counts.in_flight, counts.pending) == (1, 3, 2)
    assert [c.url for c in two.claim(1, 0.0, no_delay).claims] == [A + "4"]


def test_a_new_links_fingerprint_is_worked_out_once(tmp_path: Path, monkeypatch) -> None:
    """A page's new link is fingerprinted (BLAKE2b) once: when ``known`` finds it missing, not
    again when it is added nor when its written line is read back into the table (issue 15)."""
    store = opened(tmp_path, owner=1, shared=True)
    store.add([QueueEntry(A + "0")])
    assert isinstance(store.seen, files.SharedSeen)
    made: list[str] = []
    real = files.SharedSeen._fp

    def counted(key: str) -> int:
        made.append(key)
        return real(key)
    monkeypatch.setattr(files.SharedSeen, "_fp", staticmethod(counted))
    links = [f"{A}{i}" for i in range(10)]
    with store.hold():
        known = store.known(links)
        assert known == {A + "0"}
        added = store.add([QueueEntry(u, 1) for u in links if u not in known])
    assert [e.url for e in added] == links[1:]
    assert sorted(made) == sorted(links), made   # once each
    other = opened(tmp_path, owner=2, shared=True)
    assert other.known(links) == set(links) and other.counts().pending == 10
    made.clear()
    assert [e.url for e in store.add([QueueEntry(B + "1"), QueueEntry(A + "3")])] == [B + "1"]
    assert sorted(made) == [A + "3", B + "1"]   # without known: once each too


def test_the_lines_an_add_writes_are_indexed_without_being_read_back(tmp_path: Path, monkeypatch) -> None:
    """An add's own lines go into the index and the shared table as written (issue 15), as if
    read back: due ones claimed in order, a retry waits, another process sees the same; a line
    typed by hand without its newline before them is read as usual, never glued or lost."""
    store = opened(tmp_path, owner=1, shared=True)
    store.add([QueueEntry(A + "0")])
    reads: list[str] = []
    real = files._File.read_chunks
    monkeypatch.setattr(files._File, "read_chunks",
                        lambda self, size=None: reads.append(self.path.name) or real(self, size))
    later = time.time() + 3600
    added = store.add([QueueEntry(A + "1", 1, 0, 0.0, "http://a.test/é"), QueueEntry(A + "2", 1, 0, later),
                       QueueEntry(A + "3", 1, kind="requisite"), QueueEntry(B + "1", 1)])
    assert len(added) == 4 and QUEUE not in reads
    other = opened(tmp_path, owner=2, shared=True)
    for s in (store, other):
        assert s.known([A + "1", A + "2", A + "3", B + "1", B + "2"]) == {A + "1", A + "2", A + "3", B + "1"}
    got = [c.url for c in store.claim(1, time.time(), no_delay).claims]
    assert got == [A + "0"]
    got = [c.url for c in store.claim(1, time.time(), no_delay).claims]
    got += [c.url for c in store.claim(1, time.time(), no_delay).claims]
    got += [c.url for c in store.claim(1, time.time(), no_delay).claims]
    assert sorted(got) == [A + "1", A + "3", B + "1"]
    assert store.counts().pending == 1 and not store.claim(1, time.time(), no_delay).claims   # the retry waits
    with open(tmp_path / QUEUE, "a") as f:
        f.write(B + "typed")   # no newline: a person is typing it
    assert [e.url for e in store.add([QueueEntry(B + "2", 1)])] == [B + "2"]
    assert data_lines(tmp_path / QUEUE)[-2:] == [B + "typed", QueueEntry(B + "2", 1).line()[:-1]]
    urls = [c.url for c in other.claim(1, time.time(), no_delay).claims]
    urls += [c.url for c in other.claim(1, time.time(), no_delay).claims]
    assert sorted(urls) == [B + "2", B + "typed"]


def test_a_failure_inside_a_hold_lets_the_lock_go(tmp_path: Path) -> None:
    store = opened(tmp_path, owner=1)
    with pytest.raises(RuntimeError):
        with store.hold():
            store.add([QueueEntry(A + "1")])
            raise RuntimeError("a bug of ours")
    assert store.lock.depth == 0 and not store._holding
    other = opened(tmp_path, owner=2)
    assert [c.url for c in other.claim(1, 0.0, no_delay).claims] == [A + "1"]   # would block if held


# -- claims of a few URLs at --delay 0 ----------------------------------------------------------

def test_a_claim_at_delay_0_takes_a_batch_of_hosts_that_keep_no_pace(tmp_path: Path) -> None:
    store = opened(tmp_path, owner=1)
    store.batch = CLAIM_BATCH
    store.add([QueueEntry(f"{A}{i}") for i in range(20)])
    got = store.claim(1, 0.0, no_delay).claims
    assert [c.url for c in got] == [f"{A}{i}" for i in range(CLAIM_BATCH)]
    assert store.counts().in_flight == CLAIM_BATCH
    # one journal write for the batch: C records only, one per URL
    assert [r.split("\t")[0] for r in data_lines(tmp_path / CLAIMS)] == ["C"] * CLAIM_BATCH


def test_a_claim_step_asks_each_hosts_delay_once(tmp_path: Path) -> None:
    """A host's delay (its robots.txt, its shared state) cannot change while the claim holds the
    lock: a batch asks it once, not once per URL taken and once per candidate (issue 15)."""
    store = opened(tmp_path, owner=1)
    store.batch = CLAIM_BATCH
    store.add([QueueEntry(f"{A}{i}") for i in range(10)] + [QueueEntry(f"{B}{i}") for i in range(10)])
    asked: list[str] = []

    def delay_for(host: str) -> float:
        asked.append(host)
        return 0.0
    got = [c.url for c in store.claim(1, 0.0, delay_for).claims]
    assert len(got) == CLAIM_BATCH
    assert sorted(asked) == sorted(set(asked)), asked   # each host asked once
    assert {u.split("/")[2] for u in got} <= set(asked)


def test_a_paced_host_ends_a_batch_and_one_alone_is_taken_alone(tmp_path: Path) -> None:
    store = opened(tmp_path, owner=1)
    store.batch = CLAIM_BATCH
    store.add([QueueEntry(f"{B}{i}") for i in range(6)])
    paced = lambda host: 1.0 if host == "b.test" else 0.0   # noqa: E731
    assert [c.url for c in store.claim(1, 0.0, paced).claims] == [B + "0"]
    store.add([QueueEntry(f"{A}{i}") for i in range(10)])   # a.test keeps no pace, b.test does
    got = [c.url for c in store.claim(1, 0.5, paced).claims]
    assert got == [A + "0", A + "1", A + "2", A + "3"]   # b.test's slot is taken until 1.0
    got = [c.url for c in store.claim(1, 2.0, paced).claims]
    assert got == [B + "1"]   # b.test ready again: the best URL, taken alone


def test_a_batch_takes_no_url_of_a_paced_host_though_it_is_ready(tmp_path: Path) -> None:
    """A host whose robots.txt is still to fetch (ROBOTS_PENDING) or that has a delay: its URL
    in a batch would hold its slot while the batch's other pages are fetched first."""
    store = opened(tmp_path, owner=1)
    store.batch = CLAIM_BATCH
    store.add([QueueEntry(A + "0"), QueueEntry(B + "0"), QueueEntry(A + "1"), QueueEntry(B + "1"),
               *(QueueEntry(f"{A}{i}") for i in range(2, 10))])
    paced = lambda host: 30.0 if host == "b.test" else 0.0   # noqa: E731
    assert [c.url for c in store.claim(1, 0.0, paced).claims] == [A + "0", A + "1", A + "2", A + "3"]
    assert [c.url for c in store.claim(1, 0.0, paced).claims] == [B + "0"]   # alone


def test_a_batch_leaves_half_of_what_is_pending_to_the_other_workers(tmp_path: Path) -> None:
    store = opened(tmp_path, owner=1)
    store.batch = CLAIM_BATCH
    store.add([QueueEntry(f"{A}{i}") for i in range(3)])
    assert len(store.claim(1, 0.0, no_delay).claims) == 2
    assert len(store.claim(1, 0.0, no_delay).claims) == 1
    assert batch_size(1, 1, 4, 1, 0.0, 1) == 1 and batch_size(1, 1, 4, 1, 0.0, 100) == 4
    assert batch_size(4, 1, 4, 3, 0.5, 100) == 3   # a paced host: the batch ends with it
    assert batch_size(5, 5, 4, 2, 0.5, 100) == 5   # a caller's own limit stays


def test_a_batch_never_overshoots_max_pages(tmp_path: Path) -> None:
    store = opened(tmp_path, owner=1, max_pages=3)
    store.batch = CLAIM_BATCH
    store.add([QueueEntry(f"{A}{i}") for i in range(20)])
    first = store.claim(1, 0.0, no_delay).claims
    second = store.claim(1, 0.0, no_delay).claims
    assert len(first) + len(second) == 3


def test_a_killed_workers_whole_batch_comes_back_pending(tmp_path: Path) -> None:
    store = opened(tmp_path, owner=7)
    store.batch = CLAIM_BATCH
    store.add([QueueEntry(f"{A}{i}") for i in range(20)])
    taken = store.claim(1, 0.0, no_delay).claims
    store.settle(taken[0], "crawled", record=crawled_line(taken[0].url, 200, "text/html", 1, 0, 0))
    parent = opened(tmp_path, owner=1)   # the worker dies here: the parent reissues
    assert parent.reissue(7) == CLAIM_BATCH - 1
    urls = []
    while True:
        got = parent.claim(5, 0.0, no_delay).claims
        if not got:
            break
        urls += [c.url for c in got]
    assert sorted(urls) == sorted(f"{A}{i}" for i in range(1, 20))   # nothing lost, none twice


def test_a_worker_at_delay_0_claims_in_batches_and_crawls_each_page_once(site: TestSite, tmp_path: Path) -> None:
    paths = site.add_tree(40, 5)
    spider, store = crawl(site, tmp_path)
    assert store.batch == CLAIM_BATCH
    sizes = []
    claim = store.claim
    store.claim = lambda *a: _kept(claim(*a), sizes)  # type: ignore[method-assign]
    run(spider)
    assert sum(sizes) == len(paths) and max(sizes) == CLAIM_BATCH and len([s for s in sizes if s]) < len(paths) / 2
    claims = [r for r in data_lines(tmp_path / CLAIMS) if r.startswith("C\t")]
    assert len(claims) == len(paths)
    assert all(n == 1 for n in site.hits.values()) and len(site.hits) == len(paths)
    assert store.counts().crawled == len(paths) and store.counts().in_flight == 0


def _kept(result, sizes: list[int]):  # type: ignore[no-untyped-def]
    sizes.append(len(result.claims))
    return result


def test_a_paced_crawl_claims_one_url_at_a_time(site: TestSite, tmp_path: Path) -> None:
    site.add_tree(5, 2)
    spider, store = crawl(site, tmp_path, delay=0.5)
    assert store.batch == 1
    spider.close()


# -- the second's stamp -------------------------------------------------------------------------

@pytest.mark.parametrize("when", [0, 0.5, 0.999999, 1.0, -0.5, -1.0, 1_700_000_000.0, 1_700_000_000.9999999,
                                  1_700_000_001, 1e10 + 0.25])
def test_the_kept_stamp_is_what_strftime_says(when: float) -> None:
    want = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
    assert utc_stamp(when) == want
    assert utc_stamp(when) == want   # now from what was kept
    assert utc_stamp(when + 1) == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when + 1))


def test_a_time_with_no_stamp_still_raises() -> None:
    utc_stamp(5.5)
    with pytest.raises(ValueError):
        utc_stamp(float("nan"))
    with pytest.raises(OverflowError):
        utc_stamp(float("inf"))
    assert records.utc_stamp(5.5) == "1970-01-01T00:00:05Z"


def test_a_batchs_host_that_answers_429_is_not_asked_again_before_its_retry_after(site: TestSite,
                                                                                  tmp_path: Path) -> None:
    pages = [f"/{c}.html" for c in "abcdefgh"]
    site.route("/", body="".join(f'<a href="{p}">{p}</a>' for p in pages))
    asked: list[tuple[str, float]] = []
    spider, store = crawl(site, tmp_path)
    clock = spider.clock

    def answer(path: str, status: int, headers: dict):  # type: ignore[no-untyped-def]
        def handler(info):  # type: ignore[no-untyped-def]
            asked.append((path, clock()))
            if info.count == 1 and status != 200:
                return status, headers, b""
            return 200, {}, f"<p>{path}</p>".encode()
        return handler

    for p in pages:
        site.route(p, handler=answer(p, 429 if p == "/a.html" else 200, {"Retry-After": "100"}))
    run(spider)
    (t429,) = [t for p, t in asked if p == "/a.html"][:1]
    after = [(p, t) for p, t in asked if t >= t429 and (p, t) != ("/a.html", t429)]
    assert after and all(t >= t429 + 100 for _, t in after), asked   # the batch's others waited too
    crawled = sorted(line.split("\t")[0] for line in data_lines(tmp_path / CRAWLED))
    assert crawled == sorted([site.url("/")] + [site.url(p) for p in pages])


@pytest.mark.parametrize("order, workers, batch", [("bfs", 1, CLAIM_BATCH), ("dfs", 1, 1), ("best", 1, 1),
                                                    ("bfs", 2, CLAIM_BATCH)])
def test_a_claim_takes_a_batch_only_in_an_order_a_batch_keeps(tmp_path: Path, order: str, workers: int,
                                                               batch: int):
    """In dfs the newest link goes first and in best a preferred one: URLs claimed before a page's
    links are known would not be the order's choice (tests/test_selection.py crawls it). With
    several workers a batch keeps to one level (the tests below)."""
    store = FileStore(tmp_path).open()
    try:
        Spider(CrawlConfig(seeds=(A,), delay=0.0, order=order, workers=workers), store)
        assert store.batch == batch
    finally:
        store.close()


def _at(depth: int, *urls: str) -> list[QueueEntry]:
    return [QueueEntry(u, depth) for u in urls]


def test_a_batch_keeps_to_the_level_of_its_first_url(tmp_path: Path) -> None:
    """With several workers, pages of the next level in one's batch could be crawled while another
    still crawls this level's last pages, and meet first a level too deep what those link to
    (then --max-depth refuses what that links to: test_transfer.py's kill/push/pull crawl lost a
    page so, one run in four, when batches took any level)."""
    store = opened(tmp_path, owner=1)
    store.batch = CLAIM_BATCH
    store.add(_at(0, A + "0") + _at(1, *(f"{A}1-{i}" for i in range(8))))
    [first] = store.claim(1, 0.0, no_delay).claims
    assert first.url == A + "0"   # alone: the other 8 URLs pending are a level deeper
    store.settle(first, "crawled", record=crawled_line(first.url, 200, "text/html", 1, 0, 0))
    got = [c.url for c in store.claim(1, 0.0, no_delay).claims]
    assert got == [f"{A}1-{i}" for i in range(CLAIM_BATCH)]   # the next level is whole: a full batch


def test_no_batch_while_another_worker_crawls_the_level_before(tmp_path: Path) -> None:
    one, two = opened(tmp_path, owner=1), opened(tmp_path, owner=2)
    one.batch = two.batch = CLAIM_BATCH
    one.add(_at(0, A + "0") + _at(1, *(f"{A}1-{i}" for i in range(8))))
    [first] = one.claim(1, 0.0, no_delay).claims
    assert first.url == A + "0"
    assert [c.url for c in two.claim(1, 0.0, no_delay).claims] == [A + "1-0"]   # one: level 0 in flight
    one.settle(first, "crawled", record=crawled_line(first.url, 200, "text/html", 1, 0, 0))
    assert [c.url for c in two.claim(1, 0.0, no_delay).claims] == [f"{A}1-{i}" for i in range(1, 5)]


def test_a_levels_last_pages_are_shared_out_not_batched_by_one_worker(tmp_path: Path) -> None:
    store = opened(tmp_path, owner=1)
    store.batch = CLAIM_BATCH
    store.add(_at(1, *(f"{A}1-{i}" for i in range(3))) + _at(2, *(f"{A}2-{i}" for i in range(20))))
    assert len(store.claim(1, 0.0, no_delay).claims) == 2   # of the level's 3, though 23 are pending
    assert len(store.claim(1, 0.0, no_delay).claims) == 1
