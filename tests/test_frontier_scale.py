"""A frontier that does not care how big it is: a paste of many URLs into queue.txt after a
clean stop is judged during the crawl (spider/frontier/paste.py), not before its first fetch,
with every hand-edit guarantee of a start-up check kept: bad lines reported with their line
numbers and kept in rejected.txt, known URLs dropped, nothing lost or fetched twice after a kill
or a clean stop in the middle of it. Behaviour only: the figures are bench/frontier.py's."""

from __future__ import annotations

import time
from pathlib import Path

from spider.frontier.files import CLAIMS, QUEUE, REJECTED, FileStore
from spider.frontier.paste import LAZY_BYTES
from spider.frontier.recovery import is_clean, pasted_from, recover, write_signature
from spider.records import QueueEntry, crawled_line
from spider.stats import STATS_EVERY, StatsRecorder, alarm_from_rows, read_stats
from test_hostile import _five_pages, crawl, page_hits, rows, urls_in

KEY = "settings-key"
HOST = "http://paste.test"


def no_delay(host: str) -> float:
    return 0.0


def stopped_project(folder: Path, urls: list[str]) -> None:
    """A project as a clean stop leaves it: ``urls`` pending, the view saved, the signature
    written (as ``crawl`` does at its end)."""
    store = FileStore(folder).open()
    store.add(QueueEntry(u) for u in urls)
    assert store.save_view()
    assert store.fold()
    write_signature(folder, KEY)


def paste(folder: Path, lines: list[str]) -> int:
    """Append ``lines`` to queue.txt by hand; returns the line number of the first one."""
    with open(folder / QUEUE, "rb") as f:
        first = f.read().count(b"\n") + 1
    with open(folder / QUEUE, "a") as f:
        f.write("".join(line + "\n" for line in lines))
    return first


def many(n: int, start: int = 0) -> list[str]:
    urls = [f"{HOST}/page/{i}.html" for i in range(start, start + n)]
    assert sum(len(u) + 1 for u in urls) > LAZY_BYTES or start   # big enough to be judged lazily
    return urls


def open_pasted(folder: Path) -> FileStore:
    start = pasted_from(folder, KEY)
    assert start is not None
    store = FileStore(folder).open(paste_from=start)
    assert store.from_view and not store.needs_recovery
    return store


def claim_all(store: FileStore, settle: bool = True) -> list[str]:
    """Claim until nothing is left; returns the URLs claimed (settled as crawled)."""
    got = []
    while True:
        res = store.claim(50, time.time(), no_delay)
        if not res.claims:
            assert res.pending == 0 and store.paste_left() == 0
            return got
        for c in res.claims:
            got.append(c.url)
            if settle:
                store.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 10, 0, 0))


def test_a_big_paste_is_judged_while_claiming_not_before_the_first_claim(tmp_path: Path) -> None:
    stopped_project(tmp_path, [])
    pasted = many(40_000)
    paste(tmp_path, pasted)
    assert not is_clean(tmp_path, KEY)
    store = open_pasted(tmp_path)
    assert store.paste_left() == 40_000 and store.counts().pending == 40_000   # counted, not judged
    first = store.claim(1, time.time(), no_delay)
    assert [c.url for c in first.claims] == [pasted[0]]
    # The first claim came with most of the paste not judged yet (admission is lazy) ...
    assert 0 < store.paste_left() < 40_000 - 1
    # ... and every pasted URL is claimed in the end, exactly once.
    got = [first.claims[0].url] + claim_all(store)
    assert sorted(got) == sorted(pasted)


def test_old_pending_urls_are_claimed_first_while_the_paste_waits(tmp_path: Path) -> None:
    old = [f"{HOST}/old/{i}" for i in range(3)]
    stopped_project(tmp_path, old)
    pasted = many(40_000)
    paste(tmp_path, pasted)
    store = open_pasted(tmp_path)
    first = store.claim(3, time.time(), no_delay)
    assert sorted(c.url for c in first.claims) == old and store.paste_left() == 40_000
    assert sorted(claim_all(store)) == sorted(pasted)


def test_the_parent_judges_the_paste_without_an_index_while_a_worker_claims(tmp_path: Path) -> None:
    stopped_project(tmp_path, [f"{HOST}/old/0"])
    lines = many(40_000)
    lines[30_000] = "junk line"
    first = paste(tmp_path, lines)
    start = pasted_from(tmp_path, KEY)
    parent = FileStore(tmp_path, owner=1).open(paste_from=start)
    parent.drop_index()
    worker = FileStore(tmp_path, owner=2).open(paste_from=start)
    got = []
    while parent.judge_paste():
        for c in worker.claim(5, time.time(), no_delay).claims:
            got.append(c.url)
            worker.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 10, 0, 0))
    assert len(parent._frontier) == 0   # it only judged: no index of its own
    got += claim_all(worker)
    assert sorted(got) == sorted([u for u in lines if u.startswith("http")] + [f"{HOST}/old/0"])
    bad = [r[:2] for r in rows(tmp_path / REJECTED)]
    assert len(bad) == 1 and bad[0][1].startswith(f"queue.txt:{first + 30_000}: ")


def test_a_bad_line_deep_in_a_paste_is_reported_with_its_line_number_and_kept(tmp_path: Path) -> None:
    stopped_project(tmp_path, [f"{HOST}/old/0"])
    lines = many(40_000)
    lines[25_000] = "not a url at all"
    lines[25_001] = f"{HOST}/old/0"          # known already: dropped, not queued twice
    lines[25_002] = "HTTP://PASTE.test/page/7.html#x"   # another spelling of a pasted URL
    first = paste(tmp_path, lines)
    store = open_pasted(tmp_path)
    warned: list[str] = []
    store.warn = warned.append
    got = claim_all(store)
    bad = [r[:2] for r in rows(tmp_path / REJECTED)]
    assert len(bad) == 1 and bad[0][0] == "not a url at all", bad
    assert bad[0][1].startswith(f"queue.txt:{first + 25_000}: "), bad
    assert any(f"queue.txt:{first + 25_000}:" in w for w in warned)
    assert len(got) == len(set(got)) == 40_000 - 3 + 1


def test_a_kill_in_the_middle_of_a_paste_loses_nothing_and_reports_nothing_twice(tmp_path: Path) -> None:
    stopped_project(tmp_path, [])
    lines = many(40_000)
    lines[100] = "bad line early"
    lines[29_000] = "bad line late"
    paste(tmp_path, lines)
    store = open_pasted(tmp_path)
    claimed = []
    for _ in range(5):   # a few claim steps judge the head of the paste, then SIGKILL (no fold)
        for c in store.claim(2, time.time(), no_delay).claims:
            claimed.append(c.url)
            store.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 10, 0, 0))
    assert any(line.startswith("S\t") for line in (tmp_path / CLAIMS).read_text().splitlines())
    assert 0 < store.paste_left() < 40_000
    rep = recover(tmp_path, lambda url, depth: None)
    pending = urls_in(tmp_path / QUEUE)
    good = [u for u in lines if u.startswith("http")]
    assert sorted(pending + claimed) == sorted(good)   # nothing lost, nothing twice
    bad = [r[0] for r in rows(tmp_path / REJECTED)]
    assert sorted(bad) == ["bad line early", "bad line late"]   # the early one not reported again
    assert len([p for p in rep.problems if "bad line" in p]) == 1


def test_a_clean_stop_in_the_middle_of_a_paste_leaves_the_rest_to_judge_next_time(tmp_path: Path) -> None:
    stopped_project(tmp_path, [f"{HOST}/old/{i}" for i in range(5)])
    lines = many(40_000)
    lines[-1] = "bad line at the end"
    paste(tmp_path, lines)
    store = open_pasted(tmp_path)
    claimed = []
    for _ in range(4):
        for c in store.claim(3, time.time(), no_delay).claims:
            claimed.append(c.url)
            store.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 10, 0, 0))
    left = store.paste_left()
    assert 0 < left < 40_000
    assert store.fold()
    write_signature(tmp_path, KEY)
    assert urls_in(tmp_path / REJECTED) == []   # the bad line was not reached: still in queue.txt
    again = FileStore(tmp_path).open()   # a clean start: the saved view says what is left to judge
    assert again.from_view and again.paste_left() == left
    claimed += claim_all(again)
    good = [u for u in lines if u.startswith("http")] + [f"{HOST}/old/{i}" for i in range(5)]
    assert sorted(claimed) == sorted(good)
    bad = [r for r in rows(tmp_path / REJECTED)]
    assert len(bad) == 1 and bad[0][0] == "bad line at the end"
    assert again.fold() and urls_in(tmp_path / QUEUE) == []   # no line of the paste left behind


def test_two_processes_judge_one_paste_between_them_and_claim_each_url_once(tmp_path: Path) -> None:
    stopped_project(tmp_path, [])
    lines = many(40_000)
    for i in range(0, 40_000, 997):
        lines[i] = "" if i % 2 else "# a comment"   # lines that are not URLs: counted as lines
    lines[35_000] = "bad line"
    first = paste(tmp_path, lines)
    pasted = [u for u in lines if u.startswith("http")]
    start = pasted_from(tmp_path, KEY)
    a = FileStore(tmp_path, owner=1).open(paste_from=start)
    b = FileStore(tmp_path, owner=2).open(paste_from=start)
    got: list[str] = []
    for _ in range(2000):
        taken = 0
        for s in (a, b):
            for c in s.claim(20, time.time(), no_delay).claims:
                got.append(c.url)
                taken += 1
                s.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 10, 0, 0))
        if not taken:
            break
    assert sorted(got) == sorted(pasted)
    assert a.paste_left() == b.paste_left() == 0
    assert a.counts().pending == b.counts().pending == 0
    bad = [r[:2] for r in rows(tmp_path / REJECTED)]   # its number, whichever process judged it
    assert len(bad) == 1 and bad[0][1].startswith(f"queue.txt:{first + 35_000}: "), bad


def test_a_small_paste_is_still_checked_at_start_up(tmp_path: Path) -> None:
    stopped_project(tmp_path, [f"{HOST}/old/0"])
    paste(tmp_path, [f"{HOST}/a", "junk"])
    assert pasted_from(tmp_path, KEY) is None   # recovery takes it, as before


def test_an_edit_before_the_paste_makes_the_start_check_everything(tmp_path: Path) -> None:
    stopped_project(tmp_path, [f"{HOST}/old/{i}" for i in range(3)])
    data = (tmp_path / QUEUE).read_bytes()
    with open(tmp_path / QUEUE, "r+b") as f:   # same inode, same size: only the CRC can tell
        f.write(data.replace(b"/old/1", b"/new/1"))
    paste(tmp_path, many(40_000))
    assert pasted_from(tmp_path, KEY) is None


def test_a_crawl_judges_a_big_paste_and_reports_its_bad_line_with_its_number(projects_dir: Path, site) -> None:
    _five_pages(site)
    crawl(projects_dir, "p", site.url("/"), "--max-pages", "2")
    folder = projects_dir / "p"
    # Many lines of pages known already (crawled or queued), a bad line and a new page at the end.
    known = [site.url("/"), site.url("/p0"), site.url("/p1")]
    lines = [f"{known[i % 3]}" for i in range(60_000)] + ["bad pasted line", site.url("/p6")]
    first = paste(folder, lines)
    result = crawl(projects_dir, "p", "--max-pages", "100", workers=2)
    assert "recovered" not in result.stdout + result.stderr
    bad = [r for r in rows(folder / REJECTED) if r[0] == "bad pasted line"]
    assert len(bad) == 1 and bad[0][1].startswith(f"queue.txt:{first + 60_000}: "), bad
    assert f"queue.txt:{first + 60_000}:" in result.stderr
    assert page_hits(site)["/p6"] == 1 and set(page_hits(site).values()) == {1}


def sampled_while_judging(folder: Path, trap: list[str] | None = None) -> StatsRecorder:
    """The crawl's parent judging a paste (``judge_paste``), with a row of stats.txt after each
    step, 2 s apart as the trap alarm counts them; with ``trap``, a worker queues 1,000 more of
    those URLs at each step, as a crawl caught in a calendar would."""
    start = pasted_from(folder, KEY)
    parent = FileStore(folder, owner=1).open(paste_from=start)
    parent.drop_index()
    worker = FileStore(folder, owner=2).open(paste_from=start)
    stats = StatsRecorder(folder)
    when = 1_000_000.0
    while True:
        left = parent.judge_paste(4_000)
        if trap:
            worker.add(QueueEntry(u) for u in trap[:1_000])
            del trap[:1_000]
        when += STATS_EVERY
        c = parent.refresh()
        stats.sample(c.pending, c.in_flight, c.crawled, c.hops, c.failed, when=when)
        if not left:
            return stats


def test_a_pasted_url_is_counted_once_by_the_census_so_a_paste_is_no_trap(tmp_path: Path) -> None:
    stopped_project(tmp_path, [f"{HOST}/old/{i}" for i in range(3)])
    paste(tmp_path, many(40_000))   # one URL pattern, 99.99 % of the pending queue: no trap (not growing)
    stats = sampled_while_judging(tmp_path)
    rows = read_stats(tmp_path)
    assert len(rows) == 10
    # Each pasted URL counted once: the pasted line until its stretch is judged, then its copy.
    assert {(r.top_pattern, r.top_pending) for r in rows} == {("paste.test/page/{n}.html", 40_000)}
    assert stats.alarm() is None and alarm_from_rows(rows) is None   # what the crawl, status and report say


def test_a_trap_found_while_a_paste_is_judged_still_raises_the_alarm(tmp_path: Path) -> None:
    stopped_project(tmp_path, [f"{HOST}/old/{i}" for i in range(3)])
    paste(tmp_path, many(40_000))
    stats = sampled_while_judging(tmp_path, trap=[f"{HOST}/page/{i}.html" for i in range(40_000, 60_000)])
    top = read_stats(tmp_path)[-1]
    assert (top.top_pattern, top.top_pending, top.pending) == ("paste.test/page/{n}.html", 50_000, 50_003)
    assert "possible trap: paste.test/page/{n}.html is 99% of the pending queue" in alarm_from_rows(read_stats(tmp_path))
    assert stats.alarm() is not None


def test_a_worker_forked_from_the_judging_parent_builds_its_index_and_claims(tmp_path: Path) -> None:
    """A replacement worker is forked from the parent while it judges a paste: the dedup table
    kept, no index (``drop_index``). ``after_fork`` must give it one (the pasted lines judged so
    far, the old pending ones, lines added by hand meanwhile: a known URL among them dropped)."""
    old = [f"{HOST}/old/{i}" for i in range(3)]
    stopped_project(tmp_path, old)
    pasted = many(40_000)
    paste(tmp_path, pasted)
    parent = open_pasted(tmp_path)
    parent.drop_index()
    for _ in range(10):
        parent.judge_paste()
    paste(tmp_path, [f"{HOST}/old/1", f"{HOST}/typed/0"])   # typed while it runs; the first is queued already
    left = parent.judge_paste()
    assert 0 < left < 40_000 and len(parent._frontier) == 0
    parent.after_fork(2)   # what the forked replacement does first (crawl.py, _worker_main)
    got = claim_all(parent)
    assert sorted(got) == sorted(old + pasted + [f"{HOST}/typed/0"])


def test_a_paste_judged_into_the_shared_table_is_claimed_once_and_known_to_every_process(tmp_path: Path) -> None:
    """With one dedup table for the crawl (seen.bin), the judge holds a stretch's new URLs apart
    until their lines are written, then the table learns them: a URL pasted twice, or already
    known, is queued once, and every process knows every admitted URL without reading it."""
    stopped_project(tmp_path, [f"{HOST}/old/0"])
    lines = many(40_000)
    lines[10_000] = f"{HOST}/old/0"       # known already: dropped
    lines[20_000] = lines[5]              # pasted twice: queued once
    lines[30_000] = "junk line"
    paste(tmp_path, lines)
    start = pasted_from(tmp_path, KEY)
    parent = FileStore(tmp_path, owner=1, shared=True).open(paste_from=start)
    parent.drop_index()
    worker = FileStore(tmp_path, owner=2, shared=True).open(paste_from=start)
    assert type(parent.seen).__name__ == "SharedSeen" and type(worker.seen).__name__ == "SharedSeen"
    got = []
    while parent.judge_paste():
        for c in worker.claim(5, time.time(), no_delay).claims:
            got.append(c.url)
            worker.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 10, 0, 0))
    got += claim_all(worker)
    expected = {u for u in lines if u.startswith("http")}
    assert sorted(got) == sorted(expected)          # each once; the old URL was crawled before
    worker.refresh()
    assert all(u in worker.seen and u in parent.seen for u in expected)
    assert [e.url for e in worker.add([QueueEntry(lines[7]), QueueEntry(f"{HOST}/new")])] == [f"{HOST}/new"]
