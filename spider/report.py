"""``report NAME``: one self-contained HTML page about a project, charts drawn as inline SVG.

The page needs no network, no JavaScript, no external font or stylesheet: it can be mailed,
archived or printed. ``load`` reads the project files into a ``ReportData`` (tolerating missing
files and garbage lines: a report must never fail because a file was edited by hand or torn by a
kill), ``render`` turns that data into HTML (pure, so tests build the data by hand), and
``write_report`` does both and writes the page atomically.

Every piece of text that comes from a file (URLs, reasons, patterns, hosts) is attacker-controlled
(a server chose it), so it goes through ``_esc`` before it reaches the page.
"""

from __future__ import annotations

import calendar
import heapq
import html
import math
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence
from urllib.parse import urlsplit

from .census import top_patterns
from .broken import Broken, broken_links
from .records import data_fields, refusal_key, refusal_rule
from .stats import (RUN_GAP, Round, StatsRow, alarm_from_rows, crawl_seconds, discovery_ratio,
                    pages_per_second, read_stats, recrawl_rounds, runs)
from .frontier.files import FileStore
from .safefs import atomic_write
from .words import plural

STATS = "stats.txt"
DUPLICATES = "duplicates.txt"
SETTINGS = "settings.txt"
QUEUE, CRAWLED, FAILED, REJECTED = "queue.txt", "crawled.txt", "failed.txt", "rejected.txt"

# A run samples at least every STATS_EVERY seconds (and once at its end): a longer gap between
# two samples is a pause between runs (a Ctrl-C and a resume 20 s later was counted as crawl time).
GAP = RUN_GAP
FETCH_LOG = "fetch.log"
TOP_PAGES = 10      # rows in the largest / slowest pages tables
TOP_FAILURES = 100  # rows in the failures table (the rest are counted)
BROKEN_PAGES = 3    # linking pages named per broken link in the report
BUCKETS = 120       # rate charts average over at most this many time slices
MAX_POINTS = 600    # the frontier line is thinned to at most this many points
TOP_N = 12          # bars in the pattern / reason charts
TOP_HOSTS = 20      # hosts in the status chart and table
TOP_CODES = 12      # status-code columns in the table (the rest are summed as "other")

# One colour per meaning, used everywhere on the page.
BLUE, GREEN, ORANGE, RED, GREY, PURPLE, TEAL = ("#2563eb", "#16a34a", "#d97706", "#dc2626",
                                              "#6b7280", "#7c3aed", "#0e7490")
# 304 has a colour of its own: after a recrawl it is a page found unchanged, not a redirect.
CLASS_COLOURS = {"2xx": GREEN, "304": PURPLE, "3xx": BLUE, "4xx": ORANGE, "5xx": RED, "1xx": TEAL, "error": GREY}


# ----------------------------------------------------------------------------- data


@dataclass
class ReportData:
    """Everything the page shows, already counted; every field has an empty default."""

    name: str = ""
    generated: float = 0.0
    seeds: list[str] = field(default_factory=list)
    stats: list[StatsRow] = field(default_factory=list)
    crawled: int = 0            # pages: crawled.txt lines that are not redirect hops
    redirects: int = 0          # redirect hops (3xx other than 304)
    failed: int = 0
    pending: int = 0
    duplicates: int = 0         # duplicates.txt lines of kind "duplicate"
    variants: int = 0           # ... of kind "variant" (canonical points elsewhere)
    bytes: int = 0
    first_fetch: Optional[float] = None
    last_fetch: Optional[float] = None
    status_by_host: dict[str, Counter[str]] = field(default_factory=dict)
    failure_reasons: Counter[str] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    patterns: list[tuple[str, int]] = field(default_factory=list)
    content_types: Counter[str] = field(default_factory=Counter)   # pages by media type
    depths: Counter[int] = field(default_factory=Counter)          # pages and failures by depth
    largest: list[tuple[str, int]] = field(default_factory=list)   # (URL, bytes) from fetch.log
    slowest: list[tuple[str, int]] = field(default_factory=list)   # (URL, ms) from fetch.log
    failures: list[tuple[str, str, str, str]] = field(default_factory=list)   # URL, reason, depth, when
    rounds: list[Round] = field(default_factory=list)              # recrawl checks, one per run
    broken: list[Broken] = field(default_factory=list)             # failed URLs, most linked first


def _int(text: str, default: int = 0) -> int:
    try:
        return int(text)
    except ValueError:
        return default


def _is_url(text: str) -> bool:
    return text[:8].lower().startswith(("http://", "https://"))


def host_of(url: str) -> str:
    """The host (with port, without user info) of a URL, lower-cased; '' when it has none."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return ""
    return netloc.rpartition("@")[2].lower()


def _parse_stamp(text: str) -> Optional[float]:
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except (ValueError, OverflowError):
        return None


def _read_crawled(folder: Path, data: ReportData) -> None:
    for f in data_fields(folder / CRAWLED):
        if len(f) < 2 or not _is_url(f[0]) or not re.fullmatch(r"[1-9][0-9]{2}", f[1]):
            continue
        status = f[1]
        if status.startswith("3") and status != "304":
            data.redirects += 1
        else:
            data.crawled += 1
            ctype = f[2].split(";")[0].strip().lower() if len(f) > 2 else ""
            data.content_types[ctype if ctype not in ("", "-") else "(none)"] += 1
            if len(f) > 4 and f[4].isdigit():
                data.depths[int(f[4])] += 1
        data.bytes += max(0, _int(f[3])) if len(f) > 3 else 0
        when = _parse_stamp(f[5]) if len(f) > 5 else None
        if when is not None:
            data.first_fetch = when if data.first_fetch is None else min(data.first_fetch, when)
            data.last_fetch = when if data.last_fetch is None else max(data.last_fetch, when)


def _read_failed(folder: Path, data: ReportData) -> None:
    for f in data_fields(folder / FAILED):
        if len(f) < 2 or not _is_url(f[0]):
            continue
        reason = f[1].strip() or "?"
        data.failure_reasons[reason] += 1
        data.failed += 1
        depth = f[2].strip() if len(f) > 2 else ""
        if depth.isdigit():
            data.depths[int(depth)] += 1
        if len(data.failures) < TOP_FAILURES:
            data.failures.append((f[0], reason, depth or "-", f[3].strip() if len(f) > 3 else "-"))


def _read_statuses(folder: Path, data: ReportData) -> None:
    """Status codes by host as ``export`` and ``status`` count them: each URL's last status (a
    recrawl's 304 for a page found unchanged), ``error`` when no response came."""
    from .export import final_statuses

    if folder.is_dir():
        for url, code in final_statuses(folder):
            data.status_by_host.setdefault(host_of(url), Counter())[code] += 1


def _read_fetch_log(folder: Path, data: ReportData) -> None:
    """The largest and the slowest pages, from fetch.log (``time pid status bytes ms URL``): each
    URL once, at its largest size / longest time."""
    size, ms = _Top(TOP_PAGES), _Top(TOP_PAGES)
    for f in data_fields(folder / FETCH_LOG):
        if len(f) >= 6 and _is_url(f[5]) and f[3].isdigit() and f[4].isdigit():
            size.add(f[5], int(f[3]))
            ms.add(f[5], int(f[4]))
    data.largest, data.slowest = size.top(), ms.top()


class _Top:
    """The n URLs with the largest values, each URL at its largest value, in memory bounded by
    4n URLs whatever the size of fetch.log (a URL pruned was below the n-th value then, which
    only grows, so it could not have made the top)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.best: dict[str, int] = {}

    def add(self, url: str, value: int) -> None:
        if value > self.best.get(url, -1):
            self.best[url] = value
            if len(self.best) > 4 * self.n:
                self.best = dict(self.top())

    def top(self) -> list[tuple[str, int]]:
        return heapq.nlargest(self.n, self.best.items(), key=lambda kv: (kv[1], kv[0]))


def _rejection_reason(reason: str) -> str:
    """Group 'queue.txt:7: not an absolute URL' and the like under the file name."""
    return refusal_rule(reason)


def _pending_urls(store: FileStore) -> Iterator[str]:
    """The URL of every pending line of queue.txt, as the store sees them (claims.txt says which
    lines a running or killed crawl took), so the report agrees with ``status``."""
    for e in store.pending_entries():
        if _is_url(e.url):
            yield e.url


def _read_settings(folder: Path) -> list[str]:
    seeds = []
    for f in data_fields(folder / SETTINGS):
        key, sep, value = f[0].partition("=")
        if sep and key.strip() == "seed" and value.strip():
            seeds.append(value.strip())
    return seeds


def load(folder: Path, *, now: Optional[float] = None) -> ReportData:
    """Read the project files of ``folder`` into a ``ReportData``; never raises on bad content
    (an unreadable queue, crawled or failed file is a StoreError, as for ``status``)."""
    store = FileStore(folder, track_seen=False).open(lock=False) if folder.is_dir() else None
    data = ReportData(name=folder.name, generated=time.time() if now is None else now)
    data.seeds = _read_settings(folder)
    rows = read_stats(folder)
    data.stats = sorted(rows, key=lambda r: r.unix)
    _read_crawled(folder, data)
    _read_failed(folder, data)
    _read_statuses(folder, data)
    _read_fetch_log(folder, data)
    data.rounds = recrawl_rounds(folder, data.stats)
    data.broken = broken_links(folder)
    refused = set()   # each refused URL once, also in a rejected.txt written before that was so
    for f in data_fields(folder / REJECTED):
        if len(f) >= 2 and (key := refusal_key("\t".join(f[:2]))) not in refused:
            refused.add(key)
            data.rejected[_rejection_reason(f[1])] += 1
    for f in data_fields(folder / DUPLICATES):
        kind = f[1].strip() if len(f) > 1 else ""
        if kind == "variant":
            data.variants += 1
        elif kind == "duplicate":
            data.duplicates += 1
    pending = _Counting(_pending_urls(store) if store is not None else iter(()))
    data.patterns = top_patterns(pending, TOP_N)
    data.pending = pending.count
    return data


class _Counting:
    """Counts what passes through, so the queue is read once for both count and patterns."""

    def __init__(self, items: Iterator[str]) -> None:
        self.items, self.count = items, 0

    def __iter__(self) -> Iterator[str]:
        for item in self.items:
            self.count += 1
            yield item


def write_report(folder: Path, output: Optional[Path] = None, *, now: Optional[float] = None) -> Path:
    """Write the report of the project in ``folder`` (default ``folder/report.html``); its path."""
    path = folder / "report.html" if output is None else output
    atomic_write(path, render(load(folder, now=now)))
    return path


# ----------------------------------------------------------------------------- series


@dataclass(frozen=True)
class Timeline:
    """The stats rows placed on a 'crawl time' axis: pauses between runs are cut out."""

    runs: list[list[tuple[float, StatsRow]]]   # (seconds of crawl time, row), one list per run
    restarts: list[float]                      # crawl time at which a later run began

    @property
    def duration(self) -> float:
        return self.runs[-1][-1][0] if self.runs else 0.0


def timeline(rows: Sequence[StatsRow]) -> Timeline:
    """Place rows on crawl time, run by run (``stats.runs``): a resumed crawl's pause costs no width."""
    out: list[list[tuple[float, StatsRow]]] = []
    restarts: list[float] = []
    x = 0.0
    for run in runs(rows):
        if out:
            restarts.append(x)
        out.append([(x + row.unix - run[0].unix, row) for row in run])
        x = out[-1][-1][0]
    return Timeline(out, restarts)


Point = tuple[float, Optional[float]]   # y None: a break in the line


def level_series(tl: Timeline, attr: str) -> list[Point]:
    """One stats column (pending, crawled...) over crawl time, thinned to about ``MAX_POINTS``."""
    total = sum(len(r) for r in tl.runs)
    stride = max(1, math.ceil(total / MAX_POINTS))
    out: list[Point] = []
    for run in tl.runs:
        if out:
            out.append((run[0][0], None))
        picked = run[::stride]
        if picked[-1] is not run[-1]:
            picked.append(run[-1])
        out.extend((x, float(getattr(r, attr))) for x, r in picked)
    return out


def rate_series(tl: Timeline) -> tuple[list[Point], list[Point]]:
    """Pages/s and discovery ratio per time slice (intervals summed, so the lines are smooth).

    pages/s = Δ(crawled + failed + checked) / Δtime, as ``stats.pages_per_second`` (a recrawl's
    checks are pages fetched too); discovery ratio = Δdiscovered / ΔURLs completed, as
    ``stats.discovery_ratio``, only for slices in which a URL was completed.
    Intervals across a pause between runs are skipped.
    """
    width = max(tl.duration / BUCKETS, 1e-9)
    speed: list[Point] = []
    ratio: list[Point] = []
    for run in tl.runs:
        buckets: dict[int, list[float]] = {}
        for (x0, a), (x1, b) in zip(run, run[1:]):
            if x1 <= x0:
                continue
            acc = buckets.setdefault(min(int(x1 / width), BUCKETS - 1), [0.0, 0.0, 0.0, 0.0, 0.0])
            acc[0] += x1 - x0
            acc[1] += (b.fetched - a.fetched) + max(0, b.checked - a.checked)
            acc[2] += b.discovered - a.discovered
            acc[3] += b.done - a.done
            acc[4] = x1
        if buckets and speed:
            speed.append((run[0][0], None))
            ratio.append((run[0][0], None))
        for key in sorted(buckets):
            dt, dc, dd, df, x = buckets[key]
            speed.append((x, max(0.0, dc / dt)))
            if df > 0:
                ratio.append((x, max(0.0, dd / df)))
    return speed, ratio


# ----------------------------------------------------------------------------- formatting

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff\ud800-\udfff]")


def _esc(text: object, limit: int = 0) -> str:
    """Text from a file, safe in HTML and in SVG (XML): control characters dropped, escaped."""
    s = _CONTROL.sub("", str(text))
    if limit and len(s) > limit:
        s = s[: limit - 1] + "\u2026"
    return html.escape(s, quote=True)


def fmt_int(n: float) -> str:
    return f"{int(n):,}"


def fmt_short(v: float) -> str:
    """A tick label: 950, 1.2k, 3M, 0.25."""
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    if a == int(a):
        return f"{int(v)}"
    return f"{v:.3g}"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"   # pragma: no cover


def fmt_duration(seconds: float) -> str:
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def nice_ticks(hi: float, count: int = 5) -> list[float]:
    """Round tick values 0..top (top >= hi), at steps of 1, 2 or 5 times a power of ten."""
    if not hi > 0 or not math.isfinite(hi):
        return [0.0, 1.0]
    raw = hi / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    n = math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(n + 1)]


_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
               43200, 86400, 172800, 604800)


def time_ticks(hi: float, count: int = 6) -> list[float]:
    """Tick values for a time axis, at steps people read easily (10s, 5 min, 1 h...)."""
    if not hi > 0:
        return [0.0]
    step = next((s for s in _TIME_STEPS if s * count >= hi), _TIME_STEPS[-1])
    return [float(i * step) for i in range(int(hi // step) + 1)]


def fmt_tick_time(s: float) -> str:
    if s < 60:
        return f"{s:g}s"
    if s < 3600:
        return f"{s / 60:g}m"
    if s < 86400:
        return f"{s / 3600:g}h"
    return f"{s / 86400:g}d"


# ----------------------------------------------------------------------------- SVG charts

W = 600          # every chart is drawn in a 600-unit wide viewBox and scaled by CSS


def _svg(height: float, title: str, body: list[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {W} {height:.0f}" '
            f'role="img" aria-label="{_esc(label)}">'
            f'<text class="title" x="0" y="16">{_esc(title)}</text>' + "".join(body) + "</svg>")


def no_data(title: str, why: str = "no data yet") -> str:
    """The placeholder that stands where a chart has nothing to draw."""
    return (f'<div class="nodata"><div class="nodata-title">{_esc(title)}</div>'
            f'<p>{_esc(why)}</p></div>')


@dataclass(frozen=True)
class Series:
    name: str
    colour: str
    points: list[Point]


def _path(points: Sequence[Point], sx: Callable[[float], float],
          sy: Callable[[float], float]) -> list[str]:
    """SVG for one series: a polyline per unbroken stretch, a dot for a lone point."""
    out, run = [], []
    for x, y in list(points) + [(0.0, None)]:
        if y is not None:
            run.append((sx(x), sy(y)))
            continue
        if len(run) == 1:
            out.append(f'<circle cx="{run[0][0]:.1f}" cy="{run[0][1]:.1f}" r="3" />')
        elif run:
            out.append('<polyline points="' + " ".join(f"{a:.1f},{b:.1f}" for a, b in run) + '" />')
        run = []
    return out


def line_chart(title: str, series: Sequence[Series], *, y_label: str, x_max: float,
               restarts: Sequence[float] = (), reference: Optional[tuple[float, str]] = None,
               empty: str = "no data yet") -> str:
    """A line chart over crawl time with a grid, tick labels, axis titles and a legend."""
    ys = [y for s in series for _, y in s.points if y is not None]
    if not ys:
        return no_data(title, empty)
    H, left, right, top, bottom = 250, 58, 14, 40, 40
    y_hi = max(ys + ([reference[0]] if reference else []))
    yt = nice_ticks(y_hi)
    xt = time_ticks(x_max)
    x_top = max(x_max, xt[-1] if xt else 0.0, 1e-9)
    y_top = yt[-1] or 1.0
    pw, ph = W - left - right, H - top - bottom

    def sx(x: float) -> float:
        return left + pw * x / x_top

    def sy(y: float) -> float:
        return top + ph * (1 - y / y_top)

    body = []
    for v in yt:
        body.append(f'<line class="grid" x1="{left}" x2="{W - right}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" />')
        body.append(f'<text class="tick" x="{left - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{fmt_short(v)}</text>')
    for v in xt:
        body.append(f'<line class="tickmark" x1="{sx(v):.1f}" x2="{sx(v):.1f}" y1="{top + ph}" y2="{top + ph + 4}" />')
        body.append(f'<text class="tick" x="{sx(v):.1f}" y="{top + ph + 16}" text-anchor="middle">{fmt_tick_time(v)}</text>')
    body.append(f'<line class="axis" x1="{left}" x2="{W - right}" y1="{top + ph}" y2="{top + ph}" />')
    body.append(f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" />')
    body.append(f'<text class="axis-label" x="{left + pw / 2:.0f}" y="{H - 4}" text-anchor="middle">crawl time</text>')
    body.append(f'<text class="axis-label" transform="translate(12 {top + ph / 2:.0f}) rotate(-90)" '
                f'text-anchor="middle">{_esc(y_label)}</text>')
    for r in restarts:
        body.append(f'<line class="restart" x1="{sx(r):.1f}" x2="{sx(r):.1f}" y1="{top}" y2="{top + ph}" />')
        body.append(f'<text class="note" x="{sx(r) + 3:.1f}" y="{top + 10}">resumed</text>')
    if reference:
        body.append(f'<line class="reference" x1="{left}" x2="{W - right}" y1="{sy(reference[0]):.1f}" '
                    f'y2="{sy(reference[0]):.1f}" />')
        body.append(f'<text class="note" x="{W - right - 2}" y="{sy(reference[0]) - 4:.1f}" '
                    f'text-anchor="end">{_esc(reference[1])}</text>')
    for s in series:
        body.append(f'<g class="series" stroke="{s.colour}" fill="{s.colour}">'
                    + "".join(_path(s.points, sx, sy)) + "</g>")
    if len(series) > 1:
        x = W - right
        for s in reversed(series):
            x -= 12 + 7 * len(s.name)
            body.append(f'<rect x="{x}" y="24" width="10" height="10" fill="{s.colour}" />'
                        f'<text class="legend" x="{x + 13}" y="33">{_esc(s.name)}</text>')
    return _svg(H, title, body, title)


def bar_chart(title: str, items: Sequence[tuple[str, int]], colour: str, *, mono: bool = False,
              empty: str = "no data yet", total: Optional[int] = None) -> str:
    """Horizontal bars, label above each bar and the count at its end: long labels stay whole."""
    if not items:
        return no_data(title, empty)
    row, top = 34, 28
    H = top + row * len(items) + 4
    hi = max(v for _, v in items) or 1
    body = []
    cls = "label mono" if mono else "label"
    for i, (label, value) in enumerate(items):
        y = top + i * row
        w = max(1.0, (W - 90) * value / hi)
        share = f" ({_percent(value, total)})" if total else ""
        body.append(f'<g><title>{_esc(label)}: {fmt_int(value)}</title>'
                    f'<text class="{cls}" x="0" y="{y + 11}">{_esc(label, 84)}</text>'
                    f'<rect x="0" y="{y + 15}" width="{w:.1f}" height="12" rx="2" fill="{colour}" />'
                    f'<text class="value" x="{w + 6:.1f}" y="{y + 25}">{fmt_int(value)}{share}</text></g>')
    return _svg(H, title, body, title)


def _percent(part: int, whole: int) -> str:
    share = 100 * part / whole
    return "<1%" if 0 < share < 1 else f"{share:.0f}%"


def status_class(code: str) -> str:
    if code == "304":
        return code
    return code[0] + "xx" if len(code) == 3 and code.isdigit() else "error"


def _ranked_hosts(by_host: dict[str, Counter[str]]) -> list[tuple[str, Counter[str]]]:
    return sorted(by_host.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))


def status_chart(by_host: dict[str, Counter[str]]) -> str:
    """Stacked horizontal bars: per host, how many answers of each status class."""
    title = "Status codes by host"
    if not by_host:
        return no_data(title, "nothing fetched yet")
    hosts = _ranked_hosts(by_host)[:TOP_HOSTS]
    classes = [c for c in CLASS_COLOURS if any(status_class(k) == c for _, n in hosts for k in n)]
    row, top = 30, 44
    H = top + row * len(hosts) + 6
    hi = max(sum(n.values()) for _, n in hosts)
    body = []
    x = 0
    for c in classes:
        body.append(f'<rect x="{x}" y="24" width="10" height="10" fill="{CLASS_COLOURS[c]}" />'
                    f'<text class="legend" x="{x + 13}" y="33">{c}</text>')
        x += 60
    for i, (host, n) in enumerate(hosts):
        y = top + i * row
        by_class: Counter[str] = Counter()
        for code, v in n.items():
            by_class[status_class(code)] += v
        body.append(f'<text class="label" x="0" y="{y + 11}">{_esc(host or "(no host)", 84)}</text>')
        x0 = 0.0
        for c in classes:
            if by_class[c]:
                w = (W - 90) * by_class[c] / hi
                body.append(f'<rect x="{x0:.1f}" y="{y + 15}" width="{max(w, 1):.1f}" height="11" '
                            f'fill="{CLASS_COLOURS[c]}"><title>{_esc(host)} {c}: {fmt_int(by_class[c])}'
                            f'</title></rect>')
                x0 += w
        body.append(f'<text class="value" x="{x0 + 6:.1f}" y="{y + 25}">{fmt_int(sum(n.values()))}</text>')
    return _svg(H, title, body, title)


def status_table(by_host: dict[str, Counter[str]]) -> str:
    """The exact counts behind the status chart: hosts by status code."""
    if not by_host:
        return ""
    hosts = _ranked_hosts(by_host)
    totals: Counter[str] = Counter()
    for _, n in hosts:
        totals.update(n)
    codes = sorted((c for c, _ in totals.most_common(TOP_CODES)), key=lambda c: (c == "error", c))
    other = len(totals) > len(codes)
    head = "".join(f'<th class="num"><span class="dot" style="background:{CLASS_COLOURS[status_class(c)]}">'
                   f'</span>{_esc(c)}</th>' for c in codes)
    head += '<th class="num">other</th>' if other else ""
    rows = []
    for host, n in hosts[:TOP_HOSTS]:
        cells = "".join(f'<td class="num">{fmt_int(n[c]) if n[c] else ""}</td>' for c in codes)
        if other:
            rest = sum(v for c, v in n.items() if c not in codes)
            cells += f'<td class="num">{fmt_int(rest) if rest else ""}</td>'
        rows.append(f'<tr><td class="host">{_esc(host or "(no host)")}</td>{cells}'
                    f'<td class="num total">{fmt_int(sum(n.values()))}</td></tr>')
    more = (f'<p class="note">... and {len(hosts) - TOP_HOSTS} more hosts</p>'
            if len(hosts) > TOP_HOSTS else "")
    return (f'<table class="status"><thead><tr><th>host</th>{head}<th class="num">total</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>{more}')


# ----------------------------------------------------------------------------- page

CSS = """
:root { --ink: #1f2937; --muted: #6b7280; --line: #e5e7eb; --bg: #f8fafc; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 40px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI",
       Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--ink); background: var(--bg); }
h1 { font-size: 24px; margin: 0 0 2px; } h1 .name { color: #2563eb; }
h2 { font-size: 17px; margin: 28px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.meta { color: var(--muted); margin: 0; word-break: break-all; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(140px, 1fr)); gap: 10px;
         margin-top: 18px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 21px; font-weight: 600; font-variant-numeric: tabular-nums; white-space: nowrap; }
.card .s { color: var(--muted); font-size: 12px; }
.alarm { margin-top: 16px; padding: 10px 14px; border-radius: 8px; background: #fef2f2;
         border: 1px solid #fecaca; color: #991b1b; font-weight: 600; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 14px; }
.panel { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px;
         break-inside: avoid; page-break-inside: avoid; }
svg.chart { display: block; width: 100%; height: auto; overflow: visible;
            font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
svg .title { font-size: 14px; font-weight: 600; fill: var(--ink); }
svg .tick, svg .value, svg .legend { font-size: 11px; fill: #4b5563; font-variant-numeric: tabular-nums; }
svg .label { font-size: 12px; fill: var(--ink); }
svg .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 11.5px; }
svg .axis-label { font-size: 11px; fill: var(--muted); }
svg .note { font-size: 10px; fill: var(--muted); paint-order: stroke; stroke: #fff; stroke-width: 3px; }
svg .grid { stroke: var(--line); stroke-width: 1; }
svg .axis, svg .tickmark { stroke: #9ca3af; stroke-width: 1; }
svg .restart { stroke: #9ca3af; stroke-dasharray: 4 3; }
svg .reference { stroke: #dc2626; stroke-dasharray: 5 4; stroke-width: 1; opacity: .6; }
svg .series polyline { fill: none; stroke-width: 2; stroke-linejoin: round; stroke-linecap: round; }
.nodata { min-height: 120px; }
.nodata-title { font-weight: 600; }
.nodata p { color: var(--muted); margin: 30px 0; text-align: center; font-style: italic; }
.table-panel { margin-top: 14px; overflow-x: auto; }
table.status { width: 100%; border-collapse: collapse; background: #fff;
               font-variant-numeric: tabular-nums; }
table.status th, table.status td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: left; }
table.status th { font-size: 12px; color: var(--muted); font-weight: 600; white-space: nowrap; }
table.status .num { text-align: right; } table.status .total { font-weight: 600; }
table.status .host, table.status .url { word-break: break-all; }
.dot { display: inline-block; width: 8px; height: 8px; border-radius: 50%; margin-right: 4px; }
.note { color: var(--muted); font-size: 12px; }
footer { margin-top: 28px; color: var(--muted); font-size: 12px; }
@media print {
  body { background: #fff; padding: 0; font-size: 12px; }
  .grid { grid-template-columns: 1fr; }
  .panel, .card { border-color: #d1d5db; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""


def _card(key: str, value: str, sub: str = "") -> str:
    return (f'<div class="card"><div class="k">{_esc(key)}</div><div class="v">{_esc(value)}</div>'
            f'<div class="s">{_esc(sub)}</div></div>')


def duration_of(data: ReportData) -> float:
    """Crawl time from stats.txt (pauses cut out), else the span of fetch times."""
    if len(data.stats) > 1:
        return crawl_seconds(data.stats)
    if data.first_fetch is not None and data.last_fetch is not None:
        return data.last_fetch - data.first_fetch
    return 0.0


def speed_of(data: ReportData) -> Optional[float]:
    """Pages per second of crawl time: ``stats.pages_per_second``, the number a run's summary line
    says (pages fetched, failed or checked); from the fetch times only without stats.txt."""
    rate = pages_per_second(data.stats)
    if rate is None and len(data.stats) < 2:
        duration = duration_of(data)
        rate = (data.crawled + data.failed) / duration if duration > 0 else None
    return rate


def cards(data: ReportData) -> str:
    """The headline numbers."""
    duration = duration_of(data)
    discovery = discovery_ratio(data.stats)
    ratio = f"discovery ratio {discovery:.2f}" if discovery is not None else ""
    rate = speed_of(data)
    speed = f"{rate:.1f} pages/s" if rate is not None else ""
    per_page = f"{fmt_bytes(data.bytes / data.crawled)} per page" if data.crawled else ""
    kinds = (f"{fmt_int(data.duplicates)} same text, {fmt_int(data.variants)} variants"
             if data.duplicates or data.variants else "")
    hops = plural(data.redirects, "redirect", prefix="+").replace(str(data.redirects), fmt_int(data.redirects), 1) \
        if data.redirects else ""
    return '<section class="cards">' + "".join([
        _card("crawled", fmt_int(data.crawled), hops),
        _card("failed", fmt_int(data.failed), _top(data.failure_reasons, 2)),
        _card("pending", fmt_int(data.pending), ratio),
        _card("duplicates", fmt_int(data.duplicates + data.variants), kinds),
        _card("rejected", fmt_int(sum(data.rejected.values())), _top(data.rejected, 2)),
        _card("bytes", fmt_bytes(data.bytes), per_page),
        _card("duration", fmt_duration(duration), speed),
    ]) + "</section>"


def _top(counter: Counter[str], n: int) -> str:
    return ", ".join(f"{k} {v}" for k, v in counter.most_common(n))


def _alarm(data: ReportData) -> str:
    message = alarm_from_rows(data.stats)
    return f'<div class="alarm">{_esc(message)}</div>' if message else ""


def _panel(content: str) -> str:
    return f'<div class="panel">{content}</div>'


def _table_panel(table: str) -> str:
    return f'<div class="panel table-panel">{table}</div>' if table else ""


def _with_other(counter: Counter[str], n: int) -> list[tuple[str, int]]:
    """The n - 1 biggest entries, and the rest summed as 'other' when there are more than n."""
    items = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(items) <= n:
        return items
    return items[: n - 1] + [(f"other ({len(items) - n + 1} reasons)", sum(v for _, v in items[n - 1:]))]


def _table(title: str, head: Sequence[str], rows: Sequence[Sequence[object]], *, numeric: Sequence[int] = (),
           empty: str = "", note: str = "") -> str:
    """A titled table of text from the files (escaped); ``numeric`` columns are right-aligned."""
    if not rows:
        return f'<div class="panel table-panel">{no_data(title, empty)}</div>' if empty else ""

    def cls(i: int) -> str:
        return ' class="num"' if i in numeric else (' class="url"' if head[i] in ("URL", "page") else "")

    th = "".join(f"<th{cls(i)}>{_esc(h)}</th>" for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f"<td{cls(i)}>{_esc(v)}</td>" for i, v in enumerate(r)) + "</tr>"
                   for r in rows)
    more = f'<p class="note">{_esc(note)}</p>' if note else ""
    return (f'<div class="panel table-panel"><div class="nodata-title">{_esc(title)}</div>'
            f'<table class="status list"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>{more}</div>')


def recrawl_table(rounds: Sequence[Round]) -> str:
    """One row per run that made recrawl checks: what they found, and the new pages crawled."""
    rows = [[time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.start)), fmt_duration(r.end - r.start),
             fmt_int(r.checked), fmt_int(r.results.get("changed", 0)), fmt_int(r.results.get("unchanged", 0)),
             fmt_int(r.results.get("removed", 0)), fmt_int(r.results.get("failed", 0)), fmt_int(r.new_pages)]
            for r in rounds]
    return _table("Recrawl checks, one row per run (checks.txt)",
                  ["started (UTC)", "took", "checked", "changed", "unchanged", "removed", "failed", "new pages"],
                  rows, numeric=range(2, 8))


def page_tables(data: ReportData) -> str:
    """The largest and slowest pages (fetch.log) and the failures (failed.txt)."""
    largest = _table("Largest responses (fetch.log)", ["URL", "bytes"],
                     [(u, fmt_bytes(n)) for u, n in data.largest], numeric=[1], empty="fetch.log is empty")
    slowest = _table("Slowest responses (fetch.log)", ["URL", "time"],
                     [(u, f"{n / 1000:.2f} s") for u, n in data.slowest], numeric=[1], empty="fetch.log is empty")
    left = data.failed - len(data.failures)
    failures = _table("Failures (failed.txt)", ["URL", "reason", "depth", "when (UTC)"], data.failures,
                      numeric=[2], empty="nothing failed",
                      note=f"... and {fmt_int(left)} more: see failed.txt" if left > 0 else "")
    return f'<div class="grid">{largest}{slowest}</div>{broken_table(data.broken)}{failures}'


def broken_table(broken: Sequence[Broken]) -> str:
    """Every failed URL (the TOP_FAILURES most linked to) with the pages that link to it."""
    rows = [(b.url, b.reason, fmt_int(len(b.referrers)),
             " ".join(b.referrers[:BROKEN_PAGES]) + (" ..." if len(b.referrers) > BROKEN_PAGES else ""))
            for b in broken[:TOP_FAILURES]]
    left = len(broken) - len(rows)
    return _table("Broken links: failed URLs and the pages linking to them (failed.txt, links.txt)",
                  ["URL", "reason", "linked from", "pages (the first few)"], rows, numeric=[2],
                  note=f"... and {fmt_int(left)} more: see failed.txt" if left > 0 else "")


def _depth_items(depths: Counter[int]) -> list[tuple[str, int]]:
    """Depth histogram bars, shallow first; depths past the TOP_N - 1 shallowest are summed."""
    keys = sorted(depths)
    items = [(f"depth {d}", depths[d]) for d in keys[: TOP_N - 1]]
    rest = keys[TOP_N - 1:]
    if rest:
        items.append((f"depth {rest[0]} and deeper", sum(depths[d] for d in rest)))
    return items


def render(data: ReportData) -> str:
    """The whole page for ``data``: HTML with inline CSS and SVG, no scripts, no external links."""
    tl = timeline(data.stats)
    speed, ratio = rate_series(tl)
    charts = [
        line_chart("Frontier size", [Series("pending URLs", BLUE, level_series(tl, "pending"))],
                   y_label="pending URLs", x_max=tl.duration, restarts=tl.restarts),
        line_chart("URLs discovered and fetched", [Series("discovered", PURPLE, level_series(tl, "discovered")),
                                                   Series("crawled", GREEN, level_series(tl, "crawled")),
                                                   Series("failed", RED, level_series(tl, "failed"))]
                   + ([Series("checked", TEAL, level_series(tl, "checked"))]
                      if any(r.checked for r in data.stats) else []),
                   y_label="URLs (cumulative)", x_max=tl.duration, restarts=tl.restarts),
        line_chart("Pages per second (fetched, failed or checked)", [Series("pages/s", GREEN, speed)], y_label="pages/s",
                   x_max=tl.duration, restarts=tl.restarts,
                   empty="no data yet (needs two stats samples)"),
        line_chart("Discovery ratio (new URLs per URL fetched)", [Series("ratio", PURPLE, ratio)],
                   y_label="new URLs / page", x_max=tl.duration, restarts=tl.restarts,
                   reference=(1.0, "1: the frontier holds steady"),
                   empty="no data yet (needs two stats samples with pages fetched between)"),
    ]
    pending_total = data.pending or None
    hosts = [status_chart(data.status_by_host),
             bar_chart("Failures by reason", _with_other(data.failure_reasons, TOP_N), RED,
                       empty="nothing failed")]
    pages = [bar_chart("Pages by content type", _with_other(data.content_types, TOP_N), GREEN,
                       empty="nothing crawled", total=data.crawled or None),
             bar_chart("Pages and failures by depth", _depth_items(data.depths), BLUE, empty="nothing fetched",
                       total=sum(data.depths.values()) or None)]
    lists = [
        bar_chart("Top URL patterns of pending URLs", data.patterns, TEAL, mono=True,
                  empty="the queue is empty", total=pending_total),
        bar_chart("Rejections by reason", _with_other(data.rejected, TOP_N), ORANGE,
                  empty="nothing rejected"),
    ]
    seeds = ", ".join(_esc(s) for s in data.seeds[:5]) + (" ..." if len(data.seeds) > 5 else "")
    meta = f"generated {_esc(time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(data.generated)))}"
    if seeds:
        meta += f" &middot; seeds: {seeds}"
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>spider report: {_esc(data.name)}</title><style>{CSS}</style></head><body>",
        f'<header><h1>spider report: <span class="name">{_esc(data.name)}</span></h1>',
        f'<p class="meta">{meta}</p></header>',
        cards(data), _alarm(data),
        '<h2>Over time</h2><div class="grid">', "".join(_panel(c) for c in charts), "</div>",
        '<h2>Hosts and failures</h2><div class="grid">', "".join(_panel(c) for c in hosts), "</div>",
        _table_panel(status_table(data.status_by_host)),
        '<h2>Pages</h2><div class="grid">', "".join(_panel(c) for c in pages), "</div>",
        page_tables(data),
        ('<h2>Recrawl</h2>' + recrawl_table(data.rounds)) if data.rounds else "",
        '<h2>Frontier and refusals</h2><div class="grid">', "".join(_panel(c) for c in lists), "</div>",
        "<footer>Counts come from the project files: crawled.txt, failed.txt, queue.txt and "
        "claims.txt (as for <code>status</code>), rejected.txt, duplicates.txt, checks.txt and "
        "removed.txt (status codes are each URL&#39;s last, as <code>export</code> gives them: 304 "
        "for a page a recrawl found unchanged), fetch.log; the charts over time from stats.txt "
        "(pauses between runs are cut out of the time axis).</footer>",
        "</body></html>\n",
    ])
