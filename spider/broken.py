"""The broken-links view: every failed URL with the pages that link to it.

failed.txt says which URLs failed and why, and (7-field lines) the page that first linked to each;
links.txt records, for each crawled page, every crawlable URL it links to (``page TAB added TAB
duplicates TAB url url ...``). A failed URL's referrers are the distinct pages of links.txt that
link to it, in file order; when links.txt names none (a redirect target, or a project from before
links.txt), failed.txt's source page, if it has one. ``status`` shows the top ten, the report a
table, and ``export`` gives them in the ``referrers`` field of failed records.

Memory: the failed URLs and their referrers (a link checker's answer is that list); links.txt is
read line by line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Container, Iterable

from . import safefs
from .records import QueueEntry, data_fields, is_data

LINKS = "links.txt"


@dataclass
class Broken:
    """One failed URL: why, and the pages linking to it (distinct, first linked first)."""

    url: str
    reason: str
    referrers: list[str] = field(default_factory=list)


def referrers(folder: Path, urls: Iterable[str]) -> dict[str, list[str]]:
    """For each of ``urls``, the distinct pages of links.txt that link to it, in file order."""
    found: dict[str, dict[str, None]] = {u: {} for u in urls}
    if not found:
        return {}
    for f in data_fields(Path(folder) / LINKS):
        if len(f) < 4:
            continue
        page = f[0].strip()
        for url in f[3].split():
            pages = found.get(url)
            if pages is not None:
                pages[page] = None
    return {u: list(p) for u, p in found.items()}


def broken_links(folder: Path) -> list[Broken]:
    """Every failed URL of failed.txt (its last line), most linked first, then in file order."""
    folder = Path(folder)
    failed: dict[str, tuple[str, str]] = {}   # url -> (reason, source)
    for f in data_fields(folder / "failed.txt"):
        url = f[0].strip()
        if url.startswith(("http://", "https://")) and len(f) > 1:
            failed[url] = (f[1].strip() or "?", f[6].strip() if len(f) > 6 else "-")
    refs = referrers(folder, failed)
    out = []
    for url, (reason, source) in failed.items():
        pages = refs.get(url) or ([source] if source not in ("", "-") else [])
        out.append(Broken(url, reason, pages))
    out.sort(key=lambda b: -len(b.referrers))   # stable: file order among equals
    return out


def requeue_failed(folder: Path) -> int:
    """``recrawl --failed``: move every failed URL back to the queue, to be fetched again (a 404
    the site has fixed since). Returns how many URLs were queued.

    Each URL of failed.txt becomes a queue line (its depth, no attempts spent, its source page),
    appended to queue.txt and synced; then failed.txt is rewritten atomically without those
    lines, as recovery moves lines. A kill in between leaves a URL both queued and failed: the
    next start keeps it failed (nothing is lost; run ``recrawl --failed`` again). A URL that is
    also in crawled.txt (a hand edit) stays as it is. Caller holds crawl.lock."""
    from .frontier.files import CRAWLED, FAILED, HEADERS, QUEUE, _end_last_line

    folder = Path(folder)
    crawled = {f[0].strip() for f in data_fields(folder / CRAWLED)}
    try:
        with open(folder / FAILED, encoding="utf-8", errors="replace", newline="") as f:
            lines = f.readlines()
    except FileNotFoundError:
        return 0
    queued, kept = split_failed(lines, crawled)
    if not queued:
        return 0
    _end_last_line(folder / QUEUE)
    fd = safefs.open_append(folder / QUEUE)
    try:
        safefs.write_whole(fd, "".join(e.line() for e in queued.values()).encode("utf-8"), folder / QUEUE)
        os.fsync(fd)
    finally:
        os.close(fd)
    safefs.atomic_write(folder / FAILED, "".join(kept) or HEADERS[FAILED])
    return len(queued)


def split_failed(lines: Iterable[str], crawled: Container[str]) -> tuple[dict[str, QueueEntry], list[str]]:
    """``recrawl --failed``'s split of failed.txt's lines (as a file or a Redis log holds them):
    the queue line of each failed URL (its depth, no attempts spent, its source page), and the
    lines kept (header, comments, a torn last line, a URL also crawled)."""
    queued: dict[str, QueueEntry] = {}
    kept: list[str] = []
    for line in lines:
        fields = line.rstrip("\r\n").split("\t")
        url = fields[0].strip().removeprefix("\ufeff")
        if not (is_data(line) and line.endswith("\n") and url.startswith(("http://", "https://"))
                and url not in crawled):
            kept.append(line)   # header, comments, a torn last line: recovery's business
            continue
        depth = int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else 0
        source = fields[6].strip() if len(fields) > 6 and fields[6].strip() else "-"
        queued.setdefault(url, QueueEntry(url, depth, 0, 0.0, source))
    return queued, kept
