"""The stats.txt sampler's cost (spider/stats.py, spider/census.py): the crawl's parent samples
while the workers crawl, so it reads what the files gained in C, and works out the census
pattern once per URL shape, not once per line; and what it counts is what reading the lines one
by one counts (``StatsRecorder.take``, ``Census.add``), however the files grow between samples:
a line half written at a sample, a CR, comments and odd lines, a census past MAX_PATTERNS, a
resume from census.txt."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

import spider.census as census_mod
import spider.stats as stats_mod
from spider.census import pattern, url_patterns
from spider.stats import Census, StatsRecorder

LOGS = ("crawled", "rejected", "duplicates", "checks", "links")


def figures(rec: StatsRecorder) -> tuple:
    return rec.bytes, rec.duplicates, rec.checked, rec.seen_again, dict(sorted(rec.rejected.items()))


def line_by_line(texts: dict[str, bytes]) -> tuple:
    """What the sampler counted before it read in C: each whole line decoded, through ``take``."""
    rec = StatsRecorder(Path("/nonexistent"))
    rec.take({name: [x.decode("utf-8", "replace") for x in whole(text).splitlines()]
              for name, text in texts.items()})
    return figures(rec)


def whole(text: bytes) -> bytes:
    return text[:text.rfind(b"\n") + 1]


URLS = [
    b"http://a.test/p/1.html", b"http://a.test/p/22.html", b"https://a.test:8443/p/303.html",
    b"http://127.0.0.1:18801/p/4.html", b"http://127.0.0.2:18801/p/5.html", b"http://b.test/",
    b"http://b.test", b"http://b.test?x=1", b"http://b.test/cal/2031/05?view=week&day=3",
    b"http://b.test/cal/2032/11?view=day", b"http://b.test/cal/2031/05?v1=1", b"http://b.test/cal/2031/05?v2=1",
    b"http://c.test/item/5f2b9c0e41d7/r", b"http://c.test/item/5f2b9c0e41d8/r", b"http://c.test/item/5f2b9c0e41dz/r",
    b"http://c.test/item/12345678/r", b"http://c.test/u/123e4567-e89b-12d3-a456-426614174000",
    b"http://c.test/u/123e4567-e89b-12d3-a456-42661417400g", b"http://d.test/a1b2c3d4e5", b"http://d.test/a1b2c3d4e6",
    b"http://d.test/\xd9\xa3\xd9\xa4/x", b"http://d.test/caf\xc3\xa9/9", b"http://d.test/bad\xff\xfe/7",
    b"http://d.test/\xe2\x82/1", b"http://d.test/x://y/2", b"ftp://e.test/f/3", b"e.test/no/scheme/4",
    b"http://e.test?q=1/2", b"http://e.test/a?b?c=1", b"", b"http://f.test/p/9 ", b"http://b.test/bal/2031/05",
    b"http://b.test/cal/2031/05", b"http://c.test/item/5f2b9c0e41d7/s", b"http://c.test/item/5f2b9c0e41d7/r?a",
]


def random_url(rnd: random.Random, bases: list[bytes] = URLS) -> bytes:
    base = rnd.choice(bases)
    return re.sub(rb"\d", lambda m: str(rnd.randrange(10)).encode(), base) if rnd.random() < 0.7 else base


def test_url_patterns_are_pattern_of_each_url():
    """By shape when the URLs share shapes (drawn from a few of URLS), one by one when not."""
    rnd = random.Random(15)
    for _ in range(300):
        bases = rnd.sample(URLS, rnd.choice([2, 4, 8, len(URLS)]))
        urls = [random_url(rnd, bases) for _ in range(rnd.randrange(1, 60))]
        assert url_patterns(urls) == [pattern(u.decode("utf-8", "replace")) for u in urls], urls
    assert url_patterns([]) == []
    assert url_patterns([b"http://a.test/x\ny/1"]) == [pattern("http://a.test/x\ny/1")]   # a newline: one by one


ONE_HOST = [b"http://a.test/p/1.html", b"http://a.test/p/22.html", b"http://a.test/x://b.test/3", b"http://a.test",
            b"http://a.test.b/p/4.html", b"http://a.tes/p/5.html", b"https://a.test/p/6.html", b"http://a.test:80/p/7",
            b"a.test/p/8", b"a.test/x://c.test/9", b"ftp://a.test/p/1", b"http://a.test/p/caf\xc3\xa9/2",
            b"http://A.test/p/3", b"http://a.test//p/4", b"x://y://a.test/5", b"x://y://a.test/6", b"x://y:/7"]


def test_the_urls_of_one_host_are_told_apart_from_others_without_a_findall(monkeypatch):
    """One count in C says that all the URLs begin with the first one's scheme, host and "/" (the
    bench's census: one site); else the hosts are found as before. Either way, ``pattern`` of each."""
    found = []

    class Counted:
        def __init__(self, rx):
            self.rx = rx

        def match(self, text):
            return self.rx.match(text)

        def findall(self, text):
            found.append(len(text))
            return self.rx.findall(text)
    monkeypatch.setattr(census_mod, "_HOST", Counted(census_mod._HOST))
    rnd = random.Random(7)
    for _ in range(400):
        first = rnd.choice(ONE_HOST)
        others = rnd.sample(ONE_HOST, rnd.choice([1, 2, 3]))
        urls = [random_url(rnd, [first])] + [random_url(rnd, [first] * 8 + others) for _ in range(rnd.randrange(1, 40))]
        assert url_patterns(urls) == [pattern(u.decode("utf-8", "replace")) for u in urls], urls
    # The first URL has no "://": another's host may be after one further on (c2.test, c3.test).
    for urls in ([b"a1.test/p/8", b"a1.test/x://c2.test/9", b"a1.test/x://c3.test/9", b"a1.test/x://c2.test/8",
                  b"a1.test/x://c3.test/7"], [b"http://h1.test/a", b"http://h1.test/a", b"http://h2.test/a"]):
        assert url_patterns(urls) == [pattern(u.decode()) for u in urls]
    found.clear()
    urls = [b"http://127.0.0.1:18801/p/%d.html" % i for i in range(2000)] + [b"http://127.0.0.1:18801/hub/1.html"]
    assert url_patterns(urls) == [pattern(u.decode()) for u in urls]
    assert found == []


def test_the_census_works_a_pattern_out_once_per_url_shape(tmp_path: Path, monkeypatch):
    """2,000 numbered pages queued and 1,000 claimed: a few calls of ``pattern`` (the parent used
    to call it for every line of queue.txt and claims.txt, 40% of what sampling cost it)."""
    calls = []

    def counted(url: str) -> str:
        calls.append(url)
        return pattern(url)
    monkeypatch.setattr(census_mod, "pattern", counted)
    monkeypatch.setattr(stats_mod, "pattern", counted)
    host = "http://127.0.0.1:18801"
    (tmp_path / "queue.txt").write_text("# url\tdepth\n" + "".join(f"{host}/p/{i}.html\t2\t0\t0\t{host}/hub/{i % 9}.html\n"
                                                                     for i in range(2000)))
    rec = StatsRecorder(tmp_path)
    assert rec.sample(2000, 0, 0, 0, 0, when=1.0).split("\t")[9:11] == ["127.0.0.1:18801/p/{n}.html", "2000"]
    (tmp_path / "claims.txt").write_text("".join(f"C\t0\t0\t7\t0\t{host}/p/{i}.html\t2\t0\t0\t-\nD\tcrawled\t{host}/p/{i}.html\n"
                                                 for i in range(1000)))
    assert rec.sample(1000, 0, 1000, 0, 0, when=2.0).split("\t")[9:11] == ["127.0.0.1:18801/p/{n}.html", "1000"]
    assert len(calls) <= 8, len(calls)   # one per shape (1 to 4 digits) and read


def test_the_logs_are_counted_in_c_not_line_by_line(tmp_path: Path, monkeypatch):
    """Only the lines that may not be data (a comment, a blank line) are read one by one."""
    seen: list[str] = []
    take = StatsRecorder.take

    def counted(self, logs):  # type: ignore[no-untyped-def]
        logs = {k: list(v) for k, v in logs.items()}
        seen.extend(x for v in logs.values() for x in v)
        return take(self, logs)
    monkeypatch.setattr(StatsRecorder, "take", counted)
    u = "http://a.test/p"
    (tmp_path / "crawled.txt").write_text("# url\tstatus\n" + "".join(f"{u}/{i}\t200\ttext/html\t{i}\t1\tT\n" for i in range(500)))
    (tmp_path / "links.txt").write_text("".join(f"{u}/{i}\t3\t2\t{u}/a {u}/b {u}/c\n" for i in range(500)) + "\n")
    (tmp_path / "rejected.txt").write_text("".join(f"{u}/x{i}\tscope\t{u}/{i}\n" for i in range(500)))
    (tmp_path / "duplicates.txt").write_text("".join(f"{u}/d{i}\tduplicate\t{u}/{i}\n" for i in range(500)))
    rec = StatsRecorder(tmp_path)
    rec.sample(0, 0, 500, 0, 0, when=1.0)
    assert figures(rec) == (sum(range(500)), 500, 0, 1000, {"scope": 500})
    assert seen == ["# url\tstatus"]


ODD_LOG_LINES = {
    "crawled": ["# url\tstatus\tcontent_type\tbytes", "", "   ", "\ufeffhttp://a.test/bom\t200\tt\t7\t1",
                " http://a.test/sp\t200\tt\t11", "http://a.test/short\t200\tt", "http://a.test/e\t200\tt\t\t1",
                "http://a.test/x\t200\tt\t12x\t1", "http://a.test/ar\t200\tt\t\u0663\u0664\t1", "\u00e9t\u00e9\t200\tt\t5",
                "http://a.test/q\t200\tt\t1\x0b2", "#http://a.test/c\t200\tt\t99"],
    "rejected": ["# url_or_line\treason", "http://a.test/n", "http://a.test/e\t", "http://a.test/s\t scope \tx",
                 "http://a.test/b\tbad queue line: empty", "x\tqueue.txt:3: not a URL", "y\tmax-links: 100 of 120",
                 "z\tscope\u00a0", "\u00e9\tdepth", "  \tdepth", "w\tscop\xe9", "#c\tscope", "v\tdepth\t\t"],
    "duplicates": ["# url\tkind", "", " ", "http://a.test/d\tduplicate", "\ufeff", "\ufeffx", "\u00e9", "\x0c"],
    "checks": ["# url\tresult", "http://a.test/c\tchanged", "", "\t"],
    "links": ["# url\tlinks\tseen", "http://a.test/l\t2\t5\thttp://a.test/x http://a.test/y", "http://a.test/m\t1",
              "http://a.test/m\t1\t", "http://a.test/m\t1\t4", " http://a.test/s\t1\t3\tx", "\u00e9\t1\t6\tx",
              "http://a.test/ar\t1\t\u0663\tx", "", "#\t1\t8", "http://a.test/o\t1\t2x\tx"],
}


def random_log(rnd: random.Random, name: str, cr: bool) -> bytes:
    lines = []
    for _ in range(rnd.randrange(20, 120)):
        if rnd.random() < 0.3:
            line = rnd.choice(ODD_LOG_LINES[name])
        else:
            line = rnd.choice(ODD_LOG_LINES[name][1:])
            line = re.sub(r"\d+", lambda m: str(rnd.randrange(1000)), line)
        lines.append(line.encode("utf-8") + rnd.choice([b"\n"] * 12 + [b"\r\n", b"\r"] * cr))
    raw = b"".join(lines)
    if rnd.random() < 0.2:   # a byte that is not UTF-8
        i = rnd.randrange(len(raw))
        raw = raw[:i] + b"\xff" + raw[i:]
    return raw


@pytest.mark.parametrize("seed", range(12))
def test_the_logs_count_as_line_by_line_however_they_grow(tmp_path: Path, seed: int):
    """Each log grows by pieces that cut lines anywhere (a line half written at a sample waits
    for the next one), with comments, blank and odd lines, CRs, bytes that are not UTF-8: every
    sample counts what ``take`` counts of the whole lines so far (seeds 0 to 3: no CR)."""
    rnd = random.Random(seed)
    full = {name: random_log(rnd, name, cr=seed > 3) for name in LOGS}
    written = dict.fromkeys(LOGS, 0)
    rec = StatsRecorder(tmp_path)
    for step in range(8):
        for name in LOGS:
            end = len(full[name]) if step == 7 else min(len(full[name]), written[name] + rnd.randrange(0, 400))
            with open(tmp_path / f"{name}.txt", "ab") as f:
                f.write(full[name][written[name]:end])
            written[name] = end
        rec.sample(0, 0, 0, 0, 0, when=float(step))
        assert figures(rec) == line_by_line({n: full[n][:written[n]] for n in LOGS}), step


def test_a_line_half_written_at_a_sample_counts_once_whole(tmp_path: Path):
    links = tmp_path / "links.txt"
    links.write_bytes(b"http://a.test/1\t2\t5\thttp://a.test/x http://a.te")
    rec = StatsRecorder(tmp_path)
    rec.sample(0, 0, 0, 0, 0, when=1.0)
    assert rec.seen_again == 0
    with links.open("ab") as f:
        f.write(b"st/y\nhttp://a.test/2\t1\t1")
    rec.sample(0, 0, 0, 0, 0, when=2.0)
    assert rec.seen_again == 5
    with links.open("ab") as f:
        f.write(b"0\t\n")
    rec.sample(0, 0, 0, 0, 0, when=3.0)
    assert rec.seen_again == 15


class LineByLineCensus:
    """The census as the sampler took it one line at a time: at each sample the new whole lines of
    queue.txt (+1 each), then the new C records of claims.txt (-1 each), through ``Census.add``."""

    def __init__(self) -> None:
        self.census = Census()
        self.at = {"queue": 0, "claims": 0}
        self.rechecks, self.flight, self.refused = 0, set(), 0

    def sample(self, queue: bytes, claims: bytes) -> dict[str, int]:
        new = whole(queue)[self.at["queue"]:]
        self.at["queue"] += len(new)
        for link in re.findall(rb"^https?://[^\t\n]*", new, re.M):
            self.census.add(link.strip().decode("utf-8", "replace"), 1)
        self.rechecks += len(re.findall(rb"\trecheck\r?$", new, re.M))
        new = whole(claims)[self.at["claims"]:]
        self.at["claims"] += len(new)
        for rec in new.splitlines():
            parts = rec.split(b"\t", 6)
            if rec.startswith(b"C\t") and len(parts) > 5:
                self.census.add(parts[5].strip().decode("utf-8", "replace"), -1)
                if rec.endswith(b"\trecheck"):
                    self.rechecks -= 1
                    self.flight.add(parts[5].strip().decode("utf-8", "replace"))
            elif rec.startswith(b"D\t"):
                _, what, url = (rec.decode("utf-8", "replace").split("\t", 2) + ["", ""])[:3]
                if url in self.flight:
                    self.flight.discard(url)
                    self.refused += what == "rejected"
        return dict(self.census.counts)

    def known_again(self) -> int:
        return max(0, self.rechecks) + len(self.flight) + self.refused


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("max_patterns", [3, 20000])
def test_the_census_counts_as_line_by_line_however_the_files_grow(tmp_path: Path, monkeypatch, seed: int,
                                                                  max_patterns: int):
    """queue.txt and claims.txt grow by pieces cut anywhere; claims of URLs the census has not
    counted in (a claim read before its queue line, a journal edited by hand) take counts below
    zero, where counting a pattern's URLs at once would differ from one by one; and past
    MAX_PATTERNS new patterns count as "(other)"; rechecks are claimed and settled: the census is
    the line-by-line one at every sample (seeds 0 to 4: no CR in the journal)."""
    monkeypatch.setattr(stats_mod, "MAX_PATTERNS", max_patterns)
    rnd = random.Random(seed)
    cr = seed > 4
    queue = b"# url\tdepth\tattempts\tnot_before\tsource\t[kind]\n"
    claims = b"# claim journal\n"
    queued: list[bytes] = []
    unsettled: list[bytes] = []
    for _ in range(400):
        url = random_url(rnd)
        queued.append(url)
        tail = rnd.choice([b"\t1\t0\t0\t-\n"] * 8 + [b"\n", b" \t1\t0\t0\t-\n", b"\t1\t0\t0\t-\trecheck\n"]
                          + [b"\r\n"] * cr)
        queue += url + tail
        if rnd.random() < 0.6:
            claimed = rnd.choice(queued) if rnd.random() < 0.9 else random_url(rnd)
            claims += b"C\t0\t0\t7\t0\t" + claimed + rnd.choice([b"\t1\t0\t0\t-\n"] * 6 + [b"\n"] + [tail] * 2
                                                                  + [b"\t1\r\n", b"\r", b"\t1\r"] * cr)
            unsettled.append(claimed)
        if unsettled and rnd.random() < 0.5:   # settled later: often in a later sample
            claims += b"D\t" + rnd.choice([b"crawled", b"rejected"]) + b"\t" + unsettled.pop(rnd.randrange(len(unsettled))) + b"\n"
        if rnd.random() < 0.05:
            claims += b"H\ta.test\t0\t-\n"
    rec, ref = StatsRecorder(tmp_path), LineByLineCensus()
    rec._every = 1   # (no census.txt to look for; every URL counted)
    qw = cw = 0
    for step in range(10):
        q_end = len(queue) if step == 9 else min(len(queue), qw + rnd.randrange(0, len(queue) // 5))
        c_end = len(claims) if step == 9 else min(len(claims), cw + rnd.randrange(0, len(claims) // 5))
        with open(tmp_path / "queue.txt", "ab") as f:
            f.write(queue[qw:q_end])
        with open(tmp_path / "claims.txt", "ab") as f:
            f.write(claims[cw:c_end])
        qw, cw = q_end, c_end
        rec.sample(0, 0, 0, 0, 0, when=float(step))
        assert dict(rec.census.counts) == ref.sample(queue[:qw], claims[:cw]), step
        assert rec.known_again() == ref.known_again(), step


def test_a_resumed_census_goes_on_as_one_read_from_the_start(tmp_path: Path):
    """A census saved at a clean stop, loaded by the next run, then queue.txt and the journal grow:
    the same census and figures as a recorder that reads the files from the start."""
    host = "http://127.0.0.1:18801"
    (tmp_path / "queue.txt").write_text("".join(f"{host}/p/{i}.html\t1\t0\t0\t-\n" for i in range(300))
                                        + "".join(f"{host}/cal/{i}?d=1\t1\t0\t0\t-\n" for i in range(50)))
    (tmp_path / "crawled.txt").write_text("".join(f"{host}/c/{i}\t200\ttext/html\t{i}\t1\n" for i in range(20)))
    first = StatsRecorder(tmp_path)
    first.catch_up()
    first.save_census()
    assert (tmp_path / stats_mod.CENSUS).exists()
    resumed = StatsRecorder(tmp_path)
    resumed.catch_up()
    assert resumed.census.counts == first.census.counts   # from census.txt, queue.txt not read again
    assert resumed._tails["queue.txt"].pos == (tmp_path / "queue.txt").stat().st_size
    with (tmp_path / "queue.txt").open("a") as f:
        f.write("".join(f"{host}/q/{i}\t2\t0\t0\t-\n" for i in range(40)) + f"{host}/q/half")
    (tmp_path / "claims.txt").write_text("".join(f"C\t0\t0\t7\t0\t{host}/p/{i}.html\t1\t0\t0\t-\n" for i in range(100))
                                         + "".join(f"C\t0\t0\t7\t0\t{host}/q/{i}\t2\t0\t0\t-\n" for i in range(10)))
    with (tmp_path / "crawled.txt").open("a") as f:
        f.write(f"{host}/c/x\t200\ttext/html\t1000\t1\n")
    again = resumed.sample(240, 0, 21, 0, 0, when=5.0)
    (tmp_path / stats_mod.CENSUS).unlink()
    fresh = StatsRecorder(tmp_path)
    assert fresh.sample(240, 0, 21, 0, 0, when=5.0) == again
    assert fresh.census.counts == resumed.census.counts == {
        "127.0.0.1:18801/p/{n}.html": 200, "127.0.0.1:18801/cal/{n}?d=": 50, "127.0.0.1:18801/q/{n}": 30}
    assert figures(fresh) == figures(resumed) == (sum(range(20)) + 1000, 0, 0, 0, {})


def test_a_census_past_max_patterns_counts_claims_out_one_by_one(tmp_path: Path, monkeypatch):
    """Past MAX_PATTERNS, "(other)" is one more pattern; a URL claimed twice (a journal copied
    by hand) takes its pattern out, then, as a pattern not counted, "(other)": so the claims of one
    pattern cannot all be counted out at once when a count would go below zero."""
    monkeypatch.setattr(stats_mod, "MAX_PATTERNS", 2)
    (tmp_path / "queue.txt").write_text("http://a.test/a/1\nhttp://a.test/b/1\nhttp://a.test/c/1\n")
    rec = StatsRecorder(tmp_path)
    rec._every = 1
    rec.sample(3, 0, 0, 0, 0, when=1.0)
    assert rec.census.counts == {"a.test/a/{n}": 1, "a.test/b/{n}": 1, "(other)": 1}
    (tmp_path / "claims.txt").write_text("C\t0\t0\t7\t0\thttp://a.test/a/1\t1\nC\t0\t0\t7\t0\thttp://a.test/a/1\t1\n")
    rec.sample(1, 0, 0, 0, 0, when=2.0)
    ref = LineByLineCensus()
    ref.census.counts.update({"a.test/a/{n}": 1, "a.test/b/{n}": 1, "(other)": 1})
    assert rec.census.counts == ref.sample(b"", (tmp_path / "claims.txt").read_bytes()) == {"a.test/b/{n}": 1}
