"""What a finished crawl must show its user (issue 16): links cut by --max-links, each refused
URL once, error responses with their type and size, and the broken-links view (failed URLs with
the pages that link to them) in status, the report and the export. Real crawls in subprocesses
of loopback sites (``tests/sitekit.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from spider.config import CrawlConfig
from spider.report import load
from test_cli import cli, crawl, data_lines, links, ok, status_numbers


def test_links_past_max_links_are_one_rejected_line_counted_everywhere(site, projects_dir: Path) -> None:
    site.route("/", body=links(*(f"/p{i}" for i in range(20))))
    for i in range(20):
        site.route(f"/p{i}", body="<p>leaf</p>")
    ok(crawl(projects_dir, "ml", site.url("/"), "--max-links", "10", workers=1))
    folder = projects_dir / "ml"
    cut = [f for f in data_lines(folder / "rejected.txt") if f[1].startswith("max-links")]
    assert cut == [[site.url("/"), "max-links: 10 links not followed", site.url("/")]]
    assert len(data_lines(folder / "crawled.txt")) == 11
    status = ok(cli(projects_dir, "status", "ml")).stdout
    assert status_numbers(status)["rejected"] == 1 and "max-links" in status, status
    ok(cli(projects_dir, "report", "ml"))
    assert "max-links" in (folder / "report.html").read_text(encoding="utf-8")


def test_the_default_max_links_does_not_cut_a_real_index_page() -> None:
    # Python's genindex-all.html has 17,242 links; wget and Scrapy take them all by default
    assert CrawlConfig(seeds=("http://a.test/",)).max_links >= 100_000


def test_a_refused_url_is_logged_once_by_all_workers_and_runs(site, projects_dir: Path) -> None:
    """20 pages link to one off-site URL: one line in rejected.txt, with 4 workers and after a
    resume (a run that crawls more pages linking to it); status counts 1."""
    off_site = "http://elsewhere.test/x"
    site.route("/", body=links(*(f"/p{i}" for i in range(20))))
    for i in range(20):
        site.route(f"/p{i}", body=links(off_site, "/") + f"<p>page {i}</p>")   # not duplicates
    folder = projects_dir / "once"
    ok(crawl(projects_dir, "once", site.url("/"), "--max-pages", "8", workers=4))
    ok(crawl(projects_dir, "once", "--max-pages", "30", workers=4))
    assert len(data_lines(folder / "crawled.txt")) == 21
    assert [f[0] for f in data_lines(folder / "rejected.txt")] == [off_site]
    assert status_numbers(ok(cli(projects_dir, "status", "once")).stdout)["rejected"] == 1


def _export(projects: Path, name: str) -> dict[str, dict]:
    out = ok(cli(projects, "export", name, "--format", "jsonl")).stdout
    return {r["url"]: r for r in map(json.loads, out.splitlines())}


def test_an_error_response_is_exported_with_its_type_and_declared_size(site, projects_dir: Path) -> None:
    gone = "<html><body>nothing here, sorry</body></html>"
    site.route("/", body=links("/gone"))
    site.route("/gone", status=404, body=gone)
    ok(crawl(projects_dir, "e404", site.url("/"), workers=1))
    rec = _export(projects_dir, "e404")[site.url("/gone")]
    assert (rec["status"], rec["state"], rec["content_type"], rec["bytes"]) == (404, "failed", "text/html", len(gone))
    [line] = data_lines(projects_dir / "e404" / "failed.txt")
    assert line[4:] == ["text/html", str(len(gone)), site.url("/")]   # new fields at the end


def test_failed_lines_written_before_the_new_fields_still_read(site, projects_dir: Path) -> None:
    site.route("/", body="<p>home</p>")
    ok(crawl(projects_dir, "old", site.url("/"), workers=1))
    folder = projects_dir / "old"
    with open(folder / "failed.txt", "a", encoding="utf-8") as f:
        f.write(f"{site.url('/x')}\t404\t1\t2026-01-01T00:00:00Z\n{site.url('/y')}\ttimeout\n")
    ok(crawl(projects_dir, "old", workers=1))   # recovery keeps both lines
    recs = _export(projects_dir, "old")
    assert recs[site.url("/x")]["status"] == 404 and recs[site.url("/x")]["bytes"] is None
    assert recs[site.url("/y")]["state"] == "failed"
    assert len(data_lines(folder / "failed.txt")) == 2


def test_broken_links_are_shown_with_the_pages_linking_to_them(site, projects_dir: Path) -> None:
    site.route("/", body=links(*(f"/p{i}" for i in range(5)), "/gone"))
    for i in range(5):
        site.route(f"/p{i}", body=links("/gone", "/") + f"<p>page {i}</p>")
    site.route("/p0", body=links("/gone", "/missing") + "<p>page 0</p>")
    site.route("/gone", status=404, body="no")
    site.route("/missing", status=410, body="gone for good")
    ok(crawl(projects_dir, "bl", site.url("/"), workers=1))
    folder, gone = projects_dir / "bl", site.url("/gone")
    failed = {f[0]: f for f in data_lines(folder / "failed.txt")}
    assert failed[gone][6] == site.url("/") and failed[site.url("/missing")][6] == site.url("/p0")

    status = ok(cli(projects_dir, "status", "bl")).stdout
    assert "broken    2 failed URLs:" in status, status
    lines = status.splitlines()
    first = lines.index("broken    2 failed URLs:") + 1
    assert gone in lines[first] and "linked from 6 pages, e.g. " + site.url("/") in lines[first], status
    assert site.url("/missing") in lines[first + 1] and "linked from 1 page, e.g. " in lines[first + 1]

    ok(cli(projects_dir, "report", "bl"))
    html = (folder / "report.html").read_text(encoding="utf-8")
    assert "Broken links" in html and gone in html

    recs = _export(projects_dir, "bl")
    assert sorted(recs[gone]["referrers"]) == sorted([site.url("/")] + [site.url(f"/p{i}") for i in range(5)])
    assert recs[site.url("/missing")]["referrers"] == [site.url("/p0")]
    assert recs[site.url("/")]["referrers"] is None
    csv = ok(cli(projects_dir, "export", "bl", "--format", "csv")).stdout.splitlines()
    assert csv[0].endswith(",state,referrers")


def test_recrawl_failed_fetches_a_fixed_404_again(site, projects_dir: Path) -> None:
    site.route("/", body=links("/fixed", "/still", "/a"))
    site.route("/a", body="<p>a</p>")
    site.route("/fixed", status=404, body="not yet")
    site.route("/still", status=404, body="never")
    ok(crawl(projects_dir, "rf", site.url("/"), workers=1))
    folder = projects_dir / "rf"
    assert sorted(urls for urls, *_ in data_lines(folder / "failed.txt")) == [site.url("/fixed"), site.url("/still")]
    site.route("/fixed", body="<p>there now</p>")
    out = ok(cli(projects_dir, "recrawl", "rf", "--failed", "--delay", "0"))
    assert "2 failed URLs queued again" in out.stdout + out.stderr
    assert [f[0] for f in data_lines(folder / "failed.txt")] == [site.url("/still")]   # failed again, once
    recs = _export(projects_dir, "rf")
    assert (recs[site.url("/fixed")]["status"], recs[site.url("/fixed")]["state"]) == (200, "crawled")
    assert site.hits["/fixed"] == 2 and site.hits["/a"] == 1   # only failed URLs fetched again
    assert status_numbers(ok(cli(projects_dir, "status", "rf")).stdout)["failed"] == 1


def test_status_and_report_count_a_url_repeated_by_an_older_version_once(site, projects_dir: Path) -> None:
    site.route("/", body="<p>home</p>")
    ok(crawl(projects_dir, "rep", site.url("/"), workers=1))
    folder = projects_dir / "rep"
    with open(folder / "rejected.txt", "a", encoding="utf-8") as f:   # as 4 workers and a resume wrote it
        f.write("".join(f"http://elsewhere.test/x\tscope\t{site.url('/')}\n" for _ in range(5)))
    assert status_numbers(ok(cli(projects_dir, "status", "rep")).stdout)["rejected"] == 1
    ok(cli(projects_dir, "report", "rep"))
    assert sum(load(folder).rejected.values()) == 1
