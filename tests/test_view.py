"""The saved frontier view (spider/frontier/view.py): a resume that loads it must see exactly what a resume
that reads the files sees (but for URLs refused after their claim, which it still knows), and a
view that no longer matches the files must never be used."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from spider.frontier import view as views
from spider.order import Order
from spider.records import QueueEntry, crawled_line, failed_line
from spider.frontier.seen import SeenSet, stable_fingerprint
from spider.stats import CENSUS, StatsRecorder
from spider.frontier.files import CLAIMS, CRAWLED, QUEUE, VIEW, FileStore

HOSTS = ["http://a.test/", "http://b.test/", "https://c.test:8443/", "http://d.test/"]


def no_delay(host: str) -> float:
    return 0.0


def state(s: FileStore) -> dict:
    """Everything a store derives from the files, in comparable form."""
    return {
        "counts": s.counts(),
        "buckets": sorted((h, sc, list(items)) for h, sc, items in s._frontier.buckets()),
        "rechecks": sorted((h, sc, list(items)) for h, sc, items in s._rechecks.buckets()),
        "delayed": sorted(s._delayed),
        "cursor": (s._cursor, dict(s._ahead), s._lines, s._consumed),
        "pos": s._queue.pos,
    }


def known_urls(folder: Path) -> list[str]:
    urls = []
    for name in (QUEUE, CRAWLED, "failed.txt"):
        for line in (folder / name).read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                urls.append(line.split("\t", 1)[0].strip())
    return urls


def open_both(folder: Path, **kw) -> tuple[FileStore, FileStore]:
    """The store as a resume with the view opens it, and as one that reads the files."""
    with_view = FileStore(folder, **kw).open()
    saved = (folder / VIEW).read_bytes()
    (folder / VIEW).unlink()
    from_files = FileStore(folder, **kw).open()
    (folder / VIEW).write_bytes(saved)
    return with_view, from_files


def claim_all(s: FileStore, now: float) -> list[str]:
    out = []
    while True:
        got = s.claim(1, now, no_delay).claims
        if not got:
            return out
        out.append(got[0].url)


def one_run(folder: Path, rng: random.Random, kw: dict, now: float, steps: int) -> None:
    """A run as the crawl makes one: the parent opens the store and saves its view, then watches;
    a worker (another store on the same files) claims, settles and adds; the parent folds."""
    parent = FileStore(folder, owner=1, **kw).open()
    if not parent.from_view:
        assert parent.save_view()
    parent.drop_seen()
    worker = FileStore(folder, owner=2, **kw).open()
    held = []
    n = 0
    for _ in range(steps):
        op = rng.random()
        if op < 0.35:
            host = rng.choice(HOSTS)
            batch = [QueueEntry(f"{host}p{rng.randrange(400)}", rng.randrange(4)) for _ in range(rng.randrange(1, 6))]
            worker.add(batch)
        elif op < 0.6:
            held += worker.claim(rng.randrange(1, 4), now, no_delay).claims
        elif op < 0.9 and held:
            c = held.pop(rng.randrange(len(held)))
            kind = rng.choice(["crawled", "failed", "retry", "released", "hop", "rejected"])
            if kind == "crawled":
                worker.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 10, c.entry.depth, 0))
            elif kind == "hop":
                worker.settle(c, "hop", record=crawled_line(c.url, 301, "-", 0, c.entry.depth, 0))
            elif kind == "failed":
                worker.settle(c, "failed", record=failed_line(c.url, "404", c.entry.depth, 0))
            elif kind == "retry":   # back in the queue, not due for a while: the waiting room
                worker.settle(c, "retry", requeue=QueueEntry(c.url, c.entry.depth, c.entry.attempts + 1,
                                                             now + rng.choice([0.5, 50.0, 5000.0])))
            elif kind == "released":
                worker.settle(c, "released", requeue=c.entry)
            else:
                worker.settle(c, "rejected")
        elif op < 0.93:
            with open(folder / QUEUE, "a") as f:   # written in while running: reported when claimed
                f.write(f"not a url {n}\n")
                n += 1
        elif op < 0.95:
            worker.requeue([QueueEntry(rng.choice(HOSTS) + "p1", 0, 0, 0.0, "-", "recheck")])
    for c in held:
        worker.settle(c, "released", requeue=c.entry)
    assert parent.fold()


@pytest.mark.parametrize("order,max_per_host", [("bfs", None), ("dfs", None), ("best", 40), ("bfs", 3)])
@pytest.mark.parametrize("seed", range(6))
def test_a_carried_view_is_what_reading_the_files_gives(tmp_path: Path, order: str, max_per_host, seed: int):
    """Runs of random claims, settles, retries and additions, each ending in a fold that carries
    the view forward; after each, a resume that loads the view and one that reads the files must
    hold the same index, counts and dedup table, and claim the same URLs in the same order."""
    rng = random.Random(seed)
    kw = {"order": Order(order, prefer=(r"p1",) if order == "best" else ()), "max_per_host": max_per_host}
    FileStore(tmp_path, owner=1, **kw).open().add(QueueEntry(h + "p0", 0) for h in HOSTS)
    for run in range(4):
        one_run(tmp_path, rng, kw, now=1000.0 + run, steps=rng.randrange(20, 120))
        a, b = open_both(tmp_path, **kw)
        assert a.from_view and not b.from_view
        assert state(a) == state(b)
        assert all(u in a.seen for u in known_urls(tmp_path))
        assert len(a.seen) >= len(b.seen)   # plus URLs claimed and refused in earlier runs: still known
    copy = tmp_path.parent / (tmp_path.name + "-files")
    shutil.copytree(tmp_path, copy)
    (copy / VIEW).unlink()
    a, b = FileStore(tmp_path, **kw).open(), FileStore(copy, **kw).open()
    assert a.from_view and not b.from_view
    order_a = claim_all(a, 10_000.0)
    assert order_a == claim_all(b, 10_000.0) and order_a


def test_the_crawl_path_saves_and_loads_the_view_and_ends_like_the_files(tmp_path: Path):
    """save_view at start-up, a fold by the watching parent, a load at the next start."""
    s = FileStore(tmp_path, owner=1).open()
    s.add(QueueEntry(f"{HOSTS[0]}{i}", 1) for i in range(1000))
    assert s.save_view()
    assert FileStore(tmp_path).open().from_view
    (tmp_path / QUEUE).open("a").write(HOSTS[1] + "hand-added\n")
    reopened = FileStore(tmp_path).open()
    assert not reopened.from_view                       # a line added by hand: the files are read
    assert HOSTS[1] + "hand-added" in reopened.seen


def _clean_project(tmp_path: Path) -> None:
    one_run(tmp_path, random.Random(1), {}, 1000.0, 60)
    assert FileStore(tmp_path).open().from_view


def test_a_view_is_not_used_after_a_hand_edit_of_any_file_it_describes(tmp_path: Path):
    _clean_project(tmp_path)
    crawled = (tmp_path / CRAWLED).read_text()
    (tmp_path / CRAWLED).write_text(crawled.replace("\n", "\n\n", 1))   # even a blank line
    assert not FileStore(tmp_path).open().from_view
    (tmp_path / CRAWLED).write_text(crawled)
    assert not FileStore(tmp_path).open().from_view    # written back: a new mtime still counts


def test_a_rewrite_with_the_same_inode_size_and_time_is_caught(tmp_path: Path):
    _clean_project(tmp_path)
    path = tmp_path / QUEUE
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    i = data.index(b"http", len(b"# "))
    data[i + 7] = ord("x") if data[i + 7] != ord("x") else ord("y")   # one byte of a URL, in place
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_ino == st.st_ino and os.stat(path).st_size == st.st_size
    assert not FileStore(tmp_path).open().from_view


def test_a_view_saved_under_other_settings_is_not_used(tmp_path: Path):
    _clean_project(tmp_path)
    assert not FileStore(tmp_path, order=Order("dfs")).open().from_view
    assert not FileStore(tmp_path, max_per_host=5).open().from_view   # needs the per-host counts
    assert not FileStore(tmp_path, only=("p1",)).open().from_view      # a discovery run holds lines back
    assert FileStore(tmp_path).open().from_view


@pytest.mark.parametrize("cut", [0, 10, 30, 200, -1])
def test_a_damaged_view_is_ignored_and_the_files_are_read(tmp_path: Path, cut: int):
    _clean_project(tmp_path)
    expected = state(FileStore(tmp_path).open())
    data = (tmp_path / VIEW).read_bytes()
    (tmp_path / VIEW).write_bytes(data[:cut] if cut >= 0 else data + b"x")
    s = FileStore(tmp_path).open()
    assert not s.from_view and state(s) == expected


def test_a_fold_without_a_view_from_this_run_removes_the_old_one(tmp_path: Path):
    _clean_project(tmp_path)
    s = FileStore(tmp_path, only=("p",)).open()   # a discovery run: no view
    assert not s.from_view and not s.save_view()
    assert s.fold()
    assert not (tmp_path / VIEW).exists()


def test_a_replacement_worker_mid_run_gets_the_claims_of_the_journal_on_top(tmp_path: Path):
    """Mid-run, before anything was appended, the view still matches queue.txt: a store opened
    then (a replacement worker) must apply the journal's claims to it, as a full read does."""
    s = FileStore(tmp_path, owner=1).open()
    s.add(QueueEntry(f"{HOSTS[0]}{i}", 0) for i in range(10))
    assert s.save_view()
    taken = [c.url for c in s.claim(3, 0.0, no_delay).claims]
    late = FileStore(tmp_path, owner=2).open()
    assert late.from_view
    assert late.refresh().in_flight == 3 and late.refresh().pending == 7
    assert not set(taken) & set(claim_all(late, 0.0))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 5000), unique=True), st.lists(st.integers(0, 5000), unique=True))
def test_translate_moves_kept_offsets_and_drops_the_rest(items, cuts):
    """``translate`` against the plain rule: an offset inside a kept stretch moves by the bytes
    dropped before it; one outside any is dropped."""
    bounds = sorted(set(cuts + [0, 5001]))
    starts, ends, news = [], [], []
    w = 100
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        if i % 2 == 0:   # every other stretch is kept
            starts.append(a)
            ends.append(b)
            news.append(w)
            w += b - a
    moves = views.Moves(starts, ends, news)
    expected = []
    for off in sorted(items):
        for a, b, n in zip(starts, ends, news):
            if a <= off < b:
                expected.append(off - a + n)
    assert list(views.translate(array("q", sorted(items)), moves)) == expected
    assert list(views._item_by_item(array("q", sorted(items)), moves)) == expected


def test_the_stable_fingerprint_is_the_same_in_another_interpreter():
    urls = ["http://a.test/", "https://b.test:8443/x?y=1", "http://c.test/caf%C3%A9"]
    code = ("import sys; from spider.frontier.seen import stable_fingerprint as f; "
            "print(*[f(u) for u in sys.argv[1:]])")
    out = subprocess.run([sys.executable, "-c", code, *urls], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONHASHSEED="12345")).stdout.split()
    assert [int(x) for x in out] == [stable_fingerprint(u) for u in urls]
    assert len({stable_fingerprint(u) for u in urls}) == 3


def test_a_stable_table_round_trips():
    s = SeenSet((f"http://a.test/{i}" for i in range(5000)), stable=True)
    table, count = s.state()
    again = SeenSet.from_table(array("q", table.tobytes()), count)
    assert len(again) == 5000 and all(f"http://a.test/{i}" in again for i in range(5000))
    assert "http://a.test/5000" not in again
    with pytest.raises(ValueError):
        SeenSet.from_table(array("q", bytes(8 * 1000)), 0)   # not a power of two


# -- the census cache (stats.py) -----------------------------------------------------------------

def test_the_census_saved_at_a_clean_stop_is_loaded_and_dropped_after_an_edit(tmp_path: Path):
    s = FileStore(tmp_path).open()
    s.add(QueueEntry(f"{HOSTS[0]}cal/{i}", 0) for i in range(50))
    s.add(QueueEntry(f"{HOSTS[1]}item{i}", 0) for i in range(20))
    rec = StatsRecorder(tmp_path)
    rec.catch_up()
    for c in s.claim(5, 0.0, no_delay).claims:
        s.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 10, 0, 0))
    rec.catch_up()
    assert s.fold()
    rec.save_census()
    counts = dict(rec.census.counts)
    assert sum(counts.values()) == 65
    loaded = StatsRecorder(tmp_path)
    loaded.catch_up()
    assert loaded.census.counts == counts
    assert loaded._tails["queue.txt"].pos == os.path.getsize(tmp_path / QUEUE)   # not read again
    (tmp_path / QUEUE).open("a").write(HOSTS[1] + "item99\n")
    edited = StatsRecorder(tmp_path)
    edited.catch_up()
    assert sum(edited.census.counts.values()) == 66      # read from the file again
    (tmp_path / CENSUS).write_text("# a cache\nqueue\tgarbage\n")
    damaged = StatsRecorder(tmp_path)
    damaged.catch_up()                                   # a damaged cache is ignored
    assert (tmp_path / CLAIMS).exists()
    assert damaged.census.counts == edited.census.counts   # the census read from queue.txt


def test_a_view_that_cannot_be_written_costs_nothing_but_the_shortcut(tmp_path: Path):
    """frontier.view is a cache: when it cannot be written (here a folder sits in its place, as
    a full disk or a read-only file would make a write fail), the crawl goes on as before."""
    (tmp_path / VIEW).mkdir()
    s = FileStore(tmp_path, owner=1).open()
    s.add(QueueEntry(f"{HOSTS[0]}{i}", 0) for i in range(10))
    assert not s.save_view()
    for c in s.claim(3, 0.0, no_delay).claims:
        s.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 10, 0, 0))
    assert s.fold()
    again = FileStore(tmp_path).open()
    assert not again.from_view and again.counts().pending == 7 and again.counts().crawled == 3


@pytest.mark.parametrize("typecode", ["I", "q"])
def test_a_long_piece_is_moved_by_the_lanes_subtraction_as_item_by_item(typecode: str):
    """A bucket piece of thousands of offsets is moved in one big-integer subtraction
    (``_minus``): the same offsets as one at a time, the biggest ones included (no lane borrows
    from the next)."""
    rng = random.Random(5)
    top = (1 << 32) - 1 if typecode == "I" else (1 << 40)
    items = array(typecode, sorted(rng.sample(range(10_000, top), 3 * views.WHOLE)) + [top])
    for shift in (1, 9_999, 10_000, items[0]):
        assert list(views._minus(items, shift)) == [x - shift for x in items]
    cut = items[views.WHOLE]   # two kept stretches, 7 bytes dropped between them
    moves = views.Moves([5_000, cut], [cut - 7, top + 1], [100, 100 + cut - 7 - 5_000])
    assert views.translate(items, moves) == views._item_by_item(items, moves)


def _stopped(folder: Path) -> tuple[FileStore, list[str]]:
    """A project as a crawl leaves it just before its clean stop: the parent opened it from the
    view a clean stop saved (and dropped its table, as the crawl's parent does), a worker crawled
    some pages and added links. Returns the parent, and the URLs that must be pending after the stop."""
    s = FileStore(folder, owner=1).open()
    s.add(QueueEntry(f"{HOSTS[i % 4]}p{i}", 0) for i in range(300))
    assert s.fold() and s.save_view()
    parent = FileStore(folder, owner=1).open()
    worker = FileStore(folder, owner=2).open()
    assert parent.from_view and worker.from_view
    parent.drop_seen()
    for c in worker.claim(50, 0.0, no_delay).claims:
        worker.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 10, 0, 0))
    worker.add(QueueEntry(f"{HOSTS[1]}new{i}", 1) for i in range(20))
    return parent, sorted(e.url for e in worker.pending_entries())


def test_the_signature_takes_the_crc_the_fold_computed_and_reads_again_after_an_edit(tmp_path: Path, monkeypatch):
    """The stop's signature (frontier.txt) holds a CRC of the whole queue.txt, which a start
    uses to tell a paste from an edit. The fold computes it while it writes the file; the
    signature written right after takes it and does not read a big queue.txt again, but a file
    changed since (a line appended by hand) is read: the CRC is always the file's own."""
    import zlib
    from spider.frontier import paste
    from spider.frontier.recovery import SIGNATURE, write_signature
    s, _ = _stopped(tmp_path)
    assert s.fold()
    real = paste.crc_of
    monkeypatch.setattr(paste, "crc_of", lambda *a: pytest.fail("queue.txt read again for its CRC"))
    write_signature(tmp_path, "k")
    crc = zlib.crc32((tmp_path / QUEUE).read_bytes())
    assert f"crc {crc}\n" in (tmp_path / SIGNATURE).read_text()
    monkeypatch.setattr(paste, "crc_of", real)
    with open(tmp_path / QUEUE, "a") as f:
        f.write("http://a.test/by-hand\n")
    write_signature(tmp_path, "k")
    crc = zlib.crc32((tmp_path / QUEUE).read_bytes())
    assert f"crc {crc}\n" in (tmp_path / SIGNATURE).read_text()


@pytest.mark.parametrize("step", range(16))
def test_a_kill_at_any_step_of_the_stop_loses_nothing(tmp_path: Path, step: int):
    """SIGKILL at each file step of the clean stop (every fsync, rename and write of the fold,
    its threads' included, the carried view's, then the signature's): the next start (recovery if the signature is not
    the files', then open) has every pending URL, once, and uses no view that is not the files'."""
    import signal
    from spider.frontier.recovery import is_clean, recover, write_signature
    parent, expected = _stopped(tmp_path)
    pid = os.fork()
    if pid == 0:   # the stop, killed at its ``step``-th step
        try:
            calls = [0]

            def counted(fn):
                def go(*a, **kw):
                    calls[0] += 1
                    if calls[0] > step:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return fn(*a, **kw)
                return go
            os.fsync, os.replace, os.write = counted(os.fsync), counted(os.replace), counted(os.write)
            assert parent.fold()
            write_signature(tmp_path, "k")
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status)
    assert killed or step >= 13   # (the stop has 15 such steps)
    clean = is_clean(tmp_path, "k")
    if not clean:
        recover(tmp_path, lambda url, depth: None)
    s = FileStore(tmp_path, owner=3).open()
    assert s.from_view == clean   # the carried view, once the stop is whole; never a stale one
    assert sorted(e.url for e in s.pending_entries()) == expected
    assert s.counts().pending == len(expected) and s.counts().crawled == 50
    assert sorted(claim_all(s, 0.0)) == expected


def test_a_queue_cut_while_the_fold_copies_it_is_copied_again(tmp_path: Path, monkeypatch):
    """The fold copies queue.txt in a thread while it carries the view; a copy that finds the
    file shorter than planned (cut by hand meanwhile) is thrown away and the fold starts over,
    the view carried again: the folded files and view are exactly the pending lines."""
    from spider.frontier import files
    s, expected = _stopped(tmp_path)
    real, calls = files._copy_range, [0]

    def cut_once(*args):
        calls[0] += 1
        if calls[0] == 1:
            raise files._Shrunk("queue.txt is shorter than expected")
        return real(*args)
    monkeypatch.setattr(files, "_copy_range", cut_once)
    assert s.fold() and calls[0] > 1
    again = FileStore(tmp_path, owner=3).open()
    assert again.from_view and sorted(e.url for e in again.pending_entries()) == expected
    assert sorted(claim_all(again, 0.0)) == expected
