"""End-to-end tests of the command line: `python main.py crawl | status | demo` run as a user runs them.

Every test starts the crawler as a real subprocess (cwd = tmp_path, always with --projects-dir and a
timeout) against loopback `TestSite`s or the bundled demo site, then checks exit codes, messages,
the project files and what the servers saw. Crawls are kept tiny (`--delay 0`, a few pages).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Optional, Sequence

import pytest

from sitekit import (
    DEMO_BROKEN,
    DEMO_DISALLOWED,
    DEMO_EXTERNAL,
    DEMO_HTML_PAGES,
    DEMO_ONLY_VIA_BASE,
    DEMO_REDIRECTS,
    TestSite,
)

MAIN = Path(__file__).resolve().parent.parent / "main.py"
TIMEOUT = 60  # seconds; no subprocess call may take longer (the suite must never hang)
PROJECT_FILES = ("settings.txt", "queue.txt", "crawled.txt", "failed.txt", "rejected.txt", "fetch.log", "claims.txt")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
DUMMY_URL = "http://127.0.0.1:9/"  # never fetched: every command using it stops before crawling


# ------------------------------------------------------------------------------------ helpers


def run_cli(args: Sequence[str], cwd: Path, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run `python main.py ARGS` like a user; never a traceback, whatever happens."""
    result = subprocess.run(
        [sys.executable, str(MAIN), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result


def cli(projects: Path, *args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """`python main.py ARGS --projects-dir PROJECTS`, run from the folder holding PROJECTS."""
    return run_cli([*args, "--projects-dir", str(projects)], projects.parent, timeout)


def crawl(projects: Path, name: str, *args: str, workers: int = 2, delay: Optional[str] = "0") -> subprocess.CompletedProcess:
    """`crawl NAME ARGS --workers N --delay S` (pass delay=None to not give --delay)."""
    extra = ["--workers", str(workers)] + ([] if delay is None else ["--delay", delay])
    return cli(projects, "crawl", name, *args, *extra)


def popen_crawl(projects: Path, name: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(MAIN), "crawl", name, *args, "--projects-dir", str(projects)],
        cwd=projects.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def stop(proc: subprocess.Popen) -> None:
    """Make sure a crawl started with Popen is gone (SIGTERM, then SIGKILL)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=10)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Error" not in result.stderr, result.stderr
    return result


def assert_error_line(result: subprocess.CompletedProcess, code: int = 1) -> str:
    """Exit `code`, exactly one non-blank stderr line, starting with 'Error: '; returns it."""
    assert result.returncode == code, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def data_lines(path: Path) -> list[list[str]]:
    """The data lines of a state file, split on TAB (blank and '#' lines skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.strip().startswith("#"):
            out.append(line.split("\t"))
    return out


def urls_in(path: Path) -> list[str]:
    return [fields[0] for fields in data_lines(path)]


def pages(folder: Path) -> list[list[str]]:
    """crawled.txt lines that are pages, not redirect hops."""
    return [f for f in data_lines(folder / "crawled.txt") if not re.fullmatch(r"3\d\d", f[1]) or f[1] == "304"]


def completed(folder: Path) -> int:
    """What --max-pages counts: crawled pages (redirect hops excluded) plus failed URLs."""
    return len(pages(folder)) + len(data_lines(folder / "failed.txt"))


def settings_of(folder: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in (folder / "settings.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.strip().startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"not a 'key = value' line: {line!r}"
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def status_numbers(text: str) -> dict[str, int]:
    found = dict(re.findall(r"^(pending|in flight|crawled|failed|rejected)\s+(\d+)", text, re.M))
    return {k: int(v) for k, v in found.items()}


def links(*hrefs: str) -> str:
    return "<html><body>" + "".join(f'<a href="{h}">{h}</a>\n' for h in hrefs) + "</body></html>"


def wait_for(cond: Callable[[], bool], timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.02)


def page_hits(site: TestSite) -> Counter[str]:
    """Requests per target, leaving out /robots.txt (a crawler may well ask for it)."""
    hits = site.hits
    del hits["/robots.txt"]
    return hits


def page_requests(site: TestSite) -> list:
    return [info for info in site.requests if info.path != "/robots.txt"]


# ------------------------------------------------------------------------------------ help


def test_help_and_version(tmp_path: Path) -> None:
    top = run_cli(["--help"], tmp_path)
    assert top.returncode == 0
    for command in ("crawl", "status", "demo"):
        assert re.search(rf"^\s+{command}\s", top.stdout, re.M), top.stdout
    sub = run_cli(["crawl", "--help"], tmp_path)
    assert sub.returncode == 0 and "NAME [START_URL]..." in sub.stdout
    for option in ("--workers", "--delay", "--max-depth", "--max-pages", "--scope", "--allow", "--deny",
                   "--user-agent", "--projects-dir"):
        assert option in sub.stdout
    for command in ("status", "demo"):
        assert run_cli([command, "--help"], tmp_path).returncode == 0
    version = run_cli(["--version"], tmp_path)
    assert version.returncode == 0 and re.search(r"\d+\.\d+", version.stdout)
    assert list(tmp_path.iterdir()) == []  # help writes nothing, not even projects/


def test_console_script(tmp_path: Path) -> None:
    exe = shutil.which("spider")
    if exe is None:
        pytest.skip("the `spider` console script is not installed")
    result = subprocess.run([exe, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0 and "crawl" in result.stdout


# ------------------------------------------------------------------------------------ usage errors (exit 2)


@pytest.mark.parametrize(
    "args, says",
    [
        (["crawl", "new"], "START_URL"),
        (["crawl", "new", DUMMY_URL, "--no-such-option"], "--no-such-option"),
        (["crawl", "new", DUMMY_URL, "--workers", "0"], "--workers"),
        (["crawl", "new", DUMMY_URL, "--scope", "bogus"], "--scope"),
        (["crawl", "new", DUMMY_URL, "--delay", "-1"], "--delay"),
        (["crawl", "new", DUMMY_URL, "--max-pages", "0"], "--max-pages"),
        (["crawl"], "NAME"),
        (["status"], "NAME"),
        (["frobnicate"], "frobnicate"),
    ],
    ids=["no-start-url", "unknown-option", "workers-0", "scope-bogus", "delay-negative", "max-pages-0",
         "crawl-no-name", "status-no-name", "unknown-command"],
)
def test_usage_errors_exit_2(projects_dir: Path, args: list[str], says: str) -> None:
    result = cli(projects_dir, *args)
    assert result.returncode == 2, result.stderr
    assert "Usage:" in result.stderr and "Error: " in result.stderr and says in result.stderr
    assert result.stdout == ""
    assert list(projects_dir.iterdir()) == []  # nothing created


# ------------------------------------------------------------------------------------ bad input (exit 1)


@pytest.mark.parametrize("url", ["ftp://x/", "not a url", "http://", "http://exa mple.com/", "mailto:a@b.c"])
def test_invalid_start_url(projects_dir: Path, url: str) -> None:
    line = assert_error_line(crawl(projects_dir, "p", url))
    assert "START_URL" in line and url in line
    assert list(projects_dir.iterdir()) == []


def test_a_start_url_without_its_scheme_gets_a_suggestion(projects_dir: Path) -> None:
    line = assert_error_line(crawl(projects_dir, "p", "example.org/docs"))
    assert "invalid START_URL" in line and "(did you mean https://example.org/docs?)" in line
    assert list(projects_dir.iterdir()) == []


def test_one_invalid_start_url_among_good_ones(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body="home")
    line = assert_error_line(crawl(projects_dir, "p", site.url("/"), "ftp://x/"))
    assert "ftp://x/" in line
    assert site.hits == {} and list(projects_dir.iterdir()) == []


@pytest.mark.parametrize("name", ["a/b", "..", ".", "", "a\\b", "../escape"])
def test_invalid_project_name(projects_dir: Path, tmp_path: Path, name: str) -> None:
    line = assert_error_line(crawl(projects_dir, name, DUMMY_URL))
    assert "NAME" in line
    assert list(projects_dir.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["projects"]  # nothing written next to it


@pytest.mark.parametrize("option", ["--allow", "--deny"])
@pytest.mark.parametrize("pattern", ["(", "[a-"])
def test_invalid_regex(projects_dir: Path, site: TestSite, option: str, pattern: str) -> None:
    site.route("/", body="home")
    result = crawl(projects_dir, "p", site.url("/"), option, pattern)
    assert result.returncode in (1, 2)  # it is 1: checked when the settings are built
    error = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error) == 1 and "regular expression" in error[0] and repr(pattern) in error[0], result.stderr
    assert site.hits == {}
    assert not (projects_dir / "p" / "settings.txt").exists()


def test_invalid_regex_on_resume_changes_nothing(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body="home")
    ok(crawl(projects_dir, "p", site.url("/")))
    before = (projects_dir / "p" / "settings.txt").read_text()
    result = crawl(projects_dir, "p", "--deny", "(")
    assert result.returncode in (1, 2)
    assert [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert (projects_dir / "p" / "settings.txt").read_text() == before
    assert page_hits(site) == {"/": 1}


def test_status_of_missing_project(projects_dir: Path) -> None:
    line = assert_error_line(cli(projects_dir, "status", "nope"))
    assert "nope" in line
    assert list(projects_dir.iterdir()) == []


def test_status_with_invalid_name(projects_dir: Path) -> None:
    assert "NAME" in assert_error_line(cli(projects_dir, "status", ".."))


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-folder", "dangling"])
def test_symlinked_project_is_refused(projects_dir: Path, tmp_path: Path, site: TestSite, dangling: bool) -> None:
    site.route("/", body="home")
    target = tmp_path / "elsewhere"
    if not dangling:
        target.mkdir()
    (projects_dir / "p").symlink_to(target, target_is_directory=True)
    line = assert_error_line(crawl(projects_dir, "p", site.url("/")))
    assert "symbolic link" in line
    assert "symbolic link" in assert_error_line(crawl(projects_dir, "p"))
    assert "symbolic link" in assert_error_line(cli(projects_dir, "status", "p"))
    assert site.hits == {}
    if dangling:
        assert not target.exists() and not target.is_symlink()
    else:
        assert list(target.iterdir()) == []


def test_project_name_that_is_a_file(projects_dir: Path) -> None:
    (projects_dir / "p").write_text("not a project\n")
    assert "not a folder" in assert_error_line(crawl(projects_dir, "p", DUMMY_URL))
    assert (projects_dir / "p").read_text() == "not a project\n"


@pytest.mark.parametrize(
    "line, says, unreadable",
    [("garbage", "settings.txt:2", True), ("workers = many", "settings.txt:2", True),
     ("colour = blue", "colour", True), ("workers = 0", "workers", False), ("scope = bogus", "scope", False),
     ("deny = (", "regular expression", False)],
)
def test_bad_settings_file(projects_dir: Path, line: str, says: str, unreadable: bool) -> None:
    folder = projects_dir / "p"
    folder.mkdir()
    (folder / "settings.txt").write_text(f"seed = {DUMMY_URL}\n{line}\n")
    assert says in assert_error_line(cli(projects_dir, "crawl", "p"))
    if unreadable:  # status only reads the file: it can report on settings that cannot crawl
        assert says in assert_error_line(cli(projects_dir, "status", "p"))
    assert (folder / "settings.txt").read_text() == f"seed = {DUMMY_URL}\n{line}\n"


def test_bad_seed_in_settings_file(projects_dir: Path) -> None:
    folder = projects_dir / "p"
    folder.mkdir()
    (folder / "settings.txt").write_text("seed = not a url\n")
    assert "not a url" in assert_error_line(crawl(projects_dir, "p"))


@pytest.mark.parametrize("args, says", [
    (["--trap", "repeated-segments=1"], "repeated-segments must be at least 2"),   # refused every path
    (["--recrawl-min", "inf"], "recrawl_min must be a finite number of seconds"),
    (["--recrawl-min", "nan"], "recrawl_min must be a finite number of seconds"),
    (["--recrawl-max", "inf"], "recrawl_max must be a finite number of seconds"),
    (["--recrawl-max", "1e309"], "recrawl_max must be a finite number of seconds"),
], ids=["repeated-segments-1", "recrawl-min-inf", "recrawl-min-nan", "recrawl-max-inf", "recrawl-max-1e309"])
def test_option_values_that_cannot_work_are_one_error_line(projects_dir: Path, args: list[str], says: str) -> None:
    assert says in assert_error_line(crawl(projects_dir, "p", DUMMY_URL, *args))
    assert list(projects_dir.iterdir()) == []


@pytest.mark.parametrize("args, warned", [
    (["--prefer", "/a"], "--prefer only applies to --order best; ignored with --order bfs"),
    (["--order", "dfs", "--prefer", "/a", "--defer", "/b"],
     "--prefer and --defer only apply to --order best; ignored with --order dfs"),
    (["--order", "best", "--defer", "/b"], None),
])
def test_prefer_and_defer_without_order_best_are_warned_about(
        projects_dir: Path, site: TestSite, args: list[str], warned: Optional[str]) -> None:
    site.route("/", body=links("/a"))
    site.route("/a", body=links())
    result = ok(crawl(projects_dir, "p", site.url("/"), *args))
    warnings = [line for line in result.stderr.splitlines() if "only appl" in line]
    assert warnings == ([f"warning: {warned}"] if warned else []), result.stderr
    assert page_hits(site) == {"/": 1, "/a": 1}                      # the crawl goes on


# ------------------------------------------------------------------------------------ a first crawl


def test_crawl_creates_project_and_documented_file_formats(
    projects_dir: Path, site: TestSite, make_site: Callable[..., TestSite]
) -> None:
    other = make_site("127.0.0.2")
    other.route("/elsewhere.html", body="far away")
    home = links("/a.html", "/notes.txt", "/missing.html", "/moved", other.url("/elsewhere.html"),
                 "mailto:someone@example.org", "#top")
    site.route("/", body=home)
    site.route("/a.html", body=links("/", "/a.html"))
    site.route("/notes.txt", body="plain text\n", content_type="text/plain")
    site.add_redirect("/moved", "/a.html")
    result = ok(crawl(projects_dir, "first", site.url("/"), "--user-agent", "TestBot/7"))

    folder = projects_dir / "first"
    for name in PROJECT_FILES:
        if name != "rejected.txt":  # see test_rejected_txt_exists_when_nothing_was_rejected
            assert (folder / name).is_file(), name
    # settings.txt: key = value lines, the seed as given (normalised), our options saved.
    saved = settings_of(folder)
    assert saved["seed"] == [site.url("/")]
    assert saved["workers"] == ["2"] and float(saved["delay"][0]) == 0.0
    assert saved["user_agent"] == ["TestBot/7"]
    # The server saw each page once, with our User-Agent, and nothing of the other host.
    assert page_hits(site) == {"/": 1, "/a.html": 1, "/notes.txt": 1, "/missing.html": 1, "/moved": 1}
    assert {r.headers["user-agent"] for r in site.requests} == {"TestBot/7"}
    assert other.hits == {}

    crawled = {f[0]: f for f in data_lines(folder / "crawled.txt")}
    assert set(crawled) == {site.url(p) for p in ("/", "/a.html", "/notes.txt", "/moved")}
    for url, f in crawled.items():
        assert len(f) == (11 if f[2] == "text/html" and f[1] == "200" else 7), f
        status, ctype, size, depth, stamp, final = f[1:7]
        assert status.isdigit() and size.isdigit() and depth.isdigit() and STAMP.match(stamp), f
    assert crawled[site.url("/")][1:5] == ["200", "text/html", str(len(home)), "0"]
    assert crawled[site.url("/")][6] == "-"
    assert crawled[site.url("/a.html")][1:5] == ["200", "text/html", str(len(links("/", "/a.html"))), "1"]
    assert crawled[site.url("/notes.txt")][1:3] == ["200", "text/plain"]
    assert crawled[site.url("/moved")][1] == "301" and crawled[site.url("/moved")][6] == site.url("/a.html")

    failed = data_lines(folder / "failed.txt")
    assert len(failed) == 1 and len(failed[0]) == 7
    assert failed[0][:3] == [site.url("/missing.html"), "404", "1"] and STAMP.match(failed[0][3])
    # the error response's type and declared size, and the page that linked to it
    assert failed[0][4] == "text/html" and failed[0][5].isdigit() and failed[0][6].startswith(site.url("/"))

    rejected = data_lines(folder / "rejected.txt")
    assert [other.url("/elsewhere.html"), "scope", site.url("/")] in rejected
    assert all(len(f) == 3 for f in rejected)
    assert not any(f[0].startswith("mailto:") for f in rejected + data_lines(folder / "crawled.txt"))

    assert urls_in(folder / "queue.txt") == []      # nothing pending
    assert data_lines(folder / "claims.txt") == []  # nothing in flight after a clean stop
    logged = [line.split("\t")[-1] for line in (folder / "fetch.log").read_text().splitlines()]
    logged = [url for url in logged if url != site.url("/robots.txt")]
    assert sorted(logged) == sorted(set(crawled) | {site.url("/missing.html")})  # one line per fetch
    assert "done" in result.stderr


def test_rejected_txt_exists_when_nothing_was_rejected(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body=links("/a"))
    site.route("/a", body="leaf")
    ok(crawl(projects_dir, "p", site.url("/")))
    assert page_hits(site) == {"/": 1, "/a": 1}
    for name in PROJECT_FILES:
        assert (projects_dir / "p" / name).is_file(), f"{name} missing"


def test_crawl_again_when_done_fetches_nothing(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body=links("/a"))
    site.route("/a", body="leaf")
    ok(crawl(projects_dir, "p", site.url("/")))
    crawled = (projects_dir / "p" / "crawled.txt").read_text()
    ok(crawl(projects_dir, "p"))
    ok(crawl(projects_dir, "p", site.url("/")))  # giving the known seed again changes nothing either
    assert page_hits(site) == {"/": 1, "/a": 1}
    assert (projects_dir / "p" / "crawled.txt").read_text() == crawled
    assert settings_of(projects_dir / "p")["seed"] == [site.url("/")]


# ------------------------------------------------------------------------------------ --max-pages and resume


def _budget_site(site: TestSite) -> set[str]:
    """A 20-page tree plus redirects (which do not count) and 404s (which do), all linked from '/'."""
    paths = site.add_tree(20, 3)
    extra = []
    for i in range(0, 20, 4):
        site.add_redirect(f"/r/{i}", f"/p/{i}.html")
        extra += [f"/r/{i}", f"/gone/{i}"]
    site.route("/", body=links(*extra, "/p/0.html", "/p/1.html"))
    return paths | set(extra)


def test_max_pages_is_exact_and_resumable(projects_dir: Path, site: TestSite) -> None:
    everything = _budget_site(site)
    folder = projects_dir / "p"
    ok(crawl(projects_dir, "p", site.url("/"), "--max-pages", "6"))
    assert completed(folder) == 6
    assert settings_of(folder)["max_pages"] == ["6"]
    queue = data_lines(folder / "queue.txt")
    assert queue, "the site has more than 6 pages: some must still be pending"
    for f in queue:  # URL, depth, attempts, not_before, source
        assert len(f) == 5 and f[0].startswith(site.url("/")), f
        assert f[1].isdigit() and f[2].isdigit() and float(f[3]) >= 0 and f[4].startswith("http"), f

    # The same budget again: nothing to do, nothing fetched, nothing changed.
    hits = page_hits(site)
    files = {n: (folder / n).read_text() for n in ("crawled.txt", "failed.txt", "queue.txt")}
    result = ok(crawl(projects_dir, "p", "--max-pages", "6"))
    assert "max-pages" in result.stderr
    assert " 0 in this run)" in result.stderr and "(0.0 pages/s)" in result.stderr, result.stderr
    assert page_hits(site) == hits
    assert {n: (folder / n).read_text() for n in files} == files
    ok(crawl(projects_dir, "p"))  # the saved budget is reused: still nothing to do
    assert page_hits(site) == hits

    # A higher budget goes on from where the crawl stopped.
    result = ok(crawl(projects_dir, "p", "--max-pages", "11"))
    assert completed(folder) == 11
    run = re.search(r"crawled (\d+) \((?:\+\d+ redirects?; )?(\d+) in this run\)", result.stderr)
    assert run and 0 < int(run[2]) < int(run[1]), result.stderr   # the rate is of this run's pages
    assert settings_of(folder)["max_pages"] == ["11"]

    # And a budget bigger than the site finishes it: every URL fetched exactly once over all runs.
    ok(crawl(projects_dir, "p", "--max-pages", "1000"))
    assert urls_in(folder / "queue.txt") == []
    assert set(page_hits(site)) == everything and set(page_hits(site).values()) == {1}
    assert completed(folder) == len(everything) - 5  # the five redirects are hops, not pages


def test_max_pages_one(projects_dir: Path, site: TestSite) -> None:
    site.add_tree(5, 2)
    ok(crawl(projects_dir, "p", site.url("/"), "--max-pages", "1"))
    assert page_hits(site) == {"/": 1}
    assert urls_in(projects_dir / "p" / "crawled.txt") == [site.url("/")]
    assert len(urls_in(projects_dir / "p" / "queue.txt")) == 2


def test_resume_reuses_and_overrides_saved_settings(projects_dir: Path, site: TestSite) -> None:
    site.route("/docs/", body=links("d0.html", "/outside.html"))
    for i in range(3):
        site.route(f"/docs/d{i}.html", body=links(f"d{i + 1}.html", "/outside.html"))
    site.route("/docs/d3.html", body="the end")
    site.route("/outside.html", body="not under /docs/")
    folder = projects_dir / "p"

    ok(crawl(projects_dir, "p", site.url("/docs/"), "--scope", "prefix", "--max-pages", "2",
             "--user-agent", "First/1", delay="0.3"))
    saved = settings_of(folder)
    assert saved["scope"] == ["prefix"] and float(saved["delay"][0]) == 0.3
    assert saved["max_pages"] == ["2"] and saved["user_agent"] == ["First/1"]

    # Resume with only a new budget: delay, scope and user agent come from settings.txt.
    site.reset()
    ok(crawl(projects_dir, "p", "--max-pages", "4", delay=None))
    saved = settings_of(folder)
    assert saved["scope"] == ["prefix"] and float(saved["delay"][0]) == 0.3 and saved["max_pages"] == ["4"]
    times = [info.time for info in page_requests(site)]
    assert len(times) == 2 and times[1] - times[0] >= 0.25, times  # the saved 0.3 s gap is kept
    assert {r.headers["user-agent"] for r in site.requests} == {"First/1"}

    # Options given on resume override the saved ones and are saved; the rest stays.
    ok(crawl(projects_dir, "p", "--max-pages", "100", "--user-agent", "Second/2", delay="0"))
    saved = settings_of(folder)
    assert saved["scope"] == ["prefix"] and float(saved["delay"][0]) == 0.0
    assert saved["max_pages"] == ["100"] and saved["user_agent"] == ["Second/2"]
    assert site.requests and {r.headers["user-agent"] for r in site.requests} == {"First/1", "Second/2"}
    assert set(urls_in(folder / "crawled.txt")) == {site.url("/docs/")} | {site.url(f"/docs/d{i}.html") for i in range(4)}
    assert "/outside.html" not in page_hits(site)  # still refused by the saved prefix scope
    assert [site.url("/outside.html"), "scope"] in [f[:2] for f in data_lines(folder / "rejected.txt")]


def test_new_seed_on_resume_is_added(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body="home")
    site.route("/more.html", body=links("/more2.html"))
    site.route("/more2.html", body="leaf")
    ok(crawl(projects_dir, "p", site.url("/")))
    ok(crawl(projects_dir, "p", site.url("/more.html")))
    assert settings_of(projects_dir / "p")["seed"] == [site.url("/"), site.url("/more.html")]
    assert page_hits(site) == {"/": 1, "/more.html": 1, "/more2.html": 1}


# ------------------------------------------------------------------------------------ hand edits while stopped


def _five_leaves(site: TestSite) -> None:
    site.route("/", body=links(*(f"/leaf{i}.html" for i in range(5))))
    for i in range(5):
        site.route(f"/leaf{i}.html", body=f"leaf {i}")
    site.route("/extra.html", body="linked from nowhere")


def test_hand_edits_to_queue_and_crawled_while_stopped(
    projects_dir: Path, site: TestSite, make_site: Callable[..., TestSite]
) -> None:
    _five_leaves(site)
    other = make_site("127.0.0.2")
    other.route("/far.html", body="far")
    folder = projects_dir / "p"
    ok(crawl(projects_dir, "p", site.url("/"), "--max-pages", "2"))
    done = urls_in(folder / "crawled.txt")
    pending = urls_in(folder / "queue.txt")
    assert len(done) == 2 and len(pending) == 4

    deleted = pending[1]
    lines = ["# queue edited by hand\n", f"{pending[0]}\n", "this is not a url\n"]
    garbage_no = len(lines)
    lines += [f"{u}\n" for u in pending[2:]]
    lines += [f"{site.url('/extra.html')}\n", f"{other.url('/far.html')}\n", "\n"]
    (folder / "queue.txt").write_text("".join(lines))
    crawled_text = (folder / "crawled.txt").read_text()
    crawled_no = len(crawled_text.splitlines()) + 1
    (folder / "crawled.txt").write_text(crawled_text + "half a line of nonsense\n")

    result = ok(crawl(projects_dir, "p", "--max-pages", "100"))
    assert f"queue.txt:{garbage_no}" in result.stderr and "this is not a url" in result.stderr
    assert f"crawled.txt:{crawled_no}" in result.stderr and "half a line of nonsense" in result.stderr

    rejected = data_lines(folder / "rejected.txt")
    bad = [f for f in rejected if f[0] == "this is not a url"]
    assert len(bad) == 1 and bad[0][1].startswith(f"queue.txt:{garbage_no}")
    bad = [f for f in rejected if f[0] == "half a line of nonsense"]
    assert len(bad) == 1 and bad[0][1].startswith(f"crawled.txt:{crawled_no}")
    assert [other.url("/far.html"), "scope"] in [f[:2] for f in rejected]
    assert "half a line of nonsense" not in (folder / "crawled.txt").read_text()

    crawled = urls_in(folder / "crawled.txt")
    assert site.url("/extra.html") in crawled and page_hits(site)["/extra.html"] == 1
    assert deleted not in crawled + urls_in(folder / "failed.txt") + urls_in(folder / "queue.txt")
    assert page_hits(site)[deleted.replace(site.url(""), "/")] == 0
    assert other.hits == {}
    assert set(crawled) == set(done) | {site.url("/extra.html")} | (set(pending) - {deleted})
    assert set(page_hits(site).values()) == {1}


def test_garbage_line_in_crawled_txt_alone_is_reported(projects_dir: Path, site: TestSite) -> None:
    _five_leaves(site)
    folder = projects_dir / "p"
    ok(crawl(projects_dir, "p", site.url("/"), "--max-pages", "2"))
    text = (folder / "crawled.txt").read_text()
    line_no = len(text.splitlines()) + 1
    (folder / "crawled.txt").write_text(text + "garbage in crawled\n")
    result = ok(crawl(projects_dir, "p", "--max-pages", "3"))
    assert sum(page_hits(site).values()) == 3  # the budget of 3 real pages was used for real pages
    assert f"crawled.txt:{line_no}" in result.stderr
    assert ["garbage in crawled"] == [f[0] for f in data_lines(folder / "rejected.txt") if "garbage" in f[0]]
    assert "garbage in crawled" not in (folder / "crawled.txt").read_text()


def test_comment_and_blank_lines_are_ignored_everywhere(projects_dir: Path, site: TestSite) -> None:
    _five_leaves(site)
    site.route("/", body=links(*(f"/leaf{i}.html" for i in range(5)), "/missing.html"))
    folder = projects_dir / "p"
    ok(crawl(projects_dir, "p", site.url("/"), "--max-pages", "2"))
    pending_before = urls_in(folder / "queue.txt")
    noise = "\n# a note by hand\n   \n  # an indented note\n\t\n"
    for name in ("queue.txt", "crawled.txt", "failed.txt", "rejected.txt", "settings.txt"):
        with open(folder / name, "a", encoding="utf-8") as f:
            f.write(noise)
    assert status_numbers(ok(cli(projects_dir, "status", "p")).stdout)["pending"] == len(pending_before)

    result = ok(crawl(projects_dir, "p", "--max-pages", "100"))
    assert "warning" not in result.stderr and "queue.txt:" not in result.stderr
    assert data_lines(folder / "rejected.txt") == []  # no note was taken for a URL
    assert set(page_hits(site)) == {"/", "/missing.html"} | {f"/leaf{i}.html" for i in range(5)}
    assert set(page_hits(site).values()) == {1}
    assert len(urls_in(folder / "crawled.txt")) == 6 and urls_in(folder / "failed.txt") == [site.url("/missing.html")]


# ------------------------------------------------------------------------------------ admission rules


def test_scope_host_keeps_other_hosts_out(
    projects_dir: Path, site: TestSite, make_site: Callable[..., TestSite]
) -> None:
    other = make_site("127.0.0.2")
    for path in ("/", "/x.html", "/y.html"):
        other.route(path, body=links("/x.html", "/y.html"))
    site.route("/", body=links("/in.html", other.url("/"), other.url("/x.html"), "/to-other"))
    site.route("/in.html", body=links(other.url("/y.html")))
    site.add_redirect("/to-other", other.url("/x.html"))
    folder = projects_dir / "p"
    ok(crawl(projects_dir, "p", site.url("/"), "--scope", "host"))
    assert other.hits == {}
    assert page_hits(site) == {"/": 1, "/in.html": 1, "/to-other": 1}
    rejected = {f[0]: f for f in data_lines(folder / "rejected.txt")}
    for path in ("/", "/x.html", "/y.html"):
        assert rejected[other.url(path)][1] == "scope"
    assert rejected[other.url("/y.html")][2] == site.url("/in.html")
    assert all(not u.startswith(other.url("/")) for u in urls_in(folder / "crawled.txt") + urls_in(folder / "failed.txt"))


def test_two_seeds_on_two_hosts_are_both_in_scope(
    projects_dir: Path, site: TestSite, make_site: Callable[..., TestSite]
) -> None:
    other = make_site("127.0.0.2")
    site.route("/", body=links("/a.html"))
    site.route("/a.html", body="a")
    other.route("/", body=links("/b.html"))
    other.route("/b.html", body="b")
    ok(crawl(projects_dir, "p", site.url("/"), other.url("/")))
    assert page_hits(site) == {"/": 1, "/a.html": 1} and page_hits(other) == {"/": 1, "/b.html": 1}


def test_scope_prefix_keeps_the_crawl_under_the_start_folder(projects_dir: Path, site: TestSite) -> None:
    site.route("/docs/intro.html", body=links("a.html", "sub/b.html", "/other.html", "/docsx.html", "/", "../up.html"))
    site.route("/docs/a.html", body="a")
    site.route("/docs/sub/b.html", body=links("/docs/intro.html"))
    for path in ("/other.html", "/docsx.html", "/", "/up.html"):
        site.route(path, body="outside")
    folder = projects_dir / "p"
    ok(crawl(projects_dir, "p", site.url("/docs/intro.html"), "--scope", "prefix"))
    assert page_hits(site) == {"/docs/intro.html": 1, "/docs/a.html": 1, "/docs/sub/b.html": 1}
    reasons = {f[0]: f[1] for f in data_lines(folder / "rejected.txt")}
    assert {site.url(p): "scope" for p in ("/other.html", "/docsx.html", "/", "/up.html")}.items() <= reasons.items()


def test_deny(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body=links("/public/a.html", "/private/b.html", "/x?session=1"))
    site.route("/public/a.html", body=links("/private/c.html"))
    folder = projects_dir / "p"
    ok(crawl(projects_dir, "p", site.url("/"), "--deny", "/private/", "--deny", r"session=\d"))
    assert page_hits(site) == {"/": 1, "/public/a.html": 1}
    reasons = {f[0]: f[1:] for f in data_lines(folder / "rejected.txt")}
    assert reasons[site.url("/private/b.html")] == ["deny", site.url("/")]
    assert reasons[site.url("/private/c.html")] == ["deny", site.url("/public/a.html")]
    assert reasons[site.url("/x?session=1")][0] == "deny"
    assert settings_of(folder)["deny"] == ["/private/", r"session=\d"]


def test_allow(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body=links("/keep/a.html", "/drop/b.html", "/keep/c.html"))
    site.route("/keep/a.html", body=links("/drop/d.html"))
    site.route("/keep/c.html", body="c")
    folder = projects_dir / "p"
    ok(crawl(projects_dir, "p", site.url("/"), "--allow", "/keep/"))
    assert page_hits(site) == {"/": 1, "/keep/a.html": 1, "/keep/c.html": 1}  # the seed itself is always crawled
    reasons = {f[0]: f[1] for f in data_lines(folder / "rejected.txt")}
    assert reasons == {site.url("/drop/b.html"): "allow", site.url("/drop/d.html"): "allow"}


def test_max_depth_one(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body=links("/d1.html"))
    site.route("/d1.html", body=links("/d2.html", "/"))
    site.route("/d2.html", body=links("/d3.html"))
    folder = projects_dir / "p"
    ok(crawl(projects_dir, "p", site.url("/"), "--max-depth", "1"))
    assert page_hits(site) == {"/": 1, "/d1.html": 1}
    depths = {f[0]: f[4] for f in data_lines(folder / "crawled.txt")}
    assert depths == {site.url("/"): "0", site.url("/d1.html"): "1"}
    assert data_lines(folder / "rejected.txt") == [[site.url("/d2.html"), "depth", site.url("/d1.html")]]


def test_max_depth_zero_crawls_only_the_seed(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body=links("/d1.html"))
    ok(crawl(projects_dir, "p", site.url("/"), "--max-depth", "0"))
    assert page_hits(site) == {"/": 1}
    assert data_lines(projects_dir / "p" / "rejected.txt") == [[site.url("/d1.html"), "depth", site.url("/")]]


# ------------------------------------------------------------------------------------ one crawl at a time


def _slow_site(site: TestSite, seconds: float = 1.0) -> None:
    site.route("/", body=links("/s1", "/s2"))
    site.slow("/s1", seconds)
    site.slow("/s2", seconds)


def test_second_crawl_is_refused_while_one_runs(projects_dir: Path, site: TestSite) -> None:
    _slow_site(site)
    first = popen_crawl(projects_dir, "p", site.url("/"), "--workers", "2", "--delay", "1")
    try:
        wait_for(lambda: "/" in page_hits(site))
        second = crawl(projects_dir, "p", delay=None)
        line = assert_error_line(second)
        assert "already running" in line
        report = ok(cli(projects_dir, "status", "p")).stdout
        assert re.search(r"^running\s+yes", report, re.M), report
        out, err = first.communicate(timeout=TIMEOUT)
    finally:
        stop(first)
    assert first.returncode == 0, err
    assert "Traceback" not in out + err
    assert page_hits(site) == {"/": 1, "/s1": 1, "/s2": 1}  # the refused crawl fetched nothing
    report = ok(cli(projects_dir, "status", "p")).stdout
    assert re.search(r"^running\s+no\s*$", report, re.M), report


def test_refused_crawl_leaves_settings_alone(projects_dir: Path, site: TestSite) -> None:
    _slow_site(site)
    site.route("/new.html", body="new")
    first = popen_crawl(projects_dir, "p", site.url("/"), "--workers", "2", "--delay", "1")
    try:
        wait_for(lambda: "/" in page_hits(site))
        before = (projects_dir / "p" / "settings.txt").read_text()
        assert "already running" in assert_error_line(crawl(projects_dir, "p", site.url("/new.html"), delay="7"))
        after = (projects_dir / "p" / "settings.txt").read_text()
    finally:
        stop(first)
    assert after == before


# ------------------------------------------------------------------------------------ status


def test_status_counts_hosts_and_running(
    projects_dir: Path, site: TestSite, make_site: Callable[..., TestSite]
) -> None:
    other = make_site("127.0.0.2")
    site.route("/", body=links("/a.html", "/gone.html", "/moved", *(f"/p{i}.html" for i in range(6))))
    site.route("/a.html", body="a")
    site.add_redirect("/moved", "/a.html")
    for i in range(6):
        site.route(f"/p{i}.html", body="p")
    other.route("/", body=links("/b.html", "/nope.html"))
    other.route("/b.html", body="b")
    folder = projects_dir / "p"
    ok(crawl(projects_dir, "p", site.url("/"), other.url("/"), "--max-pages", "7", workers=1))

    report = ok(cli(projects_dir, "status", "p")).stdout
    numbers = status_numbers(report)
    assert numbers["pending"] == len(data_lines(folder / "queue.txt")) > 0
    assert numbers["in flight"] == 0
    assert numbers["crawled"] == len(pages(folder))
    assert numbers["failed"] == len(data_lines(folder / "failed.txt"))
    assert numbers["crawled"] + numbers["failed"] == 7
    assert re.search(r"^running\s+no\s*$", report, re.M)
    assert "p" in report.splitlines()[0]

    # The hosts table: one row per host with its crawled / failed / pending / in-flight counts.
    for host_site in (site, other):
        host = f"{host_site.host}:{host_site.port}"
        prefix = host_site.url("/")
        expect = [
            sum(1 for f in pages(folder) if f[0].startswith(prefix)),
            sum(1 for u in urls_in(folder / "failed.txt") if u.startswith(prefix)),
            sum(1 for u in urls_in(folder / "queue.txt") if u.startswith(prefix)),
            0,
        ]
        row = [line for line in report.splitlines() if line.split()[:1] == [host]]
        assert len(row) == 1, report
        assert [int(x) for x in row[0].split()[1:5]] == expect, (row, expect)

    # After the crawl is finished the numbers follow.
    ok(crawl(projects_dir, "p", "--max-pages", "100"))
    numbers = status_numbers(ok(cli(projects_dir, "status", "p")).stdout)
    assert numbers["pending"] == 0 and numbers["in flight"] == 0
    assert numbers["crawled"] == len(pages(folder)) == 10  # /, a, p0-p5 here; / and b on the other host
    assert numbers["failed"] == len(data_lines(folder / "failed.txt")) == 2


def test_status_while_running_matches_the_files(projects_dir: Path, site: TestSite) -> None:
    _slow_site(site, 1.5)
    folder = projects_dir / "p"
    first = popen_crawl(projects_dir, "p", site.url("/"), "--workers", "2", "--delay", "0")
    try:
        wait_for(lambda: "/s1" in page_hits(site) or "/s2" in page_hits(site))
        before = data_lines(folder / "crawled.txt")
        report = ok(cli(projects_dir, "status", "p")).stdout
        after = data_lines(folder / "crawled.txt")
        first.communicate(timeout=TIMEOUT)
    finally:
        stop(first)
    assert [f[:7] for f in before] == [f[:7] for f in after] == [
        [site.url("/"), "200", "text/html", str(len(links("/s1", "/s2"))), "0", before[0][5], "-"]]
    assert before == after
    assert re.search(r"^running\s+yes", report, re.M)
    numbers = status_numbers(report)
    assert numbers["crawled"] == 1, report
    assert numbers["in flight"] == 2 and numbers["pending"] == 0, report
    # the ratio uses the live counts too (stats.txt's last row can be a second older): 2 new URLs
    # (/s1, /s2) for 1 page fetched (the seed was not found on a page)
    assert "discovery 2.00 new URLs per fetched page overall" in report, report


def test_workers_fetch_in_parallel(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body=links(*(f"/s{i}" for i in range(4))))
    for i in range(4):
        site.slow(f"/s{i}", 0.4)
    ok(crawl(projects_dir, "p", site.url("/"), workers=2))
    starts = sorted(info.time for info in site.requests if info.path.startswith("/s"))
    assert len(starts) == 4
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert min(gaps) < 0.2, f"no two slow pages were requested together: gaps {gaps}"


# ------------------------------------------------------------------------------------ demo


def _demo_paths(folder: Path) -> tuple[str, dict[str, list[str]], dict[str, list[str]]]:
    origin = settings_of(folder)["seed"][0].rstrip("/")
    crawled = {f[0]: f for f in data_lines(folder / "crawled.txt")}
    failed = {f[0]: f for f in data_lines(folder / "failed.txt")}
    for url in list(crawled) + list(failed):
        assert url.startswith(origin + "/"), f"crawled a URL outside the demo site: {url}"
    return origin, {u[len(origin):]: f for u, f in crawled.items()}, {u[len(origin):]: f for u, f in failed.items()}


def test_demo_crawls_the_demo_site_twice(projects_dir: Path) -> None:
    from spider.demo import SITE_DIR

    html_files = sorted("/" + p.relative_to(SITE_DIR).as_posix() for p in SITE_DIR.rglob("*.html"))
    assert len(html_files) == DEMO_HTML_PAGES
    folder = projects_dir / "demo"
    seen = []
    for _ in range(2):
        started = time.monotonic()
        result = cli(projects_dir, "demo", "--workers", "2")
        assert result.returncode == 0, result.stderr
        assert time.monotonic() - started < TIMEOUT
        assert "serving the demo site at http://127.0.0.1:" in result.stderr
        assert settings_of(folder)["demo"] == ["True"]
        origin, crawled, failed = _demo_paths(folder)
        assert origin + "/" in result.stderr

        ok_pages = {p for p, f in crawled.items() if f[1] == "200"}
        for path in html_files:
            if path.startswith("/private/"):
                continue  # robots.txt territory
            folder_form = path[: -len("index.html")] if path.endswith("/index.html") else None
            assert path in ok_pages or folder_form in ok_pages, f"{path} not crawled"
        assert not set(DEMO_DISALLOWED) & set(crawled), "robots.txt says Disallow: /private/"
        assert DEMO_ONLY_VIA_BASE in ok_pages and "/guides/bold-jumper.html" not in crawled | failed
        assert {"/files/checklist.txt", "/img/orb-web.svg", "/img/spider-icon.png"} <= ok_pages
        for path in DEMO_BROKEN:
            assert failed[path][1] == "404", path
        for path, (code, location) in DEMO_REDIRECTS.items():
            assert crawled[path][1] == str(code) and crawled[path][6] == origin + location, path
        rejected = {f[0]: f[1] for f in data_lines(folder / "rejected.txt")}
        assert {url: "scope" for url in DEMO_EXTERNAL}.items() <= rejected.items()
        assert urls_in(folder / "queue.txt") == [] and data_lines(folder / "claims.txt") == []
        seen.append((set(crawled), set(failed)))
    assert seen[0] == seen[1]  # the second run starts afresh and finds the same site


def test_demo_refuses_a_folder_that_is_not_a_demo(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body="mine")
    ok(crawl(projects_dir, "demo", site.url("/")))
    before = (projects_dir / "demo" / "crawled.txt").read_text()
    line = assert_error_line(cli(projects_dir, "demo"))
    assert "not a demo" in line
    assert (projects_dir / "demo" / "crawled.txt").read_text() == before
    assert page_hits(site) == {"/": 1}


def test_crawl_honours_robots_txt(projects_dir: Path, demo_url: str) -> None:
    ok(crawl(projects_dir, "p", demo_url))
    folder = projects_dir / "p"
    crawled = urls_in(folder / "crawled.txt")
    assert len(crawled) > 20  # the crawl itself worked
    origin = demo_url.rstrip("/")
    disallowed = {origin + p for p in DEMO_DISALLOWED}
    assert not disallowed & set(crawled + urls_in(folder / "failed.txt"))
    reasons = {f[0]: f[1] for f in data_lines(folder / "rejected.txt")}
    assert {url: "robots" for url in disallowed}.items() <= reasons.items()


def test_a_start_url_nobody_answers_is_said_within_seconds(projects_dir: Path) -> None:
    """A wrong port used to look like a crawl doing nothing for ten minutes (robots.txt is retried
    every 5 minutes): the parent says why the host's URLs wait as soon as it is known."""
    import signal
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()   # nothing listens there now
    proc = popen_crawl(projects_dir, "p", f"http://127.0.0.1:{port}/", "--workers", "1", "--delay", "0",
                       "--connect-timeout", "0.5")
    try:
        time.sleep(6)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        stop(proc)
    assert re.search(rf"^note: 127\.0\.0\.1:{port}: robots\.txt unavailable; its URLs wait until "
                     r"\d\d:\d\d:\d\d UTC; --ignore-robots skips it", err, re.M), err
    assert err.count("robots.txt unavailable;") == 1, err   # said once, not every sample


def test_a_run_that_crawled_nothing_says_why(projects_dir: Path) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    result = ok(cli(projects_dir, "crawl", "p", f"http://127.0.0.1:{port}/", "--ignore-robots",
                    "--max-attempts", "1", "--delay", "0", "--workers", "1"))
    assert re.search(r"^nothing crawled; failed: connection refused \(1\); see failed\.txt$",
                     result.stderr, re.M), result.stderr


def test_held_hosts_are_said_once_each_and_not_by_the_thousand(tmp_path: Path) -> None:
    import io

    from spider.config import CrawlConfig
    from spider.crawl import MAX_WARNINGS, Crawl

    class Held:
        def __init__(self, n: int) -> None:
            self.n = n

        def held_hosts(self, now: float) -> list[tuple[str, str, float]]:
            return [(f"h{i}.test", "retry-after 503", now + 60) for i in range(self.n)]

    out = io.StringIO()
    c = Crawl(tmp_path, CrawlConfig(seeds=("http://h0.test/",)), out=out)
    c._tell_held_hosts(Held(3))   # type: ignore[arg-type]
    c._tell_held_hosts(Held(3))   # type: ignore[arg-type]
    assert out.getvalue().count("retry-after 503; its URLs wait until") == 3
    c._tell_held_hosts(Held(500))   # type: ignore[arg-type]
    text = out.getvalue()
    assert text.count("retry-after 503; its URLs wait until") == MAX_WARNINGS
    assert text.count("more hosts are held back") == 1
