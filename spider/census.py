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
from typing import Hashable, Iterable, Sequence

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEXID = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}(?![0-9A-Za-z])")
_DIGITS = re.compile(r"\d+")
_ZERO = bytes.maketrans(b"123456789", b"000000000")   # a URL's shape: its ASCII digits all 0
# After each newline, a URL's host (after its first "://"), and its query: the parts ``pattern`` keeps.
_HOST = re.compile(rb"\n(?:https?://|[^\n]*?://)?([^/?\n]*)")
_HOST_QUERY = re.compile(rb"\n(?:https?://|[^\n]*?://)?([^/?\n]*)[^?\n]*(\?[^\n]*)?")

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


def url_patterns(urls: Sequence[bytes]) -> list[str]:
    """``pattern`` of each URL (UTF-8 bytes, decoded with replacement), worked out once per shape
    when URLs share shapes.

    URLs that differ only in the ASCII digits of their path have the same pattern (each such
    digit is generalised, and a digit stays a digit for the id rules), so the shape is the URL
    with those digits made 0, its host and query kept: found in C for all the URLs at once
    (one translate; one count when they are all of the first one's host, else a findall of the
    hosts), so the census of 2,000 numbered pages is a few calls, not
    2,000 (the crawl's parent takes it at every sample while the workers crawl). URLs that
    seldom share a shape (slugs, ids with letters) are worked out one by one, as before."""
    if not _shared(urls[:100]):
        return [pattern(u.decode("utf-8", "replace")) for u in urls]
    text = b"\n" + b"\n".join(urls)
    shapes = text.translate(_ZERO).split(b"\n")[1:]
    keys: list[Hashable] = shapes
    if len(shapes) != len(urls) or not _often(shapes):   # (or a URL with a newline)
        return [pattern(u.decode("utf-8", "replace")) for u in urls]
    if b"?" in text or not _one_host(text, len(urls)):
        heads = (_HOST_QUERY if b"?" in text else _HOST).findall(text)
        if len(heads) != len(urls):
            return [pattern(u.decode("utf-8", "replace")) for u in urls]
        if heads.count(heads[0]) != len(heads):   # several hosts (or queries): part of the shape
            keys = list(zip(shapes, heads))
    one = {k: pattern(u.decode("utf-8", "replace")) for k, u in dict(zip(keys, urls)).items()}
    return list(map(one.__getitem__, keys))


def _shared(urls: Sequence[bytes]) -> bool:
    """Whether the URLs may share shapes enough for ``url_patterns`` to go by shape: two URLs a
    shape on average, counting the URLs with their ASCII digits 0 (hosts and queries aside)."""
    return _often(b"\n".join(urls).translate(_ZERO).split(b"\n"))


def _often(shapes: Sequence[bytes]) -> bool:
    """``_shared`` of URLs whose shapes (digits 0, no newline) are ``shapes``."""
    return len(shapes) > 1 and 2 * len(set(shapes)) <= len(shapes)


def _one_host(text: bytes, n: int) -> bool:
    """Whether the ``n`` URLs of ``text`` (each after a newline) all have the first one's host as
    ``_HOST`` finds it: each begins with its scheme and host and a "/" (one count in C, where the
    findall of every host took a third of a census of 2,000 URLs of one site)."""
    head = _HOST.match(text)
    return head is not None and b"://" in head.group(0) and text.count(head.group(0) + b"/") == n


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
