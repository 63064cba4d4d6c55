"""The text hash's whitespace fold, done on UTF-8 bytes (``spider.links._fold_utf8``), is the
definition's fold (``_fold``: ``" ".join(text.split())``) encoded: every character ``str.split``
splits on, and nothing else, separates words."""

from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from spider.links import _WIDE_SPACES, _fold, _fold_utf8

EVERY_SPACE = [chr(i) for i in range(sys.maxunicode + 1) if chr(i).isspace()]
# Characters next to the spaces in the code tables, and ones whose UTF-8 shares bytes with them.
NEIGHBOURS = ["\x08", "\x0e", "\x1b", "\x7f", "\x84", "\x86", "\x9f", "\xa1", "\xc2", "\u167f", "\u1681", "\u1fff",
              "\u200b", "\u200c", "\u2027", "\u202a", "\u202e", "\u2030", "\u205e", "\u2060", "\u2fff", "\u3001",
              "\u0100", "\u0160", "\ufeff", "\U0001f600", "\udc80", "a", "é", "\x00"]


def test_the_wide_spaces_are_every_non_ascii_space() -> None:
    assert sorted(c for c, _ in _WIDE_SPACES) == [c for c in EVERY_SPACE if ord(c) > 0x7f]


def test_every_space_alone_and_in_runs() -> None:
    for space in EVERY_SPACE:
        for text in (space, f"a{space}b", f"{space}a{space * 3}b{space}", f"é{space} {space}\u3001", f"a {space}"):
            assert _fold_utf8(text) == _fold(text).encode("utf-8", "surrogatepass"), repr(text)


@settings(max_examples=500)
@given(st.lists(st.one_of(st.sampled_from(EVERY_SPACE + NEIGHBOURS), st.text(max_size=4)), max_size=40).map("".join))
def test_the_byte_fold_is_the_fold(text: str) -> None:
    assert _fold_utf8(text) == _fold(text).encode("utf-8", "surrogatepass")
