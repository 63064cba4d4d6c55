"""The parent process of a crawl: recover, seed, start N workers, watch them, stop cleanly.

- Only one crawl of a project runs at a time: the parent holds ``crawl.lock`` (a sidecar lock file,
  inherited by its workers) for the whole run; a second ``crawl NAME`` is refused with a message.
- At start, unless the last run stopped cleanly and nobody touched the files since, the journal is
  folded back (``store.recover``): claims of a crawl that was killed go back to pending.
- A worker that dies is noticed within half a second: its claims go back to the queue and a
  replacement starts.
- Ctrl-C (or SIGTERM) once: workers finish the page they are on, release the claims they hold and
  exit; queue.txt is folded. Twice: workers are killed at once (the next run recovers). Ctrl-C
  during the start-up check of the files stops it at once (the next run checks them again).
- Every child dies with the crawl: the parent kills and reaps its children before it releases
  ``crawl.lock``, on every way out; on Linux the kernel kills them if the parent itself is killed
  (``PR_SET_PDEATHSIG``). A child holds the parent's lock (the same open ``crawl.lock``) for as
  long as it lives, so no process writes the files of a project without the lock.
- A reader of the status lines that goes away (``crawl ... 2>&1 | head -1``) does not stop the
  crawl: printing stops, the crawl goes on and ends as it would have.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import gc
import itertools
import math
import os
import re
import select
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TextIO

from . import config as settings
from .config import CrawlConfig
from .records import QueueEntry, data_fields, is_data, utc_stamp
from . import recrawl, safefs
from .order import Order
from .scope import Admission
from .stats import StatsRecorder, crawl_seconds, pages_per_second, sample_every
from .frontier.contract import StoreError
from .frontier.files import FileStore
from .frontier.recovery import Repair, is_clean, pasted_from, recover, tidy, write_signature
from .safefs import atomic_write
from .urls import host_key
from .words import plural

EXIT_DONE, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130
MAX_WARNINGS = 20   # problems found in the files at start-up said one by one; the rest counted
WORKER_STORE_ERROR = 3
RUNNING = "running.txt"
LOCK = "crawl.lock"   # held by the parent, shared by its children, for the whole run


class CrawlError(Exception):
    """A crawl that cannot start or go on; the message is one line for the user."""


class ProjectLock:
    """``crawl.lock``: an ``flock`` on the file, as ``filelock.FileLock`` takes it, so the two
    exclude each other (push and pull take it with filelock). Taken here without filelock, whose
    import was ~18 ms of every start (logging, decimal, its fork hooks). Forked children inherit
    the open file, so they share the lock while they live; ``release`` ends it for all of them.
    A file system without ``flock`` is left to filelock (its soft-lock fallback)."""

    _BUSY = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.fallback: Any = None   # a filelock.FileLock where flock is missing

    def acquire(self) -> bool:
        """Take the lock at once: False if someone holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in self._BUSY:
                return False
            return self._acquire_fallback()
        self.fd = fd
        return True

    def _acquire_fallback(self) -> bool:
        from filelock import FileLock, Timeout

        self.fallback = FileLock(str(self.path), timeout=0)
        try:
            self.fallback.acquire()
        except Timeout:
            self.fallback = None
            return False
        return True

    def release(self) -> None:
        if self.fallback is not None:
            self.fallback.release()
            self.fallback = None
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


@dataclass
class Summary:
    """A run's outcome, as its last line says it (``line``)."""

    crawled: int
    hops: int
    failed: int
    pending: int
    rejected: int
    seconds: float
    stopped_by: str    # "done", "budget", "interrupted"
    this_run: int = -1   # pages crawled by this run (the counts above are the project's); -1: all
    rechecked: int = 0   # recrawl checks of crawled pages made by this run
    rate: float | None = None   # stats.pages_per_second of this run's stats.txt rows (as the report)

    def line(self) -> str:
        now = self.crawled if self.this_run < 0 else self.this_run
        rate = self.rate if self.rate is not None else 0.0
        extra = ([plural(self.hops, "redirect", prefix="+")] if self.hops else []) + \
            ([f"{now} in this run"] if now != self.crawled else []) + \
            ([f"{self.rechecked} rechecked"] if self.rechecked else [])
        more = f" ({'; '.join(extra)})" if extra else ""
        return (f"crawled {self.crawled}{more}, failed {self.failed}, pending {self.pending}, "
                f"rejected {self.rejected} in {self.seconds:.1f} s ({rate:.1f} pages/s)")


def count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, encoding="utf-8", errors="replace") as f:
        return sum(1 for line in f if is_data(line))


class Crawl:
    """One run of ``crawl NAME``: owns the workers and the terminal output."""

    _judging = False   # is the parent judging pasted lines (``_pause``)?
    _census_later = False   # a pasted queue.txt: its census is left to the samples after the fork

    def __init__(self, folder: Path, config: CrawlConfig, *, seeds: tuple[str, ...] = (),
                 out: TextIO = sys.stderr, status_every: float | None = None,
                 recheck: str | None = None, sitemaps: bool = False, refetch_failed: bool = False) -> None:
        self.folder = Path(folder)
        self.recheck = recheck       # "due" or "all": a recrawl run queues crawled pages to check
        self.refetch_failed = refetch_failed   # recrawl --failed: failed URLs go back to the queue
        self.sitemaps = sitemaps     # seed from the in-scope hosts' sitemaps before crawling
        self.config = config
        self.new_seeds = seeds
        self.out = _Out(out)
        self.tty = self.out.isatty()
        self.status_every = status_every if status_every is not None else (0.5 if self.tty else 10.0)
        self.interrupts = 0
        self.stop = _StopSignal()
        self.alarm: str | None = None     # the trap alarm, while it fires
        self.warned: set[str] = set()     # patterns already warned about
        self.told: set[tuple[str, str]] = set()   # (host, reason) of held hosts already said
        self.children: list[Any] = []   # _Child and multiprocessing's Process: killed before the lock is let go

    # -- the run -------------------------------------------------------------------------------------
    def run(self, seed_only: bool = False) -> int:
        """The whole run, under crawl.lock. ``seed_only``: read the sitemaps, queue their URLs,
        and stop without crawling (the ``seed`` command)."""
        # No write may follow a link out of the project, and a FIFO in place of a state file
        # would hang the first read of it for ever: both are refused before anything is opened.
        safefs.check_tree(self.folder)
        lock = ProjectLock(self.folder / LOCK)
        if not lock.acquire():
            raise CrawlError(f"a crawl of this project is already running ({self._running_info()}); "
                             "wait for it or stop it (Ctrl-C) first") from None
        try:
            return self._seed() if seed_only else self._run()
        finally:
            # Nothing may stop this clean-up half-way (a second Ctrl-C gave a traceback and left
            # a child running after the lock was let go): ignore SIGINT until the lock is released.
            old = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                self.stop.close()
                self._end_children()
                try:
                    (self.folder / RUNNING).unlink()
                except OSError:
                    pass
                lock.release()
            finally:
                signal.signal(signal.SIGINT, old)

    def _end_children(self) -> None:
        """Kill and reap every child still alive. Called before the lock is released: a child
        shares the lock (the same open file), and the parent's release ends it for both."""
        started = [p for p in self.children if p.pid is not None]
        for p in started:
            if p.exitcode is None:
                p.kill()
        for p in started:
            p.join()
        self.children.clear()

    def _running_info(self) -> str:
        try:
            return (self.folder / RUNNING).read_text(encoding="utf-8").strip().replace("\n", ", ")
        except OSError:
            return "see crawl.lock"

    def _seed(self) -> int:
        store = self._open()
        self._seed_from_sitemaps(store)
        self.stats.catch_up()   # the census takes in the queued URLs before the fold replaces queue.txt
        if store.fold():
            write_signature(self.folder, self.config.key())
            self.stats.save_census()
        c = store.refresh()
        self._say(f"pending {c.pending}; crawl them with: crawl {self.folder.name}")
        return EXIT_INTERRUPTED if self.interrupts else EXIT_DONE

    def _open(self) -> FileStore:
        """Save the settings, mend and recover the files if needed, open the store, queue the seeds."""
        cfg = self.config
        settings.save(self.folder, cfg)   # only now: a refused second crawl must not touch them
        atomic_write(self.folder / RUNNING, f"pid {os.getpid()}\nstarted {utc_stamp()}\nworkers {cfg.workers}\n")
        admission = Admission(cfg)
        seeds = set(cfg.seeds)

        def admit(url: str, depth: int) -> str | None:
            return None if url in seeds else admission.check(url, depth)

        def admit_many(urls: list[str], depth: int) -> list[str | None]:   # (admit of each, a paste's run)
            reasons = admission.check_many(urls, depth)
            if not seeds.isdisjoint(urls):
                reasons = [None if url in seeds else r for url, r in zip(urls, reasons)]
            return reasons

        for problem in tidy(self.folder):
            self._say(f"warning: {problem}")
        # Lines only pasted after a clean stop are judged during the crawl (frontier/paste.py).
        clean = is_clean(self.folder, cfg.key())
        paste = None if clean else pasted_from(self.folder, cfg.key())
        if not clean and paste is None:
            self._recover(admit)
        if cfg.ignore_robots:
            self._say("warning: --ignore-robots: robots.txt is neither fetched nor obeyed; "
                      "crawl only sites whose owners agree")
        for text in settings.warnings_for(cfg):
            self._say(f"warning: {text}")
        self.stats = StatsRecorder(self.folder)
        self._census_later = paste is not None   # (censused by the samples while the workers crawl)
        if paste is None:
            self.stats.catch_up()   # first: the heap its reading frees is reused by the store's view
        def new_store() -> FileStore:
            store = FileStore(self.folder, max_pages=cfg.max_pages, max_per_host=cfg.max_pages_per_host,
                              order=order_of(cfg), only=cfg.discover, seeds=cfg.seeds, shared=True)
            store.admit, store.admit_many = admit, admit_many
            return store

        store = new_store().open(paste_from=paste)
        if store.needs_recovery:   # no saved view to go on from: the full check after all
            self._recover(admit)
            store = new_store().open()
        store.warn = self._warn   # a hand edit of queue.txt while running, said by whichever process saw it
        # Every seed, every run: known ones are dropped by dedup, and a first run killed between
        # saving settings.txt and queueing its seeds still starts from them.
        store.add(QueueEntry(s, 0, 0, 0.0, "-") for s in cfg.seeds)
        if not store.from_view:
            store.save_view()   # the fold at the end carries it forward (spider/frontier/view.py)
        return store

    def _recover(self, admit: Callable[[str, int], str | None]) -> None:
        rep = self._recover_here(admit) if self._fresh() else self._recover_in_child(admit)
        for problem in rep.problems[:MAX_WARNINGS]:
            self._say(f"warning: {problem}")
        if len(rep.problems) > MAX_WARNINGS:   # a file of bad lines must not flood the terminal
            self._say(f"warning: ... and {len(rep.problems) - MAX_WARNINGS} more such lines, "
                      "all moved to rejected.txt with their file and line number")
        if rep.recovered_claims:
            self._say(f"recovered {rep.recovered_claims} URLs that were in flight when the last run stopped")
        for reason, n in sorted(rep.refused.items()):
            self._say(f"note: {n} queued URL(s) moved to rejected.txt ({reason}) under the current settings")

    def _run(self) -> int:
        cfg = self.config
        if self.refetch_failed:   # before the store reads the files: they then agree
            from .broken import requeue_failed
            self._say(f"recrawl: {plural(requeue_failed(self.folder), 'failed URL')} queued again")
        store = self._open()
        if self.sitemaps:
            self._seed_from_sitemaps(store)
        if self.recheck:
            self._queue_rechecks(store)
        elif cfg.discover:   # discovery again: listing pages are fetched anew for new links
            self._queue_rechecks(store, lambda url: url in cfg.seeds or any(
                re.search(p, url) for p in cfg.discover))
        started, crawled_before = time.monotonic(), store.counts().crawled
        if cfg.max_pages is not None and store.counts().completed >= cfg.max_pages and not store.has_rechecks():
            self._say(f"--max-pages {cfg.max_pages} already reached in this project; "
                      "nothing to do (raise it to go on)")
            code = EXIT_DONE
        else:
            code = self._supervise(store)
        # A Ctrl-C from here on only counts: the wrap-up (fold, schedule) is what a Ctrl-C asks
        # for, so it must not be cut short by one (it left claims.txt unfolded at rest).
        old_int = signal.signal(signal.SIGINT, self._on_signal)
        try:
            counts = store.refresh()
            self._sample(counts)   # before the fold: it would make the census read the queue again
            if code != EXIT_INTERRUPTED or self.interrupts < 2:
                if store.fold():
                    write_signature(self.folder, cfg.key())
                    self.stats.save_census()
                recrawl.compact_schedule(self.folder)
        finally:
            signal.signal(signal.SIGINT, old_int)
        if code == EXIT_DONE and (self.folder / recrawl.ROUND).exists() and \
                not any(e.kind == "recheck" for e in store.pending_entries()):
            recrawl.close_round(self.folder)   # every check of the round was made (by any command)
        if self.recheck and code == EXIT_DONE and not counts.pending:
            marked = recrawl.mark_inactive(self.folder, cfg.seeds, time.time())
            if marked:
                self._say(f"recrawl: {len(marked)} page(s) no longer linked from anywhere in "
                          f"{recrawl.INACTIVE_AFTER} recrawls in a row: marked inactive in removed.txt")
        budget = cfg.max_pages is not None and counts.completed >= cfg.max_pages and counts.pending > 0
        # The crawl time and the rate are read from this run's stats.txt rows, as the report
        # reads them, so both say the same pages/s for the same run.
        rows = self.stats.rows
        summary = Summary(counts.crawled, counts.hops, counts.failed, store.refresh().pending,
                          count_lines(self.folder / "rejected.txt"),
                          crawl_seconds(rows) if len(rows) > 1 else time.monotonic() - started,
                          "interrupted" if code == EXIT_INTERRUPTED else ("budget" if budget else "done"),
                          counts.crawled - crawled_before, counts.rechecked, pages_per_second(rows))
        self._finish_line(summary)
        if cfg.discover and code == EXIT_DONE and summary.pending:
            self._say(f"discovery done: {summary.pending} URL(s) left pending for the fetch run; "
                      f"fetch them with: crawl {self.folder.name} (without --discover)")
        return code

    def _queue_rechecks(self, store: FileStore, only: Callable[[str], bool] | None = None) -> None:
        """A recrawl: queue the crawled pages that are due (or all of them, or those ``only``
        accepts) as rechecks, once."""
        pending = {e.url for e in store.pending_entries() if e.kind == "recheck"}
        pending |= {u for u, q in store.in_flight_lines().items() if q.endswith("\trecheck")}
        everything = self.recheck == "all" or only is not None
        now = time.time()
        since = recrawl.open_round(self.folder, now) if everything else None
        due = [(u, d) for u, d in recrawl.due_pages(self.folder, now, everything, since)
               if u not in pending and (only is None or only(u))]
        n = store.requeue(QueueEntry(u, d, 0, 0.0, "-", "recheck") for u, d in due)
        if n or pending or everything:
            self._say(f"recrawl: {plural(n, 'page')} to check" + (f" ({len(pending)} already queued)" if pending else ""))
        else:
            self._say(recrawl.nothing_due(self.folder, now, self.folder.name))

    def _seed_from_sitemaps(self, store: FileStore) -> None:
        """Queue the URLs of the in-scope hosts' sitemaps (spider/sitemaps.py), politely, before
        any worker starts. Ctrl-C stops it; what was queued stays queued."""
        from .fetch import Fetcher
        from .sitemaps import seed_from_sitemaps

        old = signal.signal(signal.SIGINT, self._on_signal)
        fetcher = Fetcher(self.config, warc=_warc_writer(self.config, self.folder))
        try:
            report = seed_from_sitemaps(store, self.config, fetcher, log=self._say, wait=self.stop.wait)
        finally:
            fetcher.close()
            signal.signal(signal.SIGINT, old)
        self._say(report.line())

    def _fresh(self) -> bool:
        """A new project: nothing in its folder but what this run wrote (settings.txt,
        running.txt, crawl.lock), so no queue whose reading could grow the parent's heap."""
        try:
            return set(os.listdir(self.folder)) <= {settings.SETTINGS, RUNNING, LOCK}
        except OSError:
            return False

    def _recover_here(self, admit: Callable[[str, int], str | None]) -> Repair:
        """``recover`` of a new project, in this process: a child was a fork, a pipe and a join
        (~10 ms before the first fetch) for files that are not there yet."""
        try:
            return recover(self.folder, admit, self.config.max_pages_per_host)
        except OSError as e:
            raise StoreError(f"{e.filename or self.folder}: {e.strerror or e}") from None

    def _recover_in_child(self, admit: Callable[[str, int], str | None]) -> Repair:
        """Run ``recover`` in a forked child: its working memory (a pass over a possibly huge
        queue.txt) is returned to the system when the child exits, instead of staying in the
        parent's heap that every worker then inherits."""
        import multiprocessing   # (here: a new project, the bench's, has nothing to recover)

        ctx = multiprocessing.get_context("fork")
        parent_end, child_end = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_recover_child, args=(child_end, self.folder, admit,
                                                          self.config.max_pages_per_host, os.getpid()))
        self.children.append(p)
        start_child(p)
        child_end.close()
        try:
            outcome = parent_end.recv()
        except EOFError:
            outcome = StoreError("recovery of the project files failed (see above)")
        except BaseException:
            # Ctrl-C (or any error) while the child checks the files: it must not go on alone.
            # Killed half-way, it leaves the files as a kill -9 at start-up does (the next run
            # checks them again); finishing unwatched, it replaced claims.txt under the next crawl.
            old = signal.signal(signal.SIGINT, signal.SIG_IGN)   # a second Ctrl-C must not cut this short
            try:
                p.kill()
                p.join()
            finally:
                signal.signal(signal.SIGINT, old)
            raise
        finally:
            parent_end.close()
        p.join()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _say_summary(self, s: Summary) -> None:
        if self.tty:
            self.out.write("\r\x1b[K")
        head = {"done": "done", "budget": "stopped", "interrupted": "interrupted"}[s.stopped_by]
        self._say(f"{head}: {s.line()}")

    def _finish_line(self, s: Summary) -> None:
        self._say_summary(s)
        if s.stopped_by == "budget":
            self._say(f"--max-pages {self.config.max_pages} reached; {s.pending} URLs still pending "
                      "(run again with a higher --max-pages to go on)")
        elif s.stopped_by == "interrupted":
            self._say("run the same command again to resume")
        if s.crawled == 0 and s.failed:
            self._say(f"nothing crawled; failed: {_failure_reasons(self.folder / 'failed.txt')}; see failed.txt")
        if self.config.max_pages_per_host is not None:
            for line in budget_lines(self.config.max_pages_per_host, *_host_budget_counts(self.folder)):
                self._say(line)

    # -- workers -------------------------------------------------------------------------------------
    def _start_worker(self, store: FileStore) -> _Child:
        p = _Child(self._worker_target(), (self.config, store, self.stop, os.getpid()))
        self.children = [c for c in self.children if c.pid is None or c.exitcode is None]   # reaped ones go
        self.children.append(p)
        start_child(p)
        return p

    def _supervise(self, store: FileStore) -> int:
        old_int = signal.signal(signal.SIGINT, self._on_signal)
        old_term = signal.signal(signal.SIGTERM, self._on_signal)
        procs: list[_Child] = []
        # The workers' modules (requests, selectolax, lxml, ada) imported once, before the fork, instead of
        # in every worker after it: ~0.1 CPU s a worker (and a replacement) saved, pages shared.
        was = gc.isenabled()
        gc.disable()   # (no collection of what the imports make and keep: ~4 ms)
        try:
            from . import fetch, spider  # noqa: F401
            if _will_need_requests(self.config.seeds):
                from . import fetch_requests  # noqa: F401  (else each worker imports it, ~50 ms each)
        finally:
            if was:
                gc.enable()
        try:
            # The run's first row of stats.txt before any worker starts: a row taken after them
            # misses what they did first (checks of a recrawl were counted 9 of 11).
            self._watch(store, census=not self._census_later)
            first_sample = time.monotonic()
            last_sample = first_sample
            procs = [self._start_worker(store) for _ in range(self.config.workers)]
            self._workers_started(store)
            restarts = 0
            last_status = 0.0
            rate = _Rate()
            while True:
                if self.interrupts >= 2:
                    for p in procs:
                        if p.is_alive():
                            p.kill()
                    for p in procs:
                        p.join()
                    return EXIT_INTERRUPTED
                alive = []
                for p in procs:
                    p.join(0)
                    if p.exitcode is None:
                        alive.append(p)
                    elif p.exitcode == WORKER_STORE_ERROR:
                        self.stop.set()
                        raise self._worker_store_error(store)
                    elif p.exitcode != 0 and not self.stop.is_set():
                        n = store.reissue(p.pid or -1)
                        restarts += 1
                        if restarts > 10 * self.config.workers:
                            self.stop.set()
                            raise CrawlError(f"workers keep dying (last exit code {p.exitcode}); see errors.log")
                        self._say(f"worker {p.pid} died (exit code {p.exitcode}); "
                                  f"{n} claims back in the queue, starting a replacement")
                        alive.append(self._start_worker(store))
                    elif p.exitcode != 0:
                        store.reissue(p.pid or -1)
                procs = alive
                if not procs:
                    return EXIT_INTERRUPTED if self.interrupts else EXIT_DONE
                now = time.monotonic()
                if now - last_sample >= sample_every(now - first_sample):
                    last_sample = now
                    self._watch(store)
                if now - last_status >= self.status_every:
                    last_status = now
                    self._status_line(store.refresh(), rate)
                self._pause(store, [p.sentinel for p in procs])
        except BaseException:
            self.stop.set()
            for p in procs:
                p.join(5)
                if p.is_alive():
                    p.kill()
            raise
        finally:
            signal.signal(signal.SIGINT, old_int)
            signal.signal(signal.SIGTERM, old_term)

    # What a crawl on another store (spider/cluster.py) does differently, and nothing else.
    def _worker_target(self) -> Callable[..., None]:
        return _worker_main

    def _workers_started(self, store: FileStore) -> None:
        if store.paste_left():   # lines pasted into queue.txt: the parent judges them meanwhile
            store.drop_index()
            self._judging = True
        else:
            store.drop_seen()   # the workers have their copies; the parent only watches

    def _pause(self, store: FileStore, workers: Sequence[int] = ()) -> None:
        """Between two looks at the workers: a tenth of a second of sleep, cut short when a worker
        ends (``workers``: their sentinels; the crawl's end is then seen at once, not up to 0.1 s
        later), or of judging pasted lines (spider/frontier/paste.py) while there are any; then
        the parent only watches."""
        if self._judging and not self.stop.is_set():
            end = time.monotonic() + 0.1
            while store.judge_paste() and time.monotonic() < end:
                pass
            if store.paste_left():
                return
            store.drop_seen()
            self._judging = False
        if workers:
            _wait_any(workers, 0.1)
        else:
            time.sleep(0.1)

    def _worker_store_error(self, store: FileStore) -> Exception:
        return CrawlError("a worker could not write the project files (see the message above)")

    def _watch(self, store: FileStore, census: bool = True) -> None:
        """At each sample (``sample_every``): a line of stats.txt, and why hosts are held."""
        self._sample(store.refresh(), census)
        self._tell_held_hosts(store)

    def _tell_held_hosts(self, store: FileStore) -> None:
        """Say once why a host's URLs wait (a START_URL on a wrong port otherwise looked like a
        crawl doing nothing for ten minutes: robots.txt is retried every 5 minutes)."""
        for host, reason, until in store.held_hosts(time.time()):
            if (host, reason) in self.told or len(self.told) > MAX_WARNINGS:
                continue
            self.told.add((host, reason))
            if len(self.told) > MAX_WARNINGS:   # a crawl of many hosts: status has the rest
                self._say(f"note: more hosts are held back; `status {self.folder.name}` lists them")
                continue
            hint = ("; --ignore-robots skips it (only for sites whose owners agree)"
                    if reason.startswith("robots.txt") else "")
            self._say(f"note: {host}: {reason}; its URLs wait until "
                      f"{time.strftime('%H:%M:%S', time.gmtime(until))} UTC{hint}")

    def _on_signal(self, signum: int, frame: object) -> None:
        self.interrupts += 1
        self.stop.set()
        if self.interrupts == 1:
            self._say("\nstopping: finishing the pages in flight, if any (press Ctrl-C again to stop at once)")

    # -- output --------------------------------------------------------------------------------------
    def _sample(self, c, census: bool = True) -> None:  # type: ignore[no-untyped-def]
        """A line of stats.txt; the trap alarm is said once per pattern when it fires."""
        try:
            self.stats.sample(c.pending, c.in_flight, c.crawled, c.hops, c.failed, c.rejected, census=census)
        except OSError as e:
            self._say(f"warning: cannot write stats.txt: {e.strerror or e}")
            return
        alarm = self.stats.alarm()
        self.alarm = alarm
        if alarm and self.stats.history[-1].top not in self.warned:
            self.warned.add(self.stats.history[-1].top)
            if self.tty:
                self.out.write("\r\x1b[K")
            self._say(f"warning: {alarm}")

    def _status_line(self, c, rate: "_Rate") -> None:  # type: ignore[no-untyped-def]
        speed = rate.update(c.crawled + c.failed + c.rechecked)   # pages/s as stats.pages_per_second counts them
        text = (f"crawled {c.crawled}  pending {c.pending}  in flight {c.in_flight}  "
                f"failed {c.failed}  {speed:.1f} pages/s")
        if self.alarm:
            text += "  [possible trap: see status]"
        if self.tty:
            self.out.write("\r\x1b[K" + text)
            self.out.flush()
        else:
            self._say(f"{utc_stamp()} {text}")

    def _warn(self, text: str) -> None:
        if self.tty:
            self.out.write("\r\x1b[K")   # not glued to the status line
        self._say(f"warning: {text}")

    def _say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()


def _warc_writer(config: CrawlConfig, folder: Path):  # type: ignore[no-untyped-def]
    """This process's WARC writer when --warc is on (one file per worker at a time)."""
    if not config.warc:
        return None
    from .warc import WarcWriter
    return WarcWriter.for_worker(Path(folder) / "warc", os.getpid())


def order_of(config: CrawlConfig) -> Order:
    return Order(config.order, config.prefer, config.defer)


def budget_lines(budget: int, refused: Mapping[str, int], known: Mapping[str, int]) -> list[str]:
    """What the summary says about --max-pages-per-host, from the URLs refused as ``host budget``
    per host (by any run: rejected.txt keeps them all) and the URLs each host has in the project.

    A host has reached the budget only if it holds that many URLs *now*: its refusals may come
    from an earlier run with a lower budget. Those refused URLs are not queued again when the
    budget is raised, so the summary says where they are instead of leaving the user guessing."""
    full = sorted(h for h in refused if known.get(h, 0) >= budget)
    earlier = {h: n for h, n in refused.items() if known.get(h, 0) < budget}
    out = []
    if full:
        out.append(f"--max-pages-per-host {budget} reached for {len(full)} host(s): "
                   f"{', '.join(full[:5])}{' ...' if len(full) > 5 else ''}; the URLs it refused are in "
                   "rejected.txt ('host budget') and are not queued again, even with a higher budget")
    if earlier:
        out.append(f"note: {sum(earlier.values())} URL(s) of {len(earlier)} host(s) refused as 'host budget' "
                   f"by an earlier, lower --max-pages-per-host stay in rejected.txt: raising it does not "
                   "queue them again")
    return out


def _host_budget_counts(folder: Path) -> tuple[Counter[str], Counter[str]]:
    """Per host: distinct URLs refused as ``host budget`` in rejected.txt, and, for those hosts
    only, distinct URLs in queue.txt, crawled.txt and failed.txt (what the store's budget counts)."""
    refused_urls = {f[0] for f in data_fields(folder / "rejected.txt") if len(f) > 1 and f[1] == "host budget"}
    refused = Counter(host_key(u) for u in refused_urls)
    if not refused:
        return refused, Counter()
    known_urls = {f[0] for name in ("queue.txt", "crawled.txt", "failed.txt") for f in data_fields(folder / name)
                  if f[0].startswith(("http://", "https://")) and host_key(f[0]) in refused}
    return refused, Counter(host_key(u) for u in known_urls)


def _failure_reasons(path: Path, n: int = 3) -> str:
    """The most common reasons in failed.txt, for a run that crawled nothing."""
    reasons = Counter(f[1] for f in data_fields(path) if len(f) > 1)
    return ", ".join(f"{r} ({k})" for r, k in reasons.most_common(n)) or "?"


class _Rate:
    """Pages per second over the last few seconds."""

    def __init__(self, window: float = 5.0) -> None:
        self.window = window
        self.points: list[tuple[float, int]] = []

    def update(self, done: int) -> float:
        now = time.monotonic()
        self.points.append((now, done))
        while len(self.points) > 2 and now - self.points[0][0] > self.window:
            self.points.pop(0)
        (t0, d0), (t1, d1) = self.points[0], self.points[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0


PR_SET_PDEATHSIG = 1   # linux/prctl.h


def _die_with_parent(parent: int) -> None:
    """First thing in every child of a crawl: on Linux, ask the kernel to SIGKILL this process
    when its parent dies (prctl PR_SET_PDEATHSIG), so that no child outlives a parent killed
    with SIGKILL. A parent that died before the call cannot signal: exit now. Elsewhere, workers
    still stop by themselves (the stop pipe closes) and hold the lock until they do.
    Also keeps the freed heap for the next page (``keep_freed_heap``)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):   # pragma: no cover - no prctl in this libc
            pass
        else:
            keep_freed_heap(libc)
    if os.getppid() != parent:
        os._exit(EXIT_ERROR)


# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
HEAP_KEPT = 8 << 20       # freed memory at the top of the heap kept, up to this much
MMAP_ABOVE = 4 << 20      # blocks this large (and larger) mapped apart, as before for > 128 KB


def keep_freed_heap(libc: Any) -> bool:
    """Let glibc's malloc keep freed memory for the next page instead of giving it back to the
    system at once. By default it trims the heap's top as soon as 128 KB are free there and maps
    blocks of 128 KB and more apart, so each page's parse (lexbor's document), body and text
    were unmapped or trimmed when the page was done and faulted in again, zeroed, for the next:
    5 brk calls and ~40 page faults a bench page (20 KB), 9 with this (one worker, strace and
    getrusage). The kept memory is at most ``HEAP_KEPT`` a process, and reused. A libc without
    mallopt (not glibc) is left as it is; returns whether the settings were made."""
    try:
        mallopt = libc.mallopt
    except AttributeError:   # pragma: no cover - not glibc
        return False
    return all([mallopt(M_MMAP_THRESHOLD, MMAP_ABOVE) == 1, mallopt(M_TRIM_THRESHOLD, HEAP_KEPT) == 1,
                mallopt(M_TOP_PAD, 1 << 20) == 1])


_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


_children_made = itertools.count(1)


class _Child:
    """A forked child that runs ``target(*args)``, as multiprocessing's ``Process`` with the fork
    start method ran it (stdin from /dev/null, the exit code of a ``SystemExit``, 1 and the
    traceback after "Process ForkProcess-N:" for an exception; ``pid``, ``sentinel``,
    ``exitcode``, ``is_alive``, ``join``, ``kill`` as there), without importing multiprocessing
    (~3.5 ms of every start: its context and util, pickle, subprocess). ``sentinel``: a
    descriptor that is ready to read once the child has ended."""

    def __init__(self, target: Callable[..., object], args: tuple[Any, ...]) -> None:
        self.target, self.args = target, args
        self.name = f"ForkProcess-{next(_children_made)}"
        self.pid: int | None = None
        self.sentinel: int | None = None
        self._code: int | None = None

    def start(self) -> None:
        ends, end = os.pipe()   # the child holds ``end`` until it ends: EOF then at ``ends``
        code = 1
        pid = os.fork()
        if pid == 0:
            try:
                os.close(ends)
                code = self._run()
            finally:
                os._exit(code)
        os.close(end)
        self.pid, self.sentinel = pid, ends

    def _run(self) -> int:
        """In the child: what multiprocessing's ``Process._bootstrap`` does around the target."""
        try:
            _stdin_from_devnull()
            if getattr(threading, "_HAVE_THREAD_NATIVE_ID", False):
                threading.main_thread()._set_native_id()  # type: ignore[attr-defined]
            self.target(*self.args)
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                sys.stderr.write(str(e.code) + "\n")
                code = 1
        except BaseException:
            code = 1
            sys.stderr.write(f"Process {self.name}:\n")
            traceback.print_exc()
        finally:
            threading._shutdown()  # type: ignore[attr-defined]
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (AttributeError, ValueError):
                    pass
        return code

    @property
    def exitcode(self) -> int | None:
        """None while the child runs (it is reaped here once ended), minus the signal that
        killed it."""
        return self._poll(os.WNOHANG)

    def _poll(self, flag: int) -> int | None:
        if self._code is None and self.pid is not None:
            try:
                pid, status = os.waitpid(self.pid, flag)
            except OSError:
                return None
            if pid == self.pid:
                self._code = os.waitstatus_to_exitcode(status)
                os.close(self.sentinel)  # type: ignore[arg-type]
        return self._code

    def is_alive(self) -> bool:
        return self.pid is not None and self.exitcode is None

    def join(self, timeout: float | None = None) -> None:
        if self._code is None and self.pid is not None:
            if timeout is not None and not _wait_any([self.sentinel], timeout):  # type: ignore[list-item]
                return
            self._poll(os.WNOHANG if timeout == 0 else 0)

    def kill(self) -> None:
        if self._code is None and self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _stdin_from_devnull() -> None:
    """multiprocessing's ``util._close_stdin``: a child reads nothing of the terminal's input."""
    if sys.stdin is None:
        return
    try:
        sys.stdin.close()
    except (OSError, ValueError):
        pass
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
        try:
            sys.stdin = open(fd, encoding="utf-8", closefd=False)
        except BaseException:
            os.close(fd)
            raise
    except (OSError, ValueError):
        pass


def _wait_any(sentinels: Sequence[int], timeout: float) -> list[int]:
    """The sentinels ready to read (children that ended), waiting up to ``timeout`` seconds for
    one (``multiprocessing.connection.wait``)."""
    poll = select.poll()
    for fd in sentinels:
        poll.register(fd, select.POLLIN)
    return [fd for fd, _ in poll.poll(max(0, math.ceil(timeout * 1000)))]


def start_child(p: Any) -> None:
    """Fork a child with Ctrl-C and SIGTERM held back until it has set its own handling
    (``child_signals``): a Ctrl-C at the instant of the fork would otherwise run, in the new
    process, the parent's handler or Python's default one (a KeyboardInterrupt traceback)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        p.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def child_signals(*, term: bool = True) -> None:
    """First thing in a child started by ``start_child``: ignore Ctrl-C (and SIGTERM, with
    ``term``: the parent decides how to stop), then take the signals held back; one that came
    meanwhile is dropped."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _recover_child(conn: Any, folder: Path, admit: Callable[[str, int], str | None],
                   max_per_host: int | None, parent: int) -> None:
    _die_with_parent(parent)
    child_signals(term=False)
    try:
        conn.send(recover(folder, admit, max_per_host))
    except OSError as e:
        conn.send(StoreError(f"{e.filename or folder}: {e.strerror or e}"))
    finally:
        conn.close()


class _Out:
    """The status stream. Its reader may go away (``crawl ... 2>&1 | head -1``): the first write
    that fails (EPIPE, or any other error) ends the printing, not the crawl, which goes on and
    ends as it would have. Standard error is then pointed at /dev/null, so that what else writes
    to it later (the command line's last words, a worker's message) does not fail either."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.lost = False

    def isatty(self) -> bool:
        try:
            return self.stream.isatty()
        except (OSError, ValueError):
            return False

    def write(self, text: str) -> None:
        if not self.lost:
            self._try(lambda: self.stream.write(text))

    def flush(self) -> None:
        if not self.lost:
            self._try(self.stream.flush)

    def _try(self, action: Callable[[], object]) -> None:
        try:
            action()
        except (OSError, ValueError):
            self.lost = True
            self._silence()

    def _silence(self) -> None:
        try:
            fd = self.stream.fileno()
        except (OSError, ValueError, AttributeError):
            return
        if fd in (1, 2):   # a standard stream, shared with what else prints
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)   # what is still buffered goes there too, at exit included
            os.close(null)


def _will_need_requests(seeds: Sequence[str]) -> bool:
    """Whether the workers will surely use requests' path (``spider/fetch_requests.py``): an https
    seed, or a proxy set in the environment. A plain http crawl may never need it (the direct
    path), so it is then left to the worker that meets a cookie, a redirect or an error."""
    return any(s.startswith("https:") for s in seeds) or any(
        k.lower().endswith("_proxy") and v and k.lower() != "no_proxy" for k, v in os.environ.items())


class _StopSignal:
    """Tells workers to stop: the parent closes the write end of a pipe, every worker sees EOF.

    No lock is involved (a multiprocessing.Event is a lock plus a condition: a worker killed
    while waiting on it can leave it held, and the parent's set() then hangs forever). If the
    parent dies, the pipe closes too, so orphaned workers stop by themselves.
    """

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        self._set = False
        self._poll: Any = None   # select.poll on the read end, made at the first look

    def set(self) -> None:
        if not self._set:
            self._set = True
            os.close(self._w)

    def is_set(self) -> bool:
        return self._set

    def close(self) -> None:
        self.set()
        os.close(self._r)

    def in_worker(self) -> None:
        """Called first thing in a forked worker: keep only the read end."""
        if not self._set:
            os.close(self._w)

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True as soon as the crawl should stop."""
        if not seconds > 0:   # (nan too, as max(0.0, nan) was)
            return self.stopped()
        ready, _, _ = select.select([self._r], [], [], seconds)
        return bool(ready)

    def stopped(self) -> bool:
        """True if the crawl should stop, without waiting: a worker asks before every page, so
        the pipe is polled by a poll object made once (~0.25 µs a look; select() with its lists
        took ~0.65 µs)."""
        if self._poll is None:
            self._poll = select.poll()
            self._poll.register(self._r, select.POLLIN)
        return bool(self._poll.poll(0))


def _worker_main(config: CrawlConfig, store: FileStore, stop: _StopSignal, parent: int) -> None:
    """Entry point of a worker process (forked: it inherits the parent's view of the store)."""
    _die_with_parent(parent)
    child_signals()   # the parent decides how to stop, also when the whole group gets SIGTERM
    stop.in_worker()
    from .spider import Spider

    if store.seen:
        store.after_fork(os.getpid())
    else:   # a replacement forked after the parent dropped its table builds its own view
        store = FileStore(store.folder, max_pages=config.max_pages,
                          max_per_host=config.max_pages_per_host, order=order_of(config),
                          only=config.discover, seeds=config.seeds).open()

    from .fetch import Fetcher
    spider = Spider(config, store, wait=stop.wait,
                    fetcher=Fetcher(config, warc=_warc_writer(config, store.folder)))
    try:
        spider.run(stop.stopped)
    except StoreError as e:
        try:
            sys.stderr.write(f"Error: {e}\n")
            sys.stderr.flush()
        except (OSError, ValueError):   # nobody reads standard error any more
            pass
        os._exit(WORKER_STORE_ERROR)
    finally:
        spider.close()


