"""User regular expressions (``--allow``, ``--deny``, ``--prefer``, ``--defer``, ``--discover``):
compiled here, and only here, with RE2.

RE2 matches in time linear in the URL's length whatever the pattern: Python's ``re``
backtracks, and ``(a+)+$`` against 40 ``a``s and a ``!`` pinned a worker at 100 % CPU for good
(Ctrl-C did not stop it: the match runs in C without checking for signals). RE2 has no
backreferences (``\\1``) and no lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``); such a pattern is
refused with one clear line when the option is given or settings.txt is read, never later.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Protocol

import re2


class Pattern(Protocol):
    pattern: str

    def search(self, text: str) -> bool: ...


class _UserPattern:
    """A compiled user pattern; ``search`` answers only whether it matches (all any caller asks).

    ``re2``'s own ``search`` builds a match object and maps byte offsets back to characters,
    which doubled the cost of a check; asking RE2 for the match span of the UTF-8 bytes does not
    (about as fast as Python's ``re``). Without that entry point (another version of the
    binding), the public ``search`` is used."""

    __slots__ = ("pattern", "_compiled", "_match", "_anchor")

    def __init__(self, compiled: Any) -> None:
        self.pattern: str = compiled.pattern
        self._compiled = compiled
        self._anchor = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
        self._match = getattr(getattr(compiled, "_regexp", None), "Match", None)
        if self._anchor is None:
            self._match = None

    def search(self, text: str) -> bool:
        if self._match is None:
            return self._compiled.search(text) is not None
        data = text.encode("utf-8", "surrogatepass")
        return bool(self._match(self._anchor, data, 0, len(data))[0] != (-1, -1))

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return compile_pattern, (self.pattern,)

    def __repr__(self) -> str:
        return f"compile_pattern({self.pattern!r})"


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False   # RE2 would print each refused pattern to stderr itself


@lru_cache(maxsize=1024)
def compile_pattern(text: str) -> Pattern:
    """The compiled user pattern ``text``; ValueError with a one-line message if RE2 refuses it
    or if it is empty (an empty pattern matches every URL: ``--deny ''`` refused them all)."""
    if not text:
        raise ValueError("bad regular expression '': an empty pattern matches every URL")
    try:
        return _UserPattern(re2.compile(text, _OPTIONS))
    except re2.error as e:
        why = e.args[0] if e.args else e
        if isinstance(why, bytes):
            why = why.decode("utf-8", "replace")
        raise ValueError(f"bad regular expression {_shown(text)}: {why} (RE2 syntax: no "
                         "backreferences or lookaround)") from None
    except (TypeError, UnicodeError) as e:   # a lone surrogate from a non-UTF-8 command line
        raise ValueError(f"bad regular expression {_shown(text)}: {e}") from None


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 200 else repr(text[:200]) + "..."


__all__ = ["Pattern", "compile_pattern"]
