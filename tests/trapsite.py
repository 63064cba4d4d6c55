"""Crawler-trap test sites with known ground truth, served by a `sitekit.TestSite`.

`build_trap_site(site)` turns a started TestSite into a site full of the URL spaces that keep a
naive crawler busy forever, next to a handful of real pages:

    part        what                                                   expected (default rules)
    content     /about, /article-1..3, /promo, products with canonical  fetched
                duplicates: /print/article-1 = /article-1 (other        fetched, duplicates.txt
                markup, whitespace, comments, script), /mirror/article-2 `duplicate`
                /product?id=1&ref=x (canonical /product?id=1)           fetched, `variant`
                /product?id=2&ref=mail -> canonical /product?id=2       canonical queued + fetched
    sessions    every page view links /account?PHPSESSID=<fresh>,       ids stripped: /account, /cart,
                /cart;jsessionid=<FRESH>, /help?sessionid=<fresh>&topic  /help?topic=start fetched once
    facets      /products?brand=..&color=..&size=.. adding one filter   <= 4 params fetched, 5:
                per link, without end; ?sort=price / ?view=grid links   `query-params`; sort/view:
                                                                         `presentation-params`
    calendar    /calendar/YYYY/MM/ linking previous/next month and year months within [-7300, +365]
                forever                                                  days fetched, beyond: `calendar`
    repeats     /docs/a/ linking "a/" (relative), /shop/x/y/ linking    /docs/a/a/a/, /shop/(x/y/)x3:
                "x/y/"                                                   `repeated-segments`
    deep        /deep/d2/d3/... one segment deeper per page              13 segments: `path-segments`
    long        /links: /long/<2,100 chars> and a 100+ char guide page   `url-length`; the guide fetched

The returned `TrapTruth` is the ground truth, computed from the site's own link graph (each trap
link knows by construction which rule must refuse it): the pages that must be fetched, the
trap URLs with their rule and the pages linking them, the pages that must never be requested,
the duplicate groups and the canonical variants. Targets are "path?query" strings as requested
from the server; session ids are shown stripped (`strip_session`).

`ListDetailSite` is a list/detail site (list pages with pagination, detail pages linking
related details) for crawl-order tests and `bench/order.py`.
"""

from __future__ import annotations

import calendar as _calendar
import datetime as _dt
import html
import secrets
import threading
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Iterable, Optional
from urllib.parse import urlsplit

__all__ = [
    "ALL_PARTS",
    "DEFAULT_LIMITS",
    "MAYBE",
    "PRESENTATION_KEYS",
    "SESSION_KEYS",
    "TRAP_RULES",
    "GUIDE_PATH",
    "LONG_PATH",
    "Link",
    "ListDetailSite",
    "Page",
    "TrapSite",
    "TrapTruth",
    "build_trap_site",
    "month_path",
    "strip_session",
    "target_of",
]

#: Rule names as they appear in rejected.txt.
TRAP_RULES = ("url-length", "path-segments", "repeated-segments", "presentation-params", "query-params", "calendar")
DEFAULT_LIMITS = {
    "url-length": 2000,
    "path-segments": 12,
    "repeated-segments": 3,
    "query-params": 4,
    "calendar": 365,
    "calendar-past": 7300,
}
SESSION_KEYS = frozenset(
    {"jsessionid", "phpsessid", "sid", "sessionid", "session_id", "aspsessionid", "cfid", "cftoken"}
)
PRESENTATION_KEYS = frozenset({
    "sort", "sortby", "sort_by", "order", "orderby", "order_by", "dir", "direction", "view", "print",
    "printable", "display", "layout", "theme", "per_page", "perpage", "pagesize", "page_size", "limit",
})
ALL_PARTS = ("content", "sessions", "facets", "calendar", "repeats", "deep", "long")
#: The rule of a link that may or may not be refused (a calendar month straddling the limit).
MAYBE = "calendar?"

HTML = "text/html; charset=utf-8"
DEEP_ALLOWED = 12  # /deep/d2/.../d12 has 12 segments
LONG_PATH = "/long/" + "abcdefghij" * 210  # 2,106 characters of path
GUIDE_PATH = (
    "/guides/how-to-tell-a-house-spider-from-a-wolf-spider-by-its-eyes-its-legs-"
    "and-the-shape-of-its-web-a-field-guide"
)  # about 120 characters of path: fetched by default, refused with --trap url-length=100
FACET_VALUES = {
    "brand": ("acme", "zeta", "nova", "orion", "lyra", "vega"),
    "color": ("red", "blue", "green", "black", "white", "grey"),
    "size": ("s", "m", "l", "xl", "xxl", "xxxl"),
}
FACET_KEYS = tuple(sorted(FACET_VALUES))
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
_CAL_MARGIN = _dt.timedelta(days=2)  # clock and "which day of the month counts" tolerance


# ------------------------------------------------------------------------------------ helpers


def strip_session(target: str) -> str:
    """`target` (path?query) without `;jsessionid=...` path parameters and session-id query keys."""
    path, sep, query = target.partition("?")
    segments = []
    for segment in path.split("/"):
        name, semi, params = segment.partition(";")
        if semi:
            kept = [p for p in params.split(";") if p.split("=", 1)[0].lower() != "jsessionid"]
            segment = ";".join([name, *kept]) if kept else name
        segments.append(segment)
    path = "/".join(segments)
    if not sep:
        return path
    pairs = [p for p in query.split("&") if p and p.split("=", 1)[0].lower() not in SESSION_KEYS]
    return path + ("?" + "&".join(pairs) if pairs else "")


def target_of(url: str) -> str:
    """The path?query of an absolute URL (what the server sees as the request target)."""
    parts = urlsplit(url)
    return (parts.path or "/") + ("?" + parts.query if parts.query else "")


def month_path(year: int, month: int) -> str:
    return f"/calendar/{year:04d}/{month:02d}/"


def _add_months(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + delta
    return index // 12, index % 12 + 1


def _fresh_hex(n: int) -> str:
    """n random hex digits (letters first so no id ever looks like a number or a date)."""
    return "f" + secrets.token_hex(n)[: n - 1]


@dataclass(frozen=True)
class Link:
    """One link of a page: `href` as written, `raw` resolved (session ids kept), `target` resolved
    with session ids stripped (what the crawler deduplicates on), and `rule`: None for a link that
    must be followed, a rule name for a trap link, `MAYBE` for a calendar month at the limit."""

    href: str
    raw: str
    target: str
    text: str
    rule: Optional[str] = None


@dataclass
class Page:
    title: str
    blocks: list[str]
    links: list[Link]
    canonical: Optional[str] = None  # a target
    printable: bool = False  # rendered with different markup (same text)
    follow: bool = True  # False: the crawler must not extract its links (variant of a known canonical)


@dataclass
class TrapTruth:
    """What a correct crawl of the trap site does, with the default trap rules and --max-depth 50."""

    origin: str  # "http://127.0.0.1:PORT"
    must_fetch: set[str]  # targets (session ids stripped) that must be fetched, exactly once
    may_fetch: set[str]  # calendar months at a limit, and what only they link
    traps: dict[str, str]  # trap target -> rule name in rejected.txt (MAYBE targets: "calendar")
    optional: set[str]  # trap targets that may instead be fetched (months at a limit)
    sources: dict[str, set[str]]  # trap target -> targets of the pages linking it
    never: set[str]  # linked only from pages whose links must not be extracted
    duplicate_groups: list[set[str]]  # pages with the same text: all but one are `duplicate`
    variants: dict[str, str]  # variant target -> canonical target
    titles: dict[str, str]  # target -> <title> of every page in must_fetch and may_fetch
    depth: dict[str, int]  # target -> shortest link depth from "/"
    today: _dt.date

    def url(self, target: str) -> str:
        return self.origin + target


# ------------------------------------------------------------------------------------ the trap site


class TrapSite:
    """Serves the trap site on a started TestSite; `truth()` is its ground truth."""

    def __init__(self, site, parts: Iterable[str] = ALL_PARTS, today: Optional[_dt.date] = None,
                 limits: Optional[dict] = None) -> None:
        unknown = set(parts) - set(ALL_PARTS)
        if unknown:
            raise ValueError(f"unknown parts: {sorted(unknown)}")
        self.site = site
        self.parts = frozenset(parts)
        self.today = today or _dt.datetime.now(_dt.timezone.utc).date()
        self.limits = {**DEFAULT_LIMITS, **(limits or {})}
        self._lock = threading.Lock()
        self._routed: set[str] = set()

    # -- serving ----------------------------------------------------------------------------

    def install(self) -> "TrapSite":
        self._ensure_route("/")
        return self

    def _ensure_route(self, path: str) -> None:
        with self._lock:
            if path in self._routed:
                return
            self._routed.add(path)
        self.site.route(path, handler=self._handle)

    def _handle(self, info):  # -> (status, headers, body)
        target = info.path + ("?" + info.query if info.query else "")
        page = self.page(strip_session(target), fresh=True)
        if page is None:
            return 404, None, "<html><head><title>Not found</title></head><body>Not found</body></html>"
        for link in page.links:  # the server answers every URL it links to (traps included)
            self._ensure_route(urlsplit(link.raw).path)
            self._ensure_route(urlsplit(link.target).path)
        if page.canonical:
            self._ensure_route(urlsplit(page.canonical).path)
        return 200, None, self.render(page)

    def render(self, page: Page) -> str:
        esc = html.escape
        head_extra = f'<link rel="canonical" href="{esc(page.canonical)}">' if page.canonical else ""
        anchors = [f'<a href="{esc(link.href)}">{esc(link.text)}</a>' for link in page.links]
        if not page.printable:
            body = "".join(f"<p>{esc(b)}</p>\n" for b in page.blocks)
            nav = "<ul>\n" + "".join(f"<li>{a}</li>\n" for a in anchors) + "</ul>\n"
            return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{esc(page.title)}</title>'
                    f"{head_extra}</head>\n<body>\n<h1>{esc(page.title)}</h1>\n{body}{nav}</body></html>\n")
        # Same text, other markup: comments, script, style, extra whitespace, other tags.
        body = "".join(f"  <div class=\"para\">  {esc(b).replace(' ', '   ', 1)}  </div>\n\n<!-- para -->\n"
                       for b in page.blocks)
        nav = "<nav>   " + "\n      ".join(anchors) + "   </nav>\n"
        return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n  <!-- printer-friendly version -->\n"
                f"  <title>{esc(page.title)}</title>\n  <style>body {{ font: 12pt serif; }}</style>\n"
                f"{head_extra}\n</head>\n<body class=\"print\">\n<!-- begin -->\n"
                f"<header>\n\n   <h2 class=\"t\">{esc(page.title)}</h2>   </header>\n"
                f"<script>window.onload = function () {{ window.print(); }};</script>\n"
                f"<main>\n{body}</main>\n{nav}<!-- end -->\n</body>\n</html>\n")

    # -- the link graph ----------------------------------------------------------------------

    def _link(self, href: str, text: str, rule: Optional[str] = None, base: str = "/") -> Link:
        if href.startswith("/"):
            raw = href
        else:  # relative to base's folder (only simple relative paths are used here)
            raw = base.rsplit("/", 1)[0] + "/" + href
        return Link(href, raw, strip_session(raw), text, rule)

    def _nav(self, fresh: bool) -> list[Link]:
        out = [self._link("/", "Home")]
        if "sessions" in self.parts:
            a, b, c = (_fresh_hex(26), _fresh_hex(16).upper(), _fresh_hex(20)) if fresh else ("x", "X", "x")
            out += [
                self._link(f"/account?PHPSESSID={a}", "Your account"),
                self._link(f"/cart;jsessionid={b}", "Cart"),
                self._link(f"/help?sessionid={c}&topic=start", "Help"),
            ]
        return out

    def page(self, target: str, fresh: bool = False) -> Optional[Page]:
        """The page at `target` (session ids already stripped), or None (404)."""
        path, _, query = target.partition("?")
        params = [tuple(p.split("=", 1)) if "=" in p else (p, "") for p in query.split("&") if p]
        has = self.parts.__contains__
        nav = self._nav(fresh)
        if target == "/":
            links = list(nav)
            if has("content"):
                links += [self._link(h, t) for h, t in (
                    ("/about", "About us"), ("/article-1", "Orb weavers"), ("/article-2", "Jumping spiders"),
                    ("/mirror/article-2", "Jumping spiders (mirror)"), ("/article-3", "Wolf spiders"))]
            if has("facets"):
                links.append(self._link("/products", "Shop"))
            if has("calendar"):
                links.append(self._link("/calendar/", "Events"))
            if has("repeats"):
                links += [self._link("/docs/", "Documentation"), self._link("/shop/x/y/", "Shop sections")]
            if has("deep"):
                links.append(self._link("/deep", "Deep archive"))
            if has("long"):
                links.append(self._link("/links", "Links"))
            return Page("Spider world", ["Welcome to a site about spiders, full of crawler traps."], links)
        if has("content"):
            page = self._content_page(path, query, params, nav)
            if page is not None:
                return page
        if has("sessions"):
            if target == "/account":
                return Page("Your account", ["You are not signed in."], nav)
            if target == "/cart":
                return Page("Your cart", ["Your cart is empty."], nav)
            if target == "/help?topic=start":
                return Page("Help: getting started", ["Start by looking for webs in the corners."], nav)
        if has("facets") and path == "/products":
            return self._facet_page(params)
        if has("calendar") and path.startswith("/calendar/"):
            return self._calendar_page(target)
        if has("repeats"):
            page = self._repeat_page(target)
            if page is not None:
                return page
        if has("deep") and (target == "/deep" or target.startswith("/deep/")):
            return self._deep_page(target)
        if has("long"):
            if target == "/links":
                return Page("Links", ["Further reading."], [self._link("/", "Home"),
                            self._link(GUIDE_PATH, "A long guide", self._length_rule(GUIDE_PATH)),
                            self._link(LONG_PATH, "A very long link", self._length_rule(LONG_PATH))])
            if target in (GUIDE_PATH, LONG_PATH):
                return Page("A guide" if target == GUIDE_PATH else "Long", [f"Page at {target[:40]}."],
                            [self._link("/links", "Links")])
        return None

    def _length_rule(self, target: str) -> Optional[str]:
        limit = self.limits["url-length"]
        origin = f"http://{self.site.host}:{self.site.port}"
        return "url-length" if limit is not None and len(origin + target) > limit else None

    def _content_page(self, path: str, query: str, params: list, nav: list[Link]) -> Optional[Page]:
        L = self._link
        article_1 = ("Orb weavers", ["Orb weavers build the classic wheel-shaped web.",
                                     "Their webs are rebuilt almost every night."],
                     nav + [L("/print/article-1", "Print this page"), L("/product?id=1", "Buy the orb web poster")])
        article_2 = ("Jumping spiders", ["Jumping spiders hunt by sight.",
                                         "Their two large front eyes see colours."],
                     nav + [L("/about", "About us")])
        if path in ("/article-1", "/print/article-1"):
            title, blocks, links = article_1
            return Page(title, blocks, links, printable=path.startswith("/print/"))
        if path in ("/article-2", "/mirror/article-2"):
            title, blocks, links = article_2
            return Page(title, blocks, links, printable=path.startswith("/mirror/"))
        if path == "/about" and not query:
            return Page("About us", ["We write about spiders."], nav + [L("/product?id=3", "Our mug")])
        if path == "/article-3" and not query:
            return Page("Wolf spiders", ["Wolf spiders carry their young on their backs."],
                        nav + [L("/product?id=2&ref=mail", "As seen in our newsletter")])
        if path == "/promo" and not query:
            return Page("Promotion", ["Ten percent off every poster this week."], nav)
        if path == "/only-via-variant-1" and not query:
            return Page("Hidden", ["Only linked from a variant page."], nav)
        if path == "/product":
            keys = dict(params)
            pid, ref = keys.get("id"), keys.get("ref")
            if pid not in ("1", "2", "3") or set(keys) - {"id", "ref"} or len(params) != len(keys):
                return None
            canonical = f"/product?id={pid}"
            blocks = [f"Product number {pid}, a fine spider poster."]
            links = list(nav)
            if ref is None:
                if pid == "1":
                    links.append(L("/product?id=1&ref=x", "Share this poster"))
                return Page(f"Product {pid}", blocks, links, canonical=canonical)
            if pid == "1" and ref == "x":  # the canonical is crawled before this page is found
                return Page(f"Product {pid}", blocks + ["Shared by a friend."],
                            links + [L("/only-via-variant-1", "Hidden")], canonical=canonical, follow=False)
            if pid == "2" and ref == "mail":  # its canonical is linked from nowhere else
                return Page(f"Product {pid}", blocks + ["Welcome, newsletter reader."],
                            links + [L("/promo", "This week's promotion")], canonical=canonical)
        return None

    def _facet_page(self, params: list) -> Optional[Page]:
        keys = [k for k, _ in params]
        if any(k not in FACET_VALUES and k not in ("sort", "view") for k in keys):
            return None
        filters = [(k, v) for k, v in params if k in FACET_VALUES]
        presentation = [(k, v) for k, v in params if k in ("sort", "view")]
        described = ", ".join(f"{k} {v}" for k, v in filters) or "none"
        if presentation:  # a sorted / grid view: links back to the plain list only
            plain = "/products" + ("?" + "&".join(f"{k}={v}" for k, v in filters) if filters else "")
            return Page(f"Products ({described}; {params[-1][0]} {params[-1][1]})",
                        [f"Products with filters {described}, shown differently."],
                        [self._link(plain, "Back to the list")])
        links = [self._link("/", "Home")]
        if not filters:
            links += [self._link("/product?id=1", "Orb web poster"), self._link("/product?id=3", "Spider mug")] \
                if "content" in self.parts else []
        query_limit = self.limits["query-params"]
        for key in FACET_KEYS:
            used = [v for k, v in filters if k == key]
            values = FACET_VALUES[key]
            value = values[len(used)] if len(used) < len(values) else f"{key}{len(used)}"
            new = sorted(filters + [(key, value)], key=lambda kv: kv[0])  # stable: keeps value order
            rule = "query-params" if query_limit is not None and len(new) > query_limit else None
            links.append(self._link("/products?" + "&".join(f"{k}={v}" for k, v in new), f"{key}: {value}", rule))
        if len(filters) + 1 <= (query_limit or 10**9):  # presentation links only where unambiguous
            for key, value in (("sort", "price"), ("view", "grid")):
                new = sorted(filters + [(key, value)], key=lambda kv: kv[0])
                links.append(self._link("/products?" + "&".join(f"{k}={v}" for k, v in new),
                                        f"{key} {value}", "presentation-params"))
        return Page(f"Products ({described})", [f"Products with filters {described}."], links)

    def month_rule(self, year: int, month: int) -> Optional[str]:
        """None (fetched), "calendar" (refused) or MAYBE for /calendar/YEAR/MONTH/."""
        first = _dt.date(year, month, 1)
        last = _dt.date(year, month, _calendar.monthrange(year, month)[1])
        future, past = self.limits["calendar"], self.limits["calendar-past"]
        hi = self.today + _dt.timedelta(days=future) if future is not None else _dt.date.max - _CAL_MARGIN
        lo = self.today - _dt.timedelta(days=past) if past is not None else _dt.date.min + _CAL_MARGIN
        if last < lo - _CAL_MARGIN or first > hi + _CAL_MARGIN:
            return "calendar"
        if first >= lo + _CAL_MARGIN and last <= hi - _CAL_MARGIN:
            return None
        return MAYBE

    def _calendar_page(self, target: str) -> Optional[Page]:
        if target == "/calendar/":
            y, m = self.today.year, self.today.month
            return Page("Events", ["Our calendar of spider walks."],
                        [self._link("/", "Home"), self._link(month_path(y, m), "This month")])
        parts = target.split("/")
        if len(parts) != 5 or parts[4] != "" or not (parts[2].isdigit() and parts[3].isdigit()):
            return None
        year, month = int(parts[2]), int(parts[3])
        if not (1 <= month <= 12 and 1 <= year <= 9998 and len(parts[2]) == 4 and len(parts[3]) == 2):
            return None
        links = [self._link("/calendar/", "Events")]
        for delta, text in ((-1, "Previous month"), (1, "Next month"), (-12, "Previous year"), (12, "Next year")):
            y, m = _add_months(year, month, delta)
            if 1000 <= y <= 9999:
                links.append(self._link(month_path(y, m), text, self.month_rule(y, m)))
        return Page(f"Events in {MONTHS[month - 1]} {year}", [f"No spider walks planned in {MONTHS[month - 1]} {year}."],
                    links)

    def _repeat_page(self, target: str) -> Optional[Page]:
        limit = self.limits["repeated-segments"]
        if target == "/docs/":
            return Page("Documentation", ["Read the manual."], [self._link("/", "Home"), self._link("a/", "Part A", None, target)])
        for root, run in (("/docs/", "a/"), ("/shop/", "x/y/")):
            rest = target[len(root):]
            if target.startswith(root) and rest and rest == run * (len(rest) // len(run)):
                times = len(rest) // len(run)
                rule = "repeated-segments" if limit is not None and times + 1 >= limit else None
                # The bug: a relative link to the section itself, so the path grows on every page.
                return Page(f"Section {rest} of {root}", [f"Section {rest} under {root}."],
                            [self._link("/", "Home"), self._link(run, "Section", rule, target)])
        return None

    def _deep_page(self, target: str) -> Optional[Page]:
        segments = target.strip("/").split("/")
        if segments[0] != "deep" or any(s != f"d{i}" for i, s in enumerate(segments[1:], start=2)):
            return None
        limit = self.limits["path-segments"]
        nxt = target + f"/d{len(segments) + 1}"
        rule = "path-segments" if limit is not None and len(segments) + 1 > limit else None
        return Page(f"Archive level {len(segments)}", [f"Archive level {len(segments)}."],
                    [self._link("/", "Home"), self._link(nxt, "Deeper", rule)])

    # -- ground truth ---------------------------------------------------------------------------

    def truth(self, max_depth: int = 50) -> TrapTruth:
        """The ground truth of a crawl from "/" with these limits and `--max-depth max_depth`
        (depths are shortest-path depths: exact for bfs with one worker, and whenever no page
        comes near the limit)."""
        must: set[str] = set()
        may: set[str] = set()
        depth: dict[str, int] = {"/": 0}
        traps: dict[str, str] = {}
        optional: set[str] = set()
        sources: dict[str, set[str]] = defaultdict(set)
        unfollowed: set[str] = set()
        titles: dict[str, str] = {}
        edge: list[str] = []

        def explore(start: Iterable[str], into: set[str]) -> None:
            queue = deque(t for t in start if t not in must and t not in may)
            into.update(queue)
            while queue:
                target = queue.popleft()
                page = self.page(target)
                assert page is not None, f"the trap site links a page it does not serve: {target}"
                titles[target] = page.title
                follows = list(page.links) if page.follow else []
                if not page.follow:
                    unfollowed.update(link.target for link in page.links)
                if page.canonical and page.canonical != target:
                    follows.append(self._link(page.canonical, "canonical"))
                for link in follows:
                    t, rule = link.target, link.rule
                    if rule is None:
                        if t in must or t in may:
                            continue  # known: counted, not logged
                        if depth[target] + 1 > max_depth:
                            rule = "depth"
                    if rule is None:
                        if t not in into:
                            into.add(t)
                            depth[t] = depth[target] + 1
                            queue.append(t)
                        continue
                    traps[t] = "calendar" if rule == MAYBE else rule
                    sources[t].add(target)
                    if rule == MAYBE and depth[target] + 1 <= max_depth:
                        optional.add(t)
                        depth.setdefault(t, depth[target] + 1)
                        edge.append(t)

        explore(["/"], must)
        while True:  # then what months at a limit (and only they) lead to
            pending = [t for t in edge if t not in must and t not in may]
            if not pending:
                break
            explore(pending, may)
        duplicate_groups = [g for g in ({"/article-1", "/print/article-1"}, {"/article-2", "/mirror/article-2"})
                            if g <= must]
        variants = {v: c for v, c in (("/product?id=1&ref=x", "/product?id=1"),
                                      ("/product?id=2&ref=mail", "/product?id=2")) if v in must}
        return TrapTruth(
            origin=f"http://{self.site.host}:{self.site.port}",
            must_fetch=must,
            may_fetch=may,
            traps=traps,
            optional=optional,
            sources=dict(sources),
            never=unfollowed - must - may,
            duplicate_groups=duplicate_groups,
            variants=variants,
            titles=titles,
            depth={t: d for t, d in depth.items() if t in must or t in may},
            today=self.today,
        )


def build_trap_site(site, parts: Iterable[str] = ALL_PARTS, today: Optional[_dt.date] = None,
                    limits: Optional[dict] = None, max_depth: int = 50) -> TrapTruth:
    """Serve the trap site (or only `parts` of it) on the started TestSite `site`; its ground truth.

    `limits` overrides trap limits in the ground truth (None = rule off), e.g. {"path-segments": 5};
    `max_depth` is the crawl's --max-depth (links beyond it are expected as `depth`).
    """
    return TrapSite(site, parts, today, limits).install().truth(max_depth)


# ------------------------------------------------------------------------------------ list/detail


class ListDetailSite:
    """A catalogue: "/" links every list page; /list/N links its neighbours and `per_list` details;
    /detail/ID links its list and `related` other details. Details 1..lists*per_list are listed;
    the others (up to `details`) are reachable only through related links."""

    def __init__(self, site, lists: int = 10, per_list: int = 10, details: Optional[int] = None,
                 related: int = 3) -> None:
        self.site = site
        self.lists = lists
        self.per_list = per_list
        self.details = details if details is not None else lists * per_list * 3
        self.related = related

    def install(self) -> "ListDetailSite":
        for target in ["/", *(f"/list/{n}" for n in range(1, self.lists + 1)),
                       *(f"/detail/{k}" for k in range(1, self.details + 1))]:
            self.site.route(target, body=self.render(target))
        return self

    @staticmethod
    def is_detail(target: str) -> bool:
        return target.startswith("/detail/")

    def list_of(self, k: int) -> int:
        return (k - 1) // self.per_list % self.lists + 1

    def links(self, target: str) -> list[str]:
        if target == "/":
            return [f"/list/{n}" for n in range(1, self.lists + 1)]
        kind, _, num = target.strip("/").partition("/")
        n = int(num)
        if kind == "list":
            out = [f"/list/{m}" for m in (n - 1, n + 1) if 1 <= m <= self.lists]
            first = (n - 1) * self.per_list + 1
            return out + [f"/detail/{k}" for k in range(first, first + self.per_list) if k <= self.details]
        out = [f"/list/{self.list_of(n)}"]
        j = 0
        while len(out) < 1 + min(self.related, self.details - 1) and j < 10 * self.related + 10:
            j += 1
            k = (n * 7 + j * 131) % self.details + 1
            if k != n and f"/detail/{k}" not in out:
                out.append(f"/detail/{k}")
        return out

    def render(self, target: str) -> str:
        title = "Catalogue" if target == "/" else target.strip("/").replace("/", " ").capitalize()
        items = "".join(f'<li><a href="{h}">{h}</a></li>\n' for h in self.links(target))
        return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
                f"<body><h1>{title}</h1>\n<p>This is {title}.</p>\n<ul>\n{items}</ul>\n</body></html>\n")
