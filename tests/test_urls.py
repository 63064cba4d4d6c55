"""Tests for spider.urls: RFC 3986 tables, per-rule tables, properties.

The WHATWG URL Standard rules where it and RFC 3986 differ (the whole web-platform-tests suite
is tests/test_wpt_url.py); the cases here that changed with it say "URL Standard".
"""

from __future__ import annotations

import doctest
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spider.urls
from spider.urls import (
    TRACKING_PARAMS,
    TRACKING_PREFIXES,
    host_key,
    is_http_url,
    normalize,
    resolve,
)

RFC_BASE = "http://a/b/c/d;p?q"

# ---------------------------------------------------------------------------
# RFC 3986 5.4: reference resolution examples (base http://a/b/c/d;p?q).
# Values are the RFC's results; the test compares against normalize(result).
# ---------------------------------------------------------------------------

RFC_NORMAL = [  # 5.4.1
    ("g:h", None),  # RFC: "g:h" -- not http(s), so not crawlable
    ("g", "http://a/b/c/g"),
    ("./g", "http://a/b/c/g"),
    ("g/", "http://a/b/c/g/"),
    ("/g", "http://a/g"),
    ("//g", "http://g"),
    ("?y", "http://a/b/c/d;p?y"),
    ("g?y", "http://a/b/c/g?y"),
    ("#s", None),  # RFC: "http://a/b/c/d;p?q#s" -- fragment-only -> None
    ("g#s", "http://a/b/c/g#s"),
    ("g?y#s", "http://a/b/c/g?y#s"),
    (";x", "http://a/b/c/;x"),
    ("g;x", "http://a/b/c/g;x"),
    ("g;x?y#s", "http://a/b/c/g;x?y#s"),
    ("", "http://a/b/c/d;p?q"),
    (".", "http://a/b/c/"),
    ("./", "http://a/b/c/"),
    ("..", "http://a/b/"),
    ("../", "http://a/b/"),
    ("../g", "http://a/b/g"),
    ("../..", "http://a/"),
    ("../../", "http://a/"),
    ("../../g", "http://a/g"),
]

RFC_ABNORMAL = [  # 5.4.2
    ("../../../g", "http://a/g"),
    ("../../../../g", "http://a/g"),
    ("/./g", "http://a/g"),
    ("/../g", "http://a/g"),
    ("g.", "http://a/b/c/g."),
    (".g", "http://a/b/c/.g"),
    ("g..", "http://a/b/c/g.."),
    ("..g", "http://a/b/c/..g"),
    ("./../g", "http://a/b/g"),
    ("./g/.", "http://a/b/c/g/"),
    ("g/./h", "http://a/b/c/g/h"),
    ("g/../h", "http://a/b/c/h"),
    ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
    ("g;x=1/../y", "http://a/b/c/y"),
    ("g?y/./x", "http://a/b/c/g?y/./x"),
    ("g?y/../x", "http://a/b/c/g?y/../x"),
    ("g#s/./x", "http://a/b/c/g#s/./x"),
    ("g#s/../x", "http://a/b/c/g#s/../x"),
    # Strict parsers give "http:g"; we take the backward-compatible reading.
    ("http:g", "http://a/b/c/g"),
]


@pytest.mark.parametrize("href, rfc_result", RFC_NORMAL + RFC_ABNORMAL)
def test_rfc3986_section_5_4_examples(href: str, rfc_result: str | None) -> None:
    expected = None if rfc_result is None else normalize(rfc_result)
    assert resolve(RFC_BASE, href) == expected


@pytest.mark.parametrize(
    "href, expected",
    [
        ("g#s", "http://a/b/c/g"),
        ("g#s/../x", "http://a/b/c/g"),
        ("//g", "http://g/"),
        ("", "http://a/b/c/d;p?q"),
        ("http:g", "http://a/b/c/g"),
        ("HTTP:g", "http://a/b/c/g"),
        ("http:", "http://a/b/c/d;p?q"),
        ("http:/g", "http://a/g"),
        ("http:?y", "http://a/b/c/d;p?y"),
        ("g?y/../x", "http://a/b/c/g?y/../x"),
    ],
)
def test_rfc_examples_literal_results(href: str, expected: str) -> None:
    # The same cases spelled out, so a bug in normalize() cannot hide one in
    # resolve() by changing both sides of the table comparison above.
    assert resolve(RFC_BASE, href) == expected


def test_scheme_other_than_base_starts_an_authority() -> None:
    # URL Standard: "https:g" against an http base is "https://g/" (RFC 3986: a URI with no host).
    assert resolve(RFC_BASE, "https:g") == "https://g/"
    assert resolve("https://a/b", "http:g") == "http://g/"
    assert resolve("http://a/b", "https:example.com/") == "https://example.com/"
    assert resolve("https://a/b/c", "https:g") == "https://a/b/g"  # same scheme: relative


# ---------------------------------------------------------------------------
# RFC 3986 6.2.2 / 6.2.3: syntax- and scheme-based normalisation.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variants, expected",
    [
        # 6.2.2.1 case normalisation
        (["HTTP://www.EXAMPLE.com/", "http://www.example.com/"], "http://www.example.com/"),
        (["http://a/%3a%2f", "http://a/%3A%2F"], "http://a/%3A%2F"),
        # 6.2.2.2 percent-encoding normalisation
        (["http://example.com/%7Esmith/home.html", "http://example.com/~smith/home.html"],
         "http://example.com/~smith/home.html"),
        (["http://a/%41%62%2D%2e%5F%7e%30"], "http://a/Ab-._~0"),
        # 6.2.2.3 path segment normalisation (the RFC's example with http)
        (["http://a/./b/../b/%63/%7bfoo%7d", "HTTP://A/b/c/%7Bfoo%7D"], "http://a/b/c/%7Bfoo%7D"),
        # 6.2.3 scheme-based normalisation
        (
            [
                "http://example.com",
                "http://example.com/",
                "http://example.com:/",
                "http://example.com:80/",
                "HTTP://EXAMPLE.COM:80",
            ],
            "http://example.com/",
        ),
    ],
)
def test_rfc3986_section_6_examples(variants: list[str], expected: str) -> None:
    for variant in variants:
        assert normalize(variant) == expected, variant


def test_path_and_query_case_is_preserved() -> None:
    assert normalize("http://A.COM/Path/FILE.html?Key=Value") == "http://a.com/Path/FILE.html?Key=Value"


# ---------------------------------------------------------------------------
# Per-rule tables.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://a/?utm_source=x", "http://a/"),
        ("http://a/?utm_anything_at_all=1&x=1", "http://a/?x=1"),
        ("http://a/?UTM_Source=x&Utm_Medium=y&x=1", "http://a/?x=1"),
        ("http://a/?fbclid=1&gclid=2&msclkid=3&mc_cid=4&mc_eid=5&_ga=6&yclid=7&k=v", "http://a/?k=v"),
        ("http://a/?FBCLID=1&k=v", "http://a/?k=v"),
        ("http://a/?utm%5Fsource=1&k=v", "http://a/?k=v"),  # %5F is "_" (unreserved)
        ("http://a/?utm=1", "http://a/?utm=1"),  # no underscore: not a tracking key
        ("http://a/?xutm_source=1", "http://a/?xutm_source=1"),
        ("http://a/?ga=1&_gac=2", "http://a/?_gac=2&ga=1"),
        ("http://a/?fbclid", "http://a/"),  # key without value is still a key
        ("http://a/?gclid=", "http://a/"),
    ],
)
def test_tracking_parameters_are_stripped(url: str, expected: str) -> None:
    assert normalize(url) == expected


def test_tracking_constants() -> None:
    assert isinstance(TRACKING_PARAMS, frozenset)
    for key in ("fbclid", "gclid", "msclkid", "mc_cid", "mc_eid", "_ga", "yclid"):
        assert key in TRACKING_PARAMS
    assert all(k == k.lower() for k in TRACKING_PARAMS)
    assert "utm_" in TRACKING_PREFIXES


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://a/?b=2&a=1&a=0", "http://a/?a=1&a=0&b=2"),
        ("http://a/?a=3&b=1&a=1&a=2", "http://a/?a=3&a=1&a=2&b=1"),
        ("http://a/?z&y=&x=1", "http://a/?x=1&y=&z"),
        ("http://a/?a=1&&b=2", "http://a/?a=1&b=2"),
        ("http://a/?&&&", "http://a/"),
        ("http://a/?", "http://a/"),
        ("http://a/b?#frag", "http://a/b"),
        ("http://a/?a=&a&a=1", "http://a/?a=&a&a=1"),  # blank values kept as written
        ("http://a/?q=a+b&p=%2B", "http://a/?p=%2B&q=a+b"),  # "+" and %2B untouched
        ("http://a/?x=%26&y=%3D", "http://a/?x=%26&y=%3D"),  # encoded & and = stay
        ("http://a/?B=1&a=2", "http://a/?B=1&a=2"),  # keys compare case-sensitively
        ("http://a/?=v&a=1", "http://a/?=v&a=1"),  # empty key is not an empty piece
        ("http://a/?k=a=b", "http://a/?k=a=b"),
        ("http://a/?q=/path?x", "http://a/?q=/path?x"),
    ],
)
def test_query_normalisation(url: str, expected: str) -> None:
    assert normalize(url) == expected


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://bücher.example/", "http://xn--bcher-kva.example/"),
        ("http://BÜCHER.example/", "http://xn--bcher-kva.example/"),
        ("http://b%C3%BCcher.example/", "http://xn--bcher-kva.example/"),
        ("http://XN--BCHER-KVA.example/", "http://xn--bcher-kva.example/"),
        ("http://例え.テスト/", "http://xn--r8jz45g.xn--zckzah/"),
        ("http://ＥＸＡＭＰＬＥ。com/", "http://example.com/"),  # UTS 46 mapping
        ("http://foo_bar.bücher.de/", "http://foo_bar.xn--bcher-kva.de/"),
        ("http://example.com./", "http://example.com/"),
        ("http://Example.COM./x", "http://example.com/x"),
        ("http://bücher.example./", "http://xn--bcher-kva.example/"),
        ("http://%41.com/", "http://a.com/"),
        ("http://my_host.example/", "http://my_host.example/"),
        ("http://192.168.0.1/", "http://192.168.0.1/"),
        ("http://192.168.0.1:8080/", "http://192.168.0.1:8080/"),
        ("http://[::1]/", "http://[::1]/"),
        ("http://[2001:DB8::A]/", "http://[2001:db8::a]/"),
        ("http://[2001:db8::a]:80/", "http://[2001:db8::a]/"),
        # URL Standard: IPv6 in canonical form (RFC 5952), IPv4 in any form a browser reads.
        ("https://[::FFFF:192.0.2.1]:8443/x", "https://[::ffff:c000:201]:8443/x"),
        ("http://[::127.0.0.1]/", "http://[::7f00:1]/"),
        ("http://[0:0:0:0:0:0:0:1]/", "http://[::1]/"),
        ("http://[2001:db8:0:0:1:0:0:1]/", "http://[2001:db8::1:0:0:1]/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://192.168.257/", "http://192.168.1.1/"),
        ("http://0xffffffff/", "http://255.255.255.255/"),
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://0177.0.0.1/", "http://127.0.0.1/"),
        ("http://1.2.3.4./", "http://1.2.3.4/"),
        # URL Standard: hosts a browser takes although no DNS name is spelled so.
        ("http://a..b/", "http://a..b/"),
        ("http://.a/", "http://.a/"),
        ("http://a.b../", "http://a.b../"),  # two dots: only a single trailing dot is dropped
        ("http://./", "http://./"),
        ("http://" + "a" * 64 + ".com/", "http://" + "a" * 64 + ".com/"),
        ("http://a\\b/", "http://a/b/"),  # a backslash ends the host
    ],
)
def test_hosts(url: str, expected: str) -> None:
    assert normalize(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://exa mple.com/",
        "http://<a>/",
        "http://a>b/",
        "http://a|b/",
        "http://a^b/",
        "http://a%20b/",
        "http://a%zzb/",
        "http://a%FF/",  # not UTF-8
        "http://a%2Fb/",  # decodes to "/"
        "http://1.2.3.08/",  # URL Standard: browsers refuse these IPv4 spellings
        "http://256.256.256.256/",
        "http://1.2.3.4.5/",
        "http://0x100000000/",
        "http://a.b.c.xn--pokxncvks/",  # not punycode of a valid label
        "http://xn--/",
        "http://[::1/",
        "http://[::1]x/",
        "http://[zz::1]/",
        "http://[1:2:3]/",
        "http://[v1.fe]/",
        "http://[fe80::1%25eth0]/",
        "http://::1/",
        "http://xn--a.\u0000/",
    ],
)
def test_bad_hosts_raise_value_error(url: str) -> None:
    with pytest.raises(ValueError):
        normalize(url)


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://a:80/", "http://a/"),
        ("https://a:443/", "https://a/"),
        ("http://a:443/", "http://a:443/"),
        ("https://a:80/", "https://a:80/"),
        ("http://a:/", "http://a/"),
        ("http://a:8080", "http://a:8080/"),
        ("http://a:0080/", "http://a/"),
        ("http://a:08080/", "http://a:8080/"),
        ("http://a:65535/", "http://a:65535/"),
    ],
)
def test_ports(url: str, expected: str) -> None:
    assert normalize(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://a:65536/",
        "http://a:0/",     # port 0 cannot be connected to: a link to it is invalid
        "http://a:000/",
        "http://[::1]:0/",
        "http://a:99999999999999999999999/",
        "http://a:-1/",
        "http://a:+80/",
        "http://a:8o/",
        "http://a:８０/",  # non-ASCII digits
        "http://a:80:80/",
        "http://a: 80/",
        "http://a:" + "9" * 5000 + "/",
    ],
)
def test_bad_ports_raise_value_error(url: str) -> None:
    with pytest.raises(ValueError):
        normalize(url)


@pytest.mark.parametrize(
    "url, expected",
    [
        # URL Standard: a "%" that starts no escape stays as written (and no hex digit is
        # decoded right after it: "%%41" is not "%A")
        ("http://a/100%", "http://a/100%"),
        ("http://a/%", "http://a/%"),
        ("http://a/%4", "http://a/%4"),
        ("http://a/%zz", "http://a/%zz"),
        ("http://a/%%41", "http://a/%%41"),
        ("http://a/%%7e%2f", "http://a/%~%2F"),
        ("http://a/%4%41%42", "http://a/%4%41B"),
        ("http://a/?q=%", "http://a/?q=%"),
        ("http://a/%2f%2F%3f%23%25", "http://a/%2F%2F%3F%23%25"),
        ("http://a/%e2%82%ac", "http://a/%E2%82%AC"),
        ("http://a/€", "http://a/%E2%82%AC"),
        ("http://a/ü?ü=ü", "http://a/%C3%BC?%C3%BC=%C3%BC"),
        ("http://a/a b", "http://a/a%20b"),
        ("http://a/?q=a b", "http://a/?q=a%20b"),
        # URL Standard: the path encodes "<>^`{} (a backslash is a slash), "|" stays; the
        # query encodes "<>' only
        ("http://a/\"<>^`{|}", "http://a/%22%3C%3E%5E%60%7B|%7D"),
        ("http://a/?q=\"<>\\^`{|}'", "http://a/?q=%22%3C%3E\\^`{|}%27"),
        ("http://a/x\x00y\x01z\x7f", "http://a/x%00y%01z%7F"),
        ("http://a/x\x0by\x0cz", "http://a/x%0By%0Cz"),
        ("http://a/[x]?a[]=1", "http://a/[x]?a[]=1"),
        ("http://a/!$&'()*+,;=:@", "http://a/!$&'()*+,;=:@"),
        ("http://a/%2E%2e/x", "http://a/x"),
        ("http://a/b/%2E/c", "http://a/b/c"),
        ("http://a/%2E%2Ex", "http://a/..x"),
    ],
)
def test_percent_encoding(url: str, expected: str) -> None:
    assert normalize(url) == expected


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://a/b/c/./../../g", "http://a/g"),
        ("http://a/mid/content=5/../6", "http://a/mid/6"),  # RFC 3986 5.2.4
        ("http://a/a/b/..", "http://a/a/"),
        ("http://a/a/b/.", "http://a/a/b/"),
        ("http://a/..", "http://a/"),
        ("http://a/../../..", "http://a/"),
        ("http://a//b//../c", "http://a//b/c"),
        ("http://a/.well-known/x", "http://a/.well-known/x"),
        ("http://a/b?x=/../y", "http://a/b?x=/../y"),  # query untouched
    ],
)
def test_dot_segments(url: str, expected: str) -> None:
    assert normalize(url) == expected


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://user:pass@Example.com/", "http://user:pass@example.com/"),
        ("http://USER@a/", "http://USER@a/"),
        ("http://u%3a:p%61ss@a/", "http://u%3A:pass@a/"),
        ("http://a@b@c/", "http://a%40b@c/"),
        ("http://u:p:q@a/", "http://u:p%3Aq@a/"),  # URL Standard: the password's ":" escaped
        ("http://u:@a/", "http://u@a/"),
        ("http://@a/", "http://a/"),
        ("http://:@a/", "http://a/"),
        ("http://u s:p ü@a/", "http://u%20s:p%20%C3%BC@a/"),
    ],
)
def test_userinfo(url: str, expected: str) -> None:
    assert normalize(url) == expected


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://a/b#frag", "http://a/b"),
        ("http://a/b?c#frag?d", "http://a/b?c"),
        ("http://a#", "http://a/"),
        ("  http://a/b  ", "http://a/b"),
        ("\x00\x1fhttp://a/b\x0c\x00", "http://a/b"),
        ("http://a/b\tc\nd\re", "http://a/bcde"),
        ("ht\ttp://ex\nample.com/", "http://example.com/"),
        ("https://EXAMPLE.com", "https://example.com/"),
        ("http://a?x=1", "http://a/?x=1"),
    ],
)
def test_misc_normalisation(url: str, expected: str) -> None:
    assert normalize(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "example.com",
        "/just/a/path",
        "//example.com/",
        "ftp://example.com/",
        "mailto:someone@example.com",
        "javascript:alert(1)",
        "tel:+123456",
        "data:text/plain,hi",
        "file:///etc/passwd",
        "http:",
        "http://",
        "http://:80/",
        "http://@/",
        "http\\://a/",
        "1http://a/",
    ],
)
def test_unusable_urls_raise_value_error(url: str) -> None:
    with pytest.raises(ValueError):
        normalize(url)
    assert is_http_url(url) is False


@pytest.mark.parametrize(
    "url, expected",
    [
        # URL Standard: slashes after "http:" are optional and a backslash is a slash
        ("http:/a", "http://a/"),
        ("http:a", "http://a/"),
        ("http:///a", "http://a/"),
        ("http:\\\\a\\b", "http://a/b"),
        ("http://example.com\\\\foo\\\\bar", "http://example.com//foo//bar"),
    ],
)
def test_urls_browsers_take_although_rfc_3986_does_not(url: str, expected: str) -> None:
    assert normalize(url) == expected


def test_messages_name_what_is_wrong() -> None:
    for url, message in [("http://a:65536/", "invalid port '65536'"), ("http://:80/", "empty host"),
                         ("http://256.256.256.256/", "invalid host '256.256.256.256'"),
                         ("garbage", "not an absolute URL: 'garbage'"), ("ftp://a/", "unsupported scheme 'ftp'")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            normalize(url)


@pytest.mark.parametrize("bad", [None, 42, b"http://a/", ["http://a/"]])
def test_non_str_input_raises_value_error(bad: object) -> None:
    with pytest.raises(ValueError):
        normalize(bad)  # type: ignore[arg-type]
    assert resolve("http://a/", bad) is None  # type: ignore[arg-type]
    assert resolve(bad, "g") is None  # type: ignore[arg-type]


def test_is_http_url() -> None:
    assert is_http_url("http://a") is True
    assert is_http_url("HTTPS://a/b") is True
    assert is_http_url("ftp://a/") is False
    assert is_http_url("http://a:99999/") is False


# ---------------------------------------------------------------------------
# resolve(): non-crawlable links, whitespace, bases.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "href",
    [
        "mailto:someone@example.com",
        "MAILTO:x@y",
        "javascript:void(0)",
        " javascript:alert(1)",
        "java\nscript:alert(1)",  # LF removed first, as browsers do
        "tel:+1-555-0100",
        "data:text/html,<p>hi</p>",
        "ftp://example.com/file",
        "file:///etc/passwd",
        "about:blank",
        "g:h",
        "#",
        "#top",
        "  #top  ",
        "http://",
        "//",
        "http://exa mple.com/",
        "http://a:99999/",
        "//[::1/",
    ],
)
def test_resolve_returns_none(href: str) -> None:
    assert resolve("http://example.com/dir/page.html", href) is None


@pytest.mark.parametrize(
    "href, expected",
    [
        ("  ../x  ", "http://example.com/x"),
        ("\t\n ./x\r\n", "http://example.com/dir/x"),
        ("/a\tb\nc\rd", "http://example.com/abcd"),
        ("\x0c/x\x0c", "http://example.com/x"),  # FF is HTML whitespace
        ("ht\ntp://other.org/", "http://other.org/"),
        ("x y", "http://example.com/dir/x%20y"),
        ("ü", "http://example.com/dir/%C3%BC"),
        ("?utm_source=x", "http://example.com/dir/page.html"),
        ("?", "http://example.com/dir/page.html"),
        ("//other.org/p?b=1&a=2", "http://other.org/p?a=2&b=1"),
        ("//OTHER.org:80", "http://other.org/"),
        ("https://other.org/x#y", "https://other.org/x"),
        ("HTTPS://Other.org", "https://other.org/"),
        ("http://other.org", "http://other.org/"),
        ("1abc:x", "http://example.com/dir/1abc:x"),  # not a valid scheme
        ("a b:c", "http://example.com/dir/a%20b:c"),
        ("%2E%2E/x", "http://example.com/x"),
        # URL Standard: a backslash is a slash; slashes after a scheme are optional
        ("\\x", "http://example.com/x"),
        ("..\\x", "http://example.com/x"),
        ("http:\\\\foo.com\\", "http://foo.com/"),
        ("http://other.org\\\\foo\\\\bar", "http://other.org//foo//bar"),
        ("///test", "http://test/"),
        ("https:no-host", "https://no-host/"),
        ("http:///path", "http://path/"),
    ],
)
def test_resolve_table(href: str, expected: str) -> None:
    assert resolve("http://example.com/dir/page.html", href) == expected


def test_resolve_scheme_relative_uses_base_scheme() -> None:
    assert resolve("https://a/b", "//c/d") == "https://c/d"
    assert resolve("http://a/b", "//c/d") == "http://c/d"


def test_a_bare_percent_in_the_base_changes_nothing_in_its_folder() -> None:
    # "%7e" is "~" in the folder whatever the page's own name holds ("x%": a bare "%")
    assert resolve("http://h/%7e/x%", "y") == "http://h/~/y" == normalize("http://h/%7e/y")


@pytest.mark.parametrize(
    "base, href, expected",
    [
        # <base href="http://h/dir/"> vs <base href="http://h/dir">
        ("http://h/dir/", "page", "http://h/dir/page"),
        ("http://h/dir", "page", "http://h/page"),
        ("http://h/dir/", "../page", "http://h/page"),
        ("http://h/dir", "../page", "http://h/page"),
        ("http://h/dir/", "", "http://h/dir/"),
        ("http://h/dir", "?q=1", "http://h/dir?q=1"),
        ("http://h", "page", "http://h/page"),  # empty base path: "/" + ref
        ("http://h", "", "http://h/"),
        # base is normalised first (fragment, case, port, tracking params)
        ("HTTP://H:80/a/b#frag", "c", "http://h/a/c"),
        ("http://h/a?utm_source=x&k=1", "", "http://h/a?k=1"),
        ("http://h/a?k=1", "#x", None),
        ("http://h/a/./b/../c", "d", "http://h/a/d"),
        ("http://u:p@h:8080/a/b", "c", "http://u:p@h:8080/a/c"),
        ("http://[::1]:81/a", "b", "http://[::1]:81/b"),
    ],
)
def test_resolve_against_base_like_urls(base: str, href: str, expected: str | None) -> None:
    assert resolve(base, href) == expected


@pytest.mark.parametrize("base", ["", "not a url", "mailto:x@y", "ftp://h/", "http://"])
def test_resolve_with_unusable_base(base: str) -> None:
    assert resolve(base, "relative/path") is None
    assert resolve(base, "?q") is None
    # An absolute http(s) href does not need the base.
    assert resolve(base, "http://ok.example/x") == "http://ok.example/x"


# ---------------------------------------------------------------------------
# host_key()
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://example.com/", "example.com"),
        ("https://example.com/a/b?c=d", "example.com"),
        ("http://example.com:8080/", "example.com:8080"),
        ("https://user:pw@example.com:8443/", "example.com:8443"),
        ("http://a%40b@example.com/", "example.com"),
        ("http://[::1]:81/", "[::1]:81"),
        ("https://[2001:db8::1]/", "[2001:db8::1]"),
        ("http://example.com", "example.com"),  # tolerated without path
    ],
)
def test_host_key(url: str, expected: str) -> None:
    assert host_key(url) == expected


def test_host_key_matches_normalised_authority() -> None:
    assert host_key(normalize("HTTP://User@Example.COM:80/x")) == "example.com"
    assert host_key(normalize("https://Example.COM:80/x")) == "example.com:80"


def test_host_key_is_fast() -> None:
    url = "https://www.example.com/articles/2024/some-article-title?page=2"
    n = 20000
    start = time.perf_counter()
    for _ in range(n):
        host_key(url)
    per_call = (time.perf_counter() - start) / n
    assert per_call < 5e-6  # generous: measured ~0.2 µs


# ---------------------------------------------------------------------------
# Robustness: long inputs, output invariants.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://a/" + "x" * 100_000,
        "http://a/" + "%" * 100_000,
        "http://a/" + "../" * 35_000,
        "http://a/" + "./" * 50_000,
        "http://a/?" + "&" * 100_000,
        "http://a/?" + "a=1&" * 25_000,
        "http://a/" + "ü" * 50_000,
        "http://" + "a" * 100_000 + "/",
        "http://" + "a." * 50_000 + "/",
        "http://a:" + "1" * 100_000 + "/",
        "http://" + "@" * 100_000 + "a/",
        "http://[" + ":" * 100_000 + "]/",
    ],
)
def test_100kb_urls_do_not_hang(url: str) -> None:
    start = time.perf_counter()
    try:
        result = normalize(url)
    except ValueError:
        result = None
    resolve("http://a/b", url)
    resolve(url, "g")
    assert time.perf_counter() - start < 2.0
    if result is not None:
        assert normalize(result) == result


def test_long_path_content_is_preserved() -> None:
    url = "http://a/" + "x" * 100_000
    assert normalize(url) == url
    assert normalize("http://a/" + "../" * 35_000 + "z") == "http://a/z"


def test_normalize_cache_does_not_leak_mutations() -> None:
    # Cached results must be identical to uncached ones.
    url = "HTTP://Example.com/a/../b?z=1&a=2"
    assert normalize(url) == spider.urls._normalize(url) == "http://example.com/b?a=2&z=1"


# ---------------------------------------------------------------------------
# Hypothesis properties.
# ---------------------------------------------------------------------------

FORBIDDEN = ("\t", "\r", "\n", "\x00")

_schemes = st.sampled_from(["http", "https", "HTTP", "hTTpS", "ftp", "mailto", "javascript", "data", ""])
_seps = st.sampled_from(["://", "://", "://", ":", ":/", "//", ":///", ""])
_host_pieces = st.sampled_from(
    [
        "a", "Example.COM", "bücher.example", "例え.テスト", "xn--bcher-kva", "[::1]", "[2001:DB8::1]",
        "127.0.0.1", ".", "..", "%41", "%", "%zz", "%C3%BC", "a b", "_x", "-", "ß", "ＡＢＣ", "。",
    ]
)
_hosts = st.lists(st.one_of(_host_pieces, st.text(max_size=4)), max_size=4).map("".join)
_ports = st.one_of(
    st.just(""),
    st.integers(min_value=0, max_value=70000).map(lambda p: f":{p}"),
    st.text(alphabet="0123456789:x ", max_size=6).map(lambda p: ":" + p),
)
_userinfo = st.one_of(
    st.just(""),
    st.lists(st.sampled_from(["u", "p", ":", "@", "%41", "%", " ", "ü"]), max_size=5).map(lambda x: "".join(x) + "@"),
)
_path_pieces = st.sampled_from(
    ["/", ".", "..", "./", "../", "/.", "/..", "%2e", "%2E%2E", "%", "%zz", "%7e", "%2F", "a", "B", "ü",
     " ", "\t", "\n", "\r", "\x00", "\x7f", "[", "]", "\\", "{", "|", "+", ";", ":", "@", "//", "?", "#"]
)
_paths = st.lists(st.one_of(_path_pieces, st.text(max_size=3)), max_size=8).map("".join)
_query_pieces = st.sampled_from(
    ["a=1", "b=2", "a=0", "a", "a=", "&", "&&", "utm_source=x", "UTM_X=1", "fbclid=9", "_ga=1", "=", "%26",
     "%3D", "+", "%41", "%", "k=%c3%bc", "?", "=x", "B=1"]
)
_queries = st.one_of(
    st.just(""),
    st.lists(st.one_of(_query_pieces, st.text(max_size=3)), max_size=6).map(lambda q: "?" + "&".join(q)),
)
_fragments = st.one_of(st.just(""), st.text(max_size=5).map(lambda f: "#" + f))
_padding = st.sampled_from(["", " ", "\t", "\n", "\x00", "\x0c", " \r\n"])

url_like = st.builds(
    lambda pad1, scheme, sep, userinfo, host, port, path, query, frag, pad2: (
        pad1 + scheme + sep + userinfo + host + port + path + query + frag + pad2
    ),
    _padding, _schemes, _seps, _userinfo, _hosts, _ports, _paths, _queries, _fragments, _padding,
)

href_like = st.one_of(
    url_like,
    st.builds(lambda p, q, f: p + q + f, _paths, _queries, _fragments),
    st.builds(lambda h, p: "//" + h + p, _hosts, _paths),
    st.sampled_from(["#x", "mailto:a@b", "javascript:x", "http:g", "https:g", "", " ", "?", "//"]),
    st.text(max_size=30),
)

bases = st.one_of(
    st.sampled_from(
        [RFC_BASE, "https://example.com/dir/", "https://example.com/dir", "http://[::1]:8080/a/b?c=d",
         "http://u:p@h/", "http://h", "not a base", ""]
    ),
    url_like,
)

PROPERTY_SETTINGS = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _check_normalize(text: str) -> None:
    try:
        result = normalize(text)
    except ValueError:
        return  # the only exception allowed
    assert normalize(result) == result  # idempotent
    assert not any(ch in result for ch in FORBIDDEN)
    assert result.startswith(("http://", "https://"))
    assert "#" not in result
    assert result.isascii()
    # host_key agrees with a full parse of the normalised URL.
    assert host_key(result) == result.split("/", 3)[2].rpartition("@")[2]


@PROPERTY_SETTINGS
@given(st.text())
def test_normalize_arbitrary_text_only_value_error(text: str) -> None:
    _check_normalize(text)


@PROPERTY_SETTINGS
@given(url_like)
def test_normalize_url_like_idempotent(text: str) -> None:
    _check_normalize(text)


@PROPERTY_SETTINGS
@given(bases, href_like)
def test_resolve_never_raises_and_returns_normal_urls(base: str, href: str) -> None:
    result = resolve(base, href)
    if result is None:
        return
    assert isinstance(result, str)
    assert normalize(result) == result
    assert not any(ch in result for ch in FORBIDDEN)


@pytest.mark.slow   # (~4 s; out of the fast subset)
@PROPERTY_SETTINGS
@given(bases, href_like)
def test_resolve_shortcuts_agree_with_the_parser(base: str, href: str) -> None:
    # resolve() skips ada for plain paths and absolute links, and never parses a fragment: the
    # same as ada's full parse of href against base, with the crawler's rules after it.
    from hypothesis import assume
    from spider.urls import _ada_href, _tidy

    assume(_ada_href(base) is not None)  # (against no URL, resolve() still takes an absolute link)
    assume(not href.strip("".join(map(chr, range(33)))).replace("\t", "").replace("\n", "").replace("\r", "")
           .startswith("#"))
    full = _ada_href(href, base)
    try:
        expected = _tidy(full) if full is not None and full.startswith(("http://", "https://")) else None
    except ValueError:  # an "xn--" label that is no punycode
        expected = None
    assert resolve(base, href) == expected


_PERCENT_HEAVY = st.lists(st.sampled_from(["%", "%4", "%41", "%7e", "%2e", "%%", "4", "a", "/", "x%", ".", ".."]),
                          max_size=8).map("".join)


@PROPERTY_SETTINGS
@given(_PERCENT_HEAVY, _PERCENT_HEAVY)
def test_resolve_with_bare_percents_and_escapes_gives_normal_urls(base_path: str, href: str) -> None:
    # escapes decoded next to a "%" left as written: the joined path must still be normal
    for ref in (href, "y", "?q"):
        result = resolve("http://h/" + base_path, ref)
        assert result is None or normalize(result) == result, (base_path, ref, result)


@PROPERTY_SETTINGS
@given(st.text(), st.text())
def test_resolve_arbitrary_text(base: str, href: str) -> None:
    result = resolve(base, href)
    assert result is None or normalize(result) == result


@PROPERTY_SETTINGS
@given(url_like)
def test_resolve_empty_href_is_normalised_base(base: str) -> None:
    try:
        expected: str | None = normalize(base)
    except ValueError:
        expected = None
    assert resolve(base, "") == expected


# ---------------------------------------------------------------------------
# Module doctests.
# ---------------------------------------------------------------------------


def test_module_doctests() -> None:
    result = doctest.testmod(spider.urls, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0


# -- the fast path of resolve (plain paths) gives exactly what normalize gives -----------------

_PLAIN = st.text(alphabet="abcXYZ019._~-/", min_size=1, max_size=30)


@given(base=st.sampled_from(["http://a.test/", "http://a.test/b/c.html", "https://A.test:8443/x/y/?q=1",
                             "http://u:p@a.test/dir/", "http://a.test/b/c?x=%41", "http://[::1]:81/p/q"]),
       href=_PLAIN)
def test_resolve_fast_path_equals_normalize_of_the_joined_url(base: str, href: str) -> None:
    from hypothesis import assume
    from spider.urls import _split_base

    assume(not href.startswith("//"))   # a network-path reference: another host, not a path
    got = resolve(base, href)
    b = _split_base(base)
    joined = b.prefix + (href if href.startswith("/") else b.path[: b.path.rfind("/") + 1] + href)
    try:
        expected = normalize(joined)
    except ValueError:
        expected = None
    assert got == expected, (base, href)


# -- the shortcut for URLs already in normal form agrees with the full rules ------------------

_NEAR_NORMAL = st.builds(
    lambda scheme, host, port, path, query: f"{scheme}://{host}{port}{path}{query}",
    st.sampled_from(["http", "https", "HTTP"]),
    st.sampled_from(["a.test", "127.0.0.1", "x-y.a_b.test", "A.test", "a.test.", "a..test", "-a.test",
                     "x" * 64 + ".test", ".".join(["abcdefghi"] * 26)]),
    st.sampled_from(["", ":80", ":443", ":8080", ":080", ":65535", ":65536", ":99999", ":0", ":"]),
    st.lists(st.sampled_from(["a", "Z9", ".", "..", "", ".x", "~-_", "%41", "%2e"]), max_size=5)
    .map(lambda segments: "".join("/" + s for s in segments)),
    st.one_of(st.just(""), st.just("?"),
              st.builds(lambda k, v: f"?{k}={v}", st.sampled_from(["v", "utm_source", "UTM_x", "fbclid", "q"]),
                        st.text(alphabet="az09._~!$'()*+,;=:@/?-&%#", max_size=8)),
              st.text(alphabet="?az=&", max_size=8)),
)


@given(url=_NEAR_NORMAL)
def test_already_normal_shortcut_agrees_with_the_full_rules(url: str) -> None:
    from spider.urls import _is_normal, _normalize

    if _is_normal(url):
        assert _normalize(url) == url, url
    try:
        expected: str | None = _normalize(url)
    except ValueError:
        expected = None
    try:
        got: str | None = normalize(url)
    except ValueError:
        got = None
    assert got == expected, url


def test_already_normal_shortcut_takes_the_common_shapes() -> None:
    from spider.urls import _is_normal

    assert _is_normal("http://127.0.0.1:8080/p/1.html")
    assert _is_normal("https://example.org/docs/?page=2")
    for url in ("http://example.org", "http://Example.org/", "http://example.org:80/", "http://a/b/../c",
                "http://a/b?utm_source=x", "http://a/b?x=1&a=2", "http://a/%41", "http://a/b#f"):
        assert not _is_normal(url), url
