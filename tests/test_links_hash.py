"""The text hash is stored in crawl files, so a cheaper way of computing it must give the value the
straightforward way gives on every page, or a resumed recrawl would see every page as changed.

The reference here is that way, as `LinkFinder` did it before the hash was made cheaper: a query
of its own for the invisible elements, every text node of the tree joined by spaces (whitespace-
only ones too), the fold by ``" ".join(text.split())``. The pages are random, with every character
``str.split`` splits on, raw and as a character reference, alone in elements or next to words."""

from __future__ import annotations

import hashlib
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from spider.links import LinkFinder

URL = "http://example.com/dir/page.html"
EVERY_SPACE = [chr(i) for i in range(sys.maxunicode + 1) if chr(i).isspace()]


def reference_hash(body: bytes) -> str | None:
    """The text hash by its plain definition: title, then the visible text, whitespace folded."""
    tree = LexborHTMLParser(body)
    title_el = tree.css_first("title")
    title = " ".join(title_el.text().split()) if title_el is not None else None
    for el in tree.css("script, style, noscript, template, title"):
        el.decompose(recursive=False)
    tree.merge_text_nodes()
    text = " ".join(tree.text(separator=" ").split())
    if title:
        text = f"{title} {text}" if text else title
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest() if text else None


_SPACES = st.sampled_from(EVERY_SPACE)
_REFERENCES = st.sampled_from(EVERY_SPACE).map(lambda c: f"&#x{ord(c):x};")
_WORDS = st.text(alphabet="ab é\U0001f600", min_size=1, max_size=5)
_MARKUP = st.sampled_from([
    "<p>", "</p>", "<div>", "</div>", "<em>", "</em>", "<br>", "<!-- c -->", "<script>x()</script>",
    "<style>s{}</style>", "<title>T  t</title>", "<title>", "</title>", "<noscript>", "</noscript>",
    "<template>", "</template>", "<textarea>", "</textarea>", "<pre>", "</pre>", "<table>", "<tr>", "<td>",
    "</table>", "<svg><title>s</title></svg>", '<a href="/x">', "</a>", '<img src="i.png">', "<select>",
    '<link rel="stylesheet" href="s.css">', '<meta name="robots" content="noindex">', "&nbsp;", "&amp;",
])
_PAGES = st.lists(st.one_of(_MARKUP, _WORDS, _SPACES, _REFERENCES, st.lists(_SPACES, min_size=2, max_size=4).map("".join)),
                  max_size=30).map("".join)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(_PAGES)
def test_the_text_hash_is_the_reference_hash(html: str) -> None:
    body = html.encode("utf-8", "surrogatepass")
    assert LinkFinder(URL).parse(body).text_hash == reference_hash(body), repr(html)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(_PAGES)
def test_the_hash_changes_nothing_else_nor_do_requisites_change_the_hash(html: str) -> None:
    # The invisible elements come from the links' query when the hash is wanted: the links,
    # requisites and facts are those found without the hash, in the same order.
    body = html.encode("utf-8", "surrogatepass")
    for requisites in (False, True):
        hashed = LinkFinder(URL, requisites=requisites).parse(body)
        bare = LinkFinder(URL, requisites=requisites, text_hash=False).parse(body)
        assert bare.text_hash is None
        assert hashed == type(hashed)(**{**bare.__dict__, "text_hash": hashed.text_hash}), repr(html)
        assert hashed.text_hash == reference_hash(body), repr(html)


def test_whitespace_only_elements_of_every_kind() -> None:
    # HTML's own whitespace-only text nodes are left out of the text; other spaces (VT, NBSP, ...)
    # alone in an element are kept and folded, which gives the same text.
    for space in EVERY_SPACE:
        for html in (f"<p>a</p><p>{space}</p><p>b</p>", f"<p>a<b>{space}</b>b</p>", f"<p>{space}</p>",
                     f"<title>{space}</title><p>{space}a{space}{space}</p>", f"<p>a</p>{space * 3}<p>b</p>",
                     f"<p>a <em> {space} </em> b</p>", f"<p>a<script>x</script>{space}<script>y</script>b</p>"):
            body = html.encode()
            assert LinkFinder(URL).parse(body).text_hash == reference_hash(body), repr(html)


@pytest.mark.parametrize("html", [
    "<p>a<script>x</script>b</p>", "<p>a<script>x</script>b<style>y</style>c</p>",
    "<p>a<script></script><script></script>b</p>", "<p>a<noscript>n<script>s</script>m</noscript>b</p>",
    "<p>a<title>t</title>b<script>s</script></p>", "a<table><tr><td>x<script>s</script>y</td></tr></table>",
    "a<table><script>s</script>b</table>c", "<p>a<script>s</script> <script>s</script>b</p>",
    "<p>a <script>s</script>b</p>", "<p>a\x0b<script>s</script>\x0bb</p>", "<p>a<template>t</template>b</p>",
    "<p>\xa0<script>s</script>\xa0</p>", "<p><!--c-->a<script>s</script>b<!--d--></p>", "<p>é<style>s</style>\U0001f600</p>",
])
def test_the_text_on_both_sides_of_a_hidden_element_is_one_word(html: str) -> None:
    body = html.encode()
    for finder in (LinkFinder(URL), LinkFinder(URL, requisites=True)):
        assert finder.parse(body).text_hash == reference_hash(body), repr(html)


def test_scripts_and_styles_are_requisites_and_hidden_text_at_once() -> None:
    body = (b"<title>T</title><style>@import 'a.css';</style><p>x<script src=s.js>t()</script>y</p>"
            b"<noscript><img src=n.png><style>b{background:url(b.png)}</style></noscript>"
            b"<p>z<template><script src=t.js></script></template>w</p>")
    page = LinkFinder(URL, requisites=True).parse(body)
    assert page.requisites == ["a.css", "s.js", "n.png", "b.png"]
    assert page.text_hash == reference_hash(body) == LinkFinder(URL).parse(body).text_hash
    assert page.text_hash == hashlib.blake2b(b"T xy zw", digest_size=16).hexdigest()


def test_a_typical_page_hashes_as_the_reference() -> None:
    parts = ['<!DOCTYPE html><html><head><meta charset="utf-8"><title> A\tpage </title><script>var a;</script>'
             "</head><body>\n  <ul>\n"]
    parts += [f'    <li><a href="/{i}.html">Entry {i}</a> \n    </li>\n' for i in range(40)]
    parts += [f"  <p>\n    Some <b>text</b>   caf\u00e9\u00a0lorem\u2003ipsum {i}.\n  </p>\n" for i in range(200)]
    body = "".join(parts + ["</ul></body></html>"]).encode()
    assert LinkFinder(URL).parse(body).text_hash == reference_hash(body)


def test_pages_parsed_in_many_threads_at_once_give_what_one_thread_gives() -> None:
    # Each thread has its own CSS selector engine (a query keeps its results on the engine).
    from concurrent.futures import ThreadPoolExecutor

    bodies = [("<title>T%d</title><style>x{}</style>" % i + "".join(
        f'<p>w{i} {j}<script src="/{i}/{j}.js">s()</script> v<a href="/{i}/{j}">l</a><img src="/{i}/{j}.png"></p>'
        for j in range(60))).encode() for i in range(12)]
    alone = [LinkFinder(URL, requisites=True).parse(body) for body in bodies]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            together = list(pool.map(lambda body: LinkFinder(URL, requisites=True).parse(body), bodies * 6))
    finally:
        sys.setswitchinterval(switch)
    assert together == alone * 6
    assert alone[0].links[0].href == "/0/0" and alone[0].requisites[:2] == ["/0/0.js", "/0/0.png"]
