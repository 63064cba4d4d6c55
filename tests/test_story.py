"""One story about a crawl: ``status``, ``report``, ``export`` and the run's summary line count the
same things the same way (a recrawl's checks, the discovery ratio, pages per second), and the
messages say what a user needs next. Real subprocess runs against loopback sites, plus the
definitions (``spider.stats``) tested on rows built by hand."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from spider.recrawl import time_left
from spider.report import load, render
from spider.stats import (FAST_EVERY, STATS_EVERY, StatsRecorder, StatsRow, alarm_from_rows, discovery_ratio,
                          pages_per_second, read_stats, runs, sample_every)
from spider.status import report as status_report
from spider.words import plural
from sitekit import RequestInfo, TestSite

from test_fresh import MAIN, TIMEOUT, cli, ok   # noqa: E402  (subprocess runs of main.py)


def summary_rate(stderr: str) -> str:
    found = re.findall(r"^(?:done|interrupted|stopped): .*\(([0-9.]+) pages/s\)$", stderr, re.M)
    assert found, stderr
    return found[-1]


def etag_site(site: TestSite, n: int) -> list[str]:
    """n pages in a chain, each with an ETag: a check of an unchanged page answers 304 (as nginx
    does for static files)."""
    paths = ["/"] + [f"/p{i}" for i in range(1, n)]

    def answer(info: RequestInfo, i: int):  # type: ignore[no-untyped-def]
        tag = f'"v1-{i}"'
        if info.headers.get("If-None-Match") == tag:
            return 304, {"ETag": tag}, b""
        links = "".join(f'<a href="{p}">{p}</a>' for p in paths[i + 1:i + 3])
        return 200, {"Content-Type": "text/html", "ETag": tag}, f"<title>page {i}</title>{links}<p>page {i}</p>"

    for i, path in enumerate(paths):
        site.route(path, handler=lambda info, i=i: answer(info, i))
    return paths


# ----------------------------------------------------------------------------- item 4: recrawl


def test_after_recrawl_all_status_report_and_export_tell_one_story(site: TestSite, projects_dir: Path) -> None:
    paths = etag_site(site, 12)
    site.route("/p11", status=404, body="gone")   # one failure, so the counts are not all one kind
    ok(cli(projects_dir, "crawl", "r", site.url("/"), "--delay", "0", "--max-depth", "20"))
    folder = projects_dir / "r"
    recrawled = ok(cli(projects_dir, "recrawl", "r", "--all", "--delay", "0"))
    pages = len(paths) - 1

    # export: the last status of each URL, 304 for the pages found unchanged
    exported = [json.loads(line) for line in ok(cli(projects_dir, "export", "r", "--format", "jsonl")).stdout.splitlines()]
    codes = Counter(str(r["status"]) for r in exported)
    assert codes == Counter({"304": pages, "404": 1}), codes

    # status says the same under its host, and what the round of checks found
    status = ok(cli(projects_dir, "status", "r")).stdout
    assert "status: 304 11, 404 1" in status, status
    assert re.search(rf"^recrawl +1 run with checks; .*: {pages} checked: 0 changed, {pages} unchanged, "
                     r"0 removed, 0 failed; 0 new pages$", status, re.M), status

    # the report: the same codes, a recrawl section, the checks counted in pages/s
    data = load(folder)
    assert sum(data.status_by_host.values(), Counter()) == codes
    assert [r.results for r in data.rounds] == [{"unchanged": pages}]
    page = render(data)
    assert "Recrawl checks" in page and "checked" in page
    rows = read_stats(folder)
    last_run = runs(rows)[-1]
    assert last_run[-1].checked - last_run[0].checked == pages
    rate = pages_per_second(last_run)
    assert rate is not None and rate > 0           # it read 0: checks were not pages
    assert f"{rate:.1f}" == summary_rate(recrawled.stderr)
    # "URLs discovered" counts URLs once: rechecks waiting in the queue are not new URLs (it
    # climbed to twice the pages and fell back)
    assert max(r.discovered for r in rows) == rows[-1].discovered == len(paths), [r.discovered for r in rows]
    # the headline rate counts the checks as it counts their time
    assert f"{pages_per_second(rows):.1f} pages/s" in page


# ----------------------------------------------------------------------------- item 5: discovery ratio


def row(t: float, pending: int, crawled: int, discovered: int, failed: int = 0, first: bool = False) -> StatsRow:
    return StatsRow(t, pending=pending, crawled=crawled, failed=failed, discovered=discovered, first=first)


def test_the_discovery_ratio_is_new_urls_per_page_fetched_over_the_same_time() -> None:
    # A finished crawl of 11 pages from one seed: 10 new URLs for 11 pages; it just ends below 1.
    finished = [row(0, 1, 0, 1), row(2, 6, 4, 10), row(4, 1, 9, 11), row(5, 0, 10, 11, failed=1)]
    assert discovery_ratio(finished) == pytest.approx(10 / 11)
    assert discovery_ratio(finished, 1.0) == 0.0          # the last second: nothing new, running out
    assert discovery_ratio(finished, 3.0) == pytest.approx(1 / 7)   # the last 3 s of crawl time
    # 1: the frontier holds steady (pending stays the same)
    assert discovery_ratio([row(0, 5, 0, 5), row(2, 5, 4, 9)]) == 1.0
    assert discovery_ratio([row(0, 1, 0, 1)]) is None and discovery_ratio([]) is None


def test_a_window_longer_than_the_crawl_is_the_whole_crawl() -> None:
    killed = [row(0.25 * i, 1 + 3 * i, 2 * i, 1 + 5 * i) for i in range(15)]   # killed at 3.5 s
    assert discovery_ratio(killed, 30.0) == discovery_ratio(killed) == pytest.approx(2.5)


def test_pauses_between_runs_are_not_crawl_time() -> None:
    first = [row(0, 1, 0, 1), row(2, 3, 2, 5)]                        # 4 new for 2 pages
    second = [row(3600, 3, 2, 9, first=True), row(3602, 1, 6, 9)]      # 4 added between runs: not by pages
    assert discovery_ratio(first + second) == pytest.approx(4 / 6)
    assert discovery_ratio(first + second, 2.0) == 0.0                 # the last 2 s of crawling
    assert discovery_ratio(first + second, 4.0) == pytest.approx(4 / 6)
    # a run marker splits two runs even when the gap is short (a recrawl right after a crawl)
    assert len(runs([row(0, 1, 0, 1), row(1, 0, 1, 1), row(2, 1, 1, 1, first=True)])) == 2


def test_status_after_a_kill_says_one_ratio_for_a_crawl_shorter_than_the_window(site: TestSite,
                                                                                 projects_dir: Path) -> None:
    site.add_tree(400, 4)
    proc = subprocess.Popen([sys.executable, MAIN, "crawl", "k", site.url("/"), "--delay", "0.05",
                             "--workers", "2", "--projects-dir", str(projects_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        time.sleep(3.5)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(TIMEOUT)
    status = ok(cli(projects_dir, "status", "k")).stdout
    m = re.search(r"^discovery ([0-9.]+) new URLs per fetched page overall, ([0-9.]+) in the last 30 s", status, re.M)
    assert m, status
    assert m.group(1) == m.group(2), status    # it said "2.34 overall, 5.11 in the last 30 s"
    assert discovery_ratio(read_stats(projects_dir / "k")) is not None
    report = render(load(projects_dir / "k"))
    assert f"discovery ratio {m.group(1)}" in report


# ----------------------------------------------------------------------------- item 6: messages


def test_the_summary_and_the_report_say_the_same_pages_per_second(site: TestSite, projects_dir: Path) -> None:
    site.add_tree(30, 3)
    site.route("/p/7.html", status=404, body="missing")
    r = ok(cli(projects_dir, "crawl", "s", site.url("/"), "--delay", "0.01"))
    rate = summary_rate(r.stderr)
    page = render(load(projects_dir / "s"))
    assert f'<div class="s">{rate} pages/s</div>' in page, (rate, re.findall(r"[0-9.]+ pages/s", page))


def test_seed_says_problem_in_the_singular(site: TestSite, projects_dir: Path) -> None:
    site.route("/robots.txt", body=f"User-agent: *\nSitemap: {site.url('/sitemap.xml')}\n", content_type="text/plain")
    site.route("/", body="<title>home</title>home")
    site.route("/sitemap.xml", body="<html><title>not a sitemap</title></html>")   # one problem
    ok(cli(projects_dir, "crawl", "m", site.url("/"), "--delay", "0"))
    r = ok(cli(projects_dir, "seed", "m"))
    assert "1 problem" in r.stderr and "1 problems" not in r.stderr, r.stderr
    assert "0 URLs found" in r.stderr, r.stderr


def test_plural() -> None:
    assert [plural(n, "page") for n in (0, 1, 2)] == ["0 pages", "1 page", "2 pages"]


def test_recrawl_with_nothing_due_says_when_and_how_to_check_everything(site: TestSite, projects_dir: Path) -> None:
    site.add_tree(3, 1)
    ok(cli(projects_dir, "crawl", "n", site.url("/"), "--delay", "0"))
    r = ok(cli(projects_dir, "recrawl", "n", "--delay", "0"))
    m = re.search(r"nothing is due; the next page is due at (\S+) \(in ([0-9.]+) hours\); `recrawl n --all`", r.stderr)
    assert m, r.stderr
    assert 23.9 <= float(m.group(2)) <= 24.0    # a page just crawled is due after a day
    assert "due       0 crawled pages due for a check (the next at " in ok(cli(projects_dir, "status", "n")).stdout


def test_time_left_keeps_hours_up_to_two_days() -> None:
    assert [time_left(x) for x in (-5, 90, 3600, 86400 + 0.4, 47 * 3600, 2 * 86400, 30 * 86400)] == [
        "0 minutes", "2 minutes", "1.0 hours", "24.0 hours", "47.0 hours", "2.0 days", "30.0 days"]


def test_export_writes_json_lines_by_default(site: TestSite, projects_dir: Path) -> None:
    site.add_tree(2, 1)
    ok(cli(projects_dir, "crawl", "e", site.url("/"), "--delay", "0"))
    out = ok(cli(projects_dir, "export", "e")).stdout.splitlines()
    assert len(out) == 3 and all(json.loads(line)["state"] == "crawled" for line in out)


# ----------------------------------------------------------------------------- sampling


def test_the_first_seconds_of_a_run_are_sampled_faster() -> None:
    assert sample_every(0.0) == sample_every(9.9) == FAST_EVERY < STATS_EVERY == sample_every(10.0)


def test_a_short_crawl_gets_many_samples(site: TestSite, projects_dir: Path) -> None:
    site.add_tree(8, 1)     # a chain of 9 pages, 0.3 s apart: over 2.4 s
    ok(cli(projects_dir, "crawl", "q", site.url("/"), "--delay", "0.3", "--workers", "1", "--max-depth", "20"))
    rows = read_stats(projects_dir / "q")
    assert len(rows) >= 6, rows       # every 2 s gave 2 or 3
    assert rows[0].first and not any(r.first for r in rows[1:])


def test_the_trap_alarm_counts_samples_two_seconds_apart() -> None:
    def growing(step: float, n: int) -> list[StatsRow]:
        return [StatsRow(i * step, pending=200 + 10 * i, top_pattern="a.test/cal/{n}", top_pending=190 + 10 * i)
                for i in range(n)]

    assert alarm_from_rows(growing(FAST_EVERY, 5)) is None   # 1 s of growth is no trend yet
    assert alarm_from_rows(growing(STATS_EVERY, 5)) is not None


def test_pending_rechecks_are_not_discovered_again(tmp_path: Path) -> None:
    folder = tmp_path
    (folder / "crawled.txt").write_text("".join(f"https://a.test/{i}\t200\ttext/html\t10\t1\t2026-01-01T00:00:00Z\t-\n"
                                                for i in range(3)))
    (folder / "queue.txt").write_text("".join(f"https://a.test/{i}\t1\t0\t0\t-\trecheck\n" for i in range(3))
                                      + "https://a.test/new\t1\t0\t0\thttps://a.test/0\n")
    rec = StatsRecorder(folder)
    line = rec.sample(pending=4, in_flight=0, crawled=3, hops=0, failed=0, when=1000.0)
    assert line.split("\t")[6] == "4"    # 3 crawled + 1 new, not + 3 rechecks
    rec.save_census()
    again = StatsRecorder(folder)         # a resume that takes the census from census.txt
    assert again.sample(pending=4, in_flight=0, crawled=3, hops=0, failed=0, when=1001.0).split("\t")[6] == "4"
    with open(folder / "claims.txt", "a") as f:   # a worker claims a recheck: in flight, still not new
        f.write("C\t0\t10\t1\t0\thttps://a.test/0\t1\t0\t0\t-\trecheck\n")
    assert again.sample(pending=3, in_flight=1, crawled=3, hops=0, failed=0, when=1002.0).split("\t")[6] == "4"


# ----------------------------------------------------------------------------- the report's additions


def test_the_report_shows_content_types_depths_largest_slowest_and_failures(site: TestSite,
                                                                             projects_dir: Path) -> None:
    site.add_tree(6, 2)
    site.route("/p/3.html", status=404, body="missing")
    site.route("/big", body="<title>big</title>" + "x" * 50_000)
    site.slow("/slow", 0.3)
    site.route("/doc.pdf", body=b"%PDF-1.4", content_type="application/pdf")
    site.route("/", body='<a href="/p/0.html">0</a><a href="/p/1.html">1</a><a href="/big">big</a>'
                         '<a href="/slow">slow</a><a href="/doc.pdf">pdf</a>')
    ok(cli(projects_dir, "crawl", "t", site.url("/"), "--delay", "0"))
    data = load(projects_dir / "t")
    assert data.content_types["application/pdf"] == 1 and data.content_types["text/html"] >= 7
    assert data.depths[0] == 1 and data.depths[1] == 5
    assert data.largest[0][0] == site.url("/big") and data.largest[0][1] > 50_000
    assert data.slowest[0][0] == site.url("/slow") and data.slowest[0][1] >= 300
    assert [f[:2] for f in data.failures] == [(site.url("/p/3.html"), "404")]
    page = render(data)
    for text in ("Pages by content type", "Pages and failures by depth", "Largest responses",
                 "Slowest responses", "Failures (failed.txt)", site.url("/p/3.html"), "depth 0"):
        assert text in page, text
    assert "Recrawl" not in page      # no checks yet: no recrawl section


def test_the_live_status_line_of_a_recrawl_counts_its_checks(site: TestSite, tmp_path: Path) -> None:
    import io

    from spider.config import CrawlConfig
    from spider.crawl import Crawl
    from spider.urls import normalize

    site.add_tree(6, 2)
    for path in [f"/p/{i}.html" for i in range(6)]:
        site.slow(path, 0.15)
    config = CrawlConfig(seeds=(normalize(site.url("/")),), workers=1, delay=0.0)
    assert Crawl(tmp_path, config, out=io.StringIO()).run() == 0
    out = io.StringIO()
    assert Crawl(tmp_path, config, out=out, status_every=0.2, recheck="all").run() == 0
    speeds = [float(x) for x in re.findall(r"in flight \d+  failed \d+  ([0-9.]+) pages/s", out.getvalue())]
    assert speeds and max(speeds) > 0, out.getvalue()    # it read 0.0 while pages were checked


def test_the_status_chart_tells_unchanged_pages_from_redirects() -> None:
    from spider.report import status_chart

    chart = status_chart({"a.test": Counter({"304": 5, "301": 1, "200": 2})})
    assert ">304<" in chart and ">3xx<" in chart   # two legends, two colours


def test_redirect_hops_are_urls_fetched_so_a_finished_crawl_ends_below_one(tmp_path: Path) -> None:
    # 1 seed; 3 pages and 2 redirect hops fetched: 4 new URLs for 5 URLs completed (it read 4/3)
    rows = [StatsRow(0, pending=1, discovered=1, first=True),
            StatsRow(1, pending=0, crawled=3, discovered=5, completed=5)]
    assert discovery_ratio(rows) == pytest.approx(4 / 5)
    old = [StatsRow(0, pending=1, discovered=1), StatsRow(1, crawled=3, discovered=5)]   # no column: pages
    assert discovery_ratio(old) == pytest.approx(4 / 3)


def test_the_demo_crawl_ends_with_a_ratio_below_one(demo_url: str, projects_dir: Path) -> None:
    ok(cli(projects_dir, "crawl", "d", demo_url, "--delay", "0"))
    status = ok(cli(projects_dir, "status", "d")).stdout
    m = re.search(r"^discovery ([0-9.]+) new URLs per fetched page overall", status, re.M)
    assert m and float(m.group(1)) < 1, status     # redirects and robots refusals are URLs completed too
