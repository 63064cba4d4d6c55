"""What a crawl's start and end cost (issue 15): the crawl.lock taken without filelock, the
workers' stop check, and the schedule left alone without parsing it when it is compact."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

from spider import recrawl
from spider.crawl import ProjectLock, _StopSignal

ROOT = Path(__file__).resolve().parent.parent


def test_the_crawl_command_does_not_import_filelock() -> None:
    """~18 ms of every start (logging, decimal, its fork hooks) for one flock."""
    code = "import sys, spider.cli, spider.crawl; print('filelock' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_project_lock_excludes_a_second_crawl_and_filelock_both_ways(tmp_path: Path) -> None:
    path = tmp_path / "crawl.lock"
    first = ProjectLock(path)
    assert first.acquire()
    assert not ProjectLock(path).acquire()
    with pytest.raises(Timeout):   # push and pull take it with filelock
        FileLock(str(path), timeout=0).acquire()
    first.release()
    other = FileLock(str(path), timeout=0)
    other.acquire()
    assert not ProjectLock(path).acquire()
    other.release()
    again = ProjectLock(path)
    assert again.acquire()
    again.release()
    assert path.exists()   # the file stays: whoever takes it next locks the same inode


def test_a_forked_child_holds_the_lock_while_it_lives(tmp_path: Path) -> None:
    """A worker shares the parent's lock: the parent gone without releasing it (killed), no
    second crawl starts while a child of the first still runs."""
    path = tmp_path / "crawl.lock"
    lock = ProjectLock(path)
    assert lock.acquire()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: lives until the pipe closes
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    try:
        assert lock.fd is not None
        os.close(lock.fd)   # the parent's own descriptor gone, as when it is killed
        lock.fd = None
        assert not ProjectLock(path).acquire()
    finally:
        os.close(w)
        os.waitpid(pid, 0)
    after = ProjectLock(path)
    assert after.acquire()
    after.release()


def test_the_stop_signal_is_seen_without_waiting_in_the_parent_and_in_a_forked_child() -> None:
    stop = _StopSignal()
    assert not stop.stopped() and not stop.wait(0) and not stop.wait(math.nan) and not stop.wait(-1)
    started = time.monotonic()
    assert not stop.wait(0.05)
    assert time.monotonic() - started >= 0.04
    pid = os.fork()
    if pid == 0:
        stop.in_worker()
        deadline = time.monotonic() + 10
        while not stop.stopped() and time.monotonic() < deadline:
            time.sleep(0.001)
        os._exit(0 if stop.stopped() and stop.wait(0) and stop.wait(5) else 1)
    stop.set()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert stop.stopped() and stop.wait(0) and stop.wait(math.nan)   # (every write end closed now)
    stop.close()


def _lines(*pages: recrawl.Page) -> str:
    return recrawl.SCHEDULE_HEADER + "".join(p.line() for p in pages)


def test_a_compact_schedule_is_left_alone_without_parsing_its_pages(tmp_path: Path, monkeypatch) -> None:
    pages = [recrawl.after_fetch(f"http://a.test/{i}", 1000.0 + i, None, None, f"h{i}") for i in range(50)]
    path = tmp_path / recrawl.SCHEDULE
    path.write_text(_lines(*pages))
    before = path.stat()

    def no_parse(f):  # type: ignore[no-untyped-def]
        raise AssertionError("a compact schedule was parsed")

    monkeypatch.setattr(recrawl, "parse_schedule_line", no_parse)
    recrawl.compact_schedule(tmp_path)
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize("bad", [
    "http://a.test/x\t-\t-\tsoon\t-\t0\t0\t2026-01-01T00:00:00Z\t-\n",     # interval not a number
    "http://a.test/x\t-\t-\t86400\tlater\t0\t0\t2026-01-01T00:00:00Z\t-\n",  # due neither - nor a number
    "http://a.test/x\t-\t-\t86400\t-\tone\t0\t2026-01-01T00:00:00Z\t-\n",   # checks not a whole number
    "http://a.test/x\t-\t-\t86400\t-\t0\t0.5\t2026-01-01T00:00:00Z\t-\n",   # changes not a whole number
    "http://a.test/x\t-\t-\t86400\t-\t0\t0\n",                               # too few fields
])
def test_a_schedule_with_a_line_that_does_not_parse_is_still_rewritten_without_it(tmp_path: Path, bad: str) -> None:
    good = recrawl.after_fetch("http://a.test/", 1000.0, '"e"', None, "h")
    path = tmp_path / recrawl.SCHEDULE
    path.write_text(_lines(good) + bad)
    recrawl.compact_schedule(tmp_path)
    assert path.read_text() == _lines(good)


def test_a_schedule_with_a_url_twice_keeps_its_latest_line(tmp_path: Path) -> None:
    first = recrawl.after_fetch("http://a.test/", 1000.0, '"e1"', None, "h1")
    later = recrawl.after_fetch("http://a.test/", 2000.0, '"e2"', None, "h2")
    path = tmp_path / recrawl.SCHEDULE
    path.write_text(_lines(first, later))
    recrawl.compact_schedule(tmp_path)
    assert path.read_text() == _lines(later)


END_NOW = """
import atexit, sys, threading, time
sys.path.insert(0, {root!r})
from spider._entry import end_now
atexit.register(lambda: print("atexit ran", flush=False))
sys.stdout.write("buffered, no newline")
sys.stderr.write("to stderr")
if {thread}:
    threading.Thread(target=time.sleep, args=(0.2,)).start()
end_now({code!r})
print(" returned")
sys.exit({code!r})
"""


@pytest.mark.parametrize("code, thread, returned, rc", [
    (3, False, False, 3),
    (None, False, False, 0),
    (130, False, False, 130),
    (3, True, True, 3),                  # another thread runs: the usual exit, which waits for it
    ("a message", False, True, 1),       # a message to print: the usual exit prints it
])
def test_ending_a_crawl_at_once_keeps_its_output_atexit_functions_and_code(tmp_path: Path, code, thread,
                                                                           returned, rc) -> None:
    script = tmp_path / "end.py"
    script.write_text(END_NOW.format(root=str(ROOT), code=code, thread=thread))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == rc
    assert out.stdout == "buffered, no newline" + (" returned\n" if returned else "") + "atexit ran\n"
    assert out.stderr.startswith("to stderr")


def test_a_crawl_ends_with_its_summary_and_code_through_a_pipe(tmp_path: Path) -> None:
    """The crawl command's last lines and exit code, ended without the interpreter's teardown."""
    out = subprocess.run([sys.executable, str(ROOT / "main.py"), "crawl", "p", "http://127.0.0.1:9/",
                          "--projects-dir", str(tmp_path), "--workers", "1", "--delay", "0",
                          "--max-attempts", "1", "--ignore-robots"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines()[-1].startswith("nothing crawled; failed:"), out.stderr
    assert (tmp_path / "p" / "failed.txt").read_text().count("http://127.0.0.1:9/") == 1
