"""The fast paths of a paste's intake give the answers of the slow ones, line for line.

A million pasted bare URLs are judged a few hundred at a time (spider/frontier/paste.py): where each
line could be a normal URL is matched over the whole stretch as bytes with RE2
(``urls.normal_lines``), the plain trap test and the searches for what would stop it likewise
(``scope._PlainTest.clear_many``), the scope asked once for a run of one host
(``Admission.check_many``), the fingerprints hashed with no loop in Python
(``SeenSet.fingerprints``). Each must answer as ``re`` and the one-URL-at-a-time code did: checked
here against them, on the lines made to sit at each limit.
"""

from __future__ import annotations

import datetime
import itertools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spider import scope as scope_module
from spider import urls as urls_module
from spider.config import CrawlConfig
from spider.frontier.seen import SeenSet, stable_fingerprint
from spider.scope import Admission, _PlainTest
from spider.traps import TrapRules
from spider.urls import Scan, normal_lines

TODAY = datetime.date(2026, 12, 2)


def normal_lines_by_re(text: str) -> list[int]:
    """``normal_lines`` as ``re`` answers it (the code before RE2 took the ASCII text)."""
    starts, pos = [], 0
    while True:
        pos = urls_module._NORMAL_LINES.match(text, pos).end()
        if pos >= len(text):
            break
        starts.append(pos)
        pos = text.find("\n", pos) + 1
        if not pos:
            break
    more = [text.rfind("\n", 0, m.start()) + 1 for m in urls_module._LOOKED_FURTHER.finditer(text.lower())]
    return sorted(set(starts + more))


def test_every_port_of_four_digits_or_fewer_is_read_as_re_reads_it() -> None:
    # The RE2 pattern spells out the ports that are not 80 and 443 (re's has a lookahead).
    lines = [f"http://a.test:{port}/x\n" for port in
             [*map(str, range(10000)), "", "00", "080", "0443", "4430", "8080", "44", "43", "8", "99999", "65536"]]
    lines += [line.replace("/x", "") for line in lines[:200]] + [line.replace("http", "https") for line in lines]
    text = "".join(lines)
    assert normal_lines(text) == normal_lines_by_re(text)
    vouched = set(range(len(lines))) - {text.count("\n", 0, at) for at in normal_lines(text)}
    assert "http://a.test:80/x\n" not in {lines[i] for i in vouched}
    assert "http://a.test:8080/x\n" in {lines[i] for i in vouched}


_PIECE = st.builds(
    lambda scheme, host, port, path, query: f"{scheme}://{host}{port}{path}{query}",
    st.sampled_from(["http", "https", "HTTP", "ftp", "http:"]),
    st.sampled_from(["a.test", "127.0.0.1", "256.1.1.1", "1.2.3", "x-y.a_b.test", "A.test", "a.test.", "a..test",
                     "xn--bcher-kva.test", "XN--a.test", "x" * 64 + ".test", "a" * 63 + ".b", "a.1", "_.-"]),
    st.sampled_from(["", ":80", ":443", ":8080", ":080", ":4430", ":44", ":444", ":65535", ":0", ":", ":8", ":12345"]),
    st.lists(st.sampled_from(["a", "Z9", ".", "..", "", ".x", "~-_", "%41", "b.c"]), max_size=4)
    .map(lambda segments: "".join("/" + s for s in segments)),
    st.one_of(st.just(""), st.just("?"),
              st.builds(lambda k, v: f"?{k}={v}",
                        st.sampled_from(["v", "utm_source", "UTM_x", "fbclid", "FBCLID", "_ga", "_gax", "q", "year"]),
                        st.text(alphabet="az09._~!$'()*+,;=:@/?-&", max_size=6)),
              st.builds(lambda k: f"?{k}", st.sampled_from(["gclid", "gclid=", "yclid&a", "a", "msclkid"]))),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_PIECE, st.sampled_from(["", "#", " ", "http://a.test/\t0\t0\t0\t-", "x/.y"])),
                max_size=30), st.booleans())
def test_the_lines_listed_in_ascii_text_are_those_re_lists(lines: list[str], ended: bool) -> None:
    text = "\n".join(lines) + ("\n" if ended and lines else "")
    assert text.isascii()
    assert normal_lines(text) == normal_lines_by_re(text)


RULES = [
    TrapRules(),
    TrapRules.from_settings(["path-segments=3", "repeated-segments=2", "query-params=1", "url-length=60",
                             "presentation-params=View,page,Sort_By", "calendar=10", "calendar-past=off"]),
    TrapRules(path_segments=0, query_params=0),   # (below what the command line allows; a TrapRules can be made so)
    TrapRules.from_settings(["calendar=off", "calendar-past=off", "presentation-params=off", "query-params=off",
                             "path-segments=off", "repeated-segments=off"]),
    TrapRules.from_settings(["repeated-segments=4", "query-params=2", "calendar-past=off"]),
    TrapRules.from_settings([], enabled=False),
    # Counts past what RE2 counts to (1000): below the length limit each URL is looked at, above it none is reached.
    TrapRules(path_segments=2000, repeated_segments=None, query_params=1500),
    TrapRules(url_length=None, path_segments=999, repeated_segments=None, query_params=1001),
    TrapRules(url_length=900, path_segments=1200, repeated_segments=None, query_params=5000),
]

# URLs on each side of each count the plain test makes: slashes, "&"s, a "?" before "://", dates, keys.
_NEAR = ["http://a.test/", "http://a.test", "http://a.test/a", "http://a.test/a/b", "http://a.test/a/b/c",
         "http://a.test/a/b/c/d", "http://a.test/a/a", "http://a.test/a/b/a/b", "http://a.test/x/", "http://a.test//",
         "http://a.test/?a", "http://a.test/?a&b", "http://a.test/?a&b&c", "http://a.test/?a&b&c&d&e",
         "http://a.test/p?x=/y", "http://a.test/p?x=a/b/c/d/e", "http://a.test/p&q/r?s", "a?b://a.test/p?view=1",
         "a/b://a.test/", "a.test/no/scheme", "", "://", "http://a.test/2024-01-05", "http://a.test/?d=2099.12.1",
         "http://a.test/?q=1999_1", "http://a.test/p?YEAR=2024", "http://a.test/p?x=1&year=1", "http://a.test/p?year",
         "http://a.test/p?view=1", "http://a.test/p?Sort=1", "http://a.test/p?x=1&page=3", "http://a.test/p?viewer=1",
         "http://a.test/p?a=view", "http://a.test/2019.html", "http://a.test/" + "x" * 1990,
         "http://a.test/" + "x" * 1986, "http://b.test:8080/a", "http://u@a.test/a/b", "http://a.test/\u00e9",
         "http://a.test/p\n?view=1", "http://a.test/p?v=1\nhttp://a.test/2024-01-05", "http://a.test" + "/a" * 999,
         "http://a.test" + "/a" * 1000, "http://a.test/?" + "&" * 1000, "http://a.test/?" + "&" * 1001]


def clear_alone(plain: _PlainTest, url: str) -> bool:
    """``clear`` as the code before the block searches answered it: the searches made in the URL alone."""
    low = url.lower()
    keys = plain.keys if plain.key_at is not None and plain.key_at.search(low) else ()
    dated = plain.dated and plain.DATE.search(url) is not None
    return plain._each([url], keys, plain.dated and "year=" in low, dated)[0]


def test_the_plain_test_of_a_run_is_that_of_each_url_alone_on_each_side_of_each_limit() -> None:
    for rules in RULES:
        plain = _PlainTest(rules)
        alone = [clear_alone(plain, url) for url in _NEAR]
        assert [plain.clear(url) for url in _NEAR] == alone == [plain.clear_many([url])[0] for url in _NEAR]
        for run in (_NEAR, _NEAR[::-1], [u for u in _NEAR if "\n" not in u and u.isascii()]):
            assert plain.clear_many(run) == [alone[_NEAR.index(url)] for url in run], rules
        for url, clear in zip(_NEAR, alone):
            assert not clear or rules.check(url, TODAY) is None, (url, rules)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.builds(lambda parts: "".join(parts),
                          st.lists(st.sampled_from(["http://", "a.test", "/", "a", "b", "?", "&", "=", "view", "Page",
                                                    "year=", "2024-01-05", "20", "19", ".", "x" * 30, "://"]),
                                   max_size=14)), min_size=2, max_size=40),
       st.sampled_from(RULES))
def test_a_run_of_ascii_urls_is_cleared_as_each_alone(urls: list[str], rules: TrapRules) -> None:
    plain = _PlainTest(rules)
    assert plain.clear_many(urls) == [clear_alone(plain, u) for u in urls]


def test_a_run_of_plain_urls_is_not_looked_at_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _PlainTest(TrapRules())
    urls = [f"http://paste.test/p/{k}.html?v={k}" for k in range(1000)]
    odd = {17: "http://paste.test/2024-01-05/x", 400: "http://paste.test/p?view=1", 999: "http://paste.test/a/b/c/d"}
    for at, url in odd.items():
        urls[at] = url
    looked: list[str] = []
    each = _PlainTest._each

    def spy(self: _PlainTest, run: list[str], *args: object) -> list[bool]:
        looked.extend(run)
        return each(self, run, *args)   # type: ignore[arg-type]
    monkeypatch.setattr(_PlainTest, "_each", spy)
    got = plain.clear_many(urls)
    assert looked == list(odd.values())
    assert [i for i, clear in enumerate(got) if not clear] == [17, 400]   # (a/b/c/d: no segment repeated)


def _config(mode: str) -> CrawlConfig:
    return CrawlConfig(seeds=("http://a.test/docs/", "https://127.0.0.1:8080/x"), scope=mode)


def test_a_run_of_one_host_and_a_run_of_many_get_the_answers_of_each_url_alone() -> None:
    one_host = [f"http://a.test/p/{k}?v={k}" for k in range(50)] + ["http://a.test/2024-01-05/x", "http://a.test/" + "y" * 2100]
    runs = [
        one_host,
        [u.replace("a.test", "b.test") for u in one_host],
        ["http://a.test/x", "http://a.test.b.test/x", "http://a.test:8080/y", "https://a.test/z", "http://a.test/"],
        ["http://a.test/x", "http://a.test/x\nhttp://b.test/y", "http://a.test/z"],   # (a "\n" in a URL)
        ["http://a.test", "http://a.test/x"], ["short", "http://a.test/x"], ["http://a.test/x"],
        ["https://127.0.0.1:8080/a", "https://127.0.0.1:8080/b", "https://127.0.0.1/c"],
        ["http://u@a.test/a", "http://u@a.test/b"],
    ]
    for mode, depth in itertools.product(("host", "domain"), (0, 1)):
        for run in runs:
            alone, at_once = Admission(_config(mode)), Admission(_config(mode))
            want = [alone.check(url, depth) for url in run]
            assert at_once.check_many(run, depth) == want, (mode, run)
            assert at_once.check_many(run[::-1], depth) == want[::-1]
            assert Admission(_config(mode)).check_many([], depth) == []


def test_a_one_host_run_asks_the_scope_once() -> None:
    admission = Admission(_config("host"))
    asked: list[str] = []
    allows = admission.scope._allows
    object.__setattr__(admission.scope, "_allows", lambda url: asked.append(url) or allows(url))
    assert admission.check_many([f"http://b.test/{k}" for k in range(100)], 0) == ["scope"] * 100
    assert asked == ["http://b.test/0"]
    assert scope_module._one_host_part(["http://b.test/1", "http://b.test.c/1"]) is None


def test_fingerprints_in_bulk_are_those_of_each_key() -> None:
    keys = ["http://a.test/", "", "x\udcff", "\u00e9", "a\nb", "http://a.test/" + "z" * 5000]
    one_line = [k for k in keys if "\n" not in k]
    for run in ([], keys[:1], keys[:4], keys, keys * 8, one_line * 8, [f"http://b.test/{k}" for k in range(3000)]):
        assert SeenSet(stable=True).fingerprints(run) == [stable_fingerprint(k) or 1 for k in run]


def test_a_scan_answers_as_re_does_with_or_without_the_bindings_entry_point() -> None:
    data = b"http://a.test/x\nhttp://a.test/2024-01-05?view=1\nab\n\nyear=1&year=2\n"
    for pattern in (r"(?:http://[a-z.]+/[a-z]*\n)*", r"(?:19|20|21)[0-9][0-9][-/._][0-9]|[?&](?:view)|year=", r"x*"):
        scans = [Scan(pattern), Scan(pattern)]
        scans[1]._match = None   # (a binding without ``_regexp.Match``: its public methods)
        compiled = re.compile(pattern.encode())
        for scan in scans:
            assert scan.starts(data) == [m.start() for m in compiled.finditer(data)], pattern
            if compiled.match(b""):   # (``end`` is for patterns that match the empty string)
                assert [scan.end(data, pos) for pos in range(len(data))] == \
                    [compiled.match(data, pos).end() for pos in range(len(data))], pattern   # type: ignore[union-attr]
