"""What a finished crawl must show its user (issue 16): links cut by --max-links, each refused
URL once, error responses with their type and size, and the broken-links view (failed URLs with
the pages that link to them) in status, the report and the export. Real crawls in subprocesses
of loopback sites (``tests/sitekit.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from spider.config import CrawlConfig
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
