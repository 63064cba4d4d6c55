"""The failure policy: what a fetch outcome means for the URL, decided in one function.

| outcome                                                       | verdict                                         |
|---------------------------------------------------------------|-------------------------------------------------|
| 2xx                                                           | crawled (HTML parsed for links; others recorded) |
| 301, 302, 303, 307, 308 with a Location                       | redirect (each hop checked before it is fetched) |
| other 3xx, or a redirect without Location                     | failed, reason = the status                     |
| 408, 429, 500, 502, 503, 504                                  | retry later; after the last attempt failed, reason = the status |
| 410                                                           | gone: failed with ``410``, never fetched again (failed URLs are never re-queued) |
| other 4xx and 5xx (401, 403, 404, 501, ...)                   | failed, reason = the status                     |
| 404 with ``--confirm-404``                                     | retried once later, then failed with ``404``    |
| robots.txt disallows the URL                                  | never requested: rejected.txt with ``robots``   |
| timeout, connection refused or reset, DNS failure, broken body | retry later; then failed, e.g. ``timeout after 3 attempts`` |
| body over the size cap, response over the time limit          | failed (``too large``, ``too slow``); retrying would cost the same |
| unsupported content encoding, invalid response                | failed with a short reason                      |
| this worker was stopped (SIGSTOP, Ctrl-Z) during the request and it timed out or broke | retried at once; no attempt spent (``paused``) |

Retries back off exponentially with jitter (``retry_delay``) and do not block other work: the URL
goes back to the end of the queue with a time before which it is not claimed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
PAUSED = "paused"   # a FetchFailure's kind: our process was stopped during the request (spider/fetch.py)
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class Verdict(Enum):
    CRAWLED = "crawled"
    REDIRECT = "redirect"
    RETRY = "retry"
    FAILED = "failed"
    GONE = "gone"


@dataclass(frozen=True)
class Outcome:
    """What the failure policy makes of one fetch: a verdict, and why."""

    verdict: Verdict
    reason: str = ""


@dataclass(frozen=True)
class FetchFailure:
    """A fetch that produced no usable response: ``kind`` is a short name, ``transient`` says
    whether trying again later can help."""

    kind: str
    transient: bool
    detail: str = ""


def classify(status: int | None, failure: FetchFailure | None, attempts: int, max_attempts: int,
             has_location: bool = False, confirm_404: bool = False) -> Outcome:
    """Map a status code or a failure to a verdict. ``attempts`` counts this one (1 = first try).

    With ``confirm_404`` a first 404 is retried once later (a flaky server or a deploy in
    progress), then failed with ``404``."""
    last = attempts >= max_attempts
    if failure is not None:
        if failure.kind == PAUSED:   # the time ran out while we were stopped: not the server's doing
            return Outcome(Verdict.RETRY, PAUSED)
        if failure.transient and not last:
            return Outcome(Verdict.RETRY, failure.kind)
        suffix = f" after {attempts} attempts" if failure.transient and attempts > 1 else ""
        return Outcome(Verdict.FAILED, failure.kind + suffix)
    assert status is not None
    if 200 <= status < 300:
        return Outcome(Verdict.CRAWLED)
    if status in REDIRECT_STATUSES and has_location:
        return Outcome(Verdict.REDIRECT)
    if status == 410:
        return Outcome(Verdict.GONE, "410")
    if status == 404 and confirm_404 and attempts < 2:
        return Outcome(Verdict.RETRY, "404")
    if status in TRANSIENT_STATUSES and not last:
        return Outcome(Verdict.RETRY, str(status))
    return Outcome(Verdict.FAILED, str(status))


def retry_delay(attempts: int, base: float = 2.0, cap: float = 300.0, rng: random.Random | None = None) -> float:
    """Seconds before the next attempt: base * 2^(attempts-1), capped, with full jitter on half."""
    delay = min(cap, base * (2 ** min(max(0, attempts - 1), 30)))
    return delay / 2 + (rng or random).random() * delay / 2
