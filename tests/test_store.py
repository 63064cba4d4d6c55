"""The frontier store: one contract suite for FileStore, its in-memory twin and the Redis store
(on a real redis-server), then the parts only the file store has (sharing between processes,
recovery after a kill, folding, torn lines). The Redis store's own parts: test_redisstore.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from spider.frontier.memory import MemoryStore
from spider.records import QueueEntry, crawled_line, failed_line, is_data, parse_queue_line
from spider.frontier.files import CLAIMS, CRAWLED, QUEUE, REJECTED, FileStore
from spider.frontier.recovery import is_clean, recover, write_signature
from redis_server import redis_server  # noqa: F401  (a pytest fixture: the Redis store's server)

A = "http://a.test/"
B = "http://b.test/"


def no_delay(host: str) -> float:
    return 0.0


def one_second(host: str) -> float:
    return 1.0


def redis_store(request, **kw):
    """A RedisStore on the session's redis-server, emptied at a test's first store (so that two
    stores of one test share a frontier, as two file stores of one folder do); skipped where no
    redis-server can be had."""
    from spider.frontier.redisstore import RedisStore
    client = request.getfixturevalue("redis_server").client()
    if not getattr(request.node, "redis_emptied", False):
        client.flushall()
        request.node.redis_emptied = True
    return RedisStore(client, "test", **kw)


@pytest.fixture(params=["file", "file-shared", "memory", "redis"])
def make_store(request, tmp_path):
    def make(owner: int = 1, max_pages: int | None = None):
        if request.param == "memory":
            return MemoryStore(owner=owner, max_pages=max_pages)
        if request.param == "redis":
            return redis_store(request, owner=owner, max_pages=max_pages)
        # file-shared: the dedup table in seen.bin, as a crawl opens it (one table for all processes)
        return FileStore(tmp_path, owner=owner, max_pages=max_pages, shared=request.param == "file-shared").open()
    return make


def entries(*urls: str, depth: int = 0) -> list[QueueEntry]:
    return [QueueEntry(u, depth) for u in urls]


def crawled(store, claim) -> None:
    store.settle(claim, "crawled", record=crawled_line(claim.url, 200, "text/html", 10, claim.entry.depth, 0))


# -- the contract ---------------------------------------------------------------------------------

def test_add_deduplicates_and_returns_only_new(make_store):
    s = make_store()
    assert [e.url for e in s.add(entries(A + "1", A + "2", A + "1"))] == [A + "1", A + "2"]
    assert s.add(entries(A + "2", A + "3")) == [QueueEntry(A + "3")]
    assert A + "1" in s.seen and A + "9" not in s.seen
    assert s.refresh().pending == 3


def test_known_answers_for_a_whole_page_of_urls(make_store):
    s = make_store()
    s.add(entries(A + "1", A + "2", B + "1"))
    claim = s.claim(1, 100.0, no_delay).claims[0]
    s.settle(claim, "crawled", record=f"{claim.url}\t200\n")
    s.refresh()
    asked = [A + "1", A + "2", A + "3", B + "1", B + "2", A + "2"]
    assert s.known(asked) == {A + "1", A + "2", B + "1"}   # pending, in flight or done: known
    assert s.known([]) == set()


def test_claims_come_in_queue_order_and_only_once(make_store):
    s = make_store()
    s.add(entries(*(A + str(i) for i in range(5))))
    first = s.claim(2, 100.0, no_delay)
    second = s.claim(10, 100.0, no_delay)
    assert [c.url for c in first.claims] == [A + "0", A + "1"]
    assert [c.url for c in second.claims] == [A + "2", A + "3", A + "4"]
    c = s.refresh()
    assert (c.pending, c.in_flight) == (0, 5)
    assert not second.finished


def test_finished_only_when_nothing_pending_and_nothing_in_flight(make_store):
    s = make_store()
    s.add(entries(A))
    [claim] = s.claim(5, 0.0, no_delay).claims
    assert not s.claim(5, 0.0, no_delay).finished   # one in flight: its links may still come
    crawled(s, claim)
    result = s.claim(5, 0.0, no_delay)
    assert result.finished and result.claims == []
    assert s.refresh().crawled == 1


def test_politeness_one_claim_per_host_per_delay(make_store):
    s = make_store()
    s.add(entries(A + "1", A + "2", B + "1", B + "2"))
    r = s.claim(10, 50.0, one_second)
    assert sorted(c.url for c in r.claims) == [A + "1", B + "1"]
    r = s.claim(10, 50.5, one_second)
    assert r.claims == [] and r.wait_until == pytest.approx(51.0)
    r = s.claim(10, 51.0, one_second)
    assert sorted(c.url for c in r.claims) == [A + "2", B + "2"]


def test_a_waiting_host_at_the_head_does_not_hide_other_hosts(make_store):
    s = make_store()
    s.add(entries(*(A + str(i) for i in range(6000))))   # more than WINDOW_LINES of one host
    s.add(entries(B + "1", B + "2"))
    r = s.claim(10, 100.0, one_second)
    assert sorted(c.url for c in r.claims) == [A + "0", B + "1"]
    r = s.claim(10, 100.5, one_second)
    assert r.claims == [] and r.wait_until == pytest.approx(101.0)
    r = s.claim(10, 101.0, one_second)
    assert sorted(c.url for c in r.claims) == [A + "1", B + "2"]


def test_a_new_url_is_claimable_right_after_a_scan_that_found_all_waiting(make_store):
    s = make_store()
    s.add(entries(A + "1", A + "2"))
    assert len(s.claim(5, 10.0, one_second).claims) == 1
    assert s.claim(5, 10.1, one_second).claims == []      # A waits until 11.0
    s.add(entries(B + "1"))
    assert [c.url for c in s.claim(5, 10.2, one_second).claims] == [B + "1"]
    s.reserve_host("b.test", 10.3)                         # a host state change is seen too
    assert s.claim(5, 10.2, one_second).claims == []


def test_reserve_host_blocks_that_host_only(make_store):
    s = make_store()
    s.add(entries(A + "1", B + "1"))
    s.reserve_host("a.test", 200.0)
    r = s.claim(10, 100.0, no_delay)
    assert [c.url for c in r.claims] == [B + "1"]
    assert r.wait_until == pytest.approx(200.0)


def test_retry_goes_back_with_its_attempts_and_waits(make_store):
    s = make_store()
    s.add(entries(A))
    [claim] = s.claim(1, 10.0, no_delay).claims
    s.settle(claim, "retry", requeue=QueueEntry(A, 0, 1, 20.0))
    r = s.claim(1, 15.0, no_delay)
    assert r.claims == [] and r.wait_until == pytest.approx(20.0) and not r.finished
    [again] = s.claim(1, 20.0, no_delay).claims
    assert again.entry.attempts == 1


def test_released_claims_are_pending_again(make_store):
    s = make_store()
    s.add(entries(A + "1", A + "2"))
    claims = s.claim(2, 0.0, no_delay).claims
    for c in claims:
        s.settle(c, "released", requeue=c.entry)
    assert s.refresh().pending == 2 and s.refresh().in_flight == 0
    assert [c.url for c in s.claim(5, 0.0, no_delay).claims] == [A + "1", A + "2"]


def test_reissue_returns_only_the_dead_owners_claims(make_store):
    s = make_store(owner=7)
    s.add(entries(A + "1", A + "2"))
    s.claim(2, 0.0, no_delay)
    assert s.reissue(8) == 0
    assert s.reissue(7) == 2
    c = s.refresh()
    assert (c.pending, c.in_flight) == (2, 0)


def test_budget_counts_completed_and_in_flight(make_store):
    s = make_store(max_pages=2)
    s.add(entries(*(A + str(i) for i in range(5))))
    r = s.claim(10, 0.0, no_delay)
    assert len(r.claims) == 2
    assert s.claim(10, 0.0, no_delay).claims == []
    crawled(s, r.claims[0])
    s.settle(r.claims[1], "failed", record=failed_line(r.claims[1].url, "404", 0, 0))
    r = s.claim(10, 0.0, no_delay)
    assert r.budget_reached and r.finished and r.pending == 3


def test_past_the_budget_only_rechecks_are_claimed(make_store):
    """Rechecks complete no new URL, so they go on once --max-pages is reached; new URLs do not."""
    s = make_store(max_pages=1)
    s.add(entries(A + "1", A + "2"))
    first = s.claim(5, 0.0, no_delay)
    assert [c.url for c in first.claims] == [A + "1"] and not first.finished
    crawled(s, first.claims[0])
    assert s.claim(5, 0.0, no_delay).finished                  # budget reached, nothing to recheck
    s.requeue([QueueEntry(A + "1", 0, 0, 0.0, "-", "recheck"), QueueEntry(A + "2", 0, 0, 0.0, "-", "recheck")])
    got = s.claim(5, 0.0, one_second)                           # A2's plain line stays pending
    assert [(c.url, c.entry.kind) for c in got.claims] == [(A + "1", "recheck")] and not got.finished
    waiting = s.claim(5, 0.0, one_second)                      # the other recheck waits for its host
    assert waiting.claims == [] and waiting.wait_until == 1.0 and not waiting.finished
    later = s.claim(5, 1.0, one_second)
    assert [(c.url, c.entry.kind) for c in later.claims] == [(A + "2", "recheck")]
    for c in got.claims + later.claims:
        s.settle(c, "rechecked")
    end = s.claim(5, 2.0, one_second)
    assert end.claims == [] and end.finished and s.refresh().pending == 1


def test_redirect_hops_do_not_use_the_budget(make_store):
    s = make_store(max_pages=1)
    s.add(entries(A))
    [claim] = s.claim(1, 0.0, no_delay).claims
    target = s.admit_and_claim(QueueEntry(A + "moved", 0, 0, 0.0, A), 0.0, 0.0)
    assert target is not None
    s.settle(claim, "hop", record=crawled_line(A, 301, "-", 0, 0, 0, A + "moved"))
    crawled(s, target)
    c = s.refresh()
    assert (c.crawled, c.hops, c.completed) == (1, 1, 1)


def test_admit_and_claim_refuses_known_urls(make_store):
    s = make_store()
    s.add(entries(A))
    assert s.admit_and_claim(QueueEntry(A), 0.0, 0.0) is None
    got = s.admit_and_claim(QueueEntry(B), 5.0, 2.0)
    assert got is not None and got.not_before == 5.0
    later = s.admit_and_claim(QueueEntry(B + "x"), 5.5, 2.0)
    assert later is not None and later.not_before == pytest.approx(7.0)   # host slot reserved


def test_logs_are_kept(make_store):
    s = make_store()
    s.log("rejected", "http://x.test/\tscope\t-\n")
    if isinstance(s, MemoryStore):
        assert s.logs["rejected"] == ["http://x.test/\tscope\t-\n"]
    elif hasattr(s, "lines"):   # RedisStore: a list of the file's lines
        assert s.lines("rejected") == ["http://x.test/\tscope\t-\n"]
    else:
        assert (s.folder / REJECTED).read_text().splitlines()[-1] == "http://x.test/\tscope\t-"


# -- file store only: sharing, recovery, folding ------------------------------------------------------

def test_two_processes_share_one_frontier(tmp_path: Path):
    one = FileStore(tmp_path, owner=1).open()
    two = FileStore(tmp_path, owner=2).open()
    one.add(entries(A + "1", A + "2"))
    assert two.add(entries(A + "2", A + "3")) == [QueueEntry(A + "3")]   # dedup across processes
    got1 = one.claim(1, 0.0, no_delay).claims
    got2 = two.claim(5, 0.0, no_delay).claims
    assert [c.url for c in got1] == [A + "1"]
    assert [c.url for c in got2] == [A + "2", A + "3"]
    assert two.refresh().in_flight_by_owner == {1: 1, 2: 2}
    crawled(one, got1[0])
    assert two.refresh().crawled == 1


def test_politeness_holds_across_processes(tmp_path: Path):
    one = FileStore(tmp_path, owner=1).open()
    two = FileStore(tmp_path, owner=2).open()
    one.add(entries(A + "1", A + "2"))
    assert len(one.claim(1, 100.0, one_second).claims) == 1
    r = two.claim(1, 100.2, one_second)
    assert r.claims == [] and r.wait_until == pytest.approx(101.0)


def test_recover_puts_claims_of_a_killed_crawl_back(tmp_path: Path):
    s = FileStore(tmp_path, owner=1).open()
    s.add(entries(A + "1", A + "2", A + "3"))
    c1, c2 = s.claim(2, 0.0, no_delay).claims
    crawled(s, c1)
    # the process dies here: c2 in flight, A3 pending, queue.txt still holds the claimed head
    rep = recover(tmp_path, lambda url, depth: None)
    assert rep.pending == 2 and rep.recovered_claims == 0   # c2's line is still in the queue file
    lines = [parse_queue_line(x).url for x in (tmp_path / QUEUE).read_text().splitlines() if not x.startswith("#")]
    assert lines == [A + "2", A + "3"]
    assert [x for x in (tmp_path / CLAIMS).read_text().splitlines() if not x.startswith("#")] == []
    fresh = FileStore(tmp_path, owner=3).open()
    assert fresh.refresh().crawled == 1
    assert fresh.add(entries(A + "1")) == []          # crawled stays known


def test_recover_keeps_claims_whose_queue_line_is_gone(tmp_path: Path):
    s = FileStore(tmp_path, owner=1).open()
    s.add(entries(A + "1"))
    s.claim(1, 0.0, no_delay)
    (tmp_path / QUEUE).write_text("# emptied by hand while stopped\n")
    rep = recover(tmp_path, lambda url, depth: None)
    assert rep.recovered_claims == 1
    assert A + "1" in (tmp_path / QUEUE).read_text()


def test_recovery_holds_the_queue_to_a_host_budget_given_on_resume(tmp_path: Path):
    """A --max-pages-per-host given on resume cuts back what is queued already: a host's crawled,
    failed and queued URLs together stay within it (rechecks of its crawled pages aside)."""
    (tmp_path / CRAWLED).write_text(crawled_line(A + "c0", 200, "text/html", 10, 0, 0)
                                    + crawled_line(A + "c1", 200, "text/html", 10, 0, 0))
    (tmp_path / QUEUE).write_text("".join(e.line() for e in [
        QueueEntry(A + "1", 1), QueueEntry(A + "2", 1), QueueEntry(B + "1", 1), QueueEntry(A + "out", 1),
        QueueEntry(A + "c0", 0, 0, 0.0, "-", "recheck"), QueueEntry(A + "1", 1, 1)]) + A + "3\n")
    rep = recover(tmp_path, lambda url, depth: "scope" if url.endswith("out") else None, max_per_host=3)
    queued = [parse_queue_line(x) for x in (tmp_path / QUEUE).read_text().splitlines() if is_data(x)]
    assert [(e.url, e.kind) for e in queued] == [(A + "1", "-"), (B + "1", "-"), (A + "c0", "recheck")]
    assert queued[0].attempts == 1                      # its later line still counts, and takes no place
    refused = [x.split("\t")[:2] for x in (tmp_path / REJECTED).read_text().splitlines() if is_data(x)]
    assert refused == [[A + "2", "host budget"], [A + "out", "scope"], [A + "3", "host budget"]]
    assert rep.refused == {"host budget": 2, "scope": 1}


def test_recover_reports_and_moves_bad_lines(tmp_path: Path):
    (tmp_path / QUEUE).write_text(
        "# header\n\nHTTP://A.test/x/../y#frag\nnot a url\nhttp://a.test/z\t1\t0\t0\t-\n"
        "http://other.test/\t1\t0\t0\t-\nhttp://a.test/z\t1\t2\t0\t-\n")
    rep = recover(tmp_path, lambda url, depth: "scope" if "other" in url else None)
    queue = [x for x in (tmp_path / QUEUE).read_text().splitlines() if not x.startswith("#")]
    assert [parse_queue_line(x).url for x in queue] == ["http://a.test/y", "http://a.test/z"]
    assert parse_queue_line(queue[1]).attempts == 2      # the last line of a URL wins
    assert any("queue.txt:4" in p and "not a url" in p for p in rep.problems)
    rejected = (tmp_path / REJECTED).read_text()
    assert "not a url\tqueue.txt:4" in rejected
    assert "http://other.test/\tscope" in rejected


def test_a_second_line_of_a_queued_url_is_admitted_like_the_first(tmp_path: Path):
    """A URL queued twice keeps its later line's fields (a retry's attempts) only if that line
    passes admission too: a hand-added depth 99 must not slip past --max-depth."""
    (tmp_path / QUEUE).write_text("http://a.test/p\t2\t0\t0\t-\nhttp://a.test/p\t99\t0\t0\thand\n"
                                  "http://a.test/q\t1\t0\t0\t-\nhttp://a.test/q\t1\t2\t0\t-\n")
    rep = recover(tmp_path, lambda url, depth: "depth" if depth > 5 else None)
    queue = [parse_queue_line(x) for x in (tmp_path / QUEUE).read_text().splitlines() if not x.startswith("#")]
    assert [(e.url, e.depth, e.attempts) for e in queue] == [("http://a.test/p", 2, 0), ("http://a.test/q", 1, 2)]
    assert "http://a.test/p\tdepth\thand" in (tmp_path / REJECTED).read_text()
    assert rep.refused == {"depth": 1}


def test_odd_fields_are_reported_even_for_a_url_already_crawled(tmp_path: Path):
    (tmp_path / "crawled.txt").write_text(crawled_line("http://a.test/done", 200, "text/html", 5, 0, 0))
    (tmp_path / QUEUE).write_text("http://a.test/done\tabc\t0\t0\t-\nhttp://a.test/done\t1\t0\t0\t-\n")
    rep = recover(tmp_path, lambda url, depth: None)
    assert any(p.startswith("queue.txt:1:") and "numbers" in p for p in rep.problems), rep.problems
    assert "http://a.test/done abc 0 0 -\tqueue.txt:1:" in (tmp_path / REJECTED).read_text()
    assert rep.pending == 0   # the well-formed line of a crawled URL is simply not pending


def test_a_hand_added_repeat_in_crawled_txt_is_moved_not_counted_twice(tmp_path: Path):
    record = crawled_line("http://a.test/1", 200, "text/html", 5, 0, 0)
    (tmp_path / "crawled.txt").write_text("http://a.test/0\n" + record + "http://a.test/1\nhttp://a.test/2\n"
                                          + crawled_line("http://a.test/0", 200, "text/html", 5, 0, 0)
                                          + "http://a.test/3\t200\tfoo\n")
    (tmp_path / "failed.txt").write_text("http://a.test/f\t404\nhttp://a.test/f\tgave up\n")
    rep = recover(tmp_path, lambda url, depth: None)
    moved = sorted(p.split(" moved")[0] for p in rep.problems)
    assert moved == ["crawled.txt:1: URL already on another line,", "crawled.txt:3: URL already on another line,",
                     "crawled.txt:6: not a URL record,", "failed.txt:2: URL already on another line,"], rep.problems
    assert [line.split("\t")[0] for line in (tmp_path / "crawled.txt").read_text().splitlines()
            if is_data(line)] == ["http://a.test/1", "http://a.test/2", "http://a.test/0"]
    assert "http://a.test/1\tcrawled.txt:3: URL already on another line" in (tmp_path / REJECTED).read_text()
    assert FileStore(tmp_path).open().refresh().crawled == 3   # a bare URL marks a page as done
    assert FileStore(tmp_path).open().refresh().failed == 1


def test_recover_drops_the_queue_lines_of_claims_a_killed_run_settled(tmp_path: Path):
    """A recheck's URL is crawled by design, so only the journal says a recheck was done: a
    recrawl killed with -9 must not check again what it had checked (helper report: every page
    of the killed run was fetched twice)."""
    (tmp_path / "crawled.txt").write_text("".join(crawled_line(A + str(i), 200, "text/html", 5, 0, 0)
                                                  for i in range(3)))
    s = FileStore(tmp_path, owner=1).open()
    s.requeue([QueueEntry(A + str(i), 0, 0, 0.0, "-", "recheck") for i in range(3)])
    s.add(entries(B + "new"))
    c0, c1, c2 = s.claim(3, 0.0, no_delay).claims
    s.settle(c0, "rechecked")
    s.settle(c1, "retry", requeue=QueueEntry(c1.url, 0, 1, 5.0, "-", "recheck"))
    # the process dies here: c2 in flight, B/new never claimed
    rep = recover(tmp_path, lambda url, depth: None)
    queue = [parse_queue_line(x) for x in (tmp_path / QUEUE).read_text().splitlines() if is_data(x)]
    assert sorted((e.url, e.attempts, e.kind) for e in queue) == [
        (A + "1", 1, "recheck"), (A + "2", 0, "recheck"), (B + "new", 0, "-")]
    assert rep.pending == 3


def test_times_more_than_a_year_ahead_are_reported_not_waited_for(tmp_path: Path):
    """A not_before typed in milliseconds, or a host time of 1e300, would keep a crawl waiting
    for ever with nothing to say why: recovery reports such lines and moves them away."""
    import time
    far = f"{time.time() * 1000:.0f}"
    (tmp_path / QUEUE).write_text(f"http://a.test/late\t0\t0\t{far}\t-\nhttp://a.test/ok\t0\t0\t0\t-\n"
                                  f"http://a.test/soon\t0\t1\t{time.time() + 60:.3f}\t-\n")
    (tmp_path / "hosts.txt").write_text("b.test\t1e300\t0\t0\t-\nc.test\t0\t1\t0\t-\n")
    rep = recover(tmp_path, lambda url, depth: None)
    assert [p.split(" (")[0] for p in rep.problems] == [
        "hosts.txt:1: next_allowed is more than a year ahead, moved to rejected.txt: 'b.test\\t1e300\\t0\\t0\\t-'",
        "queue.txt:1: not a crawlable URL"], rep.problems
    assert "not_before is more than a year ahead" in rep.problems[1]
    assert rep.pending == 2
    rejected = (tmp_path / REJECTED).read_text()
    assert f"late 0 0 {far}" in rejected and "b.test 1e300" in rejected
    assert "b.test" not in (tmp_path / "hosts.txt").read_text()


def test_queue_lines_with_bytes_that_are_not_utf8_are_reported_not_guessed(tmp_path: Path):
    """An invalid byte used to become U+FFFD, percent-encoded and fetched as a URL nobody wrote."""
    (tmp_path / QUEUE).write_bytes(b"http://a.test/q/\xff\xfe1\n\x00\x00\x00\nhttp://a.test/ok\n"
                                   b"http://a.test/src\t1\t0\t0\thttp://a.test/\xe9\n")
    rep = recover(tmp_path, lambda url, depth: None)
    assert [p.split(" (")[0] for p in rep.problems] == ["queue.txt:1: not a crawlable URL",
                                                         "queue.txt:2: not a crawlable URL"], rep.problems
    assert "bytes that are not UTF-8" in rep.problems[0]
    rejected = (tmp_path / REJECTED).read_text(encoding="utf-8")
    assert "http://a.test/q/\\xff\\xfe1\tqueue.txt:1: bytes that are not UTF-8" in rejected
    assert "\\x00\\x00\\x00\tqueue.txt:2:" in rejected   # the line as it was, not "-"
    queue = (tmp_path / QUEUE).read_bytes()
    assert b"http://a.test/ok\t0\t0\t0\t-\n" in queue
    assert b"http://a.test/src\t1\t0\t0\thttp://a.test/\xe9\n" in queue   # a byte in a note field is kept as is
    assert b"%EF%BF%BD" not in queue


def test_a_dead_workers_recheck_goes_back_whatever_checks_txt_holds(tmp_path: Path):
    """checks.txt has lines of this URL from earlier recrawls: they cannot say this check was
    made, so the claim goes back (one more check at most), never closed as done."""
    (tmp_path / "crawled.txt").write_text(crawled_line(A + "p", 200, "text/html", 5, 0, 0))
    (tmp_path / "checks.txt").write_text(f"# url\tstatus\tresult\tchecked_at\tcontent_hash\n"
                                         f"{A}p\t304\tunchanged\t2026-01-01T00:00:00Z\t-\n")
    s = FileStore(tmp_path, owner=7).open()
    s.requeue([QueueEntry(A + "p", 0, 0, 0.0, "-", "recheck")])
    assert [c.url for c in s.claim(1, 0.0, no_delay).claims] == [A + "p"]
    watcher = FileStore(tmp_path, owner=1).open()
    assert watcher.reissue(7) == 1
    again = watcher.claim(1, 0.0, no_delay).claims
    assert [(c.url, c.entry.kind) for c in again] == [(A + "p", "recheck")]


def test_torn_last_lines_are_moved_to_rejected(tmp_path: Path):
    good = crawled_line("http://a.test/1", 200, "text/html", 5, 0, 0)
    (tmp_path / "crawled.txt").write_text(good + good[:20])           # power loss mid-write
    (tmp_path / QUEUE).write_text("http://a.test/2\t1\t0\t0\t-\nhttp://a.test/3\t1\t0")
    rep = recover(tmp_path, lambda url, depth: None)
    assert (tmp_path / "crawled.txt").read_text() == good
    assert len(rep.problems) == 2 and all("torn last line" in p for p in rep.problems)
    rejected = (tmp_path / REJECTED).read_text()
    # kept whole, TABs turned to spaces so the fragment fits in the first field
    assert "http://a.test/1 200\tcrawled.txt:2: torn last line" in rejected
    assert "http://a.test/3 1 0\tqueue.txt:2: torn last line" in rejected
    queue = [x for x in (tmp_path / QUEUE).read_text().splitlines() if not x.startswith("#")]
    assert [parse_queue_line(x).url for x in queue] == ["http://a.test/2"]


def test_bare_url_without_final_newline_is_a_hand_edit(tmp_path: Path):
    (tmp_path / QUEUE).write_text("http://a.test/added-by-hand")
    rep = recover(tmp_path, lambda url, depth: None)
    assert rep.pending == 1 and rep.problems == []


def test_fold_leaves_exactly_the_pending_lines(tmp_path: Path):
    s = FileStore(tmp_path, owner=1).open()
    s.add(entries(*(A + str(i) for i in range(6))))
    s.add(entries(B + "0"))
    claims = s.claim(3, 0.0, one_second).claims       # A0, B0 (politeness skips A1.. for A)
    assert [c.url for c in claims] == [A + "0", B + "0"]
    for c in claims:
        crawled(s, c)
    assert s.fold()
    queue = [parse_queue_line(x).url for x in (tmp_path / QUEUE).read_text().splitlines() if not x.startswith("#")]
    assert queue == [A + str(i) for i in range(1, 6)]
    write_signature(tmp_path, "k")
    assert is_clean(tmp_path, "k") and not is_clean(tmp_path, "other settings")
    (tmp_path / QUEUE).open("a").write("http://a.test/hand\n")
    assert not is_clean(tmp_path, "k")                 # a hand edit forces the full check


@pytest.mark.parametrize("track_seen", [True, False])
def test_fold_keeps_a_last_line_still_being_written_by_hand(tmp_path: Path, track_seen: bool):
    FileStore(tmp_path).open().add(entries(A + "1", A + "2"))
    s = FileStore(tmp_path, owner=1, track_seen=track_seen).open()
    with open(tmp_path / QUEUE, "a") as f:
        f.write(A + "typing")   # no newline yet
    assert s.refresh().pending == 2
    assert s.fold()
    lines = [x for x in (tmp_path / QUEUE).read_text().splitlines() if is_data(x)]
    assert [parse_queue_line(x).url for x in lines] == [A + "1", A + "2", A + "typing"]
    assert s.refresh().pending == 3
    assert sorted(c.url for c in FileStore(tmp_path).open().claim(5, 0.0, no_delay).claims) == \
        [A + "1", A + "2", A + "typing"]


def test_fold_refuses_while_claims_are_in_flight(tmp_path: Path):
    s = FileStore(tmp_path, owner=1).open()
    s.add(entries(A))
    s.claim(1, 0.0, no_delay)
    before = (tmp_path / QUEUE).read_text()
    assert s.fold() is False
    assert (tmp_path / QUEUE).read_text() == before


def test_garbage_written_into_the_queue_while_running_is_reported(tmp_path: Path):
    s = FileStore(tmp_path, owner=1).open()
    with open(tmp_path / QUEUE, "a") as f:
        f.write("garbage line\n")
    s.add(entries(A))
    assert [c.url for c in s.claim(5, 0.0, no_delay).claims] == [A]
    assert "garbage line\tbad queue line" in (tmp_path / REJECTED).read_text()
    assert s.refresh().pending == 0


@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_reading_the_queue_keeps_exact_offsets_whatever_the_bytes(tmp_path: Path, monkeypatch, chunk: int):
    """The queue is read in chunks, decoded whole when ASCII and line by line otherwise: every
    line must still be claimed whole, once, at its own offset (small chunks force lines across
    chunk ends and a line longer than a chunk)."""
    import spider.frontier.files as store_module
    monkeypatch.setattr(store_module, "READ_CHUNK", chunk)
    lines = [A + "1\t0\t0\t0\t-", "# a comment", "", A + "caf%C3%A9\t0\t0\t0\thttp://a.test/\xe9t\xe9",
             B + "x" * 300 + "\t0\t0\t0\t-", "  ", A + "2\r", B + "3\t1\t0\t0\t-"]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    data = data.replace(b"\xc3\xa9t", b"\xff\xfet")   # bytes that are not UTF-8 at all
    (tmp_path / QUEUE).write_bytes(data)
    s = FileStore(tmp_path, owner=1).open()
    assert s.refresh().pending == 5
    got = [c.url for c in s.claim(10, 0.0, no_delay).claims]
    assert sorted(got) == sorted([A + "1", A + "caf%C3%A9", B + "x" * 300, A + "2", B + "3"])
    assert s.refresh().pending == 0
    assert s.claim(10, 0.0, no_delay).claims == []


@pytest.mark.parametrize("chunk", [16, 1 << 20])
def test_a_watcher_counts_and_folds_the_queue_like_a_worker(tmp_path: Path, monkeypatch, chunk: int):
    """The parent and ``status`` only count queue lines (in C, over whole chunks): blank lines,
    comments and lines of whitespace must be told from data lines exactly as a worker does."""
    import spider.frontier.files as store_module
    monkeypatch.setattr(store_module, "READ_CHUNK", chunk)
    text = ("# header\n\n" + A + "1\t0\t0\t0\t-\n   \n  # indented comment\n  " + A + "2\n"
            "\x1c\n\r\n" + B + "1\t0\t0\t0\t-\n#\n\n\n" + A + "3\n \x0b\x0c\n")
    for folder in ("worker", "watcher"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / QUEUE).write_text(text)
    worker = FileStore(tmp_path / "worker").open()
    watcher = FileStore(tmp_path / "watcher", track_seen=False).open()
    assert worker.refresh().pending == watcher.refresh().pending == 4
    assert worker.fold() and watcher.fold()
    assert (tmp_path / "worker" / QUEUE).read_text() == (tmp_path / "watcher" / QUEUE).read_text()
    folded = (tmp_path / "watcher" / QUEUE).read_text().splitlines()
    assert [parse_queue_line(x).url for x in folded if is_data(x)] == [A + "1", A + "2", B + "1", A + "3"]
    # The watcher did not read the folded file; what it knows must be what reading it gives.
    assert watcher.refresh().pending == FileStore(tmp_path / "watcher", track_seen=False).open().refresh().pending == 4
    FileStore(tmp_path / "watcher").open().add(entries(B + "2"))
    assert watcher.refresh().pending == 5


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parsing_any_queue_line_raises_only_value_error(line: str):
    try:
        e = parse_queue_line(line)
    except ValueError:
        return
    assert isinstance(e.depth, int) and e.url


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parsing_any_hosts_line_raises_only_value_error(line: str):
    from spider.politeness import parse_host_line
    try:
        host, state = parse_host_line(line)
    except ValueError:
        return
    assert host and state.delay >= 0


_junk = st.lists(st.one_of(
    st.text(max_size=60),
    st.sampled_from(["http://a.test/x", "http://a.test/y\t1\t0\t0\t-", "C\t0\t10\t1\t0\thttp://a.test/x",
                     "D\tcrawled\thttp://a.test/x", "H\ta.test\t1\t0\t0\t-", "\ufeffhttp://a.test/z",
                     "http://a.test/w\t200\ttext/html\t1\t0\t2026-01-01T00:00:00Z\t-"])), max_size=8)


@settings(max_examples=60, deadline=None)
@given(queue=_junk, crawled=_junk, failed=_junk, claims=_junk, hosts=_junk, cut=st.booleans())
def test_recovery_of_any_files_never_raises_and_leaves_parseable_files(queue, crawled, failed, claims,
                                                                       hosts, cut):
    import tempfile
    from spider.politeness import parse_host_line
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        for name, lines in (("queue.txt", queue), ("crawled.txt", crawled), ("failed.txt", failed),
                            ("claims.txt", claims), ("hosts.txt", hosts)):
            text = "\n".join(lines)
            (folder / name).write_text(text if cut else text + "\n", encoding="utf-8", errors="surrogatepass")
        recover(folder, lambda url, depth: None)
        for line in (folder / QUEUE).read_text().splitlines():
            if not line.startswith("#"):
                parse_queue_line(line)                     # every pending line parses
        for line in (folder / "hosts.txt").read_text().splitlines():
            if not line.startswith("#"):
                parse_host_line(line)
        assert [x for x in (folder / CLAIMS).read_text().splitlines() if not x.startswith("#")] == []
        store = FileStore(folder, owner=1).open()       # and the store opens on what recovery left
        assert store.refresh().in_flight == 0


# -- the contract: crawl order (spider/order.py), both stores ----------------------------------------

from spider.order import Order  # noqa: E402


@pytest.fixture(params=["file", "file-shared", "memory", "redis"])
def make_ordered_store(request, tmp_path):
    """Like ``make_store``, with an ``Order``: each test runs against every store."""
    def make(order: Order, owner: int = 1):
        if request.param == "memory":
            return MemoryStore(owner=owner, order=order)
        if request.param == "redis":
            return redis_store(request, owner=owner, order=order)
        return FileStore(tmp_path, owner=owner, order=order, shared=request.param == "file-shared").open()
    return make


def claim_urls(store, n: int = 100, now: float = 0.0, delay_for=no_delay) -> list[str]:
    return [c.url for c in store.claim(n, now, delay_for).claims]


def one_by_one(store, now: float = 0.0) -> list[str]:
    out = []
    while True:
        got = claim_urls(store, 1, now)
        if not got:
            return out
        out += got


def test_bfs_claims_shallow_first_then_fifo(make_ordered_store):
    s = make_ordered_store(Order("bfs"))
    s.add([QueueEntry(A + "d2a", 2), QueueEntry(A + "d1a", 1), QueueEntry(A + "d0", 0),
           QueueEntry(A + "d1b", 1), QueueEntry(B + "d1c", 1), QueueEntry(A + "d2b", 2)])
    assert one_by_one(s) == [A + "d0", A + "d1a", A + "d1b", B + "d1c", A + "d2a", A + "d2b"]


def test_bfs_one_claim_call_takes_several_in_order(make_ordered_store):
    s = make_ordered_store(Order("bfs"))
    s.add([QueueEntry(A + "x", 3), QueueEntry(A + "y", 1), QueueEntry(A + "z", 2)])
    assert claim_urls(s, 2) == [A + "y", A + "z"]
    s.add([QueueEntry(A + "w", 0)])                        # a shallower URL added later goes first
    assert claim_urls(s, 5) == [A + "w", A + "x"]


def test_dfs_claims_newest_first(make_ordered_store):
    s = make_ordered_store(Order("dfs"))
    s.add([QueueEntry(A + "1", 0), QueueEntry(A + "2", 1), QueueEntry(B + "3", 2)])
    assert claim_urls(s, 1) == [B + "3"]
    s.add([QueueEntry(A + "4", 3), QueueEntry(A + "5", 3)])
    assert claim_urls(s, 1) == [A + "5"]
    assert one_by_one(s) == [A + "4", A + "2", A + "1"]


def test_best_claims_preferred_first_then_by_score(make_ordered_store):
    s = make_ordered_store(Order("best", prefer=("/detail/",), defer=("/old/",)))
    s.add([QueueEntry(A + "list/1", 1),          # 10
           QueueEntry(A + "old/1", 0),           # 100
           QueueEntry(A + "detail/1", 3),        # -20
           QueueEntry(A + "list/2", 2),          # 20
           QueueEntry(A + "detail/2", 6),        # 10: ties with list/1, which came first
           QueueEntry(A + "detail/3", 1)])       # -40
    assert one_by_one(s) == [A + "detail/3", A + "detail/1", A + "list/1", A + "detail/2",
                             A + "list/2", A + "old/1"]


def test_order_goes_to_a_ready_host_before_a_waiting_hosts_better_url(make_ordered_store):
    s = make_ordered_store(Order("best", prefer=("/detail/",)))
    s.add([QueueEntry(A + "detail/1", 1), QueueEntry(A + "detail/2", 1), QueueEntry(B + "list", 4)])
    assert claim_urls(s, 1, 10.0, one_second) == [A + "detail/1"]
    r = s.claim(1, 10.5, one_second)                        # a.test waits until 11.0
    assert [c.url for c in r.claims] == [B + "list"]
    r = s.claim(1, 10.6, one_second)
    assert r.claims == [] and r.wait_until == pytest.approx(11.0)
    assert claim_urls(s, 1, 11.0, one_second) == [A + "detail/2"]


def test_a_retry_is_not_claimed_before_its_time(make_ordered_store):
    s = make_ordered_store(Order("bfs"))
    s.add([QueueEntry(A + "1", 0)])
    [claim] = s.claim(1, 10.0, no_delay).claims
    s.settle(claim, "retry", requeue=QueueEntry(A + "1", 0, 1, 20.0))
    s.add([QueueEntry(A + "deep", 4)])
    assert claim_urls(s, 5, 15.0) == [A + "deep"]           # the deeper URL goes; the retry waits
    r = s.claim(5, 19.999, no_delay)
    assert r.claims == [] and r.wait_until == pytest.approx(20.0) and not r.finished
    [again] = s.claim(5, 20.0, no_delay).claims
    assert (again.url, again.entry.attempts) == (A + "1", 1)


def test_a_retry_waits_for_the_later_of_its_time_and_its_host(make_ordered_store):
    s = make_ordered_store(Order("best"))
    s.add([QueueEntry(A + "1", 0)])
    [claim] = s.claim(1, 10.0, no_delay).claims
    s.settle(claim, "retry", requeue=QueueEntry(A + "1", 0, 1, 20.0))
    s.reserve_host("a.test", 30.0)                          # e.g. a 503 backed the host off
    r = s.claim(5, 25.0, no_delay)
    assert r.claims == [] and r.wait_until == pytest.approx(30.0)
    r = s.claim(5, 15.0, no_delay)
    assert r.claims == [] and r.wait_until == pytest.approx(30.0)
    assert claim_urls(s, 5, 30.0) == [A + "1"]


def test_a_retry_whose_host_is_ready_first_waits_for_its_own_time(make_ordered_store):
    s = make_ordered_store(Order("dfs"))
    s.add([QueueEntry(A + "1", 0)])
    [claim] = s.claim(1, 10.0, one_second).claims           # a.test ready again at 11.0
    s.settle(claim, "retry", requeue=QueueEntry(A + "1", 0, 1, 20.0))
    r = s.claim(5, 12.0, one_second)
    assert r.claims == [] and r.wait_until == pytest.approx(20.0)


@pytest.mark.parametrize("name,expected", [("bfs", ["1", "2"]), ("dfs", ["2", "1"])])
def test_a_due_retry_takes_its_place_by_key(make_ordered_store, name: str, expected: list[str]):
    """The requeued retry line comes before A2 in insertion order (queue.txt offset / counter),
    so once due, Order.key puts it first for bfs (FIFO) and second for dfs (LIFO)."""
    s = make_ordered_store(Order(name))
    s.add([QueueEntry(A + "1", 0)])
    [claim] = s.claim(1, 10.0, no_delay).claims
    s.settle(claim, "retry", requeue=QueueEntry(A + "1", 0, 1, 20.0))
    s.add([QueueEntry(A + "2", 0)])                          # queued after the retry
    assert claim_urls(s, 5, 20.0) == [A + x for x in expected]


def test_file_store_order_holds_across_two_instances(tmp_path: Path):
    order = Order("best", prefer=("/detail/",))
    one = FileStore(tmp_path, owner=1, order=order).open()
    two = FileStore(tmp_path, owner=2, order=order).open()
    one.add([QueueEntry(A + "list/1", 1), QueueEntry(A + "detail/1", 2),
             QueueEntry(A + "list/2", 1), QueueEntry(A + "detail/2", 2)])
    assert claim_urls(one, 1) == [A + "detail/1"]
    assert claim_urls(two, 1) == [A + "detail/2"]           # not detail/1: one has it
    two.add([QueueEntry(A + "detail/3", 5)])                 # 0: still better than a list page
    assert claim_urls(one, 1) == [A + "detail/3"]           # one sees what two appended
    assert claim_urls(one, 1) == [A + "list/1"]             # not detail/2: two has it
    assert claim_urls(two, 5) == [A + "list/2"]
    assert claim_urls(one, 5) == []
    c = two.refresh()
    assert (c.pending, c.in_flight, c.in_flight_by_owner) == (0, 5, {1: 3, 2: 2})


def test_file_store_instances_never_claim_the_same_line(tmp_path: Path):
    stores = [FileStore(tmp_path, owner=i, order=Order(name)).open()
              for i, name in enumerate(["bfs", "dfs", "best"], start=1)]
    stores[0].add([QueueEntry(A + str(i), i % 4) for i in range(40)])
    got: list[str] = []
    turn = 0
    while True:
        urls = claim_urls(stores[turn % 3], 1 + turn % 2)
        if not urls and not claim_urls(stores[(turn + 1) % 3], 3):
            break
        got += urls
        turn += 1
    got += claim_urls(stores[0], 100)
    assert sorted(got, key=lambda u: int(u.rsplit("/", 1)[1])) == [A + str(i) for i in range(40)]


def test_file_store_order_survives_reopening(tmp_path: Path):
    order = Order("bfs")
    s = FileStore(tmp_path, owner=1, order=order).open()
    s.add([QueueEntry(A + "d2", 2), QueueEntry(A + "d1", 1), QueueEntry(A + "d0", 0)])
    assert claim_urls(s, 1) == [A + "d0"]
    fresh = FileStore(tmp_path, owner=2, order=order).open()  # reads queue.txt and the journal
    assert one_by_one(fresh) == [A + "d1", A + "d2"]
