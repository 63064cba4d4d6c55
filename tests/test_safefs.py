"""Project files are never written through a symbolic link, and never left with a torn line.

Issue 13, items 1 and 13: a project folder from someone else (a tarball) with ``fetch.log``,
``crawled.txt`` or ``robots/`` as links made the crawler append server-controlled text to files
outside the project; a full disk left half a line at the end of ``crawled.txt``.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sitekit import TestSite
from test_hostile import assert_state_files_parse, cli, crawl, one_error, urls_in
from spider import safefs
from spider.robots import RobotsCache, Rules
from spider.frontier.contract import StoreError
from spider.frontier.files import FileStore

PAGES = 30


def small_site(site: TestSite, n: int = PAGES) -> set[str]:
    """Pages /p0 .. /p{n-1}, /p0 linking to all the others; returns their URLs."""
    links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(1, n))
    site.route("/p0", body=f"<html><title>p0</title><body>{links}</body></html>")
    for i in range(1, n):
        site.route(f"/p{i}", body=f"<html><title>p{i}</title><body>$IFS;touch x;</body></html>")
    return {site.url(f"/p{i}") for i in range(n)}


def snapshot(path: Path) -> tuple[bytes, int]:
    st = os.lstat(path)
    return path.read_bytes(), st.st_mtime_ns


@pytest.mark.parametrize("name", ["fetch.log", "crawled.txt", "queue.txt", "rejected.txt", "hosts.txt",
                                  "crawl.lock", "frontier.lock", ".queue.txt.1.tmp"])
def test_a_state_file_linked_out_of_the_project_is_refused(projects_dir: Path, tmp_path: Path,
                                                           site: TestSite, name: str) -> None:
    small_site(site)
    crawl(projects_dir, "p", site.url("/p0"), "--max-pages", "2")
    victim = tmp_path / "victim.rc"
    victim.write_text("# a shell rc file\n")
    before = snapshot(victim)
    link = projects_dir / "p" / name
    if link.exists():
        link.unlink()
    link.symlink_to(victim)
    hits = dict(site.hits)
    for command in (["crawl", "p"], ["status", "p"], ["report", "p"], ["recrawl", "p"], ["export", "p", "--format", "jsonl"], ["seed", "p"]):
        err = one_error(cli(projects_dir, *command))
        assert f"{name}: is a symbolic link" in err, err
    assert snapshot(victim) == before
    assert site.hits == hits   # nothing was fetched either


def test_a_linked_robots_folder_is_refused(projects_dir: Path, tmp_path: Path, site: TestSite) -> None:
    small_site(site)
    crawl(projects_dir, "p", site.url("/p0"), "--max-pages", "1")
    outside = tmp_path / "outside"
    outside.mkdir()
    robots = projects_dir / "p" / "robots"
    for f in robots.iterdir():
        f.unlink()
    robots.rmdir()
    robots.symlink_to(outside, target_is_directory=True)
    err = one_error(cli(projects_dir, "crawl", "p"))
    assert "robots: is a symbolic link" in err
    assert list(outside.iterdir()) == []


def test_a_link_inside_the_robots_or_warc_folder_is_refused(projects_dir: Path, tmp_path: Path, site: TestSite) -> None:
    small_site(site)
    crawl(projects_dir, "p", site.url("/p0"), "--max-pages", "1", "--warc")
    victim = tmp_path / "victim"
    victim.write_text("x\n")
    for sub in ("robots", "warc"):
        link = projects_dir / "p" / sub / "planted.txt"
        link.symlink_to(victim)
        assert f"{sub}/planted.txt: is a symbolic link" in one_error(cli(projects_dir, "crawl", "p"))
        link.unlink()
    assert victim.read_text() == "x\n"


def test_a_fifo_in_place_of_a_state_file_is_refused_without_hanging(projects_dir: Path, site: TestSite) -> None:
    small_site(site)
    crawl(projects_dir, "p", site.url("/p0"), "--max-pages", "1")
    failed = projects_dir / "p" / "failed.txt"
    failed.unlink()
    os.mkfifo(failed)
    for command in (["crawl", "p"], ["status", "p"]):
        assert "failed.txt: is a FIFO" in one_error(cli(projects_dir, *command, timeout=60))


# -- the primitives themselves (defence in depth: a link planted after the check) ---------------

def test_appending_through_a_link_planted_while_running_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    store = FileStore(folder).open()
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (folder / "fetch.log").symlink_to(victim)
    with pytest.raises(StoreError, match="fetch.log: is a symbolic link"):
        store.log("fetch", "0\t1\t200\t10\t5\thttp://x/;touch$IFS/tmp/owned;\n")
    with pytest.raises(OSError, match="symbolic link"):
        safefs.append_text(folder / "fetch.log", "x\n")
    assert victim.read_text() == "keep\n"


def test_an_atomic_rewrite_never_writes_through_a_planted_temp_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    target = tmp_path / "hosts.txt"
    (tmp_path / f".hosts.txt.{os.getpid()}.tmp").symlink_to(victim)
    safefs.atomic_write(target, "new\n")
    assert target.read_text() == "new\n" and not target.is_symlink()
    assert victim.read_text() == "keep\n"


def test_robots_cache_in_a_linked_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "robots").symlink_to(outside, target_is_directory=True)
    cache = RobotsCache(tmp_path)
    with pytest.raises(OSError, match="symbolic link"):
        cache.get("127.0.0.1:1", lambda old: (Rules(404, 0.0), "http://127.0.0.1:1/robots.txt"))
    assert list(outside.iterdir()) == []


# -- a full disk: a short write is cut back (item 13) -------------------------------------------

_SHORT_WRITE = r"""
import os, resource, signal, sys
from pathlib import Path
from spider import safefs
path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # then a write past the limit is short, not fatal
size = path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, resource.RLIM_INFINITY))
try:
    safefs.append_text(path, "http://example.org/a-line-longer-than-ten-bytes\t200\n")
except OSError as e:
    print("error:", e)
"""


def test_a_short_write_on_a_full_disk_leaves_no_partial_line(tmp_path: Path) -> None:
    path = tmp_path / "crawled.txt"
    path.write_text("http://example.org/\t200\n")
    out = subprocess.run([sys.executable, "-c", _SHORT_WRITE, str(path)], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("error:") and "short write" in out, out
    assert path.read_text() == "http://example.org/\t200\n"


def _limit_file_size(limit: int):  # type: ignore[no-untyped-def]
    def go() -> None:
        os.setsid()
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    return go


def test_a_crawl_that_fills_the_disk_leaves_whole_lines_and_resumes(projects_dir: Path, site: TestSite) -> None:
    """RLIMIT_FSIZE stands in for a full disk: every write past the limit is short or refused."""
    expected = small_site(site, 60)
    crawl(projects_dir, "p", site.url("/p0"), "--max-pages", "1")
    fetch_log = projects_dir / "p" / "fetch.log"
    limit = fetch_log.stat().st_size + 1500   # fetch.log, the biggest file, fills up first
    cmd = [sys.executable, str(Path(__file__).resolve().parent.parent / "main.py"), "crawl", "p",
           "--workers", "2", "--delay", "0", "--max-pages", "1000", "--projects-dir", str(projects_dir)]
    proc = subprocess.run(cmd, cwd=projects_dir.parent, capture_output=True, text=True, timeout=120,
                          preexec_fn=_limit_file_size(limit))
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    for name in ("fetch.log", "crawled.txt", "queue.txt", "claims.txt", "rejected.txt"):
        data = (projects_dir / "p" / name).read_bytes()
        assert not data or data.endswith(b"\n"), f"{name} ends in a partial line: {data[-80:]!r}"
    crawl(projects_dir, "p", workers=2)   # the disk has room again: the crawl finishes
    assert set(urls_in(projects_dir / "p" / "crawled.txt")) == expected
    assert_state_files_parse(projects_dir / "p")
