"""export: one record per page from crawled/failed/checks/removed, written as JSONL or CSV and parsed
back; garbage lines skipped and counted; a big crawled.txt streamed with bounded memory."""

from __future__ import annotations

import calendar
import csv
import io
import json
import time
import tracemalloc
from pathlib import Path

import pytest

from spider.export import FIELDS, Skipped, export, records, write_csv, write_jsonl
from spider.recrawl import check_line
from spider.records import CRAWLED_HEADER, FAILED_HEADER, crawled_line, failed_line, safe_text

T0 = calendar.timegm((2026, 1, 1, 10, 0, 0))


def at(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + seconds))


UNICODE_TITLE = 'Araignées\tdu monde, "la toile" — 蜘蛛 🕷'   # the crawler cleans the TAB away
CLEAN_TITLE = 'Araignées du monde, "la toile" — 蜘蛛 🕷'


def write_full_project(folder: Path) -> list[dict]:
    """A project with every kind of line; returns the records the export must give, in order."""
    folder.mkdir(parents=True, exist_ok=True)
    a = "https://a.test"
    (folder / "crawled.txt").write_text(
        CRAWLED_HEADER
        + crawled_line(f"{a}/", 200, "text/html; charset=utf-8", 1000, 0, T0, content_hash="h-home",
                       outlinks=3, title=UNICODE_TITLE)
        + crawled_line(f"{a}/old", 301, "-", 0, 1, T0 + 1, f"{a}/new")                     # a redirect hop
        + f"{a}/new\t200\ttext/html\t2500\t1\t{at(2)}\t-\th-new\t{a}/canon\t0\tTitle, with \"quotes\"\n"
        + crawled_line(f"{a}/doc.pdf", 200, "application/pdf", 88123, 2, T0 + 3)           # 7 fields
        + "\n"
        + "# a comment\n"
        + "this is not a url\t200\ttext/html\t1\t0\t2026-01-01T10:00:00Z\t-\n"            # garbage
        + f"{a}/bad-status\tOK\ttext/html\t1\t0\t{at(4)}\t-\n"                               # garbage
        + f"{a}/bad-time\t200\ttext/html\t1\t0\tyesterday\t-\n"                              # garbage
        + f"{a}/torn\t200\ttext/ht\n"                                                        # garbage
        + crawled_line(f"{a}/unchanged", 200, "text/html", 10, 1, T0 + 5, content_hash="h-u", outlinks=1,
                       title="Same")
        + crawled_line(f"{a}/changed", 200, "text/html", 20, 1, T0 + 6, content_hash="h-c1", outlinks=2,
                       title="Changes")
        + crawled_line(f"{a}/gone", 200, "text/html", 30, 1, T0 + 7, content_hash="h-g", outlinks=0,
                       title="Gone")
        + crawled_line(f"{a}/lonely", 200, "text/html", 40, 2, T0 + 8, content_hash="h-l", outlinks=0,
                       title="Lonely")
        + crawled_line(f"{a}/back", 200, "text/html", 50, 1, T0 + 9, content_hash="h-b1", outlinks=1,
                       title="Back")
        + crawled_line(f"{a}/again", 200, "text/html", 60, 1, T0 + 10, content_hash="h-a", outlinks=1,
                       title="Again")
        + crawled_line(f"{a}/twice", 200, "text/html", 70, 1, T0 + 11, content_hash="h-t1", outlinks=1,
                       title="First fetch")
        + crawled_line(f"{a}/flaky", 200, "text/html", 80, 1, T0 + 12, content_hash="h-f", outlinks=1,
                       title="Flaky")
        + crawled_line(f"{a}/both", 200, "text/html", 90, 1, T0 + 13, content_hash="h-both", outlinks=1,
                       title="Both")
        + crawled_line(f"{a}/twice", 200, "text/html", 71, 1, T0 + 14, content_hash="h-t2", outlinks=2,
                       title="Second fetch")                                               # kill -9 refetch
    )
    (folder / "failed.txt").write_text(
        FAILED_HEADER
        + failed_line(f"{a}/missing", "404", 2, T0 + 15)
        + failed_line(f"{a}/slow", "timeout after 3 attempts", 2, T0 + 16)
        + f"{a}/short\t404\n"                                                 # URL and reason only
        + f"{a}/no-reason\t\t1\n"                                                           # garbage
        + failed_line(f"{a}/both", "500", 1, T0 + 17)                                       # hand edit
    )
    (folder / "checks.txt").write_text(
        "# url\tstatus\tresult\tchecked_at\tcontent_hash\n"
        f"{a}/unchanged\t304\tunchanged\t{at(100)}\t-\n"
        f"{a}/changed\t304\tunchanged\t{at(100)}\t-\n"
        f"{a}/changed\t200\tchanged\t{at(200)}\th-c2\n"
        f"{a}/gone\t410\tremoved\t{at(101)}\t-\n"
        f"{a}/lonely\t304\tunchanged\t{at(300)}\t-\n"                                  # after inactive
        f"{a}/back\t200\tchanged\t{at(110)}\th-b2\n"                                   # after its 404
        f"{a}/flaky\t200\tunchanged\t{at(120)}\t-\n"
        f"{a}/flaky\t-\tfailed\t{at(121)}\t-\n"                                        # no response
        f"{a}/never-crawled\t200\tchanged\t{at(122)}\th-x\n"                           # no record
        f"{a}/unchanged\tabc\tunchanged\t{at(123)}\t-\n"                               # garbage
        f"{a}/unchanged\t200\tweird\t{at(124)}\t-\n"                                   # garbage
        f"{a}/unchanged\t200\tchanged\t-\th\n"                                         # garbage
    )
    (folder / "removed.txt").write_text(
        f"{a}/gone\t{at(101)}\t410\n"
        f"{a}/lonely\t{at(250)}\tinactive\n"
        f"{a}/back\t{at(105)}\t404\n"
        f"{a}/again\t{at(-50)}\t404\n"                                                 # before it was crawled
        f"{a}/missing\t2026-01-01\tgone\n"                                             # garbage
    )
    (folder / "lastmod.txt").write_text(f"{a}/\t2025-12-01\t{a}/sitemap.xml\n")        # not exported

    def page(url: str, status: int | None, ctype: str | None, size: int | None, depth: int, fetched: str,
             title: str | None = None, chash: str | None = None, outlinks: int | None = None,
             state: str = "crawled", final: str | None = None, canonical: str | None = None) -> dict:
        return {"url": url, "final_url": final, "status": status, "content_type": ctype, "bytes": size,
                "depth": depth, "fetched_at": fetched, "title": title, "content_hash": chash,
                "canonical": canonical, "outlinks": outlinks, "state": state,
                "referrers": [] if state == "failed" else None}   # no links.txt, no source field

    return [
        page(f"{a}/", 200, "text/html; charset=utf-8", 1000, 0, at(0), CLEAN_TITLE, "h-home", 3),
        page(f"{a}/old", 301, None, 0, 1, at(1), final=f"{a}/new"),
        page(f"{a}/new", 200, "text/html", 2500, 1, at(2), 'Title, with "quotes"', "h-new", 0,
             canonical=f"{a}/canon"),
        page(f"{a}/doc.pdf", 200, "application/pdf", 88123, 2, at(3)),
        page(f"{a}/unchanged", 304, "text/html", 10, 1, at(100), "Same", "h-u", 1),
        # a changed check replaced the content: what its old version measured is not shown
        page(f"{a}/changed", 200, None, None, 1, at(200), None, "h-c2", None),
        page(f"{a}/gone", 410, "text/html", 30, 1, at(101), "Gone", "h-g", 0, state="removed"),
        page(f"{a}/lonely", 304, "text/html", 40, 2, at(300), "Lonely", "h-l", 0, state="inactive"),
        page(f"{a}/back", 200, None, None, 1, at(110), None, "h-b2", None),
        page(f"{a}/again", 200, "text/html", 60, 1, at(10), "Again", "h-a", 1),
        page(f"{a}/flaky", None, "text/html", 80, 1, at(121), "Flaky", "h-f", 1),
        page(f"{a}/twice", 200, "text/html", 71, 1, at(14), "Second fetch", "h-t2", 2),
        page(f"{a}/missing", 404, None, None, 2, at(15), state="failed"),
        page(f"{a}/slow", None, None, None, 2, at(16), state="failed"),
        page(f"{a}/short", 404, None, None, None, None, state="failed"),
        page(f"{a}/both", 500, None, None, 1, at(17), state="failed"),
    ]


def as_csv_row(rec: dict) -> dict:
    return {k: "" if v is None else " ".join(v) if isinstance(v, list) else str(v) for k, v in rec.items()}


def test_fields_are_the_contract() -> None:
    assert FIELDS == ("url", "final_url", "status", "content_type", "bytes", "depth", "fetched_at",
                      "title", "content_hash", "canonical", "outlinks", "state", "referrers")


def test_jsonl_every_kind_of_line(tmp_path: Path) -> None:
    expected = write_full_project(tmp_path / "p")
    out, skipped = io.StringIO(), Skipped()
    n = export(tmp_path / "p", "jsonl", out, skipped)
    text = out.getvalue()
    got = [json.loads(line) for line in text.splitlines()]
    assert n == len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g == e, g["url"]
        assert list(g) == list(FIELDS)           # the keys in the contract's order
    assert [g["url"] for g in got] == [e["url"] for e in expected]
    assert len({g["url"] for g in got}) == len(got)   # each URL once
    for g in got:   # integers are JSON integers, not strings
        for k in ("status", "bytes", "depth", "outlinks"):
            assert g[k] is None or type(g[k]) is int
    assert "Araignées" in text and "蜘蛛 🕷" in text   # not \u-escaped
    assert text.endswith("\n") and text.count("\n") == n
    assert skipped.counts == {"checks.txt": 3, "removed.txt": 1, "crawled.txt": 4, "failed.txt": 1}
    assert skipped.total == 9
    msg = skipped.message()
    assert msg.startswith("warning: skipped 9 lines that are not records: ")
    assert "crawled.txt 4 (lines 8, 9, 10, ...)" in msg and "\n" not in msg


def test_csv_every_kind_of_line(tmp_path: Path) -> None:
    expected = write_full_project(tmp_path / "p")
    out = io.StringIO()
    n = export(tmp_path / "p", "csv", out)
    rows = list(csv.reader(io.StringIO(out.getvalue(), newline="")))
    assert rows[0] == list(FIELDS)
    assert n == len(rows) - 1 == len(expected)
    got = list(csv.DictReader(io.StringIO(out.getvalue(), newline="")))
    assert got == [as_csv_row(e) for e in expected]
    assert '"Title, with ""quotes"""' in out.getvalue()   # csv quoting, not hand-made


def test_records_is_the_same_data(tmp_path: Path) -> None:
    expected = write_full_project(tmp_path / "p")
    assert list(records(tmp_path / "p")) == expected


def test_crawled_again_after_removal_and_event_order(tmp_path: Path) -> None:
    """The latest event by time wins; a removal beats a check of the same second; inactive
    survives a later good check, not a later check that finds the page removed."""
    p = tmp_path / "p"
    p.mkdir()
    a = "https://a.test"
    (p / "crawled.txt").write_text("".join(
        crawled_line(f"{a}/{name}", 200, "text/html", 1, 0, T0, content_hash="h", outlinks=0, title=name)
        for name in ("tie", "inactive-then-404", "404-then-inactive", "no-check",
                     "recrawled")))
    (p / "checks.txt").write_text(
        f"{a}/tie\t200\tchanged\t{at(50)}\th2\n"
        f"{a}/inactive-then-404\t404\tremoved\t{at(60)}\t-\n"
        f"{a}/404-then-inactive\t404\tremoved\t{at(40)}\t-\n"
        f"{a}/recrawled\t200\tunchanged\t{at(-10)}\tstale\n")   # older than the crawled line: ignored
    (p / "removed.txt").write_text(
        f"{a}/tie\t{at(50)}\t404\n"
        f"{a}/inactive-then-404\t{at(30)}\tinactive\n"
        f"{a}/404-then-inactive\t{at(40)}\t404\n"
        f"{a}/404-then-inactive\t{at(45)}\tinactive\n"
        f"{a}/no-check\t{at(40)}\t404\n"
        f"{a}/no-check\t{at(45)}\tinactive\n"
        f"{a}/no-check\t{at(20)}\t410\n"   # an older date on a later line: the latest date wins
        f"{a}/recrawled\t{at(-5)}\t410\n")
    got = {r["url"].rsplit("/", 1)[1]: r for r in records(p)}
    assert got["tie"]["state"] == "removed" and got["tie"]["content_hash"] == "h2"
    assert got["inactive-then-404"]["state"] == "removed" and got["inactive-then-404"]["status"] == 404
    # the check found it removed; a later inactive mark does not make it less than removed
    assert got["404-then-inactive"]["state"] == "removed"
    assert got["no-check"]["state"] == "inactive"     # the latest removed.txt line wins
    rec = got["recrawled"]
    assert (rec["state"], rec["status"], rec["fetched_at"], rec["content_hash"]) == ("crawled", 200, at(0), "h")


def test_removed_bare_date_counts_as_end_of_day(tmp_path: Path) -> None:
    p = tmp_path / "p"
    p.mkdir()
    (p / "crawled.txt").write_text(crawled_line("https://a.test/", 200, "text/html", 1, 0, T0 + 3600))
    (p / "removed.txt").write_text("https://a.test/\t2026-01-01\tinactive\n")
    assert [r["state"] for r in records(p)] == ["inactive"]


def test_empty_project(tmp_path: Path) -> None:
    p = tmp_path / "empty"
    p.mkdir()
    for fmt, text in (("jsonl", ""), ("csv", ",".join(FIELDS) + "\n")):
        out, skipped = io.StringIO(), Skipped()
        assert export(p, fmt, out, skipped) == 0
        assert out.getvalue() == text and not skipped and skipped.message() == ""
    (p / "crawled.txt").write_text(CRAWLED_HEADER)   # headers only
    (p / "failed.txt").write_text(FAILED_HEADER + "\n\n")
    (p / "checks.txt").write_text("")
    out = io.StringIO()
    assert export(p, "csv", out) == 0 and out.getvalue() == ",".join(FIELDS) + "\n"


def test_missing_project_and_bad_format(tmp_path: Path) -> None:
    out = io.StringIO()
    with pytest.raises(FileNotFoundError):
        export(tmp_path / "nope", "csv", out)
    assert out.getvalue() == ""   # nothing written, not even the header
    with pytest.raises(ValueError):
        export(tmp_path, "xml", out)


def test_bom_crlf_and_missing_final_newline(tmp_path: Path) -> None:
    p = tmp_path / "p"
    p.mkdir()
    (p / "crawled.txt").write_bytes(
        "\ufeffhttps://a.test/\t200\ttext/html\t5\t0\t2026-01-01T10:00:00Z\t-\r\n"
        "https://a.test/b\t200\ttext/html\t6\t1\t2026-01-01T10:00:01Z\t-\t-\t-\t-\tÉté\r\n"
        "https://a.test/c\t200\ttext/html\t7\t1\t2026-01-01T10:00:02Z\t-".encode("utf-8"))
    (p / "failed.txt").write_bytes(b"https://a.test/d\tbad \xff byte\t1\t2026-01-01T10:00:03Z\n")
    got = list(records(p))
    assert [r["url"] for r in got] == ["https://a.test/", "https://a.test/b", "https://a.test/c",
                                       "https://a.test/d"]
    assert got[1]["title"] == "Été" and got[1]["outlinks"] is None and got[2]["final_url"] is None
    assert got[3]["status"] is None and got[3]["state"] == "failed"


def test_lines_appended_during_the_export_are_not_read(tmp_path: Path) -> None:
    """The passes over crawled.txt read the bytes it held at the start: a running crawl that
    appends meanwhile cannot make a URL appear twice or its record change between passes."""
    p = tmp_path / "p"
    p.mkdir()
    first = crawled_line("https://a.test/", 200, "text/html", 1, 0, T0)
    (p / "crawled.txt").write_text(first + crawled_line("https://a.test/b", 200, "text/html", 2, 1, T0))
    it = records(p)
    assert next(it)["url"] == "https://a.test/"
    with open(p / "crawled.txt", "a", encoding="utf-8") as f:
        f.write(crawled_line("https://a.test/b", 200, "text/html", 3, 1, T0 + 5)
                + crawled_line("https://a.test/c", 200, "text/html", 4, 1, T0 + 6))
    rest = list(it)
    assert [(r["url"], r["bytes"]) for r in rest] == [("https://a.test/b", 2)]
    assert [r["bytes"] for r in records(p)] == [1, 3, 4]   # a new export sees them


def test_hostile_text_round_trips_as_safe_text() -> None:
    """Whatever a field holds (the writers do not rely on the crawler's cleaning), both formats
    give it back as the files would hold it: quoting, commas, quotes and any script survive;
    line breaks are a space, other control characters an escape (``records.safe_text``)."""
    nasty = 'a,b "c" \'d\'\n second line\r\n\ttab ; =SUM(A1) \u2028 \x1b[2J\x85\x9b 蜘蛛 🕷'
    safe = 'a,b "c" \'d\'  second line   tab ; =SUM(A1)   \\x1b[2J \\x9b 蜘蛛 🕷'
    assert safe_text(nasty) == safe
    rec = dict.fromkeys(FIELDS)
    rec.update(url="https://a.test/?q=1,2", title=nasty, canonical='"', content_type="", status=200,
               bytes=0, depth=0, outlinks=12, state="crawled")
    out = io.StringIO(newline="")
    assert write_csv([rec, rec], out) == 2
    rows = list(csv.DictReader(io.StringIO(out.getvalue(), newline="")))
    assert len(rows) == 2 and rows[0] == as_csv_row({**rec, "title": safe})
    out = io.StringIO()
    assert write_jsonl([rec], out) == 1
    assert out.getvalue().count("\n") == 1
    assert json.loads(out.getvalue()) == {**rec, "title": safe}


@pytest.mark.parametrize("title", ["=1+1", "+1", "-1", "@SUM(A1)", "=HYPERLINK(\"http://x/\",\"y\")"])
def test_a_csv_cell_that_a_spreadsheet_would_run_starts_with_a_quote(tmp_path: Path, title: str) -> None:
    # OWASP "CSV Injection": cells starting with = + - @ TAB CR are formulas to a spreadsheet.
    p = tmp_path / "p"
    p.mkdir()
    (p / "crawled.txt").write_text(crawled_line("https://a.test/", 200, "text/html", 1, 0, T0, title=title,
                                                content_hash="0" * 32, outlinks=0))
    out = io.StringIO(newline="")
    export(p, "csv", out)
    [row] = list(csv.DictReader(io.StringIO(out.getvalue(), newline="")))
    assert row["title"] == "'" + title and row["url"] == "https://a.test/"
    out = io.StringIO()
    export(p, "jsonl", out)
    assert json.loads(out.getvalue())["title"] == title   # JSON is not a spreadsheet: as it is


class LineCounter:
    """A sink that keeps nothing: counts lines and remembers the last one."""

    def __init__(self) -> None:
        self.lines = 0
        self.last = ""

    def write(self, text: str) -> int:
        self.lines += text.count("\n")
        self.last = text
        return len(text)


@pytest.mark.slow
def test_big_crawled_txt_streams(tmp_path: Path) -> None:
    n = 100_000
    p = tmp_path / "big"
    p.mkdir()
    with open(p / "crawled.txt", "w", encoding="utf-8") as f:
        f.write(CRAWLED_HEADER)
        for i in range(n):
            f.write(f"https://a.test/page/{i}\t200\ttext/html\t{1000 + i}\t{i % 7}\t2026-01-01T10:00:00Z\t-"
                    f"\t{i:032x}\t-\t{i % 50}\tPage number {i}, with a rather long title to make the line fat\n")
    (p / "checks.txt").write_text("https://a.test/page/5\t304\tunchanged\t2026-01-02T10:00:00Z\t-\n")
    size = (p / "crawled.txt").stat().st_size
    for fmt in ("jsonl", "csv"):
        sink = LineCounter()
        started = time.monotonic()
        written = export(p, fmt, sink)  # type: ignore[arg-type]
        elapsed = time.monotonic() - started
        assert written == n
        assert sink.lines == n + (fmt == "csv")
        assert "page/99999" in sink.last
        assert elapsed < 60, elapsed   # under 1 s here; generous for slow CI machines
    # Holding the records would cost well over the file's size (~15 MB); streaming costs the URL
    # fingerprints (16 bytes each) and one line at a time.
    tracemalloc.start()
    try:
        assert export(p, "jsonl", LineCounter()) == n  # type: ignore[arg-type]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 << 20 < size, (peak, size)   # measured: ~5.5 MB for a 17 MB file
    got = list(records(p))
    assert got[5]["status"] == 304 and got[5]["fetched_at"] == "2026-01-02T10:00:00Z"
    assert got[-1]["bytes"] == 1000 + n - 1 and got[-1]["depth"] == (n - 1) % 7


def test_skipped_message_shapes() -> None:
    s = Skipped()
    s.add("failed.txt", 4)
    assert s.message() == "warning: skipped 1 line that is not a record: failed.txt 1 (line 4)"


def test_short_hand_written_lines_are_records_with_unknown_fields(tmp_path: Path) -> None:
    """What recovery accepts, export exports: a bare URL in crawled.txt (marked done by hand) and
    URL + reason in failed.txt; the fields not written are null."""
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "crawled.txt").write_text(CRAWLED_HEADER + "https://a.test/by-hand\n")
    (folder / "failed.txt").write_text(FAILED_HEADER + "https://a.test/broken\tgave up by hand\n"
                                       "https://a.test/x\t\n")
    skipped = Skipped()
    got = list(records(folder, skipped))
    assert [(r["url"], r["state"], r["status"], r["fetched_at"]) for r in got] == [
        ("https://a.test/by-hand", "crawled", None, None), ("https://a.test/broken", "failed", None, None)]
    assert skipped.counts == {"failed.txt": 1}   # a failure without a reason is not a record


def test_a_changed_check_never_pairs_the_new_hash_with_the_old_page(tmp_path: Path) -> None:
    """After a ``changed`` recheck, what crawled.txt measured of the old version (content_type,
    bytes, canonical, outlinks, title) is not the page's any more: the check's own values when
    checks.txt carries them (10 fields), else null. 5-field lines stay valid."""
    p = tmp_path / "p"
    p.mkdir()
    a = "https://a.test"
    names = ("bare", "full", "full-then-304", "bare-after-full", "stale", "unchanged", "removed", "pdf")
    (p / "crawled.txt").write_text("".join(
        crawled_line(f"{a}/{n}", 200, "text/html", 111, 0, T0, content_hash="h1", canonical=f"{a}/c",
                     outlinks=7, title="Old title") for n in names))
    new = {"content_type": "text/html; charset=utf-8", "bytes": 222, "canonical": None, "outlinks": 3,
           "title": "New\ttitle"}
    (p / "checks.txt").write_text(
        check_line(f"{a}/bare", 200, "changed", T0 + 10, "h2")
        + check_line(f"{a}/full", 200, "changed", T0 + 10, "h2", new)
        + check_line(f"{a}/full-then-304", 200, "changed", T0 + 10, "h2", new)
        + check_line(f"{a}/full-then-304", 304, "unchanged", T0 + 20, None)
        + check_line(f"{a}/bare-after-full", 200, "changed", T0 + 10, "h2", new)
        + check_line(f"{a}/bare-after-full", 200, "changed", T0 + 20, "h3")
        + check_line(f"{a}/stale", 200, "changed", T0 - 10, "h0", new)      # older than the crawled line
        + check_line(f"{a}/unchanged", 200, "unchanged", T0 + 10, "h1")
        + check_line(f"{a}/removed", 404, "removed", T0 + 10, None)
        + check_line(f"{a}/pdf", 200, "changed", T0 + 10, "application/pdf:9",
                     {"content_type": "application/pdf", "bytes": 9})
        + f"{a}/full\t200\tchanged\t{at(30)}\th4\ttext/html\tmany\t-\t1\tx\n"   # garbage: bytes
        + f"{a}/full\t200\tchanged\t{at(30)}\th4\ttext/html\t5\n")               # garbage: 7 fields
    skipped = Skipped()
    got = {r["url"].rsplit("/", 1)[1]: r for r in records(p, skipped)}
    assert skipped.counts == {"checks.txt": 2}

    def body(name: str) -> tuple:
        r = got[name]
        return r["content_type"], r["bytes"], r["canonical"], r["outlinks"], r["title"], r["content_hash"]

    old = ("text/html", 111, f"{a}/c", 7, "Old title")
    fresh = ("text/html; charset=utf-8", 222, None, 3, "New title")
    assert body("bare") == (None, None, None, None, None, "h2")
    assert body("full") == fresh + ("h2",)
    assert body("full-then-304") == fresh + ("h2",) and got["full-then-304"]["status"] == 304
    assert body("bare-after-full") == (None, None, None, None, None, "h3")
    assert body("stale") == old + ("h1",)
    assert body("unchanged") == old + ("h1",)       # same content: what was measured still holds
    assert body("removed") == old + ("h1",) and got["removed"]["state"] == "removed"
    assert body("pdf") == ("application/pdf", 9, None, None, None, "application/pdf:9")
    assert check_line(f"{a}/x", None, "failed", T0, None) == f"{a}/x\t-\tfailed\t{at(0)}\t-\n"
