"""Trap defences: the rules of spider/traps.py on tables, session-id stripping, --trap parsing;
the URL-pattern census and the trap alarm (spider/census.py); the stats.txt sampler that feeds
them (spider/stats.py)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from spider.census import Sample, pattern, top_patterns, trap_alarm
from spider.records import QueueEntry, crawled_line, duplicate_line, rejected_line
from spider.stats import STATS, StatsRow, discovery_ratio, parse_stats_line, read_stats, StatsRecorder
from spider.frontier.files import FileStore
from spider.traps import PRESENTATION_PARAMS, RULES, SESSION_IDS, TrapRules

TODAY = datetime.date(2026, 6, 15)
H = "http://a.test"


def segs(n: int) -> str:
    return H + "".join(f"/s{i}" for i in range(n))


# -- TrapRules.check: every rule, at and over its limit ----------------------------------------------

CHECK_TABLE = [
    # url-length 2000: exactly at the limit passes, one over fails
    (H + "/" + "x" * (2000 - len(H) - 1), None),
    (H + "/" + "x" * (2000 - len(H)), "url-length"),
    # path-segments 12 (empty segments do not count)
    (segs(12), None),
    (segs(12) + "/", None),
    (segs(13), "path-segments"),
    (H + "//a//b//", None),
    # repeated-segments 3, runs of width 1 to 4
    (H + "/a/a", None),
    (H + "/a/a/a", "repeated-segments"),
    (H + "/x/a/b/a/b", None),
    (H + "/x/a/b/a/b/a/b/y", "repeated-segments"),
    (H + "/a/b/c/a/b/c", None),
    (H + "/a/b/c/a/b/c/a/b/c", "repeated-segments"),
    (H + "/a/b/c/d/a/b/c/d", None),
    (H + "/a/b/c/d/a/b/c/d/a/b/c/d", "repeated-segments"),   # 12 segments: path-segments passes
    (H + "/a/b/a/c/a/b", None),                               # a recurs, but not as a run
    (H + "/a/A/a", None),                                     # segments compare case-sensitively
    # presentation-params: any of the keys, any case, with or without a value
    (H + "/list?sort=price", "presentation-params"),
    (H + "/list?SORT=price", "presentation-params"),
    (H + "/list?Per_Page=50", "presentation-params"),
    (H + "/list?print", "presentation-params"),
    (H + "/list?a=1&view=grid", "presentation-params"),
    (H + "/list?sorted=1", None),                             # whole keys only
    (H + "/list?q=sort", None),                               # values are not keys
    (H + "/sort/view", None),                                 # path words are not keys
    # query-params 4
    (H + "/s?a=1&b=2&c=3&d=4", None),
    (H + "/s?a=1&b=2&c=3&d=4&e=5", "query-params"),
    (H + "/s?a&b&c&d&e", "query-params"),
    (H + "/s?a=1&a=2&a=3&a=4&a=5", "query-params"),           # repeated keys count each time
    # presentation-params is checked before query-params
    (H + "/s?a=1&b=2&c=3&d=4&sort=5", "presentation-params"),
    # calendar 365 days ahead (TODAY = 2026-06-15); a month without a day is its 1st
    (H + "/cal/2027-06-15", None),                            # exactly 365 days ahead
    (H + "/cal/2027-06-16", "calendar"),                      # 366
    (H + "/cal/2027/06/15", None),
    (H + "/cal/2027/06/16", "calendar"),
    (H + "/cal/2027/06", None),                               # 2027-06-01
    (H + "/cal/2027/07", "calendar"),                         # 2027-07-01: 381 days
    (H + "/cal/2027-07", "calendar"),
    (H + "/cal/2027/7/", "calendar"),                         # one-digit month
    (H + "/cal/2026-06-15", None),                            # today
    (H + "/cal?year=2027&month=6", None),
    (H + "/cal?year=2027&month=7", "calendar"),
    (H + "/cal?month=7&year=2027", "calendar"),               # keys in any order
    (H + "/cal?YEAR=2031", "calendar"),                       # year alone: January 1st
    (H + "/cal?year=2027&month=13", None),                    # bad month: January 2027
    (H + "/cal?fiscal_year=2040", None),                      # only the key year=
    (H + "/cal?d=2031-05-01", "calendar"),                    # a date in a query value
    # calendar-past 7300 days back
    (H + "/cal/2006-06-20", None),                            # 7300 days back
    (H + "/cal/2006-06-19", "calendar"),                      # 7301: refused as calendar
    (H + "/cal/1999/01", "calendar"),
    (H + "/cal?year=1990", "calendar"),
    # invalid dates are ignored
    (H + "/cal/2031-02-30", None),
    (H + "/cal/2031/02/31", None),
    (H + "/cal/2031-13-01", None),
    (H + "/cal/2031-00", None),
    (H + "/item/12031/05", None),                             # not a year: more digits before
    (H + "/item/2031-123", None),                             # not a month: more digits after
    (H + "/cal/2240/01", None),                               # years 1900-2199 only
    # nothing wrong
    (H + "/", None),
    (H + "/docs/install?lang=en", None),
]


@pytest.mark.parametrize("url,rule", CHECK_TABLE)
def test_check_table(url: str, rule: str | None):
    assert TrapRules().check(url, TODAY) == rule


@pytest.mark.parametrize("url", [
    "http://a.test:2100/1/",          # port 2100, path /1/: not a date
    "http://a.test:2031/05/x",
    "http://2031-05.example.test/",   # a host name is not a date either
])
def test_calendar_looks_at_path_and_query_not_at_host_or_port(url: str):
    assert TrapRules().check(url, TODAY) is None


def test_calendar_limits_move_with_today():
    url = H + "/cal/2027/01/01"
    assert TrapRules().check(url, datetime.date(2026, 1, 1)) is None        # 365 days
    assert TrapRules().check(url, datetime.date(2025, 12, 31)) == "calendar"
    assert TrapRules(calendar=1).check(H + "/cal/2026-06-16", TODAY) is None
    assert TrapRules(calendar=1).check(H + "/cal/2026-06-17", TODAY) == "calendar"
    assert TrapRules(calendar_past=1).check(H + "/cal/2026-06-14", TODAY) is None
    assert TrapRules(calendar_past=1).check(H + "/cal/2026-06-13", TODAY) == "calendar"


def test_each_calendar_direction_can_be_off_alone():
    future, past = H + "/cal/2040-01-01", H + "/cal/1990-01-01"
    ahead_off = TrapRules(calendar=None)
    assert (ahead_off.check(future, TODAY), ahead_off.check(past, TODAY)) == (None, "calendar")
    back_off = TrapRules(calendar_past=None)
    assert (back_off.check(future, TODAY), back_off.check(past, TODAY)) == ("calendar", None)
    both_off = TrapRules(calendar=None, calendar_past=None)
    assert (both_off.check(future, TODAY), both_off.check(past, TODAY)) == (None, None)


@pytest.mark.parametrize("width", [1, 2, 3, 4])
@pytest.mark.parametrize("times,limit,refused", [(2, 3, False), (3, 3, True), (4, 3, True),
                                                 (2, 2, True), (4, 5, False), (5, 5, True)])
def test_repeated_runs_of_width_1_to_4(width: int, times: int, limit: int, refused: bool):
    run = [f"p{i}" for i in range(width)]
    url = H + "/start/" + "/".join(run * times) + "/end"
    rules = TrapRules(repeated_segments=limit, path_segments=None)
    assert rules.check(url, TODAY) == ("repeated-segments" if refused else None)


def test_a_run_of_width_5_is_not_a_repeat():
    run = ["a", "b", "c", "d", "e"]
    assert TrapRules(path_segments=None).check(H + "/" + "/".join(run * 3), TODAY) is None


def test_rules_are_checked_in_a_fixed_order():
    url = H + "/a/a/a" + "/x" * 12 + "?sort=1&b&c&d&e&f" + "&g" * 1000   # breaks every rule
    rules = TrapRules()
    assert rules.check(url, TODAY) == "url-length"
    rules = TrapRules(url_length=None)
    assert rules.check(url, TODAY) == "path-segments"
    rules = TrapRules(url_length=None, path_segments=None)
    assert rules.check(url, TODAY) == "repeated-segments"
    rules = TrapRules(url_length=None, path_segments=None, repeated_segments=None)
    assert rules.check(url, TODAY) == "presentation-params"
    rules = TrapRules(url_length=None, path_segments=None, repeated_segments=None, presentation_params=None)
    assert rules.check(url, TODAY) == "query-params"


def test_presentation_keys_from_settings_are_case_insensitive():
    rules = TrapRules.from_settings(["presentation-params=Sort, VIEW"])
    assert rules.presentation_params == frozenset({"sort", "view"})
    assert rules.check(H + "/l?SoRt=1", TODAY) == "presentation-params"
    assert rules.check(H + "/l?View=1", TODAY) == "presentation-params"
    assert rules.check(H + "/l?order=1", TODAY) is None              # no longer in the list


def test_query_params_are_counted_after_session_ids_are_stripped():
    rules = TrapRules()
    url = H + "/s?a=1&b=2&c=3&d=4&PHPSESSID=xyz&sid=9"
    clean = rules.strip_session_ids(url)
    assert clean == H + "/s?a=1&b=2&c=3&d=4"
    assert rules.check(clean, TODAY) is None
    assert rules.check(rules.strip_session_ids(url + "&e=5"), TODAY) == "query-params"


def test_all_off_refuses_nothing():
    rules = TrapRules.from_settings([], enabled=False)
    for url, _ in CHECK_TABLE:
        assert rules.check(url, TODAY) is None


# -- strip_session_ids --------------------------------------------------------------------------------

STRIP_TABLE = [
    (H + "/p?sid=1&q=2", H + "/p?q=2"),
    (H + "/p?q=2&PHPSESSID=1", H + "/p?q=2"),                     # any case
    (H + "/p?JSessionId=1&q=2&SessionID=3&session_id=4", H + "/p?q=2"),
    (H + "/p?CFID=1&CFTOKEN=2&ASPSESSIONID=3", H + "/p"),           # all removed: no '?'
    (H + "/p?sid", H + "/p"),                                       # a key without a value
    (H + "/p?sid=", H + "/p"),
    (H + "/p?side=1&asid=2", H + "/p?side=1&asid=2"),               # whole keys only
    (H + "/p?q=sid", H + "/p?q=sid"),                               # values are not keys
    (H + "/p;jsessionid=ABC", H + "/p"),
    (H + "/p;JSESSIONID=ABC?q=1", H + "/p?q=1"),
    (H + "/p;jsessionid=ABC?sid=2", H + "/p"),
    (H + "/a;jsessionid=1/b;jsessionid=2/c", H + "/a/b/c"),         # in any segment
    (H + "/p;type=a", H + "/p;type=a"),                             # other ;params kept
    (H + "/p;type=a;jsessionid=X;v=2", H + "/p;type=a;v=2"),
    (H + "/p;jsessionid", H + "/p"),
    (H + "/p?q=a;jsessionid=1", H + "/p?q=a;jsessionid=1"),         # ';' in the query is a value
    (H + "/", H + "/"),
    (H + "/p?a=1&b=2", H + "/p?a=1&b=2"),
]


@pytest.mark.parametrize("url,expected", STRIP_TABLE)
def test_strip_session_ids_table(url: str, expected: str):
    assert TrapRules().strip_session_ids(url) == expected


def test_strip_session_ids_doctest_example():
    assert TrapRules().strip_session_ids("http://a.test/p;jsessionid=ABC?PHPSESSID=1&q=2") == "http://a.test/p?q=2"


def test_session_ids_off_or_replaced():
    off = TrapRules.from_settings(["session-ids=off"])
    assert off.session_ids is None
    assert off.strip_session_ids(H + "/p;jsessionid=1?sid=2") == H + "/p;jsessionid=1?sid=2"
    own = TrapRules.from_settings(["session-ids=Token"])
    assert own.strip_session_ids(H + "/p?TOKEN=1&sid=2") == H + "/p?sid=2"


# -- from_settings ----------------------------------------------------------------------------------------

def test_defaults():
    r = TrapRules()
    assert (r.url_length, r.path_segments, r.repeated_segments, r.query_params, r.calendar,
            r.calendar_past) == (2000, 12, 3, 4, 365, 7300)
    assert r.presentation_params == frozenset(PRESENTATION_PARAMS)
    assert r.session_ids == frozenset(SESSION_IDS)
    assert TrapRules.from_settings([]) == r
    assert RULES == ("url-length", "path-segments", "repeated-segments", "presentation-params",
                     "query-params", "calendar", "calendar-past", "session-ids")


@pytest.mark.parametrize("item,field,value", [
    ("url-length=100", "url_length", 100),
    ("path-segments=3", "path_segments", 3),
    ("repeated-segments=2", "repeated_segments", 2),
    ("query-params=1", "query_params", 1),
    ("calendar=30", "calendar", 30),
    ("calendar-past=1", "calendar_past", 1),
    (" URL-Length = 7 ", "url_length", 7),                       # names any case, spaces trimmed
    ("url-length=off", "url_length", None),
    ("url-length=OFF", "url_length", None),
    ("calendar=none", "calendar", None),
    ("calendar-past=no", "calendar_past", None),
    ("query-params=false", "query_params", None),
    ("presentation-params=off", "presentation_params", None),
    ("presentation-params=sort,view", "presentation_params", frozenset({"sort", "view"})),
    ("presentation-params= a , ,B ,", "presentation_params", frozenset({"a", "b"})),
    ("presentation-params=,", "presentation_params", None),      # an empty list is off
    ("session-ids=sid", "session_ids", frozenset({"sid"})),
    ("session-ids=off", "session_ids", None),
])
def test_from_settings_parses(item: str, field: str, value: object):
    rules = TrapRules.from_settings([item])
    assert getattr(rules, field) == value
    others = {f: getattr(TrapRules(), f) for f in TrapRules.__dataclass_fields__ if f != field}
    assert {f: getattr(rules, f) for f in others} == others           # the others untouched


def test_from_settings_later_overrides_win():
    assert TrapRules.from_settings(["url-length=10", "url-length=20"]).url_length == 20
    assert TrapRules.from_settings(["url-length=off", "url-length=20"]).url_length == 20


@pytest.mark.parametrize("item,says", [
    ("nonsense=3", "NAME one of url-length"),
    ("url-length", "expected NAME=VALUE"),
    ("=3", "expected NAME=VALUE"),
    ("", "expected NAME=VALUE"),
    ("url_length=3", "expected NAME=VALUE"),                   # the option's name, not the field's
    ("url-length=abc", "takes a whole number"),
    ("url-length=", "takes a whole number"),
    ("url-length=1.5", "takes a whole number"),
    ("url-length=0", "at least 1"),
    ("calendar=-3", "at least 1"),
    ("repeated-segments=1", "repeated-segments must be at least 2"),   # once: every path repeats
    ("repeated-segments=0", "repeated-segments must be at least 2"),
    ("url-length=3\nx", "takes a whole number"),
    ("bad\nname=1", "expected NAME=VALUE"),
])
def test_from_settings_bad_input_is_a_one_line_value_error(item: str, says: str):
    with pytest.raises(ValueError) as e:
        TrapRules.from_settings([item])
    msg = str(e.value)
    assert says in msg and "\n" not in msg and "\r" not in msg
    assert msg.startswith("bad --trap ")


def test_enabled_false_turns_all_off_and_overrides_turn_one_back_on():
    off = TrapRules.from_settings([], enabled=False)
    assert all(getattr(off, f) is None for f in TrapRules.__dataclass_fields__)
    one = TrapRules.from_settings(["query-params=2"], enabled=False)
    assert one.query_params == 2
    assert one.check(H + "/s?a&b&c", TODAY) == "query-params"
    assert one.check(H + "/a/a/a/?sort=1", TODAY) is None          # the rest stay off
    assert one.strip_session_ids(H + "/p?sid=1") == H + "/p?sid=1"
    back = TrapRules.from_settings(["session-ids=sid"], enabled=False)
    assert back.strip_session_ids(H + "/p?sid=1") == H + "/p"


# -- census: pattern, top_patterns, trap_alarm --------------------------------------------------------

PATTERN_TABLE = [
    ("https://example.com/cal/2031/05/?view=week&day=3", "example.com/cal/{n}/{n}/?day=&view="),
    ("https://ex.com/cal/2031/05?view=week", "ex.com/cal/{n}/{n}?view="),
    ("http://ex.com/cal/2032/11?view=day", "ex.com/cal/{n}/{n}?view="),        # same shape, either scheme
    ("http://example.com:8080/item/5f2b9c0e41d7/reviews", "example.com:8080/item/{id}/reviews"),
    ("http://127.0.0.1:45545/page2", "127.0.0.1:45545/page{n}"),              # host and port kept
    ("http://ex.com/u/123e4567-e89b-12d3-a456-426614174000/x", "ex.com/u/{id}/x"),
    ("http://ex.com/u/123E4567-E89B-12D3-A456-426614174000", "ex.com/u/{id}"),
    ("http://ex.com/f/deadbeefcafe", "ex.com/f/deadbeefcafe"),                 # hex needs a digit
    ("http://ex.com/f/12345678", "ex.com/f/{n}"),                              # ... and a letter
    ("http://ex.com/f/abc1234", "ex.com/f/abc{n}"),                            # too short for an id
    ("http://ex.com/f/item-0a1b2c3d4e", "ex.com/f/item-{id}"),
    ("http://ex.com/s?b=2&a=1&a=3", "ex.com/s?a=&b="),                         # keys sorted, once
    ("http://ex.com/s?print", "ex.com/s?print="),
    ("http://ex.com/s?", "ex.com/s"),
    ("http://ex.com/", "ex.com/"),
]


@pytest.mark.parametrize("url,expected", PATTERN_TABLE)
def test_pattern_table(url: str, expected: str):
    assert pattern(url) == expected


def test_top_patterns_most_common_first_ties_by_name():
    urls = [H + f"/cal/{y}/{m}" for y in range(3) for m in range(4)] + [H + "/b/1", H + "/a/2", H + "/a/3",
                                                                      H + "/b/4", H + "/z"]
    assert top_patterns(urls) == [("a.test/cal/{n}/{n}", 12), ("a.test/a/{n}", 2), ("a.test/b/{n}", 2),
                                  ("a.test/z", 1)]
    assert top_patterns(urls, 1) == [("a.test/cal/{n}/{n}", 12)]
    assert top_patterns([]) == []


def grow(*counts: int, pending: int | list[int] = 200, top: str | list[str] = "p") -> list[Sample]:
    n = len(counts)
    pend = pending if isinstance(pending, list) else [pending] * n
    tops = top if isinstance(top, list) else [top] * n
    return [Sample(p, t, c) for p, t, c in zip(pend, tops, counts)]


ALARM_TABLE = [
    # samples, fires?
    (grow(10, 20, 30, 100), True),                                  # 100 of 200 = 0.5: fires
    (grow(10, 20, 30, 99), False),                                  # 99 of 200 < 0.5
    (grow(10, 20, 30, 200), True),
    (grow(1, 2, 3, 4, 5, 100), True),                               # only the last 4 matter
    (grow(500, 1, 2, 3, 100), True),                                # an old drop is forgotten
    (grow(10, 20, 30, 60, pending=[100, 100, 100, 100]), True),     # pending exactly 100
    (grow(10, 20, 30, 60, pending=[99, 99, 99, 99]), False),        # pending 99: too small
    (grow(10, 20, 30, 99, pending=[99, 99, 99, 99]), False),        # ... even at 100%
    (grow(20, 30, 100), False),                                     # only 2 rises so far
    (grow(100), False),
    ([], False),
    (grow(10, 20, 20, 100), False),                                 # flat once: not growing
    (grow(10, 30, 20, 100), False),                                 # dipped once
    (grow(130, 120, 110, 100), False),                              # shrinking
    (grow(100, 110, 120, 130, 120), False),                         # shrinking at the end
    (grow(10, 20, 30, 100, top=["q", "p", "p", "p"]), False),       # the top changed
    (grow(10, 20, 30, 100, top=["p", "p", "q", "p"]), False),
    (grow(10, 20, 30, 100, top=["p", "p", "p", "q"]), False),
    (grow(5, 10, 20, 30, 100, top=["q", "p", "p", "p", "p"]), True),    # changed before the window
]


@pytest.mark.parametrize("samples,fires", ALARM_TABLE)
def test_trap_alarm_table(samples: list[Sample], fires: bool):
    assert (trap_alarm(samples) is not None) == fires


def test_trap_alarm_message_names_pattern_share_and_counts():
    msg = trap_alarm(grow(100, 200, 300, 412, pending=[150, 250, 350, 433], top="shop.test/list?color=&size="))
    assert msg == ("possible trap: shop.test/list?color=&size= is 95% of the pending queue "
                   "(412 of 433) and growing; see --trap and --deny")


# -- stats.txt: StatsRecorder, parse_stats_line, read_stats -----------------------------------------------

def data(path: Path) -> list[str]:
    return [x for x in path.read_text().splitlines() if x and not x.startswith("#")]


def test_stats_recorder_samples_what_the_project_files_say(tmp_path: Path):
    store = FileStore(tmp_path, owner=1).open()
    cal = [QueueEntry(H + f"/cal/2031/{m:02d}", 1) for m in range(1, 7)]
    store.add(cal + [QueueEntry(H + "/doc/1", 1), QueueEntry(H + "/doc/2", 1)])
    rec = StatsRecorder(tmp_path)
    (tmp_path / "rejected.txt").open("a").write(
        rejected_line(H + "/x", "scope") + rejected_line(H + "/y", "scope") + rejected_line(H + "/a/a/a", "repeated-segments")
        + rejected_line("garbage", "queue.txt:3: not an absolute URL: 'garbage'")
        + rejected_line("torn", "bad queue line: empty URL"))
    first = rec.sample(8, 0, 0, 0, 0, when=1_800_000_000.0)
    f = first.rstrip("\n").split("\t")
    assert len(f) == 15 and first.endswith("\n") and f[13:] == ["0", "0"]   # checked, completed: none yet
    assert f[0] == "2027-01-15T08:00:00Z" and f[1] == "1800000000.000"
    assert f[2:9] == ["8", "0", "0", "0", "8", "0", "0"]
    assert (f[9], f[10]) == ("a.test/cal/{n}/{n}", "6")
    assert f[11] == "bad line=2;repeated-segments=1;scope=2" and f[12] == "0"

    # a crawl goes on: two claims (C records), pages crawled, a duplicate
    claims = store.claim(2, 0.0, lambda h: 0.0).claims
    assert [c.url for c in claims] == [H + "/cal/2031/01", H + "/cal/2031/02"]
    for c in claims:
        store.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 1000, 1, 0))
    (tmp_path / "crawled.txt").open("a").write(crawled_line(H + "/pdf", 200, "application/pdf", 234, 1, 0))
    (tmp_path / "duplicates.txt").open("a").write(duplicate_line(H + "/doc/3", "duplicate", H + "/doc/1"))
    (tmp_path / "rejected.txt").open("a").write(rejected_line(H + "/z", "scope"))
    (tmp_path / "links.txt").open("a").write(f"{H}/cal/2031/01\t1\t4\t{H}/a {H}/b\n"
                                             f"{H}/cal/2031/02\t0\t3\t{H}/a\n")
    second = rec.sample(6, 0, 3, 0, 0, when=1_800_000_002.0)
    f = second.rstrip("\n").split("\t")
    assert f[2:9] == ["6", "0", "3", "0", "9", "1", "2234"]
    assert (f[9], f[10]) == ("a.test/cal/{n}/{n}", "4")           # two claimed: 6 -> 4
    assert f[11] == "bad line=2;repeated-segments=1;scope=3"
    assert f[12] == "7"                                            # links to known URLs, counted
    assert f[13:] == ["0", "3"]                                    # no recrawl check; 3 URLs completed

    lines = (tmp_path / STATS).read_text().splitlines()
    assert lines[0].startswith("# time\tunix\tpending") and lines[1].startswith("# run\t")   # a run begins
    assert lines[2:] == [first.rstrip("\n"), second.rstrip("\n")]
    rows = read_stats(tmp_path)
    assert [r.unix for r in rows] == [1_800_000_000.0, 1_800_000_002.0]
    assert read_stats(tmp_path, last=1) == rows[1:]
    assert rows[0].first and not rows[1].first
    assert discovery_ratio(rows) == pytest.approx(1 / 3)


def test_stats_census_is_reset_when_queue_txt_is_replaced(tmp_path: Path):
    store = FileStore(tmp_path, owner=1).open()
    store.add([QueueEntry(H + f"/cal/{i}", 1) for i in range(5)] + [QueueEntry(H + "/doc/1", 1)])
    rec = StatsRecorder(tmp_path)
    assert rec.sample(6, 0, 0, 0, 0).split("\t")[9:11] == ["a.test/cal/{n}", "5"]
    claims = store.claim(4, 0.0, lambda h: 0.0).claims
    for c in claims:
        store.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 1, 1, 0))
    assert rec.sample(2, 0, 4, 0, 0).split("\t")[9:11] == ["a.test/cal/{n}", "1"]
    assert store.fold()                                         # queue.txt replaced, journal emptied
    assert rec.sample(2, 0, 4, 0, 0).split("\t")[9:11] == ["a.test/cal/{n}", "1"]   # not -3, not 7
    store2 = FileStore(tmp_path, owner=2).open()
    store2.add([QueueEntry(H + f"/doc/{i}", 1) for i in range(2, 5)])
    assert rec.sample(5, 0, 4, 0, 0).split("\t")[9:11] == ["a.test/doc/{n}", "4"]


def test_stats_census_of_a_big_queue_is_a_fair_sample(tmp_path: Path):
    """Past CENSUS_SAMPLE_BYTES the census counts 1 URL in k (by CRC, so the claims of those same
    URLs are subtracted): the top pattern's estimate stays within a few percent of the truth,
    both when the queue is first read and after many claims."""
    from spider.stats import CENSUS_SAMPLE_BYTES
    queue = tmp_path / "queue.txt"
    lines = [QueueEntry(H + f"/cal/{i}/x", 1).line() for i in range(80_000)]
    lines += [QueueEntry(H + f"/doc/{i}", 1).line() for i in range(20_000)]
    lines.insert(5, "# a comment\n")
    lines.insert(7, "  \n")
    lines.insert(9, H + "/cal/crlf/x\t1\t0\t0\t-\r\n")
    queue.write_text("".join(lines))
    assert queue.stat().st_size > 2 * CENSUS_SAMPLE_BYTES
    rec = StatsRecorder(tmp_path)
    f = rec.sample(100_001, 0, 0, 0, 0).split("\t")
    assert f[9] == "a.test/cal/{n}/x" and abs(int(f[10]) - 80_000) < 0.05 * 80_000, f[9:11]
    store = FileStore(tmp_path, owner=1).open()
    claims = store.claim(30_000, 0.0, lambda h: 0.0).claims
    assert len(claims) == 30_000
    f = rec.sample(70_001, 30_000, 0, 0, 0).split("\t")
    left = 80_000 - sum(1 for c in claims if c.url.endswith("/x") and "crlf" not in c.url)
    assert f[9] == "a.test/cal/{n}/x" and abs(int(f[10]) - left) < 0.1 * left, (f[9:11], left)
    # exactly: the URLs sampled when queued are the ones subtracted when claimed
    import zlib
    taken = {c.url for c in claims}
    k = rec._every
    assert k and k > 1
    assert int(f[10]) == k * sum(1 for i in range(80_000) if H + f"/cal/{i}/x" not in taken
                                 and zlib.crc32(f"{H}/cal/{i}/x".encode()) % k == 0)


def test_stats_with_nothing_pending_says_dash(tmp_path: Path):
    line = StatsRecorder(tmp_path).sample(0, 0, 0, 0, 0, when=0.0)
    assert line.rstrip("\n").split("\t")[9:] == ["-", "0", "-", "0", "0", "0"]


def test_stats_recorder_feeds_the_alarm(tmp_path: Path):
    rec = StatsRecorder(tmp_path)
    queue = tmp_path / "queue.txt"
    queue.write_text("".join(QueueEntry(H + f"/doc/{i}").line() for i in range(50)))
    n = 0
    for step in range(4):
        with queue.open("a") as q:
            for _ in range(60):
                q.write(QueueEntry(H + f"/cal/{n}/x").line())
                n += 1
        rec.sample(50 + n, 0, 0, 0, 0, when=2.0 * step)   # the alarm counts samples 2 s apart
        if step < 3:
            assert rec.alarm() is None
    assert rec.alarm() == ("possible trap: a.test/cal/{n}/x is 82% of the pending queue (240 of 290) "
                           "and growing; see --trap and --deny")


def test_parse_stats_line_round_trip():
    row = StatsRow(1764499810.012, 118, 4, 52, 1, 175, 3, 913337, "example.org/docs/{n}", 40,
                   {"depth": 12, "scope": 31, "host budget": 2})
    line = ("2026-11-30T10:50:10Z\t1764499810.012\t118\t4\t52\t1\t175\t3\t913337\texample.org/docs/{n}"
            "\t40\tdepth=12;host budget=2;scope=31\n")
    assert parse_stats_line(line) == row
    assert parse_stats_line(line.replace("\n", "\r\n")) == row
    assert parse_stats_line("\ufeff" + line) == row


def test_parse_stats_line_of_a_recorded_sample(tmp_path: Path):
    (tmp_path / "rejected.txt").write_text(rejected_line(H + "/x", "depth"))
    line = StatsRecorder(tmp_path).sample(3, 1, 2, 1, 1, rejected_claims=1, when=1_700_000_000.5)
    row = parse_stats_line(line)
    assert row == StatsRow(1_700_000_000.5, 3, 1, 2, 1, 3 + 1 + 2 + 1 + 1 + 1, 0, 0, "-", 0, {"depth": 1},
                           completed=2 + 1 + 1 + 1)   # crawled, hop, failed, refused when claimed


def test_parse_stats_line_accepts_missing_optional_columns():
    base = "t\t5.5\t1\t2\t3\t4\t5\t6\t7"
    assert parse_stats_line(base) == StatsRow(5.5, 1, 2, 3, 4, 5, 6, 7)
    assert parse_stats_line(base + "\tp") == StatsRow(5.5, 1, 2, 3, 4, 5, 6, 7, "p")
    assert parse_stats_line(base + "\tp\t4") == StatsRow(5.5, 1, 2, 3, 4, 5, 6, 7, "p", 4)
    assert parse_stats_line(base + "\tp\t4x") == StatsRow(5.5, 1, 2, 3, 4, 5, 6, 7, "p", 0)   # torn
    assert parse_stats_line(base + "\tp\t4\t-") == StatsRow(5.5, 1, 2, 3, 4, 5, 6, 7, "p", 4)
    assert parse_stats_line(base + "\tp\t4\tscope=1;junk;x=y") == StatsRow(5.5, 1, 2, 3, 4, 5, 6, 7, "p", 4,
                                                                          {"scope": 1})


@pytest.mark.parametrize("line", [
    "",
    "\n",
    "# time\tunix\tpending\tin_flight\tcrawled\tfailed\tdiscovered\tduplicates\tbytes",
    "   # indented comment",
    "garbage",
    "t\t5.5\t1\t2\t3\t4\t5\t6",                         # torn: 8 columns
    "t\tnow\t1\t2\t3\t4\t5\t6\t7",                      # unix not a number
    "t\t5.5\t1\t2\tx\t4\t5\t6\t7",                      # a count not a number
    "t\t5.5\t1\t2\t3.5\t4\t5\t6\t7",                    # a count not whole
    "t\t5.5\t-1\t2\t3\t4\t5\t6\t7",                     # negative
    "t\tnan\t1\t2\t3\t4\t5\t6\t7",
    "t\tinf\t1\t2\t3\t4\t5\t6\t7",
    "t 5.5 1 2 3 4 5 6 7",                               # spaces, not TABs
])
def test_parse_stats_line_garbage_is_none(line: str):
    assert parse_stats_line(line) is None


def test_read_stats_skips_garbage_and_a_missing_file_is_empty(tmp_path: Path):
    assert read_stats(tmp_path) == []
    (tmp_path / STATS).write_text("# header\nt\t1\t1\t0\t0\t0\t1\t0\t0\nnot a line\nt\t2\t2\t0\t1\t0\t3\t0\t0\tp\t")
    rows = read_stats(tmp_path)
    assert [r.unix for r in rows] == [1.0, 2.0]
    assert discovery_ratio(rows) == 2.0
    assert discovery_ratio(rows[1:]) is None                         # nothing fetched in between


# -- the shortcuts of the hot path agree with the plain rules ---------------------------------------

from hypothesis import given, settings, strategies as st   # noqa: E402

from spider.traps import _DATE, _YEAR_KEY, _beyond, _dates, _repeats   # noqa: E402


def _repeats_plainly(segments: list[str], times: int) -> bool:
    """The rule as its docstring says it, by brute force."""
    for width in range(1, 5):
        for start in range(len(segments)):
            run = segments[start:start + width]
            if len(run) == width and segments[start:start + width * times] == run * times:
                return True
    return False


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "dd", "2026"]), max_size=12), st.integers(1, 4))
def test_repeated_segments_shortcut_agrees_with_brute_force(segments: list[str], times: int) -> None:
    assert _repeats(segments, times) == _repeats_plainly(segments, times)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="0123456789-/._?&=yearmonthx", max_size=40))
def test_calendar_shortcut_agrees_with_every_date_found(text: str) -> None:
    query = text.partition("?")[2]
    today = datetime.date(2026, 6, 15)
    plain = any((d - today).days > 365 or (today - d).days > 7300 for d in _dates(text, query))
    assert _beyond(text, query, today, 365, 7300) == plain
    if _DATE.search(text) is None and _YEAR_KEY.search(query) is None:
        assert list(_dates(text, query)) == []   # what the shortcut relies on
