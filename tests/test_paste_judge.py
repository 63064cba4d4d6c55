"""``paste.judge_stretch``: a stretch of pasted lines judged at once gives what judging each line
as recovery does gives (the loop ``FileStore._judge_paste`` ran before, kept here as the
reference): the same URLs admitted in the same order and shape, the same rejected.txt lines
(bad lines with their line numbers, refusals with their reasons), the same table afterwards.
"""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spider.frontier import paste as pastes
from spider.config import CrawlConfig
from spider.frontier.files import _Staged
from spider.frontier.seen import SeenSet
from spider.scope import Admission, _PlainTest
from spider.records import QueueEntry, is_data, rejected_line
from spider.urls import host_key

from test_admission_shortcuts import RULES, URLS

HORIZON = time.time() + pastes.FAR_AHEAD


def one_by_one(data: bytes, first: int, seen: SeenSet, admit, *, cap=None, admitted=None, live=None,
               start: int = 0) -> pastes.Judged:
    """Each line judged on its own, in the order of the file (the reference)."""
    urls: list[str] = []
    lines: list[str] = []
    rejected: list[str] = []
    bad: list[tuple[int, str, str]] = []
    admitted = {} if admitted is None else admitted
    off, no = start, first
    for raw in data.split(b"\n")[:-1]:
        here, no = off, no + 1
        off += len(raw) + 1
        line = raw.decode("utf-8", "surrogateescape").rstrip("\r")
        if not is_data(line) or (live is not None and not live(here)):
            continue
        try:
            e = pastes.judge_line(line, True, HORIZON)
        except ValueError as err:
            rejected.append(rejected_line(pastes.shown(line), f"queue.txt:{no - 1}: {err}"))
            bad.append((no - 1, str(err), line))
            continue
        fp = seen.fingerprint(e.url)
        if e.kind != "recheck" and seen.has(fp):
            continue
        reason = admit(e.url, e.depth) if admit is not None else None
        if cap is not None:
            h = host_key(e.url)
            if reason is None and e.kind != "recheck" and admitted.get(h, 0) >= cap:
                reason = "host budget"
        if reason:
            rejected.append(rejected_line(e.url, reason, e.source))
            continue
        if seen.add_fingerprint(fp) and cap is not None:
            admitted[h] = admitted.get(h, 0) + 1
        urls.append(e.url)
        lines.append(e.line())
    return pastes.Judged(urls, lines, rejected, bad)


def refuse_some(url: str, depth: int) -> str | None:
    """Settings of a crawl: a deny pattern, a scope, a depth limit."""
    if "/no/" in url:
        return "deny"
    if "other.test" in url:
        return "scope"
    return "depth" if depth > 2 else None


POOL = [
    b"http://paste.test/p/1.html?v=1", b"http://paste.test/p/2.html", b"https://a.test/x", b"http://a.test:8080/y",
    b"http://paste.test/no/3", b"http://other.test/z", b"http://b.test/q?page=2",
    b"HTTP://Paste.test/p/1.html?v=1", b"http://a.test:80/x", b"http://a.test/b?utm_source=1&v=2",
    b"http://a.test/./c", b" http://a.test/sp ", b"http://a.test/crlf\r", b"http://A.test/no/4",
    b"http://xn--bcher-kva.test/", b"http://a.test/b?fbclid=1", b"http://a.test/%7e",
    b"garbage", b"ftp://a.test/", b"http://256.256.256.256/", b"http://a.test/\xff", b"http://a.test/\x00",
    "http://a.test/\u00e9".encode(), "http://b\u00fccher.test/".encode(), b"\xef\xbb\xbfhttp://a.test/bom",
    b"", b"   ", b"# a comment", b"\r",
    QueueEntry("http://a.test/t", 1, 0, 0.0, "http://a.test/").line().rstrip("\n").encode(),
    QueueEntry("http://a.test/deep", 3).line().rstrip("\n").encode(),
    QueueEntry("http://paste.test/p/2.html", 1, kind="recheck").line().rstrip("\n").encode(),
    b"HTTP://A.test/T\t2\t0\t0\t-",
    b"http://a.test/late\t0\t0\t99999999999\t-",
    b"http://a.test/bad\tx\t0\t0\t-",
]
KNOWN = ["http://paste.test/p/2.html", "http://a.test/x", "http://paste.test/no/3"]


def _both(lines: list[bytes], known: list[str], admit, cap, live_mod: int, first: int = 7, admit_many=None,
          staged: bool = False) -> None:
    data = b"".join(line + b"\n" for line in lines)
    seen_a, seen_b = SeenSet(known, stable=True), SeenSet(known, stable=True)
    budget_a: dict[str, int] = {"a.test": 1}
    budget_b = dict(budget_a)
    live = (lambda off: off % live_mod != 0) if live_mod else None
    judged = _Staged(seen_a) if staged else seen_a
    got = pastes.judge_stretch(data, first, judged, admit, cap=cap, admitted=budget_a, live=live,
                               start=1000, horizon=HORIZON, admit_many=admit_many)
    if staged:   # (the store writes the lines, then the table learns them)
        assert len(seen_a) == len(known)
        seen_a.add_many(judged.fresh)
    want = one_by_one(data, first, seen_b, admit, cap=cap, admitted=budget_b, live=live, start=1000)
    assert got == want
    assert budget_a == budget_b
    assert len(seen_a) == len(seen_b)
    every = {e for line in POOL for e in [line.decode("utf-8", "replace").strip()]} | set(want.urls)
    assert [u in seen_a for u in sorted(every)] == [u in seen_b for u in sorted(every)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(POOL), max_size=40), st.sampled_from([None, refuse_some]),
       st.sampled_from([None, 1, 2]), st.sampled_from([0, 0, 3, 7]))
def test_a_stretch_is_judged_as_its_lines_one_by_one(lines: list[bytes], admit, cap, live_mod: int) -> None:
    _both(lines, KNOWN, admit, cap, live_mod)


def test_every_kind_of_line_at_once() -> None:
    _both(POOL * 3, KNOWN, refuse_some, None, 0)
    _both(POOL * 3, KNOWN, refuse_some, 2, 0)
    _both(POOL[::-1] * 2, [], None, None, 5)


def test_bad_lines_keep_their_numbers_among_plain_ones() -> None:
    lines = [f"http://paste.test/p/{k}.html".encode() for k in range(1000)]
    lines[10], lines[500], lines[999] = b"garbage", b"http://a.test/\xff", b"ftp://x.test/"
    data = b"".join(line + b"\n" for line in lines)
    got = pastes.judge_stretch(data, 41, SeenSet(stable=True), refuse_some)
    assert [(no, line[:14]) for no, _, line in got.bad] == [(51, "garbage"), (541, "http://a.test/"), (1040, "ftp://x.test/")]
    assert [r.split("\t")[1].split(":")[:2] for r in got.rejected] == [["queue.txt", "51"], ["queue.txt", "541"],
                                                                       ["queue.txt", "1040"]]
    assert len(got.urls) == 997 and got.lines[0] == "http://paste.test/p/0.html\t0\t0\t0\t-\n"


def test_a_table_reserved_for_a_paste_keeps_its_members_and_takes_the_paste_without_growing() -> None:
    seen = SeenSet((f"http://a.test/{k}" for k in range(3000)), stable=True)
    seen.reserve(len(seen) + 20_000)
    size = seen.nbytes()
    assert all(f"http://a.test/{k}" in seen for k in range(3000)) and len(seen) == 3000
    assert sum(seen.add(f"http://b.test/{k}") for k in range(20_000)) == 20_000
    assert seen.nbytes() == size and len(seen) == 23_000 and "http://b.test/7" in seen
    seen.reserve(10)   # (never shrinks)
    assert seen.nbytes() == size


def test_fingerprints_in_one_call_are_those_of_one_key_at_a_time() -> None:
    keys = ["http://a.test/", "http://a.test/\u00e9", "x\udcff", ""] + [f"http://b.test/{k}" for k in range(100)]
    for seen in (SeenSet(stable=True), SeenSet()):
        assert seen.fingerprints(keys) == [seen.fingerprint(k) for k in keys]


def refuse_many(urls: list[str], depth: int) -> list[str | None]:
    return [refuse_some(url, depth) for url in urls]


def crawl_admission(rules, mode: str):
    """``admit`` and ``admit_many`` as spider/crawl.py gives them to the store, with ``rules``."""
    seeds = {"http://paste.test/", "https://a.test/x"}
    admission = Admission(CrawlConfig(seeds=tuple(sorted(seeds)), scope=mode), clock=lambda: 1796169600.0)
    admission.traps, admission._plain = rules, _PlainTest(rules)

    def admit(url: str, depth: int) -> str | None:
        return None if url in seeds else admission.check(url, depth)

    def admit_many(urls: list[str], depth: int) -> list[str | None]:
        reasons = admission.check_many(urls, depth)
        if not seeds.isdisjoint(urls):
            reasons = [None if url in seeds else r for url, r in zip(urls, reasons)]
        return reasons

    return admit, admit_many


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(POOL), URLS.map(str.encode)), max_size=40), st.sampled_from(RULES),
       st.sampled_from(["host", "domain", "prefix"]), st.sampled_from([None, 2]), st.booleans())
def test_runs_admitted_at_once_are_judged_as_each_line_alone(lines: list[bytes], rules, mode: str, cap,
                                                              staged: bool) -> None:
    admit, admit_many = crawl_admission(rules, mode)
    _both(lines, KNOWN, admit, cap, 0, admit_many=admit_many, staged=staged)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(POOL), max_size=40), st.sampled_from([None, refuse_some]), st.sampled_from([0, 3]))
def test_a_staged_table_judges_as_the_table_itself(lines: list[bytes], admit, live_mod: int) -> None:
    _both(lines, KNOWN, admit, None, live_mod, admit_many=refuse_many if admit else None, staged=True)


def test_every_kind_of_line_admitted_a_run_at_once() -> None:
    lines = POOL * 3 + [b"http://paste.test/", b"https://a.test/x", b"http://paste.test/p/" + b"a/" * 20]
    for rules in RULES:
        for mode in ("host", "domain", "prefix"):
            admit, admit_many = crawl_admission(rules, mode)
            _both(lines, KNOWN, admit, None, 0, admit_many=admit_many, staged=True)
            _both(lines, KNOWN, admit, None, 0, admit_many=admit_many)


def test_a_table_asked_and_filled_at_once_answers_as_one_at_a_time() -> None:
    members = [f"http://a.test/{k}" for k in range(0, 900, 3)]
    fps = [SeenSet(stable=True).fingerprint(f"http://a.test/{k % 700}") for k in range(2000)]
    one, many = SeenSet(members, stable=True), SeenSet(members, stable=True)
    assert many.has_many(fps) == [one.has(fp) for fp in fps]
    assert many.add_many(fps) == [one.add_fingerprint(fp) for fp in fps]
    assert len(many) == len(one) == 766 and many.has_many(fps) == [True] * 2000
    staged, alone = _Staged(SeenSet(members, stable=True)), _Staged(SeenSet(members, stable=True))
    assert staged.add_many(fps) == [alone.add_fingerprint(fp) for fp in fps]
    assert staged.fresh == alone.fresh and len(staged.fresh) == 466
    assert len(staged.table) == 300   # (the table learns them only when the store tells it)
