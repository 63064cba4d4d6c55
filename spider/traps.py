"""Trap defences: named rules that keep a crawl out of URL spaces that never end.

A crawler trap is a site that can generate more URLs than it has pages: calendars with a "next
month" link forever, faceted navigation where every filter combination is a URL, session ids
that make each visit a new URL, relative-link bugs that repeat path segments. Each rule here is
a pure function of the URL, has a name (written to rejected.txt), a default, and can be tuned or
turned off with ``--trap NAME=VALUE`` / ``--trap NAME=off`` (``--no-traps`` turns all off):

| rule                  | default | refuses a URL ...                                              |
|-----------------------|---------|----------------------------------------------------------------|
| `url-length`          | 2000    | longer than N characters                                       |
| `path-segments`       | 12      | with more than N path segments                                 |
| `repeated-segments`   | 3       | whose path repeats a run of 1-4 segments N times in a row      |
| `presentation-params` | list    | with a query key that only changes presentation (sort, view)  |
| `query-params`        | 4       | with more than N query parameters (facet combinations)         |
| `calendar`            | 365     | with a date more than N days ahead (path or query)             |
| `calendar-past`       | 7300    | with a date more than N days back (refused as `calendar`)      |
| `session-ids`         | list    | never refuses: these query keys and ``;jsessionid=`` path      |
|                       |         | parameters are stripped before deduplication                   |

Lists are comma-separated, compared case-insensitively.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, fields, replace
from typing import Iterable

PRESENTATION_PARAMS = ("sort", "sortby", "sort_by", "order", "orderby", "order_by", "dir", "direction",
                       "view", "print", "printable", "display", "layout", "theme", "per_page",
                       "perpage", "pagesize", "page_size", "limit")
SESSION_IDS = ("jsessionid", "phpsessid", "sid", "sessionid", "session_id", "aspsessionid",
               "cfid", "cftoken")

# rule name on the command line -> field of TrapRules
_FIELDS = {"url-length": "url_length", "path-segments": "path_segments",
           "repeated-segments": "repeated_segments", "presentation-params": "presentation_params",
           "query-params": "query_params", "calendar": "calendar", "calendar-past": "calendar_past",
           "session-ids": "session_ids"}
RULES = tuple(_FIELDS)
# A run "repeated" once is any run at all: repeated-segments=1 would refuse every URL with a path.
_LEAST = {"repeated_segments": 2}
_WHY_LEAST = {"repeated_segments": ": a run of segments repeated once matches every path"}

_DATE = re.compile(r"(?<![0-9])((?:19|20|21)[0-9]{2})[-/._](1[0-2]|0?[1-9])"
                   r"(?:[-/._](3[01]|[12][0-9]|0?[1-9]))?(?![0-9])")
_YEAR_KEY = re.compile(r"(?:^|&)year=((?:19|20|21)[0-9]{2})(?:&|$)", re.I)
_MONTH_KEY = re.compile(r"(?:^|&)month=(1[0-2]|0?[1-9])(?:&|$)", re.I)


@dataclass(frozen=True)
class TrapRules:
    """The trap rules in force; ``None`` turns a rule off."""

    url_length: int | None = 2000
    path_segments: int | None = 12
    repeated_segments: int | None = 3
    presentation_params: frozenset[str] | None = frozenset(PRESENTATION_PARAMS)
    query_params: int | None = 4
    calendar: int | None = 365
    calendar_past: int | None = 7300
    session_ids: frozenset[str] | None = frozenset(SESSION_IDS)

    @classmethod
    def from_settings(cls, overrides: Iterable[str], enabled: bool = True) -> "TrapRules":
        """Rules from ``--trap NAME=VALUE`` strings; ValueError with a one-line message."""
        rules = cls() if enabled else cls(**{f.name: None for f in fields(cls)})
        for item in overrides:
            name, sep, value = item.partition("=")
            name, value = name.strip().lower(), value.strip()
            if name not in _FIELDS or not sep:
                raise ValueError(f"bad --trap {item!r}: expected NAME=VALUE or NAME=off, "
                                 f"NAME one of {', '.join(RULES)}")
            key = _FIELDS[name]
            parsed: object
            if value.lower() in ("off", "none", "no", "false"):
                parsed = None
            elif key in ("presentation_params", "session_ids"):
                parsed = frozenset(v.strip().lower() for v in value.split(",") if v.strip()) or None
            else:
                try:
                    parsed = int(value)
                except ValueError:
                    raise ValueError(f"bad --trap {item!r}: {name} takes a whole number or 'off'") from None
                least = _LEAST.get(key, 1)
                if parsed < least:   # type: ignore[operator]
                    raise ValueError(f"bad --trap {item!r}: {name} must be at least {least} (or 'off')"
                                     + _WHY_LEAST.get(key, ""))
            rules = replace(rules, **{key: parsed})  # type: ignore[arg-type]
        return rules

    # -- the rules ---------------------------------------------------------------------------------
    def strip_session_ids(self, url: str) -> str:
        """``url`` without session-id query parameters and ``;name=value`` path parameters.

        >>> TrapRules().strip_session_ids("http://a.test/p;jsessionid=ABC?PHPSESSID=1&q=2")
        'http://a.test/p?q=2'
        """
        names = self.session_ids
        if not names:
            return url
        base, qmark, query = url.partition("?")
        if ";" in base:
            head, slash, path = base.partition("://")[2].partition("/")
            segs = []
            for seg in path.split("/"):
                if ";" in seg:
                    parts = seg.split(";")
                    seg = ";".join([parts[0]] + [p for p in parts[1:]
                                                 if p.split("=", 1)[0].lower() not in names])
                segs.append(seg)
            base = base.partition("://")[0] + "://" + head + slash + "/".join(segs)
        if qmark:
            kept = [kv for kv in query.split("&") if kv.split("=", 1)[0].lower() not in names]
            query = "&".join(kept)
        return base + ("?" + query if query else "")

    def check(self, url: str, today: datetime.date) -> str | None:
        """The name of the first rule that refuses ``url``, or None."""
        if self.url_length is not None and len(url) > self.url_length:
            return "url-length"
        rest = url.split("://", 1)[-1]
        path, _, query = rest.partition("?")
        segments = path.split("/")[1:]
        if "" in segments:   # (this runs for every link found: plain loops, no generators)
            segments = [s for s in segments if s]
        if self.path_segments is not None and len(segments) > self.path_segments:
            return "path-segments"
        if self.repeated_segments is not None and _repeats(segments, self.repeated_segments):
            return "repeated-segments"
        params = query.split("&") if query else []
        if "" in params:
            params = [kv for kv in params if kv]
        names = self.presentation_params
        if names:
            for kv in params:
                if kv.partition("=")[0].lower() in names:
                    return "presentation-params"
        if self.query_params is not None and len(params) > self.query_params:
            return "query-params"
        if (self.calendar is not None or self.calendar_past is not None) and \
                _beyond(path.partition("/")[2] + "?" + query, query, today, self.calendar, self.calendar_past):
            return "calendar"
        return None


def _repeats(segments: list[str], times: int) -> bool:
    """Does a run of 1-4 segments occur ``times`` times in a row? (``a/b/a/b/a/b`` for 3)"""
    n = len(segments)
    if times > 1 and len(set(segments)) == n:   # a repeat needs a segment that occurs twice
        return False
    for width in range(1, 5):
        if width * times > n:
            break
        for start in range(0, n - width * times + 1):
            run = segments[start:start + width]
            if all(segments[start + k * width:start + (k + 1) * width] == run for k in range(1, times)):
                return True
    return False


def _dates(text: str, query: str) -> Iterable[datetime.date]:
    for m in _DATE.finditer(text):
        y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
        try:
            yield datetime.date(y, mo, d)
        except ValueError:
            continue
    year = _YEAR_KEY.search(query)
    if year:
        month = _MONTH_KEY.search(query)
        yield datetime.date(int(year.group(1)), int(month.group(1)) if month else 1, 1)


def _beyond(text: str, query: str, today: datetime.date, ahead: int | None, back: int | None) -> bool:
    """A date in the URL more than ``ahead`` days in the future or ``back`` days in the past."""
    if not _DATE.search(text) and not _YEAR_KEY.search(query):   # most URLs hold no date at all
        return False
    for d in _dates(text, query):
        delta = (d - today).days
        if ahead is not None and delta > ahead:
            return True
        if back is not None and -delta > back:
            return True
    return False
