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

from ..records import QueueEntry, parse_queue_line
from ..urls import normalize

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
