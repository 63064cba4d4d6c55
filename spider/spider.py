"""A worker: claim, fetch, parse, add links, complete; until nothing is pending or in flight.

Each worker process runs one ``Spider``. State lives in the store's files; a worker holds only its
current claims, a ``requests.Session`` and caches. The order of writes is what makes a kill at any
instant safe: a page's new links are persisted before the page is recorded as crawled, and the page
is recorded (one appended line) before its claim is closed in the journal. A kill in between makes
the next run fetch that page again; it never loses a page or its links.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from . import recrawl
from .config import CrawlConfig
from .fetch import CSS_TYPES, Fetcher, Response
from .links import Link, LinkFinder, header_links, stylesheet_urls
from .order import Order
from .policy import PAUSED, REDIRECT_STATUSES, FetchFailure, Outcome, Verdict, classify, retry_delay
from .politeness import HostState, effective_delay, tell_host
from .robots import MAX_BODY as ROBOTS_MAX_BODY, MAX_HOPS as ROBOTS_HOPS, PENDING as ROBOTS_PENDING, RobotsCache, Rules, product_token
from .robots import from_fetch as robots_from_fetch
from .records import REQUISITE, QueueEntry, clean, crawled_line, duplicate_line, failed_line, rejected_line, safe_text, utc_stamp
from .scope import BY_URL_ALONE, Admission
from .frontier.seen import SeenSet
from .frontier.contract import Claim, Store, StoreError
from .frontier.files import CLAIM_BATCH, HOT_URLS, FileStore
from .urls import host_key, normalize, resolve

IDLE_MIN, IDLE_MAX = 0.02, 0.5
HEAD_REFUSED = (405, 501)   # --check-requisites: a server that will not answer HEAD gets a GET
SENT_HOSTS = 4096   # hosts whose last request time a worker keeps (_keep_pace)
EXIT_INTERNAL_ERROR = 4   # a worker that met the same bug of ours on one URL too often
RESOLVED_LINKS = 16_384   # resolved links a worker remembers (``_ResolvedLinks``: ~3 MB at most)
_LONGEST_CACHED = 2048    # a longer base or href is resolved afresh: no huge keys kept

# A reference whose URL depends on no more than the base's directory (cached by directory, its
# fragment left out: a fragment is dropped before anything else): an absolute http(s) URL, or a
# path whose first character sends the URL Standard's parser from "relative state" to "path state"
# or "relative slash state" (not "\\", "?", "#", nothing, a space or a control, which is stripped
# first) and which names no scheme ("http:" alone takes the base's whole path and query). No ":"
# and no whitespace in the path (a tab or newline is removed anywhere: "http\t:" is "http:"),
# then a query. Everything else ("", "?q", "#f", "mailto:", " x") is resolved afresh every time.
_DIRECTORY_REFERENCE = re.compile(
    r"https?://|[A-Za-z0-9._~%!$&'()*+,;=@/-][^\x00-\x20\x7f:\\?#]*(?:\?[^\x00-\x20\x7f#]*)?\Z")
_MISS = object()
# This process's pid, for fetch.log's lines: os.getpid() is a system call each time (glibc keeps
# no cache), once a page; a forked worker sets its own.
_PID = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


@dataclass
class LinkReport:
    """What ``add_links_to_queue`` did with one page's links."""

    found: int = 0
    added: int = 0
    duplicates: int = 0
    rejected: int = 0
    linked: list[str] = field(default_factory=list, compare=False)   # every crawlable URL linked


class Spider:
    """One worker of a crawl. ``clock`` and ``wait`` are parameters so tests need no patching."""

    def __init__(self, config: CrawlConfig, store: Store, *, fetcher: Fetcher | None = None,
                 clock: Callable[[], float] = time.time,
                 wait: Callable[[float], bool] | None = None) -> None:
        self.config = config
        self.store = store
        self.fetcher = fetcher or Fetcher(config)
        self.admission = Admission(config, clock)
        self.clock = clock
        self.wait = wait or _sleep   # returns True when the worker should stop
        self.batch = 1   # a held batch would idle other workers when pages are slow
        # A batch keeps the bfs order; with several workers, a batch keeps to one level and waits
        # for the level before to be done (FileStore._level_batch), so no batch lets pages of
        # the next level overtake the last pages of this one.
        self._batched = (config.delay == 0 and not config.auto_throttle and isinstance(store, FileStore)
                         and Order(config.order).batch_keeps_order)
        if self._batched:   # a claim takes a few URLs of hosts that keep no pace (files.batch_size)
            store.batch = CLAIM_BATCH  # type: ignore[union-attr]
        self._rejected = SeenSet()
        # Its URLs met lately, as strings, each with its reason when the URL alone makes it (``_reject``)
        self._rejected_lately: dict[str, str | None] = {}
        self._seeds = frozenset(config.seeds)   # admitted whatever the rules say
        self.agent = product_token(config.user_agent)
        self.robots = None if config.ignore_robots else _robots_cache(store, clock)
        self._pages: dict[str, recrawl.Page] | None = None   # schedule.txt, read at the first recheck
        self._told_internal = False   # an internal error is said once per worker (errors.log has all)
        self._requisites = config.requisites or config.check_requisites
        self._sent: dict[str, float] = {}   # host -> when this worker's last request to it left
        self._resolved = _ResolvedLinks()   # menu links: resolved once per directory, not per page
        self._floors: dict[str, tuple[Rules, float]] = {}   # host -> (its rules, its floor): ``_floor``

    # -- the loop ----------------------------------------------------------------------------------
    def run(self, should_stop: Callable[[], bool]) -> None:
        idle = IDLE_MIN
        while not should_stop():
            result = self.store.claim(self.batch, self.clock(), self.delay_for)
            if result.claims:
                idle = IDLE_MIN
                for i, claim in enumerate(result.claims):
                    if should_stop():
                        for rest in result.claims[i:]:
                            self.store.settle(rest, "released", requeue=rest.entry)
                        return
                    if i and self._batched and not self._keeps_no_pace(host_key(claim.url)):
                        # A batch's host that began to keep a pace meanwhile (a 429, Retry-After,
                        # failures): its URL goes back, to be claimed when its slot comes.
                        self.store.settle(claim, "released", requeue=claim.entry)
                        continue
                    self.crawl_page(claim)
                continue
            if result.finished:
                return
            pause = idle
            if result.wait_until is not None:
                pause = min(IDLE_MAX, max(0.005, result.wait_until - self.clock()))
            else:
                idle = min(IDLE_MAX, idle * 2)
            if self.wait(pause):
                return

    def _keeps_no_pace(self, host: str) -> bool:
        """No delay, no slot to wait for, no failures, no reason to hold back: what a batch's
        URLs need, as they were claimed, to be fetched one after the other."""
        state = self.store.host_state(host)
        return (state.next_allowed <= self.clock() and not state.failures and state.reason == "-"
                and self._delay_in(host, state) == 0)

    def floor(self, host: str) -> float:
        """The least delay for a host: --delay, raised by its robots.txt Crawl-delay (capped)."""
        return self._floor(host, self.robots.known(host) if self.robots else None)

    def _floor(self, host: str, rules: Rules | None) -> float:
        """``floor`` of a host whose fresh rules are ``rules``: worked out once per rules (the
        Crawl-delay is Protego's answer, and a page asks for its host's floor three times or more)."""
        if rules is None:
            return self.config.delay
        kept = self._floors.get(host)
        if kept is not None and kept[0] is rules:
            return kept[1]
        cd = rules.crawl_delay(self.agent)
        floor = self.config.delay if cd is None else max(self.config.delay, min(cd, self.config.max_delay))
        if len(self._floors) >= SENT_HOSTS:
            self._floors.clear()
        self._floors[host] = (rules, floor)
        return floor

    def delay_for(self, host: str) -> float:
        """Seconds the next request to ``host`` must wait after this one (shared host state).

        While the host's robots.txt is not known, a claim holds the host for ROBOTS_PENDING: the
        worker fetching robots.txt must not race another worker that does not know the
        Crawl-delay yet. The request itself then sets the real slot (``_hold_host``)."""
        return self._delay_in(host, self.store.host_state(host))

    def _delay_in(self, host: str, state: HostState) -> float:
        """``delay_for`` of a host in ``state`` (its ``host_state``, which the caller has already)."""
        if self.robots is None:
            return min(self.config.max_delay, effective_delay(state, self.config.delay))
        rules = self.robots.known(host)   # (asked once: ``floor`` would ask again)
        if rules is None:
            return ROBOTS_PENDING
        return min(self.config.max_delay, effective_delay(state, self._floor(host, rules)))

    def host_delay(self, host: str) -> float:
        """The host's real delay (its floor, or what 429/503 or --auto-throttle made it), never ROBOTS_PENDING."""
        return min(self.config.max_delay, effective_delay(self.store.host_state(host), self.floor(host)))

    # -- one URL -------------------------------------------------------------------------------------
    def crawl_page(self, claim: Claim) -> None:
        """Fetch a claimed URL, following redirects hop by hop, and settle every claim involved."""
        self._open_claim: Claim | None = claim
        try:
            self._crawl(claim)
        except StoreError:
            raise
        except Exception as exc:   # a bug must not lose the URL
            current = self._open_claim
            self._log_error(current.url if current else claim.url, exc)
            if current is not None:   # the claim being worked on: maybe a redirect target
                self._after_internal_error(current, exc)

    def _after_internal_error(self, claim: Claim, exc: Exception) -> None:
        """A bug of ours is not the URL's fault, so it never fails the URL for good (an
        OverflowError from --max-time 1e10 once failed every URL, seeds included, and failed URLs
        are never queued again). The URL is tried again later, spending an attempt, with backoff.
        When its attempts are spent it stays pending and this worker stops (exit code
        ``EXIT_INTERNAL_ERROR``): the crawl starts a replacement, and stops with "workers keep
        dying ...; see errors.log" if it goes on. errors.log has each traceback."""
        entry, now = claim.entry, self.clock()
        attempts = entry.attempts + 1
        why = f"internal error ({type(exc).__name__}) on {claim.url}"
        if attempts < self.config.max_attempts:
            self.store.settle(claim, "retry", requeue=replace(
                entry, attempts=attempts, not_before=now + retry_delay(attempts)))
            if not self._told_internal:
                self._told_internal = True
                _say(f"{why}: it will be tried again later; see errors.log")
            return
        self.store.settle(claim, "released", requeue=entry)
        _say(f"{why} {attempts} times: left pending; worker {os.getpid()} stops; see errors.log")
        raise SystemExit(EXIT_INTERNAL_ERROR)

    def _crawl(self, claim: Claim) -> None:
        if claim.entry.kind == "recheck":
            self._recheck(claim)
            return
        # Admitted when it was queued; checked again here, because a line written into queue.txt
        # while the crawl runs (or a saved view fooled by an edit that kept the file's size and
        # time) was not: whatever the settings refuse is never requested.
        reason = None if claim.url in self._seeds else self.admission.check(claim.url, claim.entry.depth)
        if reason:
            self.store.settle(claim, "rejected", record=rejected_line(claim.url, reason, claim.entry.source))
            self._open_claim = None
            return
        chain = [claim.url]
        current = claim
        while True:
            self._open_claim = current
            not_before = self._robots_gate(current)
            if not_before is None:
                self._open_claim = None
                return
            if not_before > self.clock():
                self.wait(not_before - self.clock())
            delay = self._hold_host(current.url)
            self._keep_pace(current.url, delay)
            if not self._still_ours(current):   # last, after the pace wait: nothing blocks between it and the send
                self._open_claim = None
                return
            result = self._request(current)
            self._log_fetch(current.url, result)
            self._adapt(current.url, result)
            attempts = current.entry.attempts + 1
            if isinstance(result, FetchFailure):
                outcome = classify(None, result, attempts, self.config.max_attempts)
            else:
                outcome = classify(result.status, None, attempts, self.config.max_attempts,
                                   has_location=bool(result.location), confirm_404=self.config.confirm_404)
            if outcome.verdict is not Verdict.REDIRECT or isinstance(result, FetchFailure):
                self._settle(current, outcome, result)
                self._open_claim = None
                return
            nxt = self._follow(current, result, chain)
            self._open_claim = nxt
            if nxt is None:
                return
            current = nxt
            chain.append(nxt.url)

    def _request(self, claim: Claim) -> Response | FetchFailure:
        """The request of a claim. A page: GET. A requisite: GET, downloading the body of a
        stylesheet only (for its url()s); with --check-requisites a HEAD, then, one delay later, a
        GET (again keeping a stylesheet's body alone) when the server refuses HEAD (405, 501) or
        HEAD found a stylesheet."""
        if claim.entry.kind != REQUISITE:
            return self.fetcher.fetch(claim.url)
        if not self.config.check_requisites:
            return self.fetcher.fetch(claim.url, body_types=CSS_TYPES)
        result = self.fetcher.fetch(claim.url, method="HEAD")
        if isinstance(result, Response) and (result.status in HEAD_REFUSED or (
                200 <= result.status < 300 and result.content_type in CSS_TYPES)):
            self._log_fetch(claim.url, result)
            self.wait(self.host_delay(host_key(claim.url)))
            self._hold_host(claim.url)
            result = self.fetcher.fetch(claim.url, body_types=CSS_TYPES)
        return result

    def _robots_gate(self, claim: Claim) -> float | None:
        """Apply robots.txt before a request: the time to send it, or None when the claim was
        settled instead (disallowed: rejected as ``robots``; robots.txt unavailable: released and
        the host paused until robots.txt is tried again)."""
        if self.robots is None:
            return claim.not_before
        host = host_key(claim.url)
        rules, fetched = self.robots.get(host, lambda previous: self._fetch_robots(claim.url, previous))
        if rules.mode == "disallow-all" and rules.attempts >= self.config.max_attempts:
            self._fail(claim, f"robots.txt unavailable after {rules.attempts} attempts", self.clock())
            return None
        if rules.mode == "disallow-all":   # RFC 9309: a server error means disallow all, for now
            until = rules.fresh_until if not fetched else max(rules.fresh_until, self.clock())
            self.store.update_host(host, lambda s: replace(s, next_allowed=max(s.next_allowed, until),
                                                           reason="robots.txt unavailable"))
            self.store.settle(claim, "released", requeue=claim.entry)
            return None
        if fetched:
            # That request used this claim's slot: hand the URL back and take other hosts' work
            # meanwhile, instead of holding a worker idle for one delay (matters with many hosts).
            nxt = self.clock() + self.delay_for(host)
            self.store.update_host(host, lambda s: replace(s, next_allowed=nxt, reason="-"))
            self.store.settle(claim, "released", requeue=claim.entry)
            return None
        not_before = claim.not_before
        if not rules.allowed(claim.url, self.agent):
            self.store.settle(claim, "rejected", record=rejected_line(claim.url, "robots", claim.entry.source))
            return None
        return not_before

    def _still_ours(self, claim: Claim) -> bool:
        """The last step before a request (after ``_hold_host``'s store calls and ``_keep_pace``'s
        wait, either of which a pause may fall into): is the claim still this worker's? A store
        whose claims can be taken back (Redis: a lease that ran out while this worker was paused)
        says so through ``holds``; a lost claim is dropped unfetched, since its host's new holder
        keeps its pace. What is left between this check and the send is the fetch's own code and
        its connect; Redis answers ``holds`` locally only while less than half a lease has passed,
        so a request can break the pace only after a stall of half a lease right there."""
        holds = getattr(self.store, "holds", None)
        if holds is None or holds(claim):
            return True
        self.store.settle(claim, "released", requeue=claim.entry)   # refused there: only forgotten here
        return False

    def _hold_host(self, url: str) -> float:
        """Right before a request: the host's next slot starts one delay after *now*.

        The claim reserved a slot from the moment of the claim (or ROBOTS_PENDING while
        robots.txt was unknown); the request leaves a little later, so the slot is set again from
        now. A later time set by the host itself (Retry-After, parking) is kept. Returns the
        delay it used."""
        host = host_key(url)
        state = self.store.host_state(host)
        delay, now = self._delay_in(host, state), self.clock()
        if delay > 0 or state.next_allowed > now:
            self.store.update_host(host, lambda s: replace(s, next_allowed=(
                now + delay if s.reason == "-" else max(s.next_allowed, now + delay))))
        return delay

    def _keep_pace(self, url: str, delay: float) -> None:
        """Right before a request: never less than the host's delay after this worker's own last
        request to it. The shared slot (``_hold_host``) is set from a time read before the store's
        round trips, whose length varies under load, so two requests of one worker could leave
        closer than the delay (measured: 0.185 s against 0.2 on Redis). This worker's own clock
        readings, taken as each request leaves, close that gap; other workers keep to the slot.
        ``delay``: the host's delay as ``_hold_host`` just worked it out (not asked again)."""
        host = host_key(url)
        last = self._sent.get(host)
        if last is not None:
            short = last + delay - self.clock()
            if short > 0:
                self.wait(short)
        now = self._sent[host] = self.clock()
        if len(self._sent) > SENT_HOSTS:   # keep only hosts whose last request is still recent
            horizon = now - self.config.max_delay
            self._sent = {h: t for h, t in self._sent.items() if t >= horizon}

    def _fetch_robots(self, url: str, previous: Rules | None = None) -> tuple[Rules, str]:
        """Fetch robots.txt for ``url``'s host, following up to 5 in-scope redirects.

        Each hop is a request too and waits its turn, but only the host's real delay: the host's
        shared slot is this fetch's own ROBOTS_PENDING hold, kept so that no other worker asks
        the host before its rules are known (``robots_hop_ready``)."""
        target = url.split("/", 3)
        robots_url = f"{target[0]}//{target[2]}/robots.txt"
        own = host_key(robots_url)
        current = robots_url
        sent: dict[str, float] = {}   # host -> when this fetch last asked it
        for hop in range(ROBOTS_HOPS + 1):
            host = host_key(current)
            if hop:
                ready = robots_hop_ready(self.store.host_state(host), sent.get(host), self.host_delay(host))
                if ready > self.clock():
                    self.wait(ready - self.clock())
            if host == own:
                self._hold_host(current)   # ROBOTS_PENDING until _robots_gate sets the real slot
            else:   # another host of the scope: its real delay, never shortening its own hold
                self.store.reserve_host(host, self.clock() + self.host_delay(host))
            sent[host] = self.clock()
            result = self.fetcher.fetch(current, any_type=True, limit=ROBOTS_MAX_BODY)
            self._log_fetch(current, result)
            for _ in range(ROBOTS_HOPS):   # stopped mid-request (SIGSTOP): ask again, it was not the host
                if not (isinstance(result, FetchFailure) and result.kind == PAUSED):
                    break
                result = self.fetcher.fetch(current, any_type=True, limit=ROBOTS_MAX_BODY)
                self._log_fetch(current, result)
            if isinstance(result, FetchFailure):
                return robots_from_fetch(None, b"", self.clock(), previous), robots_url
            if result.status in REDIRECT_STATUSES and result.location:
                nxt = resolve(current, result.location)
                if nxt is None or not self.admission.scope.allows(nxt):
                    break   # off scope: as if there were no robots.txt
                current = nxt
                continue
            return robots_from_fetch(result.status, result.body, self.clock(), previous), robots_url
        return robots_from_fetch(404, b"", self.clock()), robots_url

    def _adapt(self, url: str, result: Response | FetchFailure) -> None:
        """Tell the host's shared politeness state what happened (only when it changes it)."""
        if isinstance(result, FetchFailure) and result.kind == PAUSED:
            return   # we were stopped, the host did nothing wrong
        host = host_key(url)
        tell_host(self.store, host, result, self.clock(), self.floor(host), self.config)

    def _follow(self, claim: Claim, resp: Response, chain: list[str]) -> Claim | None:
        """One redirect hop: check the target, record this URL as a hop, claim the target."""
        entry, now = claim.entry, self.clock()
        target = resolve(claim.url, resp.location or "")
        if target is not None:
            target = self.admission.clean(target)
        hop = crawled_line(claim.url, resp.status, resp.content_type or "-", resp.size, entry.depth,
                           now, target or clean(resp.location))
        if target is None:
            # resolve() gives None for a fragment alone (the same page again) and for targets that
            # are not http(s) URLs at all, or not URLs (a bad port, a space in the host)
            loc = (resp.location or "").strip()
            why = ("redirect loop" if loc.startswith("#") else
                   "redirect to a non-http URL" if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", loc)
                   and not loc.lower().startswith(("http:", "https:")) else "redirect to an invalid URL")
            self._fail(claim, why, now, resp)
            return None
        if target in chain:
            self._fail(claim, "redirect loop", now, resp)
            return None
        if len(chain) > self.config.max_redirects:
            self._fail(claim, f"more than {self.config.max_redirects} redirects", now, resp)
            return None
        reason = self.admission.check(target, entry.depth)
        if reason:
            self._reject([(target, reason, claim.url)])
            self.store.settle(claim, "hop", record=hop)
            return None
        nxt = self.store.admit_and_claim(QueueEntry(target, entry.depth, 0, 0.0, claim.url, entry.kind),
                                         now, self.delay_for(host_key(target)))
        self.store.settle(claim, "hop", record=hop)
        return nxt   # None: the target is already known (pending, in flight, crawled or failed)

    def _settle(self, claim: Claim, outcome: Outcome, result: Response | FetchFailure) -> None:
        entry, now = claim.entry, self.clock()
        v = outcome.verdict
        if v is Verdict.CRAWLED and isinstance(result, Response):
            extra: dict = {}
            read = None
            if entry.kind == REQUISITE:   # not crawled for links, but a stylesheet's url()s are requisites too
                if result.content_type in CSS_TYPES and result.body:
                    self._take_stylesheet(claim, result)
            elif result.is_html and result.body:
                extra, read = self._read_page(claim, result)
            elif result.link or result.refresh:
                extra = self._take_headers(claim, result)
            with self._hold():   # the page's text hash, links, logs and outcome: one lock hold
                if read is not None:
                    self._commit_page(claim, extra, read)
                if 200 <= result.status < 300:   # when to check it again, and with which validators
                    self.store.log("schedule", recrawl.first_line(
                        claim.url, now, result.etag, result.last_modified,
                        extra.get("content_hash") or f"{result.content_type or '-'}:{result.size}",
                        self.config.recrawl_min, self.config.recrawl_max))
                self.store.settle(claim, "crawled", record=crawled_line(
                    claim.url, result.status, result.content_type or "-", result.size, entry.depth, now, **extra))
        elif v is Verdict.RETRY:
            self.store.settle(claim, "retry", requeue=_again(entry, outcome, now))
        else:
            self._fail(claim, outcome.reason, now, result if isinstance(result, Response) else None)

    def _fail(self, claim: Claim, reason: str, now: float, resp: Response | None = None) -> None:
        """Record a URL as failed: with what an error response said it sent (its type and
        declared size) and the page that first linked to it (the broken-links view)."""
        self.store.settle(claim, "failed", record=failed_line(
            claim.url, reason, claim.entry.depth, now, None if resp is None else resp.content_type or "-",
            None if resp is None else resp.size, claim.entry.source))

    def _take_page(self, claim: Claim, result: Response) -> dict:
        """Parse an HTML page and queue its links, unless it is a copy of a page already seen:
        the same text as an earlier page (a ``duplicate``), or a ``variant`` whose
        ``rel=canonical`` URL is already known. Returns the page's fields for crawled.txt."""
        fields, read = self._read_page(claim, result)
        with self._hold():
            self._commit_page(claim, fields, read)
        return fields

    def _read_page(self, claim: Claim, result: Response) -> tuple[dict, tuple]:
        """The part of ``_take_page`` that needs no store: parse, resolve the links. Returns the
        page's fields for crawled.txt and what ``_commit_page`` needs."""
        page = LinkFinder(result.url, self.config.max_links, requisites=self._requisites).parse(
            result.body, result.charset)
        base = claim.url
        if page.base_href is not None:
            base = resolve(claim.url, page.base_href) or claim.url
        # The Link and Refresh headers name pages (and requisites) too, relative to the page's
        # own URL (RFC 8288 3.2), not to <base>: resolved here, so <base> leaves them alone.
        in_headers, header_requisites = self._header_links(claim.url, result)
        links = (page.links + [Link(u, False) for u in in_headers]) if in_headers else page.links
        fields = {"content_hash": page.text_hash, "outlinks": len(links), "title": page.title}
        return fields, (page, base, links, self._resolve(links, base), header_requisites)

    def _commit_page(self, claim: Claim, fields: dict, read: tuple) -> None:
        """The store's part of ``_take_page`` (inside the page's lock hold): is it a copy, then
        its links queued and logged. Adds the canonical URL to ``fields`` (not for a copy)."""
        page, base, links, resolved, header_requisites = read
        entry = claim.entry
        first, known = self._first_and_known(page.text_hash, claim.url, [url for _, url in resolved])
        if first != claim.url:
            self.store.log("duplicates", duplicate_line(claim.url, "duplicate", first))
            return
        canonical = resolve(base, page.canonical) if page.canonical else None
        if canonical is not None:
            canonical = self.admission.clean(canonical)
            fields["canonical"] = canonical
        if canonical is not None and canonical != claim.url and self.admission.check(canonical, entry.depth) is None:
            added = self.store.add([QueueEntry(canonical, entry.depth, 0, 0.0, claim.url)])
            self.store.log("duplicates", duplicate_line(claim.url, "variant", canonical))
            if not added:   # the canonical page is known already: it carries the links
                return
        report = self.add_links_to_queue(claim.url, links, entry.depth, base,
                                         nofollow_page=page.meta_nofollow, checked=(resolved, known))
        if page.dropped:   # --max-links cut this page's links: say so, once per page
            self.store.log("rejected", rejected_line(
                claim.url, f"max-links: {page.dropped} links not followed", claim.url))
        if self._requisites and (page.requisites or header_requisites):
            _merge(report, self.add_links_to_queue(claim.url, page.requisites + header_requisites,
                                                   entry.depth, base, requisite=True))
        self._log_links(claim.url, report)

    def _hold(self):  # type: ignore[no-untyped-def]
        """One lock hold for a page's store calls where the store has one (the file store)."""
        hold = getattr(self.store, "hold", None)
        return hold() if hold is not None else contextlib.nullcontext()

    def _header_links(self, url: str, result: Response) -> tuple[list[str], list[str]]:
        """The pages and requisites a response's Link and Refresh headers name, resolved."""
        if not (result.link or result.refresh):
            return [], []
        pages, requisites = header_links(result.link, result.refresh)
        return ([u for u in (resolve(url, p) for p in pages) if u is not None],
                [u for u in (resolve(url, r) for r in requisites) if u is not None] if self._requisites else [])

    def _take_headers(self, claim: Claim, result: Response) -> dict:
        """A response that is not an HTML page (a PDF, an image) may still link to pages in its
        Link and Refresh headers (RFC 8288: rel=canonical of a PDF, rel=next)."""
        pages, requisites = self._header_links(claim.url, result)
        report = self.add_links_to_queue(claim.url, pages, claim.entry.depth)
        if requisites:
            _merge(report, self.add_links_to_queue(claim.url, requisites, claim.entry.depth, requisite=True))
        self._log_links(claim.url, report)
        return {"outlinks": len(pages)}

    def _take_stylesheet(self, claim: Claim, result: Response) -> None:
        """A stylesheet requisite: its url()s and @imports (fonts, background images, more
        stylesheets) are requisites of the same depth, resolved against the stylesheet's URL."""
        urls = stylesheet_urls(result.body, result.charset)
        if len(urls) > self.config.max_links:   # as many as a page may give, and a max-links line
            self.store.log("rejected", rejected_line(
                claim.url, f"max-links: {len(urls) - self.config.max_links} links not followed", claim.url))
            urls = urls[:self.config.max_links]
        self._log_links(claim.url, self.add_links_to_queue(claim.url, urls, claim.entry.depth, requisite=True))

    def _log_links(self, url: str, report: LinkReport) -> None:
        """What a page links to, for recrawl's "no longer linked from anywhere" (inactive) and the
        broken-links view's referrers; also how many links were new and how many already known
        (counted, not logged)."""
        linked = report.linked   # each URL once, in order (a set tells there is no repeat at half the cost)
        self.store.log("links", f"{url}\t{report.added}\t{report.duplicates}\t"
                                f"{' '.join(linked if len(set(linked)) == len(linked) else dict.fromkeys(linked))}\n")

    # -- recrawl -------------------------------------------------------------------------------------
    def _schedule(self) -> dict[str, recrawl.Page]:
        if self._pages is None:   # a store that keeps its logs (Redis) reads schedule.txt's lines itself
            own = getattr(self.store, "read_schedule", None)
            self._pages = own() if own is not None else recrawl.read_schedule(_folder_of(self.store))
        return self._pages

    def _recheck(self, claim: Claim) -> None:
        """Fetch a crawled page again with a conditional request and record what changed.

        304: unchanged, no parse. 200: the text hash says changed or not; a changed page's new
        links are queued. 404/410: removed. Transient failures are retried like any fetch; the
        page stays crawled whatever happens (checks.txt says what each check found)."""
        self._open_claim = claim
        entry = claim.entry
        not_before = self._robots_gate(claim)
        if not_before is None:
            return
        if not_before > self.clock():
            self.wait(not_before - self.clock())
        cfg = self.config
        page = self._schedule().get(claim.url) or recrawl.Page(claim.url)
        self._keep_pace(claim.url, self._hold_host(claim.url))   # as a first fetch: one pace per worker
        if not self._still_ours(claim):
            self._open_claim = None
            return
        result = self.fetcher.fetch(claim.url, headers=page.conditional_headers())
        self._log_fetch(claim.url, result)
        self._adapt(claim.url, result)
        now = self.clock()
        status = None if isinstance(result, FetchFailure) else result.status
        if status != 304:
            outcome = (classify(None, result, entry.attempts + 1, cfg.max_attempts)
                       if isinstance(result, FetchFailure) else
                       classify(status, None, entry.attempts + 1, cfg.max_attempts, has_location=bool(result.location)))
            if outcome.verdict is Verdict.RETRY:
                self.store.settle(claim, "retry", requeue=_again(entry, outcome, now))
                return
        new_hash = None
        if isinstance(result, Response) and 200 <= result.status < 300:
            if result.is_html and result.body:
                parsed = LinkFinder(result.url, cfg.max_links).parse(result.body, result.charset)
                new_hash = parsed.text_hash
            else:
                new_hash = f"{result.content_type or '-'}:{result.size}"
        what = recrawl.verdict(status, page.content_hash, new_hash)
        body = None   # the new version's content_type, bytes, canonical, outlinks, title (checks.txt)
        if isinstance(result, Response) and what == "changed":
            fields = self._take_page(claim, result) if result.is_html and result.body else {}   # new links queued
            body = {"content_type": result.content_type, "bytes": result.size, **fields}
        elif isinstance(result, Response) and result.status in REDIRECT_STATUSES and result.location:
            self.add_links_to_queue(claim.url, [result.location], max(0, entry.depth - 1))
        etag = result.etag if isinstance(result, Response) else None
        last_modified = result.last_modified if isinstance(result, Response) else None
        after = recrawl.after_check(page, now, what, etag, last_modified, new_hash,
                                    cfg.recrawl_min, cfg.recrawl_max)
        self._schedule()[claim.url] = after
        if what == "removed":
            self.store.log("removed", f"{claim.url}\t{utc_stamp(now)}\t{status}\n")
        self.store.log("schedule", after.line())
        self.store.log("checks", recrawl.check_line(claim.url, status, what, now, new_hash, body))
        self.store.settle(claim, "rechecked")
        self._open_claim = None

    # -- links ---------------------------------------------------------------------------------------
    def _resolve(self, links: Iterable[Link | str], base: str) -> list[tuple[Link | str, str]]:
        """Each link that resolves against ``base``, with its URL cleaned as the crawl keeps it.

        A reference resolved against the base's directory alone (``_DIRECTORY_REFERENCE``: the
        menu links written on every page of a directory) is taken from what this worker resolved
        for another page of the directory (2.5 µs a link afresh, 0.3 from the cache)."""
        out = []
        done = self._resolved.of(base)   # href -> URL (or None) for this base's directory
        for link in links:
            href = link.href if isinstance(link, Link) else link
            if done is None:
                url = self._resolve_one(base, href)
            else:
                key = href.partition("#")[0] if "#" in href else href
                url = done.get(key, _MISS)
                if url is _MISS:
                    url = self._resolve_one(base, href)
                    if key and len(key) <= _LONGEST_CACHED and _DIRECTORY_REFERENCE.match(key):
                        self._resolved.keep(done, key, url)
            if url is not None:
                out.append((link, url))
        return out

    def _resolve_one(self, base: str, href: str) -> str | None:
        url = resolve(base, href)
        return None if url is None else self.admission.clean(url)

    def _first_and_known(self, text_hash: str | None, url: str, links: list[str]) -> tuple[str, set[str]]:
        """The first URL with this page's text, and which of its links the frontier knows: one
        question where the store can ask both at once (Redis: one round trip, not two)."""
        both = getattr(self.store, "first_and_known", None)
        if both is not None:
            return both(text_hash, url, links)  # type: ignore[no-any-return]
        first = self.store.first_with_text(text_hash, url) if text_hash else url
        return first, (self.store.known(links) if first == url else set())

    def add_links_to_queue(self, page_url: str, links: Iterable[Link | str], depth: int,
                           base_url: str | None = None, nofollow_page: bool = False,
                           requisite: bool = False,
                           checked: tuple[list[tuple[Link | str, str]], set[str]] | None = None) -> LinkReport:
        """Resolve, normalise, scope, deduplicate and persist the links found on a page.

        ``depth`` is the page's own depth; its links are one deeper. Links are resolved against
        ``base_url`` (the page's ``<base href>``, resolved) or the page URL. Refused links go to
        rejected.txt with the rule's name and this page; duplicates are counted, not logged.
        ``rel="nofollow"`` links, and all links of a page with meta robots nofollow
        (``nofollow_page``), are refused as ``nofollow`` unless --follow-nofollow.
        ``requisite``: the URLs are the page's requisites (--requisites): queued as such, at the
        page's own depth (so --max-depth never refuses them, as wget -p), nofollow not applying.
        ``checked``: the links already resolved and which of them are known (``_first_and_known``).
        """
        obey_nofollow = not self.config.follow_nofollow and not requisite
        new_depth, kind = (depth, REQUISITE) if requisite else (depth + 1, "-")
        base = base_url or page_url
        report = LinkReport()
        batch: dict[str, QueueEntry] = {}
        refused: list[tuple[str, str, str]] = []
        links = list(links)
        report.found = len(links)
        if checked is None:
            resolved = self._resolve(links, base)
            known = self.store.known(url for _, url in resolved)   # one question for the whole page
        else:
            resolved, known = checked
        linked = report.linked.append
        lately = self._rejected_lately
        duplicates = refused_again = 0
        for link, url in resolved:
            if url in known or url in batch:   # (most of a page's links: counted in a local)
                duplicates += 1
                linked(url)
                continue
            if lately.get(url) is not None:   # refused lately by a rule of the URL alone, and logged
                refused_again += 1
                continue
            reason = self.admission.check(url, new_depth)
            if reason is None and obey_nofollow and (nofollow_page or (isinstance(link, Link) and link.nofollow)):
                reason = "nofollow"
            if reason is None and self.robots is not None:
                rules = self.robots.known(host_key(url))
                if rules is not None and not rules.allowed(url, self.agent):
                    reason = "robots"
            if reason:
                report.rejected += 1
                refused.append((url, reason, page_url))
                continue
            batch[url] = QueueEntry(url, new_depth, 0, 0.0, page_url, kind)
            linked(url)
        report.duplicates += duplicates
        report.rejected += refused_again
        if refused:
            self._reject(refused)
        if batch:
            added = self.store.add(batch.values())
            report.added = len(added)
            if len(added) < len(batch):
                # Not added: queued meanwhile by another worker (known now), or refused by the
                # host budget (logged in rejected.txt by the store, and never known).
                now_known = self.store.known(batch)
                refused_by_budget = sum(1 for url in batch if url not in now_known)
                report.duplicates += len(batch) - len(added) - refused_by_budget
                report.rejected += refused_by_budget
        return report

    def _reject(self, items: list[tuple[str, str, str]]) -> None:
        """Log each refused URL once per worker (the same menu link is refused on every page).

        The URLs refused lately are kept as strings too (at most HOT_URLS): most of a page's
        refused links were refused on the page before, and a string lookup is cheaper than a
        fingerprint's probe of ``_rejected``. With each, the reason when the URL alone decides it
        (``BY_URL_ALONE``: out of scope, ...): ``add_links_to_queue`` then refuses it again at once,
        whatever the depth, the link's nofollow or robots.txt, which ``Admission.check`` asks later."""
        lately, lines = self._rejected_lately, []
        for u, r, s in items:
            if u in lately:
                continue
            if len(lately) >= HOT_URLS:
                lately.clear()
            lately[u] = r if r in BY_URL_ALONE else None
            if self._rejected.add(u):
                lines.append(rejected_line(u, r, s))
        if lines:
            self.store.log("rejected", "".join(lines))

    # -- logs ----------------------------------------------------------------------------------------
    def _log_fetch(self, url: str, result: Response | FetchFailure) -> None:
        if isinstance(result, FetchFailure):
            what, size, ms = clean(result.kind), 0, 0
        else:   # a number: nothing to clean
            what, size, ms = result.status, result.size, int(result.elapsed * 1000)
        line = f"{utc_stamp(self.clock())}\t{_PID[0]}\t{what}\t{size}\t{ms}\t{url}\n"
        self.store.log("fetch", line)

    def _log_error(self, url: str, exc: BaseException) -> None:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        # the exception's message may quote what a server sent: no terminal escapes from it
        self.store.log("errors", f"{utc_stamp()} pid {os.getpid()} {url}\n{safe_text(text, lines=True)}\n")

    def close(self) -> None:
        self.fetcher.close()


class _ResolvedLinks:
    """The links a worker resolved, by the directory of the base they were resolved against
    (``directory_of``): only references whose result depends on that directory alone are kept
    (``_DIRECTORY_REFERENCE``). At most ``limit`` of them: when full, it starts afresh."""

    def __init__(self, limit: int = RESOLVED_LINKS) -> None:
        self.limit = limit
        self.size = 0
        self._by_directory: dict[str, dict[str, str | None]] = {}

    def of(self, base: str) -> dict[str, str | None] | None:
        """The links kept for ``base``'s directory (a dict to add to with ``keep``), or None when
        ``base`` is not a normal http(s) URL (its text before the last "/" could then mislead)."""
        directory = _directory_if_normal(base)
        if directory is None:
            return None
        done = self._by_directory.get(directory)
        if done is None:
            if directory_of(base) is None:   # (a directory kept here was found normal already)
                return None
            done = self._by_directory[directory] = {}
        return done

    def keep(self, done: dict[str, str | None], href: str, url: str | None) -> None:
        if self.size >= self.limit:
            for links in self._by_directory.values():
                links.clear()   # ``done`` too: a page half-way through goes on with an empty one
            self._by_directory.clear()
            self.size = 0
        done[href] = url
        self.size += 1


def _directory_if_normal(base: str) -> str | None:
    """``directory_of`` but for its check of the directory (the caller checks it once): the
    directory of the normal http(s) URL ``base``, else None."""
    if len(base) > _LONGEST_CACHED or not base.startswith(("http://", "https://")):
        return None
    try:
        if normalize(base) != base:
            return None
    except ValueError:
        return None
    head = base.partition("?")[0]
    return head[:head.rfind("/") + 1]


def directory_of(base: str) -> str | None:
    """What a relative path is resolved against: the normal http(s) URL ``base`` up to the last
    "/" of its path; None for anything else (not normal: "/c/.." or escapes before a "/" would
    make the text mean another directory; too long to keep).

    >>> directory_of("http://a/b/c.html?q=/d")
    'http://a/b/'
    >>> directory_of("http://a/b/c/..") is None
    True
    """
    if len(base) > _LONGEST_CACHED or not base.startswith(("http://", "https://")):
        return None
    try:
        if normalize(base) != base:
            return None
        head = base.partition("?")[0]
        directory = head[:head.rfind("/") + 1]
        return directory if normalize(directory) == directory else None
    except ValueError:
        return None


def _merge(report: LinkReport, more: LinkReport) -> None:
    """Add ``more`` (a page's requisites) to ``report`` (its links)."""
    report.found += more.found
    report.added += more.added
    report.duplicates += more.duplicates
    report.rejected += more.rejected
    report.linked += more.linked


def _again(entry: QueueEntry, outcome: Outcome, now: float) -> QueueEntry:
    """The queue line of a URL to try again: one attempt more and a backoff, except after a
    ``paused`` fetch (this worker was stopped meanwhile), which spends no attempt and waits not."""
    if outcome.reason == PAUSED:
        return replace(entry, not_before=now)
    return replace(entry, attempts=entry.attempts + 1, not_before=now + retry_delay(entry.attempts + 1))


def robots_hop_ready(state: HostState, last_sent: float | None, delay: float) -> float:
    """When a redirect hop of a robots.txt fetch may be sent to a host in ``state``.

    A host this fetch asked already (``last_sent``) waits one real ``delay`` after that request:
    its ``next_allowed`` is the ROBOTS_PENDING hold of this same fetch (or of claims waiting for
    these rules), and waiting for it stalled every same-host redirect for 30 s. A later time the
    host set itself (Retry-After, parking) still holds. A host not asked yet waits for its slot."""
    if last_sent is None:
        return state.next_allowed
    ready = last_sent + delay
    return ready if state.reason == "-" else max(ready, state.next_allowed)


def _robots_cache(store: Store, clock: Callable[[], float]):  # type: ignore[no-untyped-def]
    """The store's own robots.txt cache if it has one (the Redis store's, shared by all machines),
    else the project folder's robots/ files."""
    own = getattr(store, "robots_cache", None)
    return own(clock) if own is not None else RobotsCache(_folder_of(store), clock)


def _folder_of(store: Store) -> Path:
    """Where robots/ lives: the project folder (an in-memory store in tests gets a temp one)."""
    folder = getattr(store, "folder", None)
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="spider-robots-"))
        store.folder = folder  # type: ignore[attr-defined]
    return Path(folder)


def _say(text: str) -> None:
    """One line on stderr from a worker (the parent draws the status line on stdout's side)."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):   # a closed stderr must not turn one problem into two
        pass


def _sleep(seconds: float) -> bool:
    time.sleep(max(0.0, seconds))
    return False
