"""Lines a person pasted into queue.txt: how one is judged, and where a paste begins.

A start after a clean stop finds queue.txt as that stop wrote it, or with lines appended to it
by hand (``cat urls.txt >> queue.txt``: a million of them, one bare URL a line, is a normal way
to seed a crawl). Recovery used to read the whole file before the first fetch, checking every
line; now such a start keeps the frontier the stop saved (``frontier.view``) and leaves the
appended stretch to the crawl: the claim step judges it a few thousand lines at a time
(``FileStore._judge_paste``), under the frontier lock, in the order of the file. Each line is
judged as recovery would judge it (``judge_line``): normalised, checked against the crawl's
settings, dropped if its URL is known; a line that is not a crawlable URL is reported with its
line number and kept in rejected.txt. The lines admitted are appended again in the crawler's own
shape, and one journal record (``S <start> <end> <lines>``) says the stretch is taken, so every
process and a recovery after a kill agree on what is done.

A paste under ``LAZY_BYTES`` is checked by recovery at start-up, as every other edit: that takes
a fraction of a second, and its bad lines are reported before the crawl begins.

Whether the stretch is only appended is told by ``frontier.txt`` (written at the clean stop): it
holds queue.txt's inode, size and a CRC of its whole content, so a hand edit anywhere before the
appended lines makes the start take the full recovery instead.
"""

from __future__ import annotations

import os
import re
import time
import zlib
from dataclasses import replace
from itertools import compress, repeat
from operator import concat
from typing import TYPE_CHECKING, Callable, NamedTuple

from ..records import QueueEntry, is_data, parse_queue_line, rejected_line
from ..urls import host_key, normal_lines, normalize

if TYPE_CHECKING:
    from .seen import SeenSet

LAZY_BYTES = 1 << 20   # a paste shorter than this (~20k URLs) is checked at start-up, all at once
FAR_AHEAD = 366 * 86400.0   # no wait the crawler sets is this long: a later time is a typo

UNDECODABLE = re.compile("[\udc80-\udcff]")   # what surrogateescape makes of bytes that are not UTF-8
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def shown(text: str) -> str:
    """A hand-written line as rejected.txt shows it: bytes that are not UTF-8 and control
    characters as \\xNN escapes, so nothing of it is silently lost."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def trusted(line: str) -> bool:
    """A full line the crawler wrote itself: its URL is already normalised."""
    return line.count("\t") >= 4 and line.startswith(("http://", "https://"))


def judge_line(line: str, ended: bool, horizon: float | None = None) -> QueueEntry:
    """The entry a data line of queue.txt written by hand stands for (its URL normalised);
    ValueError says why it is not a crawlable URL. ``line`` is without its line end (decoded
    with surrogateescape); ``ended``: it had one."""
    if UNDECODABLE.search(line):
        raise ValueError("bytes that are not UTF-8")
    if "\t" not in line:   # a bare URL, the way a person adds one
        e = QueueEntry(line.strip())
        url = normalize(e.url)
    else:
        if not ended:   # only bare URLs are hand-written so
            raise ValueError("torn last line")
        e = parse_queue_line(line)
        url = e.url if trusted(line) else normalize(e.url)
        if e.not_before > (time.time() + FAR_AHEAD if horizon is None else horizon):
            # a typo (milliseconds?) would stall the crawl for ever
            raise ValueError("not_before is more than a year ahead")
    return e if url == e.url else replace(e, url=url)


def bare_url(line: str) -> str:
    """What ``judge_line`` makes of a line of ASCII without a TAB (a bare URL, as most pastes
    are): its URL normalised (ValueError: not a crawlable URL), without building an entry."""
    return normalize(line.strip())


class Judged(NamedTuple):
    """What ``judge_stretch`` made of a stretch of pasted lines, in the order of the file."""

    urls: list[str]       # the URLs admitted (new to the table, which now has them)
    lines: list[str]      # their lines in the crawler's shape, each ending in "\n"
    rejected: list[str]   # rejected.txt lines: bad lines with their line numbers, refused URLs
    bad: list[tuple[int, str, str]]   # (line number, why, the line) of the lines that are no URL


_BARE = "\t0\t0\t0\t-\n"   # the rest of the crawler's line for a bare URL (QueueEntry(url).line())


def judge_stretch(data: bytes, first: int, seen: "SeenSet", admit: Callable[[str, int], str | None] | None,
                  *, cap: int | None = None, admitted: dict[str, int] | None = None,
                  live: Callable[[int], bool] | None = None, start: int = 0, horizon: float | None = None,
                  name: str = "queue.txt",
                  admit_many: Callable[[list[str], int], list[str | None]] | None = None) -> Judged:
    """Judge whole pasted lines (``data``, each ending in "\\n", the first of them line number
    ``first`` of ``name``) as recovery judges them: a line that is not a crawlable URL is reported
    with its number, a URL ``admit`` refuses (or over ``cap`` admitted URLs of its host, counted
    in ``admitted``) is rejected with the reason, a URL ``seen`` has is dropped, the rest is
    admitted and added to ``seen``. ``admit_many(urls, depth)``, if given, is
    ``[admit(url, depth) for url in urls]`` in one call (used for runs of plain lines). ``live(offset)``: is the line at that offset of queue.txt
    (``start`` is the offset of ``data``) still to be judged (else skipped)?

    Most pastes are bare URLs in their normal form already. Those are found by one match over
    the whole stretch (``urls.normal_lines``) and judged without a normalisation or an entry
    each; only the other lines go the whole way (``judge_line``)."""
    text = data.decode("utf-8", "surrogateescape")   # ("\n" ends a line in either reading)
    urls: list[str] = []
    lines: list[str] = []
    rejected: list[str] = []
    bad: list[tuple[int, str, str]] = []
    fingerprint, has, add = seen.fingerprint, seen.has, seen.add_fingerprint
    add_many = getattr(seen, "add_many", None)
    if horizon is None:
        horizon = time.time() + FAR_AHEAD
    if admitted is None:
        admitted = {}

    def take(url: str, kind: str, source: str, depth: int, line: str) -> None:
        """A URL of a line that is not plain: dropped, rejected or admitted."""
        fp = fingerprint(url)
        if kind != "recheck" and has(fp):
            return   # known: dropped, as recovery drops it
        reason = admit(url, depth) if admit is not None else None
        if cap is not None:
            h = host_key(url)
            if reason is None and kind != "recheck" and admitted.get(h, 0) >= cap:
                reason = "host budget"
        if reason:
            rejected.append(rejected_line(url, reason, source))
            return
        if add(fp) and cap is not None:
            admitted[h] = admitted.get(h, 0) + 1
        urls.append(url)
        lines.append(line)

    def one(raw: str, no: int) -> None:
        """A line judged the whole way (``raw`` without its "\\n")."""
        line = raw.rstrip("\r")
        if not is_data(line):
            return
        try:
            if "\t" not in line and line.isascii():   # a bare URL (most pastes): no entry to build
                url = bare_url(line)
                take(url, "-", "-", 0, url + _BARE)
            else:
                e = judge_line(line, True, horizon)
                take(e.url, e.kind, e.source, e.depth, e.line())
        except ValueError as err:
            rejected.append(rejected_line(shown(line), f"{name}:{no}: {err}"))
            bad.append((no, str(err), line))

    if live is not None:   # lines of it may be taken already (see FileStore._live): one by one
        off = start
        for no, raw in enumerate(data.split(b"\n")[:-1], first):
            if live(off):
                one(raw.decode("utf-8", "surrogateescape"), no)
            off += len(raw) + 1
        return Judged(urls, lines, rejected, bad)

    # Runs of plain lines (normal bare URLs), each followed by one line to judge the whole way.
    pos, no = 0, first
    for at in normal_lines(text) + [len(text)]:
        run = text[pos:at].split("\n")
        run.pop()   # (what follows the run's last "\n": nothing)
        no += len(run)
        if not run:   # (two lines to judge the whole way in a row: most lines of a mixed paste)
            pass
        elif cap is not None:   # (a host's budget counts only URLs new to the table: looked up first)
            for url in run:
                take(url, "-", "-", 0, url + _BARE)
        else:   # most lines: the whole run at once, one call a line for each step (map: no loop in Python)
            fps = seen.fingerprints(run)
            if admit_many is not None:
                reasons = admit_many(run, 0)
            else:
                reasons = list(map(admit, run, repeat(0, len(run)))) if admit is not None else None
            if reasons is None or not any(reasons):   # all admitted: new unless adding says known
                new = list(compress(run, add_many(fps) if add_many is not None else map(add, fps)))
                urls += new
                lines += map(concat, new, repeat(_BARE, len(new)))
            else:
                for url, fp, reason in zip(run, fps, reasons):
                    if reason is None:
                        if add(fp):
                            urls.append(url)
                            lines.append(url + _BARE)
                    elif not has(fp):   # a known URL is dropped, not rejected
                        rejected.append(rejected_line(url, reason))
        if at == len(text):
            break
        pos = text.find("\n", at) + 1
        one(text[at:pos - 1], no)
        no += 1
    return Judged(urls, lines, rejected, bad)


def crc_of(fd: int, size: int, chunk: int = 1 << 20) -> int:
    """CRC-32 of the first ``size`` bytes of an open file."""
    crc, pos = 0, 0
    while pos < size:
        data = os.pread(fd, min(chunk, size - pos), pos)
        if not data:
            break
        crc = zlib.crc32(data, crc)
        pos += len(data)
    return crc


_WRITTEN: dict[tuple[int, int, int, int], int] = {}   # the CRC of the queue.txt this process last wrote


def remember_crc(st: os.stat_result, crc: int) -> None:
    """The CRC of queue.txt as this process just wrote it (the fold computed it on the way), so
    the stop's signature need not read the file again (``crc_of_file``)."""
    _WRITTEN.clear()
    _WRITTEN[(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)] = crc


def crc_of_file(fd: int) -> int:
    """CRC-32 of an open file: the one ``remember_crc`` kept when it is that file, with the same
    size and modification time (a write since changes one of them), else read."""
    st = os.fstat(fd)
    crc = _WRITTEN.get((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return crc_of(fd, st.st_size) if crc is None else crc
