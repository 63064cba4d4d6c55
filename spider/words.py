"""Words in messages: ``plural(1, "problem")`` is "1 problem", ``plural(2, "problem")`` "2 problems"."""

from __future__ import annotations


def plural(n: int, word: str, words: str | None = None, prefix: str = "") -> str:
    """``n`` and the word in the form that goes with it (``words``: an irregular plural).

    >>> plural(1, "problem"), plural(0, "problem"), plural(3, "URL"), plural(2, "redirect", prefix="+")
    ('1 problem', '0 problems', '3 URLs', '+2 redirects')
    """
    return f"{prefix}{n} {word if n == 1 else (words or word + 's')}"
