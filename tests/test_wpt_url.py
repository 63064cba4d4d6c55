"""spider.urls against the web-platform-tests URL suite (the WHATWG URL Standard's urltestdata.json).

Browsers, ada and whatwg-url test against the same file (a copy with its licence is in
tests/data/wpt-url/). Each case gives an input, a base (or null) and what a browser makes of it:
an href, or a failure. The crawler must agree, with its own rules on top, which the one function
``crawler_form`` applies to the browser's href:

- a URL the browser rejects gives None (resolve) or ValueError (normalize);
- so does a result that is not http(s): the crawler follows only those;
- so does a fragment alone (``#x``) as a link: the same page, nothing new to crawl;
- otherwise the browser's href with the fragment dropped, a single trailing dot of the host dropped,
  escapes in hex uppercase with those of unreserved characters decoded (RFC 3986 6.2.2), and in
  the query empty pieces and tracking parameters dropped and the rest sorted by key (stably).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spider.urls import TRACKING_PARAMS, TRACKING_PREFIXES, normalize, resolve

DATA = Path(__file__).parent / "data" / "wpt-url" / "urltestdata.json"
CASES = [case for case in json.loads(DATA.read_text(encoding="utf-8")) if isinstance(case, dict)]

UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _escapes(text: str) -> str:
    """Hex in uppercase, unreserved characters decoded, except a hex digit that would make a new
    escape with a "%" left as written before it ("%%41" and "%4%41" stay)."""
    out = ""
    for m in re.finditer(r"%([0-9A-Fa-f]{2})|.", text, re.DOTALL):
        if m.group(1) is None:
            out += m.group(0)
            continue
        ch = chr(int(m.group(1), 16))
        new_escape = ch in "0123456789ABCDEFabcdef" and re.search(r"%[0-9A-Fa-f]?$", out)
        out += ch if ch in UNRESERVED and not new_escape else "%" + m.group(1).upper()
    return out


def _query(query: str) -> str:
    kept = []
    for piece in query.split("&"):
        key = piece.partition("=")[0]
        if piece and key.lower() not in TRACKING_PARAMS and not key.lower().startswith(TRACKING_PREFIXES):
            kept.append((key, piece))
    return "&".join(piece for _, piece in sorted(kept, key=lambda kp: kp[0]))


def crawler_form(href: str) -> str | None:
    """The crawler's rules applied to a browser's href (see the module docstring)."""
    m = re.fullmatch(r"(https?://)([^/]*@)?(\[[^\]]*\]|[^:/]*)(:[0-9]+)?(/[^?#]*)(?:\?([^#]*))?(?:#.*)?",
                     href, re.DOTALL)
    if m is None:
        return None  # not http(s)
    scheme, userinfo, host, port, path, query = m.groups()
    if port == ":0":
        return None  # crawler rule (issue 13): nothing listens on port 0, no link may knock there
    if host.endswith(".") and not host.endswith("..") and host != ".":
        host = host[:-1]
    out = scheme + _escapes(userinfo or "") + host + (port or "") + _escapes(path)
    query = _query(_escapes(query or ""))
    return out + "?" + query if query else out


def _is_fragment_alone(text: str) -> bool:
    return text.strip("".join(chr(i) for i in range(0x21))).translate({9: None, 10: None, 13: None}).startswith("#")


def _expected(case: dict) -> str | None:
    if case.get("failure"):
        return None
    if case["base"] is not None and _is_fragment_alone(case["input"]):
        return None
    return crawler_form(case["href"])


def _label(case: dict) -> str:
    return f"{case['input']!r} on {case['base']!r}"[:120]


WITH_BASE = [c for c in CASES if c["base"] is not None]
WITHOUT_BASE = [c for c in CASES if c["base"] is None]


@pytest.mark.parametrize("case", WITH_BASE, ids=_label)
def test_resolve_agrees_with_browsers(case: dict) -> None:
    assert resolve(case["base"], case["input"]) == _expected(case)


@pytest.mark.parametrize("case", WITHOUT_BASE, ids=_label)
def test_normalize_agrees_with_browsers(case: dict) -> None:
    expected = _expected(case)
    try:
        got: str | None = normalize(case["input"])
    except ValueError:
        got = None
    assert got == expected


def test_the_suite_is_the_whole_file() -> None:
    # 866 cases, 223 of them with an http(s) result, 221 the crawler keeps (2 are on port 0):
    # none may go missing.
    assert len(CASES) == 866
    assert len([c for c in CASES if _expected(c) is not None]) == 221


@pytest.mark.parametrize(
    "href, expected",
    [
        ("http://example.com/a#frag", "http://example.com/a"),
        ("http://example.com./a", "http://example.com/a"),
        ("http://u%3a:p%61ss@h/%7e/%2f?b=%41&a=1&utm_source=x&&", "http://u%3A:pass@h/~/%2F?a=1&b=A"),
        ("http://h/%%41?q=%%41", "http://h/%%41?q=%%41"),
        ("http://h/%4%41/%%7e/%41%41", "http://h/%4%41/%~/AA"),
        ("http://h/?", "http://h/"),
        ("http://[::1]:81/", "http://[::1]:81/"),
        ("http://f:0/c", None),
        ("https://h/?b=1&a=2&a=1", "https://h/?a=2&a=1&b=1"),
        ("ftp://h/", None),
        ("sc://h/", None),
        ("about:blank", None),
    ],
)
def test_crawler_form_itself(href: str, expected: str | None) -> None:
    assert crawler_form(href) == expected
