"""Sitemaps: seed a crawl from what a site says it has (robots.txt ``Sitemap:`` lines, sitemap
index files, urlsets, gzip, plain text), through the same admission as links.

Two parts:

- ``parse_sitemap(body)``: pure. Bytes in (gzip detected by its magic bytes), a ``Sitemap`` out:
  its kind, its ``(loc, lastmod)`` entries and the problems found. It streams: gzip is
  decompressed in slices up to ``MAX_BYTES`` (a gzip bomb stops there and is reported) and the XML
  is parsed by a pull parser that frees each entry once read, so memory stays small whatever the
  file holds. The XML parser is lxml's with network access, entity expansion and huge trees off
  (no XXE, no billion laughs) and ``recover`` on: real sitemaps are often slightly broken. The
  commonest breakage, a bare ``&`` in a URL, is escaped before parsing (libxml2 would drop it).
  Namespaces are optional. Plain-text sitemaps (one URL per line) are read too.
- ``seed_from_sitemaps(store, config, fetcher, ...)``: the I/O. For each given host: its
  robots.txt (the same cache file and RFC 9309 meaning as the workers'), its ``Sitemap:`` lines or
  else ``/sitemap.xml``; index files followed breadth-first within ``Limits`` (index depth, file
  count, size, URLs per file); every request paced by the host's shared politeness state and
  obeying robots.txt; each URL found normalised, checked by ``Admission`` and robots.txt, and
  queued with the sitemap as its source; ``lastmod.txt`` keeps each URL's lastmod. Nothing a
  server sends makes it raise: problems are returned (and logged one line each).

Depth: a URL from a sitemap is queued at **depth 0**, like a seed. A sitemap is the site's own
list of its pages, not a link found some hops away, so its URLs start the depth count afresh
(``--max-depth`` then applies to the links found on them).
"""

from __future__ import annotations

import os
import re
import sys
import time
import zlib
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

from lxml import etree

from .config import CrawlConfig
from .fetch import Fetcher, Response
from .policy import REDIRECT_STATUSES, FetchFailure
from .politeness import effective_delay, tell_host
from .records import QueueEntry, clean, rejected_line, utc_stamp
from .robots import MAX_BODY as ROBOTS_MAX_BODY, MAX_HOPS as ROBOTS_HOPS, RobotsCache, Rules, product_token
from .robots import from_fetch as robots_from_fetch
from .scope import MAX_URL_LENGTH, Admission, Scope
from .frontier.seen import SeenSet
from .frontier.contract import Store, StoreError
from .safefs import append_text
from .urls import host_key, normalize, resolve

LASTMOD = "lastmod.txt"
MAX_BYTES = 50 * 1024 * 1024   # per sitemap file, decompressed (sitemaps protocol)
MAX_URLS = 50_000              # entries per sitemap file (sitemaps protocol)
MAX_FILES = 1000               # sitemap files read in one seeding
MAX_ELEMENTS = 5_000_000      # XML elements read from one file (50,000 entries need far fewer)
MAX_INDEX_DEPTH = 3            # robots.txt's sitemaps are depth 1, what an index lists one deeper
GZIP_MAGIC = b"\x1f\x8b"
SLICE = 64 * 1024               # compressed bytes fed at a time
STEP = 1024 * 1024             # decompressed bytes produced at a time at most
ADD_BATCH = 5000

KINDS = ("urlset", "sitemapindex", "text", "unknown")


# ================================================================================== the parser


class Entry(NamedTuple):
    """One ``<url>`` (or ``<sitemap>``, or text line): its location and lastmod as written."""

    loc: str
    lastmod: str | None = None


@dataclass
class Sitemap:
    """A parsed sitemap file. ``kind``: ``urlset``, ``sitemapindex`` (entries are sitemaps),
    ``text`` (one URL per line; entries are pages) or ``unknown`` (not a sitemap: no entries)."""

    kind: str
    entries: list[Entry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def is_index(self) -> bool:
        return self.kind == "sitemapindex"


def parse_sitemap(body: bytes, *, max_bytes: int = MAX_BYTES, max_urls: int = MAX_URLS) -> Sitemap:
    """Parse a sitemap file of any accepted form; never raises for what a server could send."""
    problems: list[str] = []
    chunks = _decompressed(body, max_bytes, problems)
    head = b""
    for chunk in chunks:   # skip a BOM and leading whitespace: is it XML or plain text?
        head = chunk.lstrip(b"\xef\xbb\xbf \t\r\n")
        if head:
            break
    if not head:
        return Sitemap("unknown", [], problems + ["empty file"])
    rest = _chain([head], chunks)
    if head[:1] != b"<":
        return _parse_text(rest, max_urls, problems)
    if head[:200].lower().startswith((b"<!doctype html", b"<html")):
        return Sitemap("unknown", [], problems + ["not a sitemap: an HTML page"])
    return _parse_xml(rest, max_urls, problems)


def _chain(*parts: Iterable[bytes]) -> Iterator[bytes]:
    for part in parts:
        yield from part


def _decompressed(body: bytes, cap: int, problems: list[str]) -> Iterator[bytes]:
    """``body`` in slices, gunzipped if it is gzip (several members allowed), at most ``cap``
    bytes in all: past the cap a problem is noted and nothing more is produced."""
    if body[:2] != GZIP_MAGIC:
        if len(body) > cap:
            problems.append(f"over {cap} bytes: only the first {cap} were read")
        for i in range(0, min(len(body), cap), SLICE):
            yield body[i:min(i + SLICE, cap)]
        return
    total, data = 0, body
    while data[:2] == GZIP_MAGIC:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pos, drained = 0, False
        try:
            while not d.eof:
                if d.unconsumed_tail:
                    piece = d.unconsumed_tail
                elif pos < len(data):
                    piece, pos = data[pos:pos + SLICE], pos + SLICE
                elif not drained:   # all input given: let zlib hand out what it still holds
                    piece, drained = b"", True
                else:
                    problems.append("gzip data ends early")
                    return
                room = cap - total
                out = d.decompress(piece, min(room + 1, STEP))   # room + 1: tells "over"
                drained = drained and not out
                if len(out) > room:
                    if room:
                        yield out[:room]
                    problems.append(f"over {cap} bytes decompressed: only the first {cap} were read")
                    return
                total += len(out)
                if out:
                    yield out
        except zlib.error as e:
            problems.append(f"bad gzip data ({e})")
            return
        data = d.unused_data + data[pos:]
    if data.strip(b"\x00"):
        problems.append("data after the gzip stream ignored")


# A bare "&" (not starting a character or entity reference): libxml2's recovery would drop it and
# the text after it up to the next "=", as in "?a=1&b=2" -> "?a=1=2".
_BARE_AMP = re.compile(rb"&(?![A-Za-z_][A-Za-z0-9._-]{0,40};|#[0-9]{1,8};|#[xX][0-9A-Fa-f]{1,8};)")
_AMP_REACH = 64   # bytes a reference can span: an "&" this close to a slice's end waits for more
_CDATA_OPEN, _CDATA_CLOSE = b"<![CDATA[", b"]]>"


def _escape_bare_ampersands(chunks: Iterable[bytes], fixed: list[int]) -> Iterator[bytes]:
    """The stream with each bare ``&`` outside CDATA sections written ``&amp;`` (counted in
    ``fixed[0]``). Works across slice boundaries: a possible reference or CDATA marker at the
    end of a slice is held back until the next one."""
    def esc(data: bytes) -> bytes:
        n = len(_BARE_AMP.findall(data))
        if not n:
            return data
        fixed[0] += n
        return _BARE_AMP.sub(b"&amp;", data)

    pending, in_cdata, final = b"", False, False
    it = iter(chunks)
    while not final:
        chunk = next(it, None)
        if chunk is None:
            final, chunk = True, b""
        pending += chunk
        out: list[bytes] = []
        while pending:
            if in_cdata:
                i = pending.find(_CDATA_CLOSE)
                if i < 0:
                    keep = 0 if final else min(len(pending), len(_CDATA_CLOSE) - 1)
                    out.append(pending[:len(pending) - keep])
                    pending = pending[len(pending) - keep:]
                    break
                i += len(_CDATA_CLOSE)
                out.append(pending[:i])
                pending, in_cdata = pending[i:], False
                continue
            i = pending.find(_CDATA_OPEN)
            if i < 0:
                cut = len(pending)
                if not final:   # hold back a possible marker start, and any "&" near it
                    cut = max(0, cut - (len(_CDATA_OPEN) - 1))
                    amp = pending.find(b"&", max(0, cut - _AMP_REACH))
                    if 0 <= amp < cut:
                        cut = amp
                out.append(esc(pending[:cut]))
                pending = pending[cut:]
                break
            out.append(esc(pending[:i]) + _CDATA_OPEN)
            pending, in_cdata = pending[i + len(_CDATA_OPEN):], True
        data = b"".join(out)
        if data:
            yield data


def _split_tag(tag: object) -> tuple[str, str]:
    """``{ns}local`` -> (ns, local); comments and other nodes -> ("", "")."""
    if not isinstance(tag, str):
        return "", ""
    if tag.startswith("{"):
        ns, _, local = tag[1:].partition("}")
        return ns, local
    return "", tag


def _text(el: etree._Element) -> str:
    return (el.text or "").strip()


def _parse_xml(chunks: Iterable[bytes], max_urls: int, problems: list[str],
               max_elements: int = MAX_ELEMENTS) -> Sitemap:
    """Stream the XML: keep ``loc``/``lastmod`` of the root's entries and free every element as
    soon as it has been read, so memory stays flat whatever the file holds. Only end events
    reach Python (half the work); an element's depth is known from its parent and grandparent."""
    parser = etree.XMLPullParser(events=("end",), recover=True, resolve_entities=False,
                                 no_network=True, huge_tree=False, remove_comments=True, remove_pis=True)
    root: etree._Element | None = None
    kind = root_ns = wanted = ""
    entries: list[Entry] = []
    over = no_loc = elements = 0
    ended = False
    current: etree._Element | None = None   # the entry whose children were last seen
    loc: str | None = None
    lastmod: str | None = None
    fixed = [0]

    entry_tags: frozenset[str] = frozenset()
    loc_tags: frozenset[str] = frozenset()
    lastmod_tags: frozenset[str] = frozenset()

    def consume() -> None:
        nonlocal root, kind, root_ns, wanted, entry_tags, loc_tags, lastmod_tags
        nonlocal over, no_loc, elements, ended, current, loc, lastmod
        for _event, el in parser.read_events():
            elements += 1
            if root is None:
                root = el.getroottree().getroot()
                root_ns, local = _split_tag(root.tag)
                kind = local if local in ("urlset", "sitemapindex") else (local or "?")
                wanted = {"urlset": "url", "sitemapindex": "sitemap"}.get(local, "")
                # names in the root's namespace, or in none (some sitemaps omit the xmlns)
                entry_tags, loc_tags, lastmod_tags = (
                    frozenset({n, f"{{{root_ns}}}{n}"} if wanted else ()) for n in (wanted, "loc", "lastmod"))
            parent = el.getparent()
            if parent is None:
                ended = True
                continue
            if parent is root:   # an entry (or something else at that level)
                if el.tag in entry_tags:
                    if current is not el:
                        loc = lastmod = None
                    if not loc:
                        no_loc += 1
                    elif len(entries) < max_urls:
                        entries.append(Entry(loc, lastmod))
                    else:
                        over += 1
                current = None
            elif parent.getparent() is root:   # a child of an entry: loc, lastmod, ...
                if current is not parent:
                    current, loc, lastmod = parent, None, None
                tag = el.tag
                if tag in loc_tags and not loc:
                    loc = _text(el)
                elif tag in lastmod_tags and not lastmod:
                    lastmod = _text(el)
            # free what was read (deeper elements, extensions like image:image, included)
            el.clear()
            while el.getprevious() is not None:
                del parent[0]
            if elements > max_elements:
                raise _TooMany()

    tail = b""
    try:
        for chunk in _escape_bare_ampersands(chunks, fixed):
            tail = (tail + chunk)[-1024:]
            parser.feed(chunk)
            consume()
        parser.close()
        consume()
    except _TooMany:
        problems.append(f"over {max_elements} XML elements: read up to there")
    except etree.LxmlError as e:   # recover handles nearly everything; not an empty document
        problems.append(f"XML unreadable ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
        try:
            consume()
        except _TooMany:
            pass
    if not kind:
        return Sitemap("unknown", [], problems + ["not a sitemap: no XML element found"])
    if kind not in ("urlset", "sitemapindex"):
        what = "an HTML page" if kind.lower() == "html" else f"root element <{kind}>"
        return Sitemap("unknown", [], problems + [f"not a sitemap: {what}"])
    if fixed[0]:
        problems.append(f"{fixed[0]} unescaped '&' read as '&amp;'")
    # libxml2's recovery closes what is open without a word: a file that does not end with its
    # root's end tag was cut short (or is broken), which is worth saying.
    closed = re.search(rb"</(?:[A-Za-z_][\w.-]*:)?" + kind.encode() + rb"\s*>(?:\s|<!--.*?-->|<\?.*?\?>)*$",
                       tail, re.DOTALL)
    if not (ended and closed) and not any(p.startswith("over ") for p in problems):
        problems.append("XML ends early or is malformed: entries read up to there")
    if no_loc:
        problems.append(f"{no_loc} <{wanted}> entries without <loc> ignored")
    if over:
        problems.append(f"{over} entries beyond the first {max_urls} ignored (protocol limit)")
    return Sitemap(kind, entries, problems)


class _TooMany(Exception):
    pass


def _parse_text(chunks: Iterable[bytes], max_urls: int, problems: list[str]) -> Sitemap:
    """One URL per line (UTF-8). Lines that are not http(s) URLs are counted, not taken: a text
    file of anything else is not a sitemap."""
    entries: list[Entry] = []
    over = other = 0
    carry = b""

    def take(line: bytes) -> None:
        nonlocal over, other
        text = line.decode("utf-8", "replace").strip().lstrip("\ufeff").strip()
        if not text:
            return
        if not text[:8].lower().startswith(("http://", "https://")):
            other += 1
        elif len(entries) < max_urls:
            entries.append(Entry(text))
        else:
            over += 1

    for chunk in chunks:
        lines = (carry + chunk).split(b"\n")
        carry = lines.pop()
        if len(carry) > 1 << 20:   # one "line" of a megabyte: no URL is that long
            carry = b""
            other += 1
        for line in lines:
            take(line)
    take(carry)
    if not entries and other:
        return Sitemap("unknown", [], problems + [f"not a sitemap: {other} lines, none an http(s) URL"])
    if other:
        problems.append(f"{other} lines that are not http(s) URLs ignored")
    if over:
        problems.append(f"{over} URLs beyond the first {max_urls} ignored (protocol limit)")
    return Sitemap("text", entries, problems)


# ================================================================================== policy


@dataclass(frozen=True)
class Limits:
    """How far one seeding goes (the sitemaps protocol's limits by default)."""

    max_depth: int = MAX_INDEX_DEPTH
    max_files: int = MAX_FILES
    max_bytes: int = MAX_BYTES
    max_urls: int = MAX_URLS


class Problem(NamedTuple):
    """Something wrong with a sitemap (or a host's robots.txt): reported, never raised."""

    url: str
    message: str

    def __str__(self) -> str:
        return f"sitemaps: {self.url}: {self.message}"


@dataclass
class SeedReport:
    """What one seeding did. ``found`` counts page URLs read from sitemaps; each is queued, a
    duplicate (already known: queued, crawled or failed; or beyond --max-pages-per-host, which
    the store reports itself) or refused (counted by reason once per URL, as in rejected.txt)."""

    sitemaps: int = 0          # sitemap files requested (whatever the answer)
    found: int = 0
    queued: int = 0
    duplicates: int = 0
    refused: Counter = field(default_factory=Counter)
    lastmods: int = 0          # lines written to lastmod.txt
    problems: list[Problem] = field(default_factory=list)
    interrupted: bool = False

    def line(self) -> str:
        refused = ", ".join(f"{r} {n}" for r, n in sorted(self.refused.items()))
        from .words import plural
        return (f"sitemaps: {self.sitemaps} read, {plural(self.found, 'URL')} found, {self.queued} queued, "
                f"{self.duplicates} already known, {sum(self.refused.values())} refused"
                f"{f' ({refused})' if refused else ''}, {plural(len(self.problems), 'problem')}"
                f"{' (interrupted)' if self.interrupted else ''}")


class Job(NamedTuple):
    """A sitemap file to read: its URL, its depth (1 = named by robots.txt or the fallback) and
    where it was named (a robots.txt or an index)."""

    url: str
    depth: int
    source: str


def origin(url: str) -> str:
    """``http://Example.com:8080/a?b`` -> ``http://example.com:8080/``; ValueError if no URL."""
    n = normalize(url)
    return f"{n.split('://', 1)[0]}://{host_key(n)}/"


def host_scope(config: CrawlConfig) -> Scope:
    """Sitemap files are followed on the crawl's hosts (its domains in domain scope): with
    ``--scope prefix`` the sitemap of a site lives outside the prefix but its pages may not."""
    return Scope("domain" if config.scope == "domain" else "host", config.seeds, config.any_port)


def root_sitemaps(site: str, rules: Rules | None) -> list[str]:
    """The sitemaps robots.txt names (resolved against it), or else ``/sitemap.xml``."""
    robots_url = site + "robots.txt"
    listed = []
    for raw in rules.sitemaps() if rules is not None else []:
        url = resolve(robots_url, raw.strip())
        if url is not None and url not in listed:
            listed.append(url)
    return listed or [site + "sitemap.xml"]


def entry_verdict(loc: str, admission: Admission, rules_for: Callable[[str], Rules | None],
                  agent: str) -> tuple[str, str | None]:
    """(URL as queued, None) to admit, or (URL or raw loc, reason) to refuse. The same checks as
    a link (normalise, session ids, scope/deny/allow/traps, robots.txt) at depth 0. Robots rules
    not known yet leave the URL to the worker's own robots gate, as for links."""
    if len(loc) > MAX_URL_LENGTH:
        return loc[:200] + "...", "url too long"
    try:
        url = admission.clean(normalize(loc))
    except ValueError as e:
        return loc, "not http" if str(e).startswith("unsupported scheme") else "invalid url"
    reason = admission.check(url, 0)
    if reason:
        return url, reason
    rules = rules_for(url)
    if rules is not None and rules.mode == "rules" and not rules.allowed(url, agent):
        return url, "robots"
    return url, None


def lastmod_line(url: str, lastmod: str | None, sitemap_url: str) -> str:
    """lastmod.txt: ``URL  lastmod  sitemap_URL`` (lastmod as written, cleaned; ``-`` if absent)."""
    return f"{url}\t{clean(lastmod or '-')}\t{clean(sitemap_url)}\n"


# ================================================================================== seeding


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _sleep(seconds: float) -> bool:
    time.sleep(max(0.0, seconds))
    return False


class _Interrupted(Exception):
    pass


class _Busy(Exception):
    """The host asked for a pause longer than --max-delay (Retry-After, parking): seeding does
    not hold the crawl's start for it; the workers will get to the host in time."""


class _Seeder:
    """The I/O of one seeding: requests (paced, robots-checked, redirects followed in scope),
    files fetched breadth-first, URLs queued. Not reusable across seedings."""

    def __init__(self, store: Store, config: CrawlConfig, fetcher: Fetcher, robots: RobotsCache | None,
                 clock: Callable[[], float], wait: Callable[[float], bool], log: Callable[[str], None],
                 limits: Limits) -> None:
        self.store, self.config, self.fetcher, self.robots = store, config, fetcher, robots
        self.clock, self.wait, self.log, self.limits = clock, wait, log, limits
        self.admission = Admission(config, clock)
        self.scope = host_scope(config)
        self.agent = product_token(config.user_agent)
        self.report = SeedReport()
        self.refused_once = SeenSet()
        self.files = 0   # sitemap files requested
        folder = getattr(store, "folder", None)
        # A store that keeps its logs itself (Redis: a crawl on --store) gets the lines; the
        # file store's lastmod.txt is written here, as no process of the crawl appends to it.
        in_store = getattr(store, "logs_in_store", False)
        self.lastmod_path = Path(folder) / LASTMOD if folder is not None and not in_store else None

    # -- reporting ---------------------------------------------------------------------------------
    def problem(self, url: str, message: str) -> None:
        p = Problem(url, clean(message))
        self.report.problems.append(p)
        self.log(str(p))

    # -- politeness and robots ---------------------------------------------------------------------
    def floor(self, host: str) -> float:
        rules = self.robots.known(host) if self.robots else None
        cd = rules.crawl_delay(self.agent) if rules else None
        return self.config.delay if cd is None else max(self.config.delay, min(cd, self.config.max_delay))

    def request(self, url: str, limit: int) -> Response | FetchFailure:
        """One request when the host's shared politeness state allows it (as a worker would)."""
        host = host_key(url)
        pause = self.store.host_state(host).next_allowed - self.clock()
        if pause > self.config.max_delay:
            raise _Busy(f"{host} asks for a pause of {pause:.0f} s ({self.store.host_state(host).reason})")
        if pause > 0 and self.wait(pause):
            raise _Interrupted()
        now = self.clock()
        delay = min(self.config.max_delay, effective_delay(self.store.host_state(host), self.floor(host)))
        self.store.update_host(host, lambda s: replace(s, next_allowed=(
            now + delay if s.reason == "-" else max(s.next_allowed, now + delay))))
        result = self.fetcher.fetch(url, any_type=True, limit=limit)
        self._log_fetch(url, result)
        self._adapt(host, result)
        return result

    def _adapt(self, host: str, result: Response | FetchFailure) -> None:
        tell_host(self.store, host, result, self.clock(), self.floor(host), self.config)

    def _log_fetch(self, url: str, result: Response | FetchFailure) -> None:
        if isinstance(result, FetchFailure):
            what, size, ms = result.kind, 0, 0
        else:
            what, size, ms = str(result.status), result.size, int(result.elapsed * 1000)
        self.store.log("fetch", f"{utc_stamp(self.clock())}\t{os.getpid()}\t{clean(what)}\t{size}\t{ms}\t{url}\n")

    def rules(self, url: str) -> Rules | None:
        """The robots.txt rules of ``url``'s host, fetched (once, into robots/) if not known."""
        if self.robots is None:
            return None
        try:
            rules, _ = self.robots.get(host_key(url), lambda previous: self._fetch_robots(url, previous))
        except _Busy:   # not written to robots/: unknown for now, and so nothing is requested
            return Rules(None, self.clock(), "", "disallow-all")
        return rules

    def _fetch_robots(self, url: str, previous: Rules | None) -> tuple[Rules, str]:
        """As a worker fetches robots.txt: up to 5 redirects while in scope, RFC 9309 meaning."""
        robots_url = origin(url) + "robots.txt"
        current = robots_url
        for _ in range(ROBOTS_HOPS + 1):
            result = self.request(current, ROBOTS_MAX_BODY)
            if isinstance(result, FetchFailure):
                return robots_from_fetch(None, b"", self.clock(), previous), robots_url
            if result.status in REDIRECT_STATUSES and result.location:
                nxt = resolve(current, result.location)
                if nxt is None or not self.admission.scope.allows(nxt):
                    break
                current = nxt
                continue
            return robots_from_fetch(result.status, result.body, self.clock(), previous), robots_url
        return robots_from_fetch(404, b"", self.clock()), robots_url

    def known_rules(self, url: str) -> Rules | None:
        return self.robots.known(host_key(url)) if self.robots else None

    # -- one sitemap file --------------------------------------------------------------------------
    def fetch_sitemap(self, url: str) -> tuple[str, bytes] | None:
        """The sitemap's final URL and body, following redirects that stay requestable (scope,
        robots.txt); None (reported) when it could not be had. ``url`` was checked already."""
        current, chain = url, [url]
        while True:
            try:
                result = self.request(current, self.limits.max_bytes + 1)
            except _Busy as e:
                self.problem(url, f"not read: {e}")
                return None
            self.report.sitemaps += current == url
            if isinstance(result, FetchFailure):
                self.problem(url, f"fetch failed: {result.kind}")
                return None
            if result.status in REDIRECT_STATUSES and result.location:
                nxt = resolve(current, result.location)
                if nxt is None:
                    self.problem(url, "redirect to a non-http URL")
                    return None
                if nxt in chain or len(chain) > self.config.max_redirects:
                    self.problem(url, "redirect loop" if nxt in chain else "too many redirects")
                    return None
                why = self.refusal(nxt)
                if why:
                    self.problem(url, f"redirects to {nxt}: {why}")
                    return None
                chain.append(nxt)
                current = nxt
                continue
            if not 200 <= result.status < 300:
                self.problem(url, f"HTTP {result.status}")
                return None
            body = result.body
            if len(body) > self.limits.max_bytes:
                self.problem(url, f"over {self.limits.max_bytes} bytes: only the first "
                                  f"{self.limits.max_bytes} were read")
                body = body[:self.limits.max_bytes]
            return current, body

    def refusal(self, url: str) -> str | None:
        """Why a sitemap URL may not be requested, or None."""
        if not self.scope.allows(url):
            return "not on a host of this crawl: not fetched"
        rules = self.rules(url)
        if rules is not None and rules.mode == "disallow-all":
            return f"robots.txt unavailable ({rules.label()}): not fetched"
        if rules is not None and not rules.allowed(url, self.agent):
            return "disallowed by robots.txt: not fetched"
        return None

    # -- the walk ----------------------------------------------------------------------------------
    def run(self, sites: list[str]) -> SeedReport:
        """Breadth first from the sites' robots.txt; each sitemap URL is read at most once."""
        jobs: deque[Job] = deque()
        done: set[str] = set()
        try:
            for site in sites:
                self.guarded(site + "robots.txt", lambda: self.start(site, jobs))
            while jobs:
                job = jobs.popleft()
                try:
                    url = normalize(job.url)
                except ValueError as e:
                    self.problem(job.url, f"listed in {job.source}: not a URL ({e})")
                    continue
                where = f"listed in {job.source}: " if job.source != "-" else ""
                if url in done:
                    self.problem(url, f"listed again in {job.source}: read once")
                    continue
                done.add(url)
                if job.depth > self.limits.max_depth:
                    self.problem(url, f"{where}index nesting deeper than {self.limits.max_depth}: not fetched")
                    continue
                why = self.guarded(url, lambda: self.refusal(url) or "")
                if why is None:   # reported
                    continue
                if why:
                    self.problem(url, where + why)
                    continue
                if self.files >= self.limits.max_files:
                    self.problem(url, f"limit of {self.limits.max_files} sitemap files reached: "
                                      f"this and up to {len(jobs)} more not fetched")
                    break
                self.files += 1
                self.guarded(url, lambda: self.one(Job(url, job.depth, job.source), jobs, done))
        except _Interrupted:
            self.report.interrupted = True
        return self.report

    def guarded(self, url: str, fn: Callable[[], str | None]) -> str | None:
        """Run one step; a bug or an unexpected error is reported against ``url``, not raised
        (only a store that cannot be written, or an interruption, ends the seeding)."""
        try:
            return fn()
        except (StoreError, _Interrupted):
            raise
        except Exception as e:
            self.problem(url, f"internal error: {type(e).__name__}: {e}")
            return None

    def start(self, site: str, jobs: deque[Job]) -> None:
        """The sitemaps a site names in robots.txt (or its /sitemap.xml), as depth-1 jobs."""
        if not self.scope.allows(site):
            self.problem(site + "robots.txt", "host not in the crawl's scope: skipped")
            return
        rules = self.rules(site)
        if rules is not None and rules.mode == "disallow-all":
            self.problem(site + "robots.txt", f"unavailable ({rules.label()}): sitemaps not read")
            return
        for url in root_sitemaps(site, rules):
            jobs.append(Job(url, 1, site + "robots.txt" if rules is not None and rules.sitemaps() else "-"))

    def one(self, job: Job, jobs: deque[Job], done: set[str]) -> None:
        got = self.fetch_sitemap(job.url)
        if got is None:
            return
        final, body = got
        if final != job.url:
            if final in done:
                self.problem(job.url, f"redirects to {final}, already read")
                return
            done.add(final)
        sitemap = parse_sitemap(body, max_bytes=self.limits.max_bytes, max_urls=self.limits.max_urls)
        for message in sitemap.problems:
            self.problem(final, message)
        if sitemap.is_index:
            self.follow(final, job.depth, sitemap.entries, jobs)
        elif sitemap.entries:
            self.queue(final, sitemap.entries)
        elif sitemap.kind != "unknown":
            self.problem(final, "no URLs")

    def follow(self, index_url: str, depth: int, entries: list[Entry], jobs: deque[Job]) -> None:
        """Queue the sitemaps an index lists, within the limits (one problem per index, not
        one per entry: an index may list 50,000 of them)."""
        if depth >= self.limits.max_depth:
            self.problem(index_url, f"an index at depth {depth} listing {len(entries)} sitemaps: nesting "
                                    f"deeper than {self.limits.max_depth} is not followed")
            return
        room = max(0, self.limits.max_files - self.files - len(jobs))
        for e in entries[:room]:
            jobs.append(Job(e.loc, depth + 1, index_url))
        if len(entries) > room:
            self.problem(index_url, f"{len(entries) - room} of its {len(entries)} sitemaps not read: "
                                    f"limit of {self.limits.max_files} sitemap files")

    def queue(self, sitemap_url: str, entries: list[Entry]) -> None:
        """Admit a sitemap's page URLs as seeds from ``sitemap_url``; refusals to rejected.txt."""
        rep = self.report
        for start in range(0, len(entries), ADD_BATCH):
            batch: dict[str, QueueEntry] = {}
            refused: list[str] = []
            lastmods: list[str] = []
            known = self.store.seen
            for e in entries[start:start + ADD_BATCH]:
                rep.found += 1
                url, reason = entry_verdict(e.loc, self.admission, self.known_rules, self.agent)
                if reason:
                    if self.refused_once.add(url):
                        rep.refused[reason] += 1
                        refused.append(rejected_line(url, reason, sitemap_url))
                    continue
                lastmods.append(lastmod_line(url, e.lastmod, sitemap_url))
                if url in batch or url in known:
                    rep.duplicates += 1
                    continue
                batch[url] = QueueEntry(url, 0, 0, 0.0, sitemap_url)
            if refused:
                self.store.log("rejected", "".join(refused))
            if batch:
                added = self.store.add(batch.values())
                rep.queued += len(added)
                rep.duplicates += len(batch) - len(added)
            if lastmods:
                self.write_lastmods("".join(lastmods))
                rep.lastmods += len(lastmods)

    def write_lastmods(self, text: str) -> None:
        if self.lastmod_path is not None:
            append_text(self.lastmod_path, text)
        else:   # an in-memory store without a folder (tests)
            self.store.log("lastmod", text)


def seed_from_sitemaps(store: Store, config: CrawlConfig, fetcher: Fetcher | None = None, *,
                       hosts: Iterable[str] | None = None, robots: RobotsCache | None = None,
                       clock: Callable[[], float] = time.time,
                       wait: Callable[[float], bool] = _sleep,
                       log: Callable[[str], None] = _stderr,
                       limits: Limits = Limits()) -> SeedReport:
    """Queue the URLs of the sitemaps of ``hosts`` (URLs; their origins are used; default: the
    seeds'), at depth 0 with the sitemap as source, and append their lastmods to lastmod.txt.

    ``store`` is an opened store (its ``folder`` holds robots/ and lastmod.txt); ``fetcher``
    defaults to a new ``Fetcher(config)`` (closed here then). ``robots``: the robots.txt cache to
    use; by default the project's ``robots/`` folder, or none with ``--ignore-robots`` (then
    robots.txt is not read at all and only ``/sitemap.xml`` is tried). ``wait(seconds)`` waits
    for politeness and returns True to stop early (the report says ``interrupted``). Every
    problem is in the report and passed to ``log`` as one line. Raises only ``StoreError``.
    """
    own = fetcher is None
    fetcher = fetcher or Fetcher(config)
    shared = getattr(store, "robots_cache", None)   # Redis: one robots.txt for the whole cluster
    if robots is None and shared is not None:
        robots = shared(clock)
    if robots is None and not config.ignore_robots:
        folder = getattr(store, "folder", None)
        if folder is None:   # an in-memory store: a private folder, as spider.Spider does
            from .spider import _folder_of
            folder = _folder_of(store)
        robots = RobotsCache(Path(folder), clock)
    if config.ignore_robots:
        robots = None
    sites: list[str] = []
    seeder = _Seeder(store, config, fetcher, robots, clock, wait, log, limits)
    for h in (config.seeds if hosts is None else hosts):
        try:
            site = origin(h)
        except ValueError as e:
            seeder.problem(h, f"not a URL ({e})")
            continue
        if site not in sites:
            sites.append(site)
    try:
        return seeder.run(sites)
    finally:
        if own:
            fetcher.close()
