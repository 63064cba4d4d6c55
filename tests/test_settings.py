"""Settings, options, user regular expressions and scope (issue 13, items 5, 9, 10 and weak
points): one validation for the command line and settings.txt, no traceback for any line of
settings.txt, RE2 for user patterns, the port in the scope, internal errors never failing a URL.

Crawls run as a user runs them: ``python main.py ...`` subprocesses against loopback sites.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from sitekit import TestSite
from test_hostile import MAIN, cli as hostile_cli, html, one_error, page_hits, rows, urls_in
from spider import config
from spider.config import NUMBERS, CrawlConfig
from spider.order import Order
from spider.scope import Admission, Scope, same_site_host

TIMEOUT = 60   # generous: a hang is a failure, not a slow run


def cli(projects: Path, *args: str, prefix: list[str] | None = None) -> subprocess.CompletedProcess:
    """``python main.py ARGS --projects-dir PROJECTS`` (see test_hostile.cli), a minute at most."""
    return hostile_cli(projects, *args, timeout=TIMEOUT, argv0=prefix)


def usage_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, f"exit {result.returncode}\n{result.stderr[-3000:]}"
    assert "Usage:" in result.stderr
    return result.stderr


FAST = ("--workers", "1", "--delay", "0", "--connect-timeout", "1", "--read-timeout", "2", "--max-time", "5")


# =========================================================================== item 5: timeouts, internal errors


@pytest.mark.parametrize("option", ["--max-time", "--connect-timeout", "--read-timeout"])
def test_huge_timeouts_are_refused_before_anything_is_fetched(projects_dir: Path, site: TestSite, option: str) -> None:
    # --max-time 1e10 was accepted, and every URL, seeds included, failed as 'internal error:
    # OverflowError', never to be queued again.
    site.route("/", body=html())
    assert option[2:].replace("-", "_") in usage_error(
        cli(projects_dir, "crawl", "p", site.url("/"), "--workers", "1", option, "1e10"))
    assert site.hits == {} and list(projects_dir.iterdir()) == []


def test_the_largest_timeouts_allowed_still_crawl(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body=html("/a"))
    site.route("/a", body=html())
    hi = {name: f"{NUMBERS[name].hi:g}" for name in ("connect_timeout", "read_timeout", "max_time")}
    r = cli(projects_dir, "crawl", "p", site.url("/"), "--workers", "1", "--delay", "0",
            "--connect-timeout", hi["connect_timeout"], "--read-timeout", hi["read_timeout"],
            "--max-time", hi["max_time"], "--max-delay", f"{NUMBERS['max_delay'].hi:g}",
            "--recrawl-max", f"{NUMBERS['recrawl_max'].hi:g}")
    assert r.returncode == 0, r.stderr
    assert sorted(urls_in(projects_dir / "p" / "crawled.txt")) == [site.url("/"), site.url("/a")]
    assert rows(projects_dir / "p" / "failed.txt") == []


BUGGY = textwrap.dedent("""
    # main.py with a bug planted in the page parser: a page whose body holds BOOM raises, the
    # first BOOM_TIMES times over all processes (counted in the file BOOM_COUNT).
    import os, runpy, sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))   # the spider beside main.py
    import spider.links as links

    original = links.LinkFinder.parse

    def parse(self, body, *args, **kwargs):
        if b"BOOM" in body:
            with open(os.environ["BOOM_COUNT"], "a") as f:
                f.write("x")
            if os.path.getsize(os.environ["BOOM_COUNT"]) <= int(os.environ["BOOM_TIMES"]):
                raise RuntimeError("planted bug")
        return original(self, body, *args, **kwargs)

    links.LinkFinder.parse = parse
    sys.argv = [sys.argv[0]] + sys.argv[1:]
    runpy.run_path(sys.argv.pop(1), run_name="__main__")
""")


def buggy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, times: int) -> list[str]:
    """The command line of main.py with the planted bug (see BUGGY)."""
    script = tmp_path / "buggy_main.py"
    script.write_text(BUGGY)
    monkeypatch.setenv("BOOM_COUNT", str(tmp_path / "boom.count"))
    monkeypatch.setenv("BOOM_TIMES", str(times))
    return [sys.executable, str(script), MAIN]


def test_an_internal_error_is_retried_not_failed(projects_dir: Path, site: TestSite, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # An internal error failed the URL for good ('internal error: RuntimeError').
    site.route("/", body=html("/boom", "/fine"))
    site.route("/boom", body="<html><body>BOOM <a href='/after'>after</a></body></html>")
    site.route("/fine", body=html())
    site.route("/after", body=html())
    prefix = buggy(tmp_path, monkeypatch, times=2)   # --max-attempts is 3
    r = cli(projects_dir, "crawl", "p", site.url("/"), *FAST, prefix=prefix)
    folder = projects_dir / "p"
    assert r.returncode == 0, r.stderr
    assert rows(folder / "failed.txt") == []
    assert sorted(urls_in(folder / "crawled.txt")) == sorted(site.url(p) for p in ("/", "/boom", "/fine", "/after"))
    assert "internal error (RuntimeError)" in r.stderr and "errors.log" in r.stderr
    assert (folder / "errors.log").read_text().count("RuntimeError: planted bug") == 2


def test_an_internal_error_every_time_leaves_the_url_pending_and_says_so(
        projects_dir: Path, site: TestSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site.route("/", body=html("/boom"))
    site.route("/boom", body="<html><body>BOOM</body></html>")
    prefix = buggy(tmp_path, monkeypatch, times=10**6)
    r = cli(projects_dir, "crawl", "p", site.url("/"), *FAST, prefix=prefix)
    folder = projects_dir / "p"
    assert r.returncode == 1 and "workers keep dying" in r.stderr and "see errors.log" in r.stderr, r.stderr
    assert rows(folder / "failed.txt") == []
    assert urls_in(folder / "crawled.txt") == [site.url("/")]
    assert site.url("/boom") in urls_in(folder / "queue.txt")   # pending: a fixed version resumes it
    status = cli(projects_dir, "status", "p")
    assert status.returncode == 0 and "pending" in status.stdout


# =========================================================================== item 9: one validation


@pytest.mark.parametrize("line, says", [
    ("workers = 300", "workers must be a whole number from 1 to 256"),
    ("workers = 100000", "workers must be"),
    ("max_time = 1e10", "max_time must be"),
    ("connect_timeout = 1e10", "connect_timeout must be"),
    ("delay = -1", "delay must be"),
    ("max_bytes = 1e3", "max_bytes must be a whole number"),
    ("ignore_robots = perhaps", "ignore_robots must be true or false"),
    ("any_port = 2", "any_port must be true or false"),
])
def test_settings_txt_has_the_command_lines_limits(projects_dir: Path, site: TestSite, line: str, says: str) -> None:
    # workers = 300 in settings.txt started ~90 processes and took 54 s for one page.
    site.route("/", body=html())
    folder = projects_dir / "p"
    folder.mkdir()
    text = f"seed = {site.url('/')}\n{line}\n"
    (folder / "settings.txt").write_text(text)
    error = one_error(cli(projects_dir, "crawl", "p"))
    assert f"settings.txt:2: {says}" in error
    assert site.hits == {} and (folder / "settings.txt").read_text() == text


def test_options_and_settings_share_one_table() -> None:
    for name, limit in NUMBERS.items():
        assert name in {f.name for f in fields(CrawlConfig)}
        too_big = str(limit.hi * 10 + 1)
        with pytest.raises(ValueError, match=name):
            config.parse(name, too_big)
        assert config.parse(name, str(int(limit.hi)) if limit.kind is int else repr(float(limit.hi))) == limit.hi
        default = getattr(CrawlConfig(), name)
        if default is not None:
            config.check_value(name, default)


# =========================================================================== item 10: any line of settings.txt

KEYS = sorted({f.name for f in fields(CrawlConfig)} | {"seed", "trap"})
GARBAGE = ["", "x", "-1", "0", "1e400", "nan", "inf", "-inf", "999999999999999999999", "((", "(?=x)", "(a)\\1",
           "true", "none", "http://", "=", "a=b", "1.5", "\u00e9", "http://127.0.0.1:0/", "www.x"]


@pytest.mark.parametrize("key", KEYS)
def test_every_key_with_garbage_is_a_clear_error_or_a_working_setting(tmp_path: Path, key: str) -> None:
    for value in GARBAGE:
        _load_and_use(tmp_path, key, value)


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(KEYS + ["discover", "sitemaps", "Seed", "max-pages", "scope "]),
       value=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
                     max_size=30))
def test_any_line_of_settings_txt_is_a_clear_error_or_a_working_setting(tmp_path: Path, key: str, value: str) -> None:
    _load_and_use(tmp_path, key, value)


def _load_and_use(folder: Path, key: str, value: str) -> None:
    """settings.txt with a seed and ``key = value``: either ValueError naming the file, or settings
    the crawl can build everything from."""
    (folder / "settings.txt").write_text(f"seed = http://127.0.0.1:8/\n{key} = {value}\n", encoding="utf-8")
    try:
        saved = config.load(folder)
        cfg = config.build(saved, {})
    except ValueError as e:
        message = str(e)
        assert "\n" not in message and message, (key, value)
        return
    Admission(cfg).check("http://127.0.0.1:8/a", 1)
    Order(cfg.order, cfg.prefer, cfg.defer).score("http://127.0.0.1:8/a", 1)
    config.save(folder, cfg)
    assert config.build(config.load(folder), {}) == cfg   # what is saved reads back the same


def test_discover_in_settings_txt_is_one_clear_error(projects_dir: Path) -> None:
    # discover = x printed a traceback (discover is an option of one run, never saved).
    folder = projects_dir / "p"
    folder.mkdir()
    (folder / "settings.txt").write_text("seed = http://127.0.0.1:9/\ndiscover = x\n")
    error = one_error(cli(projects_dir, "crawl", "p"))
    assert "settings.txt:2: discover is an option of one run" in error


# =========================================================================== empty values


def test_empty_projects_dir_is_refused(tmp_path: Path) -> None:
    # --projects-dir '' put the project in the current folder.
    work = tmp_path / "work"
    work.mkdir()
    r = subprocess.run([sys.executable, MAIN, "crawl", "p", "http://127.0.0.1:9/", "--projects-dir", ""],
                       cwd=work, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 2 and "--projects-dir" in r.stderr and "must not be empty" in r.stderr, r.stderr
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("option", ["--deny", "--allow", "--prefer", "--defer", "--discover"])
def test_empty_pattern_options_are_refused(projects_dir: Path, option: str) -> None:
    assert "empty pattern matches every URL" in one_error(cli(projects_dir, "crawl", "p", "http://127.0.0.1:9/",
                                                              option, ""))
    assert list(projects_dir.iterdir()) == []


def _stopped_after_one_page(projects_dir: Path, site: TestSite) -> Path:
    site.route("/", body=html(*(f"/p{i}" for i in range(5))))
    for i in range(5):
        site.route(f"/p{i}", body=html())
    r = cli(projects_dir, "crawl", "p", site.url("/"), "--max-pages", "1", *FAST)
    assert r.returncode == 0, r.stderr
    return projects_dir / "p"


@pytest.mark.parametrize("key", ["deny", "allow", "prefer", "defer"])
def test_empty_pattern_in_settings_txt_is_refused_and_the_queue_kept(projects_dir: Path, site: TestSite,
                                                                      key: str) -> None:
    # deny = (empty) moved the whole queue to rejected.txt: an empty regex matches everything.
    folder = _stopped_after_one_page(projects_dir, site)
    queue = (folder / "queue.txt").read_text()
    with open(folder / "settings.txt", "a") as f:
        f.write(f"{key} =\n")
    assert "empty pattern matches every URL" in one_error(cli(projects_dir, "crawl", "p"))
    assert (folder / "queue.txt").read_text() == queue
    assert urls_in(folder / "rejected.txt") == []


# =========================================================================== user patterns: RE2


def test_a_catastrophic_pattern_does_not_hang_the_crawl(projects_dir: Path, site: TestSite) -> None:
    # (a+)+$ against 40 a's and a '!' pinned a worker at 100 % for good with Python's re.
    evil = "/" + "a" * 40 + "!"
    site.route("/", body=html(evil, "/aaa"))
    site.route(evil, body=html())
    site.route("/aaa", body=html())
    r = cli(projects_dir, "crawl", "p", site.url("/"), *FAST, "--deny", "(a+)+$", "--prefer", "(a+)+$",
            "--order", "best")
    assert r.returncode == 0, r.stderr
    folder = projects_dir / "p"
    assert site.url(evil) in urls_in(folder / "crawled.txt")   # no match: followed
    assert [row[:2] for row in rows(folder / "rejected.txt")] == [[site.url("/aaa"), "deny"]]


@pytest.mark.parametrize("pattern", ["(a)\\1", "(?=x)y", "(?<!x)y", "a{1001}", "["])
def test_a_pattern_re2_cannot_compile_is_refused_on_creation_and_on_resume(projects_dir: Path, site: TestSite,
                                                                            pattern: str) -> None:
    assert "bad regular expression" in one_error(cli(projects_dir, "crawl", "new", site.url("/"), "--deny", pattern))
    assert list(projects_dir.iterdir()) == []
    folder = _stopped_after_one_page(projects_dir, site)
    with open(folder / "settings.txt", "a") as f:
        f.write(f"allow = {pattern}\n")
    hits = page_hits(site)
    assert "bad regular expression" in one_error(cli(projects_dir, "crawl", "p"))
    assert page_hits(site) == hits


def test_every_user_pattern_is_compiled_by_re2() -> None:
    cfg = CrawlConfig(seeds=("http://a.test/",), allow=("a",), deny=("b",), prefer=("c",), defer=("d",), order="best")
    admission, order = Admission(cfg), Order(cfg.order, cfg.prefer, cfg.defer)
    for p in admission.allow + admission.deny + list(order._prefer) + list(order._defer):
        assert type(p._compiled).__module__.startswith("re2"), type(p)   # compile_pattern's own type
    assert pickle.loads(pickle.dumps(order))._prefer[0].search("xc")


SAME_IN_BOTH = ["a", "^http://", r"\.pdf$", "/p[0-9]+/", "(a+)+$", r"(?i)PRIVATE", "x|y", r"\bword\b", "^[^?]*$",
                r"é", "a{2,3}", r"\?(.*&)?sort="]


@hsettings(max_examples=200, deadline=None)
@given(pattern=st.sampled_from(SAME_IN_BOTH),
       text=st.text(st.sampled_from(list("ax/.?&=0123456789pdfsortPRIVATEwordé! ")), max_size=40))
def test_re2_matches_as_python_re_does_for_the_syntax_they_share(pattern: str, text: str) -> None:
    import re

    from spider.patterns import compile_pattern

    if pattern == "(a+)+$" and len(text) > 20:
        text = text[:20]   # Python's re only: it backtracks exponentially on this one
    assert compile_pattern(pattern).search(text) is (re.search(pattern, text) is not None)


# =========================================================================== scope: ports and IP hosts


def test_scope_keeps_to_the_seeds_port_and_www_is_no_alias_of_an_ip(projects_dir: Path, site: TestSite,
                                                                   make_site: Any) -> None:
    # Any port of the seed host was in scope (a page could make the crawler knock on every port),
    # port 0 was accepted, and www.127.0.0.1 counted as 127.0.0.1.
    other = make_site()   # 127.0.0.1, another port
    other.route("/o", body=html())
    www = f"http://www.127.0.0.1:{site.port}/w"
    site.route("/", body=html(other.url("/o"), www, "http://127.0.0.1:0/zero", f"http://127.0.0.1:{site.port}/same"))
    site.route("/same", body=html())
    r = cli(projects_dir, "crawl", "p", site.url("/"), *FAST)
    assert r.returncode == 0, r.stderr
    folder = projects_dir / "p"
    assert sorted(urls_in(folder / "crawled.txt")) == [site.url("/"), site.url("/same")]
    assert sorted(row[:2] for row in rows(folder / "rejected.txt")) == [[other.url("/o"), "scope"]]
    assert page_hits(other) == {}
    everything = "".join(p.read_text() for p in folder.glob("*.txt"))
    assert ":0/zero" not in everything   # an invalid URL: not even a refusal
    # www.127.0.0.1 is no URL for a browser (a last label that is a number must make an IPv4
    # address): never requested; scope.py's rule for IP hosts is in test_scope_table
    assert "www.127.0.0.1" not in everything


def test_any_port_widens_the_scope_and_is_saved(projects_dir: Path, site: TestSite, make_site: Any) -> None:
    other = make_site()
    other.route("/o", body=html())
    site.route("/", body=html(other.url("/o")))
    r = cli(projects_dir, "crawl", "p", site.url("/"), *FAST, "--any-port")
    assert r.returncode == 0, r.stderr
    folder = projects_dir / "p"
    assert sorted(urls_in(folder / "crawled.txt")) == sorted([site.url("/"), other.url("/o")])
    assert "any_port = True" in (folder / "settings.txt").read_text()


def test_a_changed_any_port_changes_the_settings_fingerprint() -> None:
    # the fingerprint decides whether the queue is checked again on resume
    assert CrawlConfig(any_port=True).key() != CrawlConfig().key()


@pytest.mark.parametrize("seed, url, mode, inside, with_any_port", [
    ("http://a.test/", "https://a.test/x", "host", True, True),         # http and https, default ports: one origin
    ("http://a.test/", "http://a.test:443/x", "host", True, True),      # 80 and 443 count as no port
    ("http://a.test/", "http://a.test:8080/x", "host", False, True),
    ("http://a.test:8080/", "https://www.a.test:8080/x", "host", True, True),
    ("http://a.test:8080/", "http://a.test/x", "host", False, True),
    ("http://a.test/", "http://b.a.test:81/x", "domain", False, True),
    ("http://a.test/", "http://b.a.test/x", "domain", True, True),
    ("http://a.test/docs/", "http://a.test:81/docs/x", "prefix", False, True),
    ("http://a.test/docs/", "https://a.test/docs/x", "prefix", True, True),
    ("http://127.0.0.1/", "http://www.127.0.0.1/x", "host", False, False),
    ("http://www.127.0.0.1/", "http://127.0.0.1/x", "host", False, False),
    ("http://[::1]:8000/", "http://[::1]:8000/x", "host", True, True),
    ("http://[::1]:8000/", "http://[::1]:8001/x", "host", False, True),
])
def test_scope_table(seed: str, url: str, mode: str, inside: bool, with_any_port: bool) -> None:
    assert Scope(mode, (seed,)).allows(url) is inside
    assert Scope(mode, (seed,), any_port=True).allows(url) is with_any_port


def test_www_is_stripped_from_names_not_from_ip_addresses() -> None:
    assert same_site_host("www.example.com") == "example.com"
    assert same_site_host("www.127.0.0.1") == "www.127.0.0.1"
    assert same_site_host("www.com") == "www.com"


# =========================================================================== seeds saved in an older spelling


def test_a_seed_saved_in_an_older_spelling_is_read_in_todays(tmp_path: Path) -> None:
    # Seeds used to be normalised by RFC 3986 rules (e.g. a ``%7E`` kept, a default port kept by
    # hand edits); the WHATWG rules spell some differently. A project saved then must still resume.
    (tmp_path / config.SETTINGS).write_text("seed = HTTP://Example.COM:80/a/../b/%7Ex\n", encoding="utf-8")
    assert config.load(tmp_path)["seeds"] == ("http://example.com/b/~x",)
    (tmp_path / config.SETTINGS).write_text("seed = ftp://example.com/\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"settings.txt:1: bad seed 'ftp://example.com/'"):
        config.load(tmp_path)


def test_a_project_whose_seed_is_in_an_older_spelling_resumes(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body=html("/a"))
    site.route("/a", body=html())
    assert cli(projects_dir, "crawl", "p", site.url("/"), *FAST).returncode == 0
    settings = projects_dir / "p" / config.SETTINGS
    text = settings.read_text(encoding="utf-8")
    old = site.url("/").replace("http://", "HTTP://") + "./"
    settings.write_text(text.replace(f"seed = {site.url('/')}", f"seed = {old}"), encoding="utf-8")
    r = cli(projects_dir, "crawl", "p", *FAST)
    assert r.returncode == 0, r.stderr
    assert sorted(urls_in(projects_dir / "p" / "crawled.txt")) == [site.url("/"), site.url("/a")]
