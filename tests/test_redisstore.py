"""What only the Redis store has: host leases and their expiry, fencing tokens, the packed
deduplication table's size, and durability when redis-server itself is killed. The verbs shared
with the file and memory stores are proven by the contract suite in test_store.py."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from redis_server import redis_server, start_redis  # noqa: F401  (pytest fixtures)
from spider.records import QueueEntry, crawled_line
from spider.urls import host_key
from spider.frontier.contract import StoreError

A = "http://a.test/"
B = "http://b.test/"


def no_delay(host: str) -> float:
    return 0.0


@pytest.fixture
def make(redis_server):  # noqa: F811
    from spider.frontier.redisstore import RedisStore
    client = redis_server.client()
    client.flushall()

    def store(owner: int = 1, **kw) -> RedisStore:
        return RedisStore(redis_server.client(), "p", owner=owner, machine="m", **kw)
    return store


def expire(store, host: str) -> None:
    """Let this store's lease of the host run out now (as if it had stalled for the whole lease),
    without a test that depends on how long a sleep lasts on a loaded machine; another holder's
    lease of the host (a host with no delay) runs on."""
    held = store.r.hget(store.per_host("l", host), store._who)
    assert held is not None, f"{store._who} holds no lease of {host}"
    store.r.hset(store.per_host("l", host), store._who, b"0" + held[held.index(b"\t"):])
    store.r.zadd(store.key("leases"), {host: 0})


def crawled(store, claim) -> bool:
    return store.settle(claim, "crawled", record=crawled_line(claim.url, 200, "text/html", 10, 0, 0))


def urls(result) -> list[str]:
    return [c.url for c in result.claims]


def test_a_host_is_claimed_only_by_its_lease_holder(make):
    one, two = make(1), make(2)
    one.add([QueueEntry(A + "1"), QueueEntry(A + "2"), QueueEntry(B + "1")])
    assert urls(one.claim(1, 0.0, no_delay)) == [A + "1"]
    assert urls(two.claim(5, 0.0, no_delay)) == [B + "1"]     # a.test is one's: two takes b.test only
    assert urls(one.claim(5, 0.0, no_delay)) == [A + "2"]
    c = one.refresh()
    assert (c.pending, c.in_flight, c.in_flight_by_owner) == (0, 3, {1: 2, 2: 1})


def test_an_expired_lease_gives_its_in_flight_urls_back(make):
    one, two = make(1), make(2)
    one.add([QueueEntry(A + "1"), QueueEntry(A + "2")])
    assert urls(one.claim(1, 0.0, no_delay)) == [A + "1"]       # then worker one stops answering
    assert urls(two.claim(5, 0.0, no_delay)) == []               # its lease still runs
    expire(one, "a.test")
    got = two.claim(5, 0.0, no_delay)
    assert sorted(urls(got)) == [A + "1", A + "2"]               # A1 came back to pending
    c = two.refresh()
    assert (c.pending, c.in_flight, c.in_flight_by_owner) == (0, 2, {2: 2})


def test_a_lease_runs_out_on_redis_clock(make):
    one, two = make(1, lease=0.2), make(2)
    one.add([QueueEntry(A + "1")])
    assert urls(one.claim(1, 0.0, no_delay)) == [A + "1"]
    time.sleep(0.5)                                             # longer than the lease: it has run out
    assert urls(two.claim(5, 0.0, no_delay)) == [A + "1"]


def test_a_stale_worker_cannot_settle_over_the_new_owner(make):
    """Worker one is paused past its lease (SIGSTOP, a long GC); two takes the host and the URL.
    One wakes up and settles: refused, nothing recorded; two's settle is the only record."""
    one, two = make(1), make(2)
    one.add([QueueEntry(A + "1")])
    [stale] = one.claim(1, 0.0, no_delay).claims
    expire(one, "a.test")
    [fresh] = two.claim(1, 0.0, no_delay).claims
    assert fresh.url == stale.url
    assert crawled(one, stale) is False
    assert one.lines("crawled") == [] and one.refresh().crawled == 0
    assert crawled(two, fresh) is True
    c = two.refresh()
    assert (c.crawled, c.in_flight, c.pending) == (1, 0, 0)
    assert len(two.lines("crawled")) == 1


def test_the_fencing_token_refuses_a_settle_from_an_earlier_lease(make):
    """The same worker id holds the URL again under a newer lease (a restarted worker with the
    same pid): a settle naming the old token is refused, the new claim stays in flight."""
    old, again = make(1), make(1)
    old.add([QueueEntry(A + "1")])
    [stale] = old.claim(1, 0.0, no_delay).claims
    expire(old, "a.test")
    [fresh] = again.claim(1, 0.0, no_delay).claims           # the expired lease was taken back
    assert old._tokens[stale.url] != again._tokens[fresh.url]
    assert crawled(old, stale) is False
    assert again.refresh().in_flight == 1
    assert crawled(again, fresh) is True and again.refresh().crawled == 1


def test_a_host_with_nothing_left_is_let_go(make, redis_server):  # noqa: F811
    one, two = make(1), make(2)
    one.add([QueueEntry(A + "1")])
    [c] = one.claim(5, 0.0, no_delay).claims
    two.add([QueueEntry(A + "2")])
    assert urls(two.claim(5, 0.0, no_delay)) == []               # one holds a.test
    assert crawled(one, c)
    [c] = one.claim(5, 0.0, no_delay).claims                    # still one's: it had work left
    assert c.url == A + "2"
    assert crawled(one, c)                                      # a.test has run dry: let go
    assert redis_server.client().hget("p:h:{a.test}", "lowner") is None
    two.add([QueueEntry(A + "3")])
    assert urls(two.claim(5, 0.0, no_delay)) == [A + "3"]


def test_a_settle_does_not_renew_the_lease(make):
    """The lease thread renews a worker's leases every second and each claim of the host does:
    a settle only ends the claim (and lets the host go when nothing is left), without the five
    commands a page a renewal cost Redis, and it asks no further than a host's lines ready to
    know it has work left. The fencing and the letting go are unchanged."""
    one = make(1)
    one.add([QueueEntry(A + "1"), QueueEntry(A + "2")])
    [c] = one.claim(1, 0.0, no_delay).claims
    far = b"99999999999999"                                     # an expiry no renewal would write
    held = one.r.hget(one.per_host("l", "a.test"), one._who)
    one.r.hset(one.per_host("l", "a.test"), one._who, far + held[held.index(b"\t"):])
    one.r.config_resetstat()
    assert crawled(one, c)
    assert one.r.info("commandstats")["cmdstat_zcard"]["calls"] == 1   # A2 ready: the host is kept
    assert one.r.hget(one.per_host("l", "a.test"), one._who).split(b"\t")[0] == far
    [c] = one.claim(1, 0.0, no_delay).claims                    # a claim renews it
    assert one.r.hget(one.per_host("l", "a.test"), one._who).split(b"\t")[0] != far
    assert crawled(one, c)                                      # nothing left: let go
    assert one.r.hget(one.per_host("l", "a.test"), one._who) is None


def test_reissue_ends_the_dead_workers_leases(make):
    one, two = make(1), make(2)
    one.add([QueueEntry(A + "1"), QueueEntry(A + "2")])
    one.claim(1, 0.0, no_delay)
    assert urls(two.claim(5, 0.0, no_delay)) == []
    assert two.reissue(1) == 1                                  # the parent saw worker 1 die
    assert urls(two.claim(5, 0.0, no_delay)) == [A + "1", A + "2"]


def test_workers_never_claim_the_same_url(make):
    """Three workers claim, crawl and release in turns: no URL is ever held by two at once,
    and each is crawled exactly once."""
    stores = [make(i) for i in range(1, 4)]
    want = [f"http://h{i % 5}.test/{i}" for i in range(60)]
    stores[0].add([QueueEntry(u, i % 3) for i, u in enumerate(want)])
    held: list[list] = [[], [], []]
    for turn in range(1000):
        k = turn % 3
        s = stores[k]
        if held[k]:
            c = held[k].pop(0)
            assert crawled(s, c) if turn % 5 else s.settle(c, "released", requeue=c.entry)
        got = s.claim(1 + turn % 2, 0.0, no_delay)
        holding = {c.url for h in held for c in h}
        assert not holding & set(urls(got))
        held[k] += got.claims
        if got.finished:
            break
    assert sorted(x.split("\t")[0] for x in stores[0].lines("crawled")) == sorted(want)
    assert stores[0].refresh().crawled == 60


def test_deduplication_costs_at_most_16_bytes_a_url(make, redis_server):  # noqa: F811
    """Fingerprints packed 8 bytes each into 4,096 strings, not one Redis key per URL."""
    s = make()
    n = 100_000
    s.add(QueueEntry(f"http://h{i % 50}.test/page/{i}") for i in range(n))
    client = redis_server.client()
    keys = list(client.scan_iter(match="p:seen:*", count=1000))
    assert len(keys) <= 4096
    total = sum(client.memory_usage(k, samples=0) for k in keys)
    assert total <= 16 * n + 64 * 1024, total / n
    assert f"http://h7.test/page/7" in s.seen and "http://h7.test/page/x" not in s.seen
    assert s.add([QueueEntry("http://h3.test/page/3")]) == []


def test_an_unreachable_redis_is_one_clear_error():
    pytest.importorskip("redis")
    from spider.frontier.redisstore import RedisStore
    with pytest.raises(StoreError, match=r"^cannot use Redis at redis://127\.0\.0\.1:1/0: "):
        RedisStore.from_url("redis://127.0.0.1:1/0", "p")
    with pytest.raises(StoreError, match="cannot use Redis at nonsense://x"):
        RedisStore.from_url("nonsense://x", "p")


WRITER = textwrap.dedent("""
    import sys
    from spider.records import QueueEntry
    from spider.frontier.redisstore import RedisStore
    s = RedisStore.from_url(sys.argv[1], "p", owner=1, machine="m", lease=0.5)
    i = 0
    while True:
        [e] = s.add([QueueEntry(f"http://h{i % 7}.test/{i}")])   # returns once Redis said OK
        print(e.url, flush=True)
        [c] = s.claim(1, 0.0, lambda h: 0.0).claims
        if s.settle(c, "crawled", record=c.url + "\\t200\\n"):
            print("done", c.url, flush=True)
        i += 1
""")


@pytest.mark.parametrize("fsync", ["always"])
def test_killing_redis_with_aof_always_loses_nothing_acknowledged(start_redis, tmp_path: Path, fsync: str):  # noqa: F811
    """A writer adds, claims and settles URLs; redis-server is killed with -9 in the middle; after
    a restart every URL the writer was told was added is known, and every settle it was told of is
    recorded: nothing acknowledged is lost (appendonly yes, appendfsync always). Then another
    worker finishes the crawl: every URL crawled exactly once, the dead writer's claim included."""
    from spider.frontier.redisstore import RedisStore
    server = start_redis(appendonly="yes", appendfsync=fsync)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, server.url], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, cwd=Path(__file__).parent.parent)
    acked, done = [], []
    assert writer.stdout is not None
    for line in writer.stdout:
        if line.startswith("done "):
            done.append(line.split()[1])
        else:
            acked.append(line.strip())
        if len(done) >= 300:
            break
    server.kill()
    rest = writer.stdout.read()   # what it printed before it saw Redis go
    writer.wait(30)
    for line in rest.splitlines():
        if line.startswith("done "):
            done.append(line.split()[1])
        elif line.startswith("http"):
            acked.append(line.strip())
    server.restart()
    s = RedisStore(server.client(), "p", owner=2, machine="m")
    assert all(u in s.seen for u in acked)
    recorded = [x.split("\t")[0] for x in s.lines("crawled")]   # (scripts are loaded again by the client)
    assert set(done) <= set(recorded) and len(recorded) == len(set(recorded))
    c = s.refresh()
    assert c.crawled == len(recorded)
    known = c.pending + c.in_flight + c.crawled
    assert len(acked) <= known <= len(acked) + 1   # at most the one add Redis died answering
    time.sleep(0.7)                                 # the dead writer's lease runs out: its claim comes back
    while not (r := s.claim(10, 0.0, no_delay)).finished:
        for claim in r.claims:
            assert s.settle(claim, "crawled", record=claim.url + "\t200\n")
    everything = [x.split("\t")[0] for x in s.lines("crawled")]
    assert len(everything) == len(set(everything)) == known and set(acked) <= set(everything)


def test_the_host_budget_refuses_at_entry_and_logs_each_url_once(make):
    s = make(max_per_host=2)
    got = s.add([QueueEntry(A + str(i), 0, 0, 0.0, A) for i in range(4)] + [QueueEntry(B + "1")])
    assert [e.url for e in got] == [A + "0", A + "1", B + "1"]
    assert s.add([QueueEntry(A + "3", 0, 0, 0.0, A)]) == []
    assert s.lines("rejected") == [f"{A}2\thost budget\t{A}\n", f"{A}3\thost budget\t{A}\n"]
    assert A + "3" not in s.seen and s.refresh().pending == 3


def test_a_clean_stop_lets_its_hosts_go_at_once(make):
    one, two = make(1), make(2)
    one.add([QueueEntry(A + "1"), QueueEntry(A + "2")])
    one.claim(1, 0.0, no_delay)
    assert urls(two.claim(5, 0.0, no_delay)) == []
    assert one.close() == 1                                     # A1 was still in flight
    assert urls(two.claim(5, 0.0, no_delay)) == [A + "1", A + "2"]


def test_a_redis_that_goes_away_is_one_store_error(start_redis):  # noqa: F811
    from spider.frontier.redisstore import RedisStore
    server = start_redis()
    s = RedisStore.from_url(server.url, "p", owner=1, machine="m")
    s.add([QueueEntry(A + "1")])
    server.kill()
    for verb in (lambda: s.claim(1, 0.0, no_delay), lambda: s.add([QueueEntry(A + "2")]),
                 lambda: A + "3" in s.seen, s.refresh):   # (A1 is known here: not asked)
        with pytest.raises(StoreError, match=r"^Redis store 'p': ConnectionError: ") as e:
            verb()
        assert "\n" not in str(e.value)


def test_a_worker_takes_no_more_hosts_than_its_share(make):
    one, two = make(1, max_hosts=2), make(2, max_hosts=2)
    one.add([QueueEntry(f"http://h{i}.test/{j}") for j in range(2) for i in range(4)])
    first = {host_key(u) for u in urls(one.claim(10, 0.0, no_delay))}
    second = {host_key(u) for u in urls(two.claim(10, 0.0, no_delay))}
    assert len(first) == len(second) == 2 and not first & second
    assert one.refresh().pending == 0


def test_a_redirect_target_on_another_workers_host_is_left_to_it(make):
    one, two = make(1), make(2)
    one.add([QueueEntry(A + "1"), QueueEntry(B + "1")])
    assert urls(one.claim(1, 0.0, no_delay)) == [A + "1"]
    [b] = two.claim(1, 0.0, no_delay).claims
    assert two.admit_and_claim(QueueEntry(A + "moved", 0, 0, 0.0, B + "1"), 0.0, 0.0) is None
    assert A + "moved" in two.seen and two.refresh().pending == 1
    assert urls(one.claim(5, 0.0, no_delay)) == [A + "moved"]
    assert crawled(two, b)


def test_a_retry_not_due_waits_also_for_its_hosts_slot(make):
    """Asked before the retry's own time, the wait is the later of that time and its host's slot
    (the contract test asks after the retry's time, when it is indexed already)."""
    s = make()
    s.add([QueueEntry(A + "1")])
    [c] = s.claim(1, 10.0, no_delay).claims
    assert s.settle(c, "retry", requeue=QueueEntry(A + "1", 0, 1, 20.0))
    s.reserve_host("a.test", 30.0)
    r = s.claim(5, 15.0, no_delay)
    assert r.claims == [] and r.wait_until == pytest.approx(30.0)


def test_host_state_text_hashes_and_logs_are_shared_by_workers(make):
    from spider.politeness import HostState
    one, two = make(1), make(2)
    one.update_host("a.test", lambda st: HostState(12.5, 2.0, 3, "robots unavailable"))
    assert two.host_state("a.test") == HostState(12.5, 2.0, 3, "robots unavailable")
    two.reserve_host("a.test", 20.0)
    one.reserve_host("a.test", 15.0)                             # only ever later
    assert one.host_state("a.test").next_allowed == 20.0
    assert one.first_with_text("h1", A + "1") == A + "1"
    assert two.first_with_text("h1", A + "2") == A + "1"
    one.log("fetch", "line 1\nline 2\n")
    two.log("fetch", "line 3\n")
    assert one.lines("fetch") == ["line 1\n", "line 2\n", "line 3\n"]


def test_concurrent_host_updates_lose_none(make):
    """update_host is read-change-write under WATCH: four workers adding one failure each, 50
    times, at the same time, leave exactly 200."""
    import threading
    from dataclasses import replace
    stores = [make(i) for i in range(4)]

    def bump(s) -> None:
        for _ in range(50):
            s.update_host("a.test", lambda st: replace(st, failures=st.failures + 1))
    threads = [threading.Thread(target=bump, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stores[0].host_state("a.test").failures == 200


WORKER = textwrap.dedent("""
    import os, signal, sys, time
    from spider.records import crawled_line
    from spider.frontier.redisstore import RedisStore
    url, owner, out, stop_after = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], "a"), int(sys.argv[4])
    batch = int(sys.argv[6])
    s = RedisStore.from_url(url, "p", owner=owner, machine="m", lease=2.0, max_hosts=4, join=sys.argv[5] == "1",
                            batch=batch)
    fetched = 0
    while True:
        s.renew_leases()
        r = s.claim(2 if batch == 1 else 1, time.time(), lambda h: 0.0)
        if r.finished:
            break
        if not r.claims:
            time.sleep(0.05)
        for c in r.claims:
            print("fetch", c.url, file=out, flush=True)
            fetched += 1
            if fetched == stop_after:   # mid-fetch: the claim is in flight, not settled
                os.kill(os.getpid(), signal.SIGKILL if owner == 1 else signal.SIGSTOP)
            time.sleep(0.005)
            ok = s.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 1, 0, 0))
            print("done" if ok else "refused", c.url, file=out, flush=True)
""")


@pytest.mark.parametrize("hosts, join, batch", [(10, False, 1), (1, True, 1), (1, True, 4)])
def test_worker_processes_killed_and_paused_mid_fetch_record_every_url_once(
        start_redis, tmp_path: Path, hosts: int, join: bool, batch: int):  # noqa: F811
    """Three worker processes share the frontier. Worker 1 is killed with -9 in the middle of a
    fetch; worker 2 is stopped (SIGSTOP) in the middle of a fetch until another worker has taken
    its host back and recorded that URL, then continued. Every URL is recorded exactly once; the
    stopped worker's late settle is refused; refetches are at most what the two had in flight.
    On 10 hosts each worker holds its own; on one host with no delay (``join``) the three hold it
    together, each its own lease: 1 and 2 lose theirs, 3 goes on. With ``batch`` 4 (a crawl's
    workers at --delay 0) each claim takes up to 4 URLs of the host: refetches stay within what
    the two had in flight, at most 4 each."""
    from spider.frontier.redisstore import RedisStore
    server = start_redis()
    s = RedisStore(server.client(), "p", owner=9, machine="m")
    want = [f"http://h{i % hosts}.test/{i}" for i in range(300)]
    s.add([QueueEntry(u) for u in want])
    logs = [tmp_path / f"w{i}.txt" for i in (1, 2, 3)]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, server.url, str(i), str(logs[i - 1]),
                               str(stop), "1" if join else "0", str(batch)], cwd=Path(__file__).parent.parent)
             for i, stop in ((1, 20), (2, 30), (3, 0))]
    try:
        deadline = time.monotonic() + 120
        held = None
        while held is None and time.monotonic() < deadline:   # worker 2 stops itself at its 30th fetch
            lines = logs[1].read_text().splitlines() if logs[1].exists() else []
            if len([x for x in lines if x.startswith("fetch")]) == 30 and lines[-1].startswith("fetch"):
                held = lines[-1].split()[1]
            time.sleep(0.05)
        assert held is not None
        if join:   # worker 2 is stopped holding h0.test, and worker 3 holds it too, working on
            assert {b"m/2", b"m/3"} <= set(s.r.hkeys("p:l:{h0.test}"))
        while time.monotonic() < deadline:   # until another worker has taken it back and recorded it
            if any(x.startswith(held + "\t") for x in s.lines("crawled")):
                break
            time.sleep(0.05)
        procs[1].send_signal(signal.SIGCONT)
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert procs[0].returncode == -signal.SIGKILL and procs[1].returncode == 0 == procs[2].returncode
    recorded = [x.split("\t")[0] for x in s.lines("crawled")]
    assert sorted(recorded) == sorted(want)                          # each exactly once
    w2 = logs[1].read_text().splitlines()
    assert f"refused {held}" in w2
    fetches = [x.split()[1] for log in logs for x in log.read_text().splitlines() if x.startswith("fetch")]
    assert set(fetches) == set(want)
    assert 2 <= len(fetches) - len(want) <= 2 * max(2, batch)      # at most the two workers' claims
    c = s.refresh()
    assert (c.pending, c.in_flight, c.crawled) == (0, 0, 300)


# -- the same answers as the in-memory twin, for any sequence of verbs ---------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

from spider.frontier.memory import MemoryStore  # noqa: E402
from spider.order import Order  # noqa: E402

_paths = st.sampled_from([f"http://{h}.test/{p}" for h in "abc" for p in range(6)])
_ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(st.tuples(_paths, st.integers(0, 3)), max_size=4)),
    st.tuples(st.just("claim"), st.integers(1, 4), st.sampled_from([0.0, 1.0])),
    st.tuples(st.just("settle"), st.integers(0, 20), st.sampled_from(["crawled", "failed", "retry", "released"])),
    st.tuples(st.just("reserve"), st.sampled_from("abc"), st.integers(0, 5)),
    st.tuples(st.just("tick"), st.integers(1, 3)),
    st.tuples(st.just("admit"), _paths, st.sampled_from([0.0, 1.0])),
), max_size=30)


@settings(max_examples=40, deadline=None)
@given(ops=_ops, order=st.sampled_from(["bfs", "dfs", "best"]), budget=st.sampled_from([None, 5]))
def test_any_sequence_of_verbs_gives_what_the_memory_store_gives(redis_server, ops, order, budget):  # noqa: F811
    """One worker, no leases in the way: claims (which URLs, in which order), redirect targets,
    counts, waits and the end of the crawl must match the in-memory twin step by step."""
    from spider.frontier.redisstore import RedisStore
    client = redis_server.client()
    client.flushall()
    o = Order(order, prefer=("/1",), defer=("/4",))
    red = RedisStore(client, "p", machine="m", order=o, max_pages=budget)
    mem = MemoryStore(order=o, max_pages=budget)
    now = 10.0
    held: list = []
    for op in ops:
        if op[0] == "add":
            es = [QueueEntry(u, d) for u, d in op[1]]
            assert [e.url for e in red.add(es)] == [e.url for e in mem.add(es)]
        elif op[0] == "claim":
            delay = (lambda h, d=op[2]: d)
            r, m = red.claim(op[1], now, delay), mem.claim(op[1], now, delay)
            assert urls(r) == urls(m)
            assert (r.pending, r.in_flight, r.finished, r.budget_reached) == \
                (m.pending, m.in_flight, m.finished, m.budget_reached)
            if not m.claims:
                assert r.wait_until == (pytest.approx(m.wait_until) if m.wait_until is not None else None)
            held += r.claims
        elif op[0] == "settle" and held:
            c = held.pop(op[1] % len(held))
            kind = op[2]
            again = {"retry": QueueEntry(c.url, c.entry.depth, c.entry.attempts + 1, now + 2),
                     "released": c.entry}.get(kind)
            record = crawled_line(c.url, 200, "text/html", 1, 0, 0) if kind in ("crawled", "failed") else None
            assert red.settle(c, kind, record=record, requeue=again)
            mem.settle(c, kind, record=record, requeue=again)
        elif op[0] == "reserve":
            red.reserve_host(f"{op[1]}.test", now + op[2])
            mem.reserve_host(f"{op[1]}.test", now + op[2])
        elif op[0] == "tick":
            now += op[1]
        elif op[0] == "admit":   # a redirect target
            e = QueueEntry(op[1], 1, 0, 0.0, "http://a.test/from")
            r, m = red.admit_and_claim(e, now, op[2]), mem.admit_and_claim(e, now, op[2])
            assert (r is None) == (m is None)
            if r is not None:
                assert (r.url, r.not_before) == (m.url, m.not_before)
                held.append(r)
        rc, mc = red.refresh(), mem.refresh()
        assert (rc.pending, rc.in_flight, rc.crawled, rc.failed) == (mc.pending, mc.in_flight, mc.crawled, mc.failed)


def test_a_host_told_to_wait_long_is_let_go_for_another(make):
    """With its share full, a worker whose host must wait (Retry-After: an hour) lets it go at
    its next claim and takes a host that is ready."""
    s = make(max_hosts=1, let_go=10.0)
    s.add([QueueEntry(A + "1"), QueueEntry(A + "2"), QueueEntry(B + "1")])
    [c] = s.claim(1, 0.0, no_delay).claims
    assert crawled(s, c)
    s.reserve_host("a.test", 3.0)
    assert urls(s.claim(5, 1.0, no_delay)) == []                # a short wait: a.test is kept
    s.reserve_host("a.test", 3600.0)
    assert urls(s.claim(5, 1.0, no_delay)) == [B + "1"]


def counting_client(server):
    """A client of ``server`` that counts its round trips: one per send (a pipeline is one)."""
    import redis

    sent = {"n": 0}

    class Counting(redis.Connection):
        def send_packed_command(self, command, check_health=True):
            sent["n"] += 1
            return super().send_packed_command(command, check_health)

    pool = redis.ConnectionPool(host="127.0.0.1", port=server.port, connection_class=Counting)
    client = redis.Redis(connection_pool=pool)
    return client, sent


def test_a_crawled_page_costs_at_most_three_round_trips(redis_server, site, tmp_path: Path):  # noqa: F811
    """A worker's page on Redis (claim, robots, dedup of its links, the links queued, the outcome
    and its log lines) takes at most 3 round trips on average: counted on the wire, on a real
    crawl of 40 pages with 8 links each, one worker as a crawl's workers run (``defer``)."""
    from spider.cluster import ClusterStore
    from spider.config import CrawlConfig
    from spider.spider import Spider

    pages = 40
    site.route("/robots.txt", body="User-agent: *\nDisallow: /private\n", content_type="text/plain")
    for i in range(pages):
        links = "".join(f'<a href="/p/{(i * 7 + j) % pages}">x</a>' for j in range(8))
        site.route("/" if i == 0 else f"/p/{i}", body=f"<title>{i}</title><p>page {i}</p>{links}"
                   '<a href="/private/x">no</a>')
    redis_server.client().flushall()
    client, sent = counting_client(redis_server)
    store = ClusterStore(client, "rt", folder=tmp_path, owner=1, machine="m", defer=True)
    config = CrawlConfig(seeds=(site.url("/"),), delay=0.0, connect_timeout=2.0, read_timeout=2.0)
    store.add([QueueEntry(site.url("/"))])
    spider = Spider(config, store)
    before = sent["n"]
    try:
        spider.run(lambda: False)
        store.close()
    finally:
        spider.close()
    trips = sent["n"] - before
    c = store.refresh()
    assert (c.crawled, c.pending, c.in_flight) == (pages, 0, 0)
    assert len(store.lines("crawled")) == pages and len(store.lines("links")) == pages
    assert trips / pages <= 3, f"{trips} round trips for {pages} pages"


def test_deferred_writes_go_with_the_next_call_and_a_stale_settle_is_still_refused(make):
    """A crawl's worker (``defer``) sends its settles and log lines with its next script: until
    then nobody sees them, then all of them, in order; a settle whose lease ran out meanwhile is
    refused when it is sent, as a settle sent at once would be."""
    one, two = make(1, defer=True), make(2)
    one.add([QueueEntry(A + "1"), QueueEntry(B + "1")])
    [a1] = one.claim(1, 0.0, no_delay).claims
    one.log("fetch", "a1 fetched\n")
    assert crawled(one, a1)                                      # answered at once ...
    assert two.lines("fetch") == [] and two.refresh().crawled == 0   # ... sent later
    [b1] = one.claim(1, 0.0, no_delay).claims                   # with this call
    assert two.lines("fetch") == ["a1 fetched\n"] and two.refresh().crawled == 1
    expire(one, "b.test")                                        # one stalls past its lease
    [again] = two.claim(1, 0.0, no_delay).claims
    assert again.url == b1.url
    crawled(one, b1)
    one.flush()                                                  # refused: b1 is two's now
    assert two.refresh().crawled == 1 and two.refresh().in_flight_by_owner == {2: 1}
    assert crawled(two, again)
    assert [line.split("\t")[0] for line in two.lines("crawled")] == [A + "1", B + "1"]
    assert two.refresh().crawled == 2


def claim_all(store, limit: int) -> list[tuple[str, str]]:
    """Claim (and settle) until nothing is left: (url, source) of each claim, in claim order."""
    got: list[tuple[str, str]] = []
    while True:
        claims = store.claim(limit, 0.0, no_delay).claims
        if not claims:
            return got
        got += [(c.url, c.entry.source) for c in claims]
        for c in claims:
            store.settle(c, "crawled")


def test_a_pending_url_costs_at_most_its_length_and_48_bytes(make, redis_server):  # noqa: F811
    """Pages' links wait in their hosts' sorted sets as blocks (one member for up to 64 lines of
    one add, the source written once): Redis memory a pending URL, measured by MEMORY USAGE,
    stays within the URL's length + 48 bytes; and the lines come out as they went in, in order."""
    s = make()
    pages, links = 300, 24
    added = []
    for p in range(pages):   # each page links 24 new URLs on 3 hosts
        page = f"http://site{p % 3}.test/a/2026/page-{p}.html"
        batch = [QueueEntry(f"http://site{(p + i) % 3}.test/a/2026/{p % 97}/a-page-about-thing-{p}-{i}.html",
                            1, 0, 0.0, page) for i in range(links)]
        added += s.add(batch)
    assert len(added) == pages * links
    r = redis_server.client()
    used = sum(r.memory_usage(k, samples=0) for k in r.scan_iter("p:q:*"))
    length = sum(len(e.url) for e in added) / len(added)
    assert used / len(added) <= length + 48, (used / len(added), length)
    got = claim_all(s, 50)
    assert sorted(got) == sorted((e.url, e.source) for e in added)
    for host in ("site0.test", "site1.test", "site2.test"):   # each host's in the order added
        mine = [u for u, _ in got if host_key(u) == host]
        assert mine == [e.url for e in added if host_key(e.url) == host]


def test_a_lease_tick_is_one_round_trip(redis_server):  # noqa: F811
    """A worker's lease thread, once a second: its renewals, heartbeat and share of hosts in one
    round trip (they took four to six apart: more than a polite crawl's pages)."""
    from spider.cluster import ClusterStore

    redis_server.client().flushall()
    client, sent = counting_client(redis_server)
    store = ClusterStore(client, "tick", owner=1, machine="m", lease=5.0)
    other = ClusterStore(redis_server.client(), "tick", owner=2, machine="m")
    store.add([QueueEntry(A + "1"), QueueEntry(A + "2"), QueueEntry(B + "1"), QueueEntry(B + "2")])
    assert urls(store.claim(1, 0.0, no_delay)) == [A + "1"]
    other.beat()
    store.tick("-", 3.0)   # the first call loads the script
    before = sent["n"]
    assert store.tick("/warc", 3.0) == ["a.test"]
    assert sent["n"] - before == 1
    assert store.max_hosts == 1 and store.someone_idle   # 2 hosts, 2 live workers; other holds none
    assert store.beats()["m/1"][2:] == ["0", "0", "/warc"]
    store.r.hdel(store.per_host("l", "a.test"), "m/1")   # a.test taken over
    store.r.hset(store.per_host("l", "a.test"), "m/9", "99999999999999\t7")
    assert store.tick("-", 3.0) == [] and not store.leased("a.test")


def test_the_one_script_tick_counts_the_heartbeats_the_lease_thread_watches(redis_server):  # noqa: F811
    """Between ticks the lease thread reshares as soon as the number of heartbeats changes (a
    worker joins: n-netns); the one-script tick says how many it counted, as update_share did,
    so a crawl where no worker joins does not reshare (several round trips) every 0.1 s."""
    from spider.cluster import ClusterStore, _Lease

    redis_server.client().flushall()
    store = ClusterStore(redis_server.client(), "watch", owner=1, machine="m", lease=5.0)
    ClusterStore(redis_server.client(), "watch", owner=2, machine="m").beat()
    lease = _Lease(store, 1.0, "-")
    lease.tick()
    assert store.beating == store.beat_count() == 2   # nothing changed: no reshare
    ClusterStore(redis_server.client(), "watch", owner=3, machine="m").beat()
    assert store.beat_count() != store.beating         # a worker joined: reshare now
    lease.reshare()
    assert store.beating == 3


# -- a host with no delay: several holders, each with its own lease ------------------------------------

def held_by(store, host: str) -> dict[str, str]:
    """The holders of a host's leases in Redis: owner -> token."""
    return {o.decode(): v.decode().split("\t")[1] for o, v in store.r.hgetall(store.per_host("l", host)).items()}


def shared(make, n: int, urls: int = 12) -> list:
    """``n`` workers that may join a host with no delay, each holding a.test with a URL in flight:
    the first claim of a host holds it alone (its pace is not known yet) and tells Redis its pace
    (0); the others join it."""
    stores = [make(i + 1, join=True) for i in range(n)]
    stores[0].add([QueueEntry(f"{A}{i}") for i in range(urls)])
    claims = [s.claim(1, 0.0, no_delay).claims for s in stores]
    assert [len(c) for c in claims] == [1] * n
    return [(s, c[0]) for s, c in zip(stores, claims)]


def test_a_host_with_no_delay_has_several_holders_each_with_its_own_lease(make):
    (one, a1), (two, a2), (three, a3) = shared(make, 3)
    holders = held_by(one, "a.test")
    assert sorted(holders) == ["m/1", "m/2", "m/3"] and len(set(holders.values())) == 3   # a token each
    assert {a1.url, a2.url, a3.url} == {A + "0", A + "1", A + "2"}
    assert one._tokens[a1.url] == holders["m/1"] and two._tokens[a2.url] == holders["m/2"]
    assert one.refresh().in_flight_by_owner == {1: 1, 2: 1, 3: 1}
    assert crawled(two, a2) and crawled(one, a1) and crawled(three, a3)
    assert urls(two.claim(1, 0.0, no_delay)) == [A + "3"]        # still two's: work is left
    assert held_by(one, "a.test").keys() == {"m/1", "m/2", "m/3"}


def test_a_worker_that_may_not_join_leaves_a_held_host_to_its_holder(make):
    """Without ``join`` (a crawl with --delay, or a store made so): one holder, as before."""
    one, two = make(1, join=True), make(2)
    one.add([QueueEntry(A + "1"), QueueEntry(A + "2")])
    assert urls(one.claim(1, 0.0, no_delay)) == [A + "1"]
    assert urls(two.claim(1, 0.0, no_delay)) == []
    assert held_by(one, "a.test").keys() == {"m/1"}


def test_a_host_whose_pace_is_not_known_yet_has_one_holder(make):
    """A host's first claim holds it alone: until its holder has told Redis its delay (it may
    have a Crawl-delay, or robots.txt is still to be fetched), nobody joins."""
    one, two = make(1, join=True, defer=True), make(2, join=True)
    one.add([QueueEntry(A + "1"), QueueEntry(A + "2")])
    assert urls(one.claim(1, 0.0, no_delay)) == [A + "1"]       # its pace goes with its next call
    assert urls(two.claim(1, 0.0, no_delay)) == []
    one.flush()
    assert urls(two.claim(1, 0.0, no_delay)) == [A + "2"]


def test_a_host_with_a_delay_keeps_one_holder_even_for_workers_that_may_join(make):
    one, two = make(1, join=True), make(2, join=True)
    one.add([QueueEntry(A + str(i)) for i in range(4)])
    [a1] = one.claim(1, 0.0, lambda h: 0.5).claims               # its holder keeps a delay
    assert one.r.hget(one.per_host("h", "a.test"), "pace") == b"0.500"
    assert urls(two.claim(5, 10.0, no_delay)) == []
    assert crawled(one, a1)
    assert urls(two.claim(5, 10.0, no_delay)) == []              # one still holds it: work is left


def test_one_holder_of_a_shared_host_dies_and_only_its_urls_come_back(make):
    """Three workers hold a.test; one stalls past its lease (killed, or paused): the URL it held
    goes back to pending and another worker takes it; the two others' leases, tokens and claims
    are untouched; the stalled worker's late settle is refused; every URL is recorded once."""
    (one, a1), (two, a2), (three, a3) = shared(make, 3, urls=6)
    expire(one, "a.test")
    [back] = two.claim(1, 0.0, no_delay).claims   # one's lease ran out: a1 back, first in order
    assert back.url == a1.url
    assert held_by(two, "a.test").keys() == {"m/2", "m/3"}
    assert two.refresh().in_flight_by_owner == {2: 2, 3: 1}
    assert crawled(one, a1) is False                             # fenced: a1 is two's now
    for s, c in ((three, a3), (two, a2), (two, back)):
        assert crawled(s, c)
    while not (r := two.claim(5, 0.0, no_delay)).finished:
        for c in r.claims:
            assert crawled(two, c)
    names = [x.split("\t")[0] for x in two.lines("crawled")]
    assert sorted(names) == [f"{A}{i}" for i in range(6)]       # each once
    c = two.refresh()
    assert (c.crawled, c.in_flight, c.pending) == (6, 0, 0)


def test_the_fencing_token_is_per_holder(make):
    """One holder's lease ends and the same worker id takes the host again (a restarted worker
    with the same pid): its new token differs, the old claim's settle is refused; the other
    holder's token never moved and its settle goes through."""
    (one, a1), (two, a2) = shared(make, 2)
    before = held_by(one, "a.test")
    expire(one, "a.test")
    again = make(1, join=True)
    [fresh] = again.claim(1, 0.0, no_delay).claims
    after = held_by(one, "a.test")
    assert after["m/1"] != before["m/1"] and after["m/2"] == before["m/2"]
    assert fresh.url == a1.url and crawled(one, a1) is False
    assert crawled(two, a2) and crawled(again, fresh)
    assert two.refresh().crawled == 2


@pytest.mark.parametrize("change", ["retry-after", "backoff", "failure", "crawl-delay"])
def test_a_shared_host_that_must_slow_down_keeps_one_holder_before_any_new_request(make, change):
    """Three workers hold a.test (no delay); then its pace changes: a 429 with Retry-After, a
    backoff (its delay doubled), a connection failure counted, or a holder learning of a
    Crawl-delay. The requests already claimed may still go (they were claimed at no delay), but
    no claim is granted on the host until two holders have let go: each lets go at its next claim,
    when it has nothing in flight there; the last holder then goes on alone, at the new pace."""
    from dataclasses import replace
    (one, a1), (two, a2), (three, a3) = shared(make, 3)
    if change == "retry-after":
        two.update_host("a.test", lambda s: replace(s, next_allowed=5.0, reason="retry-after 429"))
    elif change == "backoff":
        two.update_host("a.test", lambda s: replace(s, next_allowed=1.0, delay=1.0, reason="slowed down after 503"))
    elif change == "failure":
        two.update_host("a.test", lambda s: replace(s, failures=1))
    else:
        two._tell_pace("a.test", 2.0)
    assert crawled(one, a1)
    assert urls(one.claim(1, 9.0, no_delay)) == []               # others hold it: one lets go
    assert held_by(one, "a.test").keys() == {"m/2", "m/3"}
    assert crawled(two, a2)
    assert urls(two.claim(1, 9.0, no_delay)) == []               # three holds it, a3 in flight
    assert held_by(one, "a.test").keys() == {"m/3"}              # two let go too
    assert urls(one.claim(1, 9.0, no_delay)) == []               # three's alone: nobody joins
    assert crawled(three, a3)
    assert len(three.claim(1, 9.0, no_delay).claims) == 1       # the last holder goes on, alone
    assert held_by(one, "a.test").keys() == {"m/3"}


def test_a_worker_that_may_join_asks_again_soon_while_the_holder_has_not_told_its_pace(make):
    """A host's first holder holds it alone until it tells Redis its delay (it fetches robots.txt
    meanwhile): a worker that may join is told to ask again in 50 ms, not left to back off to
    half a second and join late; once the pace is told, it joins."""
    one, two = make(1, join=True, defer=True), make(2, join=True)
    one.add([QueueEntry(A + "1"), QueueEntry(A + "2")])
    assert urls(one.claim(1, 10.0, no_delay)) == [A + "1"]      # its pace goes with its next call
    r = two.claim(1, 10.0, no_delay)
    assert r.claims == [] and r.wait_until == pytest.approx(10.05)
    assert make(3).claim(1, 10.0, no_delay).wait_until is None   # one that may not join: as before
    one.flush()
    assert urls(two.claim(1, 10.0, no_delay)) == [A + "2"]


# -- fewer scripts a page: a batch of one host's URLs, links known here ---------------------------------

def test_a_worker_at_no_delay_claims_a_batch_of_its_host_while_the_host_keeps_no_pace(make):
    """``batch`` (a crawl's workers at --delay 0): one claim script takes up to that many URLs,
    all of one host, once Redis knows the host keeps no pace; a host whose pace is not told yet,
    or that keeps one (here a Crawl-delay learned), gives one URL a claim; --max-pages holds."""
    one = make(1, join=True, defer=True, batch=4)
    one.add([QueueEntry(f"{A}{i}") for i in range(10)] + [QueueEntry(B + "0")])
    first = one.claim(1, 0.0, no_delay).claims
    assert urls_of(first) == [A + "0"]                                   # its pace is not told yet
    assert crawled(one, first[0])
    got = one.claim(1, 0.0, no_delay)                                    # carries its pace: 0
    assert urls(got) == [A + "1", A + "2", A + "3", A + "4"]             # one host's, best keys first
    assert one.refresh().in_flight_by_owner == {1: 4}
    assert all(crawled(one, c) for c in got.claims)
    one._tell_pace("a.test", 2.0)                                        # a Crawl-delay learned
    assert len(one.claim(1, 9.0, lambda h: 2.0).claims) == 1

    capped = make(2, join=True, defer=True, batch=4, max_pages=3)
    capped.r.delete(*capped.r.keys("p:*"))
    capped.add([QueueEntry(f"{A}{i}") for i in range(10)])
    first = capped.claim(1, 0.0, no_delay).claims
    assert len(first) == 1 and crawled(capped, first[0])
    got = capped.claim(1, 0.0, no_delay)
    assert len(got.claims) == 2                                          # --max-pages 3 in all
    assert all(crawled(capped, c) for c in got.claims)
    assert capped.claim(1, 0.0, no_delay).finished


def test_a_batch_claim_keeps_to_the_level_of_its_first_url(make):
    """As the file store's (test_store_page.py): a batch of the next level's pages could be
    crawled while another worker still crawls this level's last ones."""
    one = make(1, join=True, defer=True, batch=4)
    one.add([QueueEntry(f"{A}0", 0)] + [QueueEntry(f"{A}{i}", 1) for i in range(1, 3)]
            + [QueueEntry(f"{A}{i}", 2) for i in range(3, 10)])
    first = one.claim(1, 0.0, no_delay).claims
    assert urls_of(first) == [A + "0"] and crawled(one, first[0])       # its pace is not told yet
    got = one.claim(1, 0.0, no_delay)                                    # level 1: two, not four
    assert urls(got) == [A + "1", A + "2"] and all(crawled(one, c) for c in got.claims)
    assert urls(one.claim(1, 0.0, no_delay)) == [A + "3", A + "4", A + "5", A + "6"]


def _a_batch_claims_commands(make):  # type: ignore[no-untyped-def]
    """A store at --delay 0 whose host's pace is told (its first URL crawled), then a batch claim
    of 4 of its other 9 URLs: (the store, the claim, Redis's command counts for that claim)."""
    one = make(1, join=True, defer=True, batch=4)
    one.add([QueueEntry(f"{A}{i}") for i in range(10)])
    [c] = one.claim(1, 0.0, no_delay).claims
    assert crawled(one, c)
    one.flush()
    one.r.config_resetstat()
    got = one.claim(1, 0.0, no_delay)
    assert len(got.claims) == 4
    return one, got, one.r.info("commandstats")


def test_a_batch_claim_puts_its_urls_in_flight_with_one_write_of_each_kind(make):
    """A batch's URLs go in flight with one HSET of their fields and one count of each kind
    (in flight, the owner's), not four commands a URL; the counts and settles are as before."""
    one, got, stats = _a_batch_claims_commands(make)
    assert stats["cmdstat_hincrby"]["calls"] == 3      # in flight, the owner's, pending
    assert stats["cmdstat_sadd"]["calls"] == 1         # the host among those with URLs in flight
    c = one.refresh()
    assert (c.pending, c.in_flight, c.in_flight_by_owner) == (5, 4, {1: 4})
    assert all(crawled(one, x) for x in got.claims)
    one.flush()
    c = one.refresh()
    assert (c.pending, c.in_flight, c.crawled) == (5, 0, 5)


def urls_of(claims) -> list[str]:
    return [c.url for c in claims]


def spy(store, name: str) -> list:
    """The arguments of each call of one of the store's scripts."""
    script, calls = getattr(store, name), []

    def call(args, **kw):
        calls.append(args)
        return script(args=args, **kw)
    setattr(store, name, call)
    return calls


def test_links_redis_said_it_knows_are_not_asked_again(make):
    """A URL Redis said it knows (deduplication never forgets one) is answered by the worker
    itself after that, so a page's links that every page repeats cost Redis nothing; a URL it
    said it did not know is asked again (another worker may have queued it since)."""
    one, two = make(1), make(2)
    two.add([QueueEntry(A + "1"), QueueEntry(A + "2")])           # queued by another worker
    asked = spy(one, "_first_known")
    links = [A + "1", A + "2", A + "3"]
    assert one.first_and_known(None, A + "p", links)[1] == {A + "1", A + "2"}
    assert len(asked[-1][3]) == 8 * 3                            # three fingerprints sent
    assert one.first_and_known(None, A + "q", links)[1] == {A + "1", A + "2"}
    assert len(asked[-1][3]) == 8                                # only A3's: it was not known
    two.add([QueueEntry(A + "3")])
    assert one.first_and_known(None, A + "r", links)[1] == set(links)
    assert one.first_and_known(None, A + "s", links)[1] == set(links) and asked[-1][3] == b""
    redis_asked = spy(one, "_known")
    assert one.known(links) == set(links) and redis_asked == []
    one.add([QueueEntry(A + "4")])
    assert one.known([A + "4", A + "1"]) == {A + "4", A + "1"}   # what add queued is known here too
    assert redis_asked == []


def test_the_table_of_known_links_has_a_fixed_size_and_never_answers_wrongly(make, monkeypatch):
    """The worker's table of known fingerprints is allocated once, and the URLs it keeps as
    strings are a bounded few: a worker's memory does not grow with the URLs the crawl knows.
    Both are small here, so fingerprints push each other out: those are asked again, and no
    answer is ever wrong."""
    from spider.frontier import redisstore
    monkeypatch.setattr(redisstore, "KNOWN_SLOTS", 4)
    monkeypatch.setattr(redisstore, "HOT_KNOWN", 10)
    one = make(1)
    size = len(one._known_here.table)
    assert size == 32
    queued = [f"{A}{i}" for i in range(0, 200, 2)]
    one.add([QueueEntry(u) for u in queued])
    everything = [f"{A}{i}" for i in range(200)]
    for _ in range(2):
        assert one.known(everything) == set(queued)
        assert one.first_and_known(None, A + "x", everything)[1] == set(queued)
        assert len(one._hot) <= 10 + len(queued)   # cleared once past 10, at the next question
    assert one.known(queued[:5]) == set(queued[:5]) and len(one._hot) <= 10 + 5
    assert len(one._known_here.table) == size


def test_the_scripts_a_page_runs_go_on_the_workers_own_connection(make, monkeypatch):
    """A worker's claims, questions and settles are sent on a connection of its own thread,
    written as EVALSHA by the store (redis-py's pool and command path cost a worker more CPU
    than the script costs Redis). A script Redis does not have yet, or lost (SCRIPT FLUSH, a
    restarted Redis), goes through redis-py once, which loads it; another thread goes through
    redis-py, with the same answers."""
    import threading
    one = make(1, defer=True)
    one.add([QueueEntry(f"{A}{i}") for i in range(6)])
    c = one.claim(1, 0.0, no_delay).claims[0]                     # each script's first run: loaded
    assert one.first_and_known("h0", c.url, [A + "2", A + "9"]) == (c.url, {A + "2"})
    assert crawled(one, c)
    taken = []
    pool = one.r.connection_pool
    get = pool.get_connection
    monkeypatch.setattr(pool, "get_connection", lambda *a, **kw: taken.append(1) or get(*a, **kw))
    c = one.claim(1, 0.0, no_delay).claims[0]
    assert one.first_and_known("h1", c.url, [A + "3", A + "8"]) == (c.url, {A + "3"})
    assert crawled(one, c) and one.add([QueueEntry(A + "7")]) == [QueueEntry(A + "7")]
    assert taken == []                                            # none from the pool
    one.r.script_flush()                                          # Redis lost its scripts
    taken.clear()
    assert urls(one.claim(1, 0.0, no_delay)) == [A + "2"]
    assert taken != []                                            # redis-py loaded it again
    taken.clear()
    assert urls(one.claim(1, 0.0, no_delay)) == [A + "3"] and taken == []
    other: list = []
    t = threading.Thread(target=lambda: other.append(one.first_and_known(None, A + "x", [A + "4", A + "10"])))
    t.start()
    t.join()
    assert other == [(A + "x", {A + "4"})] and taken != []       # that thread: redis-py's pool


@pytest.mark.parametrize("batch", [1, 4])
def test_a_block_of_lines_of_several_sources_keeps_each_lines_source(make, batch):
    """One add of one host's lines from several pages (one score): a pending block whose lines
    say "the first line's source" in short. Taking its first lines, one a claim or a batch at
    once, leaves every other line with its own source, in the block and when claimed."""
    from spider.frontier.redisstore import pending_lines
    one = make(1, join=True, defer=True, batch=batch)
    x, y = "http://x.test/p%41", "http://y.test/"
    sources = [x, y, x, x, y, x, x]
    one.add([QueueEntry(f"{A}{i}", 1, 0, 0.0, src) for i, src in enumerate(sources)])
    first = one.claim(1, 0.0, no_delay).claims                   # one URL: the pace is not told yet
    assert [(c.url, c.entry.source) for c in first] == [(A + "0", x)]
    got = one.claim(1, 0.0, no_delay).claims                     # a batch of 4, or one
    assert [(c.url, c.entry.source) for c in got] == [(f"{A}{i}", sources[i]) for i in range(1, 1 + len(got))]
    members = one.r.zrange(one.per_host("q", "a.test"), 0, -1, withscores=True)
    left = [line.decode().split("\t") for m, key in members for line, _ in pending_lines(m, key)]
    assert [(f[0], f[4]) for f in left] == [(f"{A}{i}", sources[i]) for i in range(1 + len(got), 7)]
    rest = claim_all(one, 1)
    assert rest == [(f"{A}{i}", sources[i]) for i in range(1 + len(got), 7)]


def test_an_add_costs_a_few_commands_whatever_its_entries(make):
    """An add reads the fingerprint strings with one MGET and writes them with one MSET, takes
    its sequence numbers with one INCRBY and raises each host's admitted count once: not four
    commands an entry. The end state is that of the entries taken one by one: the same order,
    a URL twice in one add queued once, the host budget counted across the add."""
    one = make(1, max_per_host=30)
    one.add([QueueEntry(A + "0")])
    one.r.config_resetstat()
    entries = [QueueEntry(f"{h}{i}") for i in range(1, 40) for h in (A, B)] + [QueueEntry(A + "5")]
    new = one.add(entries)
    stats = one.r.info("commandstats")
    assert stats["cmdstat_mget"]["calls"] == 1 and stats["cmdstat_mset"]["calls"] == 1
    assert stats["cmdstat_incrby"]["calls"] == 1
    assert "cmdstat_incr" not in stats
    assert stats["cmdstat_get"]["calls"] == stats["cmdstat_set"]["calls"] == 19   # the refused: P:over
    assert stats["cmdstat_hincrby"]["calls"] == 3      # a.test's admitted, b.test's, pending
    assert [e.url for e in new] == [f"{h}{i}" for i in range(1, 40) for h in (A, B)
                                    if int(h == A) + i <= 30]
    assert len(one.lines("rejected")) == 19             # 10 of a.test, 9 of b.test, once each
    assert [u for u, _ in claim_all(one, 1)] == [A + "0"] + [e.url for e in new]   # best key first: as added
    assert one.known([A + "5", B + "30", B + "31"]) == {A + "5", B + "30"}


def test_buffered_writes_ride_as_the_scripts_last_arguments(make):
    """A worker's buffered writes go with its next script as that script's last arguments, their
    count after a NUL in the prefix (each string a script makes costs Redis a pass over its bytes:
    one packed argument was made three times); the script sees its own arguments only."""
    one = make(1, defer=True)
    calls = spy(one, "_first_known")
    one.add([QueueEntry(A + "1"), QueueEntry(A + "2")])
    [a1] = one.claim(1, 0.0, no_delay).claims
    one.log("links", "a1\tlinks\n")
    assert crawled(one, a1)
    first, known = one.first_and_known("hash1", a1.url, [A + "2", A + "3"])
    assert (first, known) == (a1.url, {A + "2"})
    [args] = calls
    assert args[0].startswith("p\x00")
    n = int(args[0].split("\x00")[1])
    assert args[1:4] == ["hash1", a1.url, args[3]] and len(args) == 4 + n
    assert args[4:11] == [b"P", b"a.test", b"0", b"L", b"links", b"a1\tlinks\n", b"S"]   # pace, log, settle
    assert one.lines("links") == ["a1\tlinks\n"] and one.refresh().crawled == 1


def test_a_requeue_of_nothing_keeps_the_buffered_writes(make):
    one = make(1, defer=True)
    one.add([QueueEntry(A + "1")])
    [a1] = one.claim(1, 0.0, no_delay).claims
    assert crawled(one, a1)
    assert one.requeue([]) == 0
    one.flush()
    assert one.refresh().crawled == 1 and one.refresh().in_flight == 0


def test_a_page_costs_few_commands_inside_its_scripts(make):
    """A page's text, new, is one HSETNX (no HGET); a settle on a host with lines ready asks
    nothing about the lease (one ZCARD); a claim reads its host's fields once (one HMGET of
    them, besides the two of the counts)."""
    one, got, stats = _a_batch_claims_commands(make)
    assert stats["cmdstat_hmget"]["calls"] == 3
    one.r.config_resetstat()
    assert crawled(one, got.claims[0])
    first, _ = one.first_and_known("hash2", got.claims[1].url, [])
    assert first == got.claims[1].url
    stats = one.r.info("commandstats")
    assert stats["cmdstat_hsetnx"]["calls"] == 1 and stats["cmdstat_hget"]["calls"] == 1   # the settle's claim
    assert stats["cmdstat_zcard"]["calls"] == 1 and "cmdstat_hexists" not in stats
