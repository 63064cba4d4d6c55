"""State files changed by hand while a crawl runs (issue 13: items 3, 4, 12, counts after sed -i).

README, Guarantees: whatever a person does to queue.txt while the crawl runs (append a line with or
without its newline, truncate it, remove it, rewrite it with ``sed -i``), no URL is lost, none is
fetched twice, and the counts stay right. Each test runs ``python main.py crawl ...`` in a
subprocess against a loopback site with one *gated* page: the server holds its answer until the
test has made its edit, so the edit lands mid-crawl, with that page in flight and (where the test
needs it) URLs pending, without any sleeps or timing guesses.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from sitekit import TestSite
from spider.records import is_data, parse_queue_line

MAIN = str(Path(__file__).resolve().parent.parent / "main.py")
NAME = "live"
WAIT = 60   # seconds a step may take before the test gives up (a hang is the failure)


class Gate:
    """A page whose answer waits until ``open()``; ``arrived`` is set when it is requested."""

    def __init__(self, site: TestSite, path: str, body: str) -> None:
        self.arrived, self.opened = threading.Event(), threading.Event()

        def handler(info):  # type: ignore[no-untyped-def]
            self.arrived.set()
            self.opened.wait(WAIT)
            return 200, {}, body

        site.route(path, handler=handler)

    def open(self) -> None:
        self.opened.set()


def page(links: list[str]) -> str:
    return "<html><body>" + "".join(f'<a href="{h}">{h}</a>\n' for h in links) + "</body></html>"


def start(projects: Path, url: str, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, MAIN, "crawl", NAME, url, "--delay", "0", "--max-depth", "50",
           "--projects-dir", str(projects), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def finish(proc: subprocess.Popen) -> str:
    """Wait for the crawl to end on its own; a hang fails the test (and the crawl is killed)."""
    try:
        _, err = proc.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        pytest.fail(f"the crawl hung after the edit:\n{err[-3000:]}")
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    return err


def data(path: Path) -> list[str]:
    return [x for x in path.read_text(encoding="utf-8").splitlines() if is_data(x)] if path.exists() else []


def urls(path: Path) -> list[str]:
    return [x.split("\t", 1)[0] for x in data(path)]


def check_done(folder: Path, expected: set[str]) -> list[str]:
    """The crawl ended with every expected page crawled once, nothing pending or in flight."""
    crawled = urls(folder / "crawled.txt")
    assert not [u for u, n in Counter(crawled).items() if n > 1], "crawled.txt holds a URL twice"
    assert set(crawled) == expected, (sorted(expected - set(crawled)), sorted(set(crawled) - expected))
    assert [parse_queue_line(x).url for x in data(folder / "queue.txt")] == []
    assert data(folder / "claims.txt") == []
    return crawled


def summary_counts(err: str) -> dict[str, int]:
    """The numbers of the last line ``done: crawled N ..., failed N, pending N, ...``."""
    line = [x for x in err.splitlines() if x.startswith("done: ")][-1]
    return {k: int(re.search(rf"{k} (-?\d+)", line).group(1)) for k in ("crawled", "failed", "pending")}


def no_negative_counts(err: str) -> None:
    assert not re.search(r"(pending|in flight|crawled|failed) -\d", err), err


@pytest.fixture
def chain(site):
    """/ -> /c/0 -> /c/1 -> ... -> /c/11, with /c/4 gated: one URL at a time, so the crawler's next
    queue line is written right after the gate opens."""
    n = 12
    paths = [f"/c/{i}" for i in range(n)]
    site.route("/", body=page([paths[0]]))
    for i, p in enumerate(paths):
        if i != 4:
            site.route(p, body=page(paths[i + 1:i + 2]))
    gate = Gate(site, paths[4], page([paths[5]]))
    return site, gate, {site.url(p) for p in ["/"] + paths}


@pytest.fixture
def fan(site):
    """/ links to /f/0 ... /f/29; /f/0 is gated. With one worker, /f/0 is in flight and the
    other 29 are pending when the gate holds."""
    paths = [f"/f/{i}" for i in range(30)]
    site.route("/", body=page(paths))
    for p in paths[1:]:
        site.route(p, body=page([]))
    gate = Gate(site, paths[0], page([]))
    return site, gate, {site.url(p) for p in ["/"] + paths}


def edit_mid_crawl(projects: Path, url: str, gate: Gate, edit, *args: str) -> str:  # type: ignore[no-untyped-def]
    proc = start(projects, url, *args)
    try:
        assert gate.arrived.wait(WAIT), "the gated page was never requested"
        edit(projects / NAME / "queue.txt")
    finally:
        gate.open()
    return finish(proc)


# -- item 3: a line appended without its newline ------------------------------------------------------

def test_a_line_appended_without_newline_while_running_is_not_glued_to_the_next(chain, projects_dir):
    site, gate, pages = chain
    site.route("/hand1", body=page([]))

    def edit(queue: Path) -> None:
        with open(queue, "a", encoding="utf-8") as f:
            f.write(site.url("/hand1"))   # printf 'URL' >> queue.txt: no newline

    err = edit_mid_crawl(projects_dir, site.url("/"), gate, edit, "--workers", "1")
    folder = projects_dir / NAME
    check_done(folder, pages | {site.url("/hand1")})
    assert not [x for x in data(folder / "rejected.txt") if "hand1http" in x]
    assert summary_counts(err)["crawled"] == len(pages) + 1


def test_a_line_typed_without_newline_near_the_end_is_taken_by_this_run(fan, projects_dir):
    """Nothing is appended after it (the pages left link nowhere new): the crawl ends the line
    itself when nothing else is left, instead of saying "done, pending 1" and leaving it."""
    site, gate, pages = fan
    site.route("/hand2", body=page([]))

    def edit(queue: Path) -> None:
        with open(queue, "a", encoding="utf-8") as f:
            f.write(site.url("/hand2"))

    err = edit_mid_crawl(projects_dir, site.url("/"), gate, edit, "--workers", "1")
    check_done(projects_dir / NAME, pages | {site.url("/hand2")})
    assert summary_counts(err)["pending"] == 0


# -- item 4: queue.txt removed, truncated or replaced ---------------------------------------------------

def remove(queue: Path) -> None:
    queue.unlink()


def truncate(queue: Path) -> None:
    with open(queue, "w"):   # : > queue.txt
        pass


def sed_i(queue: Path) -> None:
    subprocess.run(["sed", "-i", "s/x/x/", str(queue)], check=True)   # a new file, same lines


def remove_journal(queue: Path) -> None:
    (queue.parent / "claims.txt").unlink()   # the claims in flight: known to every process still


def truncate_then_sed_i(queue: Path) -> None:
    """Two edits before the crawl looks: the file it replaced was cut already."""
    truncate(queue)
    sed_i(queue)


@pytest.mark.parametrize("edit", [remove, truncate, sed_i, truncate_then_sed_i, remove_journal],
                         ids=["rm", "truncate", "sed-i", "truncate-then-sed-i", "rm-claims"])
@pytest.mark.parametrize("workers", [1, 3])
def test_queue_txt_removed_truncated_or_replaced_while_running_loses_nothing(fan, projects_dir, edit, workers):
    """One worker: it waits on the gated page, 29 URLs pending; three: the others go on
    crawling (slowly) around the edit, so any process may be the one that notices it."""
    site, gate, pages = fan
    if workers > 1:
        for p in pages - {site.url("/"), site.url("/f/0")}:
            site.route(p[len(site.url("")) - 1:], body=page([]), delay=0.05)
    err = edit_mid_crawl(projects_dir, site.url("/"), gate, edit, "--workers", str(workers))
    folder = projects_dir / NAME
    crawled = check_done(folder, pages)
    assert max(site.hits.values()) == 1, "a page was fetched twice"
    no_negative_counts(err)
    counts = summary_counts(err)
    assert counts["crawled"] == len(crawled) and counts["pending"] == 0
    if edit in (remove, truncate, remove_journal):   # said once, by the process that noticed
        assert len([x for x in err.splitlines() if "while the crawl ran" in x]) == 1, err


# -- item 12: hand-appended lines checked like the start-up checks them -----------------------------------

def test_a_hand_line_ten_years_ahead_added_while_running_does_not_hold_the_crawl(chain, projects_dir):
    site, gate, pages = chain
    site.route("/later", body=page([]))
    far = time.time() + 10 * 365 * 86400

    def edit(queue: Path) -> None:
        with open(queue, "a", encoding="utf-8") as f:
            f.write(f"{site.url('/later')}\t0\t0\t{far:.3f}\n")

    finish_ok = edit_mid_crawl(projects_dir, site.url("/"), gate, edit, "--workers", "2")
    folder = projects_dir / NAME
    check_done(folder, pages)
    assert [x for x in data(folder / "rejected.txt")
            if x.startswith(site.url("/later")) and "more than a year ahead" in x]
    assert summary_counts(finish_ok)["pending"] == 0


def test_a_hand_line_of_a_crawled_url_added_while_running_is_not_fetched_again(chain, projects_dir):
    site, gate, pages = chain

    def edit(queue: Path) -> None:
        with open(queue, "a", encoding="utf-8") as f:   # crawled already, once as written, once not normalised
            f.write(f"{site.url('/c/1')}\n{site.url('/c/2')}#frag\n")

    err = edit_mid_crawl(projects_dir, site.url("/"), gate, edit, "--workers", "2")
    folder = projects_dir / NAME
    crawled = check_done(folder, pages)
    assert max(site.hits.values()) == 1, "a page was fetched twice"
    assert summary_counts(err) == {"crawled": len(crawled), "failed": 0, "pending": 0}


# -- edits of crawled.txt while running ---------------------------------------------------------------

def test_a_line_appended_to_crawled_txt_without_newline_keeps_the_next_record(chain, projects_dir):
    """The record the crawler writes next is not glued to a hand-written fragment: the page is
    crawled once, and the next run moves the fragment (a bare URL is a valid hand line)."""
    site, gate, pages = chain
    hand = "http://elsewhere.test/marked-by-hand"

    def edit(queue: Path) -> None:
        with open(queue.parent / "crawled.txt", "a", encoding="utf-8") as f:
            f.write(hand)

    edit_mid_crawl(projects_dir, site.url("/"), gate, edit, "--workers", "1")
    folder = projects_dir / NAME
    crawled = urls(folder / "crawled.txt")
    assert hand in crawled and set(crawled) - {hand} == pages
    assert max(site.hits.values()) == 1
