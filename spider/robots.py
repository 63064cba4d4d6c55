"""robots.txt (RFC 9309): what a fetch of it means, the rules, and the per-host cache file.

Parsing is Protego's (the Scrapy project's parser: longest match, Allow over Disallow on a tie,
``*`` and ``$``, user-agent groups, case-insensitive directives). What a fetch outcome means is
decided here, in ``from_fetch``, per RFC 9309 section 2.3.1:

| robots.txt fetch            | rules                                                    |
|-----------------------------|----------------------------------------------------------|
| 2xx                         | parsed (the first 500 KiB; a longer file is cut there)   |
| 4xx (404 included)          | allow all                                                |
| 5xx, or no response at all  | disallow all, and fetch robots.txt again after 5 minutes |
| redirects                   | followed, up to 5 hops, while they stay in scope         |

Each host's robots.txt is fetched once per crawl by one worker (a per-host lock file in
``robots/``), written to ``robots/HOST-HASH.txt`` as plain text (a small header with the URL,
fetch time and status, a blank line, then the body as received), refreshed after 24 hours, and
read from there by every other worker. A cache file that does not read back as exactly that (a
fetch time that is not a finite number, or later than now; an unknown mode; a bad status) is not
a cache file: the host's robots.txt is fetched again and the file replaced.

Checking a URL is Protego's answer, computed faster for big files: a robots.txt of 24,000
wildcard rules costs Protego ~20 ms per URL (every wildcard rule is tried in turn), so the
rules of the group that applies are indexed once by a literal piece each must find in the URL
(``_Matcher``), only the rules whose piece occurs are tried, and for a big file the last answers
are kept (``ANSWERS`` per host). ``tests/test_robots.py`` checks the answers equal Protego's.
"""

from __future__ import annotations

import fcntl
import math
import os
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

from protego import Protego

from . import safefs
from .hashes import sha256

FRESH_FOR = 24 * 3600.0
RETRY_UNAVAILABLE = 300.0
MAX_BODY = 500 * 1024
MAX_HOPS = 5
PENDING = 30.0   # how long a claim holds a host whose robots.txt is being fetched
CLOCK_SKEW = 60.0   # a cache file written this far "in the future" is still believed
ANSWERS = 4096   # per host and worker: URLs whose answer is kept (a page's links, then its claims)
BIG = 64 * 1024  # ... only for a robots.txt this long: a small one is checked as fast as looked up
_PREFIX = 64     # characters of the host kept readable in a cache file name


def product_token(user_agent: str) -> str:
    """``spider/0.1.0 (plain-text web crawler)`` -> ``spider``: what robots.txt groups name."""
    m = re.match(r"\s*([A-Za-z0-9_-]+)", user_agent)
    return m.group(1) if m else "*"


@dataclass
class Rules:
    """The rules of one host, as a fetch of its robots.txt left them."""

    status: int | None          # HTTP status of the final robots.txt response; None: no response
    fetched_at: float
    body: str = ""
    mode: str = "allow-all"     # "rules", "allow-all" or "disallow-all"
    attempts: int = 1           # consecutive fetches that ended in disallow-all (server error)
    _parsed: Protego | None = field(default=None, repr=False)
    _matchers: dict[str, _Matcher | None] = field(default_factory=dict, repr=False, compare=False)
    _answers: OrderedDict[tuple[str, str], bool] = field(default_factory=OrderedDict, repr=False, compare=False)

    def __post_init__(self) -> None:
        # nan or inf here made the host's "retry at" time nan: claimed and released forever.
        if not (math.isfinite(self.fetched_at) and self.fetched_at >= 0):
            raise ValueError(f"fetched_at must be a finite Unix time, not {self.fetched_at!r}")
        if self.status is not None and not 100 <= self.status <= 999:
            raise ValueError(f"status must be a 3-digit HTTP status, not {self.status!r}")
        if self.mode not in ("rules", "allow-all", "disallow-all"):
            raise ValueError(f"unknown mode {self.mode!r}")
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, not {self.attempts!r}")

    @property
    def fresh_until(self) -> float:
        return self.fetched_at + (RETRY_UNAVAILABLE if self.mode == "disallow-all" else FRESH_FOR)

    def allowed(self, url: str, agent: str) -> bool:
        if self.mode == "allow-all":
            return True
        if self.mode == "disallow-all":
            return False
        if len(self.body) < BIG:
            return self._check(url, agent)
        key = (agent, url)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._check(url, agent)
            self._answers[key] = answer
            if len(self._answers) > ANSWERS:
                self._answers.popitem(last=False)
        else:
            self._answers.move_to_end(key)
        return answer

    def _check(self, url: str, agent: str) -> bool:
        if agent not in self._matchers:
            self._matchers[agent] = _Matcher.build(self._protego(), agent)
        matcher = self._matchers[agent]
        if matcher is None or ("/robots.txt" in url and _path_is_robots(url)):
            return bool(self._protego().can_fetch(url, agent))
        return matcher.allowed(url)

    def crawl_delay(self, agent: str) -> float | None:
        if self.mode != "rules":
            return None
        d = self._protego().crawl_delay(agent)
        return float(d) if d is not None else None

    def sitemaps(self) -> list[str]:
        return list(self._protego().sitemaps) if self.mode == "rules" else []

    def label(self) -> str:
        return {"rules": "ok", "allow-all": "allow-all", "disallow-all": "disallow-all"}[self.mode] + (
            f" ({self.status})" if self.status is not None else " (no response)")

    def _protego(self) -> Protego:
        if self._parsed is None:
            self._parsed = Protego.parse(self.body)
        return self._parsed


def from_fetch(status: int | None, body: bytes, fetched_at: float, previous: Rules | None = None) -> Rules:
    """RFC 9309 2.3.1: what a robots.txt response (or the lack of one) means.

    Server errors count up (``attempts``) so a host whose robots.txt never answers is given up
    on after --max-attempts tries instead of keeping a crawl alive forever."""
    if status is not None and 200 <= status < 300:
        text = body[:MAX_BODY].decode("utf-8", "replace")   # non-UTF-8 bytes tolerated
        return Rules(status, fetched_at, _defang(text), "rules")
    if status is not None and 400 <= status < 500:
        return Rules(status, fetched_at, "", "allow-all")
    tries = previous.attempts + 1 if previous is not None and previous.mode == "disallow-all" else 1
    return Rules(status, fetched_at, "", "disallow-all", tries)


def _path_is_robots(url: str) -> bool:
    return urlparse(url).path == "/robots.txt"   # Protego's own exception, kept as it has it


class _Matcher:
    """Protego's answer for one user-agent group, without trying every rule for every URL.

    Protego sorts a group's rules by priority (longest pattern first, Allow before Disallow on a
    tie) and the first rule that matches the quoted URL decides. Every rule needs some literal
    piece of its pattern (between ``*``s) to occur in the URL, so each rule is filed under one
    piece of at most ``KEY`` characters (the rarest among its pieces' first and last ``KEY``
    characters); for a URL, only the rules filed under a piece found in it are tried, in
    Protego's order, with Protego's own ``match``. Built from Protego's rule objects: a Protego
    without them (another version) gets ``None`` from ``build``, and its own ``can_fetch``."""

    KEY = 8

    def __init__(self, rules: list, quote) -> None:  # type: ignore[no-untyped-def]
        self.rules = rules
        self.quote = quote
        grams: list[list[str]] = []
        count: dict[str, int] = {}
        for rule in rules:
            pattern = rule.value._pattern
            pieces = [p for p in pattern.removesuffix("$").split("*") if p]
            keys = {k for p in pieces for k in (p[:self.KEY], p[-self.KEY:])}
            grams.append(sorted(keys))
            for k in keys:
                count[k] = count.get(k, 0) + 1
        self.always: list[int] = []
        self.index: dict[str, list[int]] = {}
        for i, keys in enumerate(grams):
            if keys:
                self.index.setdefault(min(keys, key=lambda k: (count[k], -len(k), k)), []).append(i)
            else:   # "*" alone: can match anything
                self.always.append(i)
        self.lengths = sorted({len(k) for k in self.index})

    @classmethod
    def build(cls, parsed: Protego, agent: str) -> _Matcher | None:
        try:
            from protego._utils import _quote_path   # type: ignore[import-not-found]
            ruleset = parsed._get_matching_rule_set(agent)
            if ruleset is None:
                return cls([], _quote_path)
            rules = list(ruleset._rules)
            for rule in rules:
                if rule.field not in ("allow", "disallow") or not isinstance(rule.value._pattern, str):
                    return None
            return cls(rules, _quote_path)
        except (ImportError, AttributeError, TypeError):
            return None

    def allowed(self, url: str) -> bool:
        if not self.rules:
            return True
        quoted = self.quote(url)
        found = set(self.always)
        index = self.index
        for n in self.lengths:
            for i in range(len(quoted) - n + 1):
                hit = index.get(quoted[i:i + n])
                if hit is not None:
                    found.update(hit)
        for i in sorted(found):
            rule = self.rules[i]
            if rule.value.match(quoted):
                return rule.field != "disallow"
        return True


_BREAKS = re.compile("\r\n?|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\u202a-\u202e\u2066-\u2069]")


def _defang(text: str) -> str:
    """A robots.txt body that ``cat robots/*.txt`` cannot turn into terminal commands, with the
    same rules: every line break Protego splits at (``str.splitlines``) becomes LF, and every
    other control character (ESC, BEL, DEL, C1, bidi controls) its percent-encoding, which is
    what Protego compares paths and patterns in anyway. (A US, ``\\x1f``, at the very end of a
    line was stripped by Protego and now stays as ``%1F``.) A byte becomes 3 characters at most."""
    text = _BREAKS.sub("\n", text)
    if _CONTROLS.search(text) is None:
        return text
    return _CONTROLS.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), text)


def cache_name(host: str) -> str:
    """The cache file of a host: a readable prefix and a hash of the whole ``host[:port]``.

    Always one safe file name (``[a-z0-9.-]``, ``_`` for anything else, at most 86 bytes with
    ``.lock`` or a temp suffix added), whatever the host: a 253-character host name made a name
    longer than the 255 bytes a file system allows, and ``a:8080`` and ``a_8080`` shared one."""
    digest = sha256(host.lower().encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return re.sub(r"[^a-z0-9.-]", "_", host.lower()[:_PREFIX]) + "-" + digest + ".txt"


def dump(rules: Rules, url: str) -> str:
    return (f"url: {url}\nfetched_at: {rules.fetched_at:.3f}\nstatus: {rules.status if rules.status is not None else 'none'}\n"
            f"mode: {rules.mode}\nattempts: {rules.attempts}\n\n{rules.body}")


def load(text: str) -> Rules:
    """A cache file's rules; ValueError (or KeyError) for anything ``dump`` would not have written."""
    head, _, body = text.partition("\n\n")
    meta = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
    status = None if meta.get("status", "none") == "none" else int(meta["status"])
    return Rules(status, float(meta["fetched_at"]), body, meta.get("mode", "allow-all"),
                 int(meta.get("attempts", "1")))


class RobotsCache:
    """The robots/ folder of a project, seen from one worker process."""

    def __init__(self, folder: Path, clock: Callable[[], float] = time.time) -> None:
        self.dir = Path(folder) / "robots"
        self.clock = clock
        self._rules: dict[str, Rules] = {}
        self._missing: dict[str, float] = {}   # host -> when its file was last found missing

    def known(self, host: str) -> Rules | None:
        """Fresh rules for ``host`` from memory or the cache file, without any network I/O."""
        now = self.clock()
        r = self._rules.get(host)
        if r is not None and r.fresh_until > now:
            return r
        if now - self._missing.get(host, -1e18) < 1.0:   # looked a moment ago: not there yet
            return None
        r = self._read(host)
        if r is None:
            self._missing[host] = now
            return None
        if r.fresh_until <= self.clock():
            return None
        self._rules[host] = r
        return r

    def _read(self, host: str) -> Rules | None:
        """The host's cache file, or None when there is none or it is not one (any garbage,
        or a fetch time later than now: fresh for ever, or a host waiting until then)."""
        try:
            with open(self.dir / cache_name(host), encoding="utf-8") as f:
                # the body is cut at MAX_BODY bytes, each at most 3 characters once _defang-ed
                text = f.read(3 * MAX_BODY + 64 * 1024)
                if f.read(1):
                    return None
            r = load(text)
        except (OSError, ValueError, KeyError):
            return None
        return r if r.fetched_at <= self.clock() + CLOCK_SKEW else None

    def _stale(self, host: str) -> Rules | None:
        """The expired rules of a host, if any (to count failed robots.txt fetches)."""
        return self._read(host)

    def get(self, host: str, fetch: Callable[[Rules | None], tuple[Rules, str]]) -> tuple[Rules, bool]:
        """Rules for ``host``, fetching robots.txt if no worker has (``fetch`` does the request).

        ``fetch`` gets the expired rules (or None) and returns new ones with the robots.txt URL.
        Returns the rules and whether this call fetched them. The per-host lock makes every other
        worker wait for the one fetch and then read its file.
        """
        r = self.known(host)
        if r is not None:
            return r, False
        safefs.ensure_dir(self.dir)
        fd = safefs.open_fd(self.dir / (cache_name(host) + ".lock"), os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._missing.pop(host, None)
            r = self.known(host)
            if r is not None:
                return r, False
            r, url = fetch(self._stale(host))
            safefs.atomic_write(self.dir / cache_name(host), dump(r, url))
            self._rules[host] = r
            return r, True
        finally:
            os.close(fd)   # closing releases the lock
