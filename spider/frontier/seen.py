"""A compact set of strings for deduplicating URLs: about 11-21 bytes per member.

A Python ``set`` of URL strings costs well over 100 bytes per URL, and every worker process holds
one. This keeps only a 64-bit fingerprint per URL in an open-addressing table (linear probing) stored
in an ``array('q')``, so a million known URLs cost about 16 MB per process instead of ~150 MB.

The fingerprint is Python's own ``hash(str)`` (SipHash, cached on the string object): randomised
per interpreter, which is fine for a table that never leaves the process that filled it (forked
children inherit both the table and the hash secret). A table that is saved to disk and loaded by a
later run (the store's frontier view, ``spider/frontier/view.py``) is made with ``stable=True``: 64 bits of
BLAKE2b, the same in every process, at ~0.4 µs more per lookup. Two URLs sharing a 64-bit
fingerprint is a ~1e-8 event at a million URLs; the cost would be one URL wrongly treated as
already seen.

A crawl's workers share one table instead of holding one each (``SharedSeen``, below): the same
layout in a file every process maps (seen.bin), so its pages are in memory once.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import sys
from array import array
from functools import partial
from operator import methodcaller
from pathlib import Path
from typing import Callable, Collection, Iterable, Sequence

from ..hashes import blake2b

_EMPTY = 0


_BLAKE2B_64 = partial(blake2b, digest_size=8)
_DIGEST = methodcaller("digest")


def _stable_fingerprints(keys: list[str]) -> list[int]:
    """``stable_fingerprint(k) or 1`` of each key, with no loop in Python: the keys encoded at once
    (split again at the "\\n"s, when none has one), the digests read as one array of int64."""
    text = "\n".join(keys)
    if not keys or text.count("\n") != len(keys) - 1:
        return [int.from_bytes(blake2b(k.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                               "little", signed=True) or 1 for k in keys]
    digests = b"".join(map(_DIGEST, map(_BLAKE2B_64, text.encode("utf-8", "surrogatepass").split(b"\n"))))
    fps = array("q", digests)
    if sys.byteorder != "little":
        fps.byteswap()
    out = fps.tolist()
    return [h or 1 for h in out] if 0 in out else out


def stable_fingerprint(key: str) -> int:
    """64 bits of BLAKE2b of the UTF-8 text, as a signed int: the same in every process and run."""
    return int.from_bytes(blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "little", signed=True)


class SeenSet:
    """Membership test and insert for strings, by 64-bit fingerprint."""

    __slots__ = ("_table", "_mask", "_count", "_fp", "stable")

    def __init__(self, items: Iterable[str] = (), capacity: int = 1024, stable: bool = False) -> None:
        self.stable = stable
        self._fp: Callable[[str], int] = stable_fingerprint if stable else hash
        size = 1024
        while size < capacity * 2:
            size *= 2
        self._table = array("q", bytes(8 * size))
        self._mask = size - 1
        self._count = 0
        for item in items:
            self.add(item)

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: object) -> bool:
        return self.has(self._fp(key) or 1)   # type: ignore[arg-type]

    def fingerprint(self, key: str) -> int:
        """What ``has`` and ``add_fingerprint`` take: work out once, test and insert with it."""
        return self._fp(key) or 1

    def fingerprints(self, keys: list[str]) -> list[int]:
        """``fingerprint`` of each key, in one call (a pasted stretch: a thousand at once)."""
        if self._fp is stable_fingerprint:
            if len(keys) >= 32:   # (fewer keys: the calls would cost more than they save)
                return _stable_fingerprints(keys)
            return [int.from_bytes(blake2b(k.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                                   "little", signed=True) or 1 for k in keys]
        fp = self._fp
        return [fp(k) or 1 for k in keys]

    def has(self, h: int) -> bool:
        """Is the key of fingerprint ``h`` a member?"""
        table, mask = self._table, self._mask
        i = h & mask
        while True:
            v = table[i]
            if v == h:
                return True
            if v == _EMPTY:
                return False
            i = (i + 1) & mask

    def has_many(self, fps: list[int]) -> list[bool]:
        """``has`` of each fingerprint, in one call."""
        table, mask, out = self._table, self._mask, []
        put = out.append
        for h in fps:
            i = h & mask
            v = table[i]
            while v and v != h:   # (v: not _EMPTY)
                i = (i + 1) & mask
                v = table[i]
            put(v == h)
        return out

    def add_many(self, fps: Collection[int]) -> list[bool]:
        """``add_fingerprint`` of each fingerprint in turn: which were new (room made for all
        of them first, so the table grows at most once)."""
        self.reserve(self._count + len(fps))
        table, mask, out = self._table, self._mask, []
        put = out.append
        for h in fps:
            i = h & mask
            v = table[i]
            while v and v != h:   # (v: not _EMPTY)
                i = (i + 1) & mask
                v = table[i]
            if v:
                put(False)
            else:
                table[i] = h
                put(True)
        self._count += out.count(True)
        return out

    def add(self, key: str) -> bool:
        """Insert ``key``; True when it was not there before."""
        return self.add_fingerprint(self._fp(key) or 1)

    def add_fingerprint(self, h: int) -> bool:
        """Insert the key of fingerprint ``h``; True when it was not there before."""
        table, mask = self._table, self._mask
        i = h & mask
        while True:
            v = table[i]
            if v == h:
                return False
            if v == _EMPTY:
                table[i] = h
                self._count += 1
                if self._count * 4 > (mask + 1) * 3:
                    self._grow()
                return True
            i = (i + 1) & mask

    def reserve(self, count: int) -> None:
        """Room for ``count`` members at once (a paste of a million lines: one copy of the table
        now, not one per doubling while it is judged)."""
        size = self._mask + 1
        while count * 4 > size * 3:
            size *= 2
        if size > self._mask + 1:
            self._grow(size)

    def _grow(self, size: int = 0) -> None:
        old = self._table
        size = size or (self._mask + 1) * 2
        table = array("q", bytes(8 * size))
        mask = size - 1
        for h in old:
            if h:
                i = h & mask
                while table[i]:
                    i = (i + 1) & mask
                table[i] = h
        self._table, self._mask = table, mask

    def nbytes(self) -> int:
        return self._table.itemsize * len(self._table)

    # -- saved and loaded with the frontier view (stable tables only) --------------------------------
    def state(self) -> tuple[array, int]:
        """The table and member count, to be written as they are."""
        assert self.stable, "only a stable table means anything to another process"
        return self._table, self._count

    @classmethod
    def from_table(cls, table: array, count: int) -> "SeenSet":
        """A stable set over a table written by ``state`` (its size must be a power of two)."""
        size = len(table)
        if table.typecode != "q" or size < 1024 or size & (size - 1):
            raise ValueError("not a fingerprint table")
        s = cls(stable=True)
        s._table, s._mask, s._count = table, size - 1, count
        return s


# -- one table shared by every process of a crawl ------------------------------------------------------

HEADER = 4096   # bytes before the table: a page, so the slots stay aligned
MAGIC = b"spdseen1"
# The header after the magic, int64 each: this file's generation; set once a newer file replaced
# it at the path (every process then maps that one); slots; members; set while a process changes
# the table (a holder killed in the middle leaves it set: the table is rebuilt); the inode of the
# queue.txt it covers and the byte up to which every line of that file was taken in.
_GEN, _SUPERSEDED, _SLOTS, _COUNT, _DIRTY, _QUEUE_INO, _UPTO = range(1, 8)


class TableGone(Exception):
    """The shared table cannot be trusted (a holder was killed while changing it, or the file
    was cut or replaced by something else): rebuild it from the files."""


class SharedSeen(SeenSet):
    """A ``SeenSet`` (stable fingerprints, the same layout and probing) in one memory-mapped file that every
    process of a crawl maps: the pages are in memory once, however many workers there are.

    Derived state, like frontier.view: written at each start from what the store read, changed
    only under the store's lock, never trusted across runs. The store takes a line in once, in the
    first process that reads it (``upto``), and writes the queue line before it puts its
    fingerprint here, so the table never knows a URL the files do not. A process killed while
    changing it leaves ``dirty`` set; the next one to take the lock rebuilds it (``FileStore``).
    Grown (or rebuilt) by writing a bigger file and replacing it at the path; the old file is then
    marked superseded, and every process maps the new one when it next takes the lock (``follow``).
    """

    stable = True
    _fp = staticmethod(stable_fingerprint)

    def __init__(self, path: Path, fd: int) -> None:   # noqa: super().__init__ would allocate a table
        self.path = path
        self._fd: int | None = None
        self._map(fd)

    @property   # type: ignore[override]
    def _count(self) -> int:   # the members, in the file's header: every process sees one count
        return self._h[_COUNT]

    @_count.setter
    def _count(self, n: int) -> None:
        self._h[_COUNT] = n

    def _map(self, fd: int) -> None:
        """Map the file of ``fd`` (checked: magic, size) as ours; the descriptor becomes ours."""
        try:
            st = os.fstat(fd)
            head = os.pread(fd, 64, 0)
            if st.st_size < HEADER or len(head) < 64 or head[:8] != MAGIC:
                raise TableGone("not a table file")
            slots = int.from_bytes(head[8 * _SLOTS:8 * _SLOTS + 8], "little", signed=True)
            if slots < 1024 or slots & (slots - 1) or st.st_size != HEADER + 8 * slots:
                raise TableGone("table file of the wrong size")
            mm = mmap.mmap(fd, st.st_size)
        except (OSError, ValueError, TableGone):
            os.close(fd)
            raise TableGone(f"{self.path}: not a whole table file") from None
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._size, self._mm = fd, st.st_size, mm
        self._h = memoryview(mm)[:64].cast("q")
        self._table = memoryview(mm)[HEADER:].cast("q")
        self._mask = slots - 1

    @classmethod
    def create(cls, path: Path, table: Sequence[int] | None, count: int, queue_ino: int, upto: int,
               slots: int = 0, copy_from: tuple[int, int] | None = None) -> "SharedSeen":
        """Write a new table file (``table``'s slots, or ``slots`` empty ones and marked dirty until
        the caller fills them, or ``slots`` copied from ``copy_from``: (descriptor, offset), in the
        kernel) and put it at ``path``, superseding the file there; returns it mapped."""
        path = Path(path)
        slots = len(table) if table is not None else slots
        old = _open_table(path)
        gen = 1
        if old is not None:
            gen += int.from_bytes(os.pread(old, 8, 8 * _GEN), "little", signed=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            size = HEADER + 8 * slots
            os.ftruncate(fd, size)
            _allocate(fd, size)
            head = array("q", [0] * 8)
            head[_GEN], head[_SLOTS], head[_COUNT], head[_QUEUE_INO], head[_UPTO] = gen, slots, count, queue_ino, upto
            head[_DIRTY] = table is None and copy_from is None
            _pwrite_all(fd, MAGIC + head[1:].tobytes(), 0)
            if table is not None:
                _pwrite_all(fd, memoryview(table).cast("B"), HEADER)
            elif copy_from is not None:
                _copy_all(copy_from[0], copy_from[1], fd, HEADER, 8 * slots)
            os.replace(tmp, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                tmp.unlink()
            if old is not None:
                os.close(old)
            raise
        if old is not None:   # every process that maps it moves to the new one at its next lock
            with contextlib.suppress(OSError):
                os.pwrite(old, (1).to_bytes(8, "little"), 8 * _SUPERSEDED)
            os.close(old)
        return cls(path, fd)

    def follow(self) -> None:
        """At each lock: map the file that replaced ours, if one did; TableGone if the table
        cannot be trusted (a holder killed while changing it, the file cut)."""
        for _ in range(5):
            if os.fstat(self._fd).st_size < self._size:   # (before any look at the mapping)
                raise TableGone("the table file was cut")
            if self._h[_SUPERSEDED]:
                fd = _open_table(self.path)
                if fd is None:
                    raise TableGone("the table file is gone")
                self._map(fd)
                continue
            if self._h[_DIRTY]:
                raise TableGone("a process was killed while changing the table")
            return
        raise TableGone("the table file keeps being replaced")

    def covers(self) -> tuple[int | None, int, int]:
        """(queue.txt inode, byte, members) as the file's header says, read without touching the
        mapping (a file cut under it would fault); (None, 0, 0) when there is no header."""
        try:
            head = os.pread(self._fd, 64, 0)
        except OSError:
            head = b""
        if len(head) < 64 or head[:8] != MAGIC:
            return None, 0, 0
        field = lambda k: int.from_bytes(head[8 * k:8 * k + 8], "little", signed=True)   # noqa: E731
        return field(_QUEUE_INO), field(_UPTO), field(_COUNT)

    @property
    def generation(self) -> int:
        return self._h[_GEN]

    def upto(self, queue_ino: int | None) -> int:
        """The byte of the queue.txt of that inode up to which every line was taken in (0: none)."""
        return self._h[_UPTO] if queue_ino is not None and self._h[_QUEUE_INO] == queue_ino else 0

    def begin(self) -> None:
        """About to change the table (caller holds the store's lock)."""
        self._h[_DIRTY] = 1

    def covered(self, queue_ino: int, upto: int) -> None:
        """Done changing it: every line of that queue.txt up to ``upto`` is in."""
        h = self._h
        h[_QUEUE_INO], h[_UPTO], h[_DIRTY] = queue_ino, upto, 0

    def _grow(self, size: int = 0) -> None:
        """A file of ``size`` slots (twice the size by default), filled from this one, in place of
        it (the lock is held)."""
        h = self._h
        new = SharedSeen.create(self.path, None, self._count, h[_QUEUE_INO], h[_UPTO],
                                slots=size or (self._mask + 1) * 2)
        table, mask = new._table, new._mask
        for v in self._table:
            if v:
                i = v & mask
                while table[i]:
                    i = (i + 1) & mask
                table[i] = v
        new._h[_DIRTY] = h[_DIRTY]   # still in the middle of the change that made it grow
        os.close(self._fd)
        self._fd, self._size, self._mm, self._h, self._table, self._mask = \
            new._fd, new._size, new._mm, new._h, new._table, new._mask
        new._fd = None

    def state(self) -> tuple[memoryview, int]:   # type: ignore[override]
        """The table (mapped, not copied) and member count, to be written as they are."""
        return self._table, self._count


def _open_table(path: Path) -> int | None:
    """A descriptor of the table file at ``path`` if it is one of ours (its magic), else None."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    if os.pread(fd, 8, 0) != MAGIC:
        os.close(fd)
        return None
    return fd


def _allocate(fd: int, size: int) -> None:
    """Give the file its disk blocks now: a full disk is then an OSError here, not a SIGBUS when
    a process writes to a page of the mapping. A file system that cannot allocate ahead is
    used as it is."""
    try:
        os.posix_fallocate(fd, 0, size)
    except AttributeError:
        pass
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise


def _copy_all(src: int, at: int, dst: int, to: int, count: int) -> None:
    """``count`` bytes of ``src`` from ``at`` to ``dst`` at ``to``: in the kernel where it can."""
    end = at + count
    with contextlib.suppress(AttributeError, OSError):
        while at < end:
            n = os.copy_file_range(src, dst, end - at, at, to)
            if n <= 0:
                break
            at, to = at + n, to + n
    while at < end:
        data = os.pread(src, min(end - at, 1 << 24), at)
        if not data:
            raise OSError(f"the table to copy ends {end - at} bytes early")
        _pwrite_all(dst, data, to)
        at, to = at + len(data), to + len(data)


def _pwrite_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view[:1 << 26], offset)
        view, offset = view[n:], offset + n
