#!/usr/bin/env python3
"""Redis memory per known and per pending URL, and a worker's RSS as the crawl grows.

    python bench/redis_memory.py [--known 1000000] [--small 1000] [--hosts 4]

1. A private redis-server (no persistence) and a Python server on 127.0.0.1 ... 127.0.0.H
   (bench/redisbench.py SlowSite, no latency) that answers any /a/... path with a small page
   without links.
2. --small URLs `http://127.0.0.H:PORT/a/2026/K/a-page-about-thing-K.html` go into the crawl `mem`
   through the store's API (RedisStore.add, 500 a script, as the crawler adds the links it finds).
3. `python main.py crawl mem http://127.0.0.1:PORT/ ... http://127.0.0.H:PORT/ --store ... --workers 1 --delay 0
   --max-pages 300 --max-depth 0` (a new crawl: the URLs already added are its frontier) is
   sampled every 50 ms (bench/measure.py): the peak RSS of its worker (its largest child) and of
   the machine's parent process.
4. More URLs are added up to --known, and Redis is read:
       dedup bytes / known URL     MEMORY USAGE of the 4,096 `mem:seen:XYZ` strings (packed 8-byte
                                   fingerprints) ÷ known URLs; target <= 16
       bytes / pending URL         MEMORY USAGE of the hosts' pending sorted sets `mem:q:{host}`
                                   ÷ pending URLs, against the URL's mean length (target <= length
                                   + 48) and the queue line's (a member is a block of up to 64
                                   lines of one add; here adds of 500 URLs make full blocks, a
                                   page's links to one host make smaller ones: the test
                                   test_a_pending_url_costs_at_most_its_length_and_48_bytes
                                   checks 8 links a host a page, each with its page as source)
       used_memory / known URL     INFO used_memory after - before ÷ URLs added (everything)
5. The same crawl is joined again (`crawl mem --store ... --max-pages 600`): the worker's peak RSS
   with --known URLs against step 3's; it must not grow (the seen set is in Redis).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import measure
from measure import MB, OUT_DIR, run_measured, spider_cmd
from redisbench import Redis, SlowSite

sys.path.insert(0, str(measure.REPO_DIR))
from spider.frontier.redisstore import RedisStore  # noqa: E402
from spider.records import QueueEntry  # noqa: E402

RUN_DIR = OUT_DIR / "redis_memory"
NAME = "mem"
CHUNK = 20_000


def url_of(k: int, hosts: int, port: int) -> str:
    return f"http://127.0.0.{k % hosts + 1}:{port}/a/2026/{k % 997}/a-page-about-thing-{k}.html"


def page(addr: str, path: str, port: int) -> Optional[bytes]:
    return b"<!DOCTYPE html><html><head><title>t</title></head><body><p>a page</p></body></html>"


def add_urls(store: RedisStore, start: int, stop: int, hosts: int, port: int) -> float:
    t = time.monotonic()
    for lo in range(start, stop, CHUNK):
        store.add(QueueEntry(url_of(k, hosts, port)) for k in range(lo, min(stop, lo + CHUNK)))
    return time.monotonic() - t


def crawl(redis: Redis, site: SlowSite, label: str, max_pages: int, start: bool) -> Dict[str, float]:
    base = RUN_DIR / label
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    seeds = [f"http://{a}:{site.port}/" for a in site.addrs] if start else []   # every host in scope
    cmd = spider_cmd("crawl", NAME, *seeds, "--store", redis.url, "--workers", "1", "--delay", "0",
                     "--max-pages", str(max_pages), "--max-depth", "0")
    res = run_measured(cmd, cwd=base, timeout=300, log_dir=base)
    return {"worker_peak_rss_mb": res.peak_rss_child / MB, "parent_peak_rss_mb": res.peak_rss_root / MB,
            "tree_peak_pss_mb": (res.peak_pss or 0) / MB, "wall_s": res.wall, "code": res.returncode}


def memory_usage(client, pattern: str) -> tuple[int, int]:
    """Sum of MEMORY USAGE over the keys matching pattern, and their number."""
    keys = list(client.scan_iter(pattern, count=1000))
    total = 0
    for i in range(0, len(keys), 500):
        p = client.pipeline(transaction=False)
        for k in keys[i:i + 500]:
            p.memory_usage(k, samples=0)
        total += sum(x or 0 for x in p.execute())
    return total, len(keys)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--known", type=int, default=1_000_000)
    ap.add_argument("--small", type=int, default=1_000)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--spider-dir", type=Path)
    args = ap.parse_args(argv)
    measure.set_spider_dir(args.spider_dir)
    site = SlowSite([f"127.0.0.{i}" for i in range(1, args.hosts + 1)], page, latency=0.0).start()
    result: Dict[str, object] = {"bench": "redis_memory", "known": args.known, "small": args.small,
                                 "hosts": args.hosts}
    try:
        with Redis() as redis:
            client = redis.client()
            store = RedisStore(client, NAME)
            base_mem = int(redis.info("memory")["used_memory"])
            add_urls(store, 0, args.small, args.hosts, site.port)
            small = crawl(redis, site, "small", 300, start=True)
            print(f"{args.small:,} known URLs: worker peak RSS {small['worker_peak_rss_mb']:.1f} MB, parent "
                  f"{small['parent_peak_rss_mb']:.1f} MB (exit {small['code']})", flush=True)
            secs = add_urls(store, args.small, args.known, args.hosts, site.port)
            counts = store.counts()
            known = counts.pending + counts.in_flight + counts.crawled + counts.failed
            used = int(redis.info("memory")["used_memory"]) - base_mem
            seen_bytes, seen_keys = memory_usage(client, f"{NAME}:seen:*")
            q_bytes, q_keys = memory_usage(client, f"{NAME}:q:*")
            sample = [url_of(k, args.hosts, site.port) for k in range(args.known - 1000, args.known)]
            url_len = sum(len(u) for u in sample) / len(sample)
            line_len = sum(len(QueueEntry(u).line()) - 1 for u in sample) / len(sample)
            per_pending = q_bytes / max(1, counts.pending)
            print(f"added {args.known - args.small:,} URLs through RedisStore.add in {secs:.1f} s "
                  f"({(args.known - args.small) / secs:,.0f} URLs/s); pending {counts.pending:,}, crawled "
                  f"{counts.crawled}", flush=True)
            print(f"dedup: {seen_bytes:,} bytes in {seen_keys} fingerprint strings = "
                  f"{seen_bytes / known:.2f} bytes a known URL (target <= 16)")
            print(f"pending: {q_bytes:,} bytes in {q_keys} host queues = {per_pending:.1f} bytes a pending URL; "
                  f"URL {url_len:.1f} chars (+48 = {url_len + 48:.1f}: target), queue line {line_len:.1f} chars "
                  f"-> {per_pending - url_len:.1f} bytes over the URL, {per_pending - line_len:.1f} over the line")
            print(f"used_memory: +{used / MB:.1f} MB = {used / known:.1f} bytes a known URL (all keys)", flush=True)
            big = crawl(redis, site, "big", 600, start=False)
            print(f"{known:,} known URLs: worker peak RSS {big['worker_peak_rss_mb']:.1f} MB, parent "
                  f"{big['parent_peak_rss_mb']:.1f} MB (exit {big['code']})")
            growth = big["worker_peak_rss_mb"] - small["worker_peak_rss_mb"]
            print(f"worker RSS at {known:,} - at {args.small:,}: {growth:+.1f} MB (must not grow)")
            result.update({"small_run": small, "big_run": big, "add_seconds": secs, "pending": counts.pending,
                           "dedup_bytes_per_url": seen_bytes / known, "seen_keys": seen_keys,
                           "pending_bytes_per_url": per_pending, "url_len": url_len, "line_len": line_len,
                           "used_memory_bytes_per_url": used / known, "worker_rss_growth_mb": growth})
    finally:
        site.stop()
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    (RUN_DIR / "result.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
