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
from typing import Protocol

import re2


class Pattern(Protocol):
    pattern: str

    def search(self, text: str) -> object: ...


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False   # RE2 would print each refused pattern to stderr itself


@lru_cache(maxsize=1024)
def compile_pattern(text: str) -> Pattern:
    """The compiled user pattern ``text``; ValueError with a one-line message if RE2 refuses it
    or if it is empty (an empty pattern matches every URL: ``--deny ''`` refused them all)."""
    if not text:
        raise ValueError("bad regular expression '': an empty pattern matches every URL")
    try:
        return re2.compile(text, _OPTIONS)   # type: ignore[no-any-return]
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
