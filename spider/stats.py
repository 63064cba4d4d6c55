"""Instrumentation: ``stats.txt``, a line every few seconds that says how the crawl is going.

The crawl's parent process appends one line every ``sample_every(t)`` seconds (``FAST_EVERY``
in the first ``FAST_FOR`` seconds of a run, so a short crawl still draws a curve, then
``STATS_EVERY``) and one at the end (append-only, one write per line), so a crawl can be charted
afterwards (``report``) and ``status`` can tell whether the frontier is running away. Columns
(TAB-separated):

    time  unix  pending  in_flight  crawled  failed  discovered  duplicates  bytes
    top_pattern  top_pending  rejected  seen_again  checked  completed

- ``crawled`` counts pages (redirect hops excluded); ``discovered`` counts the distinct URLs the
  frontier took in (pending, in flight, crawled, failed, redirect hops): a recrawl's pending and
  in-flight rechecks are not counted again, their URLs are crawled already;
- ``duplicates`` is the number of lines of duplicates.txt (same text, or canonical variants);
- ``bytes`` is the body bytes recorded in crawled.txt;
- ``top_pattern`` / ``top_pending``: the most common URL pattern (``census.pattern``) among
  pending URLs and how many pending URLs have it (estimated from 1 URL in k when queue.txt is
  over 4 MiB at the start, so a queue of millions costs the parent little);
- ``rejected``: refusals so far by reason, ``reason=count;reason=count`` (``-`` when none);
- ``seen_again``: links found to URLs already known (pending, in flight, crawled or failed):
  counted, not logged one by one (links.txt carries each page's count);
- ``checked``: recrawl checks made so far (lines of checks.txt), so pages/s counts them too;
- ``completed``: URLs completed so far: pages crawled, failed, redirect hops, and URLs robots.txt
  refused when they were claimed (the discovery ratio's denominator).

Rates over time are read from the rows with ``runs`` (a gap longer than ``RUN_GAP`` between two
rows is a pause between runs), ``pages_per_second`` and ``discovery_ratio``: ``status``, ``report``
and the run's summary line all use these, so they tell one story.

Everything is read incrementally from the append-only files, so a sample costs what was
appended since the last one, not the size of the crawl; and that is read in C (a findall a log,
the lines that may not be data aside), the census pattern worked out once per URL shape: the
parent samples while the workers crawl, and line by line it cost 10 us a page.
"""

from __future__ import annotations

import bisect
import math
import os
import re
import zlib
from collections import Counter
from operator import itemgetter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

from .census import Sample, pattern, trap_alarm, url_patterns
from .records import clean, is_data, utc_stamp
from .safefs import append_text, atomic_write
from .frontier.view import identity

STATS = "stats.txt"
STATS_HEADER = ("# time\tunix\tpending\tin_flight\tcrawled\tfailed\tdiscovered\tduplicates\tbytes"
                "\ttop_pattern\ttop_pending\trejected\tseen_again\tchecked\tcompleted\n")
STATS_EVERY = 2.0
FAST_EVERY, FAST_FOR = 0.25, 10.0   # a run's first 10 s are sampled 8x as often (a 5 s crawl: 20 points)
RUN_GAP = 3 * STATS_EVERY   # a longer gap between two rows is a pause between runs, not crawl time
RUN_MARK = "# run"          # the comment line before the first row of each run
# The regexes below find a line by the newline before it (``_findall``), which C seeks fast;
# a line start ("^" with re.M) is tried at every byte of the line, 10x slower on links.txt.
_QUEUE_URL = re.compile(rb"\n(https?://[^\t\n]*)")   # the first field of a queue line
_CLAIM_URL = re.compile(rb"\nC\t[^\t\n]*\t[^\t\n]*\t[^\t\n]*\t[^\t\n]*\t([^\t\n]*)")   # a claim's URL
# A log line that starts with a plain character (all the crawler writes) is a data line
# (``is_data``); the others, "odd" (comment, blank, BOM, leading space, non-ASCII), go through ``take``.
_ODD_LINE = re.compile(rb'\n(?=[^!"$-~])[^\n]*')
_ODD = rb'|(?=[^!"$-~\n])([^\n]*))'   # (each log's regex: its field, or an odd line that is not blank)
_LOG_FIELD = {
    "crawled": re.compile(rb'\n(?:[!"$-~][^\t\n]*\t[^\t\n]*\t[^\t\n]*\t([^\t\n]*)' + _ODD),   # bytes
    "rejected": re.compile(rb'\n(?:[!"$-~][^\t\n]*(\t[^\t\n]*)?' + _ODD),   # the reason, after its tab
    "links": re.compile(rb'\n(?:[!"$-~][^\t\n]*\t[^\t\n]*\t([^\t\n]*)' + _ODD),   # URLs seen again
}
_RECHECK_LINE = re.compile(rb"\trecheck\r?$", re.M)      # a recrawl's check of a crawled page
CENSUS_SAMPLE_BYTES = 1 << 20   # a queue.txt bigger than this is censused 1 URL in k (~17k URLs sampled)
CENSUS = "census.txt"   # the census as the last clean stop left it (a cache, like frontier.view)
CENSUS_HEADER = "# pending URL patterns of queue.txt at the last clean stop: count, pattern (a cache; safe to delete)\n"
MAX_SAMPLES = 20   # samples kept for the trap alarm (taken STATS_EVERY apart, as it expects)
MAX_PATTERNS = 20000   # distinct patterns tracked; the rest count as "(other)" so memory stays bounded


class _Tail:
    """Reads the lines appended to one file since the last call, 1 MiB at a time; starts over
    if the file was replaced (``replaced`` says so as soon as ``raw_chunks`` is called)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        self.ino: int | None = None
        self.replaced = False

    def raw_chunks(self) -> Iterator[bytes]:
        """The new lines as chunks of whole lines (for readers that work on them in C)."""
        return (data if end == len(data) else data[:end] for data, end in self.pieces())

    def pieces(self) -> Iterator[tuple[bytes, int]]:
        """The new lines as ``(data, end)``: ``data[:end]`` is whole lines, and the rest of
        ``data`` a line still being written (it waits for the next call), not copied out."""
        try:
            st = os.stat(self.path)
        except OSError:
            return iter(())
        self.replaced = self.ino is not None and st.st_ino != self.ino
        if self.replaced or st.st_size < self.pos:
            self.pos = 0
        self.ino = st.st_ino
        return self._chunks(st.st_size)

    def _chunks(self, size: int) -> Iterator[tuple[bytes, int]]:
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
                    yield data, cut


@dataclass
class Census:
    """URL patterns of the pending queue, kept up to date from queue.txt and the claim journal."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, url: str, n: int) -> None:
        self.add_pattern(pattern(url), n)

    def add_urls(self, urls: list[bytes], n: int) -> None:
        """``add`` of each URL (bytes) in turn: the patterns found once per shape (``url_patterns``),
        and each pattern's URLs counted at once when that ends as one by one would: always for
        ``n`` > 0; for ``n`` < 0 when no count would go below zero on the way (past it, a pattern
        no longer counted is "(other)" when MAX_PATTERNS are: the order matters)."""
        each = url_patterns(urls)
        tally = Counter(each)   # in the order the patterns first come
        if n < 0 and any(self.counts.get(p, 0) < -n * m for p, m in tally.items()):
            for p in each:
                self.add_pattern(p, n)
            return
        for p, m in tally.items():
            self.add_pattern(p, n * m)

    def add_pattern(self, p: str, n: int) -> None:
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
        self._history_at = -math.inf   # when the alarm's history last took a sample
        self.checked = 0   # lines of checks.txt: recrawl checks made (all runs)
        self.rechecks = 0   # pending rechecks: queue.txt lines of kind recheck not claimed
        self._recheck_flight: set[str] = set()   # URLs of rechecks claimed and not settled
        self._taken: list[tuple[int, int]] = []   # S records' stretches of queue.txt not read yet
        self.rechecks_refused = 0   # rechecks settled as refused (robots.txt): not new URLs
        self.rows: list[StatsRow] = []   # the rows this recorder wrote (this run's)
        self._tails = {name: _Tail(self.folder / name) for name in
                       ("crawled.txt", "rejected.txt", "duplicates.txt", "queue.txt", "claims.txt",
                        "links.txt", "checks.txt")}

    def catch_up(self) -> None:
        """Read the project files so far (a resumed queue of a million lines included): called at
        start-up, before the workers start, so the first sample does not take a core from them."""
        self._read()

    def _read(self) -> None:
        self._read_logs()
        self._read_queue()

    def _read_logs(self) -> None:
        for name in ("crawled", "rejected", "duplicates", "checks", "links"):
            for data, end in self._tails[name + ".txt"].pieces():
                self._take_lines(name, data, end)

    def _take_lines(self, name: str, data: bytes, end: int) -> None:
        """``take`` of the lines ``data[:end]`` (whole lines of the log ``name``), in C, in one
        pass: the parent does this while the workers crawl (links.txt alone is 1 KB a page),
        and line by line it cost 4 us a page. A chunk with a CR (lines cut there too, as
        ``splitlines`` cuts) and odd lines (maybe not data: ``_ODD``) go through ``take``."""
        if data.find(b"\r", 0, end) >= 0:
            self.take({name: [line.decode("utf-8", "replace") for line in data[:end].splitlines()]})
            return
        if name in ("duplicates", "checks"):
            odd = _findall(_ODD_LINE, data, end)
            if odd:
                self.take({name: [line[1:].decode("utf-8", "replace") for line in odd]})
            n = data.count(b"\n", 0, end) - len(odd)   # the other lines: data lines
            if name == "duplicates":
                self.duplicates += n
            else:
                self.checked += n
            return
        found = _findall(_LOG_FIELD[name], data, end)   # (field, odd line) of each line but blank ones
        if name == "rejected":
            for (field, odd), n in Counter(found).items():
                if odd:
                    self.take({name: [odd.decode("utf-8", "replace")] * n})
                else:
                    reason = _reason(field[1:].decode("utf-8", "replace") if field else None)
                    self.rejected[reason] = self.rejected.get(reason, 0) + n
            return
        odd = list(filter(None, map(itemgetter(1), found)))
        if odd:
            self.take({name: [line.decode("utf-8", "replace") for line in odd]})
        if name == "crawled":
            self.bytes += _number_sum(list(map(itemgetter(0), found)))
        else:
            self.seen_again += _number_sum(list(map(itemgetter(0), found)))

    def take(self, logs: Mapping[str, Iterable[str]]) -> None:
        """Count the new lines of the logs (by name: crawled, rejected, duplicates, checks,
        links), wherever they are kept: the files here, Redis for a crawl on ``--store``."""
        for line in logs.get("crawled", ()):
            if is_data(line):
                f = line.split("\t", 4)
                if len(f) > 3 and f[3].isdigit():
                    self.bytes += int(f[3])
        for line in logs.get("rejected", ()):
            if is_data(line):
                f = line.split("\t", 2)
                reason = _reason(f[1] if len(f) > 1 else None)
                self.rejected[reason] = self.rejected.get(reason, 0) + 1
        self.duplicates += sum(1 for line in logs.get("duplicates", ()) if is_data(line))
        self.checked += sum(1 for line in logs.get("checks", ()) if is_data(line))
        for line in logs.get("links", ()):
            f = line.split("\t", 3)
            if len(f) > 2 and f[2].isdigit():
                self.seen_again += int(f[2])

    def _read_queue(self) -> None:
        """The census of the pending URLs and the rechecks, from queue.txt and claims.txt."""
        queue, claims = self._tails["queue.txt"], self._tails["claims.txt"]
        if self._every is None:
            self._load_census()
        new_queue = queue.raw_chunks()   # bytes: a line is never decoded, a URL shape once (``url_patterns``)
        if queue.replaced or self._every is None:   # first look, or folded/recovered: start over
            self.census = Census()
            self.rechecks, self._recheck_flight, self._taken = 0, set(), []
            claims.pos, claims.ino = 0, None
            try:   # a big queue is sampled: 1 URL in k (the same URLs every time: by their CRC)
                self._every = max(1, os.path.getsize(queue.path) // CENSUS_SAMPLE_BYTES + 1)
            except OSError:
                self._every = 1
        k = self._every
        for chunk in new_queue:
            self._count(chunk, k, 1)
        for chunk in claims.raw_chunks():
            self._take_claims(chunk, k)
        if self._taken:
            self._take_back(queue, k)

    def _take_claims(self, chunk: bytes, k: int) -> None:
        """The records of claims.txt in ``chunk`` (whole lines): a URL claimed is no longer
        pending (the census counts it out), a recheck claimed is in flight until its D record,
        an S record's stretch of queue.txt was taken without a claim. The claims' URLs are found
        in C and counted out at once; the records are gone through one by one only when some
        need it (a recheck, an S record, a D record while rechecks are in flight, a lone CR)."""
        if b"\r" in chunk:   # records cut there too, as splitlines cuts them
            for rec in chunk.splitlines():
                self._take_record(rec, k, census=True)
            return
        links = list(map(bytes.strip, _findall(_CLAIM_URL, chunk, len(chunk))))
        if k > 1:
            links = [link for link in links if zlib.crc32(link) % k == 0]
        self.census.add_urls(links, -1)
        if (_RECHECK_LINE.search(chunk) or chunk.startswith(b"S\t") or b"\nS\t" in chunk
                or self._recheck_flight and (chunk.startswith(b"D\t") or b"\nD\t" in chunk)):
            for rec in chunk.splitlines():
                self._take_record(rec, k, census=False)

    def _take_record(self, rec: bytes, k: int, census: bool) -> None:
        """One record of claims.txt (``census`` False: its URL is counted out already)."""
        if rec.startswith(b"C\t"):
            parts = rec.split(b"\t", 6)
            if len(parts) > 5:
                link = parts[5].strip()
                if census and (k == 1 or zlib.crc32(link) % k == 0):
                    self.census.add(link.decode("utf-8", "replace"), -1)
                if _RECHECK_LINE.search(rec):
                    self.rechecks -= 1
                    self._recheck_flight.add(link.decode("utf-8", "replace"))
        elif rec.startswith(b"D\t") and self._recheck_flight:
            _, what, url = (rec.rstrip(b"\r\n").decode("utf-8", "replace").split("\t", 2) + ["", ""])[:3]
            if url in self._recheck_flight:
                self._recheck_flight.discard(url)
                self.rechecks_refused += what == "rejected"
        elif rec.startswith(b"S\t"):
            parts = rec.split(b"\t")
            if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
                self._taken.append((int(parts[1]), int(parts[2])))

    def _take_back(self, queue: _Tail, k: int) -> None:
        """Lines of queue.txt an S record took without a claim (a pasted stretch judged, its
        admitted URLs appended again in the crawler's shape; a line refused or blank) are no
        longer pending: count them out, as they were counted in (the same URLs, the same
        sample). A stretch the census has not read yet waits for the next look."""
        later = [(a, b) for a, b in self._taken if b > queue.pos]
        ready = sorted((a, b) for a, b in self._taken if b <= queue.pos)
        self._taken = later
        try:
            f = open(queue.path, "rb")
        except OSError:
            return
        with f:
            if os.fstat(f.fileno()).st_ino != queue.ino:
                return   # replaced since: the next look starts the census over
            i = 0
            while i < len(ready):   # stretches that follow each other are read at once
                start, end = ready[i]
                i += 1
                while i < len(ready) and ready[i][0] == end:
                    end = ready[i][1]
                    i += 1
                while start < end:
                    data = os.pread(f.fileno(), min(end - start, CENSUS_SAMPLE_BYTES), start)
                    if not data:
                        break
                    if start + len(data) < end:   # whole lines only (a stretch is whole lines)
                        cut = data.rfind(b"\n") + 1
                        data = data[:cut] if cut else os.pread(f.fileno(), end - start, start)
                    start += len(data)
                    self._count(data, k, -1)

    def _count(self, chunk: bytes, k: int, n: int) -> None:
        """Count the queue lines of ``chunk`` (whole lines) into the census (``n`` 1) or out of
        it (-1): the URL of each line found in C (this runs in the parent while the workers
        crawl, and a resumed queue of a million lines used to take a core for over a second),
        1 in ``k`` of them by their CRC, so the same URLs are counted in and out."""
        self.rechecks += n * len(_RECHECK_LINE.findall(chunk))
        links = _findall(_QUEUE_URL, chunk, len(chunk))
        if k > 1:
            links = [link for link, crc in zip(links, map(zlib.crc32, links)) if not crc % k]
        self.census.add_urls(list(map(bytes.strip, links)), n)

    def known_again(self) -> int:
        """Rechecks counted among pending, in flight or refused although their URL is crawled."""
        return max(0, self.rechecks) + len(self._recheck_flight) + self.rechecks_refused

    def save_census(self) -> None:
        """After the fold at a clean stop: save the census of the new queue.txt (its pending
        lines are the ones the census counts), so the next run need not read the queue for it."""

        me = identity(self.folder / "queue.txt")
        if me is None or self._every is None:
            return
        rows = "".join(f"{n}\t{p}\n" for p, n in sorted(self.census.counts.items(), key=lambda kv: (-kv[1], kv[0])))
        try:
            atomic_write(self.folder / CENSUS, f"{CENSUS_HEADER}queue\t{' '.join(map(str, me))}\n"
                                               f"every\t{self._every}\nrechecks\t{max(0, self.rechecks)}\n{rows}")
        except OSError:
            pass   # a cache: the next start takes the census from queue.txt

    def _load_census(self) -> None:
        """The census saved at the last clean stop, if queue.txt is exactly as it left it."""
        try:
            lines = (self.folder / CENSUS).read_text(encoding="utf-8").splitlines()
            me = identity(self.folder / "queue.txt")
            if me is None or lines[1] != f"queue\t{' '.join(map(str, me))}" or not lines[2].startswith("every\t") \
                    or not lines[3].startswith("rechecks\t"):
                return
            every, rechecks = int(lines[2][6:]), int(lines[3][9:])
            counts = {}
            for line in lines[4:]:
                n, _, p = line.partition("\t")
                counts[p] = int(n)
        except (OSError, IndexError, ValueError):
            return
        if every < 1 or rechecks < 0 or any(n <= 0 for n in counts.values()):
            return
        self.census, self._every, self.rechecks = Census(counts), every, rechecks
        queue, claims = self._tails["queue.txt"], self._tails["claims.txt"]
        queue.pos, queue.ino = me[1], me[0]
        claims.pos, claims.ino = 0, None

    def sample(self, pending: int, in_flight: int, crawled: int, hops: int, failed: int,
               rejected_claims: int = 0, when: float | None = None, census: bool = True) -> str:
        """Append one line to stats.txt and return it; also feeds the trap alarm. ``census``
        False: the pending URLs' patterns are left for the next sample (a pasted queue.txt of
        a million lines is not read before the first fetch)."""
        import time

        self._read() if census else self._read_logs()
        now = time.time() if when is None else when
        top = self.census.top(1)
        top_pattern, top_pending = top[0] if top else ("-", 0)
        top_pending *= self._every or 1   # an estimate when the census samples
        completed = max(0, crawled + hops + failed + rejected_claims - self.rechecks_refused)
        discovered = max(0, pending + in_flight + completed - max(0, self.rechecks) - len(self._recheck_flight))
        rejected = clean(";".join(f"{k}={v}" for k, v in sorted(self.rejected.items())))
        line = (f"{utc_stamp(now)}\t{now:.3f}\t{pending}\t{in_flight}\t{crawled}\t{failed}\t"
                f"{discovered}\t{self.duplicates}\t{self.bytes}\t{clean(top_pattern)}\t{top_pending}\t{rejected}\t"
                f"{self.seen_again}\t{self.checked}\t{completed}\n")
        # A comment before a run's first row: runs that follow each other within seconds (a
        # crawl, then a recrawl) stay apart (readers skip comments).
        self._append((RUN_MARK + f"\t{utc_stamp(now)}\n" if not self.rows else "") + line)
        row = parse_stats_line(line)
        if row is not None:
            self.rows.append(row)
        if now - self._history_at >= STATS_EVERY * 0.9:   # the alarm counts samples STATS_EVERY apart
            self._history_at = now
            self.history = (self.history + [Sample(pending, top_pattern, top_pending)])[-MAX_SAMPLES:]
        return line

    def _append(self, text: str) -> None:
        path = self.folder / STATS
        if not path.exists():
            append_text(path, STATS_HEADER)
        append_text(path, text)

    def alarm(self) -> str | None:
        return trap_alarm(self.history)


def _findall(rx: re.Pattern[bytes], data: bytes, end: int) -> list:  # type: ignore[type-arg]
    """``rx.findall`` over the whole lines ``data[:end]``, ``rx`` finding each line by the newline
    before it: the first line is given one in front."""
    first = data.find(b"\n", 0, end) + 1
    if not first:
        return []
    return rx.findall(b"\n" + data[:first]) + rx.findall(data, first - 1, end)


def _reason(field: str | None) -> str:
    """The reason a rejected.txt line counts under (its second field; None: it has none)."""
    reason = field.strip() if field is not None else "-"
    if reason.startswith("bad queue line") or ".txt:" in reason:
        return "bad line"
    if reason.startswith("max-links:"):
        return "max-links"
    return reason


def _number_sum(fields: list[bytes]) -> int:
    """The sum of the fields that are numbers, as ``take`` reads them (``str.isdigit`` of the field
    decoded: ASCII digits in C, a field of other bytes decoded, so other digits count the same)."""
    total = sum(map(int, filter(bytes.isdigit, fields)))
    if not b"".join(fields).isascii():
        total += sum(int(s) for s in (x.decode("utf-8", "replace") for x in fields if not x.isascii()) if s.isdigit())
    return total


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
    checked: int = 0
    completed: int = 0    # 0 in files written before the column
    first: bool = False   # the first row of a run (after a RUN_MARK line)

    @property
    def fetched(self) -> int:
        """Pages fetched for the first time (crawled or failed; redirect hops aside)."""
        return self.crawled + self.failed

    @property
    def done(self) -> int:
        """URLs completed: pages fetched, redirect hops, URLs refused when claimed (an older file,
        without the column: the pages fetched)."""
        return max(self.completed, self.fetched)


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
    checked, completed = (int(f[i]) if len(f) > i and f[i].strip().isdigit() else 0 for i in (13, 14))   # older files: none
    return StatsRow(unix, pending, in_flight, crawled, failed, discovered, duplicates, size,
                    (f[9].strip() or "-") if len(f) > 9 else "-", top_pending, rejected, seen_again, checked,
                    completed)


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
    out: list[StatsRow] = []
    mark = False
    for line in lines:
        if line.startswith(RUN_MARK):
            mark = True
            continue
        row = parse_stats_line(line)
        if row is not None:
            out.append(replace(row, first=True) if mark else row)
            mark = False
    return out


def sample_every(elapsed: float) -> float:
    """Seconds between two samples, ``elapsed`` seconds into a run: every 0.25 s for the first
    10 s, so that a crawl of a few seconds still gives its charts a curve, then every 2 s."""
    return FAST_EVERY if elapsed < FAST_FOR else STATS_EVERY


def runs(rows: Sequence[StatsRow]) -> list[list[StatsRow]]:
    """The rows cut into runs of the crawler: a gap longer than ``RUN_GAP`` is a pause between two
    (a Ctrl-C and a resume, a kill, a recrawl a week later), and is no crawl time."""
    out: list[list[StatsRow]] = []
    for row in rows:
        if not out or row.first or not 0 <= row.unix - out[-1][-1].unix <= RUN_GAP:
            out.append([])
        out[-1].append(row)
    return out


def _intervals(rows: Sequence[StatsRow], seconds: float | None = None) -> list[tuple[StatsRow, StatsRow]]:
    """Consecutive rows of one run (pairs across a pause are left out); with ``seconds``, only
    the last ``seconds`` of crawl time (walking back over pauses between runs)."""
    pairs = [(a, b) for run in runs(rows) for a, b in zip(run, run[1:])]
    if seconds is None:
        return pairs
    out: list[tuple[StatsRow, StatsRow]] = []
    for a, b in reversed(pairs):
        if seconds <= 0:
            break
        out.append((a, b))
        seconds -= b.unix - a.unix
    return out[::-1]


def crawl_seconds(rows: Sequence[StatsRow]) -> float:
    """Crawl time covered by the rows: the runs' lengths, pauses between runs left out."""
    return sum(b.unix - a.unix for a, b in _intervals(rows))


def pages_per_second(rows: Sequence[StatsRow]) -> float | None:
    """The rate of a run (or of every run in ``rows``): pages fetched (crawled or failed) and pages
    checked by a recrawl, per second of crawl time, both from the same rows. The run's summary
    line and the report's headline both say this number (None: no crawl time in the rows)."""
    seconds = pages = 0.0
    for a, b in _intervals(rows):
        seconds += b.unix - a.unix
        pages += (b.fetched - a.fetched) + max(0, b.checked - a.checked)
    return pages / seconds if seconds > 0 else None


def discovery_ratio(rows: Sequence[StatsRow], seconds: float | None = None) -> float | None:
    """New URLs per URL fetched: URLs the frontier took in ÷ URLs completed (pages crawled or
    failed, redirect hops, URLs robots.txt refused when claimed), over the crawl time of ``rows``
    (pauses between runs left out), or over its last ``seconds`` only. None when no URL was
    completed in that time.

    1 means the frontier holds steady (each URL fetched brought one new URL in place of itself);
    above 1 it grows, below 1 it shrinks, and near 0 the crawl is running out of new pages. A
    window longer than the crawl is the whole crawl. Over a whole crawl the ratio is
    1 + (growth of the frontier ÷ URLs completed): a finished crawl ends just below 1 (every URL
    fetched was once a new URL, and the queue went from the seeds to empty), so "overall" is
    worth reading while the crawl runs, "recent" always. A recrawl's checks are not counted:
    their URLs were neither new nor fetched for the first time.
    """
    new = done = 0
    for a, b in _intervals(rows, seconds):
        new += b.discovered - a.discovered
        done += b.done - a.done
    return max(0.0, new / done) if done > 0 else None


def alarm_from_rows(rows: Sequence[StatsRow]) -> str | None:
    """The trap alarm over rows as the crawl's parent saw them: samples ``STATS_EVERY`` apart (the
    first seconds of a run are sampled faster, and the alarm counts samples)."""
    spaced: list[StatsRow] = []
    for r in reversed(rows):
        if len(spaced) >= MAX_SAMPLES:
            break
        if not spaced or spaced[-1].unix - r.unix >= STATS_EVERY * 0.9:
            spaced.append(r)
    return trap_alarm([Sample(r.pending, r.top_pattern, r.top_pending) for r in reversed(spaced)])


@dataclass
class Round:
    """The recrawl checks one run made (``recrawl``, a ``--discover`` run), from checks.txt."""

    start: float
    end: float
    results: dict[str, int] = field(default_factory=dict)   # changed, unchanged, removed, failed
    new_pages: int = 0   # pages fetched for the first time in the run (new links of changed pages)

    @property
    def checked(self) -> int:
        return sum(self.results.values())


def recrawl_rounds(folder: Path, rows: Sequence[StatsRow]) -> list[Round]:
    """One ``Round`` per run that made checks, oldest first. A check belongs to the run whose rows
    span its time (checks.txt says the second: a run spans from the second of its first row); checks
    outside every run (stats.txt deleted or cut) make one more round of their own."""
    from .records import data_fields
    from .recrawl import CHECKS, parse_stamp

    spans = [(math.floor(run[0].unix), run[-1].unix + 1, run) for run in runs(sorted(rows, key=lambda r: r.unix))]
    starts = [lo for lo, _, _ in spans]
    rounds: dict[int, Round] = {}
    for f in data_fields(Path(folder) / CHECKS):
        when = parse_stamp(f[3]) if len(f) > 3 else None
        if when is None or f[2] not in ("changed", "unchanged", "removed", "failed"):
            continue
        i = bisect.bisect_right(starts, when) - 1
        if i >= 0 and when >= spans[i][1]:
            i = -1
        r = rounds.get(i)
        if r is None:
            lo, hi, run = spans[i] if i >= 0 else (when, when, [])
            r = rounds[i] = Round(float(lo), float(hi), new_pages=run[-1].fetched - run[0].fetched if run else 0)
        if i < 0:
            r.start, r.end = min(r.start, when), max(r.end, when)
        r.results[f[2]] = r.results.get(f[2], 0) + 1
    return sorted(rounds.values(), key=lambda r: r.start)
