"""``spider.urls.normal_lines``: the shortcut that finds, in a whole block of lines at once (a paste
of bare URLs into queue.txt), the lines that are their own ``normalize`` already.

It must never vouch for a line the full rules would change or refuse: checked on every input,
base and href of the web-platform-tests URL suite, on every string of test_urls' tables, on what
``normalize`` makes of each, and on blocks built from near-normal pieces (Hypothesis).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import test_urls
from spider.urls import normal_lines, normalize

WPT = Path(__file__).parent / "data" / "wpt-url" / "urltestdata.json"


def _strings(value: object) -> Iterator[str]:
    """Every string inside a table of cases (tuples, lists, dicts)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _with_normal_forms(texts: Iterable[str]) -> list[str]:
    """The texts that can be a line (no "\\n"), and the normal form of each URL among them."""
    out = []
    for text in texts:
        if "\n" in text:
            continue
        out.append(text)
        try:
            out.append(normalize(text))
        except ValueError:
            pass
    return out


def _vouched(lines: list[str]) -> list[str]:
    """The lines ``normal_lines`` does not list, for the block of ``lines``."""
    text = "".join(line + "\n" for line in lines)
    starts = normal_lines(text)
    assert starts == sorted(set(starts))
    assert all(s == 0 or text[s - 1] == "\n" for s in starts), "a listed start is no line start"
    listed = set(starts)
    out, pos = [], 0
    for line in lines:
        if pos not in listed:
            out.append(line)
        pos += len(line) + 1
    return out


def _assert_each_is_its_own_normal_form(lines: list[str]) -> int:
    vouched = _vouched(lines)
    for line in vouched:
        try:
            assert normalize(line) == line, line
        except ValueError:
            raise AssertionError(f"vouched for a line normalize refuses: {line!r}") from None
    return len(vouched)


WPT_STRINGS = _with_normal_forms(
    s for case in json.loads(WPT.read_text(encoding="utf-8")) if isinstance(case, dict)
    for s in (case.get("input"), case.get("base"), case.get("href")) if isinstance(s, str))

TABLE_STRINGS = _with_normal_forms(   # its tables, and the cases of its parametrised tests
    [s for name, value in vars(test_urls).items() if name.isupper() for s in _strings(value)] +
    [s for value in vars(test_urls).values() for mark in getattr(value, "pytestmark", ())
     if mark.name == "parametrize" for s in _strings(mark.args[1:])])


def test_on_the_wpt_url_suite_no_line_is_vouched_for_that_normalize_changes() -> None:
    assert len(WPT_STRINGS) > 1000
    vouched = _assert_each_is_its_own_normal_form(WPT_STRINGS)
    assert vouched > 50   # (the suite has plain URLs too: the shortcut takes some)


def test_on_the_normalisation_tables_no_line_is_vouched_for_that_normalize_changes() -> None:
    assert len(TABLE_STRINGS) > 300
    vouched = _assert_each_is_its_own_normal_form(TABLE_STRINGS)
    assert vouched > 20


def test_every_line_of_a_block_is_judged_alone_whatever_its_neighbours() -> None:
    # The same strings one a block, in another order and one by one: the same lines vouched for.
    lines = TABLE_STRINGS + WPT_STRINGS
    alone = [line for line in lines if _vouched([line])]
    assert _vouched(lines) == alone
    assert _vouched(lines[::-1]) == alone[::-1]


def test_the_common_shapes_are_taken_and_the_others_left_to_the_full_rules() -> None:
    plain = ["http://paste.test/p/1.html?v=2", "https://example.org/docs/", "http://127.0.0.1:8080/a/b_c-d~e",
             "http://a.test/?q=utm", "http://a.test/x?page=2", "https://a.test:8443/"]
    assert _vouched(plain) == plain
    others = ["http://Paste.test/", "http://a.test", "http://a.test:80/", "https://a.test:443/", "http://a.test:65535/",
              "http://a.test/./b", "http://a.test/a/../b", "http://a.test/b?utm_source=x", "http://a.test/b?UTM_x=1",
              "http://a.test/b?Fbclid", "http://a.test/b?gclid=1", "http://a.test/b?_GA=1", "http://xn--a.test/",
              "http://a.test/b?x=1&a=2", "http://a.test/%41", "http://a.test/b#f", "http://a.test/é", " http://a.test/",
              "http://a.test/\r", "# a comment", "", "http://a.test./", "http://0x7f.1/", "ftp://a.test/", "garbage",
              "http://a.test/b\tc"]
    assert _vouched(others) == []
    assert _vouched(plain + others + plain) == plain + plain
    assert _vouched(["http://a.test/b?fbclidx=1", "http://a.test/b?utm=1"]) == \
        ["http://a.test/b?fbclidx=1", "http://a.test/b?utm=1"]   # not tracking keys


def test_a_last_line_without_its_newline_is_listed() -> None:
    text = "http://a.test/\nhttp://b.test/"
    assert normal_lines(text) == [len("http://a.test/\n")]


_PIECE = st.builds(
    lambda scheme, host, port, path, query: f"{scheme}://{host}{port}{path}{query}",
    st.sampled_from(["http", "https", "HTTP", "ftp"]),
    st.sampled_from(["a.test", "127.0.0.1", "256.1.1.1", "1.2.3", "x-y.a_b.test", "A.test", "a.test.", "a..test",
                     "-a.test", "xn--bcher-kva.test", "xn--a.test", "x" * 64 + ".test", "a.1", "a.test:"]),
    st.sampled_from(["", ":80", ":443", ":8080", ":080", ":65535", ":65536", ":0", ":", ":8"]),
    st.lists(st.sampled_from(["a", "Z9", ".", "..", "", ".x", "~-_", "%41", "%2e", "é", " ", "\r", "\\"]), max_size=5)
    .map(lambda segments: "".join("/" + s for s in segments)),
    st.one_of(st.just(""), st.just("?"),
              st.builds(lambda k, v: f"?{k}={v}",
                        st.sampled_from(["v", "utm_source", "UTM_x", "fbclid", "FBCLID", "_ga", "mc_cid", "q", "year"]),
                        st.text(alphabet="az09._~!$'()*+,;=:@/?-&%#", max_size=8)),
              st.builds(lambda k: f"?{k}", st.sampled_from(["gclid", "gclid=", "yclid&a", "a"])),
              st.text(alphabet="?az=&", max_size=8)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_PIECE, _PIECE.map(lambda u: normalize(u) if _normal(u) else u),
                          st.sampled_from(["", "#", " ", "http://a.test/\t0\t0\t0\t-"])), max_size=12))
def test_blocks_of_near_normal_lines(lines: list[str]) -> None:
    _assert_each_is_its_own_normal_form(lines)


def _normal(url: str) -> bool:
    try:
        normalize(url)
    except ValueError:
        return False
    return True


def test_lines_after_text_that_lowercases_longer_are_still_found() -> None:
    # "İ".lower() is two characters: the block's other lines must be found where they are.
    lines = ["x" + "\u0130" * 100, "http://a.test/b?utm_source=x", "http://a.test/" + "c" * 120, "http://a.test/./d"]
    assert _vouched(lines) == ["http://a.test/" + "c" * 120]
