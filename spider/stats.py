"""Instrumentation: ``stats.txt``, a line every few seconds that says how the crawl is going.

The crawl's parent process appends one line every ``STATS_EVERY`` seconds and one at the end
(append-only, one write per line), so a crawl can be charted afterwards (``report``) and
``status`` can tell whether the frontier is running away. Columns (TAB-separated):

    time  unix  pending  in_flight  crawled  failed  discovered  duplicates  bytes
    top_pattern  top_pending  rejected  seen_again

- ``crawled`` counts pages (redirect hops excluded); ``discovered`` counts the distinct URLs the
  frontier took in (pending, in flight, crawled, failed, redirect hops);
- ``duplicates`` is the number of lines of duplicates.txt (same text, or canonical variants);
- ``bytes`` is the body bytes recorded in crawled.txt;
- ``top_pattern`` / ``top_pending``: the most common URL pattern (``census.pattern``) among
  pending URLs and how many pending URLs have it (estimated from 1 URL in k when queue.txt is
  over 4 MiB at the start, so a queue of millions costs the parent little);
- ``rejected``: refusals so far by reason, ``reason=count;reason=count`` (``-`` when none);
- ``seen_again``: links found to URLs already known (pending, in flight, crawled or failed):
  counted, not logged one by one (links.txt carries each page's count).

Everything is read incrementally from the append-only files, so a sample costs what was
appended since the last one, not the size of the crawl.
"""

from __future__ import annotations

import math
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .census import Sample, pattern, trap_alarm
from .records import clean, is_data, utc_stamp
from .safefs import append_text, atomic_write
from .frontier.view import identity

STATS = "stats.txt"
STATS_HEADER = ("# time\tunix\tpending\tin_flight\tcrawled\tfailed\tdiscovered\tduplicates\tbytes"
                "\ttop_pattern\ttop_pending\trejected\tseen_again\n")
STATS_EVERY = 2.0
_QUEUE_URL = re.compile(rb"^https?://[^\t\n]*", re.M)   # the first field of a queue line
CENSUS_SAMPLE_BYTES = 1 << 20   # a queue.txt bigger than this is censused 1 URL in k (~17k URLs sampled)
CENSUS = "census.txt"   # the census as the last clean stop left it (a cache, like frontier.view)
CENSUS_HEADER = "# pending URL patterns of queue.txt at the last clean stop: count, pattern (a cache; safe to delete)\n"
MAX_PATTERNS = 20000   # distinct patterns tracked; the rest count as "(other)" so memory stays bounded


class _Tail:
    """Reads the lines appended to one file since the last call, 1 MiB at a time; starts over
    if the file was replaced (``replaced`` says so as soon as ``lines`` is called)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        self.ino: int | None = None
        self.replaced = False

    def lines(self) -> Iterator[str]:
        return (raw.decode("utf-8", "replace") for raw in self.raw_lines())

    def raw_lines(self) -> Iterator[bytes]:
        return (line for chunk in self.raw_chunks() for line in chunk.splitlines())

    def raw_chunks(self) -> Iterator[bytes]:
        """The new lines as chunks of whole lines (for readers that work on them in C)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return iter(())
        self.replaced = self.ino is not None and st.st_ino != self.ino
        if self.replaced or st.st_size < self.pos:
            self.pos = 0
        self.ino = st.st_ino
        return self._chunks(st.st_size)

    def _chunks(self, size: int) -> Iterator[bytes]:
        if size <= self.pos:
            return
        with open(self.path, "rb") as f:
            f.seek(self.pos)
            left, carry = size - self.pos, b""
            while left > 0:
                data = f.read(min(left, 1 << 20))
                if not data:
                    return
                left -= len(data)
                data = carry + data
                cut = data.rfind(b"\n") + 1    # a line still being written waits for the next call
                carry = data[cut:]
                self.pos += cut
                if cut:
                    yield data[:cut]


@dataclass
class Census:
    """URL patterns of the pending queue, kept up to date from queue.txt and the claim journal."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, url: str, n: int) -> None:
        p = pattern(url)
        if p not in self.counts and len(self.counts) >= MAX_PATTERNS:
            p = "(other)"
        c = self.counts.get(p, 0) + n
        if c > 0:
            self.counts[p] = c
        else:
            self.counts.pop(p, None)

    def top(self, n: int = 1) -> list[tuple[str, int]]:
        return sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


class StatsRecorder:
    """The parent's sampler: call ``sample(counts)`` now and then; it appends to stats.txt."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.bytes = 0
        self.duplicates = 0
        self.seen_again = 0   # links to URLs already known: counted here, not logged one by one
        self.rejected: dict[str, int] = {}
        self.census = Census()
        self._every: int | None = None   # the census counts 1 pending URL in this many
        self.history: list[Sample] = []
        self._tails = {name: _Tail(self.folder / name) for name in
                       ("crawled.txt", "rejected.txt", "duplicates.txt", "queue.txt", "claims.txt",
                        "links.txt")}

    def catch_up(self) -> None:
        """Read the project files so far (a resumed queue of a million lines included): called at
        start-up, before the workers start, so the first sample does not take a core from them."""
        self._read()

    def _read(self) -> None:
        for line in self._tails["crawled.txt"].lines():
            if is_data(line):
                f = line.split("\t", 4)
                if len(f) > 3 and f[3].isdigit():
                    self.bytes += int(f[3])
        for line in self._tails["rejected.txt"].lines():
            if is_data(line):
                f = line.split("\t", 2)
                reason = f[1].strip() if len(f) > 1 else "-"
                if reason.startswith("bad queue line") or ".txt:" in reason:
                    reason = "bad line"
                self.rejected[reason] = self.rejected.get(reason, 0) + 1
        self.duplicates += sum(1 for line in self._tails["duplicates.txt"].lines() if is_data(line))
        for line in self._tails["links.txt"].lines():
            f = line.split("\t", 3)
            if len(f) > 2 and f[2].isdigit():
                self.seen_again += int(f[2])
        queue, claims = self._tails["queue.txt"], self._tails["claims.txt"]
        if self._every is None:
            self._load_census()
        new_queue = queue.raw_chunks()   # bytes: a line that is not sampled is never decoded
        if queue.replaced or self._every is None:   # first look, or folded/recovered: start over
            self.census = Census()
            claims.pos, claims.ino = 0, None
            try:   # a big queue is sampled: 1 URL in k (the same URLs every time: by their CRC)
                self._every = max(1, os.path.getsize(queue.path) // CENSUS_SAMPLE_BYTES + 1)
            except OSError:
                self._every = 1
        k = self._every
        for chunk in new_queue:
            # The URL of each line, found in C: this runs in the parent while the workers crawl, and
            # a resumed queue of a million lines used to take a core for over a second.
            links = _QUEUE_URL.findall(chunk)
            if k > 1:
                links = [link for link, crc in zip(links, map(zlib.crc32, links)) if not crc % k]
            for link in links:
                self.census.add(link.strip().decode("utf-8", "replace"), 1)
        for rec in claims.raw_lines():
            if rec.startswith(b"C\t"):
                parts = rec.split(b"\t", 6)
                if len(parts) > 5:
                    link = parts[5].strip()
                    if k == 1 or zlib.crc32(link) % k == 0:
                        self.census.add(link.decode("utf-8", "replace"), -1)

    def save_census(self) -> None:
        """After the fold at a clean stop: save the census of the new queue.txt (its pending
        lines are the ones the census counts), so the next run need not read the queue for it."""

        me = identity(self.folder / "queue.txt")
        if me is None or self._every is None:
            return
        rows = "".join(f"{n}\t{p}\n" for p, n in sorted(self.census.counts.items(), key=lambda kv: (-kv[1], kv[0])))
        try:
            atomic_write(self.folder / CENSUS, f"{CENSUS_HEADER}queue\t{' '.join(map(str, me))}\n"
                                               f"every\t{self._every}\n{rows}")
        except OSError:
            pass   # a cache: the next start takes the census from queue.txt

    def _load_census(self) -> None:
        """The census saved at the last clean stop, if queue.txt is exactly as it left it."""
        try:
            lines = (self.folder / CENSUS).read_text(encoding="utf-8").splitlines()
            me = identity(self.folder / "queue.txt")
            if me is None or lines[1] != f"queue\t{' '.join(map(str, me))}" or not lines[2].startswith("every\t"):
                return
            every = int(lines[2][6:])
            counts = {}
            for line in lines[3:]:
                n, _, p = line.partition("\t")
                counts[p] = int(n)
        except (OSError, IndexError, ValueError):
            return
        if every < 1 or any(n <= 0 for n in counts.values()):
            return
        self.census, self._every = Census(counts), every
        queue, claims = self._tails["queue.txt"], self._tails["claims.txt"]
        queue.pos, queue.ino = me[1], me[0]
        claims.pos, claims.ino = 0, None

    def sample(self, pending: int, in_flight: int, crawled: int, hops: int, failed: int,
               rejected_claims: int = 0, when: float | None = None) -> str:
        """Append one line to stats.txt and return it; also feeds the trap alarm."""
        import time

        self._read()
        now = time.time() if when is None else when
        top = self.census.top(1)
        top_pattern, top_pending = top[0] if top else ("-", 0)
        top_pending *= self._every or 1   # an estimate when the census samples
        discovered = pending + in_flight + crawled + hops + failed + rejected_claims
        rejected = clean(";".join(f"{k}={v}" for k, v in sorted(self.rejected.items())))
        line = (f"{utc_stamp(now)}\t{now:.3f}\t{pending}\t{in_flight}\t{crawled}\t{failed}\t"
                f"{discovered}\t{self.duplicates}\t{self.bytes}\t{clean(top_pattern)}\t{top_pending}\t{rejected}\t"
                f"{self.seen_again}\n")
        path = self.folder / STATS
        if not path.exists():
            append_text(path, STATS_HEADER)
        append_text(path, line)
        self.history = (self.history + [Sample(pending, top_pattern, top_pending)])[-20:]
        return line

    def alarm(self) -> str | None:
        return trap_alarm(self.history)


@dataclass(frozen=True)
class StatsRow:
    """One line of stats.txt."""

    unix: float
    pending: int = 0
    in_flight: int = 0
    crawled: int = 0
    failed: int = 0
    discovered: int = 0
    duplicates: int = 0
    bytes: int = 0
    top_pattern: str = "-"
    top_pending: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    seen_again: int = 0


def parse_stats_line(line: str) -> StatsRow | None:
    """A stats.txt line, or None for a comment or a line that is not one (torn, hand-edited).

    The first nine columns are required; the pattern and rejection columns may be missing."""
    if not is_data(line):
        return None
    f = line.lstrip("\ufeff").rstrip("\r\n").split("\t")
    if len(f) < 9:
        return None
    try:
        unix = float(f[1])
        counts = [int(x) for x in f[2:9]]
    except ValueError:
        return None
    top_pending = int(f[10]) if len(f) > 10 and f[10].strip().isdigit() else 0   # a torn tail is fine
    if not math.isfinite(unix) or min(counts) < 0 or top_pending < 0:
        return None
    rejected: dict[str, int] = {}
    if len(f) > 11 and f[11].strip() not in ("", "-"):
        for part in f[11].split(";"):
            k, _, v = part.rpartition("=")
            if k and v.isdigit():
                rejected[k] = int(v)
    pending, in_flight, crawled, failed, discovered, duplicates, size = counts
    seen_again = int(f[12]) if len(f) > 12 and f[12].strip().isdigit() else 0
    return StatsRow(unix, pending, in_flight, crawled, failed, discovered, duplicates, size,
                    (f[9].strip() or "-") if len(f) > 9 else "-", top_pending, rejected, seen_again)


def read_stats(folder: Path, last: int | None = None) -> list[StatsRow]:
    """The rows of stats.txt (only the last ``last`` when given), skipping lines that do not parse."""
    path = Path(folder) / STATS
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return []
    if last is not None:
        lines = lines[-last:]
    return [r for r in (parse_stats_line(x) for x in lines) if r is not None]


def discovery_ratio(a: StatsRow, b: StatsRow) -> float | None:
    """New URLs per fetched page between two samples (None when nothing was fetched)."""
    fetched = (b.crawled + b.failed) - (a.crawled + a.failed)
    return (b.discovered - a.discovered) / fetched if fetched > 0 else None


def alarm_from_rows(rows: list[StatsRow]) -> str | None:
    return trap_alarm([Sample(r.pending, r.top_pattern, r.top_pending) for r in rows])
