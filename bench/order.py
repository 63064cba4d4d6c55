#!/usr/bin/env python3
"""Crawl order on a list/detail site: how many detail pages do bfs, dfs and best reach in 200 pages?

    python bench/order.py [--runs 3] [--pages 200] [--workers 4]

The site (served on 127.0.0.1 by tests/sitekit.py's TestSite, built by tests/trapsite.py's
ListDetailSite): "/" links 50 list pages /list/1 ... /list/50; each list page links its
neighbours (pagination) and its 20 detail pages; each detail page /detail/ID links back to its
list and to 4 related details. 3,000 detail pages in all: 1,000 listed, the rest reachable only
through related links. Every page is small HTML; nothing leaves 127.0.0.1.

Three crawls, each in a fresh projects folder, stopped by --max-pages:

    python main.py crawl bench URL --max-pages 200 --delay 0 --workers 4 --max-depth 1000 --order bfs
    ...                                                                            --order dfs
    ...                                                                            --order best --prefer /detail/

(--max-depth 1000 so that the order, not the default depth limit of 5, decides how deep a crawl
goes.) For each: the pages in crawled.txt, how many of them are detail pages (and their share), the
deepest depth reached and the wall time; with --runs N, the medians over N rounds (the three
orders interleaved in each round). Exit 0 unless a crawl fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
sys.path.insert(0, str(REPO_DIR / "tests"))

from sitekit import TestSite  # noqa: E402
from trapsite import ListDetailSite  # noqa: E402

ORDERS = (
    ("bfs", ("--order", "bfs")),
    ("dfs", ("--order", "dfs")),
    ("best --prefer /detail/", ("--order", "best", "--prefer", "/detail/")),
)


def crawl_once(url: str, args: tuple[str, ...], pages: int, workers: int, max_depth: int,
               timeout: float) -> tuple[int, int, int, float]:
    """(pages crawled, detail pages among them, deepest depth, wall seconds) of one fresh crawl."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["NO_PROXY"] = "*"
    tmp = Path(tempfile.mkdtemp(prefix="spider-order-"))
    try:
        projects = tmp / "projects"
        cmd = [sys.executable, str(REPO_DIR / "main.py"), "crawl", "bench", url, "--projects-dir", str(projects),
               "--max-pages", str(pages), "--delay", "0", "--workers", str(workers),
               "--max-depth", str(max_depth), *args]
        start = time.monotonic()
        result = subprocess.run(cmd, cwd=REPO_DIR, capture_output=True, text=True, timeout=timeout, env=env)
        wall = time.monotonic() - start
        if result.returncode != 0:
            raise SystemExit(f"crawl failed (exit {result.returncode}): {' '.join(cmd)}\n{result.stderr[-2000:]}")
        crawled = [line.split("\t") for line in (projects / "bench" / "crawled.txt").read_text().splitlines()
                   if line.strip() and not line.startswith("#")]
        pages_ = [f for f in crawled if not f[1].startswith("3")]
        details = sum(1 for f in pages_ if "/detail/" in f[0])
        deepest = max((int(f[4]) for f in pages_), default=0)
        return len(pages_), details, deepest, wall
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="rounds; medians are printed (default 1)")
    parser.add_argument("--pages", type=int, default=200, help="--max-pages of each crawl (default 200)")
    parser.add_argument("--workers", type=int, default=4, help="--workers of each crawl (default 4)")
    parser.add_argument("--max-depth", type=int, default=1000, help="--max-depth of each crawl (default 1000)")
    parser.add_argument("--lists", type=int, default=50)
    parser.add_argument("--per-list", type=int, default=20)
    parser.add_argument("--details", type=int, default=3000)
    parser.add_argument("--related", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per crawl")
    opts = parser.parse_args()
    if opts.runs < 1 or opts.pages < 1:
        parser.error("--runs and --pages must be at least 1")

    results: dict[str, list[tuple[int, int, int, float]]] = {name: [] for name, _ in ORDERS}
    with TestSite() as site:
        ListDetailSite(site, lists=opts.lists, per_list=opts.per_list, details=opts.details,
                       related=opts.related).install()
        url = site.url("/")
        print(f"site: {url}  {opts.lists} lists x {opts.per_list} details, {opts.details} details in all, "
              f"{opts.related} related links per detail")
        print(f"crawls: --max-pages {opts.pages} --delay 0 --workers {opts.workers} --max-depth {opts.max_depth}, "
              f"{opts.runs} run(s) each" + (" (medians)" if opts.runs > 1 else ""))
        for run in range(opts.runs):
            for name, args in ORDERS:
                results[name].append(crawl_once(url, args, opts.pages, opts.workers, opts.max_depth, opts.timeout))
                if opts.runs > 1:
                    p, d, deep, w = results[name][-1]
                    print(f"  run {run + 1}: {name:<24} {p:>5} pages {d:>5} details  depth {deep:>4}  {w:6.2f} s",
                          flush=True)

    header = f"{'order':<24} {'pages':>6} {'detail pages':>13} {'share':>7} {'max depth':>10} {'seconds':>8}"
    print()
    print(header)
    print("-" * len(header))
    for name, _ in ORDERS:
        rows = results[name]
        pages = statistics.median(r[0] for r in rows)
        details = statistics.median(r[1] for r in rows)
        deepest = statistics.median(r[2] for r in rows)
        wall = statistics.median(r[3] for r in rows)
        share = details / pages if pages else 0.0
        print(f"{name:<24} {pages:>6g} {details:>13g} {share:>7.1%} {deepest:>10g} {wall:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
