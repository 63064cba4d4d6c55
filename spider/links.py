"""Link extraction: turn a fetched HTML body into raw link values and page facts.

`LinkFinder` only *finds* things.  It returns attribute values as the page
wrote them (after HTML character-reference decoding and trimming of HTML
whitespace at the ends); resolving against the page or ``<base>`` URL,
normalising and filtering are the crawler's job elsewhere.

Design notes:

* The HTML is parsed by lexbor (through selectolax), which builds the tree the
  WHATWG HTML Standard's parsing algorithm builds, as browsers do: the links
  found are the ones a browser's DOM holds (``<template>`` content is inert,
  misnested and unclosed markup is repaired as a browser repairs it).  On a
  Python docs page (87 KB) the parse and the links take 1.7 ms of CPU where
  libxml2's took 2.9, the whole ``parse`` 2.2 ms instead of 3.9
  (``bench/parse_cost.py``).
* Bytes are decoded in Python (BOM > HTTP charset > ``<meta>``/XML-declaration
  charset > UTF-8) with ``errors="replace"``, so lexbor is only ever given valid
  UTF-8; valid UTF-8 bodies are handed over as they are, without a decode.
* One CSS query (lexbor's selector engine, in document order) collects links,
  ``<base>``, canonical, robots meta, ``<title>`` and, with the hash wanted, the invisible
  elements; the visible-text hash is computed afterwards from the same tree: the invisible
  elements removed (the text on both sides joined where each stood, not by a walk of the whole
  tree), the text taken by lexbor without the whitespace-only text nodes, the whitespace folded
  on its UTF-8 bytes (``_fold_utf8``). A walk of an 87 KB page's ~4,000 nodes costs 0.05 ms
  just after the parse, 0.2 ms cold: the parse makes two, the query's and the text's. The hash
  costs 0.075 ms of a 20 KB bench page (0.10 before) and 0.35 of a docs page (0.47).
* The Standard's tree construction scans the stack of open elements for many
  tags, so a document nested thousands deep costs depth x tags.  A document
  with more than ``_MAX_TAGS`` tags is first flattened (every tag that can
  nest blanked out, links and raw-text elements kept), which bounds the depth.
* ``parse`` never raises: any failure yields an empty `ParsedPage`.
"""

from __future__ import annotations

import codecs
import re
import threading
from dataclasses import dataclass, field

from selectolax.lexbor import LexborCSSSelector, LexborHTMLParser, LexborNode

from .hashes import blake2b

__all__ = ["Link", "ParsedPage", "LinkFinder", "css_urls", "header_links", "refresh_target", "srcset_urls",
           "stylesheet_urls"]

# HTML's "ASCII whitespace" (no VT, no Unicode spaces): what browsers trim from URLs.
_HTML_WS = " \t\n\f\r"

# How far into the body to look for <meta charset> / an XML declaration.
# WHATWG prescans 1024 bytes; real pages often have a long <head>, so look further.
_PRESCAN_BYTES = 4096

_META_CHARSET_RE = re.compile(
    rb"""<meta\b[^>]*?\bcharset\s*=\s*["']?\s*([A-Za-z0-9._:\-]+)""", re.IGNORECASE
)
_COMMENT_RE = re.compile(rb"<!--.*?(?:-->|$)", re.DOTALL)   # an unclosed one runs to the end
_XML_DECL_CHARSET_RE = re.compile(
    rb"""\A\s*<\?xml\b[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:\-]+)""", re.IGNORECASE
)

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_BOM_STARTS = frozenset(bom[:1] for bom, _ in _BOMS)

# WHATWG labels Python's codec registry does not know.
_LABEL_ALIASES: dict[str, str] = {
    "x-gbk": "gbk",
    "x-x-big5": "big5",
    "x-sjis": "shift_jis",
    "x-mac-roman": "mac-roman",
    "x-mac-cyrillic": "mac-cyrillic",
}

# The WHATWG Encoding Standard decodes these (keyed by Python's canonical codec
# name) with a superset codec; do the same so we see the text browsers see,
# e.g. iso-8859-1 pages full of cp1252 curly quotes.
_WEB_SUPERSETS: dict[str, str] = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "euc_kr": "cp949",
    "shift_jis": "cp932",
    "utf-16": "utf-16-le",  # the "utf-16" label without a BOM means little-endian
}

# Python codecs that are not web charsets (or are dangerous ones, like UTF-7):
# a page naming them is treated as naming an unknown charset.
_REJECTED_CODECS = frozenset(
    {
        "idna",
        "punycode",
        "unicode-escape",
        "raw-unicode-escape",
        "undefined",
        "utf-7",
        "mbcs",
        "oem",
        "charmap",
    }
)

# <meta name=robots content="noindex, nofollow">: comma and/or space separated.
_ROBOTS_SPLIT_RE = re.compile(r"[\s,]+")

# The elements the single query over the tree asks for, in one selector list (lexbor returns the
# matches in document order). An <a>/<area> without href is no link; a <meta> is read for robots
# and refresh; only the first <title> and <base href> count.
_WANTED = "a[href], area[href], iframe[src], frame[src], link[href], meta, base[href], title"
# ... and with page requisites wanted (``LinkFinder(requisites=True)``, wget -p): what a browser
# loads to show the page. <link> rels are below; <style> text and style attributes give url()s.
_REQUISITES = _WANTED + ", img, script, video, audio, source, track, embed, object, input, style"
# <link rel=...> values naming another page (followed like <a href>). rel=canonical is read apart
# (the page is a variant of that one); rel=search, dns-prefetch, preconnect and the like are not pages.
PAGE_RELS = frozenset({"alternate", "next", "prev", "previous", "first", "last", "up", "index",
                       "contents", "start", "help", "author", "license", "copyright"})
# <link rel=...> values naming a requisite: what the page needs to be shown.
REQUISITE_RELS = frozenset({"stylesheet", "icon", "shortcut", "apple-touch-icon",
                            "apple-touch-icon-precomposed", "mask-icon", "preload", "modulepreload",
                            "manifest"})
# Subtrees whose text is not visible page text (<title> is hashed separately,
# first, so extra <title>s, e.g. SVG tooltips, are dropped too).
_INVISIBLE_TAGS = ("script", "style", "noscript", "template", "title")
# With the hash wanted, the one query also brings the invisible elements (a second query over the
# tree cost 6 µs of a bench page). Each tag in one selector only: lexbor reports an element once
# per selector of the list it matches.
_WANTED_AND_INVISIBLE = _WANTED + ", script, style, noscript, template"
_REQUISITES_AND_INVISIBLE = _REQUISITES + ", noscript, template"

# The HTML Standard's tree construction scans the stack of open elements for many tags (is a <p>
# open? a <li>? is this end tag's element in scope?), so in lexbor, as in the Standard, a document
# nested N deep costs ~N x tags: 20,000 unclosed <div> and 20,000 </p> took 0.6 s, 40,000 of each
# 10 s. Above this many "<", the document is flattened first: every tag blanked out except ones
# that cannot nest (void and raw-text elements, <a>, which closes an open <a>, and singletons),
# which keeps text and links and bounds the depth; it is then parsed with scripting enabled, so
# that <noscript> is raw text too (hidden from the text hash as before; its links are not seen,
# as in a browser that runs scripts). Lost there too: <video>, <audio> and <object> requisites.
# The Python docs' median page has 2,200 tags (10 of their 530 pages have more than 20,000).
_MAX_TAGS = 10_000
_KEEP_TAGS = ("a|area|base|link|meta|title|script|style|textarea|xmp|iframe|noembed|noframes|plaintext"
              "|noscript|frame|img|source|track|embed|input|html|head|body")
# `[^<>]*` keeps the scan linear on hostile input.
_IRRELEVANT_TAG_RE = re.compile(
    r"</?(?!(?:%s)[\s/>])[A-Za-z][^<>]*>" % _KEEP_TAGS, re.IGNORECASE
)


@dataclass(frozen=True)
class Link:
    """One link to a page, value as written in the page: ``<a href>``, ``<area href>``,
    ``<iframe src>``, ``<frame src>``, a ``<meta http-equiv=refresh>`` target or a
    ``<link href>`` whose rel names a page (``PAGE_RELS``)."""

    href: str
    nofollow: bool


@dataclass(frozen=True)
class ParsedPage:
    """Everything the crawler needs from one HTML page (raw, unresolved)."""

    links: list[Link] = field(default_factory=list)
    base_href: str | None = None
    canonical: str | None = None
    title: str | None = None
    meta_nofollow: bool = False
    meta_noindex: bool = False
    text_hash: str | None = None
    truncated: bool = False
    dropped: int = 0   # links (and requisites) past max_links, not in ``links`` (``requisites``)
    requisites: list[str] = field(default_factory=list)   # with requisites=True: raw URLs, in order


# Frozen dataclasses made without their ``__init__`` (an ``object.__setattr__`` a field): a
# followed ``Link`` of each distinct href of a page (0.15 µs instead of 0.31), the ``ParsedPage``.
_NEW = object.__new__


_ENGINES = threading.local()


def _selector() -> LexborCSSSelector:
    """This thread's CSS selector engine, for every page: ``tree.css`` makes one per tree and frees it
    with the tree (3 µs of a 20 KB page). One per thread: a query keeps its results on the engine."""
    try:
        return _ENGINES.selector
    except AttributeError:
        engine = _ENGINES.selector = LexborCSSSelector()
        return engine


# Labels met, and what `_look_up_codec` made of them: nearly every page names one of a few
# (``utf-8`` in its <meta>), and the look-up costs 0.5 µs. Emptied when full: the labels are
# the pages' to choose.
_CODECS: dict[tuple[str | bytes, bool], str | None] = {}


def _codec_for(label: str | bytes | None, *, from_document: bool) -> str | None:
    """Map a charset label to a usable Python codec name, or None if unusable.

    ``from_document`` labels were found by scanning ASCII-compatible bytes, so
    a UTF-16/32 claim there is a lie and means UTF-8 (as in the WHATWG spec).
    """
    if label is None:
        return None
    key = (label, from_document)
    try:
        return _CODECS[key]
    except KeyError:
        pass
    codec = _look_up_codec(label, from_document)
    if len(label) <= 64:   # a hostile server's long ones are not kept
        if len(_CODECS) >= 256:
            _CODECS.clear()
        _CODECS[key] = codec
    return codec


def _look_up_codec(label: str | bytes, from_document: bool) -> str | None:
    """`_codec_for` of a label not met yet."""
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    key = label.strip(_HTML_WS + "\"'").lower()
    if not key:
        return None
    try:
        info = codecs.lookup(_LABEL_ALIASES.get(key, key))
    except (LookupError, ValueError, TypeError):
        return None
    if not getattr(info, "_is_text_encoding", True):
        return None  # base64, zlib, rot13, ...
    name = _WEB_SUPERSETS.get(info.name, info.name)
    if name.replace("_", "-") in _REJECTED_CODECS:
        return None
    if from_document and name.startswith(("utf-16", "utf_16", "utf-32", "utf_32")):
        return "utf-8"
    return name


def _detect_encoding(body: bytes, charset: str | None = None) -> tuple[str, int]:
    """Return ``(codec, bom_length)``: BOM > HTTP charset > meta/XML decl > UTF-8."""
    if body[:1] in _BOM_STARTS:
        for bom, codec in _BOMS:
            if body.startswith(bom):
                return codec, len(bom)
    given = _codec_for(charset, from_document=False)
    if given:
        return given, 0
    head = body[:_PRESCAN_BYTES]
    xml = _XML_DECL_CHARSET_RE.match(head)
    match = _META_CHARSET_RE.search(head)
    # The HTML pre-scan skips comments: a <meta> inside one does not count. A match with no
    # comment begun before the byte after it is the one found without the comments (the text up
    # to there is the same), and the search for "<!--" stops there: on a page without
    # comments it read the whole 4 KiB (2.3 µs).
    if (match is None or head.find(b"<!--", 0, match.end() + 4) >= 0) and b"<!--" in head:
        match = _META_CHARSET_RE.search(_COMMENT_RE.sub(b"", head))
    match = match or xml
    if match:
        declared = _codec_for(match.group(1), from_document=True)
        if declared:
            return declared, 0
    return "utf-8", 0


def _decode(body: bytes, charset: str | None) -> str:
    """Bytes to text; never raises, undecodable bytes become U+FFFD."""
    codec, skip = _detect_encoding(body, charset)
    data = body[skip:] if skip else body
    try:
        return data.decode(codec, "replace")
    except Exception:  # a codec that rejects errors="replace" or misbehaves
        return data.decode("utf-8", "replace")


def _tokens(value: str | None) -> list[str]:
    """Split a rel-like attribute into lower-case tokens."""
    return value.lower().split() if value else []


def _fold(text: str) -> str:
    return " ".join(text.split())


# What str.split() splits on (str.isspace): the ASCII ones and the rest, as UTF-8.
_ASCII_SPACES_TO_SPACE = bytes(0x20 if i in b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f" else i for i in range(256))
_WIDE_SPACES = tuple((c, c.encode("utf-8")) for c in
                     "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
                     "\u2028\u2029\u202f\u205f\u3000")
# Two literal spaces first: sre then scans for the pair in C; "  +" (one literal, then a repeat)
# enters the matcher at every space of the text, ~1.5x the time on a bench page.
_SPACE_RUNS = re.compile(rb"   *")


def _fold_utf8(text: str) -> bytes:
    """``_fold(text)`` in UTF-8, folded as bytes: every whitespace character becomes a space
    (``bytes.translate``; a non-ASCII one by ``replace``, only when the text has one), runs of
    spaces become one. 2,600 words cost ~45 µs this way, ~115 through ``str.split`` and ``join``
    (a string made per word). Finding the runs is most of it: ~1.5 ns a byte, spaces being dense.
    The translation is skipped when there is nothing to translate: a text of one line (lexbor
    leaves out the whitespace-only text nodes) is checked byte by byte by ``memchr``, nine
    times, in 3 µs of a bench page's 18 KB, where ``translate`` took 7."""
    data = text.encode("utf-8", "surrogatepass")
    if (b"\n" in data or b"\t" in data or b"\r" in data or b"\x0c" in data or b"\x0b" in data
            or b"\x1c" in data or b"\x1d" in data or b"\x1e" in data or b"\x1f" in data):
        data = data.translate(_ASCII_SPACES_TO_SPACE)
    if not text.isascii():
        for char, encoded in _WIDE_SPACES:
            if char in text:
                data = data.replace(encoded, b" ")
    return _SPACE_RUNS.sub(b" ", data).strip(b" ")


def _document(body: bytes, charset: str | None) -> bytes | str:
    """What lexbor is given: the body itself when it is valid UTF-8 (no decode, no encode: lexbor
    reads UTF-8), else the text `_decode` makes of it (selectolax encodes it to UTF-8)."""
    codec, skip = _detect_encoding(body, charset)
    if codec == "utf-8":
        data = body[skip:] if skip else body
        if data.isascii():
            return data
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return _decode(body, charset)
        return data
    return _decode(body, charset)


def _more_than(document: bytes | str, char: bytes | str, limit: int) -> bool:
    """``document.count(char) > limit``, counting only as far as it takes: the bytes not counted
    yet hold at most as many ``char``. Each step counts as many as the bound is over ``limit``
    (all of them ``char``, it would be met): half of a 20 KB bench page, 3.8 µs instead of 6.7."""
    seen, start, end = 0, 0, len(document)
    while seen <= limit:
        over = seen + end - start - limit
        if over <= 0:
            return False
        seen += document.count(char, start, start + over)
        start += over
    return True


class LinkFinder:
    """Parse one page's HTML and report its raw links and page-level facts."""

    def __init__(self, page_url: str, max_links: int = 5000, *, text_hash: bool = True,
                 requisites: bool = False) -> None:
        if max_links < 0:
            raise ValueError("max_links must be >= 0")
        self.page_url = page_url  # kept for callers/logging; nothing is resolved here
        self.max_links = max_links
        self._want_hash = text_hash   # the text hash costs a quarter to a half of a parse: skip it when unused
        self._want_requisites = requisites   # more tags to visit: only when asked for

    def find_links(self, body: bytes, charset: str | None = None) -> list[str]:
        """Just the raw hrefs, in document order (the classic tutorial API)."""
        return [link.href for link in self.parse(body, charset).links]

    def parse(self, body: bytes, charset: str | None = None) -> ParsedPage:
        """Parse ``body``; ``charset`` is the HTTP Content-Type charset, if any.

        Never raises: unparseable input gives an empty `ParsedPage`.
        """
        try:
            return self._parse(body, charset)
        except Exception:
            return ParsedPage()

    def _parse(self, body: bytes, charset: str | None) -> ParsedPage:
        if not body:
            return ParsedPage()
        body = bytes(body)
        document = _document(body, charset)
        if not document or document.isspace():
            return ParsedPage()
        flatten = _more_than(document, b"<" if isinstance(document, bytes) else "<", _MAX_TAGS)
        if flatten:
            text = document if isinstance(document, str) else _decode(body, charset)
            document = _IRRELEVANT_TAG_RE.sub(" ", text)
        tree = LexborHTMLParser(document, scripting=flatten)
        if tree.root is None:
            return ParsedPage()
        return self._extract(tree)

    def _extract(self, tree: LexborHTMLParser) -> ParsedPage:
        max_links = self.max_links
        links: list[Link] = []
        n_links = 0
        base_href: str | None = None
        canonical: str | None = None
        title_el: LexborNode | None = None
        meta_nofollow = meta_noindex = False
        want_requisites = self._want_requisites
        want_hash = self._want_hash
        requisites: list[str] = []
        invisible: list[LexborNode] = []   # with the hash wanted: script, style, ..., title
        made: dict[str, Link] = {}   # href -> its followed Link (frozen, so shared)

        if want_hash:
            query = _REQUISITES_AND_INVISIBLE if want_requisites else _WANTED_AND_INVISIBLE
        else:
            query = _REQUISITES if want_requisites else _WANTED
        for el in _selector().find(query, tree.root):
            tag = el.tag
            if tag == "a" or tag == "area" or tag == "iframe" or tag == "frame":
                attrs = el.attributes   # one dict: ~4x cheaper than two lookups through .attrs
                # the query asked for [href] / [src]: None is a value-less attribute, <a href>
                href = (attrs.get("href" if tag == "a" or tag == "area" else "src") or "").strip(_HTML_WS)
                rel = attrs.get("rel")
                n_links += 1
                if n_links > max_links:
                    continue
                if rel is not None and "nofollow" in _tokens(rel):
                    links.append(Link(href, True))
                else:   # half of a real page's links are written twice or more (menus): one Link each
                    link = made.get(href)
                    if link is None:   # Link(href, False)
                        link = made[href] = _NEW(Link)
                        fields = link.__dict__
                        fields["href"] = href
                        fields["nofollow"] = False
                    links.append(link)
            elif tag == "link":
                attrs = el.attributes
                href = attrs.get("href") or ""   # the query asked for [href]: None is <link href>
                rels = _tokens(attrs.get("rel"))
                if canonical is None and "canonical" in rels:
                    canonical = href.strip(_HTML_WS)
                elif want_requisites and not REQUISITE_RELS.isdisjoint(rels):
                    requisites.append(href.strip(_HTML_WS))
                elif not PAGE_RELS.isdisjoint(rels) and "stylesheet" not in rels:   # not "alternate stylesheet"
                    n_links += 1
                    if n_links <= max_links:
                        links.append(Link(href.strip(_HTML_WS), "nofollow" in rels))
            elif tag == "meta":
                attrs = el.attributes
                name = attrs.get("name")
                equiv = attrs.get("http-equiv")
                if equiv is not None and equiv.strip(_HTML_WS).lower() == "refresh":
                    target = refresh_target(attrs.get("content") or "")
                    if target is not None:
                        n_links += 1
                        if n_links <= max_links:
                            links.append(Link(target, False))
                elif name is not None and name.strip(_HTML_WS).lower() == "robots":
                    directives = _ROBOTS_SPLIT_RE.split((attrs.get("content") or "").lower())
                    if "none" in directives:
                        meta_nofollow = meta_noindex = True
                    if "nofollow" in directives:
                        meta_nofollow = True
                    if "noindex" in directives:
                        meta_noindex = True
            elif tag == "base":
                if base_href is None:
                    base_href = (el.attributes.get("href") or "").strip(_HTML_WS)
            elif tag == "title":
                if title_el is None:
                    title_el = el
                invisible.append(el)
            elif tag == "script" or tag == "style" or tag == "noscript" or tag == "template":
                invisible.append(el)
                if want_requisites and (tag == "script" or tag == "style"):
                    _element_requisites(el, requisites)
            else:
                _element_requisites(el, requisites)
        if want_requisites:
            for el in tree.css("[style]"):
                requisites.extend(css_urls(el.attrs.get("style") or ""))

        title = _fold(title_el.text()) if title_el is not None else None
        # ParsedPage(...) without the frozen dataclass' __init__ (an object.__setattr__ a field):
        # 0.4 µs instead of 1.5; every field, in their order (``test_a_parsed_page_has_every_field``)
        page = _NEW(ParsedPage)
        page.__dict__.update(
            links=links,
            base_href=base_href,
            canonical=canonical,
            title=title,
            meta_nofollow=meta_nofollow,
            meta_noindex=meta_noindex,
            text_hash=_text_hash(tree, invisible, title) if want_hash else None,
            truncated=n_links > max_links or len(requisites) > max_links,
            # requisites are capped apart (a page of a million <img> is as hostile as one of
            # a million <a>); the cut ones are counted with the links
            dropped=max(0, n_links - max_links) + max(0, len(requisites) - max_links),
            requisites=requisites[:max_links],
        )
        return page


def _remove_joining_text(elements: list[LexborNode]) -> None:
    """Remove ``elements`` (in document order) from their tree, the text on both sides of each made one
    text node, as ``merge_text_nodes`` would make it, without its walk of the whole tree (0.2 ms of an
    87 KB page): the parser never leaves two text nodes side by side (the Standard appends to the one
    before), so they meet only where an element was removed. A side of HTML whitespace only is left
    as it is: the text's separator between the two folds away with it."""
    for el in elements:
        before = el.prev
        el.decompose(recursive=False)
        if before is not None and before.is_text_node and not before.is_empty_text_node:
            after = before.next
            if after is not None and after.is_text_node and not after.is_empty_text_node:
                after.replace_with((before.text_content or "") + (after.text_content or ""))
                before.decompose(recursive=False)


def _text_hash(tree: LexborHTMLParser, invisible: list[LexborNode], title: str | None) -> str | None:
    """Hash of the visible text (title + body), insensitive to markup.

    The text is the document's text nodes outside the invisible elements (script, style,
    noscript, template, title), joined by spaces, all whitespace runs folded to one space; the
    text on both sides of a removed invisible element is one run ("a<script>x</script>b" is
    "ab"), while a tag or a comment between two text nodes is a space ("a<b>b</b>" and
    "a<!-- -->b" are "a b"; libxml2's tree had no comments, so the hash before lexbor read
    the latter as "ab"). So pages differing only in tags, attributes, comments' content,
    scripts/styles or whitespace hash the same. Runs after the link pass, which found the
    ``invisible`` elements (in document order), because it removes them from the tree (detached,
    not freed: an inner one found after its outer one is harmless). Text nodes of HTML
    whitespace only are left out of the text (``skip_empty``): between two separators they
    fold away anyway, and the fold is cheaper without them.
    """
    _remove_joining_text(invisible)
    text = _fold_utf8(tree.text(separator=" ", skip_empty=True))
    if title:
        head = title.encode("utf-8", "surrogatepass")
        text = head + b" " + text if text else head
    if not text:
        return None
    return blake2b(text, digest_size=16).hexdigest()


# ------------------------------------------------------------------------------- more link sources

# The attributes of the requisite tags that name a file the page loads.
_REQUISITE_ATTRS: dict[str, tuple[str, ...]] = {
    "img": ("src",), "script": ("src",), "video": ("src", "poster"), "audio": ("src",),
    "source": ("src",), "track": ("src",), "embed": ("src",), "object": ("data",),
}


def _element_requisites(el: LexborNode, out: list[str]) -> None:
    """Append the requisites one element names (``_REQUISITES`` other than <a>, <link>, ...)."""
    tag = el.tag
    if tag == "style":
        out.extend(css_urls(el.text()))
        return
    attrs = el.attributes
    if tag == "input":
        if (attrs.get("type") or "").strip(_HTML_WS).lower() != "image":
            return
        names: tuple[str, ...] = ("src",)
    else:
        names = _REQUISITE_ATTRS.get(tag, ())
    for name in names:
        value = attrs.get(name)
        if value is not None and value.strip(_HTML_WS):
            out.append(value.strip(_HTML_WS))
    if tag == "img" or tag == "source":
        out.extend(srcset_urls(attrs.get("srcset") or ""))


_REFRESH_RE = re.compile(r"""\s*[0-9.]*\s*[;,]?\s*(?:url\s*=\s*)?(.*)""", re.IGNORECASE | re.DOTALL)


def refresh_target(value: str) -> str | None:
    """The URL of a ``<meta http-equiv=refresh content=...>`` or ``Refresh:`` header value, as
    written (HTML's "shared declarative refresh steps", simplified): None when it only reloads.

    >>> refresh_target("5; url=/next.html")
    '/next.html'
    >>> refresh_target("0;URL='http://example.com/'")
    'http://example.com/'
    >>> refresh_target("30") is None
    True
    """
    m = _REFRESH_RE.match(value)
    target = m.group(1).strip(_HTML_WS) if m else ""
    if target[:1] in ("'", '"'):
        quote, target = target[0], target[1:]
        target = target.split(quote, 1)[0]
    target = target.strip(_HTML_WS)
    return target or None


def srcset_urls(value: str) -> list[str]:
    """The URLs of a ``srcset`` attribute (HTML's candidate list: a URL, then descriptors up to a
    comma; a URL ending in commas has none).

    >>> srcset_urls("a.png 1x, b.png 2x,c.png")
    ['a.png', 'b.png', 'c.png']
    """
    out = []
    i, n = 0, len(value)
    while i < n:
        while i < n and (value[i] in _HTML_WS or value[i] == ","):
            i += 1
        start = i
        while i < n and value[i] not in _HTML_WS:
            i += 1
        url = value[start:i]
        if not url:
            break
        if url.endswith(","):
            out.append(url.rstrip(","))
            continue
        out.append(url)
        depth = 0   # descriptors, up to a comma outside parentheses
        while i < n and not (value[i] == "," and depth == 0):
            depth += {"(": 1, ")": -1}.get(value[i], 0)
            i += 1
    return [u for u in out if u]


# Linear on hostile input: an unquoted URL may not hold "(" (``url(url(url(...`` stops at once)
# and is never empty (so backing off ``url(   ...`` fails at each space instead of rescanning).
_CSS_URL_RE = re.compile(
    r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^()\s"']+))\s*\)|@import\s+(?:"([^"]*)"|'([^']*)')""",
    re.IGNORECASE)
_CSS_COMMENT_RE = re.compile(r"/\*.*?(?:\*/|$)", re.DOTALL)


def css_urls(text: str) -> list[str]:
    """The ``url(...)`` and ``@import "..."`` targets of CSS text (a stylesheet, a <style>
    element, a style attribute), as written, comments skipped, ``data:`` URLs dropped.

    >>> css_urls('@import "base.css"; body { background: url( "bg.png" ) } /* url(x.png) */')
    ['base.css', 'bg.png']
    """
    if "url(" not in text.lower() and "@import" not in text.lower():
        return []
    text = _CSS_COMMENT_RE.sub(" ", text)
    out = []
    for m in _CSS_URL_RE.finditer(text):
        value = next((g for g in m.groups() if g is not None), "").strip(_HTML_WS)
        if value and not value[:5].lower() == "data:":
            out.append(value)
    return out


def stylesheet_urls(body: bytes, charset: str | None = None) -> list[str]:
    """The ``url(...)`` and ``@import`` targets of a fetched stylesheet (BOM > HTTP charset >
    UTF-8, undecodable bytes replaced: URLs are ASCII in practice; never raises)."""
    return css_urls(_decode(body, charset))


_LINK_VALUE_RE = re.compile(r"<([^>]*)>([^<]*)")
_REL_PARAM_RE = re.compile(r"""(?:^|;)\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,"]+))""", re.IGNORECASE)


def header_links(link: str | None, refresh: str | None) -> tuple[list[str], list[str]]:
    """The pages and the requisites named by a response's ``Link`` (RFC 8288) and ``Refresh``
    headers: ``Link`` targets whose rel is in ``PAGE_RELS`` or is ``canonical`` are pages, those
    whose rel is in ``REQUISITE_RELS`` requisites; the ``Refresh`` target is a page.

    >>> header_links('<http://a/2>; rel="next", </s.css>; rel=preload; as=style', "0; url=/x")
    (['http://a/2', '/x'], ['/s.css'])
    """
    pages: list[str] = []
    requisites: list[str] = []
    for m in _LINK_VALUE_RE.finditer(link or ""):
        rel = _REL_PARAM_RE.search(m.group(2))
        rels = _tokens(rel.group(1) or rel.group(2)) if rel else []
        target = m.group(1).strip(_HTML_WS)
        if not target:
            continue
        if "canonical" in rels or not PAGE_RELS.isdisjoint(rels):
            pages.append(target)
        elif not REQUISITE_RELS.isdisjoint(rels):
            requisites.append(target)
    target = refresh_target(refresh) if refresh else None
    if target is not None:
        pages.append(target)
    return pages, requisites
