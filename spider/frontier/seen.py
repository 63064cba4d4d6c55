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
"""

from __future__ import annotations

from array import array
from hashlib import blake2b
from typing import Callable, Iterable

_EMPTY = 0


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
        if self._fp is stable_fingerprint:   # (stable_fingerprint inline: no call a key)
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
