"""What to crawl next: the crawl order, as one priority function, and the index that serves it.

``Order.key(url, depth, seq)`` is the whole policy; the claim step of both stores takes, among
the hosts whose politeness slot has come, the pending URL with the lowest key:

- ``bfs`` (default): shallower first, then first discovered first (FIFO);
- ``dfs``: last discovered first (a stack), so the crawl goes deep before wide;
- ``best``: lowest score first, FIFO among equal scores. The score is 10 per level of depth,
  -50 for a URL matching a ``--prefer`` pattern, +100 for one matching ``--defer``: a preferred
  page outranks five levels of depth, a deferred one waits behind ten.

``seq`` is the URL's place in insertion order (its byte offset in queue.txt, or a counter). To
change the crawl order, change ``Order.key``.

``Frontier`` is the in-memory index the claim step searches: per host, pending items bucketed by
score, and a heap of each host's best key. Selecting the next URL costs O(log hosts) plus one
step per waiting host ahead of it; it never walks the queue, so it does not slow down as the
queue grows. Items claimed by another process are dropped lazily (``live``).
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from .patterns import Pattern, compile_pattern

ORDERS = ("bfs", "dfs", "best")
DEPTH_COST, PREFER_BONUS, DEFER_COST = 10, 50, 100


@dataclass(frozen=True)
class Order:
    """The crawl order of a crawl (``--order``, ``--prefer``, ``--defer``)."""

    name: str = "bfs"
    prefer: tuple[str, ...] = ()
    defer: tuple[str, ...] = ()
    _prefer: tuple[Pattern, ...] = field(default=(), init=False, repr=False, compare=False)
    _defer: tuple[Pattern, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.name not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {self.name!r}")
        object.__setattr__(self, "_prefer", tuple(compile_pattern(p) for p in self.prefer))
        object.__setattr__(self, "_defer", tuple(compile_pattern(p) for p in self.defer))

    @property
    def batch_keeps_order(self) -> bool:
        """Can a claim take several URLs at once without changing what is crawled next? Only in
        ``bfs``: a page's links are one level deeper than the page, so they cannot outrank the
        URLs claimed with it. In ``dfs`` the newest link goes first, and in ``best`` a preferred
        link outranks the rest: a batch taken before the page's links are known would not be the
        order's choice (one URL a claim, as with a delay)."""
        return self.name == "bfs"

    @property
    def lifo(self) -> bool:
        """Among equal scores, is the newest first?"""
        return self.name == "dfs"

    def score(self, url: str, depth: int) -> int:
        """Lower goes first."""
        if self.name == "bfs":
            return depth
        if self.name == "dfs":
            return 0
        s = DEPTH_COST * depth
        if any(p.search(url) for p in self._prefer):
            s -= PREFER_BONUS
        if any(p.search(url) for p in self._defer):
            s += DEFER_COST
        return s

    def key(self, url: str, depth: int, seq: int) -> tuple[int, int]:
        """The full sort key: score, then insertion order (FIFO) or its reverse (dfs)."""
        return self.score(url, depth), (-seq if self.lifo else seq)


class _Bucket:
    """Items of one host with one score, in insertion order (seq ascending)."""

    __slots__ = ("items", "head")

    def __init__(self) -> None:
        self.items = array("I")   # 4 bytes an item: offsets in queue.txt below 4 GiB (widened past it)
        self.head = 0

    def __len__(self) -> int:
        return len(self.items) - self.head

    def add(self, seq: int) -> None:
        """Keep seq order: appended normally; a retry that comes due late is inserted in place."""
        items = self.items
        try:
            if len(items) == self.head or seq > items[-1]:
                items.append(seq)
            else:
                items.insert(bisect.bisect_left(items, seq, self.head), seq)
        except OverflowError:   # past 4 GiB of queue.txt: this bucket goes to 8 bytes an item
            self.items = array("q", items)
            self.add(seq)

    def peek(self, lifo: bool) -> int:
        return self.items[-1] if lifo else self.items[self.head]

    def pop(self, lifo: bool) -> int:
        if lifo:
            return self.items.pop()
        seq = self.items[self.head]
        self.head += 1
        if self.head > 1024 and self.head * 2 > len(self.items):   # give back what was taken
            del self.items[:self.head]
            self.head = 0
        return seq


class Frontier:
    """Pending items (``seq`` numbers) by host and score; ``select`` finds the best ready one."""

    def __init__(self, lifo: bool = False) -> None:
        self.lifo = lifo
        self._hosts: dict[str, dict[int, _Bucket]] = {}
        self._best: dict[str, tuple[int, int]] = {}        # key of each host's entry in the heap
        self._heap: list[tuple[int, int, str]] = []

    def __len__(self) -> int:
        return sum(len(b) for buckets in self._hosts.values() for b in buckets.values())

    def buckets(self) -> Iterator[tuple[str, int, array]]:
        """Every non-empty bucket as ``(host, score, its items in seq order)``, to be saved."""
        for host, buckets in self._hosts.items():
            for score, bucket in buckets.items():
                if len(bucket):
                    yield host, score, bucket.items[bucket.head:]

    @classmethod
    def from_buckets(cls, lifo: bool, buckets: Iterable[tuple[str, int, array]]) -> "Frontier":
        """A frontier holding these buckets (items in seq order), built without a push per item."""
        f = cls(lifo)
        for host, score, items in buckets:
            if not items:
                continue
            bucket = _Bucket()
            bucket.items = items
            f._hosts.setdefault(host, {})[score] = bucket
        for host, by_score in f._hosts.items():
            score = min(by_score)
            seq = by_score[score].peek(lifo)
            f._best[host] = (score, -seq if lifo else seq)
        f._heap = [(key[0], key[1], host) for host, key in f._best.items()]
        heapq.heapify(f._heap)
        return f

    def push(self, host: str, score: int, seq: int) -> None:
        """Add an item; ``seq`` is its place in insertion order (usually the largest yet; a
        retry that comes due later keeps its old place)."""
        buckets = self._hosts.get(host)
        if buckets is None:
            buckets = self._hosts[host] = {}
        bucket = buckets.get(score)
        if bucket is None:
            bucket = buckets[score] = _Bucket()
        bucket.add(seq)
        key = (score, -seq if self.lifo else seq)
        best = self._best.get(host)
        if best is None or key < best:
            self._best[host] = key
            heapq.heappush(self._heap, (key[0], key[1], host))

    def left(self, host: str, score: int) -> int:
        """Items of ``host`` at ``score`` still in the index (items another process claimed are
        dropped lazily, from the top of each bucket: so a count of at most those few more)."""
        bucket = self._hosts.get(host, {}).get(score)
        return len(bucket) if bucket is not None else 0

    def _true_best(self, host: str, live: Callable[[int], bool]) -> tuple[int, int] | None:
        """The host's best live key, dropping dead items and empty buckets on the way."""
        buckets = self._hosts.get(host)
        while buckets:
            score = min(buckets)
            bucket = buckets[score]
            while len(bucket) and not live(bucket.peek(self.lifo)):
                bucket.pop(self.lifo)
            if len(bucket):
                seq = bucket.peek(self.lifo)
                return score, (-seq if self.lifo else seq)
            del buckets[score]
        self._hosts.pop(host, None)
        return None

    def select(self, now: float, ready_at: Callable[[str], float],
               live: Callable[[int], bool]) -> tuple[str | None, int, float | None]:
        """Take the best live item of a host whose slot has come (``ready_at(host) <= now``).

        Returns ``(host, seq, wait)``: host None when nothing is ready; ``wait`` is the earliest
        time a skipped host becomes ready (None if none was skipped)."""
        heap, best = self._heap, self._best
        waiting: list[tuple[int, int, str]] = []
        wait: float | None = None
        try:
            while heap:
                score, tb, host = heap[0]
                if best.get(host) != (score, tb):
                    heapq.heappop(heap)          # stale: the host's key changed since
                    continue
                true = self._true_best(host, live)
                if true != (score, tb):          # its best item was taken elsewhere
                    heapq.heappop(heap)
                    if true is None:
                        best.pop(host, None)
                    else:
                        best[host] = true
                        heapq.heappush(heap, (true[0], true[1], host))
                    continue
                t = ready_at(host)               # (only a host with live items can make us wait)
                if t > now:
                    waiting.append(heapq.heappop(heap))
                    wait = t if wait is None else min(wait, t)
                    continue
                seq = self._hosts[host][score].pop(self.lifo)
                after = self._true_best(host, live)
                if after is None:
                    best.pop(host, None)
                    heapq.heappop(heap)
                else:   # the host's next item takes its place in the heap (one sift, not two)
                    best[host] = after
                    heapq.heapreplace(heap, (after[0], after[1], host))
                return host, seq, wait
            return None, 0, wait
        finally:
            for item in waiting:
                heapq.heappush(heap, item)
