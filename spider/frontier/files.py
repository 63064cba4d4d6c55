"""The file store and its claim protocol: every state change of a URL, in one file.

A URL is in exactly one state: pending (a line of queue.txt not yet claimed), in flight (claimed
by a live worker), crawled (a line of crawled.txt) or failed (a line of failed.txt). The files:

- ``queue.txt``: pending URLs. During a run it is only appended to (new links, retries, released
  claims); the lines at its head that have been claimed stay in the file until the run ends (or the
  next run starts), when it is rewritten atomically with only the pending lines. ``claims.txt`` says
  which lines are taken, so nothing needs to rewrite a big file per page.
- ``claims.txt``: an append-only journal of the claim protocol, one record per line:

  ``C <offset> <end> <owner pid> <host next-allowed time> <queue line>``  a worker claimed the
  queue line at bytes [offset, end) and reserved its host until that time;
  ``S <offset> <end> <counted>``  a line skipped (blank, comment, or garbage reported in rejected.txt);
  ``D <kind> <url>``  the claim on url is over (crawled, failed, hop, retry, released, reissued);
  ``H <host> <time>``  a host reservation without a queue line.

- ``crawled.txt`` / ``failed.txt`` / ``rejected.txt``: append-only outcome logs (``records``).

The claim step: take ``frontier.lock`` (a sidecar file, never a data file), read what other
processes appended since our last look (incremental reads of append-only files, so the cost does
not grow with the queue), ask the selection index (``spider/order.py``: the pending lines by host
and priority) for the best URL of a host that is ready (retry time come, budget left; at --delay 0
a few URLs of hosts that keep no pace, ``batch_size``), append one journal write, release the lock.
Network I/O never happens under the lock. Every write is one ``os.write`` of whole lines, which a
kill cannot tear. Whole-file rewrites (start and end of a run) go through ``atomic_write``.

Recovery after a kill, a power cut or a hand edit is ``recovery.py``; the verbs every store
offers are ``contract.py``.

Each process keeps derived state: the journal cursor, hosts' next-allowed times, in-flight claims,
the selection index of pending lines, and a ``SeenSet`` of every URL ever queued, crawled or
failed (deduplication without re-reading files). A crawl's processes share that table instead
(``FileStore(shared=True)``: seen.bin, mapped by all of them, seen.py ``SharedSeen``): a line is
taken into it once, by the first process that reads it, and a hand-written line of a known URL is
then refused with an ``S`` record, so every process agrees. A replaced file (new inode) makes a process rebuild its view from the files.
A clean stop saves the view in ``frontier.view`` and a start whose files are exactly as that stop
left them loads it instead of reading them (``spider/frontier/view.py``: ``save_view``, ``_carry_view`` at
the fold, ``_load_view``).
"""

from __future__ import annotations

import contextlib
import fcntl
import heapq
import math
from bisect import bisect_right
import os
import re
import sys
import time
from array import array
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Iterator

from .. import safefs
from ..safefs import append_text, atomic_write, atomic_write_with   # the store's names for them
from .contract import Claim, ClaimResult, Counts, StoreError, claim_limit, delayed_wait
from ..records import (CRAWLED_HEADER, FAILED_HEADER, QUEUE_HEADER, REJECTED_HEADER, QueueEntry,
                      data_fields, first_field, is_data, is_redirect_hop, parse_queue_line, refusal_key, rejected_line)
from ..politeness import HostState, parse_host_line
from ..order import Frontier, Order
from ..patterns import compile_pattern
from .seen import SeenSet, SharedSeen, TableGone
from . import paste as pastes
from . import view as views
from ..urls import host_key, normalize

HASHES, DUPLICATES, CHECKS = "hashes.txt", "duplicates.txt", "checks.txt"
QUEUE, CLAIMS, CRAWLED, FAILED, REJECTED, HOSTS = ("queue.txt", "claims.txt", "crawled.txt",
                                                    "failed.txt", "rejected.txt", "hosts.txt")
HEADERS = {QUEUE: QUEUE_HEADER, CRAWLED: CRAWLED_HEADER, FAILED: FAILED_HEADER,
           REJECTED: REJECTED_HEADER, HASHES: "# text_hash\tfirst_url\n",
           DUPLICATES: "# url\tkind\tof_url\n", HOSTS: "# host\tnext_allowed\tdelay\tfailures\treason\n", CLAIMS: "# claim journal of the running crawl; see README\n"}
READ_CHUNK = 1 << 20
FAR_AHEAD = pastes.FAR_AHEAD   # no wait the crawler sets is this long: a later time is a typo
VIEW = "frontier.view"   # a saved view of the frontier (spider/frontier/view.py): a cache, safe to delete
SEEN = "seen.bin"   # the crawl's dedup table, mapped by every process (seen.py ``SharedSeen``): rewritten at each start
BAD_LINE_SCORE = -(1 << 40)   # a line that is not a URL is taken first, to be reported soon
HOT_URLS = 4096   # URLs a process remembers as known (``FileStore.known``): a site's menus fit
_PID = [os.getpid()]   # this process's pid: os.getpid() is a system call, and the store asked per lock
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))   # a forked worker: its own
_NO_STATE = HostState()   # a host never heard of (frozen: shared, not built per question)
ENDED = frozenset({"crawled", "failed", "rejected"})   # logs whose last line a person may leave open
_OUTCOME_LOG = {"failed": "failed", "rejected": "rejected"}   # the log of a settled claim's record (else crawled)
CLAIM_BATCH = 4   # URLs a worker's claim takes at --delay 0 while their hosts keep no pace (``batch_size``)
PASTE_LINES = 500   # pasted lines judged per claim step (paste.py): the first fetch does not wait for them
PASTE_ROUNDS = 20   # more steps of it in one claim when nothing else can be taken
PASTE_WARNINGS = 10   # bad pasted lines a process names on the terminal (all go to rejected.txt)
LOGS = {"crawled": CRAWLED, "failed": FAILED, "rejected": REJECTED, "fetch": "fetch.log", "errors": "errors.log",
        "duplicates": DUPLICATES, "checks": CHECKS, "schedule": "schedule.txt", "removed": "removed.txt", "links": "links.txt"}


class FrontierLock:
    """An exclusive ``flock`` on the sidecar ``frontier.lock``, held for microseconds.

    Why not ``filelock.FileLock`` here: it waits by polling (50 ms by default), and opens and
    closes the lock file on every acquire. Measured on this project's 2-core machine, 4 processes
    taking a lock 1500 times each: 1.70 s with FileLock, 0.92 s with a 0.5 ms poll, 0.05 s with a
    kernel-blocking ``flock`` (waiters sleep in the kernel and wake when it is released). A worker
    takes this lock once or twice a page (a claim, at --delay 0 one for a few pages, and one
    ``FileStore.hold`` for the page's text hash, links and outcome), so that is most of the
    difference between one worker and eight. Taken again by the process that holds it (a step
    inside a hold), it only counts: the outermost release lets go. filelock still guards ``crawl.lock`` (one crawl per project), where a
    clear timeout message matters more than microseconds. The descriptor is per process (it is
    reopened after a fork), so a forked worker never shares its parent's lock.
    """

    def __init__(self, path: Path) -> None:
        self.lock_file = str(path)
        self._fd: int | None = None
        self._pid = 0
        self.depth = 0   # nested holds of this process (``FileStore.hold``): the outermost one locks
        self.holds = 0   # outermost acquisitions so far: names the current hold (``_File.known``)

    def __enter__(self) -> "FrontierLock":
        if self._pid != _PID[0]:
            self._fd = safefs.open_fd(self.lock_file, os.O_RDWR | os.O_CREAT)
            self._pid, self.depth = _PID[0], 0
        elif self.depth:   # held already by this process: a step of a longer hold
            self.depth += 1
            return self
        fd = self._fd
        assert fd is not None
        # Blocks in the kernel until the holder lets go; a holder that dies (even by SIGKILL)
        # lets go with it. Nobody holds it across network I/O, so the wait is microseconds.
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.depth = 1
        self.holds += 1
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._fd is not None
        self.depth -= 1
        if not self.depth:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


class _File:
    """One project file held open for reading new lines and appending whole lines.

    A lock hold looks at each file once (``look``: one ``stat`` of its path) and passes what it
    saw to ``reopen_if_replaced`` and the reads: the size of the file we hold is the size at its
    path when the inode is the same, and under the frontier lock no process of the crawl
    appends between the look and the read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)   # for os calls: a Path converts itself on every call
        self.fd: int | None = None
        self.ino: int | None = None
        self.pos = 0
        # (lock hold, size): the file's size as that hold of the frontier lock saw it when it
        # began or left it with our own appends (``size_in``); no process of the crawl appends
        # to the journal without the lock, so within the hold it is the size, no fstat needed.
        self.known = (0, 0)

    def size_in(self, hold: int) -> int | None:
        """The file's size as lock hold ``hold`` knows it (``known``), else None (ask)."""
        h, size = self.known
        return size if h == hold else None

    def look(self) -> os.stat_result | None:
        """The file at our path now (None: there is none)."""
        try:
            return os.stat(self.name)
        except FileNotFoundError:
            return None

    def reopen_if_replaced(self, st: os.stat_result | None | bool = True) -> bool:
        """True when the file was replaced (or first opened): the reader must start over.
        ``st``: what ``look`` just saw (by default, look now)."""
        if st is True:
            st = self.look()
        ino = None if st is None else st.st_ino   # type: ignore[union-attr]
        if ino == self.ino and self.fd is not None:
            return False
        self.close()
        if ino is None:
            try:
                append_text(self.path, HEADERS.get(self.path.name, ""))
            except PermissionError:
                pass
        try:
            self.fd = safefs.open_fd(self.path, os.O_RDWR | os.O_APPEND)
        except PermissionError:   # a read-only project can still be reported on
            self.fd = safefs.open_read(self.path)
        self.ino = os.fstat(self.fd).st_ino
        self.pos = 0
        return True

    def replaced(self, st: os.stat_result | None | bool = True) -> bool:
        """Is the file at our path another one than we hold open (or gone)? ``st`` as above."""
        if st is True:
            st = self.look()
        return st is None or st.st_ino != self.ino   # type: ignore[union-attr]

    def read_chunks(self, size: int | None = None) -> Iterator[tuple[int, bytes]]:
        """Whole lines appended since the last call, as (offset, bytes) chunks of about 1 MB.

        A line still being written (no newline yet) waits for the next call; a line longer than
        a chunk is read whole, never cut. ``size``: the file's size if just seen (``look``)."""
        assert self.fd is not None
        if size is None:
            size = os.fstat(self.fd).st_size
        chunk = READ_CHUNK
        while self.pos < size:
            data = os.pread(self.fd, min(size - self.pos, chunk), self.pos)
            stop = data.rfind(b"\n") + 1
            if stop == 0:
                if self.pos + len(data) >= size:
                    return
                chunk *= 2
                continue
            chunk = READ_CHUNK
            base = self.pos
            self.pos += stop
            yield base, data[:stop] if stop < len(data) else data

    def read_new(self, size: int | None = None) -> Iterator[tuple[int, int, str]]:
        """Complete lines appended since the last call, with their byte offsets.

        Read in chunks, so catching up with a 60 MB queue.txt does not hold 60 MB at once."""
        for base, data in self.read_chunks(size):
            start, stop = 0, len(data)
            while start < stop:
                nl = data.find(b"\n", start, stop) + 1 or stop
                yield base + start, base + nl, data[start:nl].decode("utf-8", "replace")
                start = nl

    def read_at(self, offset: int, limit: int) -> bytes:
        assert self.fd is not None
        return os.pread(self.fd, limit, offset)

    def append(self, text: str, size: int | None = None) -> tuple[int, int]:
        """Append whole lines; returns the offsets they start and end at.

        Our lines start on a line of their own: a last line without its newline (typed by hand
        with ``printf ... >>`` while the crawl runs) is ended first, or our first line would be
        glued to it and both lost. The caller holds the frontier lock, so no other process of
        the crawl appends between the look at the last byte and the write. A file that ends
        where we last read it ends with the newline of the line we read last (``pos`` is always
        just past a newline), so only a file that grew since needs its last byte read. ``size``:
        the file's size as this lock hold just saw it (``look``), else asked."""
        assert self.fd is not None
        offset = os.fstat(self.fd).st_size if size is None else size
        data = ours = text.encode("utf-8")
        if offset and offset != self.pos and os.pread(self.fd, 1, offset - 1) != b"\n":
            data, offset = b"\n" + ours, offset + 1
        safefs.write_whole(self.fd, data, self.path)
        return offset, offset + len(ours)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
        self.fd, self.ino, self.pos, self.known = None, None, 0, (0, 0)


class _Hold:
    """``FileStore.hold`` (a class, not a generator: it is entered once a page)."""

    __slots__ = ("store", "outer")

    def __init__(self, store: "FileStore") -> None:
        self.store, self.outer = store, False

    def __enter__(self) -> None:
        store = self.store
        lock = store.lock
        try:
            lock.__enter__()
            if store._holding:
                return
            try:
                store._sync()
            except BaseException:
                lock.__exit__()
                raise
        except OSError as e:
            raise store._error(e) from None
        store._holding = self.outer = True

    def __exit__(self, *exc: object) -> None:
        if self.outer:
            self.store._holding = self.outer = False
        self.store.lock.__exit__()


class _Staged:
    """The shared dedup table as the paste judge sees it: its members, and apart from them the
    stretch's new URLs, which the table may learn only once their lines are written (the table
    never knows a URL that no file holds)."""

    def __init__(self, table: SeenSet) -> None:
        self.table, self.fresh = table, set()   # type: set[int]
        self.fingerprint, self.fingerprints = table.fingerprint, table.fingerprints

    def has(self, fp: int) -> bool:
        return fp in self.fresh or self.table.has(fp)

    def add_fingerprint(self, fp: int) -> bool:
        if fp in self.fresh or self.table.has(fp):
            return False
        self.fresh.add(fp)
        return True

    def add_many(self, fps: list[int]) -> list[bool]:
        """``add_fingerprint`` of each in turn (the table asked once for all of them)."""
        fresh = self.fresh
        add = fresh.add   # (returns None: "not add(fp)" is True, and fp is held apart)
        return [not known and fp not in fresh and not add(fp) for fp, known in zip(fps, self.table.has_many(fps))]


class FileStore:
    """The frontier of one project folder, shared by every worker through its files."""

    def __init__(self, folder: Path, *, owner: int | None = None, max_pages: int | None = None,
                 max_per_host: int | None = None, track_seen: bool = True,
                 order: Order | None = None, only: tuple[str, ...] = (), seeds: Iterable[str] = (),
                 shared: bool = False) -> None:
        self.folder = Path(folder)
        self.order = order or Order()
        # A discovery run fetches only seeds, rechecks and URLs matching these; the rest wait.
        self.only = tuple(compile_pattern(p) for p in only)
        self._seeds = frozenset(seeds)
        self.owner = os.getpid() if owner is None else owner
        self.max_pages = max_pages
        self.max_per_host = max_per_host
        self.lock = FrontierLock(self.folder / "frontier.lock")
        self._queue = _File(self.folder / QUEUE)
        self._claims = _File(self.folder / CLAIMS)
        self._hashes = _File(self.folder / HASHES)
        self._texts: dict[int, int] = {}   # 64 bits of a text hash -> offset of its line in hashes.txt
        self._log_fds: dict[str, tuple[int, Path]] = {}     # open append-only logs of this process
        self._log_pid = _PID[0]
        self._log_ends: dict[str, int] = {}   # where our last record ended in an outcome log (``_end_log``)
        self._log_inos: dict[str, int] = {}   # the inode our rejected.txt descriptor writes to
        self._hot: set[str] = set()   # URLs found in self.seen lately (``known``)
        self._hot_of: SeenSet | None = None   # the table they were found in
        self._cold: dict[str, int] = {}   # URLs found missing lately, and their fingerprints (``known``)
        self._fps: dict[str, int] = {}   # the URLs an add is writing, and their fingerprints (``_add``)
        self._track_seen = track_seen
        self._indexing = True   # False: the dedup table only, for judging pasted lines (drop_index)
        self.seen: SeenSet | SharedSeen = SeenSet(stable=True)   # stable: it is saved in frontier.view
        # ``shared``: after open, the table is one file every process of the crawl maps (seen.bin,
        # ``_share``), taken in once by the first process that reads a line, not once per worker.
        # Not with --max-pages-per-host: its per-host counts are kept per process, by "new to me".
        self._want_shared = shared and max_per_host is None
        self._shared = False
        self._skips: list[str] = []   # S records for hand lines refused when first read (shared table)
        self._kept: SharedSeen | None = None   # the shared table, kept by a watcher for the fold
        self.from_view = False   # did open() load frontier.view instead of reading the files?
        self._view_ino: int | None = None   # the queue.txt inode our saved or loaded view describes
        self._over_budget = SeenSet()
        self._rejects = _File(self.folder / REJECTED)   # read as others append: refused URLs logged once
        self._refusals = SeenSet()   # the keys (``refusal_key``) of rejected.txt's lines
        self.warn: Callable[[str], None] = _warn   # says what the store did about a hand edit
        # Why the crawl's settings refuse a URL (scope, depth, traps), for pasted lines; None: never.
        self.admit: Callable[[str, int], str | None] | None = None
        self.admit_many: Callable[[list[str], int], list[str | None]] | None = None   # (admit's, a run at once)
        self.needs_recovery = False   # open(paste_from=...) found no saved view to go on from
        self._paste_warned = 0
        self._base = Counts()
        self._admitted: dict[str, int] = {}      # distinct URLs admitted per host (host budget)
        self._holding = False   # inside ``hold``: synced once, the steps need not look again
        self._read: tuple[int, bytes] = (0, b"")   # queue.txt bytes a claim step read (``_line_at``)
        self.batch = 1   # URLs of hosts that keep no pace one claim may take (``claim``; CLAIM_BATCH)
        self._reset_view()

    # -- derived state ---------------------------------------------------------------------------
    def _load_hosts(self) -> None:
        """hosts.txt: the per-host state the last run left (the journal's H records update it)."""
        self._host_next: dict[str, float] = {}       # next allowed time (hot: read per claim)
        self._host_state: dict[str, HostState] = {}  # delay, failures, reason per host
        for host, state in read_hosts(self.folder).items():
            self._host_state[host] = state
            self._host_next[host] = state.next_allowed

    def _reset_view(self) -> None:
        self._cursor = 0                   # first byte of queue.txt not consumed
        self._ahead: dict[int, int] = {}   # lines consumed out of order: offset -> end
        self._lines = 0                    # data lines in queue.txt
        self._consumed = 0                 # data lines of queue.txt claimed or skipped
        self._inflight: dict[str, tuple[int, str]] = {}   # url -> (owner, queue line)
        self._idle: tuple[tuple[int, int], float] | None = None   # last search found all waiting
        self._frontier = Frontier(self.order.lifo)   # pending lines by host and priority
        self._rechecks = Frontier(self.order.lifo)   # the recheck lines among them, again: what
        # may still be claimed once --max-pages is reached (a check completes no new URL)
        self._held = 0   # pending lines a discovery run leaves alone (``only``)
        # Lines appended during the run that are refused when claimed: offset -> reason (""
        # for a hand-written line of a URL already known: dropped silently, as start-up does).
        self._refuse: dict[int, str] = {}
        self._delayed: list[tuple[float, int, str, int, bool]] = []   # retries not yet due: (time, off, host, score, recheck)
        self._crawled = 0
        self._hops = 0
        self._failed = 0
        self._refused = 0
        self._rechecked = 0
        self._records = 0   # journal records applied (a view is saved only without any)
        # Lines pasted into queue.txt, not judged yet (paste.py): [next byte, end, line number of
        # the next line (0: not counted yet), lines left]; the stretch it began as; and the
        # stretches judged so far (each consumed by one S record).
        self._paste: list[int] | None = None
        self._paste_span: tuple[int, int] | None = None
        self._spans: list[tuple[int, int]] = []
        self._folded_paste: list[int] | None = None

    def open(self, *, lock: bool = True, paste_from: int | None = None) -> "FileStore":
        """Build this process's view from the files (call once, then share it with forked workers).

        ``lock=False`` is for readers such as ``status``: a consistent-enough snapshot without
        holding up the workers while a big queue is read. ``paste_from``: queue.txt is as the
        last clean stop left it up to that byte, and lines were pasted after it
        (``recovery.pasted_from``): go on from the saved view and judge the pasted lines during
        the crawl. Without a view to go on from, nothing is read and ``needs_recovery`` is set.
        """
        self._guard(self._open, lock, paste_from)
        return self

    def _open(self, lock: bool, paste_from: int | None = None) -> None:
        with (self.lock if lock else contextlib.nullcontext()):
            self._base = Counts()
            self._admitted = {}
            self._load_hosts()
            for name in (CRAWLED, FAILED, REJECTED):
                if not (self.folder / name).exists():
                    append_text(self.folder / name, HEADERS[name])
            self._queue.close()
            self._claims.close()
            if not (lock and self._load_view(paste_from)):
                if paste_from is not None:
                    self.needs_recovery = True
                    return
                for name in (CRAWLED, FAILED):
                    self._take_outcomes(name, 0)
            self._sync()
            # The journal's D records so far are already lines of crawled/failed.txt (counted
            # above); only those appended from now on add to the counts.
            self._crawled = self._hops = self._failed = 0
            if lock and self._want_shared and self._track_seen:
                if self._shared:   # (from the view) every line read is in it, pasted ones left out
                    self.seen.covered(self._queue.ino, self._queue.pos)   # type: ignore[union-attr, arg-type]
                else:
                    self._share(self.seen)   # type: ignore[arg-type]
        _give_back_memory()   # reading a big queue leaves freed chunks in the heap; every worker forks it

    def _take_outcomes(self, name: str, start: int) -> None:
        """Count the lines of crawled.txt or failed.txt from byte ``start`` on, and mark their URLs seen."""
        # (With the shared table, crawled and failed URLs are in it already: they were queue lines.)
        track, seen_add, counting = self._track_seen and not self._shared, self.seen.add, self.max_per_host is not None
        with open(self.folder / name, "rb") as f:
            f.seek(start)
            bom = start == 0   # a BOM (Notepad's) can only be at the very start
            for raw in f:
                if bom:
                    raw, bom = raw.removeprefix(b"\xef\xbb\xbf"), False
                line = raw.decode("utf-8", "replace")
                if not is_data(line):
                    continue
                url = first_field(line)
                if track and seen_add(url) and counting:
                    h = host_key(url)
                    self._admitted[h] = self._admitted.get(h, 0) + 1
                if name == FAILED:
                    self._base.failed += 1
                elif is_redirect_hop(line):
                    self._base.hops += 1
                else:
                    self._base.crawled += 1

    def hold(self) -> "_Hold":
        """One lock hold for several steps (a page's text hash, links, logs and outcome): the
        files are looked at once, not once a step. Steps taken inside are not synced again: no
        process of the crawl writes while we hold the lock, and an edit by hand lands before or
        after the hold as it would between two steps. No network I/O inside."""
        return _Hold(self)

    def _sync(self) -> None:
        """Catch up with what other processes appended (caller holds the lock).

        A queue.txt removed, replaced or cut by hand is rebuilt first (``_rebuild``). A pair
        replaced during the run (a rebuild, by any process) is read from the start; the pages
        done are then counted from crawled.txt and failed.txt, not from journal records: a
        process may have missed a whole journal (two edits in a row), and a journal copied by
        hand repeats records already counted ("crawled 71" against 62 lines after a sed -i)."""
        if self._holding:   # synced when the hold began (``hold``)
            return
        running = self._queue.fd is not None and self._claims.fd is not None
        if self._shared:
            gen = self.seen.generation   # type: ignore[union-attr]
            try:
                self.seen.follow()   # type: ignore[union-attr]
            except TableGone:
                self._rebuild_seen()
            if self.seen.generation != gen:   # type: ignore[union-attr]
                self._hot_of = None   # another table: what ``known`` remembers of the old one goes
        # One look at each file per lock hold (a stat of its path): the edit checks, the
        # "replaced?" checks and the reads below all use it.
        sq, sc = self._queue.look(), self._claims.look()
        if running:
            edit = self._queue_edit(sq, sc)
            if edit:
                self._rebuild(edit)
                sq, sc = self._queue.look(), self._claims.look()   # the pair it wrote
        if self._queue.reopen_if_replaced(sq) | self._claims.reopen_if_replaced(sc):
            self._queue.pos = 0
            self._claims.pos = 0
            keep = (self._crawled, self._hops, self._failed, self._refused, self._rechecked)
            self._reset_view()
            self._load_hosts()
            self._crawled, self._hops, self._failed, self._refused, self._rechecked = keep
            self._read_queue(judge=False)   # every line of it was judged when first read
            if running:
                self._recount()
            self._read_journal(count=not running)
        else:   # the same files as we hold: the sizes we just saw are theirs
            q, c = self._queue, self._claims
            # (Nothing appended since our last look, as mostly: nothing to read.)
            if sq.st_size != q.pos:   # type: ignore[union-attr]
                self._read_queue(size=sq.st_size, flush=False)   # type: ignore[union-attr]
            if sc.st_size != c.pos:   # type: ignore[union-attr]
                self._read_journal(size=sc.st_size)   # type: ignore[union-attr]
            if self.lock.depth:   # our records of this hold go at that size (``_journal``)
                c.known = (self.lock.holds, sc.st_size)   # type: ignore[union-attr]
            if self._skips:
                self._flush_skips()

    def _recount(self) -> None:
        """The pages done, from crawled.txt and failed.txt (the journal's records that settled
        them are in the files already: the outcome line is written first, under the lock)."""
        self._base = Counts()
        for name in (CRAWLED, FAILED):
            self._take_outcomes(name, 0)
        self._crawled = self._hops = self._failed = 0

    def _read_journal(self, count: bool = True, size: int | None = None) -> None:
        for _off, _end, line in self._claims.read_new(size):
            try:
                self._apply(line, count)
            except (ValueError, IndexError):
                continue   # not a journal record (a hand edit); recovery ignores it as well

    def _read_queue(self, judge: bool = True, size: int | None = None, flush: bool = True) -> None:
        """Take in the lines appended to queue.txt since the last look (ours included).

        This is most of a resume's start-up (a million pending lines are read once), so it works
        on whole chunks: an ASCII chunk (every line the crawler writes) is decoded once and split
        in C; a chunk with other bytes is decoded line by line, so offsets stay exact. ``size``:
        queue.txt's size if known (a look, or the end of our own append), else asked.

        With the shared table, only the first process to read a line takes it in (``upto``);
        a hand-written line of a known URL is then refused by a journal record (``_skips``,
        written once the journal is read: ``flush``), so every process agrees."""
        seen_add, track = self.seen.add, self._track_seen
        fps = self._fps   # fingerprints of the URLs ``_add`` just wrote (worked out once)
        if fps:
            add_fp, real_add = self.seen.add_fingerprint, seen_add
            seen_add = lambda u: add_fp(fp) if (fp := fps.get(u)) else real_add(u)   # noqa: E731
        admitted, counting = self._admitted, self.max_per_host is not None
        index, cursor = self._index, self._cursor
        table = self.seen if self._shared and track else None
        upto = table.upto(self._queue.ino) if table is not None else 0   # type: ignore[union-attr]
        began = False
        for base, data in self._queue.read_chunks(size):
            ascii_ = data.isascii()
            if ascii_ and not track:   # a watcher (the parent, status) only counts lines
                self._lines += data.count(b"\n") - self._skip_not_data(base, data)
                continue
            lines: list = data.decode("ascii").split("\n") if ascii_ else data.split(b"\n")
            lines.pop()   # what follows the last newline: nothing
            off = base
            for raw in lines:
                end = off + len(raw) + 1
                line = raw if ascii_ else raw.decode("utf-8", "replace")
                if line[:4] == "http" or is_data(line):
                    self._lines += 1
                    if track:
                        fields = line.split("\t", 4)   # split once: dedup and the index both use it
                        url = fields[0].strip()
                        hand = len(fields) < 5   # not the crawler's shape: written by a person
                        if hand:
                            url = _normal(url)
                        if table is not None and not began and off >= upto:
                            table.begin()   # type: ignore[union-attr]
                            began = True
                        if off < upto:
                            pass   # taken in by the process that read it first (shared table)
                        elif seen_add(url):
                            if counting:
                                h = host_key(url)
                                admitted[h] = admitted.get(h, 0) + 1
                        elif hand and judge and off >= cursor:
                            # Added by hand while running, of a URL queued, crawled or failed
                            # already: dropped (start-up drops it too), never fetched twice.
                            # (Noted without an index too: a worker forked later builds one.)
                            if table is not None:   # the others took it in as pending: a record
                                self._skips.append(f"S\t{off}\t{end}\t1\n")
                            else:
                                self._refuse[off] = ""
                                if self._indexing:
                                    self._frontier.push("", BAD_LINE_SCORE, off)
                            off = end
                            continue
                        if off >= cursor and self._indexing:
                            index(off, fields, url)
                elif off >= self._cursor:
                    self._consume(off, end, False)   # blank and # lines: nothing to claim, every process agrees
                    cursor = self._cursor
                off = end
        if began:
            table.covered(self._queue.ino, max(upto, self._queue.pos))   # type: ignore[union-attr]
        if flush:
            self._flush_skips()

    def _flush_skips(self) -> None:
        """Journal the hand lines refused as known when first read (caller holds the lock, and
        has read the journal)."""
        if self._skips:
            skips, self._skips = self._skips, []
            self._journal(skips)

    # -- queue.txt changed by hand under the running crawl --------------------------------------------
    def _queue_edit(self, st: os.stat_result | None | bool = True,
                    claims: os.stat_result | None | bool = True) -> str | None:
        """How queue.txt was changed by something other than the crawler, if it was: ``removed``
        (rm), ``replaced`` (sed -i, an editor: a new file) or ``cut`` (truncated, or rewritten
        in place: shorter than what we read, or no newline where our last line ended). A new
        queue.txt whose journal names its inode (``_journal_head``) is a fold or another
        process's rebuild: the pair agrees, nothing to do. ``st``, ``claims``: what
        ``_File.look`` just saw of queue.txt and claims.txt (by default, look now)."""
        q = self._queue
        if st is True:
            st = q.look()
        if st is None:
            return "removed"
        if st.st_ino != q.ino:
            size = _journal_for(self.folder, st.st_ino)
            if size is None:
                return "replaced"
            return "cut" if st.st_size < size else None   # cut after the crawler wrote it
        if st.st_size < q.pos or (q.pos and q.read_at(q.pos - 1, 1) != b"\n"):
            return "cut"
        if self._claims.replaced(claims) and _journal_for(self.folder, st.st_ino) is None:
            return "journal"   # claims.txt removed or replaced by hand: our view of it still holds
        return None

    def _rebuild(self, edit: str) -> None:
        """Write queue.txt anew after a hand edit under the running crawl (lock held): nothing
        pending is lost, nothing done is queued again, the counts stay right.

        What is known: the claims in flight (the journal), what was pending in the old file (a
        removed or replaced file is still readable through our descriptor: its unclaimed lines),
        and the lines of the file as it is now (a person's edit; copies of claimed lines and
        lines of pages crawled or failed are dropped). A file cut in place is gone: its pending
        URLs are found again from links.txt (every link of a crawled page that is not crawled,
        failed or refused) and the seeds. The new queue.txt holds the claims in flight first,
        claimed again in a new journal, so every process takes the pair in as after a fold."""
        q = self._queue
        # The old file through our descriptor: cut as well (truncated, then replaced or removed
        # before anyone looked)? Then only links.txt and the seeds tell what was pending.
        intact = edit != "cut" and os.fstat(q.fd).st_size >= q.pos and \
            (not q.pos or q.read_at(q.pos - 1, 1) == b"\n")   # type: ignore[arg-type]
        self._read_journal()
        if edit != "journal" and self._claims.replaced():
            # Another process rebuilt (or folded) the pair, and the queue.txt it wrote was changed
            # by hand before we looked: our view of the queue is of an older file. Take the
            # journal in as it is now (claims in flight, pages done), and rebuild as for a cut.
            self._claims.reopen_if_replaced()
            self._inflight, intact = {}, False
            self._read_journal()
        if intact:
            self._read_queue()   # lines appended before the edit
        done = _outcome_urls(self.folder)
        consumed: dict[str, int] = {}   # claimed lines of the old file, by text
        pending: list[str] = []          # its unclaimed lines
        if intact:
            for off, line in _lines_of(self._queue.fd, 0):   # type: ignore[arg-type]
                if not is_data(line):
                    continue
                if not self._live(off):
                    consumed[line] = consumed.get(line, 0) + 1
                elif off not in self._refuse:
                    pending.append(line)
        inflight = {url: qline for url, (_, qline) in self._inflight.items()}
        lines: list[str] = [q + "\n" for q in inflight.values()]
        keys: set[tuple[str, bool]] = set()

        def put(line: str, edited: bool) -> None:
            line = line if line.endswith("\n") else line + "\n"
            fields = line.rstrip("\n").split("\t")
            url = _normal(fields[0].strip())
            recheck = len(fields) > 5 and fields[5].strip() == "recheck"
            if edited and consumed.get(line, 0):
                consumed[line] -= 1   # a copy of a line claimed already (sed -i copies them all)
            elif (url, recheck) not in keys and url not in inflight and (recheck or url not in done):
                keys.add((url, recheck))   # (a page crawled meanwhile has a line left only if
                lines.append(line)          # it was a hand-written copy: dropped, as at start-up)

        if edit != "removed":
            with open(self._queue.path, "rb") as f:
                for off, line in _lines_of(f.fileno(), 0):
                    if is_data(line):
                        put(line, True)
        for line in pending:
            put(line, False)
        if not intact:
            for line in _linked_pending(self.folder, done, self._seeds):
                put(line, True)
        records, w = [], len(QUEUE_HEADER.encode())
        for (url, qline), line in zip(inflight.items(), lines):
            host = host_key(url)
            nxt = self._host_next.get(host, 0.0)
            records.append(f"C\t{w}\t{w + len(line.encode('utf-8'))}\t{self._inflight[url][0]}\t"
                           f"{f'{nxt:.3f}' if nxt else '0'}\t{qline}\n")
            w += len(line.encode("utf-8"))
        write_hosts(self.folder, {h: self.host_state(h) for h in set(self._host_state) | set(self._host_next)})
        tmp = q.path.with_name(f".{QUEUE}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            f.write((QUEUE_HEADER + "".join(lines)).encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
            st = os.fstat(f.fileno())
        atomic_write(self.folder / CLAIMS, _journal_head(st) + "".join(records))   # first, as at a fold
        os.replace(tmp, q.path)
        self._view_ino = None   # the saved view describes no file any more
        how = {"removed": "queue.txt was removed", "replaced": "queue.txt was replaced (sed -i?)",
               "cut": "queue.txt was truncated or rewritten in place",
               "journal": "claims.txt was removed or replaced"}[edit]
        whence = "" if intact else " (found again from links.txt and the seeds; lines added by hand are lost)"
        self.warn(f"{how} while the crawl ran: rebuilt queue.txt with {len(lines) - len(inflight)} "
                  f"pending URL(s){whence} and {len(inflight)} in flight; edit it only while no crawl runs")

    def _skip_not_data(self, base: int, data: bytes) -> int:
        """Consume the blank and comment lines of an ASCII chunk of whole lines; returns how many.
        Only lines that start with whitespace, ``#`` or nothing can be such lines: found by a
        search for a newline followed by one of those (in C), then checked with ``is_data``."""
        starts = [0] if data[:1] in _SUSPECT_FIRST else []
        starts += [m.start() + 1 for m in _SUSPECT_START.finditer(data)]
        skipped = 0
        for st in starts:
            end = data.find(b"\n", st) + 1
            if end and not is_data(data[st:end].decode("ascii")):
                skipped += 1
                if base + st >= self._cursor:
                    self._consume(base + st, base + end, False)
        return skipped

    def _apply(self, record: str, count: bool = True) -> None:
        kind = record[:1]
        if kind in ("C", "D", "S", "H"):
            self._records += 1
        if kind == "C":
            _, off, end, owner, nxt, qline = record.rstrip("\n").split("\t", 5)
            self._claimed(int(off), int(end), int(owner), float(nxt), qline)
        elif kind == "D":
            _, what, url = record.rstrip("\n").split("\t", 2)
            self._settled(what, url, count)
        elif kind == "S":
            _, off, end, counted = record.rstrip("\n").split("\t")
            n = int(counted)   # data lines: 0 or 1, or the lines of a judged pasted stretch
            self._consume(int(off), int(end), n)
            p = self._paste
            if n > 1 or (p is not None and p[0] == int(off)):
                self._spans.append((int(off), int(end)))
            if p is not None and p[0] == int(off):
                if p[2]:   # the line number goes on by every line of the stretch, blank ones too
                    p[2] += self._queue.read_at(int(off), int(end) - int(off)).count(b"\n")
                p[0] = int(end)
                p[3] -= n
                if p[0] >= p[1]:
                    self._paste = None
        elif kind == "H":
            host, state = parse_host_line(record[2:])
            self._host_state[host] = state
            self._host_next[host] = state.next_allowed

    def _claimed(self, off: int, end: int, owner: int, nxt: float, qline: str) -> None:
        """A ``C`` record: the queue line at [off, end) is claimed by ``owner``, its host
        reserved until ``nxt`` (read from the journal, or our own claim applied as written)."""
        self._consume(off, end, True)
        url = qline.split("\t", 1)[0]
        self._inflight[url] = (owner, qline)
        host = host_key(url)
        if nxt > self._host_next.get(host, 0.0):
            self._host_next[host] = nxt

    def _settled(self, what: str, url: str, count: bool = True) -> None:
        """A ``D`` record: the claim on ``url`` is over, ``what`` says how."""
        self._inflight.pop(url, None)
        if not count and what in ("crawled", "failed", "hop"):
            pass   # counted from the files (``_recount``)
        elif what == "crawled":
            self._crawled += 1
        elif what == "failed":
            self._failed += 1
        elif what == "hop":
            self._hops += 1
        elif what == "rejected":
            self._refused += 1
        elif what == "rechecked":
            self._rechecked += 1

    def _consume(self, off: int, end: int, counted: int) -> None:
        """Lines [off, end) of queue.txt are taken (claimed or skipped); ``counted`` of them are
        data lines."""
        if off < 0:
            return
        self._consumed += counted
        if off == self._cursor:
            self._cursor = end
            while self._cursor in self._ahead:
                self._cursor = self._ahead.pop(self._cursor)
        elif off > self._cursor:
            self._ahead[off] = end

    def _journal(self, records: list[str]) -> None:
        """Append journal records and apply them to our own view (caller holds the lock, synced)."""
        if not records:
            return
        self._write_journal("".join(records))
        for r in records:
            self._apply(r)

    def _write_journal(self, text: str) -> None:
        """Append records to claims.txt (caller holds the lock, synced): at the size this hold
        knows (``_File.known``: looked at when the hold began, moved on by our own records), so
        a page's D record or a claim costs one write and no fstat."""
        c, lock = self._claims, self.lock
        if not lock.depth:   # (without the lock nothing is known: asked)
            _, c.pos = c.append(text)
            return
        hold = lock.holds
        _, c.pos = c.append(text, c.size_in(hold))
        c.known = (hold, c.pos)

    def _guard(self, fn: Callable[..., object], *args: object) -> object:
        try:
            return fn(*args)
        except OSError as e:
            raise self._error(e) from None

    def _error(self, e: OSError) -> StoreError:
        return StoreError(f"{e.filename or self.folder}: {e.strerror or e}")

    # -- counts ----------------------------------------------------------------------------------
    def known(self, urls: Iterable[str]) -> set[str]:
        """The URLs among ``urls`` in this process's dedup table (the store's add checks again).

        A page's menu links are the same on every page: each costs a BLAKE2b fingerprint to look
        up in the table, so the URLs found there lately are kept as strings too (``_hot``, at most
        HOT_URLS; a URL never leaves a table, and a new table starts a new set). A URL found
        missing may be added any time, so it is looked up again each time, but with the
        fingerprint kept from the last time (``_cold``): the links a page has that are never
        queued (other sites, refused) are the same on every page too."""
        seen, hot, cold = self.seen, self._hot, self._cold
        if self._hot_of is not seen or len(hot) > HOT_URLS:
            hot.clear()
            cold.clear()
            self._hot_of = seen
        if not isinstance(urls, (list, tuple)):
            urls = list(urls)
        out = hot.intersection(urls)   # a page's menu links: all of them, mostly (a set operation)
        if len(out) < len(urls):
            if len(cold) > HOT_URLS:
                cold.clear()
            has, fingerprint = seen.has, seen.fingerprint
            for u in urls:
                if u in out:
                    continue
                fp = cold.get(u)
                if fp is None:
                    fp = fingerprint(u)
                if has(fp):
                    out.add(u)
                    hot.add(u)
                    cold.pop(u, None)
                else:
                    cold[u] = fp
        return out

    def counts(self) -> Counts:
        """Current numbers as this process sees them (call ``refresh`` first for fresh ones)."""
        by_owner: dict[int, int] = {}
        for owner, _ in self._inflight.values():
            by_owner[owner] = by_owner.get(owner, 0) + 1
        return Counts(
            pending=self._pending(),
            in_flight=len(self._inflight),
            crawled=self._base.crawled + self._crawled,
            hops=self._base.hops + self._hops,
            failed=self._base.failed + self._failed,
            in_flight_by_owner=by_owner,
            rejected=self._refused,
            rechecked=self._rechecked,
        )

    def _pending(self) -> int:
        return max(0, self._lines - self._consumed)   # never shown negative, whatever an edit did

    def refresh(self) -> Counts:
        def go() -> Counts:
            with self.lock:
                self._sync()
            return self.counts()
        return self._guard(go)  # type: ignore[return-value]

    def in_flight_lines(self) -> dict[str, str]:
        """url -> queue line of every claim not yet settled."""
        return {url: qline for url, (_, qline) in self._inflight.items()}

    def in_flight(self) -> dict[str, int]:
        """url -> owner pid of every claim not yet settled."""
        return {url: owner for url, (owner, _) in self._inflight.items()}

    # -- the claim step --------------------------------------------------------------------------
    def claim(self, limit: int, now: float, delay_for: Callable[[str], float]) -> ClaimResult:
        """Take up to ``limit`` eligible pending URLs for this owner (see module docstring)."""
        return self._guard(self._claim, limit, now, delay_for)  # type: ignore[return-value]

    def _claim(self, limit: int, now: float, delay_for: Callable[[str], float]) -> ClaimResult:
        with self.lock:
            self._sync()
            pending = self._pending() - self._held   # (what may be claimed, the held lines left out)
            if not pending and not self._inflight and self._end_typed_line():
                pending = self._pending() - self._held   # the crawl would end here: take a line typed without its newline
            # New URLs --max-pages still allows (a batch's included: the budget is never overshot)
            room = max(limit, self.batch)
            if self.max_pages is not None:
                room = claim_limit(room, self.max_pages, self.counts())
            want = limit   # raised to a batch by a first URL whose host keeps no pace
            mark = (self._queue.pos, self._claims.pos)
            if self._idle is not None and self._idle[0] == mark and now < self._idle[1]:
                # Nothing changed since a search that found everything waiting: no need to redo it.
                return ClaimResult([], pending, len(self._inflight), self._idle[1], False)
            self._release_due(now)
            self._read = (0, b"")   # what ``_line_at`` read in this step only
            taken: list[Claim] = []
            records: list[str] = []
            host_next = self._host_next
            ready_at = lambda h: host_next.get(h, 0.0)   # noqa: E731
            # A batch's further URLs (``batch_size``): only of hosts that keep no pace, so every
            # one of them may be fetched right after the other.
            unpaced = lambda h: host_next.get(h, 0.0) if delay_of(h) <= 0 else math.inf   # noqa: E731
            # A host's delay, asked once a step: it depends on its robots.txt and its shared
            # state's delay, which nothing changes while the lock is held (a claim changes only
            # its next-allowed time).
            delays: dict[str, float] = {}

            def delay_of(h: str) -> float:
                d = delays.get(h)
                if d is None:
                    d = delays[h] = delay_for(h)
                return d
            wait = delayed_wait(((h, nb) for nb, _, h, _, recheck in self._delayed if room or recheck),
                                ready_at) if self._delayed else None
            rounds = PASTE_ROUNDS
            while len(taken) < want:
                # The selection policy (spider/order.py): the best URL of a host that is ready;
                # past --max-pages, the best recheck (rechecks do not use the budget up).
                index = self._frontier if room else self._rechecks
                more = len(taken) >= limit
                host, off, w = index.select(now, unpaced if more else ready_at, self._live)
                if host is None and self._paste is not None and self._track_seen and room and rounds \
                        and not more:
                    rounds -= 1   # nothing to take now: judge on, a bounded while (the lock is held)
                    self._judge_paste(PASTE_LINES)
                    continue
                if w is not None and not more:
                    wait = w if wait is None else min(wait, w)
                if host is None:
                    break
                line, end = self._line_at(off)
                why = self._refuse.pop(off, None)
                if why is not None:   # refused when read (see _read_queue, _index)
                    if why:
                        append_text(self.folder / REJECTED, rejected_line(line.rstrip("\n"), f"bad queue line: {why}"))
                    self._journal([f"S\t{off}\t{end}\t1\n"])
                    continue
                if line[:4] != "http" and not is_data(line):
                    self._journal([f"S\t{off}\t{end}\t0\n"])
                    continue
                try:
                    if not host:
                        raise ValueError("not an http(s) URL")
                    entry = parse_queue_line(line)
                except ValueError as e:
                    # Edited while running: report and move it to rejected.txt, never drop it.
                    append_text(self.folder / REJECTED, rejected_line(line.rstrip("\n"), f"bad queue line: {e}"))
                    self._journal([f"S\t{off}\t{end}\t1\n"])
                    continue
                if more and entry.depth != taken[0].entry.depth:   # a batch keeps to one level
                    index.push(host, self._score(entry.url, entry.depth), off)
                    break
                recheck = entry.kind == "recheck"
                if entry.not_before > now:   # not due yet after all: back to the waiting room
                    heapq.heappush(self._delayed, (entry.not_before, off, host,
                                                   self._score(entry.url, entry.depth), recheck))
                    wait = entry.not_before if wait is None else min(wait, entry.not_before)
                    continue
                delay = delay_of(host)
                # Round the reservation up to the millisecond written, so politeness never shrinks.
                nxt = f"{math.ceil((now + delay) * 1000) / 1000:.3f}" if delay > 0 else "0"
                qline = line.rstrip("\n")
                records.append(f"C\t{off}\t{end}\t{self.owner}\t{nxt}\t{qline}\n")
                self._records += 1   # applied as _apply would read it back: so the host's next URL sees the reservation
                self._claimed(off, end, self.owner, float(nxt), qline)
                taken.append(Claim(entry, self.owner))
                if room and not recheck:
                    room -= 1
                batch = self._level_batch(host, entry) if len(taken) == 1 else self.batch
                want = batch_size(want, limit, batch, len(taken), delay, pending)
            if records:
                self._write_journal("".join(records))
            self._idle = None
            if not taken and wait is not None:
                self._idle = ((self._queue.pos, self._claims.pos), wait)
            # Used up: no new URL may be taken, and no recheck is left to take now or later.
            used_up = room == 0 and not taken and wait is None
            return ClaimResult(taken, self._pending() - self._held, len(self._inflight), wait, used_up)

    def _level_batch(self, host: str, entry: QueueEntry) -> int:
        """The most URLs a batch that starts with ``entry`` may take, so that with several workers
        a batch never lets pages of the next level overtake this one's (a page met a level too
        deep, and what it links to refused by --max-depth): no batch while a claim of a shallower
        level is in flight (another worker still crawls the level before), a batch only of this
        level (``_claim``), and at most half of what is left of it on this host, so the workers
        share a level's last pages one by one, as unbatched claims would."""
        if self.batch <= 1:
            return 1
        depth = entry.depth
        for _, qline in self._inflight.values():
            fields = qline.split("\t", 2)
            if len(fields) > 1 and fields[1].isdigit() and int(fields[1]) < depth:
                return 1
        left = self._frontier.left(host, self._score(entry.url, depth))
        return max(1, min(self.batch, (left + 2) // 2))

    def _end_typed_line(self) -> bool:
        """A last queue line without its newline (``printf URL >> queue.txt`` while the crawl
        runs) waits until the crawler appends a line after it (``_File.append`` ends it first),
        or, if nothing else is left to do, is ended here so this run takes it (caller holds the
        lock, synced). True when there was one."""
        q = self._queue
        assert q.fd is not None
        size = os.fstat(q.fd).st_size
        if size <= q.pos or q.read_at(size - 1, 1) == b"\n":
            return False
        _write_all(q.fd, b"\n")
        self._read_queue()
        return True

    def has_rechecks(self) -> bool:
        """Is a recheck pending? Rechecks may still be claimed once --max-pages is reached."""
        return len(self._rechecks) > 0 or any(d[4] for d in self._delayed)

    def _live(self, off: int) -> bool:
        """Is the queue line at ``off`` still unclaimed (by anyone)?"""
        return off >= self._cursor and off not in self._ahead and not (self._spans and self._in_span(off))

    def _in_span(self, off: int) -> bool:
        """Is ``off`` inside a judged pasted stretch?"""
        k = bisect_right(self._spans, (off, math.inf)) - 1
        return k >= 0 and self._spans[k][0] <= off < self._spans[k][1]

    def _score(self, url: str, depth: int) -> int:
        return self.order.score(url, depth) if url.startswith(("http://", "https://")) else BAD_LINE_SCORE

    def _index(self, off: int, fields: list[str], url: str) -> None:
        """Put a pending queue line (split at its first four TABs) in the selection index, or in
        the waiting room if it is not due."""
        host = host_key(url) if url.startswith(("http://", "https://")) else ""
        try:
            depth = int(fields[1]) if len(fields) > 1 and fields[1] else 0
            nb = fields[3] if len(fields) > 3 else ""
            not_before = float(nb) if nb and nb != "0" else 0.0
        except ValueError:   # reported when claimed: first in line, so it is reported soon
            host, depth, not_before = "", 0, 0.0
        score = self.order.score(url, depth) if host else BAD_LINE_SCORE
        if self.only and host and not self._wanted(fields, url):
            self._held += 1   # left pending for the fetch run
            return
        recheck = len(fields) > 4 and fields[4].rstrip("\r\n").endswith("\trecheck")
        if not_before and not_before > time.time() + FAR_AHEAD:   # a typo (ms?) would hold the crawl for ever
            self._refuse[off] = "not_before is more than a year ahead"
            host, score, not_before = "", BAD_LINE_SCORE, 0.0
        if not_before > 0 and math.isfinite(not_before):
            heapq.heappush(self._delayed, (not_before, off, host, score, recheck))
        else:
            self._frontier.push(host, score, off)
            if recheck:
                self._rechecks.push(host, score, off)

    def _wanted(self, fields: list[str], url: str) -> bool:
        """In a discovery run: the seeds (the project's start URLs, not every line without a
        source page: a hand-added line has none), rechecks and URLs matching a pattern."""
        rest = fields[4] if len(fields) > 4 else ""
        return url in self._seeds or rest.rstrip("\n").endswith("\trecheck") or \
            any(p.search(url) for p in self.only)

    def _release_due(self, now: float) -> None:
        """Retries whose time has come join the index."""
        delayed = self._delayed
        while delayed and delayed[0][0] <= now:
            _, off, host, score, recheck = heapq.heappop(delayed)
            if self._live(off):
                self._frontier.push(host, score, off)
                if recheck:
                    self._rechecks.push(host, score, off)

    def _line_at(self, off: int) -> tuple[str, int]:
        """The queue line starting at byte ``off``, and the offset just past it.

        A batch's lines mostly follow each other: a line within the bytes the same claim step
        read last is taken from them (``_read``: lines written are never changed in place; an
        edit that did is found when the next hold begins)."""
        start, got = self._read
        if start <= off and off - start < len(got):
            nl = got.find(b"\n", off - start)
            if nl >= 0:
                return got[off - start:nl + 1].decode("utf-8", "replace"), start + nl + 1
        size = 4096
        while True:
            data = self._queue.read_at(off, size)
            nl = data.find(b"\n")
            if nl >= 0:
                self._read = (off, data)
                return data[:nl + 1].decode("utf-8", "replace"), off + nl + 1
            if len(data) < size:
                return data.decode("utf-8", "replace"), off + len(data)
            size *= 4

    # -- adding and settling -----------------------------------------------------------------------
    def add(self, entries: Iterable[QueueEntry]) -> list[QueueEntry]:
        """Persist the entries whose URL was never queued, crawled or failed; returns those.

        With ``max_per_host``, a host's URLs beyond that many are refused here, at the point of
        entry, and written to rejected.txt as ``host budget``."""
        return self._guard(self._add, list(entries))  # type: ignore[return-value]

    def _add(self, entries: list[QueueEntry]) -> list[QueueEntry]:
        with self.lock:
            self._sync()
            new, over = [], []
            cap, admitted = self.max_per_host, self._admitted
            # The shared table takes the URLs in once their lines are written (``_read_queue``),
            # never before: a kill in between must not leave it knowing a URL no file holds.
            batch: set[str] = set()
            seen = self.seen
            # A link's fingerprint was worked out by ``known`` when it was found missing (``_cold``,
            # for this table): taken from there, and kept for reading the line back (``_fps``).
            cold = self._cold if self._hot_of is seen else {}
            fps, fingerprint, has = self._fps, seen.fingerprint, seen.has
            try:
                for e in entries:
                    url = e.url
                    if url in batch:
                        continue
                    fp = cold.get(url) or fingerprint(url)
                    if has(fp):
                        continue
                    if cap is not None:
                        h = host_key(e.url)
                        if admitted.get(h, 0) >= cap:
                            if self._over_budget.add(e.url):   # logged once, not on every page linking it
                                over.append(rejected_line(e.url, "host budget", e.source))
                            continue
                        admitted[h] = admitted.get(h, 0) + 1
                    if not self._shared:
                        seen.add_fingerprint(fp)
                    batch.add(url)
                    fps[url] = fp
                    new.append(e)
                over = self._fresh_refusals(over) if over else over   # (no look at rejected.txt for nothing)
                if over:
                    append_text(self.folder / REJECTED, "".join(over))
                    self._fresh_refusals([])   # ours are in the set now
                if new:
                    lines = [e.line() for e in new]
                    text = "".join(lines)
                    at, end = self._queue.append(text)
                    if at == self._queue.pos and self._indexing and self._track_seen and not self.only \
                            and all(e.url.startswith(("http://", "https://")) for e in new):
                        self._take_added(new, lines, text.isascii(), at, end)
                    else:
                        self._read_queue(size=end)
            finally:
                fps.clear()
            return new

    def _take_added(self, new: list[QueueEntry], lines: list[str], ascii_: bool, at: int, end: int) -> None:
        """The lines ``_add`` just wrote at [at, end) of queue.txt, right after what was read: into
        the index and the dedup table without reading them back (what ``_read_queue`` would do
        with them). A shared table learns them only now that they are written."""
        push, score, fps = self._frontier.push, self.order.score, self._fps
        for e, line in zip(new, lines):
            url = e.url
            host = "" if e.not_before or e.kind == "recheck" else host_key(url)
            if host:
                push(host, score(url, e.depth), at)
            else:   # (the rare shapes: as when read)
                self._index(at, line[:-1].split("\t", 4), url)
            at += len(line) if ascii_ else len(line.encode("utf-8"))
        self._lines += len(new)
        q = self._queue
        q.pos = end
        if self._shared:
            table = self.seen
            upto = table.upto(q.ino)   # type: ignore[union-attr]
            table.begin()   # type: ignore[union-attr]
            add = table.add_fingerprint
            for e in new:
                add(fps[e.url])
            table.covered(q.ino, max(upto, end))   # type: ignore[union-attr]

    def requeue(self, entries: Iterable[QueueEntry]) -> int:
        """Queue entries whatever the dedup table says (rechecks of crawled pages); returns how many."""
        def go() -> int:
            text = "".join(e.line() for e in entries)
            if not text:
                return 0
            with self.lock:
                self._sync()
                _, end = self._queue.append(text)
                self._read_queue(size=end)
            return text.count("\n")
        return self._guard(go)  # type: ignore[return-value]

    def admit_and_claim(self, entry: QueueEntry, now: float, delay: float) -> Claim | None:
        """A redirect target: queue and claim it at once, or None when its URL is already known.

        The claim reserves the target host's next slot; ``Claim.not_before`` says when that is.
        """
        return self._guard(self._admit_and_claim, entry, now, delay)  # type: ignore[return-value]

    def _admit_and_claim(self, entry: QueueEntry, now: float, delay: float) -> Claim | None:
        with self.lock:
            self._sync()
            if (entry.url in self.seen) if self._shared else not self.seen.add(entry.url):
                return None   # (the shared table takes it in when its line is read back)
            line = entry.line()
            off, end = self._queue.append(line)
            self._read_queue(size=end)
            host = host_key(entry.url)
            start = max(now, self._host_next.get(host, 0.0))
            nxt = f"{math.ceil((start + delay) * 1000) / 1000:.3f}" if delay > 0 else "0"
            self._journal([f"C\t{off}\t{off + len(line.encode('utf-8'))}\t{self.owner}\t{nxt}\t{line[:-1]}\n"])
            return Claim(entry, self.owner, start)

    def settle(self, claim: Claim, kind: str, *, record: str | None = None,
               requeue: QueueEntry | None = None) -> None:
        """End a claim: ``kind`` is crawled, failed, hop, rejected (with its ``record`` line for
        crawled.txt, failed.txt or rejected.txt), retry (with the ``requeue`` entry) or released. The outcome line is written before the journal
        record, so a kill in between re-fetches the page rather than losing it."""
        self._guard(self._settle, claim, kind, record, requeue)

    def _settle(self, claim: Claim, kind: str, record: str | None, requeue: QueueEntry | None) -> None:
        with self.lock:
            self._sync()
            if record is not None:   # crawled.txt, failed.txt and rejected.txt stay open too
                name = _OUTCOME_LOG.get(kind, "crawled")
                self._end_log(name)
                self._log(name, record)
            if requeue is not None:
                _, end = self._queue.append(requeue.line())
                self._read_queue(size=end)
            url = claim.url
            self._write_journal(f"D\t{kind}\t{url}\n")
            self._records += 1
            self._settled(kind, url)

    def reissue(self, owner: int) -> int:
        """Put the claims of a dead owner back in the queue; returns how many."""
        return self._guard(self._reissue, owner)  # type: ignore[return-value]

    def _reissue(self, owner: int) -> int:
        with self.lock:
            self._sync()
            lost = [(url, qline) for url, (o, qline) in self._inflight.items() if o == owner]
            if lost:   # killed between recording the page and closing the claim? then it is done
                recent = {**_recent_urls(self.folder / CRAWLED, "crawled"),
                          **_recent_urls(self.folder / FAILED, "failed")}
                # A recheck goes back whatever checks.txt says: its URL has lines there from earlier
                # recrawls, so a line cannot tell this check was made (one more check at most).
                done = {u: None if q.rstrip("\n").endswith("\trecheck") else recent.get(u) for u, q in lost}
                self._journal([f"D\t{done[u]}\t{u}\n" for u, _ in lost if done[u]])
                lost = [(u, q) for u, q in lost if not done[u]]
            if lost:
                _, end = self._queue.append("".join(q + "\n" for _, q in lost))
                self._read_queue(size=end)
                self._journal([f"D\treissued\t{url}\n" for url, _ in lost])
            return len(lost)

    def host_state(self, host: str) -> HostState:
        """This process's latest view of a host (no lock: for choosing delays)."""
        st = self._host_state.get(host, _NO_STATE)
        nxt = self._host_next.get(host, 0.0)
        return st if st.next_allowed >= nxt else replace(st, next_allowed=nxt)

    def held_hosts(self, now: float) -> list[tuple[str, str, float]]:
        """(host, reason, until) of the hosts held back for a reason (robots.txt unavailable,
        Retry-After, parked), as this process last saw them: what a person watching should know."""
        return sorted((h, st.reason, st.next_allowed) for h, st in self._host_state.items()
                      if st.reason != "-" and max(st.next_allowed, self._host_next.get(h, 0.0)) > now)

    def update_host(self, host: str, change: Callable[[HostState], HostState]) -> HostState:
        """Apply a politeness rule to a host's shared state, under the lock, for every worker."""
        def go() -> HostState:
            with self.lock:
                self._sync()
                new = change(self.host_state(host))
                self._journal(["H\t" + new.line(host)])
                return new
        return self._guard(go)  # type: ignore[return-value]

    def reserve_host(self, host: str, until: float) -> None:
        """Push a host's next-allowed time forward (it may only move later)."""
        self.update_host(host, lambda s: replace(s, next_allowed=max(s.next_allowed, until)))

    def first_with_text(self, text_hash: str, url: str) -> str:
        """The first URL whose page had this text hash (``url`` itself when it is the first).

        hashes.txt (``HASH<TAB>URL``, append-only) remembers the first page of each text across
        workers and runs; each process keeps 64 bits of each hash and the line's offset."""
        return self._guard(self._first_with_text, text_hash, url)  # type: ignore[return-value]

    def _first_with_text(self, text_hash: str, url: str) -> str:
        with self.lock:
            h = self._hashes
            st = h.look()
            if h.reopen_if_replaced(st):
                h.pos, self._texts, st = 0, {}, None
            size = None if st is None else st.st_size
            if size != h.pos:   # (as mostly, nothing appended since our own line: nothing to read)
                texts = self._texts
                for off, _end, line in h.read_new(size):
                    key = _hash_key(line.split("\t", 1)[0])
                    if key is not None:
                        texts.setdefault(key, off)
            key = _hash_key(text_hash)
            if key is None:
                return url
            if key in self._texts:
                first = h.read_at(self._texts[key], 16384).split(b"\n", 1)[0]
                fields = first.decode("utf-8", "replace").split("\t")
                if len(fields) > 1 and fields[0].strip() == text_hash and fields[1].strip():
                    return fields[1].strip()
                # a line cut by power loss, or another hash sharing these 64 bits: not a copy
            off, h.pos = h.append(f"{text_hash}\t{url}\n", size)
            self._texts[key] = off
            return url

    def log(self, name: str, text: str) -> None:
        """Append whole lines to an append-only log (``LOGS``: rejected.txt, fetch.log, ...).
        One write call, no lock needed. The file stays open in this process (O_APPEND), since
        a worker appends to three or four logs per page and opening costs more than writing.

        rejected.txt is the exception: a refused URL is logged once per crawl, whichever worker
        of whichever run refuses it (``_fresh_refusals``), so its lines are written under the lock."""
        if name == "rejected":
            self._guard(self._log_refusals, name, text)
            return
        try:
            self._log(name, text)
        except OSError as e:
            raise self._error(e) from None

    def _log_refusals(self, name: str, text: str) -> None:
        with self.lock:
            f = self._rejects
            st = f.look()
            fresh = self._fresh_refusals(text.splitlines(keepends=True), st)
            if not fresh:
                return
            fd, path = self._log_fd(name)
            if st is not None and f.pos == st.st_size and f.ino == st.st_ino == self._log_inos[name]:
                # Read to its end (so it ends with a newline) through the file we write to:
                # ours go right there, and are in the set already (no fstat, no read back).
                data = "".join(fresh).encode("utf-8")
                safefs.write_whole(fd, data, path)
                f.pos = self._log_ends[name] = st.st_size + len(data)
            else:
                self._end_log(name)
                self._log(name, "".join(fresh))
                self._fresh_refusals([])   # ours are in the set now

    def _fresh_refusals(self, lines: list[str], st: os.stat_result | None | bool = True) -> list[str]:
        """The lines of ``lines`` whose URL (``refusal_key``) rejected.txt does not hold yet, as
        any process of the crawl wrote it (read incrementally, as queue.txt is; caller holds
        the lock). Cost per line: one fingerprint lookup; the file is read once per process.
        ``st``: what ``_File.look`` just saw of rejected.txt (by default, look now)."""
        f = self._rejects
        if st is True:
            st = f.look()
        if f.reopen_if_replaced(st):
            self._refusals, st = SeenSet(), None
        add = self._refusals.add
        for _off, end, line in f.read_new(None if st is None else st.st_size):
            if line.endswith("\n") and is_data(line):
                add(refusal_key(line))
        return [line for line in lines if add(refusal_key(line))]

    def _log(self, name: str, text: str) -> None:
        fd, path = self._log_fd(name)
        data = text.encode("utf-8")
        safefs.write_whole(fd, data, path)
        if name in self._log_ends:   # ended just now (``_end_log``), under the lock: ours is last
            self._log_ends[name] += len(data)

    def _log_fd(self, name: str) -> tuple[int, Path]:
        if self._log_pid != _PID[0]:   # a forked worker opens its own descriptors
            self._log_fds, self._log_ends, self._log_inos, self._log_pid = {}, {}, {}, _PID[0]
        out = self._log_fds.get(name)
        if out is None:
            path = self.folder / LOGS[name]
            # The outcome logs are opened for reading too: ``_end_log`` looks at their last byte.
            fd = safefs.open_fd(path, os.O_RDWR | os.O_APPEND | os.O_CREAT) if name in ENDED else \
                safefs.open_append(path)
            out = self._log_fds[name] = (fd, path)
            if name == "rejected":   # is it the file ``_rejects`` reads? (``_log_refusals``)
                self._log_inos[name] = os.fstat(fd).st_ino
        return out

    def _end_log(self, name: str) -> None:
        """End a last line left without its newline (a hand edit while the crawl runs), so the
        record we append next is not glued to it; the caller holds the frontier lock. Looked at
        through the descriptor the record is then written with (no open per record)."""
        fd, path = self._log_fd(name)
        size = os.fstat(fd).st_size
        if size and size != self._log_ends.get(name) and os.pread(fd, 1, size - 1) != b"\n":
            safefs.write_whole(fd, b"\n", path)
            size += 1
        self._log_ends[name] = size   # where the record now written starts (``_log``)

    def fold(self) -> bool:
        """At a clean stop: rewrite queue.txt with only its unclaimed lines, empty the journal.

        A byte copy of the unclaimed ranges (no parsing), so it is cheap even for a huge queue.
        Returns False (and changes nothing) while any claim is still in flight. The new file's
        fsync and its CRC (for the stop's signature, ``recovery.write_signature``) run in
        threads while the view is carried forward and written: at a million pending URLs those
        are each tens of milliseconds, and the stop waits for the longest, not for their sum.
        """
        def go() -> bool:
            with self.lock:
                qpath = self.folder / QUEUE
                tmp = qpath.with_name(f".{QUEUE}.{os.getpid()}.tmp")
                for _ in range(10):   # queue.txt cut or replaced by hand while being copied: again
                    self._sync()
                    if self._inflight:
                        return False
                    fd = safefs.new_temp(tmp)
                    try:
                        moves, partial = self._write_unclaimed(fd)
                    except BaseException as e:
                        os.close(fd)
                        if isinstance(e, _Shrunk):
                            continue
                        raise
                    if not self._queue_edit():
                        break
                    os.close(fd)
                else:
                    with contextlib.suppress(OSError):
                        tmp.unlink()
                    return False   # edited all the time: the next start reads the files
                rfd = safefs.open_fd(tmp, os.O_RDONLY)   # (``fd`` is write-only)
                asides = [_Aside(os.fsync, fd), _Aside(_crc_of_same, rfd, fd)]
                try:
                    carried = None if partial else self._carry_view(moves)
                    write_hosts(self.folder, {h: self.host_state(h) for h in
                                              set(self._host_state) | set(self._host_next)})
                    view = self._write_carried(carried, tmp)
                    asides[0].result()   # queue.txt's new content is on disk
                    crc = asides[1].result()
                finally:
                    for aside in asides:
                        aside.join()
                    os.close(fd)
                    os.close(rfd)
                # The journal goes first: one must never describe a queue.txt it was not written
                # for (recovery drops the lines of settled claims by their text).
                atomic_write(self.folder / CLAIMS, _journal_head(os.stat(tmp)))
                os.replace(tmp, qpath)
                st = os.stat(qpath)
                if crc is not None and crc[0] == st.st_size:   # (what the signature will read)
                    pastes.remember_crc(st, crc[1])
                saved = self._place_carried(view)
                # The old queue.txt's blocks are freed at its last close (~10 ms at 50 MB): in a
                # thread, while the stop goes on, not on its path.
                old = None if self._queue.fd is None else os.dup(self._queue.fd)
                try:
                    if saved is not None and self._track_seen and self._adopt(saved):   # instead of reading it
                        self._crawled = self._hops = self._failed = 0   # now in the base counts
                    elif not self._track_seen and not partial:
                        self._watch_folded()
                    self._sync()
                finally:
                    if old is not None:
                        _Aside(os.close, old)
                return True
        return bool(self._guard(go))

    def _write_unclaimed(self, fd: int) -> tuple[views.Moves, bool]:
        """Write our header and the unclaimed lines of queue.txt to ``fd``: a byte copy of the
        unclaimed stretches, in the kernel where it can (``copy_file_range``). Returns where each
        stretch went (for the view), and whether a last line without its newline (someone still
        writing it by hand) was copied too, with a newline."""
        header = QUEUE_HEADER.encode()
        _write_all(fd, header)
        w = len(header)
        src = self._queue.fd
        assert src is not None
        starts: list[int] = []
        ends: list[int] = []
        news: list[int] = []
        pos, stop = self._cursor, self._queue.pos
        if pos == 0 and self._queue.read_at(0, 1) == b"#":   # the old header line
            pos = self._queue.read_at(0, 4096).find(b"\n") + 1
        ahead, paste = self._ahead, self._paste
        if paste is not None:   # pasted lines not judged yet go last, where the next run judges them
            paste = [max(paste[0], pos), *paste[1:]]   # (never a byte consumed already, twice)
            ahead = dict(ahead)
            ahead[paste[0]] = paste[1]
        for off in sorted(o for o in ahead if o >= pos) + [stop]:
            if pos < off:
                starts.append(pos)
                ends.append(off)
                news.append(w)
                _copy_range(src, fd, pos, off - pos)
                w += off - pos
            pos = max(pos, off, ahead.get(off, off))
        self._folded_paste = None
        if paste is not None:
            _copy_range(src, fd, paste[0], paste[1] - paste[0])
            self._folded_paste = [w, w + paste[1] - paste[0], paste[3]]
            w += paste[1] - paste[0]
        tail = os.fstat(src).st_size - stop
        if tail > 0:
            _copy_range(src, fd, stop, tail)
            _write_all(fd, b"\n")
        return views.Moves(starts, ends, news), tail > 0

    def _watch_folded(self) -> None:
        """A watcher after its fold: the new queue.txt is our header and the pending lines, all
        of them data lines (blank and comment lines were consumed), so it need not be read."""
        pending = self._lines - self._consumed
        keep = (self._crawled, self._hops, self._failed, self._refused, self._rechecked)
        self._queue.reopen_if_replaced()
        self._claims.reopen_if_replaced()
        self._reset_view()
        self._load_hosts()
        self._crawled, self._hops, self._failed, self._refused, self._rechecked = keep
        self._lines, self._cursor = pending, len(QUEUE_HEADER.encode())
        self._queue.pos = os.fstat(self._queue.fd).st_size  # type: ignore[arg-type]

    def pending_entries(self) -> Iterator[QueueEntry]:
        """The unclaimed lines of queue.txt, in order (for reports; not under the lock)."""
        pos, stop = self._cursor, self._queue.pos
        with open(self.folder / QUEUE, "rb") as f:
            f.seek(pos)
            for raw in f:
                off, pos = pos, pos + len(raw)
                if off >= stop:
                    break
                line = raw.decode("utf-8", "replace")
                if not self._live(off) or not is_data(line):
                    continue
                try:
                    yield parse_queue_line(line)
                except ValueError:
                    continue

    def close(self) -> None:
        """Close this process's descriptors of the project files (a store it is done with)."""
        for f in (self._queue, self._claims, self._hashes, self._rejects):
            f.close()
        if self._log_pid == _PID[0]:
            for fd, _ in self._log_fds.values():
                os.close(fd)
        self._log_fds, self._log_ends, self._log_inos = {}, {}, {}
        lock = self.lock
        if lock._fd is not None and lock._pid == _PID[0] and not lock.depth:
            os.close(lock._fd)
        lock._fd, lock._pid = None, 0

    def after_fork(self, owner: int) -> None:
        """In a forked worker: claims are taken in the worker's own name. Forked from a process
        without an index (the parent judging pasted lines: a replacement for a worker that
        died), the worker builds its index first, or it would judge and never claim."""
        self.owner = owner
        if not self._indexing:
            self._guard(self._reindex)

    def _reindex(self) -> None:
        """The selection index of the queue lines read so far, from queue.txt (the lines still
        unclaimed, the pasted ones not judged yet left out, as ``_read_queue`` indexes them).
        No lock needed: the state forked is whole up to ``_queue.pos``, the descriptor reads
        that file even if it was replaced since, and the next claim syncs with what followed."""
        self._indexing, self._idle, self._held = True, None, 0
        q, p = self._queue, self._paste
        stretches = [(self._cursor, q.pos)]
        if p is not None:   # [p[0], p[1]): pasted lines not judged yet
            stretches = [(self._cursor, min(p[0], q.pos)), (max(self._cursor, p[1]), q.pos)]
        for start, stop in stretches:
            for off, line in _lines_of(q.fd, start) if start < stop else ():   # type: ignore[arg-type]
                if off >= stop:
                    break
                if not is_data(line) or not self._live(off):
                    continue
                if off in self._refuse:   # refused when read: reported (or dropped) when claimed
                    self._frontier.push("", BAD_LINE_SCORE, off)
                    continue
                fields = line.rstrip("\n").split("\t", 4)
                url = fields[0].strip()
                self._index(off, fields, url if len(fields) == 5 else _normal(url))

    def drop_index(self) -> None:
        """Free the selection index in a process that will not claim, but keep the dedup table
        (the parent while it judges pasted lines: ``judge_paste``). The lines refused when read
        stay noted (a few): a worker forked from it later builds its index (``_reindex``)."""
        self._indexing = False
        self._frontier = Frontier(self.order.lifo)
        self._rechecks = Frontier(self.order.lifo)
        self._delayed = []
        _give_back_memory()

    def drop_seen(self) -> None:
        """Free the dedup table in a process that will only watch (the parent after forking)."""
        # The shared table stays mapped (untouched, it costs nothing): the fold dumps it into the
        # carried view instead of loading the view's own (``_carry_view``).
        self._kept = self.seen if self._shared else None
        self.seen = SeenSet()
        self._track_seen = self._shared = False
        self._frontier = Frontier(self.order.lifo)
        self._rechecks = Frontier(self.order.lifo)
        self._delayed = []
        _give_back_memory()

    # -- the shared dedup table (seen.py ``SharedSeen``) --------------------------------------------
    def _share(self, seen: SeenSet) -> None:
        """Put this process's table in seen.bin, mapped, in place of its own (at open: before the
        workers are forked, so they map the same pages; lock held, every line read)."""
        table, count = seen.state()
        q = self._queue
        try:
            self.seen = SharedSeen.create(self.folder / SEEN, table, count, q.ino or 0, q.pos)
        except (OSError, TableGone) as e:   # a full disk, a file system without mmap: one per process, as before
            self.warn(f"{self.folder / SEEN}: {getattr(e, 'strerror', None) or e}; each worker keeps its own dedup table")
            return
        self._shared, self._hot_of = True, None

    def _table_from_view(self, v: views.View) -> bool:
        """The shared table straight from the saved view's (copied file to file, in the kernel:
        never a private copy in this process, whose workers would share it anyway)."""
        try:
            with open(self.folder / VIEW, "rb") as f:
                self.seen = SharedSeen.create(self.folder / SEEN, None, int(v.meta["seen"]), 0, 0,
                                              slots=int(v.meta["table"]), copy_from=(f.fileno(), v.table_at))
        except (OSError, TableGone, ValueError, KeyError, TypeError):
            return False
        self._shared, self._hot_of = True, None
        return True

    def _rebuild_seen(self) -> None:
        """The shared table cannot be trusted (a process was killed while changing it, or its
        file was cut): write it anew from the files (lock held, before the sync). What it holds:
        the URLs of crawled.txt, failed.txt and queue.txt up to where the old table said every
        line was in (the rest is read by the sync, as new lines), less pasted lines not judged yet."""
        old = self.seen
        assert isinstance(old, SharedSeen)
        qino, upto, count = old.covers()   # what the old header says it covered
        seen = SeenSet(stable=True, capacity=max(1024, count))
        for name in (CRAWLED, FAILED):
            for f in data_fields(self.folder / name):
                seen.add(f[0].strip())
        path = self.folder / QUEUE
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            stop = upto if st.st_ino == qino else st.st_size
            p = self._paste if self._queue.ino == st.st_ino else None   # our unjudged stretch
            for off, line in _lines_of(f.fileno(), 0):
                if off >= stop:
                    break
                if (p is not None and p[0] <= off < p[1]) or not is_data(line):
                    continue
                fields = line.rstrip("\n").split("\t", 4)
                url = fields[0].strip()
                seen.add(url if len(fields) == 5 else _normal(url))
        try:
            self.seen = SharedSeen.create(self.folder / SEEN, seen.state()[0], len(seen), st.st_ino, stop)
        except (OSError, TableGone):
            self.seen, self._shared = seen, False   # ours alone from now on (the others rebuild theirs)
        self._hot_of = None

    # -- the saved view (spider/frontier/view.py) ---------------------------------------------------------------
    def _view_key(self) -> list[Any]:
        """The settings the index depends on: a view saved under others is not used."""
        o = self.order
        return [o.name, list(o.prefer), list(o.defer), self.max_per_host is not None]

    def _view_files(self) -> dict[str, list[int] | None]:
        return {name: views.identity(self.folder / name) for name in (QUEUE, CRAWLED, FAILED)}

    def _load_view(self, paste_from: int | None = None) -> bool:
        """At open (lock held): take the saved view if it describes the files exactly as they are
        (or, with ``paste_from``, queue.txt up to that byte: lines were pasted after it)."""
        if not self._track_seen or self.only:
            return False
        v = views.load(self.folder / VIEW, table=not self._want_shared)   # (shared: copied, below)
        files = self._view_files()
        if v is not None and paste_from is not None:
            saved, now = v.meta.get("files", {}).get(QUEUE), files[QUEUE]
            if not saved or not now or saved[0] != now[0] or saved[1] != paste_from or v.meta.get("paste"):
                return False
            files[QUEUE] = saved   # the rest of the file was checked by its CRC (recovery.pasted_from)
        if v is None or v.meta.get("key") != self._view_key() or v.meta.get("files") != files:
            return False
        if v.table is None and not self._table_from_view(v):
            return False
        if not self._adopt(v):
            if v.table is None:
                self.seen, self._shared = SeenSet(stable=True), False
            return False
        if paste_from is not None:
            self._begin_paste(paste_from)
        self.from_view = True
        return True

    def _begin_paste(self, start: int) -> None:
        """Lines pasted into queue.txt from byte ``start`` on: left to the claim step
        (``_judge_paste``), not read now. A last line without its newline is read as usual."""
        q = self._queue
        assert q.fd is not None
        size = os.fstat(q.fd).st_size
        end, lines = start, 0
        while end < size:
            data = q.read_at(end, min(READ_CHUNK, size - end))
            stop = data.rfind(b"\n") + 1
            if not stop:
                if end + len(data) >= size:
                    break   # a last line without its newline: read as usual
                data = q.read_at(end, size - end)   # a line over a chunk long
                stop = data.rfind(b"\n") + 1
            lines += _data_lines(data[:stop])
            end += stop
        if end > start:
            self._paste, self._paste_span = [start, end, 0, lines], (start, end)
            self._lines += lines
            q.pos = end

    def judge_paste(self, limit: int = PASTE_LINES) -> int:
        """Judge up to ``limit`` more pasted lines (the crawl's parent, between its looks at
        the workers); returns how many are left."""
        def go() -> int:
            with self.lock:
                self._sync()
                if self._paste is not None and self._track_seen:
                    self._judge_paste(limit)
            return self.paste_left()
        return self._guard(go)  # type: ignore[return-value]

    def paste_left(self) -> int:
        """Pasted lines not judged yet (paste.py), as this process last saw them."""
        return self._paste[3] if self._paste else 0

    def _judge_paste(self, limit: int) -> None:
        """Judge up to ``limit`` pasted lines, in the order of the file, as recovery would (lock
        held, synced): a line that is not a crawlable URL goes to rejected.txt with its line
        number, a URL the settings refuse goes there with the reason, a known URL is dropped,
        the rest is queued again in the crawler's shape. Then one journal record takes the
        stretch. Written in that order, so a kill in between loses nothing: recovery reads
        the stretch again, and drops the copies of what it queued as known."""
        p = self._paste
        assert p is not None
        start, stop = p[0], p[1]
        if not p[2]:   # its line number: counted once, where it is needed
            p[2] = 1 + sum(data.count(b"\n") for _, data in self._chunks(0, start))
        data = b""
        for _, chunk in self._chunks(start, stop, 1 << 16):
            data += chunk
            if data.count(b"\n") >= limit:
                break
        data = data[:len(data) - len(data.split(b"\n", limit)[-1])]   # its first ``limit`` lines
        counted = _data_lines(data)   # as _begin_paste counted them
        if not self._indexing:   # the parent, judging all of it: room in its table for all at once
            self.seen.reserve(len(self.seen) + p[3])
        # A line of the stretch taken already (claimed or judged by a process that read the paste
        # as ordinary lines: a rebuild after a hand edit) is skipped; nothing to look up otherwise.
        live = self._live if self._taken_in(start, start + len(data)) else None
        # A shared table learns the stretch's URLs only once their lines are written (below).
        staged = _Staged(self.seen) if self._shared else None
        judged = pastes.judge_stretch(data, p[2], staged or self.seen, self.admit, cap=self.max_per_host,
                                      admitted=self._admitted, live=live, start=start, name=QUEUE,
                                      admit_many=self.admit_many if self.admit is not None else None)
        for no, err, line in judged.bad:
            self._paste_warned += 1
            if self._paste_warned <= PASTE_WARNINGS:
                self.warn(f"{QUEUE}:{no}: not a crawlable URL ({err}), moved to rejected.txt: {line[:200]!r}")
        rejected, off = judged.rejected, start + len(data)
        if rejected:
            text = "".join(rejected)
            _end_last_line(self.folder / REJECTED)
            append_text(self.folder / REJECTED, pastes.shown(text) if pastes.UNDECODABLE.search(text) else text)
        if judged.lines:
            text = "".join(judged.lines)
            q = self._queue
            at, _ = q.append(text)
            if at != q.pos:   # a line being typed was ended first: read it all as usual
                self._read_queue()
            elif not self._indexing:   # the parent: only counts them
                self._lines += len(judged.lines)
                q.pos = at + len(text.encode("utf-8"))
            else:   # what we just wrote: into the index without reading it back
                # A bare pasted URL (depth 0, due now, no recheck) goes straight to the frontier:
                # what ``_index`` would do with it, without splitting and parsing its fields.
                push, score, bare = self._frontier.push, self.order.score, not self.only
                ascii_ = text.isascii()
                for url, qline in zip(judged.urls, judged.lines):
                    if bare and qline.endswith(pastes._BARE):
                        push(host_key(url), score(url, 0), at)
                    else:
                        self._index(at, qline[:-1].split("\t", 4), url)
                    at += len(qline) if ascii_ else len(qline.encode("utf-8"))
                self._lines += len(judged.lines)
                q.pos = at
            if staged is not None:   # the lines are written: now the table may know them
                table = self.seen
                upto = table.upto(q.ino)   # type: ignore[union-attr]
                table.begin()   # type: ignore[union-attr]
                table.add_many(staged.fresh)
                table.covered(q.ino, max(upto, q.pos))   # type: ignore[union-attr, arg-type]
        self._journal([f"S\t{start}\t{off}\t{counted}\n"])

    def _taken_in(self, start: int, stop: int) -> bool:
        """May a line in bytes [start, stop) of queue.txt be taken already (``_live``)?"""
        if self._cursor > start or (self._ahead and max(self._ahead) >= start):
            return True
        k = bisect_right(self._spans, (stop, -1)) - 1   # the last judged stretch that begins before stop
        return k >= 0 and self._spans[k][1] > start

    def _chunks(self, start: int, stop: int, size: int = READ_CHUNK) -> Iterator[tuple[int, bytes]]:
        """Bytes [start, stop) of queue.txt, ``size`` at a time."""
        pos = start
        while pos < stop:
            data = self._queue.read_at(pos, min(size, stop - pos))
            if not data:
                return
            yield pos, data
            pos += len(data)

    def _adopt(self, v: views.View) -> bool:
        """Open queue.txt and the journal, and take the view as ours if it is for this queue.txt."""
        self._queue.reopen_if_replaced()
        self._claims.reopen_if_replaced()
        try:
            if self._queue.ino != v.meta["files"][QUEUE][0]:
                return False   # replaced between the two looks: read it
            self._install(v)
        except (ValueError, KeyError, TypeError, IndexError):
            self._reset_view()
            self._base, self._admitted = Counts(), {}
            if not self._shared:   # (the shared table knows every URL already)
                self.seen = SeenSet(stable=True)
            self._queue.pos = 0
            return False
        self._view_ino = self._queue.ino
        if self._shared:   # a folded queue.txt: every line of it is known (its pasted rest left out)
            self.seen.covered(self._queue.ino, self._queue.pos)   # type: ignore[union-attr, arg-type]
        return True

    def _install(self, v: views.View) -> None:
        """Take a view's state as ours (offsets as in the queue.txt it describes)."""
        m = v.meta
        seen = self.seen if self._shared else SeenSet.from_table(v.table, int(m["seen"]))   # type: ignore[arg-type]
        split = len(v.buckets) - int(m["rechecks"])   # the recheck index's buckets come last
        if not 0 <= split <= len(v.buckets):
            raise ValueError("bad bucket count")
        frontier = Frontier.from_buckets(self.order.lifo, v.buckets[:split])
        rechecks = Frontier.from_buckets(self.order.lifo, v.buckets[split:])
        delayed = [(float(nb), int(off), str(h), int(sc), bool(rc)) for nb, off, h, sc, rc in m["delayed"]]
        heapq.heapify(delayed)
        crawled, hops, failed = (int(x) for x in m["base"])
        self.seen, self._frontier, self._rechecks, self._delayed = seen, frontier, rechecks, delayed
        self._paste, self._paste_span, self._spans = None, None, []
        self._cursor = int(m["cursor"])
        self._ahead = {int(o): int(e) for o, e in m["ahead"]}
        self._lines, self._consumed = int(m["lines"]), int(m["consumed"])
        self._base = Counts(crawled=crawled, hops=hops, failed=failed)
        self._admitted = {str(h): int(n) for h, n in (m["admitted"] or {}).items()}
        self._queue.pos = int(m["end"])
        if m.get("paste"):   # lines pasted before the stop that saved it, not judged yet
            ps, pe, n = (int(x) for x in m["paste"])
            self._paste, self._paste_span = [ps, pe, 0, n], (ps, pe)
            self._lines += n
            self._queue.pos = pe

    def _view_meta(self) -> dict[str, Any]:
        b = self._base
        return {"key": self._view_key(), "end": self._queue.pos, "cursor": self._cursor,
                "ahead": sorted(self._ahead.items()), "lines": self._lines, "consumed": self._consumed,
                "base": [b.crawled, b.hops, b.failed], "seen": len(self.seen),
                "admitted": self._admitted if self.max_per_host is not None else None,
                "delayed": sorted(self._delayed)}

    def save_view(self) -> bool:
        """Save this process's view in frontier.view (right after ``open``, before any claim), so
        the fold at the end of the run can carry it forward instead of the next run reading the
        files. Returns False (and saves nothing) when the view is not one the files alone give."""
        def go() -> bool:
            with self.lock:
                self._sync()
                if not self._track_seen or self.only or self._records or self._inflight:
                    return False
                files = self._view_files()
                queue = files[QUEUE]
                if queue is None or queue[1] != self._queue.pos:
                    return False   # a line still being written: nothing to describe exactly
                buckets = list(self._frontier.buckets())
                rechecks = list(self._rechecks.buckets())
                meta = dict(self._view_meta(), files=files, rechecks=len(rechecks))
                buckets += rechecks
                try:
                    atomic_write_with(self.folder / VIEW, lambda f: views.dump(f, meta, self.seen.state()[0], buckets))
                except OSError:
                    return False   # a full disk costs the next start its shortcut, nothing else
                self._view_ino = self._queue.ino
                return True
        return bool(self._guard(go))

    def _write_carried(self, carried: tuple[dict[str, Any], SeenSet | SharedSeen, list] | None,
                       queue_tmp: Path) -> tuple[Path, views.View] | None:
        """Write the carried view for the folded files to a temp file beside frontier.view,
        fsynced (``_place_carried`` renames it once the new queue.txt, ``queue_tmp``, is in place:
        the rename keeps the inode, size and time the view names it by)."""
        files = self._view_files()
        files[QUEUE] = views.identity(queue_tmp)
        if carried is None or files[QUEUE] is None:
            return None
        meta, seen, buckets = carried
        v = views.View(dict(meta, files=files, end=files[QUEUE][1]), seen.state()[0], buckets)
        path = self.folder / f".{VIEW}.{os.getpid()}.tmp"
        try:
            with open(safefs.new_temp(path), "wb") as f:
                views.dump(f, v.meta, v.table, v.buckets)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()
            return None   # a cache: the next start reads the files
        return path, v

    def _place_carried(self, written: tuple[Path, views.View] | None) -> views.View | None:
        """Put the view ``_write_carried`` wrote in place (or remove one that no longer applies)."""
        path = self.folder / VIEW
        if written is not None:
            tmp, v = written
            try:
                os.replace(tmp, path)
                _sync_folder(self.folder)   # both renames (queue.txt's and this) are durable
                self._view_ino = v.meta["files"][QUEUE][0]
                return v
            except OSError:
                with contextlib.suppress(OSError):
                    tmp.unlink()
        self._view_ino = None
        with contextlib.suppress(OSError):
            path.unlink()
        return None

    def _carry_view(self, moves: views.Moves) -> tuple[dict[str, Any], SeenSet | SharedSeen, list] | None:
        """At the fold (lock held, synced, nothing in flight): the view of the folded queue.txt,
        from the one saved or loaded for the old file at start-up plus the lines this run
        appended, with the claimed lines dropped and the rest moved (``views.translate``).
        None when there is no such view or anything does not add up."""
        if self._view_ino is None or self._view_ino != self._queue.ino or self.only:
            return None
        table = self.seen if self._shared else self._kept
        if isinstance(table, SharedSeen):   # it holds what the carried view's table would: no need to read that
            try:
                table.follow()
                if table.upto(self._queue.ino) < self._queue.pos:
                    table = None   # lines nobody took in (a blank tail?): the view's own, as without it
            except (TableGone, OSError):
                table = None
        v = views.load(self.folder / VIEW, table=table is None)
        if v is None or v.meta.get("key") != self._view_key():
            return None
        carried = FileStore(self.folder, max_per_host=self.max_per_host, order=self.order)
        if table is not None:
            carried.seen, carried._shared = table, True
        try:
            if v.meta["files"][QUEUE][0] != self._queue.ino:
                return None
            carried._install(v)
        except (ValueError, KeyError, TypeError, IndexError):
            return None
        try:
            carried._queue.reopen_if_replaced()
            if carried._queue.ino != self._queue.ino:
                return None
            carried._queue.pos = carried._paste_span[1] if carried._paste_span else int(v.meta["end"])
            if self._paste_span is not None and self._paste_span[0] == carried._queue.pos:
                carried._queue.pos = self._paste_span[1]   # pasted lines are not read: judged
            carried._read_queue()   # what this run appended (its claimed lines included: seen)
            for name in (CRAWLED, FAILED):
                old, now = v.meta["files"][name], views.identity(self.folder / name)
                if old is None or now is None or old[0] != now[0] or old[1] > now[1]:
                    return None   # replaced or cut: only an appended file can be carried
                carried._take_outcomes(name, old[1])
        except OSError:
            return None
        finally:
            carried._queue.close()
        def moved(index: Frontier) -> list[tuple[str, int, array]]:
            out = [(h, sc, views.translate(items, moves)) for h, sc, items in index.buckets()]
            return [b for b in out if b[2]]
        buckets, rechecks = moved(carried._frontier), moved(carried._rechecks)
        delayed = []
        for nb, off, host, score, recheck in carried._delayed:
            new = moves.where(off)
            if new is not None:
                delayed.append((nb, new, host, score, recheck))
        pending = sum(len(items) for _, _, items in buckets) + len(delayed)
        if pending + self.paste_left() != self._lines - self._consumed:
            return None   # the index and the journal disagree: let the next run read the files
        meta = dict(carried._view_meta(), cursor=len(QUEUE_HEADER.encode()), ahead=[], lines=pending,
                    consumed=0, delayed=sorted(delayed), rechecks=len(rechecks), paste=self._folded_paste)
        return meta, carried.seen, buckets + rechecks


def batch_size(want: int, limit: int, batch: int, taken: int, delay: float, pending: int) -> int:
    """How many URLs a claim takes, after taking its ``taken``-th one whose host's delay is ``delay``.

    A worker's claim of one URL (``limit`` 1) whose host keeps no pace (--delay 0, no robots.txt
    to fetch first) takes up to ``batch``, the others of hosts that keep no pace either (the
    claim selects them so): one lock hold and one journal write for several pages, at most
    ``batch`` URLs in flight that a kill -9 makes fetched again (as any claim, they are recovered
    on resume). A first URL of a paced host is taken alone (its slot starts at the claim), and a
    batch takes at most half of what is ``pending``, so other workers are not left idle."""
    if delay > 0:
        return min(want, max(limit, taken))
    if taken == 1 and limit == 1 and batch > 1:
        return max(1, min(batch, (pending + 1) // 2))
    return want


def _journal_head(queue: os.stat_result) -> str:
    """The first lines of a journal written with the queue.txt it describes (at a fold or a
    rebuild): its inode and size, so a process that finds both replaced can tell the crawler's
    pair from a queue.txt replaced, or cut, by hand after it."""
    return f"{HEADERS[CLAIMS]}# queue.txt inode {queue.st_ino} size {queue.st_size}\n"


def _journal_for(folder: Path, queue_ino: int) -> int | None:
    """The size the journal says its queue.txt had when written, if it was written for the
    queue.txt of this inode (``_journal_head``); None if not."""
    try:
        with open(folder / CLAIMS, "rb") as f:
            head = f.read(256)
    except FileNotFoundError:
        return None
    m = re.search(rb"\n# queue\.txt inode (\d+) size (\d+)\n", head)
    return int(m.group(2)) if m and int(m.group(1)) == queue_ino else None


def _warn(text: str) -> None:
    """A warning from a process of the crawl: one line on stderr (the crawl's terminal)."""
    with contextlib.suppress(OSError):
        sys.stderr.write(f"warning: {text}\n")
        sys.stderr.flush()


def _end_last_line(path: Path) -> None:
    """End a last line left without its newline (a hand edit while the crawl runs), so the
    record we append next is not glued to it; the caller holds the frontier lock."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        size = os.fstat(fd).st_size
        if not size or os.pread(fd, 1, size - 1) == b"\n":
            return
    finally:
        os.close(fd)
    append_text(path, "\n")


def _normal(url: str) -> str:
    """A hand-written URL as the crawler writes it (as it is, if it is not one)."""
    try:
        return normalize(url)
    except ValueError:
        return url


def _lines_of(fd: int, start: int) -> Iterator[tuple[int, str]]:
    """(offset, line) of a file's lines from byte ``start``, through ``fd``; the last one may lack
    its newline."""
    pos, carry = start, b""
    while True:
        data = os.pread(fd, READ_CHUNK, pos + len(carry))
        if not data:
            break
        data = carry + data
        parts = data.split(b"\n")
        carry = parts.pop()
        for raw in parts:
            yield pos, raw.decode("utf-8", "replace") + "\n"
            pos += len(raw) + 1
    if carry:
        yield pos, carry.decode("utf-8", "replace")


def _data_lines(data: bytes) -> int:
    """How many of the whole lines in ``data`` are data lines (``is_data``). Only lines that
    start with whitespace, ``#`` or nothing can be other lines: found by a search in C, then
    checked one by one."""
    starts = [0] if data[:1] in _SUSPECT_FIRST else []
    starts += [m.start() + 1 for m in _SUSPECT_START.finditer(data)]
    others = 0
    for st in starts:
        end = data.find(b"\n", st) + 1
        if end and not is_data(data[st:end].decode("utf-8", "replace")):
            others += 1
    return data.count(b"\n") - others


def _outcome_urls(folder: Path) -> SeenSet:
    """The URLs of crawled.txt and failed.txt."""
    done = SeenSet()
    for name in (CRAWLED, FAILED):
        for f in data_fields(folder / name):
            done.add(f[0].strip())
    return done


def _linked_pending(folder: Path, done: Container[str], seeds: Iterable[str]) -> Iterator[str]:
    """Queue lines for the URLs a crawled page linked to (links.txt) or the seeds, that are not
    crawled, failed or refused (rejected.txt): the pending URLs of a queue.txt lost whole."""
    found: dict[str, str] = {s: "-" for s in seeds}
    try:
        with open(folder / "links.txt", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.rstrip("\n").split("\t", 3)
                if line.endswith("\n") and len(fields) == 4:
                    for url in fields[3].split():
                        found.setdefault(url, fields[0])
    except FileNotFoundError:
        pass
    refused = {f[0].strip() for f in data_fields(folder / REJECTED)}
    found = {u: src for u, src in found.items() if u not in done and u not in refused}
    sources = set(found.values())
    depth = {f[0]: int(f[4]) for f in data_fields(folder / CRAWLED)
             if f[0] in sources and len(f) > 4 and f[4].isdigit()}
    for url, src in found.items():
        yield QueueEntry(url, depth[src] + 1 if src in depth else 0, 0, 0.0, src).line()


class _Shrunk(OSError):
    """queue.txt was cut while being copied (a hand edit under the running crawl)."""


def _sync_folder(folder: Path) -> None:
    """fsync a folder, so the renames made in it survive a power loss (as ``atomic_write`` does)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _crc_of_same(rfd: int, fd: int) -> tuple[int, int] | None:
    """The size and CRC of the file open at ``rfd``, if it is the one we wrote at ``fd``."""
    st = os.fstat(rfd)
    if st.st_ino != os.fstat(fd).st_ino:
        return None
    return st.st_size, pastes.crc_of(rfd, st.st_size)


class _Aside:
    """A step of the fold run in a thread while the fold goes on (an fsync, a checksum: both let
    go of the GIL). ``result`` waits for it and raises what it raised."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        import threading   # (only a stop needs it: not imported at every start)
        self._out: Any = None
        self._err: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            self._out = fn(*args)
        except BaseException as e:   # handed to the fold's thread
            self._err = e

    def join(self) -> None:
        self._thread.join()

    def result(self) -> Any:
        self._thread.join()
        if self._err is not None:
            raise self._err
        return self._out


def _copy_range(src: int, dst: int, offset: int, count: int) -> None:
    """Append ``count`` bytes of ``src`` from ``offset`` to ``dst``: in the kernel with
    copy_file_range, else through a 1 MB buffer."""
    end = offset + count
    try:
        while offset < end:
            n = os.copy_file_range(src, dst, end - offset, offset)
            if n <= 0:
                break
            offset += n
    except (AttributeError, OSError):
        pass   # not on this system or file system: copy the rest by hand
    while offset < end:
        data = os.pread(src, min(end - offset, 1 << 20), offset)
        if not data:
            raise _Shrunk(f"queue.txt is shorter than expected at byte {offset}")
        _write_all(dst, data)
        offset += len(data)


def _write_all(fd: int, data: bytes) -> None:
    if os.write(fd, data) != len(data):
        raise OSError(f"short write ({len(data)} bytes)")


def _give_back_memory() -> None:
    """Return freed heap pages to the system. glibc keeps big freed blocks in its heap (its mmap
    threshold rises after the first big free), so without this the parent kept ~8 MB per
    million URLs it no longer holds. A no-op where glibc's malloc_trim is missing."""
    try:
        import ctypes
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _hash_key(text: str) -> int | None:
    """64 bits of a hex text hash, or None for a line that is not one (a hand edit)."""
    try:
        return int(text.strip()[:16], 16) if len(text.strip()) >= 16 else None
    except ValueError:
        return None


# -- hosts.txt: per-host politeness state that survives restarts -----------------------------------

def read_hosts(folder: Path) -> dict[str, HostState]:
    """hosts.txt as a dict; a line that does not parse is skipped here (``recover`` reports it)."""
    out: dict[str, HostState] = {}
    try:
        with open(Path(folder) / HOSTS, encoding="utf-8", errors="replace") as f:
            for line in f:
                if is_data(line):
                    try:
                        host, state = parse_host_line(line)
                    except ValueError:
                        continue
                    out[host] = state
    except FileNotFoundError:
        pass
    return out


def write_hosts(folder: Path, states: dict[str, HostState]) -> None:
    atomic_write(Path(folder) / HOSTS, HEADERS[HOSTS] + "".join(s.line(h) for h, s in sorted(states.items())))


# -- start and end of a run: rebuild queue.txt with exactly the pending URLs --------------------


# Where a line that ``is_data`` calls blank or a comment may start: after str.strip()'s ASCII
# whitespace, a ``#`` or an empty line.
_SUSPECT_FIRST = [bytes([c]) for c in b" \t\x0b\x0c\r\x1c\x1d\x1e\x1f#\n"]
_SUSPECT_START = re.compile(rb"\n(?=[ \t\x0b\x0c\r\x1c-\x1f#\n])")


def _recent_urls(path: Path, kind: str, tail: int = 1 << 20) -> dict[str, str]:
    """URL -> journal kind (crawled, hop, failed) of the records in the last MiB of an outcome
    file, where a worker that just died wrote last."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail))
            data = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return {}
    out = {}
    for line in data.split("\n")[1:]:
        if "\t" in line:
            out[line.split("\t", 1)[0]] = "hop" if kind == "crawled" and is_redirect_hop(line) else kind
    return out
