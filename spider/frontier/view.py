"""The frontier view: a saved copy of a store's index, so resuming a huge frontier is quick.

Opening a project builds each process's view of the frontier from the files: the dedup table of
every URL queued, crawled or failed, and the selection index of the pending lines. That is a pass
over queue.txt, crawled.txt and failed.txt, about 2.4 s per million URLs. So a clean stop saves the
view in ``frontier.view``, and the next run loads it in milliseconds, but only when the files it
was built from are exactly as they were: same inode, size, modification time, and first and last
64 KB. Any hand edit, a kill, or a change of a setting the index depends on (``--order``,
``--prefer``, ``--defer``, ``--max-pages-per-host``) makes it stale, and the run reads the files
as it always did. The view is a cache of the plain-text files, never a source of truth: deleting
it is always safe.

How it stays current without a full pass at each stop: a run that read the files saves the view
at start-up (``FileStore.save_view``), while it holds it anyway. At the clean stop, the fold
rewrites queue.txt without its claimed lines and carries that view forward: it drops the claimed
offsets, shifts the others to their place in the new file (``translate``), and reads only what
this run appended. So the work done line by line is in the lines this run touched; the rest is
reading and writing the arrays, in C (about 0.05 s per million URLs).

The file: a magic line, one JSON line (the identity of the files it describes and the small
parts of the state), then raw arrays: the dedup table (``SeenSet``, int64), then each bucket's
pending offsets, in the JSON's order: the selection index's buckets, then the recheck index's
(the rechecks again, which may still be claimed once --max-pages is reached).
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import repeat
from operator import sub
from pathlib import Path
from typing import IO, Any, Sequence

MAGIC = b"spider frontier view 2\n"
SAMPLE = 1 << 16   # bytes at each end of a file that its identity checksums


def identity(path: Path) -> list[int] | None:
    """What makes a file the same file: inode, size, mtime (ns) and a CRC of its two ends.

    The CRC guards against a rewrite that lands on a recycled inode with the same size within
    the file system's timestamp granularity."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            crc = zlib.crc32(f.read(SAMPLE))
            if st.st_size > SAMPLE:
                f.seek(max(SAMPLE, st.st_size - SAMPLE))
                crc = zlib.crc32(f.read(SAMPLE), crc)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, crc]


@dataclass
class View:
    """A loaded view: ``meta`` (the JSON line), the dedup table, and the buckets
    ``(host, score, offsets)`` in the order they were written."""

    meta: dict[str, Any]
    table: Any   # an array('q'), a mapped table (seen.py ``SharedSeen.state``), or None: not loaded
    buckets: list[tuple[str, int, array]]
    table_at: int = 0   # where the table begins in the file (to copy it from there, not loaded)


def dump(f: IO[bytes], meta: dict[str, Any], table: Any,
         buckets: Sequence[tuple[str, int, array]]) -> None:
    """Write a view to an open binary file (the caller makes the write atomic). ``table``: an
    array('q') or a mapped one (a memoryview of int64), written as it is."""
    meta = dict(meta, table=len(table), buckets=[[h, s, a.typecode, len(a)] for h, s, a in buckets])
    f.write(MAGIC)
    f.write(json.dumps(meta, separators=(",", ":")).encode("utf-8") + b"\n")
    f.write(memoryview(table).cast("B"))
    for _, _, items in buckets:
        items.tofile(f)


def load(path: Path, table: bool = True) -> View | None:
    """The view saved at ``path``, or None when there is none or it is not whole. ``table=False``:
    its dedup table is skipped, not read (``View.table`` None: the crawl's shared table has it)."""
    try:
        with open(path, "rb") as f:
            if f.readline() != MAGIC:
                return None
            meta = json.loads(f.readline())
            slots, table_at = int(meta["table"]), f.tell()
            if table:
                fps: array | None = array("q")
                fps.fromfile(f, slots)   # type: ignore[union-attr]
            else:
                fps = None
                f.seek(8 * slots, os.SEEK_CUR)
                if os.fstat(f.fileno()).st_size < f.tell():
                    return None
            buckets = []
            for host, score, typecode, n in meta.pop("buckets"):
                items = array(typecode)
                items.fromfile(f, n)
                buckets.append((str(host), int(score), items))
            if f.read(1):
                return None
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return None
    return View(meta, fps, buckets, table_at)


@dataclass(frozen=True)
class Moves:
    """Where the fold put the lines it kept: old bytes [starts[i], ends[i]) now begin at news[i]."""

    starts: list[int]
    ends: list[int]
    news: list[int]

    def where(self, off: int) -> int | None:
        """The new offset of the line that began at old offset ``off``; None if it was dropped."""
        k = bisect_right(self.starts, off) - 1
        return off - self.starts[k] + self.news[k] if k >= 0 and off < self.ends[k] else None


def translate(items: array, moves: Moves) -> array:
    """The offsets of a bucket (ascending) in the folded file, without the dropped lines.

    Cut at the kept stretches the bucket spans, each piece moved as a whole in C: the usual
    bucket lies in one or a few stretches (the crawl took lines from the head of the queue). A
    bucket scattered over many more stretches than it has items is moved item by item."""
    if not items:
        return items
    first = max(0, bisect_right(moves.starts, items[0]) - 1)
    last = bisect_right(moves.starts, items[-1])
    if (last - first) * 8 > len(items):
        return _item_by_item(items, moves)
    out = array(items.typecode)
    lo = 0
    for k in range(first, last):
        start, end = moves.starts[k], moves.ends[k]
        i = bisect_left(items, start, lo)
        j = bisect_left(items, end, i)
        if i < j:
            shift = start - moves.news[k]
            out.extend(_minus(items[i:j], shift) if shift else items[i:j])
        lo = j
    return out


WHOLE = 4096   # items of a piece below which the lanes trick costs more than it saves


def _minus(items: array, shift: int) -> array:
    """``items`` less ``shift`` each (every item >= shift, as every kept line moves back).

    One subtraction of two big integers whose 8- or 4-byte lanes are the items and the shift:
    no lane goes below zero, so none borrows from the next, and the work is done in C, not by
    an int object per item (a million offsets: ~20 ms instead of ~45 ms at a stop)."""
    if len(items) < WHOLE or shift < 0 or items.typecode not in "IQLq" or items[0] < shift:
        return array(items.typecode, map(sub, items, repeat(shift)))
    order, width = sys.byteorder, items.itemsize
    lanes = int.from_bytes(items, order) - int.from_bytes(shift.to_bytes(width, order) * len(items), order)
    out = array(items.typecode)
    out.frombytes(lanes.to_bytes(len(items) * width, order))
    return out


def _item_by_item(items: array, moves: Moves) -> array:
    out = array(items.typecode)
    for off in items:
        new = moves.where(off)
        if new is not None:
            out.append(new)
    return out
