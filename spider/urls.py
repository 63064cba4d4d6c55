"""URL normalisation and resolution for the crawler (pure functions, no I/O).

Every URL the crawler stores, deduplicates or schedules goes through
:func:`normalize`, so two spellings of the same resource map to one string.
:func:`resolve` turns a raw ``href`` found in HTML into such a string (or
``None`` when the link is not something to crawl), and :func:`host_key` gives
the per-host politeness key of a normalised URL.

The WHATWG URL Standard rules: a URL is parsed as a browser parses it (by
ada, the parser Node.js uses, through the ``ada-url`` package), and the
crawler's own normalisation is applied on top.  Where RFC 3986 and the URL
Standard differ (backslashes, ``http:example.com``, IPv4 spellings, which
characters get percent-encoded, ...), the URL Standard wins: the crawler
follows what a browser would follow.  The web-platform-tests URL suite is a
test (``tests/test_wpt_url.py``).

Rules:

* Only ``http`` and ``https`` URLs are accepted; anything else, and anything
  a browser rejects, raises ``ValueError`` (and only ``ValueError``):

  >>> normalize("ftp://example.com/")
  Traceback (most recent call last):
  ...
  ValueError: unsupported scheme 'ftp' in 'ftp://example.com/'
  >>> normalize("http://256.256.256.256/")
  Traceback (most recent call last):
  ...
  ValueError: invalid host '256.256.256.256' in 'http://256.256.256.256/'

* As in browsers: leading/trailing C0 controls and spaces are stripped, TAB,
  LF and CR are removed anywhere, a backslash is a slash, and slashes after
  the scheme are optional.  The result never contains a raw TAB, CR, LF or NUL:

  >>> normalize(" http://exa\\nmple.com/a\\tb ")
  'http://example.com/ab'
  >>> normalize("http:\\\\\\\\example.com\\\\a"), normalize("https:example.com")
  ('http://example.com/a', 'https://example.com/')

* The scheme and host are lowercased; the path and query keep their case;
  IDN hosts are converted to punycode (UTS #46):

  >>> normalize("HTTP://WWW.Example.COM/Path?Q=Upper")
  'http://www.example.com/Path?Q=Upper'
  >>> normalize("http://Bücher.example/")
  'http://xn--bcher-kva.example/'

* IPv4 hosts in any form browsers accept are written as dotted decimal, and
  IPv6 hosts in their canonical (RFC 5952) form:

  >>> normalize("http://0x7f.1/"), normalize("http://[::127.0.0.1]/")
  ('http://127.0.0.1/', 'http://[::7f00:1]/')

* Default ports (80 for http, 443 for https) and an empty port are dropped;
  a port outside 1..65535 raises ``ValueError`` (port 0 cannot be connected to: it is not a
  place to knock on):

  >>> normalize("https://example.com:443/"), normalize("http://example.com:/")
  ('https://example.com/', 'http://example.com/')
  >>> normalize("http://example.com:8080/")
  'http://example.com:8080/'
  >>> normalize("http://example.com:65536/")
  Traceback (most recent call last):
  ...
  ValueError: invalid port '65536' in 'http://example.com:65536/'
  >>> normalize("http://example.com:0/")
  Traceback (most recent call last):
  ...
  ValueError: invalid port '0'

* Percent-encoding: what the URL Standard encodes is encoded, the rest is
  left as written: space, controls and non-ASCII (as UTF-8) everywhere, and
  ``"<>^`{}`` in the path, ``"<>'`` in the query; a ``%`` that starts no
  escape stays.  On top, escapes get uppercase hex and escapes of unreserved
  characters (RFC 3986 2.3: letters, digits, ``-._~``) are decoded, as RFC
  3986 6.2.2 allows (a browser sends ``%7e`` and ``~`` as written; a server
  reads both as one):

  >>> normalize("http://example.com/%7euser/%2f%3a/a+b")
  'http://example.com/~user/%2F%3A/a+b'
  >>> normalize("http://example.com/a b/ü/{x}")
  'http://example.com/a%20b/%C3%BC/%7Bx%7D'

* Dot segments are removed from the path (``%2e`` counts as a dot), and an
  empty path becomes ``/``:

  >>> normalize("http://example.com/a/./b/../c/%2E%2E/d")
  'http://example.com/a/d'
  >>> normalize("http://example.com")
  'http://example.com/'

* Crawler rules on top of the URL Standard: a single trailing dot of the host
  is dropped (``example.com.`` is ``example.com``), the fragment is dropped, and
  in the query tracking parameters (``utm_*``, ``fbclid``, ``gclid``, ...;
  case-insensitive keys) and empty pieces are removed, the remaining
  parameters are sorted by key (stable for repeated keys, values untouched),
  and an empty query is dropped:

  >>> normalize("http://example.com./page#section")
  'http://example.com/page'
  >>> normalize("http://example.com/?b=2&utm_source=x&a=1&&a=0&c&d=")
  'http://example.com/?a=1&a=0&b=2&c&d='

* Userinfo is kept and normalised like the other components:

  >>> normalize("http://User:P%61ss@Example.com/")
  'http://User:Pass@example.com/'

* :func:`normalize` is idempotent:

  >>> u = normalize("HTTP://Example.COM:80/a/../b?z=1&y=2#f")
  >>> u, normalize(u) == u
  ('http://example.com/b?y=2&z=1', True)

Resolution (:func:`resolve`) is the URL Standard's parse of ``href`` against
``base``, then the rules above; it returns ``None`` instead of raising, and
for a fragment alone (the same page):

  >>> resolve("http://a/b/c/d;p?q", "../g?y#frag")
  'http://a/b/g?y'
  >>> resolve("http://h/foo/bar", "\\\\x")  # a backslash is a slash: "/x"
  'http://h/x'
  >>> resolve("http://a/b/c/d;p?q", "mailto:someone@example.com") is None
  True
  >>> host_key(normalize("https://user@Example.com:8443/x"))
  'example.com:8443'
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from operator import itemgetter
from typing import NamedTuple

# The parser: ada (https://github.com/ada-url/ada), the WHATWG URL parser of Node.js, in C++.
# Its C API (ada_c.h) is called through the package's cffi module rather than through
# ada_url.join_url, which wraps each result in a garbage-collected object: 0.5 µs of the ~2 µs
# a link costs (bench/urls.py).
import re2 as _re2
from ada_url._ada_wrapper import ffi as _ffi
from ada_url._ada_wrapper import lib as _ada


@lru_cache(maxsize=None)
def _idna():  # type: ignore[no-untyped-def]
    """The idna package, imported on the first "xn--" label to check (~1 ms of every start
    otherwise); None without it (requests depends on it): only that check is skipped then."""
    try:
        import idna
    except ImportError:  # pragma: no cover - exercised only without the package
        return None
    return idna


__all__ = [
    "TRACKING_PARAMS",
    "TRACKING_PREFIXES",
    "host_key",
    "is_http_url",
    "normalize",
    "resolve",
]

#: Query keys dropped by :func:`normalize` (compared lowercased).  Any key
#: starting with one of :data:`TRACKING_PREFIXES` is dropped as well.
TRACKING_PARAMS: frozenset[str] = frozenset(
    {
        "utm_source",
        "utm_medium",
        "utm_campaign",
        "utm_term",
        "utm_content",
        "utm_id",
        "fbclid",
        "gclid",
        "msclkid",
        "mc_cid",
        "mc_eid",
        "_ga",
        "yclid",
    }
)
#: Key prefixes of tracking parameters (compared lowercased).
TRACKING_PREFIXES: tuple[str, ...] = ("utm_",)

_DEFAULT_PORTS: dict[str, str] = {"http": "80", "https": "443"}

# WHATWG URL parser: strip leading/trailing "C0 control or space", then
# remove all ASCII tab or newline.  This set is a superset of HTML's ASCII
# whitespace (space, TAB, LF, FF, CR), which HTML strips from href first.
_C0_OR_SPACE: str = "".join(chr(i) for i in range(0x21))
_TAB_NEWLINE: dict[int, None] = {9: None, 10: None, 13: None}

# Inputs longer than this are normalised without being cached, so a few
# pathological 100 kB URLs cannot pin megabytes in the LRU cache.
_CACHE_MAX_LEN = 2048

# URL Standard "scheme start" and "scheme" states: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":".
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")

# RFC 3986 2.3.
_UNRESERVED: frozenset[str] = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
)
_ESCAPE_RE = re.compile(r"%([0-9A-Fa-f]{2})")
_HEX_DIGITS: frozenset[str] = frozenset("0123456789ABCDEFabcdef")
# Used only to explain a refusal (see _why_invalid): the authority after "http:" and any slashes.
_AUTHORITY_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[/\\]*([^/\\?#]*)")


def _fix_escape(m: re.Match[str]) -> str:
    """RFC 3986 6.2.2.1/6.2.2.2: decode an unreserved character, else uppercase the hex.

    The URL Standard leaves a "%" that starts no escape as written ("100%"). Right after one
    ("%%41", "%4%41"), a decoded hex digit would make a new escape ("%A...", "%4A"), so there
    the escape stays. Only the two characters before an escape decide, so the rule gives the
    same result for a path joined from a base's folder and a plain relative path.
    """
    hexpair = m.group(1)
    ch = chr(int(hexpair, 16))
    if ch in _UNRESERVED:
        if ch not in _HEX_DIGITS:
            return ch
        text, i = m.string, m.start()
        if i == 0 or (text[i - 1] != "%" and (i == 1 or text[i - 2] != "%" or text[i - 1] not in _HEX_DIGITS)):
            return ch
    return "%" + hexpair.upper()


def _fix_escapes(value: str) -> str:
    """Uppercase every escape's hex and decode the unreserved ones (see :func:`_fix_escape`)."""
    return _ESCAPE_RE.sub(_fix_escape, value)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for an absolute path (always starts with "/" here).

    Used only for paths of unreserved characters (the fast path of :func:`resolve`), where it
    agrees with the URL Standard's path state: "." is dropped, ".." pops the previous segment,
    and a trailing "." or ".." leaves a trailing "/" (e.g. "/a/b/.." -> "/a/").
    """
    if "/." not in path:  # no segment can start with "."
        return path
    segments = path.split("/")
    out: list[str] = []
    last = len(segments) - 1
    for i in range(1, len(segments)):
        seg = segments[i]
        if seg == ".":
            if i == last:
                out.append("")
        elif seg == "..":
            if out:
                out.pop()
            if i == last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)


def _normalize_query(query: str) -> str:
    """Drop tracking and empty parameters, sort the rest stably by key."""
    kept: list[tuple[str, str]] = []
    for piece in query.split("&"):
        if not piece:
            continue
        key = piece.partition("=")[0]
        lowered = key.lower()
        if lowered in TRACKING_PARAMS or lowered.startswith(TRACKING_PREFIXES):
            continue
        kept.append((key, piece))
    # list.sort is stable, so repeated keys keep their relative order.
    kept.sort(key=itemgetter(0))
    return "&".join([piece for _, piece in kept])


def _check_punycode(host: str) -> None:
    """UTS #46 4.1 for "xn--" labels, which ada 4.0 lets through unchecked.

    The label must decode, to something neither empty nor all ASCII, that is already in its
    mapped NFC form ("xn--pokxncvks" decodes to circled digits, which UTS #46 maps to others).
    """
    for label in host.split("."):
        if not label.startswith("xn--"):
            continue
        try:
            decoded = label[4:].encode("ascii").decode("punycode")
        except UnicodeError:
            raise ValueError(f"invalid punycode label {label!r}") from None
        if not decoded or decoded.isascii() or unicodedata.normalize("NFC", decoded) != decoded:
            raise ValueError(f"invalid punycode label {label!r}")
        idna = _idna()
        if idna is not None:
            try:
                valid = idna.uts46_remap(decoded, std3_rules=False, transitional=False) == decoded
            except idna.IDNAError:
                valid = False
            if not valid:
                raise ValueError(f"invalid punycode label {label!r}")


def _ada_href(url: str, base: str | None = None) -> str | None:
    """The URL Standard's serialisation of ``url`` parsed against ``base``, or None."""
    try:
        data = url.encode("utf-8")
        base_data = None if base is None else base.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no URL has one
        return None
    if base_data is None:
        parsed = _ada.ada_parse(data, len(data))
    else:
        parsed = _ada.ada_parse_with_base(data, len(data), base_data, len(base_data))
    try:
        if not _ada.ada_is_valid(parsed):
            return None
        href = _ada.ada_get_href(parsed)
        return _ffi.unpack(href.data, href.length).decode("utf-8")
    finally:
        _ada.ada_free(parsed)


def _tidy(href: str) -> str:
    """The crawler's rules on top of the URL Standard, for an http(s) ``href`` from ada.

    ``href`` is ``scheme://[userinfo@]host[:port]/path[?query][#fragment]``, with "@", "/",
    "?" and "#" escaped wherever they are not these delimiters.
    """
    hash_at = href.find("#")
    if hash_at >= 0:
        href = href[:hash_at]
    start = 7 if href[4] == ":" else 8  # after "http://" or "https://"
    slash = href.index("/", start)
    authority, path = href[start:slash], href[slash:]
    if authority.endswith(":0"):  # crawler rule: no server listens on port 0, no link may knock there
        raise ValueError("invalid port '0'")
    if "%" not in href and "?" not in path and "@" not in authority and "." not in authority[-1:] \
            and ".:" not in authority and "xn--" not in authority:
        return href  # most URLs: nothing to do
    at = authority.rfind("@")
    userinfo, hostport = authority[: at + 1], authority[at + 1 :]
    if "%" in userinfo:
        userinfo = _fix_escapes(userinfo)
    if "xn--" in hostport:
        _check_punycode(hostport.partition(":")[0])
    if "." in hostport:
        host, colon, port = hostport.partition(":") if hostport[0] != "[" else (hostport, "", "")
        if host.endswith(".") and not host.endswith("..") and host != ".":
            # Crawler rule: "example.com." is the fully qualified spelling of "example.com".
            # ("a.." stays: without its dot, "0x7f.1." would read as 127.0.0.1 once normalised.)
            hostport = host[:-1] + colon + port
    path, qmark, query = path.partition("?")
    if "%" in path:
        path = _fix_escapes(path)
    out = href[:start] + userinfo + hostport + path
    if query:
        query = _normalize_query(_fix_escapes(query) if "%" in query else query)
        if query:
            out += "?" + query
    return out


def _why_invalid(url: str) -> str:
    """A short reason why the URL Standard refuses the http(s) ``url`` (for error messages)."""
    m = _AUTHORITY_RE.match(url)
    authority = m.group(1) if m else ""
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        host, _, port = hostport.partition("]")
        host, port = host + "]", port[1:]
    else:
        host, _, port = hostport.partition(":")
    if not host:
        return "empty host"
    if port and (not port.isascii() or not port.isdigit() or int(port) > 65535):
        return f"invalid port {port[:50]!r}"
    return f"invalid host {host[:200]!r}"


def _without_fragment(url: str) -> str:
    """``url`` without its fragment, which is dropped anyway: not parsing it saves ada the work
    of escaping it. The first "#" starts the fragment wherever it is (it ends the authority too);
    but what is before it stays whole if it ends in a C0 control or space, which the parser would
    strip as the end of the input ("?q #" has the query "%20q%20", "?q" has "q")."""
    at = url.find("#")
    return url[:at] if at > 0 and url[at - 1] > " " else url


def _normalize(url: str) -> str:
    """Uncached implementation of :func:`normalize`."""
    if not url.startswith(("http://", "https://")):  # (ada strips and removes the same itself)
        url = url.strip(_C0_OR_SPACE)
        if "\t" in url or "\n" in url or "\r" in url:
            url = url.translate(_TAB_NEWLINE)
        m = _SCHEME_RE.match(url)
        if m is None:
            raise ValueError(f"not an absolute URL: {url[:200]!r}")
        scheme = m.group(1).lower()
        if scheme != "http" and scheme != "https":
            raise ValueError(f"unsupported scheme {scheme!r} in {url[:200]!r}")
    href = _ada_href(_without_fragment(url))
    if href is None:
        raise ValueError(f"{_why_invalid(url)} in {url[:200]!r}")
    return _tidy(href)


# Small on purpose: menus repeat a few dozen URLs per page, and every worker holds its own copy.
_normalize_cached = lru_cache(maxsize=4096)(_normalize)


def normalize(url: str) -> str:
    """Return the canonical absolute form of an http(s) URL.

    Raises ``ValueError`` (never anything else) when ``url`` is not a usable
    http(s) URL.  See the module docstring for the rules.

    >>> normalize("HTTP://Example.com:80/a/./b/../c?utm_source=x#top")
    'http://example.com/a/c'
    """
    if type(url) is not str:
        if not isinstance(url, str):
            raise ValueError(f"URL must be a str, not {type(url).__name__}")
        url = str.__str__(url)  # str subclass: cache on a plain str
    if _is_normal(url):
        return url
    if len(url) <= _CACHE_MAX_LEN:
        return _normalize_cached(url)
    return _normalize(url)


# Already in normal form, by construction of the pattern: lowercase http(s), a lowercase host
# whose last label starts with a letter (so it is no IPv4 address in any spelling the URL
# Standard reads as one) or an IPv4 address in dotted decimal, no default or padded port, a path of unreserved characters, at most one
# query parameter of characters the URL Standard leaves as they are, nothing to encode, decode or
# drop. Most absolute links and hand-added queue lines look like this; test_urls checks the
# shortcut against the full rules.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_HOST = rf"(?:[a-z0-9_\-]{{1,63}}\.)*[a-z_\-][a-z0-9_\-]{{0,62}}|{_OCTET}(?:\.{_OCTET}){{3}}"
_PATH = r"/[A-Za-z0-9._~/\-]*"
_QUERY = r"[A-Za-z0-9._~!$()*+,;=:@/?\-]+"
_NORMAL_RE = re.compile(rf"(https?)://({_HOST})(?::([1-9][0-9]{{0,4}}))?{_PATH}(?:\?({_QUERY}))?")


def _is_normal(url: str) -> bool:
    """True when ``url`` is plainly its own normal form (no dot segment, no tracking key, ...)."""
    m = _NORMAL_RE.fullmatch(url)
    if m is None or "/." in url:
        return False
    scheme, host, port, query = m.groups()
    if "xn--" in host:  # punycode: checked by the full rules
        return False
    if port is not None and (int(port) > 65535 or port == _DEFAULT_PORTS[scheme]):
        return False
    if query is not None:
        key = query.partition("=")[0].lower()
        if key in TRACKING_PARAMS or key.startswith(TRACKING_PREFIXES):
            return False
    return True


# The shape of _NORMAL_RE for a block of lines at once, with a port of 1 to 4 digits that is not
# 80 or 443. What _is_normal looks for besides, "/.", "xn--" and a tracking key at the start of
# the query, is looked for in the whole block, lowercased (ASCII only: offsets stay). One match
# runs over a block of a thousand lines in C: ~0.4 µs a pasted line instead of ~1 (_is_normal).
_NORMAL_LINES = re.compile(rf"(?:https?://(?:{_HOST})(?::(?!(?:80|443)/)[1-9][0-9]{{0,3}})?{_PATH}"
                           rf"(?:\?{_QUERY})?\n)*", re.ASCII)
_TRACKING_AT = "|".join(re.escape(p) for p in TRACKING_PREFIXES) + "|(?:" + \
    "|".join(re.escape(k) for k in sorted(TRACKING_PARAMS)) + ")[=\n]"
_LOOKED_FURTHER = re.compile(rf"/\.|xn--|\?(?:{_TRACKING_AT})")
_LOOKED_FURTHER_ANY_CASE = re.compile(_LOOKED_FURTHER.pattern, re.IGNORECASE | re.ASCII)


class Scan:
    """A pattern over a block of ASCII text as bytes, with RE2: in time linear in the text, and
    3-4 times as fast as ``re`` over a thousand URLs (``re`` tries each character where the pattern
    has no literal to look for first). The pattern must mean the same in both (no lookaround, no
    backreference; RE2's leftmost-first matching picks what ``re`` picks); the offsets are the
    text's own, since its characters are bytes. ``re2``'s own match methods make a match object
    each; its ``Match`` entry point, where this version of the binding has it, does not."""

    __slots__ = ("pattern", "_re", "_match", "_start", "_anywhere")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        options = _re2.Options()
        options.log_errors = False
        self._re = _re2.compile(pattern, options)
        anchors = getattr(_re2, "_Anchor", None)
        self._match = getattr(getattr(self._re, "_regexp", None), "Match", None)
        if anchors is None or self._match is None:
            self._match = None
        else:
            self._start, self._anywhere = anchors.ANCHOR_START, anchors.UNANCHORED

    def end(self, data: bytes, pos: int) -> int:
        """Where the match that begins at ``pos`` ends (the pattern matches the empty string)."""
        if self._match is None:
            return self._re.match(data, pos).end()   # type: ignore[no-any-return]
        return self._match(self._start, data, pos, len(data))[0][1]   # type: ignore[no-any-return]

    def starts(self, data: bytes) -> list[int]:
        """Where the matches of a search through ``data`` begin (one after another, as ``finditer``)."""
        if self._match is None:
            return [m.start() for m in self._re.finditer(data)]
        out, match, anywhere, pos, end = [], self._match, self._anywhere, 0, len(data)
        while pos <= end:
            at, pos = match(anywhere, data, pos, end)[0]
            if at < 0:
                break
            out.append(at)
            if pos == at:   # (an empty match: the next search starts a byte further)
                pos += 1
        return out


# _NORMAL_LINES for RE2, without the lookahead: the port (1 to 4 digits) spelt out, not 80 or 443.
_PORT_NOT_DEFAULT = r"[1-9]|[1-79][0-9]|8[1-9]|[1-35-9][0-9][0-9]|4[0-35-9][0-9]|44[0-24-9]|[1-9][0-9]{3}"
_NORMAL_LINES_SCAN = Scan(rf"(?:https?://(?:{_HOST})(?::(?:{_PORT_NOT_DEFAULT}))?{_PATH}"
                          rf"(?:\?{_QUERY})?\n)*")
_LOOKED_FURTHER_SCAN = Scan(_LOOKED_FURTHER.pattern)


def normal_lines(text: str) -> list[int]:
    """Where the lines of ``text`` that may not be in normal form begin, in order.

    ``text`` is whole lines, each ending in "\\n". Every other line, without its "\\n", is its
    own :func:`normalize` (it has the shape :func:`_is_normal` vouches for: test_urls_lines checks
    both against the full rules); a line listed here may be normal too, or no URL at all.
    ASCII text (most pastes) is matched as bytes, with RE2 (``Scan``).
    """
    if text.isascii():
        return _normal_lines_ascii(text.encode("ascii"), text)
    starts = []
    end, pos = len(text), 0
    match = _NORMAL_LINES.match
    while True:
        pos = match(text, pos).end()   # (a match of no line at all is a match too)
        if pos >= end:
            break
        starts.append(pos)
        pos = text.find("\n", pos) + 1
        if not pos:
            break
    further = _LOOKED_FURTHER_ANY_CASE.finditer(text)
    more = [text.rfind("\n", 0, m.start()) + 1 for m in further]
    return sorted(set(starts + more)) if more else starts


def off_shape_lines(data: bytes, shape: "Scan", found: list[int]) -> list[int]:
    """Where the lines of ``data`` begin that ``shape`` does not match whole (``shape`` matches a
    run of lines that have it), and those holding one of the offsets ``found``: the lines a
    stretch's one-scan test leaves to be looked at one by one. In order, each once."""
    starts = []
    end, pos = len(data), 0
    match = shape.end
    while True:
        pos = match(data, pos)   # (a match of no line at all is a match too)
        if pos >= end:
            break
        starts.append(pos)
        pos = data.find(b"\n", pos) + 1
        if not pos:
            break
    if not found:
        return starts
    return sorted(set(starts).union(data.rfind(b"\n", 0, at) + 1 for at in found))


def _normal_lines_ascii(data: bytes, text: str) -> list[int]:
    """``normal_lines`` of ASCII ``text`` (``data``: the same, as bytes)."""
    return off_shape_lines(data, _NORMAL_LINES_SCAN, _LOOKED_FURTHER_SCAN.starts(data.lower()))


def is_http_url(url: str) -> bool:
    """True when :func:`normalize` accepts ``url``.

    >>> is_http_url("https://example.com"), is_http_url("mailto:a@b.c")
    (True, False)
    """
    try:
        normalize(url)
    except ValueError:
        return False
    return True


class _Base(NamedTuple):
    """A normalised http(s) base URL, split for the fast path of :func:`resolve`."""

    prefix: str  # "scheme://authority"
    path: str  # never empty, starts with "/"


def _split_base_uncached(base: str) -> _Base:
    """Normalise and split a base URL."""
    norm = normalize(base)
    path_start = norm.index("/", norm.index(":") + 3)
    return _Base(norm[:path_start], norm[path_start:].partition("?")[0])


# One page's base serves all of its ~40 hrefs, so a small cache suffices.
_split_base_cached = lru_cache(maxsize=256)(_split_base_uncached)


def _split_base(base: str) -> _Base:
    """Cached :func:`_split_base_uncached`, skipping the cache for huge URLs."""
    if len(base) <= _CACHE_MAX_LEN:
        return _split_base_cached(base)
    return _split_base_uncached(base)


_PLAIN_PATH = re.compile(r"[A-Za-z0-9._~/-]+")


def _resolve(base: str, href: str) -> str | None:
    """Implementation of :func:`resolve`; may raise ValueError."""
    # HTML strips ASCII whitespace from the attribute, the WHATWG URL parser
    # strips C0 controls and spaces and removes TAB/LF/CR anywhere.
    ref = href.strip(_C0_OR_SPACE)
    if "\t" in ref or "\n" in ref or "\r" in ref:
        ref = ref.translate(_TAB_NEWLINE)
    if ref.startswith("#"):
        return None  # same-document link: nothing new to crawl

    path = _without_fragment(ref)
    if _PLAIN_PATH.fullmatch(path) and not path.startswith("//"):
        # Most links: a relative path of unreserved characters, no scheme or query. Joined to
        # the base (normalised), the URL Standard only removes its dot segments, and the result
        # is already normal (test_urls checks this against the full rules); this skips ada and
        # the tidying for 60 % of the links of Python's documentation.
        b = _split_base(base)
        target = path if path[0] == "/" else b.path[: b.path.rfind("/") + 1] + path
        return b.prefix + _remove_dot_segments(target)
    if path.startswith(("http://", "https://")):
        return normalize(path)  # absolute: the base plays no part; normalize() has a cache

    m = _SCHEME_RE.match(ref)
    if m is not None:
        scheme = m.group(1).lower()
        if scheme != "http" and scheme != "https":
            return None  # mailto:, javascript:, tel:, data:, ftp:, ...
    ref = path
    url = _ada_href(ref, base)
    if url is None and m is not None and not _ada.ada_can_parse(*_bytes_and_length(base)):
        # The URL Standard refuses everything against a base that is no URL; a crawler can still
        # use an absolute link found there.
        url = _ada_href(ref)
    if url is None or not url.startswith(("http://", "https://")):
        return None
    return _tidy(url)


def _bytes_and_length(text: str) -> tuple[bytes, int]:
    data = text.encode("utf-8", "surrogatepass")
    return data, len(data)


def resolve(base: str, href: str) -> str | None:
    """Resolve a raw ``href`` against ``base``; return the normalised URL.

    ``href`` is parsed against ``base`` as the WHATWG URL Standard says (as a
    browser follows a link), then normalised (see the module docstring).
    Returns ``None`` (never raises) for non-http(s) results (``mailto:``,
    ``javascript:``, ``tel:``, ``data:``, ...), fragment-only references
    (``#x``), and anything a browser would refuse, including a relative
    ``href`` when ``base`` itself is no URL.

    >>> resolve("http://a/b/c/d;p?q", "g;x?y#s")
    'http://a/b/c/g;x?y'
    >>> resolve("http://a/b/c/d;p?q", "http:g"), resolve("http://a/b/c/d;p?q", "https:g")
    ('http://a/b/c/g', 'https://g/')
    >>> resolve("http://a/b/c/d;p?q", "#s") is None
    True
    """
    if not isinstance(href, str) or not isinstance(base, str):
        return None
    try:
        return _resolve(base, href)
    except ValueError:
        return None


def host_key(url: str) -> str:
    """Politeness key of a *normalised* URL: host plus non-default ``:port``.

    Pure string slicing (hot path): relies on the normalised shape
    ``scheme://[userinfo@]host[:port]/...``, so it must not be given raw URLs.

    >>> host_key("http://example.com:8080/a?b")
    'example.com:8080'
    >>> host_key("https://user:pw@[::1]/")
    '[::1]'
    """
    start = 8 if url.startswith("https://") else 7
    end = url.find("/", start)
    netloc = url[start:end] if end >= 0 else url[start:]
    at = netloc.rfind("@")
    return netloc[at + 1 :] if at >= 0 else netloc
