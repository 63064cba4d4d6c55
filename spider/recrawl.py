"""Keeping a crawl fresh: which crawled pages are due for a check, and how often to check each.

A page is checked with a conditional request (``If-None-Match`` / ``If-Modified-Since`` from the
ETag / Last-Modified it was served with); ``304`` means unchanged and costs no parse. Each page
has an interval (its volatility tier): unchanged at a check doubles it, changed halves it, within
``--recrawl-min`` .. ``--recrawl-max``. A sitemap ``lastmod`` later than the last check makes the
page due at once (a lastmod in the future counts as the time the sitemap was read, so it makes the
page due once, not at every recrawl). ``404``/``410`` marks a page removed.

Files (plain text, TAB-separated; README "Keeping a crawl fresh"):

- ``schedule.txt``: ``URL etag last_modified interval_s due_unix checks changes checked_at
  content_hash``; one line per crawl or check, the last line of a URL wins; compacted (rewritten
  atomically, one line per URL) at the end of a run.
- ``checks.txt``: ``URL status result checked_at content_hash``, one line per check (append-only);
  a check that fetched a new version adds ``content_type bytes canonical outlinks title`` (``check_line``).
- ``removed.txt``: ``URL date reason`` (``404``, ``410``).

The policy is pure (``next_interval``, ``is_due``, ``verdict``); reading the files is at the end.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator

from .records import MAX_TITLE, clean, data_fields, first_field, is_data, is_redirect_hop, utc_stamp
from .frontier.seen import SeenSet
from .safefs import append_text, atomic_write

SCHEDULE, CHECKS, REMOVED, LASTMOD = "schedule.txt", "checks.txt", "removed.txt", "lastmod.txt"
# lastmod.txt's mtime is when its lines were read, at the latest (``read_lastmod``); where the
# lines are kept in Redis (a crawl on --store), a comment line ``LASTMOD_READ UNIX`` says it.
LASTMOD_READ = "# sitemaps read at"
SCHEDULE_HEADER = ("# url\tetag\tlast_modified\tinterval_s\tdue_unix\tchecks\tchanges\tchecked_at"
                   "\tcontent_hash\n")
CHECKS_HEADER = ("# url\tstatus\tresult\tchecked_at\tcontent_hash"
                 "\t[content_type\tbytes\tcanonical\toutlinks\ttitle]\n")
BODY_FIELDS = ("content_type", "bytes", "canonical", "outlinks", "title")   # checks.txt's optional tail
REMOVED_HEADER = "# url\tdate\treason\n"
INITIAL_INTERVAL = 86400.0      # a page just crawled is checked again after a day ...
MIN_INTERVAL = 3600.0           # ... never more often than hourly ...
MAX_INTERVAL = 30 * 86400.0     # ... and at least every 30 days
GONE = (404, 410)


@dataclass(frozen=True)
class Page:
    """A crawled page's recrawl state: one line of schedule.txt."""

    url: str
    etag: str = "-"
    last_modified: str = "-"
    interval: float = INITIAL_INTERVAL
    due: float = 0.0
    checks: int = 0
    changes: int = 0
    checked_at: float = 0.0
    content_hash: str = "-"

    def line(self) -> str:
        return schedule_line(self.url, self.etag, self.last_modified, self.interval, self.due, self.checks,
                             self.changes, self.checked_at, self.content_hash)

    def conditional_headers(self) -> dict[str, str]:
        """What to send so that an unchanged page answers 304 (RFC 9110 13.1.2, 13.1.3)."""
        headers = {}
        if self.etag != "-":
            headers["If-None-Match"] = self.etag
        if self.last_modified != "-":
            headers["If-Modified-Since"] = self.last_modified
        return headers


def clamp(interval: float, lo: float, hi: float) -> float:
    return max(lo, min(hi, interval))


def next_interval(interval: float, changed: bool, lo: float = MIN_INTERVAL, hi: float = MAX_INTERVAL) -> float:
    """Multiplicative back-off: an unchanged page is checked half as often, a changed one twice as often."""
    return clamp(interval / 2 if changed else interval * 2, lo, hi)


def is_due(page: Page, now: float, lastmod: float | None = None) -> bool:
    """Due when its time has come, or a sitemap says it changed after the last check."""
    if math.isinf(page.due):
        return False
    return page.due <= now or (lastmod is not None and lastmod > page.checked_at)


def verdict(status: int | None, old_hash: str, new_hash: str | None) -> str:
    """What a check found: changed, unchanged, removed or failed."""
    if status in GONE:
        return "removed"
    if status == 304:
        return "unchanged"
    if status is None or not 200 <= status < 300:
        return "failed"
    if new_hash is None or old_hash == "-":
        return "changed"
    return "unchanged" if new_hash == old_hash else "changed"


def after_fetch(url: str, now: float, etag: str | None, last_modified: str | None,
                content_hash: str | None, lo: float = MIN_INTERVAL, hi: float = MAX_INTERVAL) -> Page:
    """The schedule of a page just crawled for the first time."""
    interval = clamp(INITIAL_INTERVAL, lo, hi)
    return Page(url, etag or "-", last_modified or "-", interval, now + interval, 0, 0, now, content_hash or "-")


def first_line(url: str, now: float, etag: str | None, last_modified: str | None,
               content_hash: str | None, lo: float = MIN_INTERVAL, hi: float = MAX_INTERVAL) -> str:
    """``after_fetch(...).line()``, without making the ``Page`` (a frozen dataclass: a third of
    the cost): the schedule.txt line of each page crawled, written once a page."""
    interval = clamp(INITIAL_INTERVAL, lo, hi)
    return schedule_line(url, etag or "-", last_modified or "-", interval, now + interval, 0, 0, now,
                         content_hash or "-")


def schedule_line(url: str, etag: str, last_modified: str, interval: float, due: float, checks: int,
                  changes: int, checked_at: float, content_hash: str) -> str:
    """A page's line of schedule.txt (``Page``'s fields, in their order)."""
    shown_due = "-" if math.isinf(due) else f"{due:.0f}"
    return (f"{url}\t{clean(etag)}\t{clean(last_modified)}\t{interval:.0f}\t{shown_due}\t"
            f"{checks}\t{changes}\t{utc_stamp(checked_at)}\t{clean(content_hash)}\n")


def after_check(page: Page, now: float, result: str, etag: str | None, last_modified: str | None,
                content_hash: str | None, lo: float = MIN_INTERVAL, hi: float = MAX_INTERVAL) -> Page:
    """The schedule after a check: new validators, new interval, next due time."""
    if result == "removed":
        return replace(page, due=math.inf, checks=page.checks + 1, checked_at=now)
    if result == "failed":   # try again at the same pace
        return replace(page, due=now + page.interval, checks=page.checks + 1, checked_at=now)
    changed = result == "changed"
    interval = next_interval(page.interval, changed, lo, hi)
    return Page(page.url, etag or page.etag, last_modified or page.last_modified, interval, now + interval,
                page.checks + 1, page.changes + changed, now,
                content_hash if content_hash else page.content_hash)


def check_line(url: str, status: int | None, result: str, now: float, content_hash: str | None,
                body: dict | None = None) -> str:
    """checks.txt: ``URL status result checked_at content_hash``. ``body`` (the fetched version's
    ``BODY_FIELDS``, as crawled.txt has them) adds five fields, so that after a change export shows
    the new version's size, links and title rather than the first crawl's."""
    line = f"{url}\t{'-' if status is None else status}\t{result}\t{utc_stamp(now)}\t{clean(content_hash or '-')}"
    if body is not None:
        values = [body.get(k) for k in BODY_FIELDS]
        values[-1] = (values[-1] or "-")[:MAX_TITLE]
        line += "".join(f"\t{'-' if v is None else clean(v)}" for v in values)
    return line + "\n"


# -- reading the files ------------------------------------------------------------------------------

def parse_schedule_line(f: list[str]) -> Page | None:
    if len(f) < 9:
        return None
    try:
        due = math.inf if f[4] == "-" else float(f[4])
        return Page(f[0], f[1], f[2], float(f[3]), due, int(f[5]), int(f[6]), parse_stamp(f[7]) or 0.0, f[8])
    except ValueError:
        return None


def read_schedule(folder: Path) -> dict[str, Page]:
    """schedule.txt as url -> latest Page (lines that do not parse are skipped)."""
    return _read_schedule(folder)[0]


def _read_schedule(folder: Path) -> tuple[dict[str, Page], int]:
    """``read_schedule``, and how many data lines the file has."""
    return schedule_of(data_fields(Path(folder) / SCHEDULE))


def schedule_of(rows: Iterable[list[str]]) -> tuple[dict[str, Page], int]:
    """schedule.txt's split data lines (from the file, or from Redis for a crawl on ``--store``)
    as url -> latest Page, and how many lines there were."""
    out: dict[str, Page] = {}
    lines = 0
    for f in rows:
        lines += 1
        page = parse_schedule_line(f)
        if page is not None:
            out[page.url] = page
    return out, lines


_OUR_STAMP = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z")


def parse_stamp(text: str) -> float | None:
    """``2026-11-30T10:50:08Z`` (ours), or a sitemap's W3C datetime / an HTTP date, as Unix time."""
    text = text.strip()
    ours = _OUR_STAMP.fullmatch(text)
    if ours:   # the common case, ~10x faster than strptime (schedule.txt is read at every stop)
        try:
            y, mo, d, h, mi, sec = map(int, ours.groups())
            return datetime(y, mo, d, h, mi, sec, tzinfo=timezone.utc).timestamp()
        except ValueError:
            pass   # a leap second or an impossible date: strptime decides
    import calendar   # (imported here, as email.utils below: the common case needs neither)

    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d"):
        try:
            return float(calendar.timegm(time.strptime(text, fmt)))
        except ValueError:
            pass
    try:   # W3C datetime with an offset: 2026-11-30T10:50:08+01:00
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        return parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


def cap_lastmod(lastmod: float, read_at: float) -> float:
    """A lastmod later than the moment its sitemap was read cannot be a real modification time
    (``2099-01-01`` would make the page due at every recrawl): it counts as that moment."""
    return min(lastmod, read_at)


def read_lastmod(folder: Path, now: float | None = None) -> dict[str, float]:
    """lastmod.txt (from sitemaps) as url -> Unix time, each capped at when it was read; the last
    line of a URL wins. Every line was read from its sitemap before the file was last written, so
    the file's mtime (in whole seconds, like the times in the files; and no later than ``now``) is
    when it was read at the latest: a hand-written line is capped the same way."""
    path = Path(folder) / LASTMOD
    try:
        read_at = float(math.floor(path.stat().st_mtime))
    except OSError:
        return {}
    if now is not None:
        read_at = min(read_at, now)
    out: dict[str, float] = {}
    for f in data_fields(path):
        if len(f) > 1:
            t = parse_stamp(f[1])
            if t is not None:
                out[f[0]] = cap_lastmod(t, read_at)
    return out


def lastmod_read_at(lines: Iterable[str]) -> float | None:
    """The time the last ``LASTMOD_READ`` comment line of the lastmod log says, if any."""
    when = None
    for line in lines:
        if line.startswith(LASTMOD_READ + " "):
            try:
                when = float(line.split()[-1])
            except ValueError:
                pass
    return when


def listed_urls(folder: Path) -> SeenSet:
    """Every URL a sitemap lists (lastmod.txt), whatever its lastmod (``-``, a date that does not
    parse): the site's own list of its pages, so none of them is ``inactive`` for want of links."""
    out = SeenSet()
    for f in data_fields(Path(folder) / LASTMOD):
        if f[0].strip():
            out.add(f[0].strip())
    return out


def removed_urls(folder: Path) -> dict[str, tuple[str, str]]:
    """removed.txt as url -> (date, reason)."""
    return {f[0]: (f[1], f[2]) for f in data_fields(Path(folder) / REMOVED) if len(f) > 2}


def due_pages(folder: Path, now: float, everything: bool = False,
              checked_since: float | None = None) -> list[tuple[str, int]]:
    """(url, depth) of the crawled pages to check now: all of them with ``everything``, else the
    due ones. Redirect hops, pages removed, and pages that never answered 2xx are not checked;
    nor, with ``checked_since``, pages checked (or first crawled) since then: the part of a
    round of checks that a killed run had done."""
    lastmod = read_lastmod(folder, now)
    out: list[tuple[str, int]] = []
    for page, depth in _checkable(Path(folder)):
        if checked_since is not None and page.checked_at >= checked_since:
            continue
        if everything or is_due(page, now, lastmod.get(page.url)):
            out.append((page.url, depth))
    return out


def next_due(folder: Path) -> float | None:
    """When the first crawled page that ``recrawl`` would check becomes due (None: no page is
    checkable: nothing crawled, or every page removed)."""
    return min((page.due for page, _ in _checkable(Path(folder)) if not math.isinf(page.due)), default=None)


def nothing_due(folder: Path, now: float, name: str) -> str:
    """What ``recrawl`` says when no page is due: when one will be, and how to check them all now."""
    when = next_due(folder)
    if when is None:
        return "recrawl: no crawled page to check"
    return (f"recrawl: nothing is due; the next page is due at {utc_stamp(when)} (in {time_left(when - now)}); "
            f"`recrawl {name} --all` checks every page now")


def time_left(seconds: float) -> str:
    """A wait in the unit a reader wants: minutes under an hour, hours under two days (a page
    crawled a moment ago is due "in 24.0 hours", whether its stamp rounded up or down), then days."""
    left = max(0.0, seconds)
    if left >= 2 * 86400:
        return f"{left / 86400:.1f} days"
    return f"{left / 3600:.1f} hours" if left >= 3600 else f"{left / 60:.0f} minutes"


def _checkable(folder: Path) -> Iterator[tuple[Page, int]]:
    """(schedule, depth) of each crawled page a recrawl may check: not a redirect hop, not removed,
    answered 2xx; its first line in crawled.txt."""
    schedule, gone = read_schedule(folder), removed_urls(folder)
    seen: set[str] = set()
    try:
        f = open(folder / "crawled.txt", encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    with f:
        for line in f:
            if not is_data(line) or is_redirect_hop(line):
                continue
            fields = line.rstrip("\n").split("\t")
            url = first_field(line)
            if url in seen or url in gone or len(fields) < 6 or not fields[1].startswith("2"):
                continue
            seen.add(url)
            page = schedule.get(url) or Page(url, due=(parse_stamp(fields[5]) or 0.0) + INITIAL_INTERVAL,
                                             checked_at=parse_stamp(fields[5]) or 0.0)
            try:
                depth = int(fields[4])
            except ValueError:
                depth = 0
            yield page, depth


ROUND = "round.txt"


def open_round(folder: Path, now: float) -> float:
    """The start of the current round of checks of every page (``recrawl --all``, a discovery
    run): the one a killed run left open, or a new one from ``now``. A rerun of the same command
    then checks only what the round has not checked yet."""
    path = Path(folder) / ROUND
    try:
        return float(path.read_text(encoding="utf-8").split("\n")[1].split()[1])
    except (OSError, IndexError, ValueError):
        # Checks are recorded to the second, so a round begins on a whole second, and no check
        # is made before it: every check of it is then recorded at or after its start, every
        # earlier one before (a check in the same second as the start could be either).
        start = math.floor(now) + 1
        atomic_write(path, "# a round of checks of every page that has not finished (recrawl --all, --discover)\n"
                           f"started {start:.3f}\n")
        time.sleep(max(0.0, start - time.time()))
        return float(start)


def close_round(folder: Path) -> None:
    """The round finished: the next ``recrawl --all`` checks every page again."""
    try:
        (Path(folder) / ROUND).unlink()
    except FileNotFoundError:
        pass


def compact_schedule(folder: Path) -> None:
    """Rewrite schedule.txt with one line per URL (its latest), atomically."""

    path = Path(folder) / SCHEDULE
    if not path.exists():
        return
    if _compact(data_fields(path)):
        return   # one good line per URL already (a fresh crawl's): nothing to parse or rewrite
    pages, lines = _read_schedule(folder)
    if len(pages) == lines:
        return   # one line per URL already: nothing to rewrite
    atomic_write(path, SCHEDULE_HEADER + "".join(p.line() for p in pages.values()))


def _compact(rows: Iterable[list[str]]) -> bool:
    """Would ``schedule_of`` keep every line (each parses, no URL twice)? Checked without making
    the pages (their stamps' parse was ~8 ms at the end of a 2,000-page crawl); False when unsure."""
    urls: set[str] = set()
    for f in rows:
        if len(f) < 9 or f[0] in urls:
            return False
        try:
            float(f[3]), int(f[5]), int(f[6])
            if f[4] != "-":
                float(f[4])
        except ValueError:
            return False
        urls.add(f[0])
    return True


# -- inactive pages: no longer linked from anywhere ------------------------------------------------

LINKS, UNLINKED = "links.txt", "unlinked.txt"
INACTIVE_AFTER = 3   # consecutive recrawls without a link to a page mark it inactive


def linked_urls(folder: Path, live: set[str]) -> SeenSet:
    """Every URL linked from the latest version of a live page (links.txt: ``page<TAB>new<TAB>known<TAB>url url ...``,
    one line per parse; the last line of a page wins). Two passes, so memory stays small."""
    path = Path(folder) / LINKS
    latest: dict[str, int] = {}
    try:
        with open(path, "rb") as f:
            off = 0
            for raw in f:
                page = raw.split(b"\t", 1)[0].decode("utf-8", "replace")
                if page in live and raw.endswith(b"\n"):
                    latest[page] = off
                off += len(raw)
    except FileNotFoundError:
        pass
    out = SeenSet()
    if latest:
        wanted = set(latest.values())
        with open(path, "rb") as f:
            off = 0
            for raw in f:
                if off in wanted:
                    for url in raw.rstrip(b"\n").split(b"\t", 3)[-1].split():
                        out.add(url.decode("utf-8", "replace"))
                off += len(raw)
    return out


def mark_inactive(folder: Path, seeds: tuple[str, ...], now: float) -> list[str]:
    """After a completed recrawl: a crawled page that no live page links to (seeds and sitemap
    entries aside) has one more miss in unlinked.txt; at INACTIVE_AFTER misses in a row it is
    recorded in removed.txt as ``inactive``. Returns the URLs marked now."""

    folder = Path(folder)
    gone, listed = removed_urls(folder), listed_urls(folder)
    live: set[str] = set()
    try:
        with open(folder / "crawled.txt", encoding="utf-8", errors="replace") as f:
            for line in f:
                if is_data(line) and not is_redirect_hop(line):
                    url = first_field(line)
                    if url not in gone:
                        live.add(url)
    except FileNotFoundError:
        return []
    linked = linked_urls(folder, live)
    misses: dict[str, int] = {}
    for f_ in data_fields(folder / UNLINKED):
        if len(f_) > 1 and f_[1].isdigit():
            misses[f_[0]] = int(f_[1])
    marked: list[str] = []
    counts: dict[str, int] = {}
    for url in live:
        if url in seeds or url in listed or url in linked:
            continue
        n = misses.get(url, 0) + 1
        if n >= INACTIVE_AFTER:
            marked.append(url)
        else:
            counts[url] = n
    atomic_write(folder / UNLINKED, "# url\tconsecutive_recrawls_unlinked\n"
                 + "".join(f"{u}\t{n}\n" for u, n in sorted(counts.items())))
    if marked:
        append_text(folder / REMOVED, "".join(f"{u}\t{utc_stamp(now)}\tinactive\n" for u in sorted(marked)))
    return marked
