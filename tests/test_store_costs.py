"""The file store's cheaper per-page paths keep their guarantees: one look at each file per lock
hold, the last byte of a file read only when it grew since we read it, the outcome logs looked at
through the descriptor they are written with, the URLs found known kept as strings, and the pid
remembered instead of asked (a forked worker still takes the lock on its own descriptor)."""

from __future__ import annotations

import os
from pathlib import Path

from spider.frontier import files
from spider.frontier.files import CRAWLED, QUEUE, FileStore
from spider.records import QueueEntry, crawled_line

A = "http://a.test/"


def no_delay(host: str) -> float:
    return 0.0


def data_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def test_a_queue_line_typed_without_newline_after_our_last_read_is_not_glued_to_ours(tmp_path: Path):
    store = FileStore(tmp_path).open()
    store.add([QueueEntry(A + "1", 0)])   # our pos is now the end of queue.txt
    with open(tmp_path / QUEUE, "a") as f:
        f.write(A + "hand")   # a person, without the newline
    store.add([QueueEntry(A + "2", 0)])
    assert data_lines(tmp_path / QUEUE)[-2:] == [A + "hand", data_lines(tmp_path / QUEUE)[-1]]
    assert data_lines(tmp_path / QUEUE)[-1].startswith(A + "2\t")
    urls = []
    while True:
        got = store.claim(5, 0.0, no_delay).claims
        if not got:
            break
        urls += [c.url for c in got]
    assert sorted(urls) == [A + "1", A + "2", A + "hand"]


def test_a_line_of_another_process_is_read_though_our_append_ended_the_file(tmp_path: Path):
    one, two = FileStore(tmp_path, owner=1).open(), FileStore(tmp_path, owner=2).open()
    one.add([QueueEntry(A + "1", 0)])
    two.add([QueueEntry(A + "2", 0)])   # one's pos is no longer the end: it must read two's line
    one.add([QueueEntry(A + "3", 0)])
    assert one.known([A + "1", A + "2", A + "3"]) == {A + "1", A + "2", A + "3"}
    assert one.counts().pending == 3


def test_a_crawled_txt_fragment_typed_after_our_first_record_is_ended_before_the_next(tmp_path: Path):
    store = FileStore(tmp_path).open()
    store.add([QueueEntry(A + "1", 0), QueueEntry(A + "2", 0)])
    first, second = store.claim(2, 0.0, no_delay).claims
    store.settle(first, "crawled", record=crawled_line(first.url, 200, "text/html", 1, 0, 0))   # log now open
    with open(tmp_path / CRAWLED, "a") as f:
        f.write("http://hand.test/x")   # no newline
    store.settle(second, "crawled", record=crawled_line(second.url, 200, "text/html", 1, 0, 0))
    lines = data_lines(tmp_path / CRAWLED)
    assert lines[1] == "http://hand.test/x"
    assert lines[2].startswith(A + "2\t200\t")


def test_known_urls_kept_as_strings_are_forgotten_with_their_table(tmp_path: Path):
    store = FileStore(tmp_path).open()
    store.add([QueueEntry(A + "1", 0)])
    assert store.known([A + "1", A + "2"]) == {A + "1"}
    assert store.known([A + "1"]) == {A + "1"}   # now answered from the strings
    store.drop_seen()   # a new (empty) table: what the old one knew is no answer any more
    assert store.known([A + "1"]) == set()


def test_known_strings_stay_bounded(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(files, "HOT_URLS", 10)
    store = FileStore(tmp_path).open()
    urls = [f"{A}{i}" for i in range(50)]
    store.add([QueueEntry(u, 0) for u in urls])
    for u in urls:
        assert store.known([u]) == {u}
    assert len(store._hot) <= 11
    assert store.known(urls) == set(urls)


def test_a_forked_process_takes_the_lock_on_its_own_descriptor(tmp_path: Path):
    """flock belongs to an open file description: a child using its parent's descriptor would
    'hold' the lock while the parent does. The pid the store remembers must be the child's."""
    store = FileStore(tmp_path).open()
    with store.lock:
        parent_fd = store.lock._fd
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # pragma: no cover (the child)
        try:
            with store.lock:
                ok = files._PID[0] == os.getpid() and store.lock._fd != parent_fd and \
                    store.lock._pid == os.getpid()
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    answer = os.read(r, 1)
    os.waitpid(pid, 0)
    os.close(r)
    assert answer == b"1"
