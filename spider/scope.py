"""Admission: may this URL enter the queue? One function, answering with a reason.

``Admission.check(url, depth)`` returns None to admit, or the name of the rule that refuses:

- ``depth``: deeper than ``--max-depth`` (a seed is depth 0, its links depth 1, ...);
- ``scope``: outside the crawl's scope (see ``Scope``);
- ``deny``: matches a ``--deny`` regular expression;
- ``allow``: ``--allow`` patterns were given and none matches;
- ``url too long``: longer than ``MAX_URL_LENGTH`` characters (whatever the trap rules say);
- a trap rule's name (``url-length``, ``path-segments``, ``repeated-segments``,
  ``presentation-params``, ``query-params``, ``calendar``): see ``spider/traps.py``.

The order is the order of the list: a user's own rules (scope, deny, allow) are named before a
trap rule, and a trap rule before depth, so rejected.txt names the most telling reason.
``Admission.clean`` is applied first: it strips session ids, which never change the content.

Duplicates are not a refusal: the store drops URLs already queued, in flight, crawled or failed,
and counts them. Every refusal is written to rejected.txt by the caller with the page it came from.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from itertools import compress, repeat
from operator import and_, getitem, not_
from typing import Callable, Collection
from urllib.parse import urlsplit

from .config import CrawlConfig
from .patterns import compile_pattern
from .traps import TrapRules
from .urls import Scan, host_key, off_shape_lines


MAX_URL_LENGTH = 8192   # longer URLs are refused: servers reject them (and they are traps)
_RUN = 16   # a run of fewer URLs is checked URL by URL: the searches over a whole run cost ~2 µs in calls
_ANSWERS_KEPT = 4096    # hosts whose scope answer a Scope keeps


def hostname(url: str) -> str:
    """The host of a normalised URL, without userinfo, port or brackets (string slicing: this
    runs for every link found)."""
    netloc = host_key(url)
    if netloc.startswith("["):
        return netloc[1:netloc.find("]")]
    return netloc.partition(":")[0]


def port_of(url: str) -> str:
    """The port of a normalised URL as scope compares it: "" for none and for 80 and 443, the
    default ports of http and https (so ``http://h/`` and ``https://h/`` are one origin for the
    crawl, and a site that moves to https stays in scope)."""
    netloc = host_key(url)
    port = netloc[netloc.find("]") + 1:] if netloc.startswith("[") else netloc
    port = port.rpartition(":")[2] if ":" in port else ""
    return "" if port in ("80", "443") else port


def same_site_host(host: str) -> str:
    """``www.example.com`` and ``example.com`` are one site for the host scope; ``www.`` before an
    IP address is a name of its own (``www.127.0.0.1`` is not ``127.0.0.1``)."""
    if host.startswith("www.") and host.count(".") >= 2 and not _is_ip(host[4:]):
        return host[4:]
    return host


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


@lru_cache(maxsize=1)
def _psl():  # type: ignore[no-untyped-def]
    from publicsuffixlist import PublicSuffixList   # bundled Public Suffix List, no network
    return PublicSuffixList()


def registrable_domain(host: str) -> str:
    """``a.b.example.co.uk`` -> ``example.co.uk`` (Public Suffix List); IPs and single labels stay."""
    if _is_ip(host) or "." not in host:
        return host
    return _psl().privatesuffix(host) or host


@dataclass(frozen=True)
class Scope:
    """Which URLs belong to the crawl, derived from the seeds.

    - ``host``: the seeds' hosts (``www.`` ignored, except before an IP address; http or https);
    - ``domain``: the seeds' registrable domains and all their subdomains, on label boundaries
      (``a.example.com`` is in ``example.com``, ``badexample.com`` is not);
    - ``prefix``: a seed's host and path under the seed's folder (``/docs/`` for ``/docs/intro``).

    In every mode the port is part of it, as in a browser's origin: a link to another port of
    the host is out (a page could make the crawler knock on every port of its host), except that
    no port, 80 and 443 are one. ``any_port`` drops the port from the comparison.
    """

    mode: str
    seeds: tuple[str, ...]
    any_port: bool = False

    def __post_init__(self) -> None:
        def port(url: str) -> str:
            return "*" if self.any_port else port_of(url)

        object.__setattr__(self, "_hosts", frozenset((same_site_host(hostname(s)), port(s)) for s in self.seeds))
        object.__setattr__(self, "_domains", frozenset((registrable_domain(hostname(s)), port(s)) for s in self.seeds))
        prefixes = []
        for s in self.seeds:
            path = urlsplit(s).path or "/"
            prefixes.append((same_site_host(hostname(s)), port(s), path[: path.rfind("/") + 1] or "/"))
        object.__setattr__(self, "_prefixes", tuple(prefixes))
        object.__setattr__(self, "_answers", {})

    def allows(self, url: str) -> bool:
        if self.mode == "prefix":
            return self._allows(url)
        # In the other modes the answer is the host's (and port's): worked out once per host, by
        # what precedes the path (``host_key`` reads nothing else). Most links and pasted lines
        # are of the few hosts a crawl is about.
        end = url.find("/", 8)
        key = url[:end] if end >= 0 else url
        answers: dict[str, bool] = self._answers  # type: ignore[attr-defined]
        answer = answers.get(key)
        if answer is None:
            if len(answers) >= _ANSWERS_KEPT:
                answers.clear()
            answer = answers[key] = self._allows(url)
        return answer

    def _allows(self, url: str) -> bool:
        host = hostname(url)
        port = "*" if self.any_port else port_of(url)
        if self.mode == "host":
            return (same_site_host(host), port) in self._hosts  # type: ignore[attr-defined]
        if self.mode == "domain":
            return any(p == port and (host == d or host.endswith("." + d))
                       for d, p in self._domains)  # type: ignore[attr-defined]
        h = same_site_host(host)
        path = "/" + url.split("/", 3)[3].split("?", 1)[0] if url.count("/") >= 3 else "/"
        return any(h == ph and port == pp and path.startswith(pf)
                   for ph, pp, pf in self._prefixes)  # type: ignore[attr-defined]


def _one_host_part(urls: list[str]) -> str | None:
    """The ``_host_parts`` of the URLs if it is the same for all of them (else None): then each
    begins with it and a "/" (one count over all of them), and it is eight characters or more with
    no "/" after the eighth."""
    end = urls[0].find("/", 8)
    if end < 0:
        return None
    first, block = "\n" + urls[0][:end + 1], "\n" + "\n".join(urls)
    if block.count("\n") != len(urls) or block.count(first) != len(urls):   # (a "\n" in a URL: each is asked)
        return None
    return first[1:-1]


def _host_parts(urls: list[str]) -> list[str]:
    """What ``Scope.allows`` keeps its answer under, for each URL: up to the first "/" from the
    ninth character on (all of it if none); with no loop in Python when each has one."""
    ends = list(map(str.find, urls, repeat("/"), repeat(8)))
    if -1 in ends:
        return [url[:end] if end >= 0 else url for url, end in zip(urls, ends)]
    return list(map(getitem, urls, map(slice, ends)))


class _PlainTest:
    """A cheap test that no trap rule can refuse a URL, true of most URLs: each condition bounds
    what ``TrapRules.check`` measures from above (tests/test_admission_shortcuts.py checks it),
    so only the other URLs are asked of the rules (~2 µs a URL)."""

    # Every date the calendar rule reads (traps._DATE) matches this, and most URLs do not.
    DATE = re.compile(r"(?:19|20|21)[0-9][0-9][-/._][0-9]")

    def __init__(self, rules: TrapRules) -> None:
        def limit(value: int | None) -> int:
            return sys.maxsize if value is None else value
        self.length = min(limit(rules.url_length), MAX_URL_LENGTH)
        self.segments = limit(rules.path_segments)      # path segments: at most the slashes but 2
        self.repeats = limit(rules.repeated_segments)   # a run repeated N times: N segments, one twice
        self.params = limit(rules.query_params)         # query parameters: at most the "&"s + 1
        self.off = rules.repeated_segments is not None and rules.repeated_segments < 2
        self.dated = rules.calendar is not None or rules.calendar_past is not None
        # The rule lowercases the keys: a name that is not in lowercase matches none.
        self.keys = frozenset(n for n in rules.presentation_params or () if n == n.lower())
        # Where one of them may begin a parameter's name (after "?" or "&"): a run without it needs no look at each.
        self.key_at = re.compile("[?&](?:%s)" % "|".join(map(re.escape, sorted(self.keys)))) if self.keys else None
        # A URL with fewer "/" than would start the repeated-segments count needs no look at its segments.
        self._shape = _plain_shape(max(0, min(self.segments, self.repeats - 1)), self.params, self.length)
        looks = ([self.key_at.pattern] if self.key_at is not None else []) + \
            ([self.DATE.pattern, "year="] if self.dated else [])
        self._look = _scan("|".join(looks)) if looks else None
        # (else RE2 refused a key, or a limit is past what it counts to: each URL is looked at)
        self._block = self._shape is not None and (self._look is not None or not looks)

    def clear(self, url: str) -> bool:
        """True: no trap rule refuses ``url``; False: the rules must say."""
        if self.off:
            return False
        # One URL: with all the searches (as ``_clear_block``'s unsure ones), since ``_each`` looks
        # for a key, "year=" or a date only where one could be (a query, a "19"): searching the
        # whole URL first, as ``clear_many`` does for a run, costs a single URL ~0.5 µs more.
        return self._each([url], self.keys, self.dated, self.dated)[0]

    def clear_many(self, urls: list[str]) -> list[bool]:
        """``clear`` of each URL. What would be searched in each URL (the presentation keys,
        "year=", a date) is searched once in all of them first, and in each only if found; and
        most URLs are cleared by one match over all of them (``_shape``), without a look at each."""
        if self.off:
            return [False] * len(urls)
        block = "\n".join(urls)
        if len(urls) >= _RUN and self._block and block.isascii() \
                and block.count("\n") == len(urls) - 1 and max(map(len, urls)) <= self.length:
            return self._clear_block(urls, (block + "\n").encode("ascii"))
        low = block.lower()   # (an ASCII URL's lowercase is in it, whatever its neighbours)
        keys = self.keys if self.key_at is not None and self.key_at.search(low) else ()
        year = self.dated and "year=" in low
        dated = self.dated and self.DATE.search(block) is not None   # (no "\n" in a date)
        return self._each(urls, keys, year, dated)

    def _clear_block(self, urls: list[str], data: bytes) -> list[bool]:
        """``clear_many`` of URLs of ASCII, none over the length limit, joined in ``data`` (each
        ending in "\\n"): the lines with the plain shape and none of a presentation key after "?"
        or "&", "year=" or a date (searched with RE2) are cleared as they are; the others are looked
        at one by one (``_each``)."""
        # What would be looked for in each URL, looked for in all (in lowercase: a date has no letter).
        found = self._look.starts(data.lower()) if self._look is not None else []
        starts = off_shape_lines(data, self._shape, found)   # type: ignore[arg-type]
        out = [True] * len(urls)
        if starts:
            unsure, line, pos = [], 0, 0
            for at in starts:   # (offsets to line numbers, counting the "\n"s once)
                line += data.count(b"\n", pos, at)
                unsure.append(line)
                pos = at
            # (each with all the searches: a URL that has no key, "year=" or date is not stopped by them)
            for i, clear in zip(unsure, self._each([urls[i] for i in unsure], self.keys, self.dated, self.dated)):
                out[i] = clear
        return out

    def _each(self, urls: list[str], keys: Collection[str], year: bool, dated: bool) -> list[bool]:
        """``clear`` of each URL, one at a time (``keys``, ``year``, ``dated``: what the whole run
        has, see ``clear_many``)."""
        length, segments, repeats, params = self.length, self.segments, self.repeats, self.params
        out: list[bool] = []
        put = out.append
        for url in urls:
            put(False)   # until cleared
            if len(url) > length or not url.isascii():
                continue
            rest = url.find("://")   # (the rules read what follows it)
            if rest < 0:
                continue
            slashes = url.count("/") - 2
            if slashes > segments:
                continue
            q = url.find("?", rest)
            if slashes >= repeats:
                parts = (url[rest:q] if q >= 0 else url[rest:]).split("/")
                if len(set(parts)) < len(parts):
                    continue
            if q >= 0:
                if url.count("&", q) >= params:
                    continue
                if year or keys:
                    query = url[q + 1:].lower()
                    if year and "year=" in query:
                        continue
                    if keys and any(kv.partition("=")[0] in keys for kv in query.split("&")):
                        continue
            # (no date without one of these: most URLs are spared the search)
            if dated and ("19" in url or "20" in url or "21" in url) and self.DATE.search(url):
                continue
            out[-1] = True
        return out


def _plain_shape(segments: int, params: int, length: int) -> Scan | None:
    """Lines (each ending in "\\n") of a URL that no count of the plain test stops: "://" with no
    "/" before it, at most ``segments`` "/" after it (none in the query) and fewer than
    ``params`` "&" after the first "?" following it. A bound that a URL of ``length`` characters
    cannot pass is none; None when a bound is more than RE2 counts to (1000) but less than that."""
    def upto(n: int) -> str:
        return "*" if n >= length else f"{{0,{n}}}"
    if any(1000 < n < length for n in (segments, params - 1)):
        return None
    query = rf"(?:\?[^&/\n]*(?:&[^&/\n]*){upto(params - 1)})?" if params > 0 else ""
    return _scan(rf"(?:[^/\n]*://[^/?\n]*(?:/[^/?\n]*){upto(segments)}{query}\n)*")


def _scan(pattern: str) -> Scan | None:
    """``pattern`` for RE2 (``Scan``), or None if RE2 reads it otherwise (a key that ``re.escape``
    escaped in a way RE2 refuses): the URLs are then each looked at."""
    try:
        return Scan(pattern)
    except Exception:   # (re2.error, whatever the binding's version calls it)
        return None


# The reasons of ``Admission.check`` that the URL alone decides (whatever the depth, the day or the
# page that links to it), checked before the others: a worker refuses a URL it refused for one of
# them again without asking (``Spider._reject``).
BY_URL_ALONE = frozenset({"url too long", "scope", "deny", "allow"})


class Admission:
    """The one admission decision, built once per worker from the crawl's settings."""

    def __init__(self, config: CrawlConfig, clock: Callable[[], float] = time.time) -> None:
        self.max_depth = config.max_depth
        self.scope = Scope(config.scope, config.seeds, config.any_port)
        self.allow = [compile_pattern(p) for p in config.allow]
        self.deny = [compile_pattern(p) for p in config.deny]
        self.traps = TrapRules.from_settings(config.traps, not config.no_traps)
        self._plain = _PlainTest(self.traps)
        self.clock = clock
        self._day: tuple[int, datetime.date] = (-1, datetime.date.min)   # (UTC day number, its date)

    def clean(self, url: str) -> str:
        """The URL as it is deduplicated and queued: without session ids."""
        return self.traps.strip_session_ids(url)

    def check(self, url: str, depth: int) -> str | None:
        # (the first four rules read the URL alone: ``BY_URL_ALONE``)
        if len(url) > MAX_URL_LENGTH:
            return "url too long"
        if not self.scope.allows(url):
            return "scope"
        if self.deny and any(p.search(url) for p in self.deny):
            return "deny"
        if self.allow and not any(p.search(url) for p in self.allow):
            return "allow"
        if not self._plain.clear(url):
            trap = self.traps.check(url, self._today())
            if trap:
                return trap
        if depth > self.max_depth:
            return "depth"
        return None

    def check_many(self, urls: list[str], depth: int) -> list[str | None]:
        """``[self.check(url, depth) for url in urls]`` in one call (a pasted stretch): the scope's
        answer looked up per host, and a URL the plain test clears needs nothing else. Any other
        URL, and every URL when deny/allow patterns, the prefix scope or ``depth`` could refuse,
        is asked of ``check`` (tests/test_admission_shortcuts.py checks the two agree)."""
        check = self.check
        scope = self.scope
        if self.deny or self.allow or depth > self.max_depth or scope.mode == "prefix":
            return [check(url, depth) for url in urls]
        plains = self._plain.clear_many(urls)
        if len(urls) < _RUN:
            return self._check_each(urls, depth, plains)
        if _one_host_part(urls) is not None:   # (most runs: one host) its answer, asked of the first URL
            oks = [scope.allows(urls[0])] * len(urls)
        else:   # the scope's answer for each host (and port): asked of its first URL, as one at a time would
            keys = _host_parts(urls)
            allows = scope.allows
            answers = {key: allows(url) for key, url in dict(zip(keys[::-1], urls[::-1])).items()}
            oks = list(map(answers.__getitem__, keys))
        if oks[0] and all(plains) and all(oks):   # (most runs)
            return [None] * len(urls)
        out: list[str | None] = [None] * len(urls)
        for i in compress(range(len(urls)), map(not_, map(and_, oks, plains))):
            url = urls[i]
            out[i] = "scope" if not oks[i] and len(url) <= MAX_URL_LENGTH else check(url, depth)
        return out

    def _check_each(self, urls: list[str], depth: int, plains: list[bool]) -> list[str | None]:
        """``check_many`` of a short run (``plains``: the plain test of each URL), URL by URL."""
        answers: dict[str, bool] = self.scope._answers  # type: ignore[attr-defined]
        allows = self.scope.allows
        out: list[str | None] = []
        put = out.append
        for url, plain in zip(urls, plains):
            end = url.find("/", 8)
            ok = answers.get(url[:end] if end >= 0 else url)
            if ok is None:
                ok = allows(url)
            if ok and plain:
                put(None)
            elif not ok and len(url) <= MAX_URL_LENGTH:
                put("scope")
            else:
                put(self.check(url, depth))
        return out

    def _today(self) -> datetime.date:
        """Today's UTC date, built once a day rather than once per URL."""
        now = self.clock()
        day = int(now // 86400)
        if day != self._day[0]:
            self._day = (day, datetime.datetime.fromtimestamp(now, datetime.timezone.utc).date())
        return self._day[1]

    def check_seed(self, url: str) -> str | None:
        """Seeds are in scope by definition and typed by the user: no pattern applies to them."""
        return None
