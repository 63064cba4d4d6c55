"""The frontier's contract: what a worker needs from a store, whatever keeps the URLs.

A URL is in exactly one state: pending, in flight (claimed by one worker), crawled, failed or
rejected. A store moves it between them with these verbs and nothing else; ``FileStore``
(plain text files, ``files.py``), ``MemoryStore`` (the in-memory twin for tests, ``memory.py``)
and ``RedisStore`` (``redisstore.py``, for a crawl shared by machines) implement them, and one
contract suite (``tests/test_store.py``) runs against all three. Policy code depends on this
module only, never on a store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Container, Iterable, Protocol

from ..records import QueueEntry

if TYPE_CHECKING:
    from ..politeness import HostState


class StoreError(Exception):
    """A project file could not be read, written or locked (disk full, permissions, ...)."""


@dataclass(frozen=True)
class Claim:
    """A URL taken by one worker: the queue line it came from and who holds it."""

    entry: QueueEntry
    owner: int
    not_before: float = 0.0   # the host's slot: do not send the request before this time

    @property
    def url(self) -> str:
        return self.entry.url


@dataclass
class ClaimResult:
    """What one claim gives a worker: its claims, and the queue around them."""

    claims: list[Claim]
    pending: int
    in_flight: int
    wait_until: float | None = None   # earliest time a blocked pending URL becomes eligible
    budget_reached: bool = False

    @property
    def finished(self) -> bool:
        """Nothing left to do for anyone: no work pending (or budget used up) and none in flight."""
        return not self.claims and self.in_flight == 0 and (self.pending == 0 or self.budget_reached)


@dataclass
class Counts:
    """How many URLs the store holds in each state (the status line, the summary)."""

    pending: int = 0
    in_flight: int = 0
    crawled: int = 0     # pages (redirect hops not included)
    hops: int = 0        # URLs that answered with a redirect
    failed: int = 0
    in_flight_by_owner: dict[int, int] = field(default_factory=dict)
    rejected: int = 0    # claims settled as refused (robots.txt said no) in this run
    rechecked: int = 0   # recrawl checks of crawled pages settled in this run

    @property
    def completed(self) -> int:
        return self.crawled + self.failed


def delayed_wait(items: Iterable[tuple[str, float]], ready_at: Callable[[str], float]) -> float | None:
    """When the first of these retries (host, not_before) may go: the later of its own time and
    its host's slot. Both stores ask this when nothing could be claimed."""
    return min((max(not_before, ready_at(host)) for host, not_before in items), default=None)


def claim_limit(limit: int, max_pages: int | None, counts: Counts) -> int:
    """How many URLs a claim may take: --max-pages counts completed and in-flight URLs, so the
    budget is never overshot however many workers claim at once. 0 means the budget is used up."""
    if max_pages is None:
        return limit
    return max(0, min(limit, max_pages - counts.completed - counts.in_flight))


class Store(Protocol):
    """What a worker needs from a frontier: ``FileStore`` for real, ``MemoryStore`` in tests."""

    @property
    def seen(self) -> Container[str]: ...

    def known(self, urls: Iterable[str]) -> set[str]:
        """Which of ``urls`` the frontier has seen (queued, in flight, crawled or failed): asked
        once for all the links of a page, so a remote store answers in one round trip."""
        ...


    def claim(self, limit: int, now: float, delay_for: Callable[[str], float]) -> ClaimResult: ...
    def add(self, entries: Iterable[QueueEntry]) -> list[QueueEntry]: ...
    def admit_and_claim(self, entry: QueueEntry, now: float, delay: float) -> Claim | None: ...
    def settle(self, claim: Claim, kind: str, *, record: str | None = None,
               requeue: QueueEntry | None = None) -> None: ...
    def reissue(self, owner: int) -> int: ...
    def reserve_host(self, host: str, until: float) -> None: ...
    def first_with_text(self, text_hash: str, url: str) -> str: ...
    def requeue(self, entries: Iterable[QueueEntry]) -> int: ...
    def host_state(self, host: str) -> HostState: ...
    def update_host(self, host: str, change: Callable[[HostState], HostState]) -> HostState: ...
    def refresh(self) -> Counts: ...
    def log(self, name: str, text: str) -> None: ...
