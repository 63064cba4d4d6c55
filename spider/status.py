"""``status NAME``: what a project holds and whether a crawl is running, read from its files."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from . import config as settings
from .crawl import RUNNING
from .records import first_field, is_data, is_redirect_hop
from .store import CRAWLED, FAILED, REJECTED, SIGNATURE, FileStore
from .urls import host_key

TOP_HOSTS = 10


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


def _lines(path: Path):  # type: ignore[no-untyped-def]
    if path.exists():
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if is_data(line):
                    yield line.rstrip("\n")


def report(folder: Path, name: str) -> str:
    cfg = settings.load(folder)
    store = FileStore(folder, track_seen=False).open(lock=False)
    c = store.counts()
    hosts: dict[str, Counter[str]] = {}

    def bump(url: str, what: str) -> None:
        hosts.setdefault(host_key(url), Counter())[what] += 1

    for line in _lines(folder / CRAWLED):
        bump(first_field(line), "hops" if is_redirect_hop(line) else "crawled")
    failures: Counter[str] = Counter()
    for line in _lines(folder / FAILED):
        bump(first_field(line), "failed")
        fields = line.split("\t")
        failures[fields[1] if len(fields) > 1 else "?"] += 1
    for entry in store.pending_entries():
        bump(entry.url, "pending")
    for url in store.in_flight():
        bump(url, "in flight")
    rejected: Counter[str] = Counter()
    for line in _lines(folder / REJECTED):
        fields = line.split("\t")
        reason = fields[1] if len(fields) > 1 else "?"
        rejected[reason.split(":")[0] if reason.startswith(("queue.txt", "crawled.txt", "failed.txt"))
                 else reason] += 1

    out = [f"project   {name} ({folder})",
           f"running   {running_state(folder)}",
           f"seeds     {' '.join(cfg.get('seeds', ())) or '-'}",
           f"pending   {c.pending}",
           f"in flight {c.in_flight}",
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
    if hosts:
        out.append("")
        out.append(f"{'host':40} {'crawled':>8} {'failed':>7} {'pending':>8} {'in flight':>9}")
        ranked = sorted(hosts.items(), key=lambda kv: -sum(kv[1].values()))
        for host, n in ranked[:TOP_HOSTS]:
            out.append(f"{host[:40]:40} {n['crawled']:>8} {n['failed']:>7} {n['pending']:>8} {n['in flight']:>9}")
        if len(ranked) > TOP_HOSTS:
            out.append(f"... and {len(ranked) - TOP_HOSTS} more hosts")
    return "\n".join(out)


def _top(counter: Counter[str], n: int = 5) -> str:
    return ", ".join(f"{k} {v}" for k, v in counter.most_common(n))
