"""The fast paths of spider.links give what the plain ones give. The <meta charset> pre-scan
(``_detect_encoding``) skips comments without removing them first when the match comes before any:
it finds the charset the definition finds (comments removed from the first 4 KiB, then the first
<meta ... charset=...> of what is left); a label is looked up once (``_codec_for``); the parse's
``ParsedPage`` and ``Link``s, made without their ``__init__``, are the ones it makes."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from spider import links
from spider.links import _codec_for, _detect_encoding


def defined(body: bytes) -> tuple[str, int]:
    """The pre-scan as defined: comments removed from the head, then the <meta>, else the XML
    declaration, else UTF-8 (no BOM, no HTTP charset here)."""
    head = body[:links._PRESCAN_BYTES]
    xml = links._XML_DECL_CHARSET_RE.match(head)
    match = links._META_CHARSET_RE.search(links._COMMENT_RE.sub(b"", head)) or xml
    codec = _codec_for(match.group(1), from_document=True) if match else None
    return (codec or "utf-8"), 0


def test_a_comment_next_to_the_meta() -> None:
    # the label goes on after a comment right after it: "koi8" alone is no codec
    assert _detect_encoding(b"<meta charset=koi8<!---->-r>") == ("koi8-r", 0)
    assert _detect_encoding(b"<meta charset=koi8-r<!-- -->x>") == ("utf-8", 0)   # koi8-rx
    # a comment begun inside the tag hides it (unclosed: to the end)
    assert _detect_encoding(b'<meta foo="<!--" charset=koi8-r>') == ("utf-8", 0)
    assert _detect_encoding(b"<meta <!-- > --> charset=koi8-r>") == ("koi8-r", 0)
    assert _detect_encoding(b"<!-- <meta charset=koi8-r> --><meta charset=latin1>") == ("cp1252", 0)
    assert _detect_encoding(b"<meta charset=koi8-r><!-- <meta charset=latin1>") == ("koi8-r", 0)
    assert _detect_encoding(b"<!-- x --><meta charset=koi8-r>") == ("koi8-r", 0)


ATOMS = [b"<meta", b" charset", b"=", b"koi8", b"-r", b"latin1", b"'", b'"', b">", b"<!--", b"-->",
         b"<!---->", b" ", b"x", b"<", b"-", b"!", b"\n", b"utf-16", b"<?xml", b" encoding=",
         b"<meta http-equiv=content-type content='text/html; charset=gbk'>"]


@settings(max_examples=1000)
@given(st.lists(st.sampled_from(ATOMS), max_size=16).map(b"".join), st.integers(0, 4100))
def test_the_prescan_is_the_definitions(body: bytes, pad: int) -> None:
    assert _detect_encoding(body) == defined(body)
    padded = b"x" * pad + body   # across the end of the 4 KiB looked at
    assert _detect_encoding(padded) == defined(padded)


def test_the_prescan_on_random_pages() -> None:
    rng = random.Random(15)
    for _ in range(20_000):
        body = b"".join(rng.choice(ATOMS) for _ in range(rng.randint(0, 24)))
        assert _detect_encoding(body) == defined(body), body


def test_a_label_is_looked_up_once(monkeypatch) -> None:
    looked: list[object] = []
    look_up = links._look_up_codec
    monkeypatch.setattr(links, "_CODECS", {})
    monkeypatch.setattr(links, "_look_up_codec", lambda label, doc: looked.append(label) or look_up(label, doc))
    for _ in range(3):
        assert _codec_for(b"utf-8", from_document=True) == "utf-8"
        assert _codec_for("UTF-16", from_document=False) == "utf-16-le"
        assert _codec_for(b"UTF-16", from_document=True) == "utf-8"
        assert _codec_for(b"base64", from_document=True) is None
    assert looked == [b"utf-8", "UTF-16", b"UTF-16", b"base64"]
    long = b"x" * 65   # a hostile server's long labels are not kept
    assert _codec_for(long, from_document=True) is None and long not in {k for k, _ in links._CODECS}


def test_a_parsed_page_has_every_field() -> None:
    """``LinkFinder`` makes its ``ParsedPage`` without the dataclass' ``__init__``: every field set,
    in order, as ``__init__`` sets them."""
    import dataclasses

    from spider.links import LinkFinder, ParsedPage

    page = LinkFinder("http://h/").parse(b"<title>T</title><a href=x>x</a><a href=x rel=nofollow>y</a>")
    made = ParsedPage(**{f.name: getattr(page, f.name) for f in dataclasses.fields(ParsedPage)})
    assert list(vars(page)) == list(vars(made)) and page == made and repr(page) == repr(made)
    assert [(link.href, link.nofollow) for link in page.links] == [("x", False), ("x", True)]
    assert vars(page.links[0]) == vars(type(page.links[0])("x", False))


def test_more_than_is_the_count() -> None:
    """``_more_than`` (is the document over ``_MAX_TAGS`` tags?) counts part of the document only."""
    from spider.links import _more_than

    rng = random.Random(7)
    for _ in range(50_000):
        limit = rng.randint(0, 40)
        density = rng.random()
        body = bytes(60 if rng.random() < density else 97 for _ in range(rng.randint(0, 70)))
        assert _more_than(body, b"<", limit) == (body.count(b"<") > limit), (body, limit)
        text = body.decode()
        assert _more_than(text, "<", limit) == (text.count("<") > limit), (text, limit)


def test_a_page_just_over_the_tags_limit_is_flattened() -> None:
    # 10,000 "<" and one more: nested <div>s (blanked when flattened) around a link
    at = b"<a href=x>x</a>"   # 2 of the "<"
    page = b"<div>" * (links._MAX_TAGS - 2) + at
    assert not links._more_than(page, b"<", links._MAX_TAGS)
    assert links._more_than(page + b"<b>", b"<", links._MAX_TAGS)
    for body in (page, page + b"<b>"):
        assert [link.href for link in links.LinkFinder("http://h/").parse(body).links] == ["x"]
