"""What spider writes, and what it makes of odd responses and its own cache files (issue 13).

- robots/ cache files with a nonsense fetch time, hosts too long for the old cache file names;
- control characters from a server (titles, Content-Type, reasons) in every file we write, and
  formula injection into the CSV export;
- interim ``1xx`` responses (``103 Early Hints``) before the real one, and a NUL in Content-Type.

Real crawls: ``python main.py crawl ...`` subprocesses against loopback servers, through the
helpers of ``tests/test_hostile.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sitekit import TestSite
from spider.robots import cache_name, dump, load, Rules
from test_hostile import FAST, assert_state_files_parse, cli, crawl, page_hits, rows, urls_in

LONG_HOST = ".".join(["a" * 63] * 3) + "." + "b" * 61     # 253 characters: the longest valid name


def _robots(site: TestSite, text: str = "User-agent: *\nAllow: /\n") -> None:
    site.route("/robots.txt", body=text, content_type="text/plain")


# =========================================================================== robots/ cache files


@pytest.mark.parametrize("fetched_at", ["nan", "inf", "1e12", "-1"])
def test_a_robots_cache_file_with_a_nonsense_fetch_time_is_fetched_again(
        projects_dir: Path, site: TestSite, fetched_at: str) -> None:
    # Before: 'fetched_at: nan' in a disallow-all file made the host's retry time nan, and every
    # URL of the host was claimed and released at full CPU for ever (queue.txt grew to 40k
    # lines and claims.txt to 120k in 30 s) without a request; 1e12 held the host until 33658.
    site.route("/", body='<a href="/a">a</a>')
    site.route("/a", body="a")
    _robots(site)
    crawl(projects_dir, "p", site.url("/"), "--max-pages", "1")
    cached = projects_dir / "p" / "robots" / cache_name(f"{site.host}:{site.port}")
    rules = load(cached.read_text())
    cached.write_text(dump(Rules(503, rules.fetched_at, "", "disallow-all"), site.url("/robots.txt"))
                      .replace(f"fetched_at: {rules.fetched_at:.3f}", f"fetched_at: {fetched_at}"))
    result = crawl(projects_dir, "p", "--max-pages", "10", timeout=20)
    assert "done: crawled 2" in result.stderr, result.stderr[-2000:]
    assert site.hits["/robots.txt"] == 2 and page_hits(site) == {"/": 1, "/a": 1}
    assert load(cached.read_text()).mode == "rules"
    assert_state_files_parse(projects_dir / "p")


def test_a_host_of_253_characters_is_crawled(projects_dir: Path, site: TestSite,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: its robots cache file name was longer than 255 bytes, and every URL of the host
    # was failed as 'internal error: OSError' (File name too long). The host cannot resolve
    # here, so the test site serves it as an HTTP proxy.
    site.route("/", body='<a href="/a">a</a>')
    site.route("/a", body="a")
    _robots(site, "User-agent: *\nDisallow: /a\n")
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.setenv("http_proxy", site.url("/"))
    seed = f"http://{LONG_HOST}/"
    crawl(projects_dir, "long", seed)
    folder = projects_dir / "long"
    assert urls_in(folder / "crawled.txt") == [seed]
    assert [r[:2] for r in rows(folder / "rejected.txt")] == [[seed + "a", "robots"]]
    assert not (folder / "failed.txt").exists() or urls_in(folder / "failed.txt") == []
    assert not (folder / "errors.log").exists()
    assert [r.target for r in site.requests] == [f"http://{LONG_HOST}/robots.txt", seed]
    assert (folder / "robots" / cache_name(LONG_HOST)).is_file()
