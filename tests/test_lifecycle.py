"""The life of a crawl's processes, through the CLI with real processes and signals: the start-up
check interrupted (Ctrl-C twice, kill -9 of the parent), children that must die with the crawl,
a FIFO in place of a state file, a worker stopped (SIGSTOP) mid-fetch, two demos at once, and a
reader of standard error that goes away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from test_processes import check_consistent, crawl_cmd, site_body, urls_of

MAIN = str(Path(__file__).resolve().parent.parent / "main.py")
HAND_LINES = 300_000   # out-of-scope lines appended by hand: the start-up check takes seconds


def wait_for(what, seconds: float = 30.0, step: float = 0.02):
    """Poll ``what()`` until it is true (returned) or the deadline passes (None)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(step)
    return None


def live_children(pid: int) -> list[psutil.Process]:
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [k for k in kids if _alive(k) and "resource_tracker" not in " ".join(_cmdline(k))]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def session_processes(sid: int) -> list[psutil.Process]:
    """Every live process of a session (a crawl started with start_new_session: sid = its pid)."""
    out = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid and _alive(p):
                out.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def killpg(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for p in session_processes(proc.pid):   # a child that left the group would still be here
        try:
            p.kill()
        except psutil.Error:
            pass


@pytest.fixture
def slow_check(site, projects_dir):
    """A project whose next start-up check takes seconds: a first crawl stopped by --max-pages,
    then HAND_LINES out-of-scope URLs appended to queue.txt by hand."""
    pages = {site.url(p) for p in site.add_tree(40, 4)}
    first = subprocess.run(crawl_cmd(projects_dir, "p", site.url("/"), "--max-pages", "1", "--delay", "0"),
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    # Written as an editor writes (a new file): lines only appended to the file a clean stop left
    # are judged during the crawl instead (spider/frontier/paste.py), with no start-up check.
    queue = projects_dir / "p" / "queue.txt"
    edited = queue.with_name("queue.txt.edited")
    edited.write_text(queue.read_text() + "".join(f"http://127.0.0.2:9/x{i}\n" for i in range(HAND_LINES)))
    os.replace(edited, queue)
    return projects_dir / "p", pages


def start_and_wait_for_check(projects_dir: Path) -> tuple[subprocess.Popen, psutil.Process]:
    """Resume the project; return the crawl and its child that checks the files."""
    proc = subprocess.Popen(crawl_cmd(projects_dir, "p", "--max-pages", "1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    kids = wait_for(lambda: live_children(proc.pid))
    assert kids, "the start-up check never started"
    return proc, kids[0]


def test_ctrl_c_twice_during_the_start_up_check_leaves_no_process_behind(slow_check, projects_dir):
    """Ctrl-C twice (the terminal signals the whole group; the check's child ignores SIGINT):
    exit 130 with one line, no traceback, and no process of the crawl left once it has exited.
    An orphaned check replaced claims.txt under the next crawl (45 pages fetched twice)."""
    folder, pages = slow_check
    proc, checker = start_and_wait_for_check(projects_dir)
    try:
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.2)
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:   # already gone after the first: fine
            pass
        out, err = proc.communicate(timeout=60)
        left = session_processes(proc.pid)
    finally:
        killpg(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and [line for line in err.splitlines() if line.strip()] == [
        "interrupted; run the same command again to resume"], err
    assert left == [] and not _alive(checker), f"left running after the crawl exited: {left}"
    rerun = subprocess.run(crawl_cmd(projects_dir, "p", "--max-pages", "1000"), capture_output=True,
                           text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    crawled, failed, queue = check_consistent(folder)
    assert set(crawled) == pages and queue == []   # each once: check_consistent refuses a second line
    # Each hand line reported once (an orphaned or repeated check would report them twice). The
    # crawl's own rejections may add lines: with 4 workers claiming batches, a page of the tree
    # can be met first through a link from too deep a page ("depth"), then crawled from another.
    hand = [u for u in urls_of(folder / "rejected.txt") if u.startswith("http://127.0.0.2:9/")]
    assert len(hand) == len(set(hand)) == HAND_LINES


def test_kill_9_of_the_parent_during_the_check_kills_the_check(slow_check, projects_dir):
    """SIGKILL of the parent alone, mid-check: the child dies with it and writes nothing (an
    orphan finished the check and replaced queue.txt and claims.txt without the lock)."""
    folder, pages = slow_check
    queue = folder / "queue.txt"
    before = queue.stat()
    proc, checker = start_and_wait_for_check(projects_dir)
    try:
        time.sleep(0.3)
        proc.kill()
        proc.communicate(timeout=30)
        gone = wait_for(lambda: not _alive(checker))
    finally:
        killpg(proc)
    assert gone, "the check outlived the crawl's parent"
    after = queue.stat()
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)   # not replaced
    rerun = subprocess.run(crawl_cmd(projects_dir, "p", "--max-pages", "1000"), capture_output=True,
                           text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    crawled, failed, queue_urls = check_consistent(folder)
    assert set(crawled) == pages and queue_urls == []


def test_kill_9_of_the_parent_kills_its_workers_at_once(site, projects_dir):
    """A worker in the middle of a slow page when the parent is SIGKILLed dies too: it does not
    finish the page and write crawled.txt with nobody holding the lock."""
    started = threading.Event()

    def slow(info):
        started.set()
        time.sleep(4)
        return 200, None, "<title>slow</title>"

    site.route("/", body=f'<a href="{site.url("/slow")}">slow</a>')
    site.route("/slow", handler=slow)
    proc = subprocess.Popen(crawl_cmd(projects_dir, "w", site.url("/"), "--workers", "1", "--delay", "0"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert started.wait(30), "the slow page was never requested"
        workers = live_children(proc.pid)
        assert workers
        proc.kill()
        proc.communicate(timeout=30)
        gone = wait_for(lambda: not any(_alive(w) for w in workers))
    finally:
        killpg(proc)
    assert gone
    time.sleep(4.5)   # past the slow answer: an orphaned worker would have recorded it by now
    assert site.url("/slow") not in urls_of(projects_dir / "w" / "crawled.txt")


@pytest.mark.parametrize("name", ["failed.txt", "queue.txt", "settings.txt", "fetch.log"])
def test_a_fifo_in_place_of_a_state_file_is_refused_with_one_line(site, projects_dir, name):
    """A FIFO hung the start-up check (and status) for ever: an open for reading waits for a writer."""
    site.route("/", body="<title>home</title>")
    first = subprocess.run(crawl_cmd(projects_dir, "f", site.url("/"), "--delay", "0"),
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    path = projects_dir / "f" / name
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    for cmd in (crawl_cmd(projects_dir, "f"),
                [sys.executable, MAIN, "status", "f", "--projects-dir", str(projects_dir)]):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=30)
        finally:
            killpg(proc)
        lines = [line for line in err.splitlines() if line.strip()]
        assert proc.returncode == 1 and len(lines) == 1, err
        assert lines[0].startswith("Error: ") and name in lines[0] and "FIFO" in lines[0], err
    assert path.is_fifo()   # left as it was


def test_a_reader_of_stderr_that_goes_away_does_not_stop_the_crawl(site, projects_dir):
    """`crawl ... 2>&1 | head -1`: head exits after the first line; the crawl's next writes get
    EPIPE. It stops printing, goes on, exits 0 and leaves the files complete (it exited 1)."""
    paths = site.add_tree(30, 4)
    for p in paths:   # a crawl of a second or two: head is gone long before the end
        site.route(p, body=site_body(site, p), delay=0.05)
    cmd = " ".join(f"'{a}'" for a in crawl_cmd(projects_dir, "pipe", site.url("/"), "--workers", "1",
                                                "--delay", "0", "--ignore-robots"))
    run = subprocess.run(["bash", "-c", f"{cmd} 2>&1 | head -1; exit ${{PIPESTATUS[0]}}"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("warning: --ignore-robots"), run.stdout   # the one line head took
    crawled, failed, queue = check_consistent(projects_dir / "pipe")
    assert set(crawled) == {site.url(p) for p in paths} and queue == []
    assert (projects_dir / "pipe" / "frontier.txt").exists()   # the clean stop's fold happened


def test_a_second_demo_is_refused_while_the_first_crawls(projects_dir):
    """The second demo deleted the first one's folder (crawl.lock with it) while it crawled, and
    crawled beside it. Deterministic: the first is stopped (SIGSTOP) while the second runs."""
    demo = [sys.executable, MAIN, "demo", "--projects-dir", str(projects_dir)]
    first = subprocess.Popen(demo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        line = first.stderr.readline()
        assert line.startswith("serving the demo site at "), line
        url = line.split(" at ", 1)[1].strip()
        folder = projects_dir / "demo"
        assert wait_for(lambda: (folder / "running.txt").exists()), "the first demo never started crawling"
        os.killpg(first.pid, signal.SIGSTOP)
        try:
            second = subprocess.run(demo, capture_output=True, text=True, timeout=120)
        finally:
            os.killpg(first.pid, signal.SIGCONT)
        rest, err = first.communicate(timeout=120)
    finally:
        killpg(first)
    lines = [x for x in second.stderr.splitlines() if x.strip()]
    assert second.returncode == 1 and len(lines) == 1 and "already running" in lines[0], second.stderr
    assert first.returncode == 0, line + err
    crawled, failed, queue = check_consistent(folder)
    assert crawled and all(u.startswith(url) for u in crawled + failed), "another crawl wrote here"
    assert len(crawled) >= 20 and queue == []


@pytest.mark.parametrize("options", [("--max-time", "1"), ("--max-time", "1", "--workers", "2")])
def test_a_worker_stopped_mid_fetch_retries_the_page_without_spending_an_attempt(site, projects_dir, options):
    """SIGSTOP of the worker while its request waits for a quick answer, SIGCONT after longer
    than --max-time: the page was failed as `too slow` for good (and the page only it linked to
    was never found). Now it is fetched again, with --max-attempts 1 still allowing it."""
    asked = threading.Event()

    def slow(info):
        if info.count == 1:
            asked.set()
            time.sleep(0.3)   # a quick server; the worker is stopped meanwhile
        return 200, None, f'<a href="{site.url("/only-here")}">only here</a>'

    site.route("/", body=f'<a href="{site.url("/slow")}">slow</a>')
    site.route("/slow", handler=slow)
    site.route("/only-here", body="<title>found</title>")
    proc = subprocess.Popen(crawl_cmd(projects_dir, "z", site.url("/"), "--delay", "0", "--max-attempts", "1",
                                      *options), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert asked.wait(30), "the slow page was never requested"
        workers = live_children(proc.pid)
        assert workers
        for w in workers:
            w.suspend()   # SIGSTOP
        time.sleep(2)     # twice --max-time
        for w in workers:
            w.resume()    # SIGCONT
        out, err = proc.communicate(timeout=120)
    finally:
        killpg(proc)
    assert proc.returncode == 0, err
    crawled, failed, queue = check_consistent(projects_dir / "z")
    assert failed == [], (projects_dir / "z" / "failed.txt").read_text()
    assert {site.url("/slow"), site.url("/only-here")} <= set(crawled)
    assert site.hits["/slow"] == 2
    log = (projects_dir / "z" / "fetch.log").read_text()
    assert "\tpaused\t" in log, log


def test_a_ctrl_c_during_the_fold_does_not_cut_it_short(tmp_path: Path, site, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C asks for a clean stop, and the fold is the clean stop: one arriving while the crawl
    folds its files must not end the run with claims.txt unfolded (seen by the soak's pauses)."""
    import io

    from spider.config import CrawlConfig
    from spider.crawl import Crawl
    from spider.frontier.files import FileStore
    from spider.frontier.recovery import is_clean

    site.route("/", body="<html><body><a href='/a'>a</a></body></html>")
    site.route("/a", body="<html><body>a</body></html>")
    real = FileStore.fold

    def fold(self: FileStore) -> bool:
        os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C, delivered as the fold begins
        return real(self)

    monkeypatch.setattr(FileStore, "fold", fold)
    config = CrawlConfig(seeds=(site.url("/"),), workers=1, delay=0.0)
    try:
        Crawl(tmp_path, config, seeds=config.seeds, out=io.StringIO()).run()
    except KeyboardInterrupt:
        pytest.fail("a Ctrl-C during the fold cut the clean stop short")
    assert is_clean(tmp_path, config.key())   # folded: no claim left in claims.txt, the signature written


def _slow_child(ready, go, conn) -> None:  # type: ignore[no-untyped-def]
    """A child that is slow to set its signal handling, as a worker importing its modules is."""
    from spider.crawl import child_signals

    ready.set()
    go.poll(10)   # the parent sends Ctrl-C to it here, before child_signals (a pipe: an Event's
    # lock, held by a child that the Ctrl-C killed inside its wait, hung the parent's set())
    child_signals()
    conn.send("ok")


@pytest.mark.parametrize("how", ["start_child", "plain start"])
def test_a_ctrl_c_at_a_childs_fork_is_no_traceback(how: str) -> None:
    # A Ctrl-C to the whole group just as the workers start reached a worker before it ignored
    # SIGINT: a KeyboardInterrupt traceback on stderr (seen once in ~140 stopped runs). Children
    # are now forked with SIGINT/SIGTERM held back until they set their own handling.
    import multiprocessing

    from spider.crawl import start_child

    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    go, go_end = ctx.Pipe(duplex=False)
    parent_end, child_end = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_slow_child, args=(ready, go, child_end))
    start_child(p) if how == "start_child" else p.start()
    assert ready.wait(10)
    os.kill(p.pid, signal.SIGINT)
    time.sleep(0.2)   # the signal is delivered (or held) by now
    go_end.send("go")
    p.join(10)
    if how == "start_child":
        assert p.exitcode == 0 and parent_end.poll(1) and parent_end.recv() == "ok"
    else:   # what happened before: the child died of the KeyboardInterrupt it printed
        assert p.exitcode != 0
