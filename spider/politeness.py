"""Per-host politeness that adapts: pure functions from what a host did to when we may ask again.

``HostState`` is one line of ``hosts.txt`` (and of the claim journal's ``H`` records):
next allowed time, current delay, consecutive failures, and why the host waits. All workers share
it through the journal, and it survives restarts in ``hosts.txt``.

The rules, each in one function below, with the clock passed in (``now``):

- after a claim: the host's next request waits ``delay`` seconds (``reserve``);
- ``429`` or ``503`` with ``Retry-After`` (seconds or an HTTP date): nobody contacts the host
  before then (capped at ``MAX_RETRY_AFTER``); without it, the delay doubles (capped at
  ``--max-delay``);
- success: a raised delay recovers gradually (×0.75 per success) towards the floor, which is
  ``--delay`` or the robots.txt ``Crawl-delay`` (itself capped at ``--max-delay``);
- ``--auto-throttle``: the delay moves halfway towards the observed latency, within
  [floor, --max-delay] (Scrapy's AutoThrottle with a target concurrency of 1);
- ``PARK_AFTER`` consecutive connection errors or timeouts park the host for ``PARK_FOR`` seconds:
  its URLs stay pending (no attempts are spent) while the rest of the crawl goes on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .policy import FetchFailure

if TYPE_CHECKING:   # types only: store and fetch import this module
    from .config import CrawlConfig
    from .fetch import Response
    from .frontier.contract import Store

MAX_RETRY_AFTER = 3600.0
PARK_AFTER = 10
PARK_FOR = 300.0
RECOVERY = 0.75


@dataclass(frozen=True)
class HostState:
    """One host's politeness: when it may be asked next, its delay, its failures in a row."""

    next_allowed: float = 0.0
    delay: float = 0.0
    failures: int = 0
    reason: str = "-"

    def line(self, host: str) -> str:
        return f"{host}\t{self.next_allowed:.3f}\t{self.delay:.3f}\t{self.failures}\t{self.reason or '-'}\n"


def parse_host_line(line: str) -> tuple[str, HostState]:
    """One line of hosts.txt (or the fields of an ``H`` journal record); ValueError if bad."""
    f = line.rstrip("\n").split("\t")
    if len(f) < 2 or not f[0]:
        raise ValueError("expected host TAB next_allowed [TAB delay TAB failures TAB reason]")
    state = HostState(float(f[1]), float(f[2]) if len(f) > 2 else 0.0,
                      int(f[3]) if len(f) > 3 else 0, f[4] if len(f) > 4 else "-")
    if not (math.isfinite(state.next_allowed) and math.isfinite(state.delay)) or state.delay < 0:
        raise ValueError("next_allowed and delay must be finite numbers, delay not negative")
    return f[0], state


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from ``now``, for ``Retry-After: 120`` or an HTTP date; None if absent/bad."""
    if not value:
        return None
    v = value.strip()
    if v.isascii() and v.isdigit():   # str.isdigit() alone accepts '²'
        return min(float(v), MAX_RETRY_AFTER)
    import email.utils   # (here: ~2 ms of every start for the rare Retry-After date)

    try:
        when = email.utils.parsedate_to_datetime(v).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, min(when - now, MAX_RETRY_AFTER))


def effective_delay(state: HostState, floor: float) -> float:
    return max(state.delay, floor)


def after_response(state: HostState, now: float, status: int, retry_after: str | None, latency: float,
                   floor: float, cap: float, auto_throttle: bool = False) -> HostState:
    """The host answered (any HTTP status)."""
    if status in (429, 503):
        wait = parse_retry_after(retry_after, now)
        if wait is not None:
            return HostState(max(state.next_allowed, now + wait), max(state.delay, floor), 0,
                             f"retry-after {status}")
        delay = min(cap, max(effective_delay(state, floor) * 2, 1.0))
        return HostState(max(state.next_allowed, now + delay), delay, 0, f"slowed down after {status}")
    delay = effective_delay(state, floor)
    if auto_throttle:
        delay = (delay + latency) / 2
    elif delay > floor:
        delay = delay * RECOVERY
    delay = min(cap, max(floor, delay))
    return HostState(state.next_allowed, delay, 0, "-")


def after_failure(state: HostState, now: float, floor: float) -> HostState:
    """A connection error or timeout: count it; park the host after too many in a row."""
    failures = state.failures + 1
    if failures >= PARK_AFTER:
        return HostState(max(state.next_allowed, now + PARK_FOR), effective_delay(state, floor), 0,
                         f"parked after {failures} connection errors")
    return replace(state, failures=failures)


def tell_host(store: "Store", host: str, outcome: "Response | FetchFailure", now: float, floor: float,
              config: "CrawlConfig") -> None:
    """Update a host's shared state after a request (page, robots.txt or sitemap alike), and only
    when the outcome changes it: an update costs the frontier lock and a journal record."""
    if isinstance(outcome, FetchFailure):
        if outcome.transient:
            store.update_host(host, lambda s: after_failure(s, now, floor))
        return
    resp = outcome
    state = store.host_state(host)
    if (resp.status in (429, 503) or state.delay > floor or state.failures or state.reason != "-"
            or config.auto_throttle):
        store.update_host(host, lambda s: after_response(
            s, now, resp.status, resp.retry_after, resp.elapsed, floor, config.max_delay, config.auto_throttle))
