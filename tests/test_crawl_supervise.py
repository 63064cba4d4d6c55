"""The parent's look at its workers (spider.crawl.Crawl._supervise): the end of a worker is seen
as it happens, not at the next tenth of a second."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

import spider.crawl as crawl
from spider.config import CrawlConfig


def test_a_worker_that_ends_cuts_the_pause_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = crawl.Crawl(tmp_path, CrawlConfig(seeds=("http://127.0.0.1:9/",)), out=io.StringIO())
    ended, still = os.pipe(), os.pipe()   # a worker's sentinel is readable once it has ended
    os.close(ended[1])
    slept: list[float] = []
    monkeypatch.setattr(crawl.time, "sleep", slept.append)
    try:
        parent._pause(None, [still[0], ended[0]])  # type: ignore[arg-type]
        assert slept == []   # waited on the sentinels, and one was ready
    finally:
        for fd in (ended[0], *still):
            os.close(fd)
