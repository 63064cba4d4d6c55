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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .records import data_fields

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
