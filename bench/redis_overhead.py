#!/usr/bin/env python3
"""The cost of the Redis store on one machine: the same crawl with the file store and with Redis.

    python bench/redis_overhead.py [--pages 2000] [--workers 4] [--repeat 3]

The bench site of bench/throughput.py (bench/site.py generates it and starts a private nginx on
127.0.0.1), `--delay 0`, 4 workers. Each round runs, one after the other (interleaved, so that
the shared machine's noise spreads over both):

    file   python main.py crawl bench URL --workers 4 --delay 0 --max-depth 1000 --max-pages 2N
               --projects-dir bench/out/redis_overhead/file-rR/projects
    redis  python main.py crawl bench URL --workers 4 --delay 0 --max-depth 1000 --max-pages 2N
               --store redis://127.0.0.1:RPORT/0        (cwd bench/out/redis_overhead/redis-rR,
                                                         Redis flushed before the run)

and prints pages/s of each (pages ÷ wall time, start-up and shut-down included), the ratio of the
medians redis ÷ file (target >= 0.8), and from Redis's own INFO (deltas around each Redis run):
(`--peer-dir DIR`: a third crawl each round, the Redis store of another checkout, e.g. main's
code as `git archive main | tar -x -C DIR`, so a change is measured beside its peer in one run;
this worktree's own crawls then run from a snapshot of it too, with `--spider-dir`.)

    commands / page    total_commands_processed (client commands and the commands scripts call)
    scripts / page     EVALSHA calls (each one atomic state change, one round trip)
    Redis CPU / page   used_cpu_sys + used_cpu_user, in ms, and the pages/s one Redis core would
                       sustain at that cost (1000 / ms per page)

and, from one more Redis run under MONITOR (slower, not timed), the commands clients sent per page
by name (a pipeline or MULTI/EXEC of k commands is one round trip carrying k commands, so this is
an upper bound on round trips per page; target <= 3). A worker's page is scripts only (the claim,
which carries the previous page's settle and log lines; one question for the page's text and
links; the add of its new links): EVALSHA a page is its round trips, plus the lease thread's
renewal once a second per worker. The other commands MONITOR lists are that thread's heartbeat
and share of hosts (a few a second per worker, however many pages) and the parent's.
tests/test_redisstore.py counts the round trips of a crawl on the connection itself.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Optional

import measure
from measure import OUT_DIR, count_lines, run_measured, spider_cmd
from redisbench import Monitor, Redis, redis_usage

SITE = measure.load_site_module()
RUN_DIR = OUT_DIR / "redis_overhead"
TARGET_RATIO = 0.8
TARGET_TRIPS = 3.0


def crawl_args(params, args: argparse.Namespace) -> List[str]:
    return ["crawl", "bench", params.start_url, "--workers", str(args.workers), "--delay", "0",
            "--max-depth", "1000", "--max-pages", str(2 * params.total_pages)]


def run_file(params, args: argparse.Namespace, r: int) -> Dict[str, float]:
    base = RUN_DIR / f"file-r{r}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    cmd = spider_cmd(*crawl_args(params, args), "--projects-dir", str(base / "projects"))
    res = run_measured(cmd, cwd=base, timeout=args.timeout, log_dir=base)
    pages = count_lines(base / "projects" / "bench" / "crawled.txt")
    return {"pages": pages, "wall": res.wall, "pages_per_s": pages / res.wall, "code": res.returncode,
            "cpu_s": res.cpu}


def run_redis(params, args: argparse.Namespace, redis: Redis, r: int, monitor: bool = False) -> Dict[str, float]:
    base = RUN_DIR / f"redis-r{r}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    client = redis.client()
    client.flushall()
    mon = Monitor(redis) if monitor else None
    before = redis_usage(redis)
    res = run_measured(spider_cmd(*crawl_args(params, args), "--store", redis.url), cwd=base,
                       timeout=args.timeout, log_dir=base)
    after = redis_usage(redis)
    if mon is not None:
        mon.stop()
    pages = int(client.hget("bench:counts", "crawled") or 0)
    d = {k: after[k] - before[k] for k in before}
    out: Dict[str, object] = {"pages": pages, "wall": res.wall, "pages_per_s": pages / res.wall,
                              "code": res.returncode, "cpu_s": res.cpu,
                              "commands_per_page": d["commands"] / max(1, pages),
                              "scripts_per_page": d["script_calls"] / max(1, pages),
                              "redis_cpu_ms_per_page": 1000 * d["cpu"] / max(1, pages)}
    if mon is not None:
        out["client_cmds_per_page"] = sum(mon.client_cmds.values()) / max(1, pages)
        out["client_cmds"] = dict(sorted(mon.client_cmds.items(), key=lambda kv: -kv[1]))
        out["script_inner_per_page"] = sum(mon.script_cmds.values()) / max(1, pages)
        out["script_cmds_per_page"] = {k: round(v / max(1, pages), 2) for k, v in
                                       sorted(mon.script_cmds.items(), key=lambda kv: -kv[1])}
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=2000, help="site size (content pages; +101 hubs and index)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds (0: the MONITOR run only)")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--no-monitor", action="store_true", help="skip the MONITOR run")
    ap.add_argument("--quiet-wait", type=float, default=10.0)
    ap.add_argument("--spider-dir", type=Path)
    ap.add_argument("--peer-dir", type=Path, help="also crawl with the Redis store of this checkout, each round")
    args = ap.parse_args(argv)
    measure.set_spider_dir(args.spider_dir)
    own_dir = measure.SPIDER_DIR
    params = SITE.prepare_site(args.pages, SITE.DEFAULT_SITE_DIR, 0)
    files: List[Dict[str, float]] = []
    reds: List[Dict[str, float]] = []
    peers: List[Dict[str, float]] = []
    mon: Optional[Dict[str, object]] = None
    with SITE.Nginx(SITE.DEFAULT_SITE_DIR, params.port, 1), Redis() as redis:
        SITE.check_rate(params)
        print(f"site: {params.total_pages} pages on {params.origin}; redis on {redis.port}; "
              f"{args.workers} workers, --delay 0", flush=True)
        for r in range(1, args.repeat + 1):
            for kind in ("file", "redis") + (("peer",) if args.peer_dir else ()):
                measure.wait_quiet(args.quiet_wait)
                measure.set_spider_dir(args.peer_dir if kind == "peer" else own_dir)
                res = run_file(params, args, r) if kind == "file" else run_redis(params, args, redis, r)
                {"file": files, "redis": reds, "peer": peers}[kind].append(res)
                extra = (f", {res['commands_per_page']:.2f} commands, {res['scripts_per_page']:.2f} scripts, "
                         f"{res['redis_cpu_ms_per_page']:.3f} ms Redis CPU a page" if kind != "file" else "")
                print(f"  round {r} {kind:5}: {res['pages']} pages in {res['wall']:.2f} s = "
                      f"{res['pages_per_s']:.1f} pages/s, crawler CPU {res['cpu_s']:.1f} s, exit {res['code']}{extra}",
                      flush=True)
        measure.set_spider_dir(own_dir)
        if not args.no_monitor:
            mon = run_redis(params, args, redis, 0, monitor=True)
            print(f"  MONITOR run (not timed): {mon['client_cmds_per_page']:.2f} client commands a page "
                  f"({mon['client_cmds']}), {mon['script_inner_per_page']:.1f} commands inside scripts a page "
                  f"({mon['script_cmds_per_page']})", flush=True)
    if not files:
        return 0
    fmed = statistics.median(x["pages_per_s"] for x in files)
    rmed = statistics.median(x["pages_per_s"] for x in reds)
    cmds = statistics.median(x["commands_per_page"] for x in reds)
    scripts = statistics.median(x["scripts_per_page"] for x in reds)
    cpu_ms = statistics.median(x["redis_cpu_ms_per_page"] for x in reds)
    print(f"\nfile store  {fmed:.1f} pages/s (median of {len(files)})")
    print(f"redis store {rmed:.1f} pages/s (median of {len(reds)})")
    print(f"redis / file: {rmed / fmed:.2f} (target >= {TARGET_RATIO}); by round: "
          + ", ".join(f"{x['pages_per_s'] / y['pages_per_s']:.2f}" for x, y in zip(reds, files)))
    if peers:
        pmed = statistics.median(x["pages_per_s"] for x in peers)
        print(f"peer ({args.peer_dir}) redis store {pmed:.1f} pages/s: peer / file {pmed / fmed:.2f}; by round: "
              + ", ".join(f"{x['pages_per_s'] / y['pages_per_s']:.2f}" for x, y in zip(peers, files))
              + f"; {statistics.median(x['scripts_per_page'] for x in peers):.2f} scripts, "
              f"{statistics.median(x['redis_cpu_ms_per_page'] for x in peers):.3f} ms Redis CPU a page")
    print(f"Redis commands a page (scripts' inner calls included): {cmds:.2f}; EVALSHA a page: {scripts:.2f} "
          f"(a worker's round trips a page, lease renewals included; target <= {TARGET_TRIPS})")
    if mon is not None:
        print(f"client commands a page (MONITOR; upper bound on round trips): {mon['client_cmds_per_page']:.2f} "
              f"(target <= {TARGET_TRIPS})")
    print(f"Redis CPU a page: {cpu_ms:.3f} ms -> one Redis core sustains ~{1000 / cpu_ms:,.0f} pages/s "
          f"(~{1000 / cpu_ms / rmed:.0f} machines like this one)" if cpu_ms > 0 else "Redis CPU a page: 0")
    summary = {"bench": "redis_overhead", "site_pages": params.total_pages, "workers": args.workers,
               "file": files, "redis": reds, "peer": peers, "monitor": mon, "file_median": fmed, "redis_median": rmed,
               "ratio": rmed / fmed, "commands_per_page": cmds, "scripts_per_page": scripts,
               "redis_cpu_ms_per_page": cpu_ms}
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    (RUN_DIR / "result.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
