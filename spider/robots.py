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
``robots/``), written to ``robots/HOST.txt`` as plain text (a small header with the URL, fetch time
and status, a blank line, then the body as received), refreshed after 24 hours, and read from
there by every other worker.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from protego import Protego

from . import safefs

FRESH_FOR = 24 * 3600.0
RETRY_UNAVAILABLE = 300.0
MAX_BODY = 500 * 1024
MAX_HOPS = 5
PENDING = 30.0   # how long a claim holds a host whose robots.txt is being fetched


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

    @property
    def fresh_until(self) -> float:
        return self.fetched_at + (RETRY_UNAVAILABLE if self.mode == "disallow-all" else FRESH_FOR)

    def allowed(self, url: str, agent: str) -> bool:
        if self.mode == "allow-all":
            return True
        if self.mode == "disallow-all":
            return False
        return bool(self._protego().can_fetch(url, agent))

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
        return Rules(status, fetched_at, text, "rules")
    if status is not None and 400 <= status < 500:
        return Rules(status, fetched_at, "", "allow-all")
    tries = previous.attempts + 1 if previous is not None and previous.mode == "disallow-all" else 1
    return Rules(status, fetched_at, "", "disallow-all", tries)


def cache_name(host: str) -> str:
    return re.sub(r"[^a-z0-9.-]", "_", host.lower()) + ".txt"


def dump(rules: Rules, url: str) -> str:
    return (f"url: {url}\nfetched_at: {rules.fetched_at:.3f}\nstatus: {rules.status if rules.status is not None else 'none'}\n"
            f"mode: {rules.mode}\nattempts: {rules.attempts}\n\n{rules.body}")


def load(text: str) -> Rules:
    head, _, body = text.partition("\n\n")
    meta = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
    status = None if meta.get("status", "none") == "none" else int(meta["status"])
    mode = meta.get("mode", "allow-all")
    if mode not in ("rules", "allow-all", "disallow-all"):
        raise ValueError(f"unknown mode {mode!r}")
    return Rules(status, float(meta["fetched_at"]), body, mode, int(meta.get("attempts", "1")))


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
        path = self.dir / cache_name(host)
        try:
            r = load(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError):
            self._missing[host] = now
            return None
        if r.fresh_until <= self.clock():
            return None
        self._rules[host] = r
        return r

    def _stale(self, host: str) -> Rules | None:
        """The expired rules of a host, if any (to count failed robots.txt fetches)."""
        try:
            return load((self.dir / cache_name(host)).read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError):
            return None

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
