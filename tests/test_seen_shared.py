"""One dedup table for every process of a crawl (seen.py ``SharedSeen``, the file seen.bin):
a URL taken in by one process is known to the others without their reading anything, a hand
line is judged once, by the first process that reads it, and a table a process was killed while
changing (or a file cut under it) is rebuilt from the files, never trusted."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from spider.frontier.files import CLAIMS, QUEUE, SEEN, FileStore
from spider.frontier.seen import SharedSeen
from spider.records import QueueEntry, crawled_line

A = "http://a.test/"


def no_delay(host: str) -> float:
    return 0.0


def shared(folder: Path, owner: int = 1) -> FileStore:
    return FileStore(folder, owner=owner, shared=True).open()


def urls(*paths: str) -> list[QueueEntry]:
    return [QueueEntry(A + p) for p in paths]


def claim_all(store: FileStore) -> list[str]:
    out = []
    while True:
        got = store.claim(50, 0.0, no_delay).claims
        if not got:
            return out
        for c in got:
            out.append(c.url)
            store.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 1, 0, 0))


def in_child(fn) -> int:
    """Run ``fn`` in a forked child (as a crawl forks its workers); returns its exit status."""
    pid = os.fork()
    if pid == 0:
        try:
            fn()
        finally:
            os._exit(0)
    return os.waitpid(pid, 0)[1]


def test_a_url_one_worker_takes_in_is_known_to_another_without_its_reading_anything(tmp_path: Path) -> None:
    store = shared(tmp_path)
    store.add(urls("old"))
    assert isinstance(store.seen, SharedSeen) and (tmp_path / SEEN).exists()
    status = in_child(lambda: store.add(urls("by-child", "old")))   # a forked worker adds a link
    assert status == 0
    # No lock, no sync, no read of queue.txt: the page of the table the child wrote is ours too.
    assert A + "by-child" in store.seen and A + "nowhere" not in store.seen
    # A second store opened on the folder (a process of its own) and the first one, after its next
    # lock, use one file: what either adds the other knows at once.
    other = shared(tmp_path, owner=2)
    store.refresh()
    other.add(urls("by-other"))
    assert A + "by-other" in store.seen
    store.add(urls("by-first"))
    assert A + "by-first" in other.seen
    assert store.add(urls("by-other", "by-first")) == [] and other.add(urls("by-child")) == []
    assert sorted(claim_all(store) + claim_all(other)) == sorted(A + p for p in ("old", "by-child", "by-other", "by-first"))


def test_a_hand_line_is_judged_once_by_the_first_process_that_reads_it(tmp_path: Path) -> None:
    one, two = shared(tmp_path, 1), shared(tmp_path, 2)
    one.add(urls("a", "b"))
    two.refresh()
    with open(tmp_path / QUEUE, "a") as f:   # typed while the crawl runs: a known URL, a new one
        f.write(A + "a\n" + A + "typed\n")
    one.refresh()   # the first to read them judges them, and says so in the journal
    got = claim_all(two) + claim_all(one)   # the other, which read them second, must agree
    assert sorted(got) == [A + "a", A + "b", A + "typed"]   # the known one dropped, the new one once
    assert one.refresh().pending == 0 and two.refresh().pending == 0
    journal = (tmp_path / CLAIMS).read_text()
    assert sum(1 for r in journal.splitlines() if r.startswith("S\t")) == 1   # refused by one record


def test_a_table_a_process_was_killed_while_changing_is_rebuilt_not_trusted(tmp_path: Path) -> None:
    store = shared(tmp_path)
    store.add(urls("a", "b"))
    gen = store.seen.generation

    def die_while_changing() -> None:
        with store.lock:
            store.seen.begin()
            store.seen.add(A + "never-written")   # in the table, not in any file, then SIGKILL
            os.kill(os.getpid(), signal.SIGKILL)

    assert os.WIFSIGNALED(in_child(die_while_changing))
    assert A + "never-written" in store.seen   # the mapping shows what the dead process wrote
    assert [e.url for e in store.add(urls("never-written", "a"))] == [A + "never-written"]   # rebuilt: not lost
    assert store.seen.generation > gen and A + "b" in store.seen
    assert sorted(claim_all(store)) == [A + "a", A + "b", A + "never-written"]


def test_a_table_file_cut_under_the_crawl_is_rebuilt(tmp_path: Path) -> None:
    store = shared(tmp_path)
    store.add(urls(*(f"p{i}" for i in range(2000))))
    os.truncate(tmp_path / SEEN, 100)   # a person (or a full disk) cut it: no SIGBUS, a rebuild
    assert store.add(urls("p7", "new")) == urls("new")
    assert A + "p1999" in store.seen and len(store.seen) == 2001


def test_a_table_left_by_an_earlier_run_is_not_used(tmp_path: Path) -> None:
    store = shared(tmp_path)
    store.add(urls("a"))
    with store.lock:   # the file says it knows a URL no file holds (what a torn write could leave)
        store.seen.begin()
        store.seen.add(A + "ghost")
        store.seen.covered(store._queue.ino, store._queue.pos)
    again = shared(tmp_path, owner=2)   # the next run writes its own table from the files
    assert A + "ghost" not in again.seen and A + "a" in again.seen
    assert [e.url for e in again.add(urls("ghost"))] == [A + "ghost"]


def test_the_table_grows_under_every_process(tmp_path: Path) -> None:
    one, two = shared(tmp_path, 1), shared(tmp_path, 2)
    one.refresh()
    slots = one.seen.nbytes() // 8
    two.add(urls(*(f"g{i}" for i in range(slots))))   # past 3/4 full: a bigger file replaces it
    assert two.seen.nbytes() > slots * 8
    assert one.add(urls("g5", "g0", "fresh")) == urls("fresh")   # the first follows the new file
    assert A + "fresh" in two.seen and A + f"g{slots - 1}" in one.seen


def _mapped_tables(pid: int) -> set[int]:
    """Inodes of the seen.bin files process ``pid`` has mapped."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return {int(line.split()[4]) for line in f if line.rstrip().endswith("/" + SEEN)}
    except OSError:
        return set()


def test_every_worker_of_a_crawl_maps_one_table_and_the_crawl_fetches_each_page_once(site, projects_dir: Path) -> None:
    import subprocess
    import sys
    import time

    import psutil
    from test_processes import check_consistent, crawl_cmd
    paths = site.add_tree(60, 6, page_size=500)
    proc = subprocess.Popen(crawl_cmd(projects_dir, "p", site.url("/"), "--workers", "3", "--delay", "0.05",
                                      "--max-depth", "100"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: dict[int, set[int]] = {}
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and len(seen) < 3:
            for kid in psutil.Process(proc.pid).children():
                inodes = _mapped_tables(kid.pid)
                if inodes:
                    seen[kid.pid] = inodes
            time.sleep(0.02)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert len(seen) == 3, seen   # three workers, each mapping the table
    assert len(set().union(*seen.values())) == 1, seen   # one and the same file
    hits = site.hits
    hits.pop("/robots.txt", None)
    assert {site.url(p) for p in hits} == {site.url(p) for p in paths}
    assert max(hits.values()) == 1, [p for p, n in hits.items() if n > 1]
    crawled, failed, queue = check_consistent(projects_dir / "p")
    assert len(crawled) == len(paths) and queue == []


def test_the_fold_saves_the_shared_table_and_the_next_run_copies_it_from_the_view(tmp_path: Path) -> None:
    parent = shared(tmp_path)
    parent.add(urls(*(f"old{i}" for i in range(50))))
    assert parent.save_view()
    worker = shared(tmp_path, owner=2)   # (a second store stands for a forked worker)
    parent.drop_seen()   # the parent only watches now; the worker takes URLs in
    worker.add(urls("found-1", "found-2"))
    got = claim_all(worker)
    assert len(got) == 52
    assert parent.fold()   # the watcher's fold: the view carried with the worker's table
    again = shared(tmp_path, owner=3)
    assert again.from_view and isinstance(again.seen, SharedSeen)
    assert A + "found-2" in again.seen and A + "old49" in again.seen and len(again.seen) == 52
    assert again.add(urls("found-1", "old3", "brand-new")) == urls("brand-new")
    assert claim_all(again) == [A + "brand-new"]


def test_without_a_table_file_each_process_keeps_its_own_and_the_crawl_goes_on(tmp_path: Path, monkeypatch) -> None:
    import mmap
    said: list[str] = []

    def no_mmap(*a, **kw):
        raise OSError(19, "No such device")   # what a file system without mmap says
    monkeypatch.setattr(mmap, "mmap", no_mmap)
    store = FileStore(tmp_path, shared=True)
    store.warn = said.append
    store.open()
    assert not isinstance(store.seen, SharedSeen) and "each worker keeps its own dedup table" in said[0]
    store.add(urls("a", "b"))
    assert store.add(urls("a", "c")) == urls("c")
    assert sorted(claim_all(store)) == [A + "a", A + "b", A + "c"]


def test_a_full_disk_is_said_at_start_not_met_as_a_crash_later(tmp_path: Path, monkeypatch) -> None:
    import errno
    said: list[str] = []

    def full(fd: int, offset: int, size: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "posix_fallocate", full)
    store = FileStore(tmp_path, shared=True)
    store.warn = said.append
    store.open()   # no table file whose pages the disk cannot hold: one table per process instead
    assert not isinstance(store.seen, SharedSeen) and "No space left on device" in said[0]
    assert not list(tmp_path.glob(".seen.bin*"))   # the temporary file is gone too
    assert store.add(urls("a", "a", "b")) == urls("a", "b")
