"""A paste judged by several processes at once, stopped at varied moments: after each run the
files must agree with what the crawl says (spider/frontier/paste.py).

One 4-worker bench run once ended with 353,000 more lines in queue.txt than the pending count it
reported (copies of pasted lines whose admitted copies were in the file too). These runs put the
same shape under stress at a small scale: 40,000 new URLs pasted after a clean stop, judged a few
dozen lines a step (``PASTE_LINES`` lowered in the crawl's own process, so there are hundreds of
stretches and the parent and four workers take turns at them), then a crawl stopped by
--max-pages or by a Ctrl-C at some moment while the paste is still being judged, then the next
run. After every run: queue.txt holds exactly the pending lines the crawl reports, no URL twice,
no URL both done and pending, and every pasted URL is crawled, failed, rejected or pending."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spider.records import is_data
from spider.urls import normalize
from test_hostile import FAST, MAIN, _five_pages, crawl, page_hits

# The crawl's own process, with fewer pasted lines judged per step than the default, and each
# line judged a little slower (0.2 ms more: bare URLs take a shorter way, ``bare_url``), so the
# paste is still being judged when the run stops.
WITH_SMALL_STEPS = (f"import os, runpy, sys, time; sys.path.insert(0, {str(Path(MAIN).parent)!r}); "
                    "import spider.frontier.files as f, spider.frontier.paste as p; "
                    "f.PASTE_LINES = int(os.environ['PASTE_LINES']); "
                    "slow = lambda judge: lambda *a: (time.sleep(0.0002), judge(*a))[1]; "
                    "p.judge_line, p.bare_url = slow(p.judge_line), slow(p.bare_url); "
                    f"runpy.run_path({MAIN!r}, run_name='__main__')")


def crawl_stopped(projects: Path, *args: str, step: int, sigint_after: float | None) -> str:
    """``crawl ARGS`` with 4 workers and ``step`` pasted lines judged a step; a Ctrl-C (SIGINT to
    the crawl's process) after ``sigint_after`` seconds unless it ended before. Its output."""
    cmd = [sys.executable, "-c", WITH_SMALL_STEPS, "crawl", *args, "--workers", "4", "--delay", "0",
           *FAST, "--projects-dir", str(projects)]
    proc = subprocess.Popen(cmd, cwd=projects.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=dict(os.environ, PASTE_LINES=str(step)))
    try:
        if sigint_after is not None:
            try:
                proc.wait(sigint_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # (-SIGINT: the Ctrl-C came after the run's last line, as the process was leaving)
    assert proc.returncode in (0, 130, -signal.SIGINT), err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    return out + err


def urls_of(path: Path) -> list[str]:
    with open(path, encoding="utf-8", newline="") as f:
        return [line.split("\t", 1)[0].strip() for line in f if is_data(line)]


def reported_pending(output: str) -> int | None:
    """The pending count of the crawl's last line of figures (``..., pending N, ...``); None when
    the Ctrl-C came during the start-up, before the crawl began (nothing judged, nothing folded)."""
    last = [line for line in output.splitlines() if line.startswith(("stopped:", "interrupted:", "done:"))]
    if not last:
        assert "interrupted; run the same command again" in output, output[-3000:]
        return None
    return int(last[-1].split("pending ", 1)[1].split(",", 1)[0])


def assert_agrees(folder: Path, pasted: list[str], output: str) -> None:
    queued = [normalize(u) for u in urls_of(folder / "queue.txt")]
    assert reported_pending(output) in (len(queued), None), "queue.txt lines against the pending count reported"
    assert len(set(queued)) == len(queued), "a URL pending twice"
    done = set(urls_of(folder / "crawled.txt")) | set(urls_of(folder / "failed.txt"))
    assert not done & set(queued), "a URL both done and pending"
    kept = done | set(queued) | set(urls_of(folder / "rejected.txt"))
    assert [u for u in pasted if normalize(u) not in kept] == [], "pasted URLs lost"
    view = folder / "frontier.view"
    if view.exists():   # what the next start will believe, when it describes this queue.txt
        meta = json.loads(view.read_bytes().split(b"\n", 2)[1])
        st = os.stat(folder / "queue.txt")
        if meta["files"]["queue.txt"][:2] == [st.st_ino, st.st_size]:
            assert meta["lines"] + (meta["paste"][2] if meta.get("paste") else 0) == len(queued)


# (pasted lines judged a step, --max-pages of the run that takes the paste in, Ctrl-C after seconds)
ROUNDS = [(20, 30, None), (50, 300, 0.8), (20, 300, 1.5), (50, 100, 2.5), (100, 300, 1.0)]


@pytest.mark.parametrize("step,pages,sigint_after", ROUNDS, ids=[f"step{s}-max{m}-int{t}" for s, m, t in ROUNDS])
def test_a_paste_judged_by_four_workers_and_the_parent_leaves_queue_txt_as_reported(
        projects_dir: Path, site, step: int, pages: int, sigint_after: float | None) -> None:
    _five_pages(site)
    crawl(projects_dir, "p", site.url("/"), "--max-pages", "2")
    folder = projects_dir / "p"
    pasted = [site.url(f"/p{k % 8}?v={k}") for k in range(40_000)]   # all new, all real pages
    with open(folder / "queue.txt", "a") as f:
        f.write("".join(u + "\n" for u in pasted))
    out = crawl_stopped(projects_dir, "p", "--max-pages", str(2 + pages), step=step, sigint_after=sigint_after)
    assert "recovered" not in out   # a clean stop: the paste was judged lazily, not at start-up
    assert_agrees(folder, pasted, out)
    out = crawl_stopped(projects_dir, "p", "--max-pages", str(2 + 2 * pages), step=step, sigint_after=1.0)
    assert_agrees(folder, pasted, out)


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def judged_up_to(claims: Path) -> int:
    """The end of the last pasted stretch judged (S records of more than one line), 0 if none."""
    ends = [int(r.split("\t")[2]) for r in claims.read_text().splitlines()
            if r.startswith("S\t") and int(r.split("\t")[3]) > 1]
    return max(ends, default=0)


def test_a_worker_killed_while_the_parent_judges_a_paste_is_replaced_by_one_that_claims(
        projects_dir: Path, site) -> None:
    """The replacement is forked from the parent while it judges (dedup table kept, no index):
    it must build an index of its own and claim, or the new pasted pages are never fetched."""
    _five_pages(site)
    crawl(projects_dir, "p", site.url("/"), "--max-pages", "2")   # / and /p0 crawled, /p1-/p4 pending
    folder = projects_dir / "p"
    known = [site.url(p) for p in ("/", "/p0", "/p1", "/p2")]
    lines = [known[k % 4] for k in range(60_000)]   # known already: dropped as judged
    lines[30_000:30_000] = [site.url("/p5")]   # new pages, judged after the kill
    lines += [site.url("/p6"), site.url("/p7")]
    new_at = os.path.getsize(folder / "queue.txt") + sum(len(u) + 1 for u in lines[:30_000])
    with open(folder / "queue.txt", "a") as f:
        f.write("".join(u + "\n" for u in lines))
    cmd = [sys.executable, "-c", WITH_SMALL_STEPS, "crawl", "p", "--max-pages", "100", "--workers", "1",
           "--delay", "0", *FAST, "--projects-dir", str(projects_dir)]
    proc = subprocess.Popen(cmd, cwd=projects_dir.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=dict(os.environ, PASTE_LINES="50"))
    try:
        # The worker is idle (the old pending pages settled: nothing in flight to fetch again)
        # and the judging has begun.
        settled = {f"D\tcrawled\t{site.url(f'/p{i}')}" for i in range(1, 5)}
        while not (settled <= set((folder / "claims.txt").read_text().splitlines())
                   and judged_up_to(folder / "claims.txt")):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        [worker] = children(proc.pid)
        os.kill(worker, signal.SIGKILL)
        assert judged_up_to(folder / "claims.txt") <= new_at   # the new pages not judged yet
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert f"worker {worker} died" in err and "Traceback" not in err, err[-3000:]
    assert reported_pending(out + err) == 0 and urls_of(folder / "queue.txt") == []
    assert page_hits(site) == {p: 1 for p in ["/"] + [f"/p{i}" for i in range(8)]}
