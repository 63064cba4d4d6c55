"""The parent's look at its workers (spider.crawl.Crawl._supervise): the end of a worker is seen
as it happens, not at the next tenth of a second."""

from __future__ import annotations

import ctypes
import io
import os
import subprocess
import sys
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



_PAGES = """
import os, resource, sys
import spider.crawl as crawl
crawl._die_with_parent(os.getppid())   # what every child of a crawl does first
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(40):   # 40 "pages", each making 3 MB in blocks of 64 KB (a document's arenas, a
    blocks = [bytearray(64 << 10) for _ in range(48)]   # body, its text), every memory page
    del blocks                                           # touched, and freeing them when done
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_child_of_the_crawl_keeps_its_freed_heap_for_the_next_page() -> None:
    """Memory freed by one page is reused by the next one instead of being given back to the
    system and faulted in again (glibc trims the heap's top once 128 KB are free there)."""
    if not hasattr(ctypes.CDLL(None), "mallopt"):
        pytest.skip("not glibc")
    # glibc's default thresholds, held fixed: it raises them by itself after freeing a big block
    # (compiling the sources at import may), which would hide the default here
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}
    out = subprocess.run([sys.executable, "-c", _PAGES], capture_output=True, text=True, check=True,
                         cwd=Path(crawl.__file__).parent.parent, env=env).stdout
    assert int(out) < 40 * 768 / 4   # 3 MB a "page": 768 memory pages faulted in afresh each time
