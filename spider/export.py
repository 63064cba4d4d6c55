"""``export NAME --format jsonl|csv``: one record per page, read from the project files.

Every URL that has a line in ``crawled.txt`` or ``failed.txt`` gives exactly one record with the
fields ``FIELDS``, in that order:

| field          | from                                                                      |
|----------------|---------------------------------------------------------------------------|
| url            | the line's URL                                                            |
| final_url      | crawled.txt's final URL: the target of a redirect hop; null for a page    |
|                | fetched directly (the file says ``-``) and for failed URLs                |
| status         | the last HTTP status received, an integer: crawled.txt's status, or a     |
|                | failed.txt reason that is a status (``404``); overridden by the latest    |
|                | recrawl check (``304`` when unchanged); null when no response came        |
|                | (``timeout after 3 attempts``, a check with status ``-``)                 |
| content_type   | crawled.txt, or the latest check that fetched a new version (see below);  |
|                | for a failed URL, its error response's type (null when none came)         |
| bytes          | the body size received (integer), same source; for a failed URL, the      |
|                | declared Content-Length of its error response (failed.txt's 7-field lines)|
| depth          | crawled.txt / failed.txt (integer, 0 at a seed)                           |
| fetched_at     | ISO 8601 UTC of the last fetch: the line's time, or the latest check's    |
| title          | crawled.txt (11-field lines), same source as content_type                 |
| content_hash   | crawled.txt, replaced by the newest check that reports a hash             |
| canonical      | crawled.txt (11-field lines), same source as content_type                 |
| outlinks       | crawled.txt (11-field lines), same source: links taken from the page      |
| state          | ``crawled``, ``failed``, ``removed`` or ``inactive`` (see below)          |
| referrers      | for a failed URL, the pages linking to it (``broken.referrers``: links.txt,|
|                | else failed.txt's source): a JSON list, space-separated in CSV; for a      |
|                | crawled file that is not HTML (a requisite, a PDF), the pages of links.txt |
|                | linking to it when there are any; null for other records                  |

A field written ``-`` (or left empty) in a file is null in JSONL and an empty cell in CSV;
``status``, ``bytes``, ``depth`` and ``outlinks`` are JSON integers. Text goes out as the files
hold it, except what a terminal or a spreadsheet would act on (files written by hand or by an
older version may hold it): control characters are escaped as in the files
(``records.safe_text``: ``\\x1b``), and a CSV cell that starts with ``=``, ``+``, ``-``, ``@``, TAB
or CR gets a ``'`` in front, as OWASP's "CSV Injection" page advises, so that a spreadsheet shows
a title like ``=HYPERLINK(...)`` as text instead of running it as a formula. ``lastmod.txt`` is not exported.
Redirect hops are records too (their 3xx status, ``final_url`` = the target). URLs that appear only
in ``checks.txt`` or ``removed.txt`` (no crawled/failed line) give no record.

Order and duplicates: records come in file order, ``crawled.txt`` first, then ``failed.txt``. The
crawler writes each URL once, but a kill between recording a page and closing its claim, or a hand
edit, can leave a URL on two lines (even in both files): then the line with the latest
``fetched_at`` is the record (on a tie, the later line, ``failed.txt`` counting as after
``crawled.txt``), emitted at that line's place.

How the later files change a record (each event has a time; an event older than the
crawled/failed line is stale and ignored, so a URL crawled again after being removed is crawled):

- ``checks.txt`` (one line per recrawl fetch; for each URL the latest by ``checked_at``, the later
  line on a tie): its status (``-``: null) and ``checked_at`` replace ``status`` and
  ``fetched_at``; the newest check whose ``content_hash`` is not ``-`` replaces ``content_hash``
  (a 304 keeps the known hash). Result ``changed``/``unchanged`` means the page is there
  (``crawled``), ``removed`` makes it ``removed``; ``failed`` (no usable answer) changes no state.
  A line may carry five more fields, ``content_type bytes canonical outlinks title``, measured on
  the version that check fetched. The newest ``changed`` check (or ``unchanged`` one with those
  fields) gives those five fields of the record: its own values, or null when it has only five
  fields, since crawled.txt's were measured on a version the page no longer has (a new hash next
  to the old size and title would describe no version of the page). ``unchanged`` checks without
  them, ``removed`` and ``failed`` checks leave them as they were.
- ``removed.txt`` (for each URL only its latest line by date counts, the later line on a tie):
  ``404``/``410`` mark the page ``removed``, ``inactive`` marks it ``inactive``. A removal beats a
  check of the same second. A successful check *after* a 404/410 removal brings the page back
  (``crawled``). ``inactive`` is about links, not responses, so no check clears it; but a page
  that is ``removed`` (by its latest verdict) is exported as ``removed`` even when also inactive,
  since that says more.

Garbage: a line that is not a record of its file (wrong number of fields, a URL that is not
http(s), a non-integer where an integer belongs, a time that is not ``YYYY-MM-DDTHH:MM:SSZ``,
an unknown result or reason) is skipped and counted in a ``Skipped`` the caller may pass in, to
print one warning. A missing file is an empty file.

Memory: crawled.txt and failed.txt are read line by line, never held. What stays in memory is a
dict keyed by URL for the override files (the latest check per URL, the latest removal per URL),
64-bit fingerprints of the crawled/failed URLs (``SeenSet``, ~16 bytes a URL, to find URLs on more
than one line), and the few URLs that are on more than one line. Without such URLs the two big
files are read twice (a cheap first pass on the URL alone); with them, three times. Every pass
reads only the bytes the files held when the export started, so an export taken while a crawl
runs (and appends) is consistent: each URL once, as of that moment.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, TextIO, Tuple

from .broken import referrers
from .records import HTML_TYPES, safe_text
from .recrawl import BODY_FIELDS
from .frontier.seen import SeenSet

FIELDS = ("url", "final_url", "status", "content_type", "bytes", "depth", "fetched_at", "title",
          "content_hash", "canonical", "outlinks", "state", "referrers")
FORMATS = ("jsonl", "csv")
STATES = ("crawled", "failed", "removed", "inactive")

CRAWLED, FAILED, CHECKS, REMOVED = "crawled.txt", "failed.txt", "checks.txt", "removed.txt"
CHECK_RESULTS = ("changed", "unchanged", "removed", "failed")
REMOVED_REASONS = ("404", "410", "inactive")

_STAMP = re.compile(r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
                    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?Z")
_DATE = re.compile(r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])")
_STATUS = re.compile(r"[1-5][0-9][0-9]")
_COUNT = re.compile(r"[0-9]{1,18}")


@dataclass
class Skipped:
    """Lines skipped because they are not records: counted per file, with the first line numbers."""

    counts: Dict[str, int] = field(default_factory=dict)
    first: Dict[str, List[int]] = field(default_factory=dict)

    def add(self, name: str, line_no: int) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        seen = self.first.setdefault(name, [])
        if len(seen) < 3:
            seen.append(line_no)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __bool__(self) -> bool:
        return self.total > 0

    def message(self) -> str:
        """One warning line (empty when nothing was skipped), e.g.
        ``warning: skipped 3 lines that are not records: crawled.txt 2 (lines 7, 9), checks.txt 1 (line 4)``."""
        if not self:
            return ""
        parts = []
        for name, n in self.counts.items():
            nos = self.first[name]
            where = ", ".join(map(str, nos)) + (", ..." if n > len(nos) else "")
            parts.append(f"{name} {n} (line{'s' if n > 1 else ''} {where})")
        total = self.total
        what = "line that is not a record" if total == 1 else "lines that are not records"
        return f"warning: skipped {total} {what}: " + ", ".join(parts)


# ----------------------------------------------------------------------------- reading


def _lines(path: Path, limit: Optional[int] = None) -> Iterator[Tuple[int, str]]:
    """(line number, line without its end) of a file's data lines, from its first ``limit`` bytes
    (all of it when None); nothing when it is missing."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        left = -1 if limit is None else limit
        for no, raw in enumerate(f, 1):
            if left >= 0:
                if left == 0:
                    break
                raw = raw[:left]
                left -= len(raw)
            if no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]   # a byte-order mark from a hand edit
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            s = line.strip()
            if s and not s.startswith("#"):
                yield no, line


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _fields(line: str) -> List[str]:
    return [f.strip() for f in line.split("\t")]


def _url(text: str) -> str:
    if not text.startswith(("http://", "https://")) or len(text) < 9 or " " in text:
        raise ValueError("not an http(s) URL")
    return text


def _opt(text: str) -> Optional[str]:
    return None if text in ("", "-") else text


def _opt_int(text: str) -> Optional[int]:
    if text in ("", "-"):
        return None
    if not _COUNT.fullmatch(text):
        raise ValueError(f"not a count: {text!r}")
    return int(text)


def _opt_stamp(text: str) -> Optional[str]:
    if text in ("", "-"):
        return None
    if not _STAMP.fullmatch(text):
        raise ValueError(f"not an ISO 8601 UTC time: {text!r}")
    return text


def _key(stamp: Optional[str]) -> str:
    """A sort key for a time: the stamp without its ``Z`` (fixed width, so strings compare as
    times; a fraction sorts after the whole second). No time sorts before every time."""
    return stamp[:-1] if stamp else ""


def _date_key(text: str) -> str:
    """removed.txt's date: a full stamp, or a bare date that counts as the end of that day."""
    if _STAMP.fullmatch(text):
        return text[:-1]
    if _DATE.fullmatch(text):
        return text + "T24"   # after every HH:MM:SS of that day
    raise ValueError(f"not a date: {text!r}")


def _parse_crawled(line: str) -> dict:
    """A crawled.txt line as a record; ValueError when it is not one.

    The crawler writes 7 or 11 fields. A person may write fewer (a bare URL marks a page as done,
    as the file format allows): the missing fields are unknown (null)."""
    f = _fields(line)
    n = len(f)
    if n not in (1, 7, 11):
        raise ValueError(f"{n} fields (expected 1, 7 or 11)")
    f += ["-"] * (11 - n)
    if n > 1 and not _STATUS.fullmatch(f[1]):
        raise ValueError(f"not a status: {f[1]!r}")
    long = n > 7
    return {"url": _url(f[0]), "final_url": _opt(f[6]), "status": int(f[1]) if n > 1 else None,
            "content_type": _opt(f[2]),
            "bytes": _opt_int(f[3]), "depth": _opt_int(f[4]), "fetched_at": _opt_stamp(f[5]),
            "title": _opt(f[10]) if long else None, "content_hash": _opt(f[7]) if long else None,
            "canonical": _opt(f[8]) if long else None, "outlinks": _opt_int(f[9]) if long else None,
            "state": "crawled", "referrers": None}


def _parse_failed(line: str) -> dict:
    """A failed.txt line (URL, reason, depth, fetched_at) as a record; a reason that is a status
    (``404``) is the status, any other reason (``timeout after 3 attempts``) means no status."""
    f = _fields(line)
    if not 2 <= len(f) <= 4 and len(f) != 7:   # URL and reason, as the format says; the crawler
        # adds depth and time, and now content type, declared bytes and source
        raise ValueError(f"{len(f)} fields (expected 2 to 4, or 7)")
    f += ["-"] * (7 - len(f))
    if not f[1]:
        raise ValueError("no reason")
    return {"url": _url(f[0]), "final_url": None, "status": int(f[1]) if _STATUS.fullmatch(f[1]) else None,
            "content_type": _opt(f[4]), "bytes": _opt_int(f[5]), "depth": _opt_int(f[2]),
            "fetched_at": _opt_stamp(f[3]), "title": None, "content_hash": None, "canonical": None,
            "outlinks": None, "state": "failed", "referrers": [f[6]] if f[6] not in ("", "-") else []}


_SOURCES = ((CRAWLED, _parse_crawled), (FAILED, _parse_failed))


class _Checks:
    """What checks.txt says about one URL: the latest check, the latest check that found the page
    there or gone (result other than ``failed``), the newest check that reported a content hash,
    and the newest check that fetched a new version or measured one (``BODY_FIELDS``; None: a
    ``changed`` check that did not say, so nothing is known of the new version)."""

    __slots__ = ("last_key", "status", "stamp", "verdict_key", "verdict", "hash_key", "hash",
                 "body_key", "body")

    def __init__(self) -> None:
        self.last_key = self.verdict_key = self.hash_key = self.body_key = ""
        self.status: Optional[int] = None
        self.stamp = ""
        self.verdict = ""
        self.hash = ""
        self.body: Optional[Tuple] = None


def _check_body(f: List[str]) -> Optional[Tuple]:
    """checks.txt's optional tail (``BODY_FIELDS``) as values; None for a 5-field line."""
    if len(f) == 5:
        return None
    ctype, size, canonical, outlinks, title = f[5:]
    return _opt(ctype), _opt_int(size), _opt(canonical), _opt_int(outlinks), _opt(title)


def _read_checks(path: Path, skipped: Skipped) -> Dict[str, _Checks]:
    out: Dict[str, _Checks] = {}
    for no, line in _lines(path):
        f = _fields(line)
        try:
            if len(f) not in (5, 5 + len(BODY_FIELDS)):
                raise ValueError(f"{len(f)} fields (expected 5 or {5 + len(BODY_FIELDS)})")
            url = _url(f[0])
            if f[1] != "-" and not _STATUS.fullmatch(f[1]):
                raise ValueError(f"not a status: {f[1]!r}")
            if f[2] not in CHECK_RESULTS:
                raise ValueError(f"unknown result {f[2]!r}")
            stamp = _opt_stamp(f[3])
            if stamp is None:
                raise ValueError("no time")
            body = _check_body(f)
        except ValueError:
            skipped.add(path.name, no)
            continue
        key = _key(stamp)
        c = out.get(url)
        if c is None:
            c = out[url] = _Checks()
        if key >= c.last_key:   # >=: of two checks of the same second, the later line
            c.last_key, c.status, c.stamp = key, (None if f[1] == "-" else int(f[1])), stamp
        if f[2] != "failed" and key >= c.verdict_key:
            c.verdict_key, c.verdict = key, ("removed" if f[2] == "removed" else "crawled")
        if f[4] not in ("", "-") and key >= c.hash_key:
            c.hash_key, c.hash = key, f[4]
        if (f[2] == "changed" or (body is not None and f[2] == "unchanged")) and key >= c.body_key:
            c.body_key, c.body = key, body
    return out


def _read_removed(path: Path, skipped: Skipped) -> Dict[str, Tuple[str, str]]:
    """URL -> (time key, ``removed`` or ``inactive``) of its latest removed.txt line."""
    out: Dict[str, Tuple[str, str]] = {}
    for no, line in _lines(path):
        f = _fields(line)
        try:
            if len(f) != 3:
                raise ValueError(f"{len(f)} fields (expected 3)")
            url = _url(f[0])
            key = _date_key(f[1])
            if f[2] not in REMOVED_REASONS:
                raise ValueError(f"unknown reason {f[2]!r}")
        except ValueError:
            skipped.add(path.name, no)
            continue
        old = out.get(url)
        if old is None or key >= old[0]:
            out[url] = (key, "inactive" if f[2] == "inactive" else "removed")
    return out


def _repeated_urls(folder: Path, sizes: Tuple[int, ...]) -> set:
    """URLs that are on more than one data line of crawled.txt and failed.txt (first field only)."""
    seen = SeenSet()
    repeated: set = set()
    for (name, _), size in zip(_SOURCES, sizes):
        for _, line in _lines(folder / name, size):
            url = line.split("\t", 1)[0].strip()
            if not seen.add(url):
                repeated.add(url)
    return repeated


def _winners(folder: Path, sizes: Tuple[int, ...], urls: set) -> Dict[str, Tuple[int, int]]:
    """For URLs on several lines: (file index, line number) of the line that is their record,
    the latest fetched_at, then the later line. Lines that do not parse never win."""
    best: Dict[str, Tuple[str, int, int]] = {}
    for idx, (name, parse) in enumerate(_SOURCES):
        for no, line in _lines(folder / name, sizes[idx]):
            if line.split("\t", 1)[0].strip() not in urls:
                continue
            try:
                rec = parse(line)
            except ValueError:
                continue   # counted as skipped by the pass that emits
            cand = (_key(rec["fetched_at"]), idx, no)
            if rec["url"] not in best or cand >= best[rec["url"]]:
                best[rec["url"]] = cand
    return {url: (idx, no) for url, (_, idx, no) in best.items()}


def _apply(rec: dict, checks: Optional[_Checks], removal: Optional[Tuple[str, str]]) -> dict:
    """The record as the later events leave it (see the module docstring)."""
    base = _key(rec["fetched_at"])
    events: List[Tuple[str, int, str]] = []   # (time key, rank on a tie, what)
    if checks is not None:
        if checks.last_key and checks.last_key >= base:
            rec["status"], rec["fetched_at"] = checks.status, checks.stamp
        if checks.hash_key and checks.hash_key >= base:
            rec["content_hash"] = checks.hash
        if checks.body_key and checks.body_key >= base:   # a new version: never the old one's fields
            rec.update(zip(BODY_FIELDS, checks.body or (None,) * len(BODY_FIELDS)))
        if checks.verdict_key and checks.verdict_key >= base:
            events.append((checks.verdict_key, 1, checks.verdict))
    if removal is not None and removal[0] >= base:
        events.append((removal[0], 2, removal[1]))
    if events:
        state, inactive = rec["state"], False
        for _, _, what in sorted(events):
            if what == "inactive":
                inactive = True
            else:
                state = what
        rec["state"] = "inactive" if inactive and state != "removed" else state
    return rec


def records(folder: Path, skipped: Optional[Skipped] = None) -> Iterator[dict]:
    """One dict per page (keys ``FIELDS``, in order), streamed; garbage lines are counted in
    ``skipped``. A project folder that does not exist is a FileNotFoundError."""
    folder = Path(folder)
    if not folder.is_dir():   # raised here, before the first record is asked for
        raise FileNotFoundError(f"no project folder {folder}")
    return _records(folder, Skipped() if skipped is None else skipped)


def _records(folder: Path, skipped: Skipped) -> Iterator[dict]:
    checks = _read_checks(folder / CHECKS, skipped)
    removed = _read_removed(folder / REMOVED, skipped)
    # The passes read the same bytes: what the files held when the export started (a crawl that
    # runs meanwhile only appends to them).
    sizes = tuple(_size(folder / name) for name, _ in _SOURCES)
    repeated = _repeated_urls(folder, sizes)
    winners = _winners(folder, sizes, repeated) if repeated else {}
    # the pages linking to each failed URL, and to each crawled file that is not an HTML page (an
    # image or a stylesheet of --requisites, a PDF): where a broken or needed file is used
    files = {f[0].strip() for f in (line.split("\t", 3) for _, line in _lines(folder / CRAWLED, sizes[0]))
             if len(f) > 2 and f[1].startswith("2") and f[2].split(";")[0].strip() not in HTML_TYPES}
    refs = referrers(folder, itertools.chain(
        (line.split("\t", 1)[0].strip() for _, line in _lines(folder / FAILED, sizes[1])), files))
    for idx, (name, parse) in enumerate(_SOURCES):
        for no, line in _lines(folder / name, sizes[idx]):
            try:
                rec = parse(line)
            except ValueError:
                skipped.add(name, no)
                continue
            url = rec["url"]
            if winners and winners.get(url, (idx, no)) != (idx, no):
                continue
            if refs.get(url) and (rec["state"] == "failed" or url in files):
                rec["referrers"] = refs[url]
            yield _apply(rec, checks.get(url), removed.get(url))


def final_statuses(folder: Path) -> Iterator[Tuple[str, str]]:
    """(url, status) of every record, as export gives it: the last HTTP status received (``304``
    for a page a recrawl found unchanged, the check's status after a change or a removal), or
    ``error`` when no response came. ``status`` and ``report`` count these, so the three commands
    tell the same story about a recrawl."""
    for rec in records(folder):
        yield rec["url"], "error" if rec["status"] is None else str(rec["status"])


# ----------------------------------------------------------------------------- writing


_FORMULA = ("=", "+", "-", "@", "\t", "\r")   # OWASP, CSV Injection: what starts a formula


def _safe(rec: dict) -> dict:
    return {k: safe_text(v) if isinstance(v, str) else [safe_text(x) for x in v] if isinstance(v, list) else v
            for k, v in rec.items()}


def csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text: null is empty, a formula-like text gets a ``'``.

    >>> [csv_cell(v) for v in (None, 3, "=1+1", "-x", "@SUM(A1)", "Docs home", "a\\x1bb")]
    ['', 3, "'=1+1", "'-x", "'@SUM(A1)", 'Docs home', 'a\\\\x1bb']
    """
    if value is None:
        return ""
    if isinstance(value, list):   # referrers: URLs, space-separated
        value = " ".join(value)
    if not isinstance(value, str):
        return value
    text = safe_text(value)
    return "'" + text if text.startswith(_FORMULA) else text


def write_jsonl(recs: Iterable[dict], out: TextIO) -> int:
    """One JSON object per line (UTF-8 as is, not \\u-escaped, but no control characters: JSON
    would escape C0 but leave DEL, C1 and U+2028 raw); returns how many."""
    encode = json.JSONEncoder(ensure_ascii=False).encode
    n = 0
    for rec in recs:
        out.write(encode(_safe(rec)) + "\n")
        n += 1
    return n


def write_csv(recs: Iterable[dict], out: TextIO) -> int:
    """A header row then one row per record (csv module quoting; null is an empty cell; lines end
    with ``\\n``: open a file with ``newline=""``); returns how many records. Cells go through
    ``csv_cell``."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(FIELDS)
    n = 0
    for rec in recs:
        w.writerow([csv_cell(rec[k]) for k in FIELDS])
        n += 1
    return n


def export(folder: Path, fmt: str, out: TextIO, skipped: Optional[Skipped] = None) -> int:
    """Write the project's records to ``out`` as ``jsonl`` or ``csv``; returns how many were written.

    Pass a ``Skipped()`` to learn how many lines were skipped as garbage (``skipped.message()`` is
    the one warning line to print, empty when none were)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
    recs = records(folder, skipped)
    return write_jsonl(recs, out) if fmt == "jsonl" else write_csv(recs, out)
