"""URL normalisation and resolution for the crawler (pure functions, no I/O).

Every URL the crawler stores, deduplicates or schedules goes through
:func:`normalize`, so two spellings of the same resource map to one string.
:func:`resolve` turns a raw ``href`` found in HTML into such a string (or
``None`` when the link is not something to crawl), and :func:`host_key` gives
the per-host politeness key of a normalised URL.

Normalisation rules (RFC 3986 section 6 plus crawler-specific choices):

* Only ``http`` and ``https`` URLs with a non-empty host are accepted; anything
  else raises ``ValueError`` (and only ``ValueError``):

  >>> normalize("ftp://example.com/")
  Traceback (most recent call last):
  ...
  ValueError: unsupported scheme 'ftp' in 'ftp://example.com/'
  >>> normalize("http:///path")
  Traceback (most recent call last):
  ...
  ValueError: empty host in 'http:///path'

* Leading/trailing C0 controls and spaces are stripped, and TAB, LF and CR
  are removed anywhere, as the WHATWG URL parser does.  The result therefore
  never contains a raw TAB, CR, LF or NUL:

  >>> normalize(" http://exa\\nmple.com/a\\tb ")
  'http://example.com/ab'

* The scheme and host are lowercased; the path and query keep their case:

  >>> normalize("HTTP://WWW.Example.COM/Path?Q=Upper")
  'http://www.example.com/Path?Q=Upper'

* IDN hosts are converted to punycode (UTS #46 via the ``idna`` package,
  falling back to Python's IDNA 2003 codec); one trailing dot is removed;
  hosts with characters that cannot occur in a hostname are rejected:

  >>> normalize("http://Bücher.example./")
  'http://xn--bcher-kva.example/'
  >>> normalize("http://exa mple.com/")
  Traceback (most recent call last):
  ...
  ValueError: invalid host 'exa mple.com'

* IPv6 literals stay in brackets, lowercased; IPv4 addresses are kept:

  >>> normalize("http://[2001:DB8::1]:8080/")
  'http://[2001:db8::1]:8080/'
  >>> normalize("http://192.168.0.1/")
  'http://192.168.0.1/'

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
  ValueError: invalid port '65536'
  >>> normalize("http://example.com:0/")
  Traceback (most recent call last):
  ...
  ValueError: invalid port '0'

* Percent-encoding (RFC 3986 6.2.2.1/6.2.2.2): hex digits are uppercased,
  encoded unreserved characters are decoded, reserved ones are not, and
  whatever may not appear raw (space, controls, non-ASCII as UTF-8,
  ``"<>\\^`{|}``, a ``%`` not followed by two hex digits) is encoded:

  >>> normalize("http://example.com/%7euser/%2f%3a/a+b")
  'http://example.com/~user/%2F%3A/a+b'
  >>> normalize("http://example.com/a b/ü/100%/{x}")
  'http://example.com/a%20b/%C3%BC/100%25/%7Bx%7D'

* Dot segments are removed from the path (RFC 3986 5.2.4), and an empty path
  becomes ``/``:

  >>> normalize("http://example.com/a/./b/../c/%2E%2E/d")
  'http://example.com/a/d'
  >>> normalize("http://example.com")
  'http://example.com/'

* The fragment is dropped:

  >>> normalize("http://example.com/page#section")
  'http://example.com/page'

* Query: tracking parameters (``utm_*``, ``fbclid``, ``gclid``, ...;
  case-insensitive keys) and empty pieces are removed, the remaining
  parameters are sorted by key (stable for repeated keys, values untouched),
  and an empty query is dropped:

  >>> normalize("http://example.com/?b=2&utm_source=x&a=1&&a=0&c&d=")
  'http://example.com/?a=1&a=0&b=2&c&d='
  >>> normalize("http://example.com/?UTM_Medium=email&fbclid=123")
  'http://example.com/'

* Userinfo is kept and normalised like the other components:

  >>> normalize("http://User:P%61ss@Example.com/")
  'http://User:Pass@example.com/'

* :func:`normalize` is idempotent:

  >>> u = normalize("HTTP://Example.COM:80/a/../b?z=1&y=2#f")
  >>> u, normalize(u) == u
  ('http://example.com/b?y=2&z=1', True)

Resolution (:func:`resolve`) follows RFC 3986 5.2.2 and returns ``None``
instead of raising:

  >>> resolve("http://a/b/c/d;p?q", "../g?y#frag")
  'http://a/b/g?y'
  >>> resolve("http://a/b/c/d;p?q", "mailto:someone@example.com") is None
  True
  >>> host_key(normalize("https://user@Example.com:8443/x"))
  'example.com:8443'
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from operator import itemgetter
from typing import Callable, NamedTuple
from urllib.parse import unquote

try:  # requests depends on idna, but keep working with the stdlib codec alone.
    import idna as _idna
except ImportError:  # pragma: no cover - exercised only without the package
    _idna = None  # type: ignore[assignment]

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

# RFC 3986 3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).  A
# scheme only counts when it precedes any "/", "?" or "#" (RFC 3986
# appendix B), which the character class guarantees.
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")

# RFC 3986 appendix B, minus the scheme (matched separately above).  DOTALL
# because the path may contain control characters (they get encoded).
_REST_RE = re.compile(r"(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?", re.DOTALL)

# RFC 3986 2.3.
_UNRESERVED: frozenset[str] = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
)

# Characters left raw in each component.  RFC 3986 3.3/3.4 allow unreserved,
# sub-delims, ":" and "@" (plus "/" and, in the query, "?").  "[" and "]" are
# left raw in path and query as browsers and requests do; everything else
# (space, controls, DEL, non-ASCII, '"<>\^`{|}') is percent-encoded.
_PATH_SAFE = r"A-Za-z0-9\-._~!$&'()*+,;=:@/\[\]"
_QUERY_SAFE = _PATH_SAFE + r"?"
# RFC 3986 3.2.1: userinfo = *( unreserved / pct-encoded / sub-delims / ":" ).
_USERINFO_SAFE = r"A-Za-z0-9\-._~!$&'()*+,;=:"

# Fast-path checks: a component made only of safe characters (and no "%")
# needs no re-encoding at all.
_PATH_OK_RE = re.compile(f"[{_PATH_SAFE}]*")
_QUERY_OK_RE = re.compile(f"[{_QUERY_SAFE}]*")

# Slow path: one match per percent-escape or per character needing encoding.
# A "%" not followed by two hex digits falls into the second alternative and
# becomes "%25".
_PATH_FIX_RE = re.compile(f"%([0-9A-Fa-f]{{2}})|[^{_PATH_SAFE}]")
_QUERY_FIX_RE = re.compile(f"%([0-9A-Fa-f]{{2}})|[^{_QUERY_SAFE}]")
_USERINFO_FIX_RE = re.compile(f"%([0-9A-Fa-f]{{2}})|[^{_USERINFO_SAFE}]")

# A normalised DNS-style host: LDH labels plus "_" (common in real
# subdomains), 1..63 characters each (RFC 1035 2.3.4), no empty labels.
_HOST_RE = re.compile(r"[a-z0-9_\-]{1,63}(?:\.[a-z0-9_\-]{1,63})*")
_IPV6_CHARS_RE = re.compile(r"[0-9A-Fa-f:.]+")
_PORT_RE = re.compile(r"[0-9]+")
_PCT_RE = re.compile(r"%([0-9A-Fa-f]{2})")


def _encode_char(ch: str) -> str:
    """Percent-encode one character as its UTF-8 bytes (RFC 3986 2.1, 2.5)."""
    try:
        data = ch.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogate: not a valid character
        raise ValueError(f"unencodable character {ch!r}") from None
    return "".join(f"%{b:02X}" for b in data)


def _fix_escape(m: re.Match[str]) -> str:
    """Normalise one escape or encode one character (RFC 3986 6.2.2.1/2)."""
    hexpair = m.group(1)
    if hexpair is not None:
        ch = chr(int(hexpair, 16))
        # 6.2.2.2: decode only unreserved characters; reserved ones keep
        # their escape (their meaning differs), with uppercase hex (6.2.2.1).
        return ch if ch in _UNRESERVED else "%" + hexpair.upper()
    return _encode_char(m.group(0))


def _fix_component(
    value: str, ok: Callable[[str], object] | None, fix: re.Pattern[str]
) -> str:
    """Percent-normalise ``value``, skipping the regex pass when clean."""
    if ok is not None and "%" not in value and ok(value):
        return value
    return fix.sub(_fix_escape, value)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for an absolute path (always starts with "/" here).

    Equivalent to the RFC's buffer algorithm, done with a segment stack: "."
    is dropped, ".." pops the previous segment, and a trailing "." or ".."
    leaves a trailing "/" (e.g. "/a/b/.." -> "/a/").
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


def _idna_to_ascii(host: str) -> str:
    """Convert a Unicode host to its ASCII (punycode) form, or ValueError."""
    if _idna is not None:
        try:
            return _idna.encode(host, uts46=True).decode("ascii")
        # The package may reject names browsers accept (e.g. "_" in a
        # label); any failure just means "try the other codec".
        except Exception:  # noqa: BLE001
            pass
    try:
        # Python's IDNA 2003 codec (RFC 3490 with nameprep).
        return host.encode("idna").decode("ascii")
    except Exception:  # noqa: BLE001 - the codec raises assorted errors
        raise ValueError(f"invalid international host {host!r}") from None


@lru_cache(maxsize=1024)
def _normalize_host(host: str) -> str:
    """Return the canonical form of a host (RFC 3986 3.2.2, 6.2.2.1)."""
    if _HOST_RE.fullmatch(host) and len(host) <= 253:
        return host  # already lowercase, valid and without a trailing dot
    if host.startswith("["):
        # IP literal.  IPvFuture and zone identifiers (RFC 6874) are of no
        # use to a crawler and browsers reject them too.
        inner = host[1:-1]
        if not host.endswith("]") or not _IPV6_CHARS_RE.fullmatch(inner):
            raise ValueError(f"invalid IPv6 host {host!r}")
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise ValueError(f"invalid IPv6 host {host!r}") from None
        return "[" + inner.lower() + "]"
    name = host
    if "%" in name:
        # WHATWG percent-decodes the host before IDNA; an invalid escape or
        # invalid UTF-8 makes it unusable.
        if "%" in _PCT_RE.sub("", name):
            raise ValueError(f"invalid host {host!r}")
        try:
            name = unquote(name, errors="strict")
        except UnicodeError:
            raise ValueError(f"invalid host {host!r}") from None
    if not name.isascii():
        name = _idna_to_ascii(name)
    name = name.lower()
    if name.endswith("."):
        # "example.com." is the fully qualified spelling of "example.com".
        name = name[:-1]
    if not name:
        raise ValueError(f"empty host in {host!r}")
    if len(name) > 253 or not _HOST_RE.fullmatch(name):
        raise ValueError(f"invalid host {host!r}")
    return name


def _normalize_port(port: str, scheme: str) -> str:
    """Return "" for no/default port, else the port without leading zeros."""
    if not port:
        return ""  # RFC 3986 6.2.3: "http://a:/" is "http://a/"
    if not _PORT_RE.fullmatch(port):
        raise ValueError(f"invalid port {port!r}")
    digits = port.lstrip("0") or "0"
    if len(digits) > 5 or not 0 < int(digits) <= 65535:
        raise ValueError(f"invalid port {port!r}")
    return "" if digits == _DEFAULT_PORTS[scheme] else digits


def _normalize_userinfo(userinfo: str) -> str:
    """Normalise userinfo like WHATWG: "user[:password]", empty parts dropped."""
    user, colon, password = userinfo.partition(":")
    user = _USERINFO_FIX_RE.sub(_fix_escape, user)
    password = _USERINFO_FIX_RE.sub(_fix_escape, password)
    if password:
        return user + ":" + password + "@"
    return user + "@" if user else ""


def _normalize(url: str) -> str:
    """Uncached implementation of :func:`normalize`."""
    url = url.strip(_C0_OR_SPACE)
    if "\t" in url or "\n" in url or "\r" in url:
        url = url.translate(_TAB_NEWLINE)
    m = _SCHEME_RE.match(url)
    if m is None:
        raise ValueError(f"not an absolute URL: {url[:200]!r}")
    scheme = m.group(1).lower()
    if scheme != "http" and scheme != "https":
        raise ValueError(f"unsupported scheme {scheme!r} in {url[:200]!r}")
    rest = _REST_RE.match(url, m.end())
    assert rest is not None  # every part of the pattern is optional
    authority, path, query = rest.groups()
    if authority is None:
        raise ValueError(f"no host in {url[:200]!r}")

    # Authority (RFC 3986 3.2): the last "@" ends the userinfo, as in WHATWG.
    userinfo = ""
    if "@" in authority:
        raw_userinfo, _, authority = authority.rpartition("@")
        userinfo = _normalize_userinfo(raw_userinfo)
    if authority.startswith("["):
        end = authority.find("]") + 1
        if end == 0:
            raise ValueError(f"invalid IPv6 host in {url[:200]!r}")
        host, port = authority[:end], authority[end:]
        if port and port[0] != ":":
            raise ValueError(f"invalid authority in {url[:200]!r}")
        port = port[1:]
    else:
        host, _, port = authority.partition(":")
    if not host:
        raise ValueError(f"empty host in {url[:200]!r}")
    if len(host) > 2048:  # far beyond any valid name; don't cache it
        raise ValueError(f"host too long in {url[:200]!r}")
    host = _normalize_host(host)
    port = _normalize_port(port, scheme)

    # Path: percent-normalise first, so "%2E%2E" is decoded to ".." and then
    # removed; the opposite order would not be idempotent.
    if path:
        path = _remove_dot_segments(
            _fix_component(path, _PATH_OK_RE.fullmatch, _PATH_FIX_RE)
        )
    else:
        path = "/"  # RFC 3986 6.2.3

    # Query: percent-normalise before splitting; "&" and "=" are reserved,
    # so an encoded "%26"/"%3D" stays encoded and cannot change the split.
    if query:
        query = _normalize_query(
            _fix_component(query, _QUERY_OK_RE.fullmatch, _QUERY_FIX_RE)
        )

    out = scheme + "://" + userinfo + host
    if port:
        out += ":" + port
    out += path
    if query:
        out += "?" + query
    return out


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


# Already in normal form, by construction of the pattern: lowercase http(s), a valid lowercase
# host, no default or padded port, a path of unreserved characters, at most one query parameter
# of plain characters, nothing to encode, decode or drop. Most absolute links and hand-added
# queue lines look like this; test_urls checks the shortcut against the full rules.
_NORMAL_RE = re.compile(r"(https?)://([a-z0-9_\-]{1,63}(?:\.[a-z0-9_\-]{1,63})*)(?::([1-9][0-9]{0,4}))?"
                        r"/[A-Za-z0-9._~/\-]*(?:\?([A-Za-z0-9._~!$'()*+,;=:@/?\-]+))?")


def _is_normal(url: str) -> bool:
    """True when ``url`` is plainly its own normal form (no dot segment, no tracking key, ...)."""
    m = _NORMAL_RE.fullmatch(url)
    if m is None or "/." in url:
        return False
    scheme, host, port, query = m.groups()
    if len(host) > 253 or (port is not None and (int(port) > 65535 or port == _DEFAULT_PORTS[scheme])):
        return False
    if query is not None:
        key = query.partition("=")[0].lower()
        if key in TRACKING_PARAMS or key.startswith(TRACKING_PREFIXES):
            return False
    return True


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
    """A normalised base URL split for RFC 3986 5.2.2."""

    scheme: str
    prefix: str  # "scheme://authority"
    path: str  # never empty, starts with "/"
    query: str | None


def _split_base_uncached(base: str) -> _Base:
    """Normalise and split a base URL for RFC 3986 5.2.2."""
    norm = normalize(base)
    scheme_end = norm.index(":")
    path_start = norm.index("/", scheme_end + 3)
    rest = norm[path_start:]
    path, qmark, query = rest.partition("?")
    return _Base(norm[:scheme_end], norm[:path_start], path, query if qmark else None)


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

    m = _SCHEME_RE.match(ref)
    if m is not None:
        scheme = m.group(1).lower()
        if scheme != "http" and scheme != "https":
            return None  # mailto:, javascript:, tel:, data:, ftp:, ...
        rest = ref[m.end():]
        if rest.startswith("//"):
            return normalize(ref)  # absolute URL: the base is irrelevant
        # RFC 3986 5.4.2 / 5.2.2 non-strict: a scheme equal to the base's is
        # ignored, so "http:g" is the relative reference "g" (browsers agree).
        # With a different scheme there is no host: normalize() rejects it.
        if scheme != _split_base(base).scheme:
            return normalize(ref)
        ref = rest

    b = _split_base(base)
    if ref.startswith("//"):
        # Network-path reference (RFC 3986 4.2): takes the base's scheme.
        return normalize(b.scheme + ":" + ref)

    # The fragment never matters (normalize drops it); cut it first so a "?"
    # inside it is not mistaken for a query.
    ref = ref.partition("#")[0]
    path, qmark, query = ref.partition("?")
    # RFC 3986 5.2.2 "Transform References", with the base known to have an
    # authority and a non-empty absolute path.  Dot segments are removed by
    # normalize(), which applies 5.2.4 to the whole merged path.
    if not path:
        target = b.path
        if qmark:
            target += "?" + query
        elif b.query is not None:
            target += "?" + b.query
    elif path.startswith("/"):
        target = ref
    else:
        # 5.2.3 merge: base path up to and including its last "/".
        target = b.path[: b.path.rfind("/") + 1] + ref
    if not qmark and _PLAIN_PATH.fullmatch(path) and "//" not in path:
        # Most links: a path of unreserved characters and no query. Joined to the base (already
        # normalised), its normal form needs only the dot segments removed (test_urls checks
        # this against normalize); skipping the second parse halves the cost of a page's links.
        return b.prefix + _remove_dot_segments(target)
    return normalize(b.prefix + target)


def resolve(base: str, href: str) -> str | None:
    """Resolve a raw ``href`` against ``base``; return the normalised URL.

    Returns ``None`` (never raises) for non-http(s) schemes (``mailto:``,
    ``javascript:``, ``tel:``, ``data:``, ...), fragment-only references
    (``#x``), and anything that cannot be resolved to a valid http(s) URL,
    including when ``base`` itself is unusable and ``href`` is relative.

    >>> resolve("http://a/b/c/d;p?q", "g;x?y#s")
    'http://a/b/c/g;x?y'
    >>> resolve("http://a/b/c/d;p?q", "http:g")
    'http://a/b/c/g'
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
