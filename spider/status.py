"""``status NAME``: what a project holds and whether a crawl is running, read from its files."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Iterator

from . import config as settings
from .crawl import RUNNING
from .config import DEFAULT_USER_AGENT
from .politeness import effective_delay
from .robots import RobotsCache, product_token
from .broken import broken_links
from .records import data_fields, first_field, is_redirect_hop, refusal_key, refusal_rule, utc_stamp
from .census import top_patterns
from .export import final_statuses
from .stats import RUN_GAP, Round, StatsRow, alarm_from_rows, discovery_ratio, read_stats, recrawl_rounds
from .words import plural
from .frontier.files import CRAWLED, DUPLICATES, FAILED, REJECTED, FileStore
from .frontier.recovery import SIGNATURE
from .urls import host_key

TOP_HOSTS = 10
TOP_PATTERNS = 5
TOP_BROKEN = 10   # broken links shown by status
RECENT_SECONDS = 30.0


def running_state(folder: Path) -> str:
    """'yes (...)', or 'no' with a hint when the last crawl was killed."""
    try:
        info = dict(line.split(" ", 1) for line in (folder / RUNNING).read_text().splitlines() if " " in line)
        pid = int(info.get("pid", "0"))
    except (OSError, ValueError):
        return "no"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"no (the crawl with pid {pid} did not stop cleanly; the next `crawl` resumes it)"
    except PermissionError:
        pass
    return f"yes (pid {pid}, {info.get('workers', '?')} workers, since {info.get('started', '?')})"


def _lines(path: Path) -> Iterator[str]:
    """The data lines of a file, whole (status reads a few fields of each)."""
    return ("\t".join(f) for f in data_fields(path))


def report(folder: Path, name: str) -> str:
    cfg = settings.load(folder)
    store = FileStore(folder, track_seen=False).open(lock=False)
    c = store.counts()
    hosts: dict[str, Counter[str]] = {}

    def bump(url: str, what: str) -> None:
        hosts.setdefault(host_key(url), Counter())[what] += 1

    codes: dict[str, Counter[str]] = {}   # host -> HTTP status (or "error") -> count, as export says
    for url, code in final_statuses(folder):
        codes.setdefault(host_key(url), Counter())[code] += 1
    total_bytes = 0
    for line in _lines(folder / CRAWLED):
        url = first_field(line)
        bump(url, "hops" if is_redirect_hop(line) else "crawled")
        fields = line.split("\t", 4)
        if len(fields) > 3:
            total_bytes += int(fields[3]) if fields[3].isdigit() else 0
    failures: Counter[str] = Counter()
    per_host_failures: dict[str, Counter[str]] = {}
    for line in _lines(folder / FAILED):
        url = first_field(line)
        bump(url, "failed")
        fields = line.split("\t")
        reason = fields[1] if len(fields) > 1 else "?"
        failures[reason] += 1
        per_host_failures.setdefault(host_key(url), Counter())[reason] += 1
    pending_urls = []
    rechecks = 0   # pending and in-flight rechecks: their URLs are crawled, not newly discovered
    for entry in store.pending_entries():
        bump(entry.url, "pending")
        pending_urls.append(entry.url)
        rechecks += entry.kind == "recheck"
    for url in store.in_flight():
        bump(url, "in flight")
    rechecks += sum(1 for q in store.in_flight_lines().values() if q.rstrip("\n").endswith("\trecheck"))
    rejected: Counter[str] = Counter()
    refused = set()   # each refused URL once, also in a rejected.txt written before that was so
    for line in _lines(folder / REJECTED):
        if (key := refusal_key(line)) in refused:
            continue
        refused.add(key)
        fields = line.split("\t")
        rejected[refusal_rule(fields[1]) if len(fields) > 1 else "?"] += 1

    running = running_state(folder)
    stale = c.in_flight and not running.startswith("yes")
    out = [f"project   {name} ({folder})",
           f"running   {running}",
           f"seeds     {' '.join(cfg.get('seeds', ())) or '-'}",
           f"pending   {c.pending}",
           f"in flight {c.in_flight}" + ("  (claims of a crawl that stopped: pending again at the next run)"
                                         if stale else ""),
           f"crawled   {c.crawled}" + (f" (+{c.hops} redirects)" if c.hops else ""),
           f"failed    {c.failed}" + (f"  ({_top(failures)})" if failures else ""),
           f"rejected  {sum(rejected.values())}" + (f"  ({_top(rejected)})" if rejected else "")]
    max_pages = cfg.get("max_pages")
    if max_pages:
        left = max_pages - c.completed
        out.append(f"budget    --max-pages {max_pages}: {c.completed} used"
                   + ("; reached" if left <= 0 else f", {left} left"))
    if not (folder / SIGNATURE).exists() and c.pending == 0 and c.completed == 0:
        out.append("note      nothing crawled yet")
    live = None
    if running.startswith("yes"):   # stats.txt's last row may be a second old: add the live counts
        completed = c.crawled + c.hops + c.failed + c.rejected
        live = StatsRow(time.time(), c.pending, c.in_flight, c.crawled, c.failed,
                        max(0, c.pending + c.in_flight + completed - rechecks), completed=completed)
    rows = read_stats(folder)
    out += _selection_lines(folder, c, total_bytes, pending_urls, rows, live)
    out += _freshness_lines(folder, c.crawled, name, rows)
    out += _broken_lines(folder) if failures else []
    if hosts:
        now = time.time()
        robots = RobotsCache(folder)
        budget = cfg.get("max_pages_per_host")
        out.append("")
        out.append(f"{'host':32} {'crawled':>7} {'failed':>6} {'pending':>7} {'flight':>6} {'delay':>6} "
                   f"{'next':>6}  {'robots':22} state")
        ranked = sorted(hosts.items(), key=lambda kv: -sum(kv[1].values()))
        # The top hosts by URLs, then any other host held back for a reason (robots.txt
        # unavailable, Retry-After, parked): small stuck hosts are the ones a person looks for.
        shown = ranked[:TOP_HOSTS] + [(h, n) for h, n in ranked[TOP_HOSTS:] if store.host_state(h).reason != "-"]
        base_delay, cap = float(cfg.get("delay", 1.0)), float(cfg.get("max_delay", 60.0))
        agent = product_token(str(cfg.get("user_agent", DEFAULT_USER_AGENT)))
        for host, n in shown:
            st = store.host_state(host)
            rules = robots.known(host)
            crawl_delay = rules.crawl_delay(agent) if rules else None
            floor = base_delay if crawl_delay is None else max(base_delay, min(crawl_delay, cap))
            delay = min(cap, effective_delay(st, floor))
            wait = st.next_allowed - now
            state = st.reason if st.reason != "-" else ("failing" if st.failures else "ok")
            if budget and n["crawled"] + n["failed"] + n["pending"] + n["in flight"] + n["hops"] >= budget:
                state += ", host budget reached"
            out.append(f"{host[:32]:32} {n['crawled']:>7} {n['failed']:>6} {n['pending']:>7} {n['in flight']:>6} "
                       f"{delay:>5.1f}s {(f'{wait:.0f}s' if wait > 0 else 'now'):>6}  "
                       f"{(rules.label() if rules else 'not fetched'):22} {state}")
            failed_here = per_host_failures.get(host)
            if failed_here:
                out.append(f"{'':32} failed: {_top(failed_here, 3)}")
            if codes.get(host):
                out.append(f"{'':32} status: " + ", ".join(f"{k} {v}" for k, v in sorted(codes[host].items())))
        if len(ranked) > len(shown):
            out.append(f"... and {len(ranked) - len(shown)} more hosts")
    return "\n".join(out)


def _broken_lines(folder: Path) -> list[str]:
    """The failed URLs most linked to, each with how many pages link to it and one of them."""
    broken = broken_links(folder)
    out = [f"broken    {plural(len(broken), 'failed URL')}"
           + (f", the {TOP_BROKEN} most linked to:" if len(broken) > TOP_BROKEN else ":")]
    for b in broken[:TOP_BROKEN]:
        n = len(b.referrers)
        linked = f"linked from {plural(n, 'page')}" + (f", e.g. {b.referrers[0]}" if n else "")
        out.append(f"          {b.reason[:24]:24} {b.url}  ({linked})")
    return out


def _freshness_lines(folder: Path, crawled: int, name: str, rows: list[StatsRow]) -> list[str]:
    """Recrawl: what the last round of checks found, how many crawled pages are due for a check
    (and when the next one is), and which were found removed."""
    from . import recrawl

    out = []
    rounds = recrawl_rounds(folder, rows)
    if rounds:
        last = rounds[-1]
        out.append(f"recrawl   {plural(len(rounds), 'run')} with checks; the last, at {utc_stamp(last.start)}: "
                   f"{round_text(last)}")
    if crawled:
        now = time.time()
        due = recrawl.due_pages(folder, now)
        when = recrawl.next_due(folder) if not due else None
        out.append(f"due       {plural(len(due), 'crawled page')} due for a check"
                   + (f" (the next at {utc_stamp(when)})" if when is not None else "")
                   + f"; `recrawl {name}` checks them, `recrawl {name} --all` every page")
    gone = recrawl.removed_urls(folder)
    if gone:
        out.append(f"removed   {len(gone)}")
        for url, (date, reason) in list(gone.items())[-5:]:
            out.append(f"  {date}  {reason:8}  {url}")
        if len(gone) > 5:
            out.append("  ... see removed.txt")
    return out


def _selection_lines(folder: Path, c, total_bytes: int, pending_urls: list[str],  # type: ignore[no-untyped-def]
                     rows: list[StatsRow], live: StatsRow | None = None) -> list[str]:
    """Is the crawl finding pages worth having? Discovery ratio, duplicates, bytes per useful page,
    the pending queue's URL patterns, and the trap alarm. ``live``: the counts of a running crawl,
    as a last stats row (the same columns as the crawl's own samples)."""
    out = []
    if live is not None and rows and 0 <= live.unix - rows[-1].unix <= RUN_GAP:
        rows = rows + [live]
    # One definition (stats.discovery_ratio), over stats.txt's rows, for "overall" and "recent"
    # alike: a window longer than the crawl is the crawl, so then both say the same.
    overall, recent = discovery_ratio(rows), discovery_ratio(rows, RECENT_SECONDS)
    if overall is not None:
        out.append(f"discovery {overall:.2f} new URLs per fetched page overall"
                   + (f", {recent:.2f} in the last {RECENT_SECONDS:.0f} s of crawling" if recent is not None else "")
                   + " (1: the queue holds steady)")
    if rows and rows[-1].seen_again:
        out.append(f"links     {rows[-1].seen_again} to URLs already known (counted, not logged)")
    dups: Counter[str] = Counter()
    for line in _lines(folder / DUPLICATES):
        fields = line.split("\t")
        dups[fields[1] if len(fields) > 1 else "?"] += 1
    if c.crawled:
        n = sum(dups.values())
        out.append(f"duplicates {n} of {c.crawled} pages ({100 * n / c.crawled:.1f}%: "
                   f"{dups['duplicate']} same text, {dups['variant']} canonical variants)")
        useful = max(0, c.crawled - n)
        if useful:
            out.append(f"bytes     {total_bytes} in all, {total_bytes // useful} per useful page")
    if pending_urls:
        out.append("patterns  most common among pending URLs:")
        for pat, n in top_patterns(pending_urls, TOP_PATTERNS):
            out.append(f"  {n:>8}  {pat}")
    alarm = alarm_from_rows(rows)
    if alarm:
        out.append(f"WARNING   {alarm}")
    return out


def _top(counter: Counter[str], n: int = 5) -> str:
    """The n most common, and how many kinds were left out."""
    more = len(counter) - n
    return ", ".join(f"{k} {v}" for k, v in counter.most_common(n)) + (f", +{more} more" if more > 0 else "")


def round_text(r: Round) -> str:
    """A run's checks in words: '5 checked: 1 changed, 3 unchanged, 1 removed, 0 failed; 2 new pages'."""
    n = r.results
    return (f"{r.checked} checked: {n.get('changed', 0)} changed, {n.get('unchanged', 0)} unchanged, "
            f"{n.get('removed', 0)} removed, {n.get('failed', 0)} failed; {plural(r.new_pages, 'new page')}")
