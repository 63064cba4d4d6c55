#!/usr/bin/env python3
"""Scale-out of a Redis crawl: 1, 2 and 3 "machines" of 1 worker each on a site of 30 hosts.

    python bench/scaleout.py [--hosts 30] [--pages 600] [--delay 0.2] [--latency 0.02] [--repeat 1]
                             [--netns]

The site: 127.0.0.1 ... 127.0.0.H, one Python server per address (bench/redisbench.py SlowSite),
each page answered after --latency seconds (robots.txt at once); every host has --per-host pages
(`/` and /p/1.html ...), each page links to its two tree children on its own host (so every page
is reachable) and to 8 pseudo-random pages of any host.

A "machine" is one `crawl --store` process tree in its own working directory:

    machine 1:  python main.py crawl scaleout http://127.0.0.1:PORT/ ... http://127.0.0.H:PORT/
                    --store redis://127.0.0.1:RPORT/0 --workers 1 --delay D --max-pages N
                    --max-depth 100
    machine k:  the same without the START_URLs (joins), started once the crawl is in Redis

For M = 1, 2, 3 (interleaved over --repeat rounds; Redis flushed before each run) it prints,
from the server's own log (arrival time of each request):

    pages/s      page requests / span (first to last page request seen by the server)
    wall pages/s crawled pages (Redis's count) / wall time from machine 1's start to the last exit
    steady       page requests / time, from the moment every machine has sent its first request
                 (a joining machine first starts Python, its worker, and takes its share of hosts,
                 ~2 s on a loaded 2-core machine, while the first one crawls) to the last one
    min gap      the smallest gap between two requests to one host (robots.txt included), against
                 --delay: politeness across machines

then the ratios 3÷1 (target >= 2.7) and 2÷1 of the medians. The crawl is CPU-bound on this
machine (a 20 ms page, then parsing), so the ratio says how well machines add up; with H hosts the
politeness limit H / delay (150 pages/s for 30 hosts at 0.2 s) caps every figure.

With --netns (root), each machine runs in a network namespace of its own (``ip netns exec``),
redis-server in another and the site in a third, on 198.18.0.x addresses over veth pairs and a
bridge (tests/netns.py's layout): the machines share no loopback; the figures are otherwise the
same. The namespaces are deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import measure
from measure import OUT_DIR, spider_cmd
from redisbench import Redis, SlowSite, host_gaps

RUN_DIR = OUT_DIR / "scaleout"
NAME = "scaleout"
TARGET_3 = 2.7


def make_page(addrs: List[str], per_host: int):
    """Host h (1-based) is ``addrs[h - 1]``; the pages do not depend on the addresses."""
    hosts, number = len(addrs), {a: i + 1 for i, a in enumerate(addrs)}

    def page(addr: str, path: str, port: int) -> Optional[bytes]:
        h = number[addr]
        if path == "/":
            i = 0
        elif path.startswith("/p/") and path.endswith(".html") and path[3:-5].isdigit():
            i = int(path[3:-5])
        else:
            return None
        if i >= per_host:
            return None
        rng = random.Random(h * 100_003 + i)
        links = [f"/p/{c}.html" for c in (2 * i + 1, 2 * i + 2) if c < per_host]
        for _ in range(8):
            links.append(f"http://{addrs[rng.randint(1, hosts) - 1]}:{port}/p/{rng.randrange(1, per_host)}.html")
        body = "".join(f'<p>text {k} <a href="{u}">link</a></p>\n' for k, u in enumerate(links))
        return (f"<!DOCTYPE html><html><head><title>{h}/{i}</title></head><body>\n{body}"
                f"{'lorem ipsum ' * 200}</body></html>").encode()
    return page


def under_delay(reqs, args: argparse.Namespace, port: int, fetched: Dict[str, tuple]) -> List[Dict[str, object]]:
    """Each gap under the delay: the host, the gap, both paths, the worker pid that fetched each
    and the first request's response time, both from the crawl's fetch log in Redis. The server
    logs a request when its thread reads it: a request read late (the server's threads waiting
    for the CPU) shows a long response time, and its log time is late by at most that time minus
    the page latency. A gap is "server lag" when that lateness covers its shortfall."""
    last: Dict[str, tuple] = {}
    out: List[Dict[str, object]] = []
    for t, addr, path in sorted(reqs):
        if addr in last and t - last[addr][0] < args.delay - args.tolerance:
            (pa, ms), (pb, _) = (fetched.get(f"http://{addr}:{port}{p}", ("?", 0.0)) for p in (last[addr][1], path))
            gap = t - last[addr][0]
            lag = max(0.0, ms / 1000 - args.latency)
            out.append({"host": addr, "gap": round(gap, 4), "paths": [last[addr][1], path], "pids": [pa, pb],
                        "first_ms": ms, "server_lag": gap + lag >= args.delay - args.tolerance})
        last[addr] = (t, path)
    return out


def steady_rate(reqs, pages: List[float], fetched: Dict[str, tuple], port: int, m: int) -> tuple:
    """Page requests per second once every machine is crawling: from the moment the last of the
    ``m`` workers sent its first request (a joining machine starts its Python, its worker and
    takes its share of hosts while the first one crawls already) to the last page request.
    Returns (rate, seconds from the first page request to that moment)."""
    first: Dict[str, float] = {}
    for t, addr, path in sorted(reqs):
        pid = fetched.get(f"http://{addr}:{port}{path}", ("?",))[0]
        if pid != "?":
            first.setdefault(pid, t)
    if len(first) < m or len(pages) < 2:
        return 0.0, None
    start = max(first.values())
    after = [t for t in pages if t >= start]
    rate = (len(after) - 1) / (max(after) - start) if len(after) > 1 and max(after) > start else 0.0
    return round(rate, 2), round(start - min(pages), 3)


def netns_layout(hosts: int, machines: int):
    """--netns: tests/netns.py's layout: a namespace for Redis, one for the site (the H hosts are
    its 198.18.0.x addresses), one per machine; this process's sockets in the hub."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from netns import Net, why_not
    why = why_not()
    if why:
        raise SystemExit(f"--netns: {why}")
    net = Net()
    redis_ns = net.add("r")
    site_ns = net.add("s", extra=hosts - 1)
    machine_ns = [net.add(f"m{k + 1}") for k in range(machines)]
    net.enter(net.hub)
    return net, redis_ns, site_ns, machine_ns


def run_machines(m: int, args: argparse.Namespace, redis: Redis, site: SlowSite, round_no: int,
                 wraps: Optional[List[List[str]]] = None) -> Dict[str, object]:
    client = redis.client()
    client.flushall()
    site.clear()
    base = RUN_DIR / f"m{m}-r{round_no}"
    shutil.rmtree(base, ignore_errors=True)
    common = ["--store", redis.url, "--workers", "1", "--delay", str(args.delay),
              "--max-pages", str(args.pages), "--max-depth", "100"]
    urls = [f"http://{a}:{site.port}/" for a in site.addrs]
    procs: List[subprocess.Popen] = []
    t0 = time.monotonic()
    for k in range(m):
        cwd = base / f"machine{k + 1}"
        cwd.mkdir(parents=True)
        cmd = (wraps[k] if wraps else []) + spider_cmd("crawl", NAME, *(urls if k == 0 else []), *common)
        if k > 0:   # join once the crawl is in Redis (its settings are saved before it starts)
            end = time.monotonic() + 30
            while not client.keys(f"{NAME}:*") and time.monotonic() < end:
                time.sleep(0.05)
        with open(cwd / "stdout.log", "wb") as out, open(cwd / "stderr.log", "wb") as err:
            procs.append(subprocess.Popen(cmd, cwd=str(cwd), stdout=out, stderr=err,
                                          stdin=subprocess.DEVNULL, start_new_session=True))
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(max(1.0, args.timeout - (time.monotonic() - t0))))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            codes.append("TIMEOUT")
    wall = time.monotonic() - t0
    time.sleep(0.2)
    reqs = site.requests()
    with open(base / "requests.tsv", "w") as f:   # the server's log: arrival time, host, path
        f.writelines(f"{t:.6f}\t{a}\t{path}\n" for t, a, path in reqs)
    pages = [t for t, _, path in reqs if path != "/robots.txt"]
    span = (max(pages) - min(pages)) if len(pages) > 1 else 0.0
    crawled = int(client.hget(f"{NAME}:counts", "crawled") or 0)
    fetch = [x.decode(errors="replace") for x in client.lrange(f"{NAME}:log:fetch", 0, -1)]
    (base / "fetch.log").write_text("".join(fetch))
    fetched = {f[-1]: (f[1], float(f[4])) for f in (line.rstrip("\n").split("\t") for line in fetch)
               if len(f) >= 6 and f[4].isdigit()}   # URL -> (pid, response ms)
    steady, all_in = steady_rate(reqs, pages, fetched, site.port, m)
    under = under_delay(reqs, args, site.port, fetched)
    unexplained = sum(1 for u in under if not u["server_lag"])
    gaps = host_gaps(reqs)
    gap, where = min(gaps) if gaps else (float("inf"), "-")
    below = sum(1 for g, _ in gaps if g < args.delay - args.tolerance)
    return {"machines": m, "round": round_no, "codes": codes, "wall_s": round(wall, 3),
            "page_requests": len(pages), "span_s": round(span, 3), "crawled": crawled,
            "pages_per_s": round(len(pages) / span, 2) if span else 0.0,
            "steady_pages_per_s": steady, "all_in_s": all_in,
            "wall_pages_per_s": round(crawled / wall, 2) if wall else 0.0,
            "min_gap_s": round(gap, 4), "min_gap_host": where, "gaps": len(gaps), "gaps_below": below,
            "loadavg_1m": round(os.getloadavg()[0], 2), "under_delay": under, "unexplained": unexplained,
            "requests_per_host_max": max((sum(1 for _, a, _ in reqs if a == h) for h in site.addrs), default=0)}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=30)
    ap.add_argument("--per-host", type=int, default=100, help="pages per host")
    ap.add_argument("--pages", type=int, default=600, help="--max-pages of every run")
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--machines", default="1,2,3")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=180.0, help="per run; the machines are killed after it")
    ap.add_argument("--tolerance", type=float, default=0.002,
                    help="gaps below delay - this are counted (the server's timestamps jitter by ~1 ms)")
    ap.add_argument("--spider-dir", type=Path)
    ap.add_argument("--netns", action="store_true",
                    help="each machine, Redis and the site in a network namespace of their own (root; 198.18.0.0/24)")
    args = ap.parse_args(argv)
    if not 1 <= args.hosts <= (240 if args.netns else 254):
        ap.error("--hosts is 1..254 (127.0.0.1 .. 127.0.0.H), 1..240 with --netns")
    measure.set_spider_dir(args.spider_dir)
    counts = [int(x) for x in args.machines.split(",")]
    net, wraps = None, None
    if args.netns:
        net, redis_ns, site_ns, machine_ns = netns_layout(args.hosts, max(counts))
        wraps = [net.exec(ns) for ns in machine_ns]
        addrs = net.addrs[site_ns]
        with net.entered(site_ns):   # the servers' sockets in the site's namespace
            site = SlowSite(addrs, make_page(addrs, args.per_host), latency=args.latency, port=8080).start()
        # protected-mode no: Redis refuses other addresses than its loopback unless told; only
        # the benchmark's namespaces can reach this one.
        store = Redis(net.addr[redis_ns], 6379, net.exec(redis_ns), **{"protected-mode": "no"})
    else:
        addrs = [f"127.0.0.{i}" for i in range(1, args.hosts + 1)]
        site = SlowSite(addrs, make_page(addrs, args.per_host), latency=args.latency).start()
        store = Redis()
    results: List[Dict[str, object]] = []
    try:
        with store as redis:
            print(f"site: {args.hosts} hosts x {args.per_host} pages on port {site.port}, {args.latency * 1000:.0f} ms "
                  f"a page; redis at {redis.url}; --delay {args.delay}, --max-pages {args.pages}", flush=True)
            for r in range(1, args.repeat + 1):
                for m in counts:
                    res = run_machines(m, args, redis, site, r, wraps)
                    results.append(res)
                    print(f"  round {r}, {m} machine(s): {res['pages_per_s']} pages/s (server span "
                          f"{res['span_s']} s, {res['page_requests']} page requests), wall {res['wall_s']} s "
                          f"= {res['wall_pages_per_s']} pages/s, {res['steady_pages_per_s']} pages/s once all "
                          f"crawl ({res['all_in_s']} s in), min gap {res['min_gap_s']} s "
                          f"({res['min_gap_host']}; {res['gaps_below']} of {res['gaps']} gaps below delay - tolerance), "
                          f"load {res['loadavg_1m']}, exit {res['codes']}", flush=True)
                    for u in res["under_delay"]:
                        print(f"    gap under the delay: {u['host']} {u['gap']} s {u['paths'][0]} (pid {u['pids'][0]}, "
                              f"{u['first_ms']:.0f} ms) -> {u['paths'][1]} (pid {u['pids'][1]}): "
                              f"{'server lag covers it' if u['server_lag'] else 'NOT explained by server lag'}",
                              flush=True)
    finally:
        site.stop()
        if net is not None:
            net.close()
    med = {m: statistics.median(r["pages_per_s"] for r in results if r["machines"] == m) for m in counts}
    smed = {m: statistics.median(r["steady_pages_per_s"] for r in results if r["machines"] == m) for m in counts}
    wmed = {m: statistics.median(r["wall_pages_per_s"] for r in results if r["machines"] == m) for m in counts}
    gap = min(r["min_gap_s"] for r in results)
    below = sum(r["gaps_below"] for r in results)
    unexplained = sum(r["unexplained"] for r in results)
    print(f"\n{'machines':>8} {'pages/s':>8} {'wall pages/s':>13} {'steady pages/s':>15}")
    for m in counts:
        print(f"{m:>8} {med[m]:>8.1f} {wmed[m]:>13.1f} {smed[m]:>15.1f}")
    summary: Dict[str, object] = {"bench": "scaleout", "gaps_below": below, "unexplained": unexplained, "hosts": args.hosts, "delay": args.delay,
                                  "latency": args.latency, "pages": args.pages, "runs": results,
                                  "median_pages_per_s": med, "median_steady_pages_per_s": smed, "min_gap_s": gap,
                                  "politeness_limit": args.hosts / args.delay}
    for m in counts:
        if m != 1 and 1 in med and med[1]:
            ratio = med[m] / med[1]
            summary[f"ratio_{m}_1"] = round(ratio, 3)
            target = f" (target >= {TARGET_3})" if m == 3 else ""
            summary[f"steady_ratio_{m}_1"] = round(smed[m] / smed[1], 3) if smed[1] else None
            print(f"pages/s {m} / 1 machine: {ratio:.2f}{target}; wall-time figure {wmed[m] / wmed[1]:.2f}; "
                  f"once all machines crawl {smed[m] / smed[1] if smed[1] else 0:.2f}")
    print(f"smallest per-host gap seen by the server: {gap:.4f} s against --delay {args.delay} "
          f"({below} gaps below {args.delay - args.tolerance:.3f} s in all runs, {unexplained} of them not "
          f"covered by the server's own lag); politeness limit "
          f"{args.hosts / args.delay:.0f} pages/s")
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    (RUN_DIR / "result.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
