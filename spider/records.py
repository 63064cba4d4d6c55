"""Line formats of the project files: one record per line, fields separated by TAB.

Every state file follows the same rule: the line starts with an absolute URL, optional fields
follow after a TAB, blank lines and lines starting with ``#`` are ignored. URLs that went through
``spider.urls.normalize`` can hold no control character (they are percent-encoded); every other
field is passed through ``clean`` before it is written, so nothing a server sends can break the
line format or reach a terminal that shows the file (``cat crawled.txt``):

- TAB, CR, LF and the other characters ``str.splitlines()`` breaks lines at (VT, FF, FS, GS, RS,
  NEL, U+2028, U+2029) become a space;
- every other control character (the rest of C0 with NUL, ESC and BEL; DEL; C1), the bidi
  controls that reorder what a terminal shows (U+202A-U+202E, U+2066-U+2069) and lone
  surrogates are written as visible escapes: ``\x1b``, ``\x7f``, ``\u202e``.

| file         | fields after the URL                                               |
|--------------|--------------------------------------------------------------------|
| queue.txt    | depth, attempts, not_before (unix time), source page, [kind]       |
| crawled.txt  | status, content type, bytes, depth, fetched_at (UTC), final URL,   |
|              | text hash, canonical URL, outlinks, title (HTML pages; else ``-``) |
| failed.txt   | reason, depth, fetched_at (UTC), [content type, bytes (declared),  |
|              | source page]: the response's type and Content-Length for an error  |
|              | status (``-`` when none came), the page that first linked to it    |
| rejected.txt | reason, source page (``-`` for a seed or a hand-written line)       |
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

HTML_TYPES = ("text/html", "application/xhtml+xml")   # media types parsed as HTML pages

QUEUE_HEADER = "# url\tdepth\tattempts\tnot_before\tsource\t[kind]\n"
REQUISITE = "requisite"   # queue kind of a page requisite (--requisites): fetched, never parsed for links
KINDS = ("-", "recheck", REQUISITE)
CRAWLED_HEADER = ("# url\tstatus\tcontent_type\tbytes\tdepth\tfetched_at\tfinal_url"
                  "\tcontent_hash\tcanonical\toutlinks\ttitle\n")
MAX_TITLE = 300   # characters of a page title kept in crawled.txt
FAILED_HEADER = "# url\treason\tdepth\tfetched_at\t[content_type\tbytes\tsource]\n"
REJECTED_HEADER = "# url_or_line\treason\tsource\n"

# TAB and every character str.splitlines() treats as a line break: a space.
_BREAKS = "\t\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# Everything a terminal may act on or that reorders text: shown as an escape.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    if c in _BREAKS:
        return " "
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def _escape_keeping_newlines(m: re.Match[str]) -> str:
    return "\n" if m.group() == "\n" else _escape(m)


def safe_text(text: str, *, lines: bool = False) -> str:
    """``text`` with no character a terminal acts on: line breaks and TAB as a space (kept as
    they are when ``lines``: errors.log's tracebacks), other controls as visible escapes.

    >>> safe_text("a\\tb\\x1b[31mc\\x07\\u2028d\\u202e")
    'a b\\\\x1b[31mc\\\\x07 d\\\\u202e'
    """
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape_keeping_newlines if lines else _escape, text)


def clean(value: object) -> str:
    """A field safe for the line format and a terminal (``safe_text``), stripped, never empty."""
    text = safe_text(str(value)).strip()
    return text or "-"


_LAST_STAMP: tuple[float, float, str] = (0.0, 0.0, "")   # [start, end) of a second, and its stamp


def utc_stamp(when: float | None = None) -> str:
    """ISO 8601 UTC, second precision: what every file uses for a point in time.

    A page writes three or four of them, mostly within one second: the last second's text is
    kept (a comparison instead of gmtime and strftime; a NaN or infinite time compares false
    and raises as before)."""
    t = time.time() if when is None else when
    start, end, text = _LAST_STAMP
    if start <= t < end:
        return text
    text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
    start = math.floor(t)
    _remember_stamp(start, text)
    return text


def _remember_stamp(start: int, text: str) -> None:
    global _LAST_STAMP
    _LAST_STAMP = (start, start + 1, text)


def is_data(line: str) -> bool:
    """False for the blank and ``#`` lines that every state file ignores (also after the BOM
    that Notepad puts at the start of a file)."""
    s = line.strip()
    if s[:1] == "\ufeff":
        s = s[1:].strip()
    return bool(s) and not s.startswith("#")


@dataclass(frozen=True)
class QueueEntry:
    """A pending URL: one line of queue.txt."""

    url: str
    depth: int = 0
    attempts: int = 0
    not_before: float = 0.0
    source: str = "-"
    kind: str = "-"     # "-" a URL to crawl; "recheck" a crawled page to fetch again (recrawl);
                        # "requisite" an image, stylesheet, ... of a page (--requisites)

    def line(self) -> str:
        nb = f"{self.not_before:.3f}" if self.not_before else "0"
        tail = "" if self.kind == "-" else f"\t{self.kind}"
        return f"{self.url}\t{self.depth}\t{self.attempts}\t{nb}\t{clean(self.source)}{tail}\n"


def parse_queue_line(line: str) -> QueueEntry:
    """Parse a data line of queue.txt; ValueError names what is wrong.

    Only the URL is required (a person may add a bare URL). The URL is returned as written:
    callers that accept hand-written lines normalise it.
    """
    fields = line.rstrip("\r\n").split("\t")
    url = fields[0].strip()
    if not url:
        raise ValueError("empty URL")
    try:
        depth = int(fields[1]) if len(fields) > 1 and fields[1] else 0
        attempts = int(fields[2]) if len(fields) > 2 and fields[2] else 0
        not_before = float(fields[3]) if len(fields) > 3 and fields[3] else 0.0
    except ValueError:
        raise ValueError("depth, attempts and not_before must be numbers") from None
    if depth < 0 or attempts < 0:
        raise ValueError("depth and attempts must not be negative")
    if not math.isfinite(not_before):
        raise ValueError("not_before must be a finite Unix time")
    source = fields[4] if len(fields) > 4 and fields[4] else "-"
    kind = fields[5].strip() if len(fields) > 5 and fields[5].strip() else "-"
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} (expected one of {', '.join(KINDS)})")
    return QueueEntry(url, depth, attempts, not_before, source, kind)


def crawled_line(url: str, status: int, content_type: str, size: int, depth: int,
                 fetched_at: float, final_url: str = "-", *, content_hash: str | None = None,
                 canonical: str | None = None, outlinks: int | None = None,
                 title: str | None = None) -> str:
    line = (f"{url}\t{status}\t{clean(content_type)}\t{size}\t{depth}\t"
            f"{utc_stamp(fetched_at)}\t{clean(final_url)}")
    if content_hash or canonical or outlinks is not None or title:
        line += (f"\t{clean(content_hash or '-')}\t{clean(canonical or '-')}\t"
                 f"{'-' if outlinks is None else outlinks}\t{clean((title or '-')[:MAX_TITLE])}")
    return line + "\n"


def duplicate_line(url: str, kind: str, of_url: str) -> str:
    """duplicates.txt: ``url`` is a ``duplicate`` (same text) or ``variant`` (rel=canonical) of ``of_url``."""
    return f"{url}\t{kind}\t{clean(of_url)}\n"


def failed_line(url: str, reason: str, depth: int, fetched_at: float, content_type: str | None = None,
                size: int | None = None, source: str | None = None) -> str:
    """A failed.txt line; the last three fields (what an error response said it sent, and the
    page that first linked to the URL) are written when any is known (``-`` for the others)."""
    line = f"{url}\t{clean(reason)}\t{depth}\t{utc_stamp(fetched_at)}"
    if content_type is not None or size is not None or source is not None:
        line += f"\t{clean(content_type or '-')}\t{'-' if size is None else size}\t{clean(source or '-')}"
    return line + "\n"


def rejected_line(url_or_line: str, reason: str, source: str = "-") -> str:
    return f"{clean(url_or_line)}\t{clean(reason)}\t{clean(source)}\n"


def refusal_key(line: str) -> str:
    """What makes a rejected.txt line a repeat of another: its URL; for a ``max-links`` line
    (a page whose links were cut), the page URL and the rule, so it is not taken for a refusal
    of that page itself."""
    url, _, rest = line.partition("\t")
    url = url.strip().removeprefix("\ufeff")
    return url + "\tmax-links" if rest.startswith("max-links") else url


def refusal_rule(reason: str) -> str:
    """The rule of a rejected.txt reason, for counts by rule: ``max-links: 12 links not followed``
    is ``max-links``; a line moved out of a state file (``queue.txt:7: not an absolute URL``)
    counts under its file name."""
    reason = reason.strip()
    if reason.startswith(("queue.txt:", "crawled.txt:", "failed.txt:", "max-links:")):
        return reason.split(":", 1)[0]
    return reason or "?"


def data_fields(path: Path) -> Iterator[list[str]]:
    """The TAB-split data lines of a state file (a BOM and CRLF from a hand edit are fine);
    nothing at all when the file is missing or unreadable. For readers that report or export."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
            for line in f:
                if is_data(line):
                    yield line.rstrip("\r\n").split("\t")
    except OSError:
        return


def first_field(line: str) -> str:
    """The URL of a state-file line (everything before the first TAB)."""
    return line.split("\t", 1)[0].strip()


def is_redirect_hop(line: str) -> bool:
    """A crawled.txt line for a URL that answered with a redirect (it does not count as a page)."""
    fields = line.split("\t", 3)
    return len(fields) > 2 and len(fields[1]) == 3 and fields[1].startswith("3") and fields[1] != "304"
