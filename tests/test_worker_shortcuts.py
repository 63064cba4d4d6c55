"""The worker's shortcuts on its per-page path give what the slow path they replace gives."""

from __future__ import annotations

import itertools

from spider import recrawl


def test_first_schedule_line_is_the_pages_line() -> None:
    """``recrawl.first_line`` (no ``Page`` made) writes ``after_fetch(...).line()``, byte for byte."""
    validators = [None, "", "-", " ", '"e"', 'W/"x y"', "\tx\x1b[31m\n", " padded ", "Wed, 21 Oct 2015 07:28:00 GMT",
                  "é\u202e"]
    hashes = [None, "", "-", "b2:0123456789abcdef", "text/html:123", "x\ty", " h "]
    bounds = [(recrawl.MIN_INTERVAL, recrawl.MAX_INTERVAL), (0.0, 60.0), (90000.0, 1e9), (0.0, float("inf")),
              (1e400, 1e400)]
    urls = ["http://a.test/", "https://b.test:8443/x?y=1"]
    times = [0.0, 1000.4, 1764693000.5, 1764693000.49999]
    n = 0
    for url, now, etag, modified, text_hash, (lo, hi) in itertools.product(
            urls, times, validators, validators[:4], hashes, bounds):
        try:
            want = recrawl.after_fetch(url, now, etag, modified, text_hash, lo, hi).line()
        except (ValueError, OverflowError) as exc:   # (an infinite due time's stamp: same error)
            try:
                recrawl.first_line(url, now, etag, modified, text_hash, lo, hi)
            except type(exc):
                continue
            raise AssertionError("first_line did not raise as after_fetch().line()")
        assert recrawl.first_line(url, now, etag, modified, text_hash, lo, hi) == want, (etag, modified, text_hash, lo, hi)
        n += 1
    assert n > 1000
