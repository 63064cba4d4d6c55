"""The hostile-input catalogue: what spider does with servers, URLs, files and arguments that are
broken or malicious. Every case ends in a clear message or a recorded reason, never a traceback,
a hang or a lost URL; each test below is one row (or a few) of the catalogue in README.md.

Three kinds of tests, as elsewhere in the suite:

- the worker (``spider.spider.Spider``) on a ``MemoryStore`` with a fake clock, against loopback
  ``TestSite`` endpoints that misbehave: fast, and retries scheduled seconds ahead come due at once;
- ``FileStore`` / ``recover`` in-process, for what the files themselves may contain;
- real crawls, ``python main.py crawl ...`` as a subprocess (its process group is killed if it
  outlives a timeout, so a wedged crawl fails the test instead of hanging the suite).

Only 127.0.0.0/8 is ever contacted. The bugs this catalogue found (at 601d7a2 and f78bc73) are
fixed; their tests assert the fixed behaviour and say in a comment what happened before. A bug
found later belongs here as ``xfail(strict=True)`` with the bug in the reason.
"""

from __future__ import annotations

import errno
import itertools
import os
import random
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

from sitekit import TestSite
from conftest import FakeClock, run_until_done as run
from spider.config import CrawlConfig
from spider.frontier.memory import MemoryStore
from spider.records import QueueEntry, crawled_line, is_data, parse_queue_line
from spider.robots import MAX_BODY as ROBOTS_MAX_BODY, cache_name
from spider.scope import MAX_URL_LENGTH
from spider.spider import Spider
from spider.frontier.contract import StoreError
from spider.frontier.files import CRAWLED, QUEUE, REJECTED, FileStore
from spider.frontier.recovery import recover
from spider.urls import host_key, normalize

MAIN = str(Path(__file__).resolve().parent.parent / "main.py")
TIMEOUT = 30          # no crawl subprocess here may take longer (most take well under a second)
T0 = 1_700_000_000.0
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
FAST = ("--connect-timeout", "1", "--read-timeout", "1", "--max-time", "2")


# =========================================================================== helpers: the worker


Worker = Callable[..., "tuple[Spider, MemoryStore, FakeClock]"]


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    """Factory: ``worker(*seeds, obey_robots=False, **config)`` -> (spider, store, clock), seeds
    queued. Small limits: 1 s timeouts, 2 s per response, 256 KiB per body."""
    spiders: list[Spider] = []

    def factory(*seeds: str, obey_robots: bool = False, **kw) -> tuple[Spider, MemoryStore, FakeClock]:
        store = MemoryStore()
        folder = tmp_path / f"worker{len(spiders)}"
        folder.mkdir()
        store.folder = folder  # type: ignore[attr-defined]  # where robots/ goes
        values: dict[str, Any] = dict(seeds=seeds, workers=1, delay=0.0, max_depth=5, connect_timeout=1.0,
                                      read_timeout=1.0, max_time=2.0, max_bytes=256 * 1024,
                                      ignore_robots=not obey_robots)
        values.update(kw)
        clock = FakeClock()
        spider = Spider(CrawlConfig(**values), store, clock=clock, wait=clock.wait)
        spiders.append(spider)
        store.add(QueueEntry(s) for s in seeds)
        return spider, store, clock

    yield factory
    for s in spiders:
        s.close()


def fields(line: str) -> list[str]:
    assert line.endswith("\n") and line.count("\n") == 1, repr(line[:200])
    return line[:-1].split("\t")


def crawled(store: MemoryStore) -> dict[str, list[str]]:
    """url -> status, content type, bytes, depth, fetched_at, final URL."""
    out = {}
    for line in store.crawled:
        f = fields(line)
        assert len(f) in (7, 11), f   # HTML pages add hash, canonical, outlinks, title
        out[f[0]] = f[1:7]
    return out


def failed(store: MemoryStore) -> dict[str, list[str]]:
    """url -> reason, depth, fetched_at (content type, bytes and source follow on the crawler's lines)."""
    out = {}
    for line in store.failed:
        f = fields(line)
        assert len(f) in (4, 7), f
        out[f[0]] = f[1:4]
    return out


def rejected(store: MemoryStore) -> list[list[str]]:
    rows = [fields(line) for text in store.logs.get("rejected", []) for line in text.splitlines(True)]
    assert all(len(r) == 3 for r in rows), rows
    return rows


def reason(store: MemoryStore, url: str) -> str:
    return failed(store)[url][0]


def no_internal_errors(store: MemoryStore) -> None:
    assert "errors" not in store.logs, "".join(store.logs["errors"])[:2000]
    assert not any("internal error" in line for line in store.failed), store.failed


def html(*hrefs: str, head: str = "") -> str:
    items = "".join(f'<a href="{h}">{h}</a>\n' for h in hrefs)
    return f"<!DOCTYPE html><html><head>{head}</head><body>{items}</body></html>"


def raw_response(data: bytes, close: bool = True):  # type: ignore[no-untyped-def]
    """A raw route handler that writes ``data`` verbatim (status line and headers included)."""
    def handler(req, info) -> None:  # type: ignore[no-untyped-def]
        req.wfile.write(data)
        req.close_connection = close
    return handler


def closed_port(host: str = "127.0.0.1") -> int:
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


# =========================================================================== helpers: real crawls


def cli(projects: Path, *args: str, timeout: float = TIMEOUT, traceback_ok: bool = False,
        cwd: Optional[Path] = None, argv0: Optional[list[str]] = None) -> subprocess.CompletedProcess:
    """``python main.py ARGS --projects-dir PROJECTS`` in its own process group, killed (and the
    test failed) if it outlives ``timeout``; no traceback allowed unless ``traceback_ok``."""
    cmd = [*(argv0 or [sys.executable, MAIN]), *args, "--projects-dir", str(projects)]
    proc = subprocess.Popen(cmd, cwd=cwd or projects.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=10)
        pytest.fail(f"{' '.join(args)[:200]} did not finish within {timeout} s; stderr:\n{err[-2000:]}")
    if not traceback_ok:
        assert "Traceback" not in out + err, err[-3000:]
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def crawl(projects: Path, name: str, *args: str, workers: int = 1, ok: bool = True, **kw) -> subprocess.CompletedProcess:
    result = cli(projects, "crawl", name, *args, "--workers", str(workers), "--delay", "0", *FAST, **kw)
    if ok:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Error: ")]


def one_error(result: subprocess.CompletedProcess, code: int = 1) -> str:
    """Exit ``code`` and exactly one non-blank stderr line, ``Error: ...``; returns it."""
    assert result.returncode == code, f"exit {result.returncode}\n{result.stderr[-3000:]}"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr[-3000:]
    return lines[0]


def rows(path: Path) -> list[list[str]]:
    """Data lines of a state file split on TAB, reading lines exactly as the crawler does."""
    if not path.exists():
        return []
    with open(path, encoding="utf-8", newline="") as f:
        return [line.rstrip("\n").split("\t") for line in f if is_data(line)]


def urls_in(path: Path) -> list[str]:
    return [r[0] for r in rows(path)]


FIELD_COUNTS = {"queue.txt": (5, 5), "crawled.txt": (7, 11), "failed.txt": (4, 7), "rejected.txt": (3, 3),
                "fetch.log": (6, 6)}


def assert_state_files_parse(folder: Path) -> None:
    """Every state file is UTF-8, has no NUL or CR, ends with a newline, and every data line has
    its exact number of TAB-separated fields; every URL field is a normalised http(s) URL."""
    for name, (lo, hi) in FIELD_COUNTS.items():
        path = folder / name
        if not path.exists():
            continue
        raw = path.read_bytes()
        assert b"\x00" not in raw, name
        text = raw.decode("utf-8")   # strict: a crawler-written file is valid UTF-8
        assert text == "" or text.endswith("\n"), name
        for line in text.split("\n")[:-1]:
            if not is_data(line):
                continue
            assert "\r" not in line, (name, line[:300])
            f = line.split("\t")
            assert lo <= len(f) <= hi, (name, line[:300])
            if name == "crawled.txt":
                assert len(f) in (7, 11), (name, line[:300])   # HTML pages add 4 fields
            if name in ("queue.txt", "crawled.txt", "failed.txt"):
                assert normalize(f[0]) == f[0], (name, f[0][:300])
            if name == "crawled.txt":
                status, ctype, size, depth, stamp, final = f[1:7]
                assert status.isdigit() and size.isdigit() and depth.isdigit() and STAMP.match(stamp), f
                assert ctype and (final == "-" or normalize(final) == final), f
                if len(f) == 11:
                    text_hash, canonical, outlinks, title = f[7:]
                    assert text_hash == "-" or re.fullmatch(r"[0-9a-f]{32}", text_hash), f
                    assert canonical == "-" or normalize(canonical) == canonical, f
                    assert outlinks.isdigit() and title, f
            if name == "failed.txt":
                assert f[1] and f[2].isdigit() and STAMP.match(f[3]), f
            if name == "fetch.log":
                assert STAMP.match(f[0]) and f[1].isdigit() and f[3].isdigit() and f[4].isdigit(), f
                assert normalize(f[5]) == f[5], f[5][:300]
    claims = [line for line in (folder / "claims.txt").read_text().splitlines() if is_data(line)] \
        if (folder / "claims.txt").exists() else []
    assert claims == [], "claims.txt must be empty after a clean stop"


def page_hits(site: TestSite) -> dict[str, int]:
    hits = dict(site.hits)
    hits.pop("/robots.txt", None)
    return hits


# =========================================================================== servers


def test_gzip_bomb_fails_as_too_large(site: TestSite, worker: Worker) -> None:
    site.gzip_bomb("/bomb", decompressed_size=1 << 30)   # 1 GiB of zeros, ~1 MB on the wire
    spider, store, _ = worker(site.url("/bomb"))
    run(spider)
    assert reason(store, site.url("/bomb")) == "too large"
    assert site.hits["/bomb"] == 1   # not retried: it would cost the same again
    no_internal_errors(store)


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length-1e15"])
def test_endless_body_is_cut_off(site: TestSite, worker: Worker, chunked: bool) -> None:
    site.endless("/forever", chunked=chunked)
    spider, store, _ = worker(site.url("/forever"), max_time=1.0)
    run(spider)
    assert reason(store, site.url("/forever")) in ("too large", "too slow")
    assert site.hits["/forever"] == 1


def test_one_byte_per_second_body_is_too_slow(site: TestSite, worker: Worker) -> None:
    site.trickle("/drip", total_bytes=1000, bytes_per_second=1)   # 1 byte, then 1 s of silence, ...
    spider, store, _ = worker(site.url("/drip"), read_timeout=2.0, max_time=1.0)
    run(spider)
    assert reason(store, site.url("/drip")) == "too slow"
    assert site.hits["/drip"] == 1


def test_one_byte_per_second_with_a_shorter_read_timeout_is_a_retried_timeout(site: TestSite, worker: Worker) -> None:
    site.trickle("/drip", total_bytes=1000, bytes_per_second=1)
    spider, store, _ = worker(site.url("/drip"), read_timeout=0.3, max_time=2.0, max_attempts=2)
    run(spider)
    assert reason(store, site.url("/drip")) == "timeout after 2 attempts"
    assert site.hits["/drip"] == 2


def test_no_content_type_binary_is_recorded_not_parsed(site: TestSite, worker: Worker) -> None:
    site.route("/blob", body=b"\x89PNG\r\n\x1a\n<a href='/hidden'>x</a>" + bytes(range(256)) * 8, content_type=None)
    spider, store, _ = worker(site.url("/blob"))
    run(spider)
    status, ctype, *_ = crawled(store)[site.url("/blob")]
    assert (status, ctype) == ("200", "-")
    assert site.hits["/hidden"] == 0


def test_no_content_type_large_binary_is_recorded_without_downloading_it(site: TestSite, worker: Worker) -> None:
    # only the first bytes are read to sniff for HTML; the size cap does not apply to the rest
    site.route("/big.bin", body=b"\x00\x01binary" * 50_000, content_type=None)   # 400 KB > 256 KiB cap
    spider, store, _ = worker(site.url("/big.bin"))
    run(spider)
    assert store.failed == [], store.failed
    assert crawled(store)[site.url("/big.bin")][:3] == ["200", "-", "400000"]   # the declared length


def test_html_served_as_image_is_not_parsed(site: TestSite, worker: Worker) -> None:
    site.route("/pic.png", body=html("/hidden.html"), content_type="image/png")
    site.route("/hidden.html", body=html())
    spider, store, _ = worker(site.url("/pic.png"))
    run(spider)
    assert crawled(store)[site.url("/pic.png")][:2] == ["200", "image/png"]
    assert site.hits["/hidden.html"] == 0


def test_binary_garbage_served_as_html_is_parsed_without_crashing(site: TestSite, worker: Worker) -> None:
    rng = random.Random(1234)
    garbage = bytes(rng.randrange(256) for _ in range(100_000))
    body = garbage[:50_000] + b'<a href="/found-in-garbage">x</a>' + garbage[50_000:] + b"\x00" * 1000
    site.route("/garbage.html", body=body, content_type="text/html; charset=utf-8")
    site.route("/found-in-garbage", body=html())
    spider, store, _ = worker(site.url("/garbage.html"))
    run(spider)
    assert crawled(store)[site.url("/garbage.html")][:2] == ["200", "text/html"]
    assert site.hits["/found-in-garbage"] == 1   # the one real link in the noise was followed
    no_internal_errors(store)


@pytest.mark.parametrize("data", [
    b"HELLO THIS IS NOT HTTP\r\n\r\n",
    b"<html>an HTTP/0.9 answer: no status line at all</html>",
    b"HTTP/1.1 abc OK\r\nContent-Length: 0\r\n\r\n",
], ids=["garbage", "http09", "non-numeric-status"])
def test_invalid_status_line_fails_as_invalid_response(site: TestSite, worker: Worker, data: bytes) -> None:
    site.route("/bad", raw=raw_response(data))
    spider, store, _ = worker(site.url("/bad"))
    run(spider)
    assert reason(store, site.url("/bad")) == "invalid response"
    assert site.hits["/bad"] == 1   # permanent: not retried


def test_nonsense_status_code_fails_with_that_status(site: TestSite, worker: Worker) -> None:
    site.route("/999", raw=raw_response(b"HTTP/1.1 999 Weird\r\nContent-Length: 0\r\n\r\n"))
    spider, store, _ = worker(site.url("/999"))
    run(spider)
    assert reason(store, site.url("/999")) == "999"


def test_redirect_chain_of_10000_hops_stops_at_max_redirects(site: TestSite, worker: Worker) -> None:
    def hop(info):  # type: ignore[no-untyped-def]
        n = int(info.query.split("=")[1])
        return (302, {"Location": f"/hop?n={n + 1}"}, "") if n < 10_000 else (200, None, html())
    site.route("/hop", handler=hop)
    spider, store, _ = worker(site.url("/hop?n=0"), max_redirects=10)
    run(spider)
    assert len(site.requests) == 11                       # the URL and 10 hops, not one more
    assert reason(store, site.url("/hop?n=10")) == "more than 10 redirects"
    hops = crawled(store)
    assert len(hops) == 10 and all(f[0] == "302" for f in hops.values())
    assert site.url("/hop?n=11") not in store.seen        # the 11th target was never queued


@pytest.mark.parametrize("size", [100_000, 1_000_000])
def test_enormous_header_line_fails_as_invalid_response(site: TestSite, worker: Worker, size: int) -> None:
    def raw(req, info) -> None:  # type: ignore[no-untyped-def]
        req.send_head(200, {"X-Big": "a" * size, "Content-Length": "2"})
        req.wfile.write(b"ok")
    site.route("/bighdr", raw=raw)
    spider, store, _ = worker(site.url("/bighdr"))
    run(spider)
    assert reason(store, site.url("/bighdr")) == "invalid response"


def test_thousands_of_headers_fail_as_invalid_response(site: TestSite, worker: Worker) -> None:
    site.route("/many", raw=raw_response(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(5000))
                                         + b"Content-Length: 2\r\n\r\nok"))
    spider, store, _ = worker(site.url("/many"))
    run(spider)
    assert reason(store, site.url("/many")) == "invalid response"


def test_server_closing_without_answering_is_retried_then_failed(site: TestSite, worker: Worker) -> None:
    def hang_up(req, info) -> None:  # type: ignore[no-untyped-def]
        req.close_connection = True
    site.route("/hangup", raw=hang_up)
    spider, store, _ = worker(site.url("/hangup"))
    run(spider)
    assert reason(store, site.url("/hangup")) == "connection error after 3 attempts"
    assert site.hits["/hangup"] == 3


def test_content_length_larger_than_the_body_then_close_is_retried_then_failed(site: TestSite, worker: Worker) -> None:
    site.route("/short", raw=raw_response(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                                          b"Content-Length: 10000\r\n\r\n<html>only a little"))
    spider, store, _ = worker(site.url("/short"))
    run(spider)
    assert reason(store, site.url("/short")) == "connection broken after 3 attempts"
    assert site.hits["/short"] == 3
    assert store.crawled == []   # a truncated page is not recorded (nor parsed) as crawled


def test_content_length_larger_than_the_body_kept_open_is_a_timeout(site: TestSite, worker: Worker) -> None:
    def raw(req, info) -> None:  # type: ignore[no-untyped-def]
        req.send_head(200, {"Content-Length": "10000"})
        req.wfile.write(b"<html>only a little")
        req.wfile.flush()
        req.wait(3)
        req.close_connection = True
    site.route("/held", raw=raw)
    spider, store, _ = worker(site.url("/held"), read_timeout=0.3, max_attempts=2)
    run(spider)
    assert reason(store, site.url("/held")) == "timeout after 2 attempts"


def test_conflicting_content_lengths_fail_permanently(site: TestSite, worker: Worker) -> None:
    site.route("/twocl", raw=raw_response(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                                          b"Content-Length: 5\r\nContent-Length: 50\r\n\r\n<html>x</html>"))
    spider, store, _ = worker(site.url("/twocl"))
    run(spider)
    assert reason(store, site.url("/twocl")) == "invalid request"   # (urllib3's name for it)
    assert site.hits["/twocl"] == 1


def test_redirect_with_a_latin1_location_fails_as_invalid_response(site: TestSite, worker: Worker) -> None:
    # requests decodes Location as UTF-8 even when not following it; 'caf\xe9' is not UTF-8
    site.route("/latin1", raw=raw_response(b"HTTP/1.1 302 Found\r\nLocation: /caf\xe9\r\nContent-Length: 0\r\n\r\n"))
    spider, store, _ = worker(site.url("/latin1"))
    run(spider)
    assert reason(store, site.url("/latin1")) == "invalid response"
    assert site.hits["/latin1"] == 1
    no_internal_errors(store)


def test_a_utf8_location_is_followed_as_the_browser_would(site: TestSite, worker: Worker) -> None:
    # raw UTF-8 bytes of 'café' in Location: http.client reads them as Latin-1 ('cafÃ©')
    site.route("/utf8", raw=raw_response(b"HTTP/1.1 302 Found\r\nLocation: /t/caf\xc3\xa9\r\nContent-Length: 0\r\n\r\n"))
    site.route("/t/caf%C3%A9", body=html())
    spider, store, _ = worker(site.url("/utf8"))
    run(spider)
    assert crawled(store)[site.url("/utf8")][5] == site.url("/t/caf%C3%A9")
    assert site.hits["/t/caf%C3%A9"] == 1 and not any("%C3%83" in p for p in site.hits)
    no_internal_errors(store)


def test_a_redirect_that_leads_nowhere_says_why(site: TestSite, worker: Worker) -> None:
    site.route("/frag", status=302, headers={"Location": "#top"})             # this page again
    site.route("/ftp", status=302, headers={"Location": "ftp://files.test/x"})
    site.route("/badport", status=302, headers={"Location": "http://127.0.0.1:99999/x"})
    spider, store, _ = worker(site.url("/frag"), site.url("/ftp"), site.url("/badport"))
    run(spider)
    assert {p: reason(store, site.url(p)) for p in ("/frag", "/ftp", "/badport")} == {
        "/frag": "redirect loop", "/ftp": "redirect to a non-http URL", "/badport": "redirect to an invalid URL"}
    no_internal_errors(store)


def test_hostile_header_values_cannot_break_a_record(site: TestSite, worker: Worker) -> None:
    site.route("/ct", raw=raw_response(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\tinjected\t999\r\n"
                                       b"Content-Length: 2\r\n\r\nok"))
    site.route("/loc", raw=raw_response(b"HTTP/1.1 302 Found\r\nLocation: /tar\tget\r\nContent-Length: 0\r\n\r\n"))
    site.route("/target", body=html())
    spider, store, _ = worker(site.url("/ct"), site.url("/loc"))
    run(spider)
    rows_ = crawled(store)   # 7 fields each, asserted there
    assert rows_[site.url("/ct")][:2] == ["200", "text/plain injected 999"]
    assert rows_[site.url("/loc")][0] == "302" and rows_[site.url("/loc")][-1] == site.url("/target")
    assert site.hits["/target"] == 1


def test_line_breaking_characters_from_a_header_do_not_reach_a_record(site: TestSite, worker: Worker) -> None:
    # VT, FF and NEL are line breaks for str.splitlines(): they are cleaned like TAB, CR and LF
    site.route("/ct", raw=raw_response(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\x0bsplit\x85here\x0cnow\r\n"
                                       b"Content-Length: 2\r\n\r\nok"))
    spider, store, _ = worker(site.url("/ct"))
    run(spider)
    [line] = store.crawled
    assert len(line.splitlines()) == 1, repr(line)
    assert crawled(store)[site.url("/ct")][1] == "text/plain split here now"


def test_connection_reset_mid_body_is_retried_then_failed(site: TestSite, worker: Worker) -> None:
    site.reset_mid_body("/cut", total_bytes=50_000)
    spider, store, _ = worker(site.url("/cut"), max_attempts=2)
    run(spider)
    assert reason(store, site.url("/cut")) in ("connection broken after 2 attempts", "connection error after 2 attempts")
    assert site.hits["/cut"] == 2 and store.crawled == []


def test_a_whole_hostile_site_in_one_real_crawl(projects_dir: Path, site: TestSite, make_site) -> None:
    """Every misbehaving endpoint at once, 2 workers, small limits: the crawl ends (exit 0), each URL
    has its recorded reason, nothing off scope is requested, every file parses, status works."""
    other = make_site("127.0.0.2")
    other.route("/", body=html())
    pad = b"# padding padding padding padding padding padding padding\n"
    early = b"User-agent: *\nDisallow: /early-secret\n" + pad * (ROBOTS_MAX_BODY // len(pad) + 10)
    site.route("/robots.txt", body=early + b"Disallow: /late\n" + pad * (9 * 1024 * 1024 // len(pad)),
               content_type="text/plain")
    site.gzip_bomb("/bomb", decompressed_size=1 << 30)
    site.endless("/endless")
    site.trickle("/drip", total_bytes=1000, bytes_per_second=1)
    site.route("/untyped", body=html("/via-untyped"), content_type=None)
    site.route("/via-untyped", body=html())
    site.route("/png-html", body=html("/hidden-png"), content_type="image/png")
    site.route("/garbage-html", body=bytes(random.Random(7).randrange(256) for _ in range(50_000))
               + b'<a href="/in-garbage">x</a>')
    site.route("/in-garbage", body=html())
    site.route("/badstatus", raw=raw_response(b"HELLO THIS IS NOT HTTP\r\n\r\n"))
    site.add_redirect("/to-file", "file:///etc/passwd", status=302)
    site.add_redirect("/to-other", other.url("/"), status=302)
    site.add_redirect("/loop-a", "/loop-b")
    site.add_redirect("/loop-b", "/loop-a")
    site.route("/chain", handler=lambda info: (302, {"Location": f"/chain?n={int(info.query[2:]) + 1}"}, ""))
    def big_header(req, info) -> None:  # type: ignore[no-untyped-def]
        req.send_head(200, {"X-Big": "a" * 100_000, "Content-Length": "2"})
        req.wfile.write(b"ok")
    site.route("/bighdr", raw=big_header)
    site.reset_mid_body("/reset")
    site.route("/hangup", raw=lambda req, info: setattr(req, "close_connection", True))
    site.route("/short", raw=raw_response(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                                          b"Content-Length: 10000\r\n\r\n<html>cut"))
    for path in ("/late", "/early-secret"):
        site.route(path, body=html())
    endpoints = ["/bomb", "/endless", "/drip", "/untyped", "/png-html", "/garbage-html", "/badstatus", "/to-file",
                 "/to-other", "/loop-a", "/chain?n=0", "/bighdr", "/reset", "/hangup", "/short", "/late",
                 "/early-secret"]
    site.route("/", body=html(*endpoints))
    folder = projects_dir / "p"
    result = cli(projects_dir, "crawl", "p", site.url("/"), "--workers", "2", "--delay", "0", "--max-attempts", "2",
                 "--max-redirects", "5", "--max-bytes", "262144", "--connect-timeout", "1", "--read-timeout", "2",
                 "--max-time", "1.5")
    assert result.returncode == 0, result.stderr
    assert other.hits == {}
    done = {r[0][len(site.url("")) - 1:]: r[1] for r in rows(folder / CRAWLED)}
    why = {r[0][len(site.url("")) - 1:]: r[1] for r in rows(folder / "failed.txt")}
    assert why.pop("/endless") in ("too large", "too slow")
    assert why.pop("/reset") in ("connection broken after 2 attempts", "connection error after 2 attempts")
    assert why == {
        "/bomb": "too large", "/drip": "too slow", "/badstatus": "invalid response", "/bighdr": "invalid response",
        "/to-file": "redirect to a non-http URL", "/loop-b": "redirect loop", "/chain?n=5": "more than 5 redirects",
        "/hangup": "connection error after 2 attempts", "/short": "connection broken after 2 attempts",
    }
    assert {p: done[p] for p in ("/", "/untyped", "/via-untyped", "/png-html", "/garbage-html", "/in-garbage",
                                 "/late", "/to-other", "/loop-a")} == {
        "/": "200", "/untyped": "200", "/via-untyped": "200", "/png-html": "200", "/garbage-html": "200",
        "/in-garbage": "200", "/late": "200", "/to-other": "302", "/loop-a": "301"}
    assert [k for k in done if k.startswith("/chain")] == [f"/chain?n={i}" for i in range(5)]
    hits = page_hits(site)
    assert site.hits["/robots.txt"] == 1 and "/early-secret" not in hits and "/hidden-png" not in hits
    assert {p for p, n in hits.items() if n > 1} == {"/reset", "/hangup", "/short"}   # the transient ones, twice
    refused = {r[0]: r[1] for r in rows(folder / REJECTED)}
    assert refused[site.url("/early-secret")] == "robots" and refused[other.url("/")] == "scope"
    assert not (folder / "errors.log").exists()
    assert_state_files_parse(folder)
    assert cli(projects_dir, "status", "p").returncode == 0


# --------------------------------------------------------------------------- robots.txt


def _robots_cache(store: MemoryStore, site: TestSite) -> Path:
    return Path(store.folder) / "robots" / cache_name(f"{site.host}:{site.port}")  # type: ignore[attr-defined]


def test_robots_txt_of_10_mb_only_the_first_500_kib_is_used(site: TestSite, worker: Worker) -> None:
    head = b"User-agent: *\nDisallow: /early\n"
    pad = b"# padding padding padding padding padding padding padding\n"
    early = head + pad * (ROBOTS_MAX_BODY // len(pad) + 10)
    body = early + b"Disallow: /late\n" + pad * ((10 * 1024 * 1024 - len(early)) // len(pad))
    assert len(body) >= 10 * 1024 * 1024 - 100
    site.route("/robots.txt", body=body, content_type="text/plain")
    site.route("/", body=html("/early", "/late", "/page"))
    for path in ("/early", "/late", "/page"):
        site.route(path, body=html())
    spider, store, _ = worker(site.url("/"), obey_robots=True)
    run(spider)
    assert site.hits["/robots.txt"] == 1
    assert site.hits["/early"] == 0
    assert crawled(store)[site.url("/late")][0] == "200"                     # its rule lay past 500 KiB
    assert crawled(store)[site.url("/page")][0] == "200"                     # the crawl went on
    assert [site.url("/early"), "robots", site.url("/")] in rejected(store)
    cached = _robots_cache(store, site).read_bytes()
    assert ROBOTS_MAX_BODY <= len(cached) < ROBOTS_MAX_BODY + 1000   # the body kept is the first 500 KiB


@pytest.mark.parametrize("kind", ["endless", "gzip-bomb"])
def test_endless_or_bomb_robots_txt_is_cut_at_500_kib(site: TestSite, worker: Worker, kind: str) -> None:
    if kind == "endless":
        site.endless("/robots.txt", content_type="text/plain")
    else:
        site.gzip_bomb("/robots.txt", decompressed_size=1 << 30, content_type="text/plain")
    site.route("/", body=html("/a"))
    site.route("/a", body=html())
    spider, store, _ = worker(site.url("/"), obey_robots=True)
    run(spider)
    assert site.hits["/robots.txt"] == 1
    assert set(crawled(store)) == {site.url("/"), site.url("/a")}
    # the first 500 KiB, its control characters (NUL here) kept as %XX (robots._defang)
    assert len(_robots_cache(store, site).read_bytes()) < 3 * ROBOTS_MAX_BODY + 1000


def test_robots_txt_redirecting_off_scope_or_to_file_is_not_followed(site: TestSite, make_site, worker: Worker) -> None:
    other = make_site("127.0.0.2")
    other.route("/robots.txt", body="User-agent: *\nDisallow: /\n", content_type="text/plain")
    site.add_redirect("/robots.txt", other.url("/robots.txt"))
    site.route("/", body=html("/a"))
    site.route("/a", body=html())
    spider, store, _ = worker(site.url("/"), obey_robots=True)
    run(spider)
    assert other.hits == {}                                  # never requested
    assert set(crawled(store)) == {site.url("/"), site.url("/a")}   # as if there were no robots.txt
    site.add_redirect("/robots.txt", "file:///etc/passwd")
    spider2, store2, _ = worker(site.url("/"), obey_robots=True)
    run(spider2)
    assert set(crawled(store2)) == {site.url("/"), site.url("/a")}


@pytest.mark.parametrize("value", ["nan", "inf", "1e309", "-5", "abc"])
def test_nonsense_crawl_delay_is_ignored(site: TestSite, worker: Worker, value: str) -> None:
    # Protego drops a Crawl-delay that is not a finite, non-negative number; a huge one is capped
    # by --max-delay (test_citizen.py::test_crawl_delay_sets_the_floor)
    site.route("/robots.txt", body=f"User-agent: *\nCrawl-delay: {value}\n", content_type="text/plain")
    site.route("/", body=html("/a"))
    site.route("/a", body=html())
    spider, store, _ = worker(site.url("/"), obey_robots=True, delay=0.25, max_delay=2.0)
    run(spider)
    assert spider.floor(f"{site.host}:{site.port}") == 0.25
    assert set(crawled(store)) == {site.url("/"), site.url("/a")}
    no_internal_errors(store)


# =========================================================================== URLs


PAGE = "http://127.0.0.1:8000/dir/page.html"


@pytest.fixture
def linker(worker: Worker) -> tuple[Spider, MemoryStore]:
    spider, store, _ = worker("http://127.0.0.1:8000/")
    return spider, store


def added(store: MemoryStore) -> set[str]:
    return {e.url for e in store.pending} - {"http://127.0.0.1:8000/"}


def test_control_characters_in_hrefs_are_encoded_or_removed(linker) -> None:
    spider, store = linker
    report = spider.add_links_to_queue(PAGE, ["/a\tb\nc\rd", "/ctl\x01\x1f\x7f", "/nul\x00x", "/vt\x0bff\x0c",
                                              "/ls\u2028ps\u2029nel\u0085", " \x00\x1f/trim \x0c"], 0)
    assert report.added == 6
    assert added(store) == {
        "http://127.0.0.1:8000/abcd",                       # TAB, CR, LF removed, as browsers do
        "http://127.0.0.1:8000/ctl%01%1F%7F",
        "http://127.0.0.1:8000/nul%00x",
        "http://127.0.0.1:8000/vt%0Bff",                    # (a trailing control is trimmed)
        "http://127.0.0.1:8000/ls%E2%80%A8ps%E2%80%A9nel%C2%85",
        "http://127.0.0.1:8000/trim",                       # C0 controls and spaces trimmed at the ends
    }
    for e in store.pending:
        assert e.line().count("\t") == 4 and e.line().count("\n") == 1


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_links_refused_by_the_host_budget_are_not_counted_as_already_known(tmp_path: Path, kind: str) -> None:
    """links.txt (and status's "links to URLs already known") counts links to known URLs; a link
    the host budget refused is a refusal, not a known URL."""
    store = MemoryStore(max_per_host=3) if kind == "memory" else FileStore(tmp_path, max_per_host=3).open()
    store.folder = tmp_path  # type: ignore[attr-defined]  # where robots/ goes (MemoryStore)
    config = CrawlConfig(seeds=(PAGE,), workers=1, delay=0.0, max_depth=5, ignore_robots=True,
                         max_pages_per_host=3)
    spider = Spider(config, store, clock=FakeClock(), wait=FakeClock().wait)
    try:
        store.add([QueueEntry(PAGE)])
        report = spider.add_links_to_queue(PAGE, [f"/n{i}" for i in range(10)] + ["/n0", PAGE], 0)
        assert (report.added, report.duplicates, report.rejected) == (2, 2, 8)   # PAGE + 2 = the budget
    finally:
        spider.close()


def test_a_queued_line_the_settings_refuse_is_never_requested(site: TestSite, make_site, worker: Worker) -> None:
    """Lines reach queue.txt without admission when written by hand while the crawl runs (or
    through a saved view fooled by an edit that kept size and times): the claim checks again."""
    other = make_site("127.0.0.2")
    other.route("/x", body=html())
    site.route("/", body=html())
    spider, store, _ = worker(site.url("/"), deny=("/denied",))
    store.add([QueueEntry(other.url("/x"), 1), QueueEntry(site.url("/denied"), 1), QueueEntry(site.url("/deep"), 9)])
    run(spider)
    assert other.hits == {} and "/denied" not in site.hits and "/deep" not in site.hits
    refused = {x.split("\t")[0]: x.split("\t")[1] for x in store.logs["rejected"]}
    assert refused == {other.url("/x"): "scope", site.url("/denied"): "deny", site.url("/deep"): "depth"}


def test_urls_over_the_length_limit_are_refused_and_never_requested(site: TestSite, worker: Worker) -> None:
    at_limit = "/" + "a" * (MAX_URL_LENGTH - len(site.url("/")))    # exactly MAX_URL_LENGTH characters
    site.route("/", body=html(at_limit, at_limit + "b", "/long/" + "x" * 100_000))
    spider, store, _ = worker(site.url("/"), traps=("url-length=off",))   # the hard limit, not the trap rule
    run(spider)
    assert len(site.url(at_limit)) == MAX_URL_LENGTH and site.hits[at_limit] == 1   # 404, but requested
    assert [r[1:] for r in rejected(store)] == [["url too long", site.url("/")]] * 2
    assert len(site.requests) == 2


def test_ipv6_literal_links_are_normalised_and_kept_to_scope(site: TestSite, worker: Worker) -> None:
    spider, store, _ = worker(site.url("/"))
    hrefs = [f"http://[::1]:{site.port}/v6", f"http://[0:0:0:0:0:0:0:1]:{site.port}/long-form",
             f"http://[::FFFF:127.0.0.1]:{site.port}/mapped", "http://[::1/broken", "http://[zz::1]/"]
    report = spider.add_links_to_queue(site.url("/"), hrefs, 0)
    assert report.found == 5 and report.added == 0 and report.rejected == 3   # the malformed two are ignored
    assert [r[:2] for r in rejected(store)] == [
        [f"http://[::1]:{site.port}/v6", "scope"],
        [f"http://[::1]:{site.port}/long-form", "scope"],   # compressed, as browsers write it
        [f"http://[::ffff:7f00:1]:{site.port}/mapped", "scope"],
    ]


def test_ipv6_start_url_scopes_by_its_literal(worker: Worker) -> None:
    # no request here: the test network is 127.0.0.0/8 only
    spider, store, _ = worker("http://[::1]:8000/")
    page = "http://[::1]:8000/dir/"
    report = spider.add_links_to_queue(page, ["/a", "//[::1]:9000/other-port", "http://[0::1]:8000/b",
                                              "http://127.0.0.1:8000/", "http://[::2]:8000/"], 0)
    # [0::1] is [::1] written longer: the same host (browsers write it [::1]); the port is part
    # of the scope (issue 13; test_settings.py::test_scope_table)
    assert {e.url for e in store.pending} == {"http://[::1]:8000/", "http://[::1]:8000/a", "http://[::1]:8000/b"}
    assert [r[:2] for r in rejected(store)] == [["http://[::1]:9000/other-port", "scope"],
                                                ["http://127.0.0.1:8000/", "scope"], ["http://[::2]:8000/", "scope"]]
    assert report.added == 2


def test_idn_hosts_are_stored_in_punycode(linker) -> None:
    spider, store = linker
    spider.add_links_to_queue(PAGE, ["http://Bücher.example/ü", "http://例え.テスト/", "http://xn--zz--.example/"], 0)
    assert [r[0] for r in rejected(store)][:2] == ["http://xn--bcher-kva.example/%C3%BC", "http://xn--r8jz45g.xn--zckzah/"]
    assert all(r[1] == "scope" for r in rejected(store))
    assert all(r[0].isascii() for r in rejected(store))


def test_userinfo_links_are_kept_and_sent_as_basic_auth(site: TestSite, worker: Worker) -> None:
    site.route("/", body=html(f"http://user:pa%73s@127.0.0.1:{site.port}/private", "/private"))
    site.route("/private", body=html())
    spider, store, _ = worker(site.url("/"))
    run(spider)
    # a different URL from /private for dedup, so both are fetched; requests sends the userinfo
    assert f"http://user:pass@127.0.0.1:{site.port}/private" in crawled(store)
    assert site.hits["/private"] == 2
    auths = sorted(str(r.headers.get("Authorization")) for r in site.requests if r.path == "/private")
    assert auths == ["Basic dXNlcjpwYXNz", "None"]


def test_bad_ports_and_malformed_hrefs_are_ignored(linker) -> None:
    spider, store = linker
    hrefs = ["http://127.0.0.1:99999/", "http://127.0.0.1:abc/", "http://127.0.0.1:-1/", "http://127.0.0.1:8o/",
             "http://", "http://:80/x", "http://exa mple.com/"]   # ("http:///x" is http://x/ to a browser)
    report = spider.add_links_to_queue(PAGE, hrefs, 0)
    assert (report.found, report.added, report.rejected) == (len(hrefs), 0, 0)
    assert added(store) == set() and "rejected" not in store.logs


def test_percent_without_hex_is_kept_as_browsers_keep_it(site: TestSite, worker: Worker) -> None:
    site.route("/", body=html("/100%", "/%zz", "/%4"))
    spider, store, _ = worker(site.url("/"))
    run(spider)
    # URL Standard: a "%" that starts no escape stays as written (urllib3 escapes it on the wire)
    assert set(failed(store)) == {site.url(p) for p in ("/100%", "/%zz", "/%4")}   # 404s, recorded
    assert {"/100%25", "/%25zz", "/%254"} <= set(site.hits)


def test_tab_cr_lf_inside_hrefs_are_removed_before_fetching(site: TestSite, worker: Worker) -> None:
    site.route("/", body=html("/a&#9;b", "/c&#10;d&#13;e", "/f\tg\nh\ri", "/q?x=1&#9;&amp;y=\n2"))
    for path in ("/ab", "/cde", "/fghi", "/q"):
        site.route(path, body=html())
    spider, store, _ = worker(site.url("/"))
    run(spider)
    assert page_hits(site) == {"/": 1, "/ab": 1, "/cde": 1, "/fghi": 1, "/q?x=1&y=2": 1}


def test_javascript_data_and_other_schemes_are_never_requested(site: TestSite, worker: Worker) -> None:
    site.route("/", body=html("javascript:fetch('/js')", "JaVaScRiPt:alert(1)", " javascript:void(0)",
                              "data:text/html;base64,PGEgaHJlZj0nL2RhdGEnPg==", "vbscript:msgbox", "mailto:a@b.c",
                              f"ftp://127.0.0.1:{site.port}/ftp", f"ws://127.0.0.1:{site.port}/ws",
                              "file:///etc/passwd", f"gopher://127.0.0.1:{site.port}/g", "#frag", "?"))
    spider, store, _ = worker(site.url("/"))
    run(spider)
    assert page_hits(site) == {"/": 1}   # "?" is the page itself, already crawled
    assert "rejected" not in store.logs   # ignored like mailto:, not recorded


def test_href_of_one_megabyte_is_refused_and_the_rest_of_the_page_followed(site: TestSite, worker: Worker) -> None:
    site.route("/", body=html("/" + "x" * 1_000_000, "/after"))
    site.route("/after", body=html())
    spider, store, _ = worker(site.url("/"), max_bytes=4 * 1024 * 1024)
    run(spider)
    assert crawled(store)[site.url("/after")][0] == "200"   # links after the monster still found
    assert [r[1] for r in rejected(store)] == ["url too long"]
    assert len(site.requests) == 2 and store.failed == []
    no_internal_errors(store)


# A line longer than the 1 MiB read chunk can no longer come from a page (see above) but can be
# written by hand; before commit 783e719 it was cut in two by the other processes and hung the crawl.
def test_a_queue_line_over_1_mib_is_counted_once_by_other_processes(tmp_path: Path) -> None:
    writer = FileStore(tmp_path, owner=1).open()
    monster = normalize("http://a.test/" + "%" * 400_000)   # 1.2 MB once encoded
    writer.add([QueueEntry(monster), QueueEntry("http://a.test/small")])
    reader = FileStore(tmp_path, owner=2).open()
    assert reader.refresh().pending == writer.refresh().pending == 2
    claims = writer.claim(5, 0.0, lambda host: 0.0).claims
    for c in claims:
        writer.settle(c, "failed", record=f"{c.url}\t414\t0\t2026-01-01T00:00:00Z\n")
    result = reader.claim(5, 0.0, lambda host: 0.0)
    assert result.finished, result


def test_a_page_with_a_3_mb_link_does_not_hang_a_two_worker_crawl(projects_dir: Path, site: TestSite) -> None:
    site.route("/", body=html("/" + "%" * 1_000_000, "/a", "/b"))
    site.route("/a", body=html())
    site.route("/b", body=html())
    crawl(projects_dir, "p", site.url("/"), "--max-attempts", "1", "--max-bytes", "4194304", workers=2, timeout=10)
    assert_state_files_parse(projects_dir / "p")
    assert [r[1] for r in rows(projects_dir / "p" / REJECTED)] == ["url too long"]
    assert page_hits(site) == {"/": 1, "/a": 1, "/b": 1}


# =========================================================================== files


def _five_pages(site: TestSite) -> None:
    site.route("/", body=html(*(f"/p{i}" for i in range(5))))
    for i in range(8):
        site.route(f"/p{i}", body=html())


def _stopped_after(projects: Path, site: TestSite, pages: int = 2) -> Path:
    """A project crawled up to --max-pages ``pages``: some pages crawled, the rest pending."""
    crawl(projects, "p", site.url("/"), "--max-pages", str(pages))
    return projects / "p"


def test_garbage_and_binary_lines_in_queue_txt_are_reported_and_moved(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    with open(folder / QUEUE, "ab") as f:
        f.write(b"\x00\x01\xff\xfe binary junk \x80\n")
        f.write(b"http://127.0.0.1:1/\t-3\t0\t0\t-\n")           # negative depth
        f.write(b"http://127.0.0.1:1/\tx\ty\tz\t-\n")            # non-numeric fields
        f.write(site.url("/p6").encode() + b"\n")                  # a good hand-added line after them
    result = crawl(projects_dir, "p", "--max-pages", "100")
    warnings = [line for line in result.stderr.splitlines() if "queue.txt:" in line]
    assert len(warnings) == 3, result.stderr
    assert page_hits(site)["/p6"] == 1 and set(page_hits(site).values()) == {1}
    bad = [r for r in rows(folder / REJECTED) if r[1].startswith("queue.txt:")]
    assert len(bad) == 3 and "\x00" not in "".join(map("".join, bad))
    assert_state_files_parse(folder)


def test_many_bad_queue_lines_do_not_flood_the_terminal(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    with open(folder / QUEUE, "a") as f:
        f.write("".join(f"not a url {i}\n" for i in range(30)))
    result = crawl(projects_dir, "p", "--max-pages", "100")
    assert len([line for line in result.stderr.splitlines() if "queue.txt:" in line]) == 20, result.stderr
    assert "warning: ... and 10 more such lines, all moved to rejected.txt" in result.stderr
    assert len([r for r in rows(folder / REJECTED) if r[1].startswith("queue.txt:")]) == 30   # none lost


def test_crlf_line_endings_are_accepted(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    for name in (QUEUE, CRAWLED, "settings.txt"):
        text = (folder / name).read_text()
        if name == QUEUE:
            text += site.url("/p6") + "\n"
        (folder / name).write_bytes(text.replace("\n", "\r\n").encode())
    result = crawl(projects_dir, "p", "--max-pages", "100")
    assert "warning" not in result.stderr, result.stderr
    assert set(page_hits(site)) == {"/", "/p6"} | {f"/p{i}" for i in range(5)}
    assert set(page_hits(site).values()) == {1}
    assert_state_files_parse(folder)   # rewritten with plain LF
    assert rows(folder / REJECTED) == []


def test_a_utf8_bom_from_a_hand_edit_is_ignored(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    pending = urls_in(folder / QUEUE)
    (folder / QUEUE).write_bytes(("\ufeff" + "\n".join(pending) + "\n").encode())   # Notepad's way
    done = len(urls_in(folder / CRAWLED))
    for name in (CRAWLED, "settings.txt"):
        (folder / name).write_bytes(b"\xef\xbb\xbf" + (folder / name).read_bytes())
    # status reads the files as they are (before any crawl mends them): the BOM is no line
    report = cli(projects_dir, "status", "p").stdout
    numbers = dict(re.findall(r"^(pending|crawled)\s+(\d+)", report, re.M))
    assert numbers == {"crawled": str(done), "pending": str(len(pending))}, report
    result = crawl(projects_dir, "p", "--max-pages", "100")
    assert "warning" not in result.stderr, result.stderr
    assert urls_in(folder / REJECTED) == []
    assert set(urls_in(folder / CRAWLED)) == {site.url("/")} | {site.url(f"/p{i}") for i in range(5)}
    assert set(page_hits(site).values()) == {1}
    for name in (QUEUE, CRAWLED, "settings.txt"):
        assert not (folder / name).read_bytes().startswith(b"\xef\xbb\xbf"), name   # written back without it
    assert_state_files_parse(folder)


def test_torn_last_lines_are_reported_and_the_rest_is_kept(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    complete = urls_in(folder / CRAWLED)
    with open(folder / CRAWLED, "a") as f:
        f.write(site.url("/p0") + "\t200\ttext/ht")          # power loss mid-write: no newline
    with open(folder / QUEUE, "a") as f:
        f.write(site.url("/p6") + "\t1\t0")
    result = crawl(projects_dir, "p", "--max-pages", "100")
    assert result.stderr.count("torn last line") == 2, result.stderr
    assert set(complete) <= set(urls_in(folder / CRAWLED))
    assert_state_files_parse(folder)


def test_duplicate_lines_and_spellings_in_queue_txt_are_fetched_once(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    with open(folder / QUEUE, "a") as f:
        for spelling in ("/p6", "/p6", "/p6#frag", "/./p6", "/p6?utm_source=x", "/x/../p6"):
            f.write(site.url(spelling) + "\n")
        f.write(f"HTTP://127.0.0.1:{site.port}/p6\n")
    crawl(projects_dir, "p", "--max-pages", "100")
    assert page_hits(site)["/p6"] == 1
    assert urls_in(folder / CRAWLED).count(site.url("/p6")) == 1


def test_a_url_in_two_state_files_is_not_fetched_again(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    done = urls_in(folder / CRAWLED)
    with open(folder / QUEUE, "a") as f:   # crawled and pending at once
        f.writelines(u + "\n" for u in done)
    with open(folder / "failed.txt", "a") as f:   # crawled and failed at once
        f.write(f"{done[0]}\t404\t0\t2026-01-01T00:00:00Z\n")
    result = crawl(projects_dir, "p", "--max-pages", "100")
    assert "warning" not in result.stderr
    assert all(n == 1 for n in page_hits(site).values()), page_hits(site)   # none fetched again
    assert urls_in(folder / QUEUE) == []
    status = cli(projects_dir, "status", "p")
    assert status.returncode == 0
    assert re.search(r"^failed\s+1", status.stdout, re.M)   # the hand-made double is counted, not refused


def test_missing_state_files_are_recreated(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    for name in ("claims.txt", "failed.txt", "rejected.txt", "hosts.txt", "fetch.log", "frontier.txt",
                 "frontier.lock", "crawl.lock"):
        (folder / name).unlink(missing_ok=True)
    result = crawl(projects_dir, "p", "--max-pages", "100")
    assert "warning" not in result.stderr
    assert set(page_hits(site).values()) == {1} and len(page_hits(site)) == 6   # nothing fetched twice
    for name in ("claims.txt", "failed.txt", "rejected.txt", "hosts.txt", "fetch.log"):
        assert (folder / name).is_file(), name
    assert_state_files_parse(folder)


def test_missing_settings_txt_means_no_project(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    (folder / "settings.txt").unlink()
    result = cli(projects_dir, "crawl", "p")
    assert result.returncode == 2 and "give at least one START_URL" in result.stderr
    assert "no project named" in one_error(cli(projects_dir, "status", "p"))


def _without_root_powers(scratch: Path) -> Optional[list[str]]:
    """A command prefix under which chmod is obeyed: none needed for a normal user; as root,
    ``setpriv`` dropping CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH; None when neither works."""
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]
    locked = scratch / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        probe = subprocess.run([*prefix, sys.executable, "-c", f"open({str(locked / 'x')!r}, 'w')"],
                               capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    finally:
        locked.chmod(0o755)
    return prefix if probe.returncode != 0 and not (locked / "x").exists() else None


def test_read_only_project_folder(projects_dir: Path, site: TestSite, tmp_path: Path) -> None:
    prefix = _without_root_powers(tmp_path)
    if prefix is None:
        pytest.skip("running as root without setpriv: chmod 0o555 does not stop root's writes "
                    "(test_a_state_file_that_cannot_be_opened_* covers the same failure path)")
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    files = [p for p in folder.iterdir() if p.is_file()]
    before = {p.name: p.read_bytes() for p in files}
    for p in files:
        p.chmod(0o444)
    folder.chmod(0o555)
    try:
        main = [*prefix, sys.executable, MAIN]
        line = one_error(cli(projects_dir, "crawl", "p", "--max-pages", "100", "--delay", "0", argv0=main))
        assert "Permission denied" in line
        report = cli(projects_dir, "status", "p", argv0=main)   # reading still works
        assert report.returncode == 0 and re.search(r"^pending\s+4", report.stdout, re.M), report.stdout
    finally:
        folder.chmod(0o755)
        for p in files:
            p.chmod(0o644)
    assert page_hits(site) == {"/": 1, "/p0": 1}
    assert {p.name: p.read_bytes() for p in files} == before


@pytest.mark.parametrize("name", ["crawled.txt", "queue.txt", "claims.txt", "hosts.txt", "frontier.lock"])
def test_a_state_file_that_cannot_be_opened_at_start_is_a_clear_error(projects_dir: Path, site: TestSite, name: str) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    aside = folder.parent / (name + ".aside")
    if (folder / name).exists():
        (folder / name).rename(aside)
    (folder / name).mkdir()   # unwritable and unreadable as a file, even for root
    line = one_error(crawl(projects_dir, "p", "--max-pages", "100", ok=False))
    assert name in line and "Is a directory" in line
    assert page_hits(site) == {"/": 1, "/p0": 1}
    (folder / name).rmdir()
    if aside.exists():
        aside.rename(folder / name)
    crawl(projects_dir, "p", "--max-pages", "100")   # nothing was damaged: the crawl goes on
    assert len(page_hits(site)) == 6


def test_a_log_that_cannot_be_written_mid_crawl_stops_it_and_loses_nothing(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    (folder / "fetch.log").unlink()
    (folder / "fetch.log").mkdir()   # workers fail on their first request
    result = crawl(projects_dir, "p", "--max-pages", "100", workers=2, ok=False)
    assert result.returncode == 1
    assert error_lines(result) and all("fetch.log: Is a directory" in line or "could not write" in line
                                       for line in error_lines(result)), result.stderr
    (folder / "fetch.log").rmdir()
    crawl(projects_dir, "p", "--max-pages", "100")
    assert {site.url(p) for p in ("/",)} | {site.url(f"/p{i}") for i in range(5)} == set(urls_in(folder / CRAWLED))
    assert max(page_hits(site).values()) <= 2   # at most the pages in flight were fetched twice
    assert_state_files_parse(folder)


def test_unreadable_settings_txt_is_a_clear_error(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    (folder / "settings.txt").unlink()
    (folder / "settings.txt").mkdir()
    line = one_error(cli(projects_dir, "crawl", "p"))
    assert "settings.txt" in line and "Is a directory" in line
    assert "settings.txt" in one_error(cli(projects_dir, "status", "p"))


def _only_enospc_on(folder: Path, monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]) -> None:
    """``os.write`` fails with ENOSPC for files in ``folder`` named ``names``, like a full disk."""
    real = os.write

    def write(fd: int, data) -> int:  # type: ignore[no-untyped-def]
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target.startswith(str(folder)) and Path(target).name in names:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd to tell files apart")
def test_full_disk_in_the_store_is_a_store_error_and_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileStore(tmp_path, owner=1).open()
    store.add([QueueEntry("http://a.test/1"), QueueEntry("http://a.test/2")])
    [claim] = store.claim(1, 0.0, lambda host: 0.0).claims
    crawled_before = (tmp_path / CRAWLED).read_bytes()
    with monkeypatch.context() as m:
        _only_enospc_on(tmp_path, m, (CRAWLED, QUEUE, "claims.txt", REJECTED))
        with pytest.raises(StoreError, match="No space left on device"):
            store.settle(claim, "crawled", record=crawled_line(claim.url, 200, "text/html", 1, 0, 0.0))
        with pytest.raises(StoreError, match="No space left on device"):
            store.add([QueueEntry("http://a.test/3")])
        with pytest.raises(StoreError, match="No space left on device"):
            store.log("rejected", "http://a.test/x\tscope\t-\n")
    assert (tmp_path / CRAWLED).read_bytes() == crawled_before   # no partial line
    rep = recover(tmp_path, lambda url, depth: None)               # the next run
    assert rep.problems == []
    assert [parse_queue_line(x).url for x in (tmp_path / QUEUE).read_text().splitlines() if is_data(x)] == \
        ["http://a.test/1", "http://a.test/2"]                     # the claim is pending again


ENOSPC_WRAPPER = """
import errno, os, sys
sys.path.insert(0, {root!r})
real = os.write
def write(fd, data):
    try:
        target = os.readlink(f"/proc/self/fd/{{fd}}")
    except OSError:
        target = ""
    if target.endswith("/crawled.txt") and not bytes(data).startswith(b"#"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real(fd, data)
os.write = write
sys.argv[0] = "spider"
from spider.cli import main
main()
"""


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd to tell files apart")
def test_full_disk_during_a_crawl_stops_it_with_a_message_and_the_rerun_loses_nothing(
        projects_dir: Path, site: TestSite, tmp_path: Path) -> None:
    _five_pages(site)
    wrapper = tmp_path / "enospc.py"
    wrapper.write_text(ENOSPC_WRAPPER.format(root=str(Path(MAIN).parent)))
    result = cli(projects_dir, "crawl", "p", site.url("/"), "--workers", "2", "--delay", "0", *FAST,
                 argv0=[sys.executable, str(wrapper)])
    assert result.returncode == 1
    errors = error_lines(result)
    assert errors and any("No space left on device" in line for line in errors), result.stderr
    folder = projects_dir / "p"
    assert urls_in(folder / CRAWLED) == []
    crawl(projects_dir, "p")   # the disk has room again
    assert set(urls_in(folder / CRAWLED)) == {site.url("/")} | {site.url(f"/p{i}") for i in range(5)}
    assert max(page_hits(site).values()) <= 2
    assert_state_files_parse(folder)


def test_garbage_in_the_claim_journal_is_ignored_by_recovery(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    with open(folder / "claims.txt", "a") as f:
        f.write("C\tnot\ta\tclaim\nD\nH\tgarbage\tx\nZ whatever\n\x00\x01\n")
    crawl(projects_dir, "p", "--max-pages", "100")
    assert set(page_hits(site).values()) == {1} and len(page_hits(site)) == 6
    assert_state_files_parse(folder)


def test_status_with_garbage_in_claims_txt_still_reports(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    with open(folder / "claims.txt", "a") as f:
        f.write("C\tnot\ta\tclaim\nD\nH\tgarbage\tx\n")
    result = cli(projects_dir, "status", "p")
    assert result.returncode == 0 and re.search(r"^pending\s+4", result.stdout, re.M), result.stderr


def test_non_finite_retry_time_in_queue_txt_does_not_stall_the_crawl(tmp_path: Path, site: TestSite) -> None:
    site.route("/", body=html())
    (tmp_path / QUEUE).write_text(f"{site.url('/')}\t0\t0\tinf\t-\n")
    recover(tmp_path, lambda url, depth: None)
    store = FileStore(tmp_path, owner=1).open()
    clock = FakeClock()
    spider = Spider(CrawlConfig(seeds=(site.url("/"),), delay=0.0, ignore_robots=True, connect_timeout=1.0,
                                read_timeout=1.0, max_time=2.0), store, clock=clock, wait=clock.wait)
    try:
        calls = itertools.count()
        spider.run(lambda: next(calls) > 500)
        assert next(calls) <= 501, "the worker never finished: it waits for not_before = inf"
    finally:
        spider.close()
    bad = rows(tmp_path / REJECTED)
    assert len(bad) == 1 and "not_before" in bad[0][1], bad
    assert site.hits == {}   # reported and set aside, not crawled


# =========================================================================== CLI


@pytest.mark.parametrize("args, says", [
    (["--max-depth", "-1"], "--max-depth"),
    (["--max-bytes", "0"], "--max-bytes"),
    (["--max-bytes", "1e3"], "--max-bytes"),
    (["--connect-timeout", "0"], "--connect-timeout"),
    (["--read-timeout", "-1"], "--read-timeout"),
    (["--max-time", "0"], "--max-time"),
    (["--max-attempts", "0"], "--max-attempts"),
    (["--max-redirects", "-1"], "--max-redirects"),
    (["--max-links", "-1"], "--max-links"),
    (["--max-pages-per-host", "0"], "--max-pages-per-host"),
    (["--max-delay", "-1"], "--max-delay"),
    (["--workers", "257"], "--workers"),
    (["--workers", "abc"], "--workers"),
    (["--delay", "soon"], "--delay"),
    (["--max-pages", "-5"], "--max-pages"),
    (["--delay"], "--delay"),
])
def test_option_values_out_of_range_are_usage_errors(projects_dir: Path, args: list[str], says: str) -> None:
    result = cli(projects_dir, "crawl", "new", "http://127.0.0.1:9/", *args)
    assert result.returncode == 2 and says in result.stderr and "Usage:" in result.stderr, result.stderr
    assert list(projects_dir.iterdir()) == []


@pytest.mark.parametrize("args, says", [
    (["--delay", "5", "--max-delay", "1"], "--max-delay (1) must not be below --delay (5)"),
    (["--delay", "inf"], "finite"),
    (["--delay", "1e309"], "finite"),
])
def test_inconsistent_delays_are_an_error(projects_dir: Path, args: list[str], says: str) -> None:
    assert says in one_error(cli(projects_dir, "crawl", "new", "http://127.0.0.1:9/", *args))
    assert not (projects_dir / "new" / "settings.txt").exists()


@pytest.mark.parametrize("url, says", [
    ("http://127.0.0.1:99999/", "port"),
    ("http://127.0.0.1:abc/", "port"),
    ("http://[::1/", "START_URL"),
    ("javascript:alert(1)", "START_URL"),
    ("file:///etc/passwd", "START_URL"),
])
def test_hostile_start_urls(projects_dir: Path, url: str, says: str) -> None:
    assert says in one_error(cli(projects_dir, "crawl", "new", url))
    assert list(projects_dir.iterdir()) == []


def test_projects_dir_that_is_a_file_or_under_a_file(tmp_path: Path) -> None:
    a_file = tmp_path / "projects"
    a_file.write_text("not a folder\n")
    result = cli(a_file, "crawl", "p", "http://127.0.0.1:9/")
    assert result.returncode == 2 and "is a file" in result.stderr
    line = one_error(cli(a_file / "sub", "crawl", "p", "http://127.0.0.1:9/", cwd=tmp_path))
    assert "Not a directory" in line
    assert a_file.read_text() == "not a folder\n"


NON_FINITE = [("--delay", "nan"), ("--max-delay", "nan"), ("--connect-timeout", "nan"), ("--read-timeout", "inf"),
              ("--max-time", "inf"), ("--max-time", "nan")]


@pytest.mark.parametrize("option, value", NON_FINITE, ids=[f"{o}={v}" for o, v in NON_FINITE])
def test_non_finite_numbers_are_refused(projects_dir: Path, site: TestSite, option: str, value: str) -> None:
    # click.FloatRange lets nan and inf through (before commit 783e719: --delay nan turned politeness off,
    # --max-delay nan crashed with a traceback, nan/inf timeouts failed every URL as internal errors)
    site.route("/", body=html())
    line = one_error(cli(projects_dir, "crawl", "p", site.url("/"), option, value, "--workers", "1"))
    assert option[2:].replace("-", "_") in line and "finite" in line
    assert site.hits == {} and list(projects_dir.iterdir()) == []


def test_non_finite_number_in_settings_txt_is_refused(projects_dir: Path, site: TestSite) -> None:
    _five_pages(site)
    folder = _stopped_after(projects_dir, site)
    with open(folder / "settings.txt", "a") as f:
        f.write("delay = nan\n")
    assert "finite" in one_error(cli(projects_dir, "crawl", "p"))
    assert page_hits(site) == {"/": 1, "/p0": 1}


@pytest.mark.parametrize("agent", ["bot\r\nX-Injected: 1", "bot\nworkers = 7", " leading-space", "tab\tbot", ""],
                         ids=["crlf", "newline-injects-a-setting", "leading-space", "tab", "empty"])
def test_user_agent_with_control_characters_is_refused(projects_dir: Path, site: TestSite, agent: str) -> None:
    # before commit 783e719 such agents were accepted: every request failed as 'invalid request', robots.txt
    # counted as unavailable (a 5-minute pause per attempt), and the newline broke settings.txt
    site.route("/", body=html())
    line = one_error(cli(projects_dir, "crawl", "p", site.url("/"), "--user-agent", agent, "--workers", "1"))
    assert "user_agent" in line
    assert site.hits == {} and list(projects_dir.iterdir()) == []


def test_user_agent_that_is_not_latin1_is_refused(projects_dir: Path, site: TestSite) -> None:
    # at f78bc73 it was accepted and every request failed ('invalid response'; with robots.txt obeyed,
    # 'robots.txt unavailable': a 5-minute pause per attempt, ~10 minutes of nothing, then all failed)
    site.route("/", body=html())
    result = cli(projects_dir, "crawl", "p", site.url("/"), "--user-agent", "蜘蛛/1.0", "--workers", "1",
                 "--delay", "0", "--ignore-robots")
    assert "user_agent" in one_error(result)
    assert site.hits == {} and list(projects_dir.iterdir()) == []


@pytest.mark.parametrize("option, pattern", [("--deny", "zzz\nworkers = 7"), ("--allow", "a\rb")],
                         ids=["deny-newline-injects-a-setting", "allow-cr-breaks-settings"])
def test_allow_deny_with_a_line_break_cannot_corrupt_settings_txt(projects_dir: Path, site: TestSite,
                                                                   option: str, pattern: str) -> None:
    # at f78bc73 the pattern was saved as it is: --deny $'zzz\nworkers = 7' left a line 'workers = 7'
    # in settings.txt (the resumed crawl got another pattern and 7 workers); --allow $'a\rb' left a
    # line 'b' that made every later `crawl p` fail with "expected 'key = value'"
    from spider import config as settings
    site.route("/", body=html())
    result = cli(projects_dir, "crawl", "p", site.url("/"), option, pattern, "--workers", "1", "--delay", "0")
    if result.returncode != 0:
        assert option[2:] in one_error(result)
        return
    saved = settings.load(projects_dir / "p")
    assert saved[option[2:]] == (pattern,) and saved["workers"] == 1, saved


# =========================================================================== security


def test_nothing_outside_scope_or_http_is_ever_requested(projects_dir: Path, site: TestSite, make_site) -> None:
    other = make_site("127.0.0.2")
    for path in ("/", "/x", "/robots.txt", "/based", "/rel", "/v"):
        other.route(path, body=html("/x"))
    o = other.url("")[:-1]   # http://127.0.0.2:PORT
    site.route("/robots.txt", status=301, headers={"Location": o + "/robots.txt"})   # robots.txt off scope too
    site.route("/", body=html(
        o + "/", "//" + o.split("//")[1] + "/x", f"HTTP://127.0.0.2:{other.port}/v",
        f"http://127.0.0.1:{site.port}@127.0.0.2:{other.port}/", f"http://localhost:{other.port}/",
        f"ftp://127.0.0.2:{other.port}/", f"gopher://127.0.0.2:{other.port}/", "file:///etc/passwd",
        "javascript:location='" + o + "/'", "data:text/html;base64,PGEgaHJlZj0iLyI+eDwvYT4=",
        "/to-other", "/to-other-rel", "/to-userinfo", "/to-backslash", "/to-file", "/to-ftp", "/to-data",
        "/base.html", head=(f'<meta http-equiv="refresh" content="0; url={o}/refresh">'
                            f'<link rel="canonical" href="{o}/canonical"><link rel="next" href="{o}/next">')
        + f'<iframe src="{o}/frame"></iframe><img src="{o}/img"><form action="{o}/form"></form>'
        f'<script src="{o}/script"></script>'))
    site.add_redirect("/to-other", o + "/x", status=302)
    site.add_redirect("/to-other-rel", "//" + o.split("//")[1] + "/rel", status=307)
    site.add_redirect("/to-userinfo", f"http://127.0.0.1:{site.port}@127.0.0.2:{other.port}/x", status=301)
    site.add_redirect("/to-backslash", f"http://127.0.0.2:{other.port}\\@127.0.0.1:{site.port}/bs", status=301)
    site.add_redirect("/to-file", "file:///etc/passwd", status=302)
    site.add_redirect("/to-ftp", f"ftp://127.0.0.2:{other.port}/x", status=302)
    site.add_redirect("/to-data", "data:text/html,hello", status=302)
    site.route("/base.html", body=html("rel", "/abs", head=f'<base href="{o}/based">'))
    site.route("/bs", body=html())
    folder = projects_dir / "p"
    crawl(projects_dir, "p", site.url("/"), workers=2)
    assert other.hits == {}, other.hits
    for line in (folder / "fetch.log").read_text().splitlines():
        assert host_key(line.split("\t")[-1]) == f"127.0.0.1:{site.port}", line
    failed_ = {r[0]: r[1] for r in rows(folder / "failed.txt")}
    assert {failed_[site.url(p)] for p in ("/to-file", "/to-ftp", "/to-data")} == {"redirect to a non-http URL"}
    refused = {r[0]: r[1] for r in rows(folder / REJECTED)}
    for url in (o + "/", o + "/x", o + "/rel", o + "/abs", f"http://localhost:{other.port}/", o + "/v"):
        assert refused.get(url) == "scope", (url, refused)
    # a backslash is a slash, as in browsers: the redirect is to 127.0.0.2 (path /@127.0.0.1:.../bs), refused
    assert refused.get(f"{o}/@127.0.0.1:{site.port}/bs") == "scope", refused
    assert "/bs" not in page_hits(site)
    assert_state_files_parse(folder)


@pytest.mark.parametrize("name", ["/tmp/abs", "..", "../../etc", "a/../../b", "a\\..\\b", "line\nbreak", "tab\there",
                                  ".hidden", "nul\x7fdel"],
                         ids=["absolute", "dotdot", "dotdot-deep", "embedded-dotdot", "backslashes", "newline",
                              "tab", "leading-dot", "del"])
def test_project_name_cannot_escape_the_projects_folder(projects_dir: Path, tmp_path: Path, name: str) -> None:
    for command in (["crawl", name, "http://127.0.0.1:9/"], ["status", name]):
        assert "NAME" in one_error(cli(projects_dir, *command))
    assert list(projects_dir.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["projects"]
    assert not Path("/tmp/abs").exists() or name != "/tmp/abs"


def test_symlink_planted_in_the_projects_folder_is_refused(projects_dir: Path, tmp_path: Path, site: TestSite) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "settings.txt").write_text(f"seed = {site.url('/')}\n")
    (projects_dir / "p").symlink_to(outside, target_is_directory=True)
    for command in (["crawl", "p"], ["crawl", "p", site.url("/")], ["status", "p"]):
        assert "symbolic link" in one_error(cli(projects_dir, *command))
    assert sorted(p.name for p in outside.iterdir()) == ["settings.txt"]
    assert site.hits == {}


def test_overlong_project_name_is_a_clear_error(projects_dir: Path) -> None:
    name = "a" * 300
    for command in (["crawl", name, "http://127.0.0.1:9/"], ["status", name]):
        assert "255 bytes" in one_error(cli(projects_dir, *command))
    assert list(projects_dir.iterdir()) == []


def test_nothing_from_a_page_can_break_a_state_file_line(projects_dir: Path, site: TestSite) -> None:
    hrefs = ["/a&#9;b", "/c&#10;d&#13;e", "/nul&#0;x", "/raw\tt\na\rb", "/vt\x0bff\x0c", "/ls\u2028nel\u0085",
             "/ctl\x01\x1f\x7f", "javascript:'\t\n'", f"http://127.0.0.1:{site.port}/%zz%",
             f"http://[::1]:{site.port}/v6", "http://bücher.example/\t", f"http://us\ter:p\nw@127.0.0.1:{site.port}/ui",
             "http://127.0.0.1:99999/", "/q?a=1\t&b=\n2", "/tab-in-reason", "/" + "L" * 100_000]
    body = ("<!DOCTYPE html><html><head><title>t\tt\nt</title></head><body>"
            + "".join(f'<a href="{h}">x</a>' for h in hrefs) + "</body></html>").encode() + b"<a href='/n\x00ul2'>x</a>"
    site.route("/", body=body)
    site.route("/tab-in-reason", raw=raw_response(b"HTTP/1.1 200 OK\r\nContent-Type: text/html;\tcharset=x\tq\r\n"
                                                  b"Content-Length: 14\r\n\r\n<html>x</html>"))
    folder = projects_dir / "p"
    crawl(projects_dir, "p", site.url("/"), "--max-attempts", "1", workers=2)
    assert_state_files_parse(folder)
    assert {"/ab", "/cde", "/rawtab", "/ui"} <= set(page_hits(site))
    assert cli(projects_dir, "status", "p").returncode == 0
