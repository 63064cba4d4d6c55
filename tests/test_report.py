"""The HTML report: counts read from the project files, charts as inline SVG, hostile text escaped,
no external resource, and a page that a real browser renders."""

from __future__ import annotations

import calendar
import os
import re
import shutil
import subprocess
import time
import zlib
from collections import Counter
from pathlib import Path

import lxml.etree
import lxml.html
import pytest

from spider.report import (ReportData, StatsRow, load, nice_ticks, rate_series, render,
                           time_ticks, timeline, write_report)

STATS_HEADER = ("# time\tunix\tpending\tin_flight\tcrawled\tfailed\tdiscovered\tduplicates\tbytes"
                "\ttop_pattern\ttop_pending\trejected\n")
T0 = 1764499200.0
EVIL = "<script>alert(1)</script>"


def stats_line(unix: float, pending: int, crawled: int, failed: int, discovered: int,
               top: str = "-", top_n: int = 0) -> str:
    return (f"2025-11-30T10:00:00Z\t{unix:.3f}\t{pending}\t2\t{crawled}\t{failed}\t{discovered}\t0\t0"
            f"\t{top}\t{top_n}\t-\n")


def write_project(folder: Path) -> Path:
    """A small but complete project folder: every file the report reads."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.txt").write_text("seed = https://a.test/\nworkers = 2\n")
    (folder / "stats.txt").write_text(STATS_HEADER + "".join([
        stats_line(T0, 1, 0, 0, 1),
        stats_line(T0 + 2, 9, 4, 0, 13),        # 2 pages/s, ratio 12/4 = 3
        stats_line(T0 + 4, 13, 8, 1, 18),       # 2 pages/s, ratio 5/5 = 1
        # a pause of an hour: the crawl was stopped and resumed
        stats_line(T0 + 3604, 13, 8, 1, 18),
        stats_line(T0 + 3606, 11, 14, 1, 20),   # 3 pages/s
    ]))
    (folder / "crawled.txt").write_text(
        "# url\tstatus\tcontent_type\tbytes\tdepth\tfetched_at\tfinal_url\n"
        "https://a.test/\t200\ttext/html\t1000\t0\t2025-11-30T10:00:01Z\t-\thash1\t-\t3\tHome\n"
        "https://a.test/old\t301\t-\t0\t1\t2025-11-30T10:00:02Z\thttps://a.test/new\n"
        "https://a.test/new\t200\ttext/html\t2500\t1\t2025-11-30T10:00:03Z\t-\n"
        "https://a.test/same\t200\ttext/html\t500\t1\t2025-11-30T10:00:04Z\t-\thash1\t-\t0\tHome\n"
        "https://b.test:8080/x\t304\t-\t0\t1\t2025-11-30T10:00:05Z\t-\n"
        "https://user:pw@B.test:8080/y\t200\tapplication/pdf\t4000\t2\t2025-11-30T10:00:09Z\t-\n")
    (folder / "failed.txt").write_text(
        "# url\treason\tdepth\tfetched_at\n"
        "https://a.test/missing\t404\t2\t2025-11-30T10:00:06Z\n"
        "https://b.test:8080/slow\ttimeout after 3 attempts\t2\t2025-11-30T10:00:07Z\n"
        "https://b.test:8080/gone\t404\t2\t2025-11-30T10:00:08Z\n")
    (folder / "rejected.txt").write_text(
        "# url_or_line\treason\tsource\n"
        "https://other.test/\tscope\thttps://a.test/\n"
        "https://other.test/2\tscope\thttps://a.test/\n"
        "https://a.test/cal/2099/01\tcalendar\thttps://a.test/\n"
        "this is not a url\tqueue.txt:7: not an absolute URL: 'this is not a url'\t-\n")
    (folder / "queue.txt").write_text(
        "# url\tdepth\tattempts\tnot_before\tsource\n"
        + "".join(f"https://a.test/cal/{2030 + i}/0{i % 9 + 1}\t2\t0\t0\thttps://a.test/\n" for i in range(5))
        + "https://a.test/about\t1\t0\t0\thttps://a.test/\n"
        + "https://a.test/added-by-hand\n")
    (folder / "duplicates.txt").write_text(
        "https://a.test/same\tduplicate\thttps://a.test/\n"
        "https://a.test/?sort=1\tvariant\thttps://a.test/\n"
        "https://a.test/?sort=2\tvariant\thttps://a.test/\n")
    return folder


def svgs(page: str) -> list[lxml.etree._Element]:
    """Every inline <svg> element, parsed by a strict XML parser (so each must be well-formed)."""
    found = re.findall(r"<svg\b.*?</svg>", page, flags=re.S)
    return [lxml.etree.fromstring(s.encode("utf-8")) for s in found]


def assert_self_contained(page: str) -> None:
    """No script, no external stylesheet, font, image or frame: the page works offline."""
    tree = lxml.html.document_fromstring(page)
    assert "<script" not in page.lower()
    assert not tree.xpath("//script | //link | //img | //iframe | //object | //embed")
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        for name, value in element.attrib.items():
            assert not name.lower().startswith("on"), (element.tag, name)
            if name.lower().split(":")[-1] in ("src", "href", "action", "data", "srcset"):
                assert not re.match(r"\s*(https?:)?//", value), (element.tag, name, value)
    css = "".join(tree.xpath("//style/text()"))
    assert "@import" not in css and "url(" not in css


def hand_built() -> ReportData:
    rows = [StatsRow(T0 + 2 * i, pending=100 + 10 * i, crawled=5 * i, failed=i // 4,
                     discovered=100 + 15 * i) for i in range(30)]
    return ReportData(
        name="handmade", generated=T0, seeds=["https://a.test/"], stats=rows,
        crawled=1234, redirects=7, failed=56, pending=789, duplicates=11, variants=3,
        bytes=5 * 1024 * 1024,
        status_by_host={"a.test": Counter({"200": 1200, "301": 7, "404": 30}),
                        "b.test:8080": Counter({"200": 34, "error": 26, "503": 2})},
        failure_reasons=Counter({"404": 30, "timeout after 3 attempts": 26}),
        rejected=Counter({"scope": 40, "calendar": 12, "robots": 3}),
        patterns=[("a.test/cal/{n}/{n}", 700), ("a.test/tag/{n}?sort=", 89)])


# ----------------------------------------------------------------------------- render


def test_render_hand_built_data_shows_numbers_labels_and_charts() -> None:
    page = render(hand_built())
    for text in ("handmade", "1,234", "+7 redirects", "789", "5.0 MiB", "14", '<div class="v">58s</div>',
                 "a.test/cal/{n}/{n}", "700 (89%)", "scope", "calendar", "b.test:8080",
                 "timeout after 3 attempts", "Frontier size", "Pages per second",
                 "Discovery ratio", "Status codes by host", "Rejections by reason",
                 "Top URL patterns"):
        assert text in page, text
    assert "no data yet" not in page
    charts = svgs(page)
    assert len(charts) == 8   # 4 over time, status, failures, patterns, rejections
    for chart in charts:
        assert chart.tag == "{http://www.w3.org/2000/svg}svg"
        assert chart.get("viewBox")
    lines = [c for c in charts if c.findall(".//{http://www.w3.org/2000/svg}polyline")]
    assert len(lines) == 4
    assert_self_contained(page)


def test_status_table_has_a_column_per_code_and_host_totals() -> None:
    tree = lxml.html.document_fromstring(render(hand_built()))
    header = [th.text_content().strip() for th in tree.xpath("//table[@class='status']//th")]
    assert header == ["host", "200", "301", "404", "503", "error", "total"]
    rows = [[td.text_content() for td in tr.xpath("td")] for tr in tree.xpath("//table//tbody/tr")]
    assert rows[0] == ["a.test", "1,200", "7", "30", "", "", "1,237"]
    assert rows[1] == ["b.test:8080", "34", "", "", "2", "26", "62"]


def test_empty_data_renders_notes_instead_of_charts() -> None:
    page = render(ReportData(name="new"))
    assert page.count("no data yet") >= 3
    assert "nothing fetched yet" in page and "nothing rejected" in page and "the queue is empty" in page
    assert svgs(page) == []
    assert_self_contained(page)


def test_one_stats_sample_draws_a_point_not_a_rate() -> None:
    page = render(ReportData(stats=[StatsRow(T0, pending=5, crawled=1, discovered=6)]))
    assert "<circle" in page                       # the frontier: one point
    assert "needs two stats samples" in page       # pages/s: no interval yet
    svgs(page)


# ----------------------------------------------------------------------------- load


def test_load_counts_a_real_folder(tmp_path: Path) -> None:
    data = load(write_project(tmp_path / "site"), now=T0)
    assert data.name == "site" and data.seeds == ["https://a.test/"]
    assert (data.crawled, data.redirects, data.failed, data.pending) == (5, 1, 3, 7)
    assert (data.duplicates, data.variants, data.bytes) == (1, 2, 8000)
    assert data.status_by_host == {"a.test": Counter({"200": 3, "301": 1, "404": 1}),
                                   "b.test:8080": Counter({"304": 1, "200": 1, "error": 1, "404": 1})}
    assert data.rejected == Counter({"scope": 2, "calendar": 1, "queue.txt": 1})
    assert data.failure_reasons == Counter({"404": 2, "timeout after 3 attempts": 1})
    assert data.patterns == [("a.test/cal/{n}/{n}", 5), ("a.test/about", 1), ("a.test/added-by-hand", 1)]
    assert len(data.stats) == 5
    ten = calendar.timegm((2025, 11, 30, 10, 0, 0, 0, 0, 0))
    assert (data.first_fetch, data.last_fetch) == (ten + 1, ten + 9)


def test_write_report_writes_the_page_atomically_and_returns_its_path(tmp_path: Path) -> None:
    folder = write_project(tmp_path / "site")
    path = write_report(folder, now=T0)
    assert path == folder / "report.html"
    page = path.read_text(encoding="utf-8")
    assert "spider report: <span class=\"name\">site</span>" in page
    assert "2025-11-30 10:40:00 UTC" in page and "https://a.test/" in page
    assert "(+1 redirect)" not in page and "+1 redirect<" in page
    assert '<div class="v">6s</div>' in page     # crawl time: 4 s + 2 s, the hour's pause cut out
    assert "resumed" in page
    assert len(svgs(page)) == 10   # 4 over time, status, failures, content types, depths, patterns, rejections
    assert_self_contained(page)
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]

    other = tmp_path / "elsewhere.html"
    assert write_report(folder, other, now=T0) == other
    assert other.read_text(encoding="utf-8") == page


def test_timeline_cuts_pauses_and_rates_are_per_interval(tmp_path: Path) -> None:
    data = load(write_project(tmp_path / "site"))
    tl = timeline(data.stats)
    assert [len(run) for run in tl.runs] == [3, 2]
    assert tl.restarts == [4.0] and tl.duration == 6.0
    speed, ratio = rate_series(tl)
    # pages/s counts every page fetched, crawled or failed (and a recrawl's checks): 4/2, (4+1)/2, 6/2
    assert [y for _, y in speed] == [2.0, 2.5, None, 3.0]
    assert [y for _, y in ratio] == [3.0, 1.0, None, 2 / 6]


def test_a_short_pause_between_runs_is_no_crawl_time() -> None:
    """Ctrl-C and the same command again 20 s later: two runs of 4 s, not 28 s of crawling."""
    rows = [StatsRow(T0 + t, crawled=c) for t, c in ((0, 0), (2, 10), (4, 20), (24, 20), (26, 30), (28, 40))]
    tl = timeline(rows)
    assert [len(run) for run in tl.runs] == [3, 3] and tl.duration == 8.0
    assert [y for _, y in rate_series(tl)[0]] == [5.0, 5.0, None, 5.0, 5.0]


def test_ratio_skips_intervals_without_fetched_pages() -> None:
    rows = [StatsRow(T0, crawled=0, discovered=1), StatsRow(T0 + 2, crawled=0, discovered=1),
            StatsRow(T0 + 4, crawled=2, discovered=5)]
    speed, ratio = rate_series(timeline(rows))
    assert [y for _, y in speed] == [0.0, 1.0]
    assert [y for _, y in ratio] == [2.0]


def test_ticks_are_round_numbers() -> None:
    assert nice_ticks(7) == [0, 2, 4, 6, 8]
    assert nice_ticks(1000) == [0, 200, 400, 600, 800, 1000]
    assert nice_ticks(0.33) == [0, 0.1, 0.2, 0.3, 0.4]
    assert nice_ticks(0) == [0.0, 1.0]
    assert time_ticks(626) == [0, 120, 240, 360, 480, 600]


def test_empty_and_missing_folders_work(tmp_path: Path) -> None:
    assert load(tmp_path / "no-such-folder").crawled == 0
    path = write_report(tmp_path, now=T0)
    page = path.read_text(encoding="utf-8")
    assert "no data yet" in page and ">0<" in page
    assert_self_contained(page)


def test_garbage_lines_are_skipped(tmp_path: Path) -> None:
    folder = write_project(tmp_path / "site")
    garbage = ("\n   \n# a comment\nnot a record at all\n\x00\x01\x02\tbinary\n"
               "https://a.test/\n\t\t\t\n" + "\ufffd" * 50 + "\n")
    for name in ("stats.txt", "crawled.txt", "failed.txt", "rejected.txt", "queue.txt",
                 "duplicates.txt", "settings.txt"):
        with open(folder / name, "a", encoding="utf-8") as f:
            f.write(garbage)
    with open(folder / "stats.txt", "a", encoding="utf-8") as f:
        f.write("2025\tnan\t1\t1\t1\t1\t1\t1\t1\n2025\t1\t-5\t1\t1\t1\t1\t1\t1\n"
                "2025\t1e400\t1\t1\t1\t1\t1\t1\t1\n2025\t" + str(T0 + 3608) + "\t1\tx\t1\t1\t1\t1\t1\n"
                "2025\t" + str(T0 + 3607) + "\t11\t2\t15\t1\t21\t0\t0\t-\tlots\n")   # torn tail is fine
    with open(folder / "crawled.txt", "a", encoding="utf-8") as f:
        f.write("https://a.test/z\tabc\ttext/html\t10\n"       # status not a number
                "https://a.test/z\t2000\ttext/html\t10\n"      # not a status code
                "https://a.test/z\t200\ttext/html\tmany\t1\tyesterday\n"   # bad bytes, bad time
                "ftp://a.test/z\t200\ttext/html\t10\n")
    with open(folder / "crawled.txt", "ab") as f:
        f.write(b"https://a.test/\xff\xfe\t200\t\xc3\x28\t5\n")   # invalid UTF-8
    with open(folder / "failed.txt", "a", encoding="utf-8") as f:
        f.write("https://[broken/\t404\n")                     # urlsplit rejects this one
    data = load(folder)
    assert (data.crawled, data.redirects, data.failed, data.bytes) == (7, 1, 4, 8005)
    assert len(data.stats) == 6 and data.stats[-1].top_pending == 0
    assert data.pending == 7 + 1     # the bare URL line is a pending URL; the rest is not
    page = render(data)
    assert len(svgs(page)) == 10
    assert_self_contained(page)


def test_byte_order_mark_and_crlf_are_read(tmp_path: Path) -> None:
    (tmp_path / "crawled.txt").write_bytes(
        b"\xef\xbb\xbfhttps://a.test/\t200\ttext/html\t10\t0\t2025-11-30T10:00:00Z\t-\r\n"
        b"https://a.test/b\t404\ttext/html\t10\t0\t2025-11-30T10:00:00Z\t-\r\n")
    data = load(tmp_path)
    assert data.crawled == 2 and data.status_by_host == {"a.test": Counter({"200": 1, "404": 1})}


# ----------------------------------------------------------------------------- hostile text


def test_text_from_files_is_escaped(tmp_path: Path) -> None:
    folder = write_project(tmp_path / "site")
    with open(folder / "crawled.txt", "a", encoding="utf-8") as f:
        f.write(f"https://{EVIL}.test/\t200\ttext/html\t1\t0\t2025-11-30T10:00:00Z\t-\n")
        f.write("https://x.test/\"onload=\"alert(1)\t200\ttext/html\t1\t0\t2025-11-30T10:00:00Z\t-\n")
    with open(folder / "failed.txt", "a", encoding="utf-8") as f:
        f.write(f"https://a.test/f\t{EVIL}\t1\t2025-11-30T10:00:00Z\n")
        f.write("https://a.test/g\tcontrol \x01\x08\x1b chars & <b>bold</b>\t1\t2025-11-30T10:00:00Z\n")
    with open(folder / "rejected.txt", "a", encoding="utf-8") as f:
        f.write(f"https://a.test/{EVIL}\t{EVIL}\t-\n")
    with open(folder / "queue.txt", "a", encoding="utf-8") as f:
        f.write(f"https://a.test/{EVIL}/\"'&\n")
    with open(folder / "settings.txt", "a", encoding="utf-8") as f:
        f.write(f"seed = https://a.test/{EVIL}\n")
    page = write_report(folder).read_text(encoding="utf-8")
    assert "<script" not in page.lower() and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "control  chars &amp; &lt;b&gt;bold&lt;/b&gt;" in page
    assert len(svgs(page)) == 10         # control characters dropped: still well-formed XML
    assert_self_contained(page)


def test_project_name_and_alarm_are_escaped(tmp_path: Path) -> None:
    rows = [StatsRow(T0 + 2 * i, pending=200 + 50 * i, top_pattern=f"a.test/{EVIL}",
                     top_pending=150 + 50 * i) for i in range(5)]
    page = render(ReportData(name=EVIL, stats=rows))
    assert "possible trap" in page
    assert "<script" not in page.lower() and "spider report: &lt;script&gt;" in page
    assert_self_contained(page)


# ----------------------------------------------------------------------------- a real browser


def _png_is_not_blank(png: bytes) -> bool:
    """True when the screenshot has visible content: PIL if present, else the pixel bytes vary."""
    try:
        from PIL import Image   # optional: not a dependency
    except ImportError:
        pass
    else:
        import io
        with Image.open(io.BytesIO(png)) as image:
            return len(image.convert("RGB").getcolors(maxcolors=1 << 20) or range(1 << 20)) > 20
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    pos, idat = 8, b""
    while pos < len(png):
        length = int.from_bytes(png[pos:pos + 4], "big")
        if png[pos + 4:pos + 8] == b"IDAT":
            idat += png[pos + 8:pos + 8 + length]
        pos += 12 + length
    # A one-colour page filters to a handful of distinct byte values; charts and text to many.
    return len(png) > 20_000 and len(set(zlib.decompress(idat))) > 64


def test_a_headless_browser_renders_the_page(tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        pytest.skip("no chromium or chromium-browser on PATH: cannot render the page in a browser")
    page = write_report(write_project(tmp_path / "site"), now=T0)
    shot = tmp_path / "report.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                    "--window-size=1200,2000", page.as_uri()],
                   cwd=tmp_path, capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    assert _png_is_not_blank(shot.read_bytes())


def test_status_top_lists_say_how_many_kinds_were_left_out() -> None:
    from collections import Counter

    from spider.status import _top

    reasons = Counter({"404": 3, "500": 2, "503": 1, "410": 1})
    assert _top(reasons, 3) == "404 3, 500 2, 503 1, +1 more"   # ties keep the order first seen
    assert _top(reasons, 5) == "404 3, 500 2, 503 1, 410 1"


def test_pending_leaves_out_what_a_killed_crawl_had_claimed(tmp_path: Path) -> None:
    """queue.txt still holds the lines a killed crawl took; claims.txt says which (as status reads it)."""
    from spider.records import QueueEntry, crawled_line
    from spider.frontier.files import FileStore

    store = FileStore(tmp_path, owner=1).open()
    store.add(QueueEntry(f"https://a.test/{i}") for i in range(5))
    first, second = store.claim(2, 0.0, lambda host: 0.0).claims
    store.settle(first, "crawled", record=crawled_line(first.url, 200, "text/html", 5, 0, T0))
    data = load(tmp_path)   # killed here: `second` in flight
    assert data.pending == 3 == FileStore(tmp_path, track_seen=False).open(lock=False).counts().pending
    assert data.crawled == 1


def test_an_unreadable_state_file_is_an_error_not_zeros(tmp_path: Path) -> None:
    from spider.frontier.contract import StoreError

    write_project(tmp_path / "site")
    (tmp_path / "site" / "crawled.txt").unlink()
    (tmp_path / "site" / "crawled.txt").mkdir()
    with pytest.raises(StoreError, match="crawled.txt"):
        load(tmp_path / "site")


def test_status_says_claims_of_a_stopped_crawl_are_not_in_flight(tmp_path: Path) -> None:
    from spider import config as settings
    from spider.crawl import RUNNING
    from spider.records import QueueEntry
    from spider.status import report as status_report
    from spider.frontier.files import FileStore

    settings.save(tmp_path, settings.CrawlConfig(seeds=("https://a.test/",)))
    store = FileStore(tmp_path, owner=1).open()
    store.add([QueueEntry("https://a.test/"), QueueEntry("https://a.test/x")])
    store.claim(1, 0.0, lambda host: 0.0)
    dead = 2 ** 22 + 12345   # above Linux's default pid_max: no such process
    (tmp_path / RUNNING).write_text(f"pid {dead}\nstarted -\nworkers 1\n")
    text = status_report(tmp_path, "p")
    assert re.search(r"^in flight 1  \(claims of a crawl that stopped: pending again at the next run\)$", text, re.M), text
    (tmp_path / RUNNING).write_text(f"pid {os.getpid()}\nstarted -\nworkers 1\n")   # alive: really in flight
    assert re.search(r"^in flight 1$", status_report(tmp_path, "p"), re.M)


def test_status_shows_a_held_host_beyond_the_top_ten(tmp_path: Path) -> None:
    from spider import config as settings
    from spider.records import QueueEntry
    from spider.status import report as status_report
    from spider.frontier.files import FileStore

    settings.save(tmp_path, settings.CrawlConfig(seeds=("https://h0.test/",)))
    store = FileStore(tmp_path, owner=1).open()
    store.add([QueueEntry(f"https://h{h}.test/{i}") for h in range(12) for i in range(12 - h)])
    store.update_host("h11.test", lambda s: s.__class__(time.time() + 300, s.delay, s.failures,
                                                        "robots.txt unavailable"))
    text = status_report(tmp_path, "p")
    rows = [line.split()[0] for line in text.splitlines() if line.startswith("h") and ".test" in line.split()[0]]
    assert rows == [f"h{h}.test" for h in range(10)] + ["h11.test"], text
    assert "robots.txt unavailable" in text and "... and 1 more hosts" in text
