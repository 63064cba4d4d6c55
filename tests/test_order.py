"""The crawl order (spider/order.py): ``Order.key``/``Order.score`` on tables, and the selection
index ``Frontier`` on hand-made cases and against a brute-force model (Hypothesis).

The store side of the order (both stores claim in this order) is in tests/test_store.py."""

from __future__ import annotations

from typing import Callable

import pytest
from hypothesis import given, settings, strategies as st

from spider.order import DEFER_COST, DEPTH_COST, ORDERS, PREFER_BONUS, Frontier, Order

U = "http://a.test/"


# -- Order.score / Order.key ------------------------------------------------------------------------

def test_constants_are_the_documented_ones():
    assert (DEPTH_COST, PREFER_BONUS, DEFER_COST) == (10, 50, 100)
    assert ORDERS == ("bfs", "dfs", "best")


BEST = Order("best", prefer=(r"/detail/", r"\.pdf$"), defer=(r"/archive/", r"\?print"))

KEY_TABLE = [
    # order, url, depth, seq, expected key
    (Order(), U, 0, 0, (0, 0)),                                      # bfs is the default
    (Order("bfs"), U + "x", 3, 17, (3, 17)),                         # depth, then FIFO
    (Order("bfs", prefer=("x",), defer=("x",)), U + "x", 2, 5, (2, 5)),   # bfs ignores prefer/defer
    (Order("dfs"), U + "x", 0, 5, (0, -5)),                          # dfs: one score, LIFO
    (Order("dfs"), U + "x", 9, 5, (0, -5)),                          # ... whatever the depth
    (Order("dfs", prefer=("x",)), U + "x", 9, 5, (0, -5)),           # ... and patterns
    (Order("best"), U, 0, 4, (0, 4)),
    (Order("best"), U, 1, 4, (10, 4)),                               # 10 per level
    (Order("best"), U, 7, 4, (70, 4)),
    (BEST, U + "detail/1", 3, 8, (30 - 50, 8)),                      # prefer: -50
    (BEST, U + "archive/1", 3, 8, (30 + 100, 8)),                    # defer: +100
    (BEST, U + "archive/detail/1", 3, 8, (30 - 50 + 100, 8)),        # both
    (BEST, U + "detail/x.pdf", 2, 8, (20 - 50, 8)),                  # two prefer patterns: once
    (BEST, U + "archive/x?print=1", 2, 8, (20 + 100, 8)),            # two defer patterns: once
    (BEST, U + "other", 2, 8, (20, 8)),                              # no pattern matches
    (BEST, U + "x.pdf", 0, 8, (-50, 8)),                             # second prefer pattern alone
    (BEST, U + "x?print", 0, 8, (100, 8)),                           # second defer pattern alone
    (Order("best", prefer=("DETAIL",)), U + "detail/1", 0, 1, (0, 1)),    # regexes are case-sensitive
    (Order("best", prefer=("detail",)), U + "x/detail", 0, 1, (-50, 1)),  # search, not match
]


@pytest.mark.parametrize("order,url,depth,seq,key", KEY_TABLE)
def test_order_key_table(order: Order, url: str, depth: int, seq: int, key: tuple[int, int]):
    assert order.key(url, depth, seq) == key
    assert order.score(url, depth) == key[0]


def test_a_preferred_page_outranks_five_levels_of_depth():
    o = Order("best", prefer=("detail",))
    assert o.score(U + "detail", 5) == o.score(U + "list", 0)       # a tie: FIFO decides
    assert o.key(U + "list", 0, 1) < o.key(U + "detail", 5, 2)
    assert o.key(U + "detail", 4, 9) < o.key(U + "list", 0, 1)
    d = Order("best", defer=("old",))
    assert d.score(U + "old", 0) == d.score(U + "new", 10)          # deferred: behind ten levels


def test_lifo_only_for_dfs():
    assert [Order(n).lifo for n in ORDERS] == [False, True, False]


def test_sorting_by_key_gives_the_documented_orders():
    items = [(U + "a", 2, 0), (U + "b", 1, 1), (U + "c", 2, 2), (U + "d", 0, 3), (U + "e", 1, 4)]
    by = lambda o: [u[-1] for u, d, s in sorted(items, key=lambda i: o.key(*i))]   # noqa: E731
    assert by(Order("bfs")) == list("dbeac")
    assert by(Order("dfs")) == list("edcba")
    assert by(Order("best", prefer=("/c",))) == list("cdbea")        # c: 20-50 = -30


@pytest.mark.parametrize("name", ["BFS", "", "random", "breadth", " bfs"])
def test_invalid_order_name_raises_value_error(name: str):
    with pytest.raises(ValueError) as e:
        Order(name)
    assert "bfs" in str(e.value) and "\n" not in str(e.value)


def test_invalid_pattern_is_an_error_at_construction():
    with pytest.raises(ValueError, match="bad regular expression"):   # RE2 (spider/patterns.py)
        Order("best", prefer=("(",))


# -- Frontier.select: hand-made cases ---------------------------------------------------------------

def always_ready(host: str) -> float:
    return 0.0


def all_live(seq: int) -> bool:
    return True


def drain(f: Frontier, now: float = 0.0, ready: Callable[[str], float] = always_ready,
          live: Callable[[int], bool] = all_live) -> list[tuple[str, int]]:
    out = []
    while True:
        host, seq, _ = f.select(now, ready, live)
        if host is None:
            return out
        out.append((host, seq))


def test_empty_frontier_selects_nothing_and_never_waits():
    assert Frontier().select(0.0, always_ready, all_live) == (None, 0, None)


def test_best_key_first_across_hosts():
    f = Frontier()
    f.push("a", 3, 1)
    f.push("b", 1, 2)
    f.push("c", 2, 3)
    f.push("a", 0, 4)
    assert drain(f) == [("a", 4), ("b", 2), ("c", 3), ("a", 1)]


def test_ties_are_fifo_across_hosts_and_within_a_host():
    f = Frontier()
    for seq, host in enumerate("abab", start=1):
        f.push(host, 5, seq)
    assert drain(f) == [("a", 1), ("b", 2), ("a", 3), ("b", 4)]


def test_ties_are_lifo_for_a_lifo_frontier():
    f = Frontier(lifo=True)
    for seq, host in enumerate("abab", start=1):
        f.push(host, 0, seq)
    assert drain(f) == [("b", 4), ("a", 3), ("b", 2), ("a", 1)]


def test_lifo_interleaved_with_pushes_is_a_stack():
    f = Frontier(lifo=True)
    f.push("a", 0, 1)
    f.push("a", 0, 2)
    assert f.select(0.0, always_ready, all_live)[:2] == ("a", 2)
    f.push("a", 0, 3)
    assert drain(f) == [("a", 3), ("a", 1)]


def test_a_waiting_host_is_skipped_and_its_ready_time_is_the_wait():
    f = Frontier()
    f.push("slow", 0, 1)
    f.push("fast", 9, 2)
    ready = {"slow": 50.0, "fast": 0.0}.__getitem__
    assert f.select(10.0, ready, all_live) == ("fast", 2, 50.0)   # worse URL of a ready host
    assert f.select(10.0, ready, all_live) == (None, 0, 50.0)     # only the waiting host left
    assert f.select(50.0, ready, all_live) == ("slow", 1, None)   # ready exactly at its time


def test_the_wait_is_the_earliest_of_the_skipped_hosts():
    f = Frontier()
    f.push("h1", 0, 1)
    f.push("h2", 1, 2)
    f.push("h3", 2, 3)
    ready = {"h1": 30.0, "h2": 20.0, "h3": 40.0}.__getitem__
    assert f.select(10.0, ready, all_live) == (None, 0, 20.0)
    assert len(f) == 3                                          # nothing was lost by skipping


def test_a_waiting_host_behind_the_chosen_one_does_not_count_in_the_wait():
    f = Frontier()
    f.push("ready", 0, 1)
    f.push("later", 5, 2)
    ready = {"ready": 0.0, "later": 99.0}.__getitem__
    assert f.select(1.0, ready, all_live) == ("ready", 1, None)


def test_dead_items_are_skipped_and_never_returned():
    f = Frontier()
    for seq in range(1, 7):
        f.push("a" if seq % 2 else "b", 0, seq)
    dead = {1, 2, 5}
    live = lambda s: s not in dead   # noqa: E731
    assert drain(f, live=live) == [("a", 3), ("b", 4), ("b", 6)]
    assert len(f) == 0


def test_items_dying_between_selects_are_dropped_lazily():
    f = Frontier()
    for seq in range(1, 5):
        f.push("a", 0, seq)
    dead: set[int] = set()
    live = lambda s: s not in dead   # noqa: E731
    assert f.select(0.0, always_ready, live)[:2] == ("a", 1)
    dead.update({2, 3})                                          # claimed by another process
    assert f.select(0.0, always_ready, live)[:2] == ("a", 4)
    assert f.select(0.0, always_ready, live) == (None, 0, None)


def test_a_dead_best_item_lets_the_next_host_go_first():
    f = Frontier()
    f.push("a", 0, 1)
    f.push("a", 5, 2)
    f.push("b", 3, 3)
    live = lambda s: s != 1   # noqa: E731
    assert drain(f, live=live) == [("b", 3), ("a", 2)]


def test_hosts_with_only_dead_items_never_cause_a_wait():
    f = Frontier()
    f.push("gone", 0, 1)
    f.push("gone", 1, 2)
    f.push("ok", 5, 3)
    ready = {"gone": 1e9, "ok": 0.0}.__getitem__
    live = lambda s: s == 3   # noqa: E731
    assert f.select(0.0, ready, live) == ("ok", 3, None)
    assert f.select(0.0, ready, live) == (None, 0, None)


def test_ready_at_is_asked_only_for_hosts_with_live_items():
    f = Frontier()
    f.push("gone", 0, 1)
    f.push("ok", 1, 2)
    asked: list[str] = []

    def ready(host: str) -> float:
        asked.append(host)
        return 0.0
    assert f.select(0.0, ready, lambda s: s == 2)[:2] == ("ok", 2)
    assert asked == ["ok"]


def test_a_better_push_after_a_skip_is_seen():
    f = Frontier()
    f.push("a", 5, 1)
    ready = {"a": 10.0, "b": 0.0}.__getitem__
    assert f.select(0.0, ready, all_live) == (None, 0, 10.0)
    f.push("b", 9, 2)
    f.push("a", 0, 3)                                           # better, but its host still waits
    assert f.select(0.0, ready, all_live) == ("b", 2, 10.0)
    assert drain(f, now=10.0, ready=ready) == [("a", 3), ("a", 1)]


def test_many_fifo_pops_of_one_host_keep_order_through_compaction():
    f = Frontier()
    for seq in range(3000):
        f.push("a", 0, seq)
    got = [s for _, s in drain(f)]
    assert got == list(range(3000))
    for seq in range(3000, 3010):                               # and the bucket is still usable
        f.push("a", 0, seq)
    assert [s for _, s in drain(f)] == list(range(3000, 3010))


def test_offsets_past_4_gib_keep_their_order():
    f = Frontier()                                              # 4-byte items until an offset needs 8
    for seq in (5, 2**32 - 1, 2**32, 2**40 + 7, 9):             # 9: a late retry, inserted in place
        f.push("a", 0, seq)
    assert [s for _, s in drain(f)] == [5, 9, 2**32 - 1, 2**32, 2**40 + 7]


# -- Frontier.select against a brute-force model ----------------------------------------------------

HOSTS = ("h0", "h1", "h2", "h3")

_op = st.one_of(
    st.tuples(st.just("push"), st.sampled_from(HOSTS), st.integers(-2, 3)),
    st.tuples(st.just("kill"), st.integers(0, 10_000)),
    st.tuples(st.just("select"), st.integers(0, 3),
              st.tuples(*(st.integers(0, 4) for _ in HOSTS))),
)


def reference_select(items: dict[int, tuple[str, int]], alive: set[int], lifo: bool, now: float,
                     ready: dict[str, float]) -> tuple[str | None, int, float | None]:
    """What select must return, computed by sorting every live item."""
    def key(seq: int) -> tuple[int, int]:
        return items[seq][1], (-seq if lifo else seq)
    live = sorted(alive, key=key)
    chosen = next((s for s in live if ready[items[s][0]] <= now), None)
    ahead = live if chosen is None else [s for s in live if key(s) < key(chosen)]
    waits = [ready[items[s][0]] for s in ahead if ready[items[s][0]] > now]
    wait = min(waits) if waits else None
    if chosen is None:
        return None, 0, wait
    return items[chosen][0], chosen, wait


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(_op, max_size=80), lifo=st.booleans())
def test_select_matches_a_sorted_reference(ops: list[tuple], lifo: bool):
    f = Frontier(lifo)
    items: dict[int, tuple[str, int]] = {}
    alive: set[int] = set()       # pushed, not selected, not killed
    returned: set[int] = set()
    killed: set[int] = set()
    seq = 0
    for op in ops:
        if op[0] == "push":
            seq += 1
            items[seq] = (op[1], op[2])
            alive.add(seq)
            f.push(op[1], op[2], seq)
        elif op[0] == "kill":
            if alive:
                victim = sorted(alive)[op[1] % len(alive)]
                alive.discard(victim)
                killed.add(victim)
        else:
            now = float(op[1])
            ready = {h: float(t) for h, t in zip(HOSTS, op[2])}
            expected = reference_select(items, alive, lifo, now, ready)
            got = f.select(now, ready.__getitem__, lambda s: s not in killed)
            assert got == expected
            if got[0] is not None:
                assert got[1] not in returned and got[1] not in killed
                returned.add(got[1])
                alive.discard(got[1])
    # at the end, everything still alive comes out, in key order
    rest = []
    while True:
        host, s, wait = f.select(0.0, always_ready, lambda s: s not in killed)
        assert wait is None
        if host is None:
            break
        rest.append(s)
    assert rest == sorted(alive, key=lambda s: (items[s][1], -s if lifo else s))
