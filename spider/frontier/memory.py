"""``MemoryStore``: the in-memory twin of ``FileStore``, for fast unit tests of the worker loop.

Same verbs, same semantics (crawl order, host reservations, budget, settle kinds), no files.
The contract tests in tests/test_store.py run against both.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable

from ..politeness import HostState
from ..records import QueueEntry, is_redirect_hop, rejected_line
from ..order import Frontier, Order
from .contract import Claim, ClaimResult, Counts, claim_limit, delayed_wait
from ..urls import host_key


class MemoryStore:
    def __init__(self, *, owner: int = 1, max_pages: int | None = None,
                 max_per_host: int | None = None, order: Order | None = None) -> None:
        self.owner = owner
        self.max_pages = max_pages
        self.max_per_host = max_per_host
        self.order = order or Order()
        self.admitted: dict[str, int] = {}
        self.over_budget: set[str] = set()
        self.hosts: dict[str, HostState] = {}
        self.seen: set[str] = set()
        self._pending: dict[int, QueueEntry] = {}   # seq -> entry, in insertion order
        self._seq = 0
        self._frontier = Frontier(self.order.lifo)
        self._rechecks = Frontier(self.order.lifo)   # the rechecks again: claimable past --max-pages
        self._delayed: list[int] = []   # retries, not in the index until their time comes
        self.inflight: dict[str, tuple[int, QueueEntry]] = {}
        self.host_next: dict[str, float] = {}
        self.crawled: list[str] = []
        self.failed: list[str] = []
        self.logs: dict[str, list[str]] = {}
        self.texts: dict[str, str] = {}

    @property
    def pending(self) -> list[QueueEntry]:
        """The pending entries, in insertion order (as queue.txt would list them)."""
        return list(self._pending.values())

    def _push(self, e: QueueEntry) -> None:
        self._seq += 1
        self._pending[self._seq] = e
        if e.not_before > 0:
            self._delayed.append(self._seq)
        else:
            self._index(self._seq)

    def _index(self, seq: int) -> None:
        e = self._pending[seq]
        key = (host_key(e.url), self.order.score(e.url, e.depth), seq)
        self._frontier.push(*key)
        if e.kind == "recheck":
            self._rechecks.push(*key)

    def known(self, urls: Iterable[str]) -> set[str]:
        return {u for u in urls if u in self.seen}

    def counts(self) -> Counts:
        hops = sum(1 for line in self.crawled if is_redirect_hop(line))
        by_owner: dict[int, int] = {}
        for owner, _ in self.inflight.values():
            by_owner[owner] = by_owner.get(owner, 0) + 1
        return Counts(len(self._pending), len(self.inflight), len(self.crawled) - hops, hops,
                      len(self.failed), by_owner)

    refresh = counts

    def claim(self, limit: int, now: float, delay_for: Callable[[str], float]) -> ClaimResult:
        c = self.counts()
        room = claim_limit(limit, self.max_pages, c)   # past --max-pages, only rechecks go on
        taken: list[Claim] = []
        due = [q for q in self._delayed if self._pending[q].not_before <= now]
        self._delayed = [q for q in self._delayed if q not in due]
        for q in due:
            self._index(q)
        wait = delayed_wait(((host_key(self._pending[q].url), self._pending[q].not_before) for q in self._delayed
                             if room or self._pending[q].kind == "recheck"),
                            lambda h: self.host_next.get(h, 0.0))
        while len(taken) < limit:
            index = self._frontier if room else self._rechecks
            host, seq, w = index.select(now, lambda h: self.host_next.get(h, 0.0), self._pending.__contains__)
            if w is not None:
                wait = w if wait is None else min(wait, w)
            if host is None:
                break
            e = self._pending.pop(seq)
            self.host_next[host] = now + delay_for(host)
            self.inflight[e.url] = (self.owner, e)
            taken.append(Claim(e, self.owner))
            if room and e.kind != "recheck":
                room -= 1
        c = self.counts()
        return ClaimResult(taken, c.pending, c.in_flight, wait, room == 0 and not taken and wait is None)

    def add(self, entries: Iterable[QueueEntry]) -> list[QueueEntry]:
        new = []
        for e in entries:
            if e.url in self.seen:
                continue
            h = host_key(e.url)
            if self.max_per_host is not None and self.admitted.get(h, 0) >= self.max_per_host:
                if e.url not in self.over_budget:
                    self.over_budget.add(e.url)
                    self.log("rejected", rejected_line(e.url, "host budget", e.source))
                continue
            self.seen.add(e.url)
            self.admitted[h] = self.admitted.get(h, 0) + 1
            self._push(e)
            new.append(e)
        return new

    def requeue(self, entries: Iterable[QueueEntry]) -> int:
        n = 0
        for e in entries:
            self._push(e)
            n += 1
        return n

    def admit_and_claim(self, entry: QueueEntry, now: float, delay: float) -> Claim | None:
        if entry.url in self.seen:
            return None
        self.seen.add(entry.url)
        host = host_key(entry.url)
        start = max(now, self.host_next.get(host, 0.0))
        self.host_next[host] = start + delay
        self.inflight[entry.url] = (self.owner, entry)
        return Claim(entry, self.owner, start)

    def settle(self, claim: Claim, kind: str, *, record: str | None = None,
               requeue: QueueEntry | None = None) -> None:
        if record is not None:
            if kind == "rejected":
                self.log("rejected", record)
            else:
                (self.failed if kind == "failed" else self.crawled).append(record)
        if requeue is not None:
            self._push(requeue)
        self.inflight.pop(claim.url, None)

    def reissue(self, owner: int) -> int:
        lost = [(u, e) for u, (o, e) in self.inflight.items() if o == owner]
        for u, e in lost:
            del self.inflight[u]
            self._push(e)
        return len(lost)

    def host_state(self, host: str) -> HostState:
        return replace(self.hosts.get(host, HostState()), next_allowed=self.host_next.get(host, 0.0))

    def update_host(self, host: str, change: Callable[[HostState], HostState]) -> HostState:
        new = change(self.host_state(host))
        self.hosts[host] = new
        self.host_next[host] = new.next_allowed
        return new

    def reserve_host(self, host: str, until: float) -> None:
        self.update_host(host, lambda s: replace(s, next_allowed=max(s.next_allowed, until)))

    def first_with_text(self, text_hash: str, url: str) -> str:
        return self.texts.setdefault(text_hash, url)

    def log(self, name: str, text: str) -> None:
        self.logs.setdefault(name, []).append(text)
