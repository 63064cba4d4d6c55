"""The URL-pattern census and the trap alarm: is one kind of URL taking over the frontier?

``pattern(url)`` generalises a URL to its shape, per host: runs of digits become ``{n}``, long
hexadecimal or UUID-like tokens become ``{id}``, query values are dropped (keys kept, sorted). So
``https://ex.com/cal/2031/05?view=week`` and ``https://ex.com/cal/2032/11?view=day`` are both
``ex.com/cal/{n}/{n}?view=``. A calendar, a facet explosion or a session-id loop shows up as one
pattern holding most of the pending queue, and growing.

``trap_alarm(samples)`` is the rule that decides when to warn; pure, so it is tested on tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEXID = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}(?![0-9A-Za-z])")
_DIGITS = re.compile(r"\d+")

# The alarm: the top pattern holds at least this share of a pending queue at least this big,
# and its count grew in each of the last GROWTH_SAMPLES samples.
ALARM_SHARE = 0.5
ALARM_MIN_PENDING = 100
GROWTH_SAMPLES = 3


def pattern(url: str) -> str:
    """The shape of a URL: host and path with numbers and ids generalised, query keys only.

    >>> pattern("https://example.com/cal/2031/05/?view=week&day=3")
    'example.com/cal/{n}/{n}/?day=&view='
    >>> pattern("http://example.com:8080/item/5f2b9c0e41d7/reviews")
    'example.com:8080/item/{id}/reviews'
    """
    rest = url.split("://", 1)[-1]
    path, _, query = rest.partition("?")
    host, slash, path = path.partition("/")
    path = _UUID.sub("{id}", path)
    path = _HEXID.sub("{id}", path)
    path = _DIGITS.sub("{n}", path)
    path = host + slash + path
    if not query:
        return path
    keys = sorted({kv.split("=", 1)[0] for kv in query.split("&") if kv})
    return path + "?" + "&".join(k + "=" for k in keys)


def top_patterns(urls: Iterable[str], n: int = 10) -> list[tuple[str, int]]:
    """The ``n`` most common patterns among ``urls``, most common first (ties by name)."""
    counts: dict[str, int] = {}
    for u in urls:
        p = pattern(u)
        counts[p] = counts.get(p, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


@dataclass(frozen=True)
class Sample:
    """One look at the frontier: pending URLs, and the top pattern's name and pending count."""

    pending: int
    top: str
    top_count: int


def trap_alarm(samples: Sequence[Sample]) -> str | None:
    """A warning when one URL pattern dominates the pending queue and keeps growing, else None.

    Dominates: the latest sample's top pattern holds at least ``ALARM_SHARE`` of at least
    ``ALARM_MIN_PENDING`` pending URLs. Keeps growing: the same pattern was on top and its count
    rose in each of the last ``GROWTH_SAMPLES`` samples.
    """
    if len(samples) < GROWTH_SAMPLES + 1:
        return None
    last = samples[-1]
    if last.pending < ALARM_MIN_PENDING or last.top_count < ALARM_SHARE * last.pending:
        return None
    recent = samples[-(GROWTH_SAMPLES + 1):]
    if any(s.top != last.top for s in recent):
        return None
    if not all(b.top_count > a.top_count for a, b in zip(recent, recent[1:])):
        return None
    share = 100 * last.top_count // max(1, last.pending)
    return (f"possible trap: {last.top} is {share}% of the pending queue "
            f"({last.top_count} of {last.pending}) and growing; see --trap and --deny")
