#!/usr/bin/env python3
"""A polite crawl of many local hosts: how close does spider get to the politeness limit?

    python bench/polite.py [--hosts 50] [--workers 4] [--max-pages 1500] [--pages-per-host 200]

Serves `--hosts` sites on 127.0.0.1 ... 127.0.0.H (Linux routes all of 127.0.0.0/8 to loopback),
one port shared by every address, with a private nginx (a threaded Python server per address when
nginx is missing, or with --server python). Every host serves the same generated site: `/` and
/p/1.html ... /p/{P-1}.html, ~5 KB each, ~10 relative links each, all within the host and all
reachable from `/` (page i links to its "children" 3i+1 .. 3i+3, plus pseudo-random pages and `/`).
Then it runs

    main.py crawl polite http://127.0.0.1:PORT/ ... http://127.0.0.H:PORT/ --workers W --delay D
            --max-depth 100 --max-pages N --scope host --projects-dir bench/out/polite/projects

in its own session (killed with its whole process group after --timeout) and reads nginx's access
log (`$msec $request_time $server_addr ...`: request start = msec - request_time, 1 ms
resolution), so every timing below is measured server-side:

    span          first to last page request seen by the server (/robots.txt is not a page)
    pages/s raw   page requests / span
    pages/s       (page requests - hosts) / span: with n_h requests to host h, a polite crawler
                  needs span >= (n_h - 1) * delay for every h, so this figure is <= hosts / delay
                  (the politeness limit) for any polite crawl, and equals it for a perfect one. The
                  raw figure is not bounded that way (fencepost: 30 requests per host fit in 29 s).
    ratio         pages/s / (hosts / delay); target >= 0.95
    gaps          per host, the gaps between consecutive requests (robots.txt included); the
                  smallest over all hosts and the number below delay - tolerance (default 0.99 s)
                  check the politeness itself.

Prints a compact table and one JSON line (also written to bench/out/polite/result.json).
Only loopback addresses are used; every wait is bounded.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Optional, Protocol, Sequence, Tuple

import measure
from measure import OUT_DIR, count_lines, fmt, spider_cmd

SITE = measure.load_site_module()   # bench/site.py: find_nginx()
RUN_DIR = OUT_DIR / "polite"
SITE_DIR = RUN_DIR / "site"
PROJECT = "polite"
TARGET_RATIO = 0.95
CHILDREN = 3          # tree links per page: page i links to 3i+1 .. 3i+3 (reachability from /)
PARAMS_FILE = ".params.json"


# --------------------------------------------------------------------------- the site

@dataclass(frozen=True)
class SiteSpec:
    pages: int = 200          # per host, `/` included
    page_bytes: int = 5_000
    links: int = 10
    version: int = 1


def page_path(i: int) -> str:
    """Absolute path of page i (0 is the home page)."""
    return "/" if i == 0 else f"/p/{i}.html"


def href(from_page: int, target: int, style: int) -> str:
    """A link to `target` from `from_page` in one of three styles (relative, ../, absolute path)."""
    if target == 0:
        return "/" if from_page == 0 or style != 0 else "../"
    if from_page == 0:
        return f"p/{target}.html" if style == 0 else f"/p/{target}.html"
    return (f"{target}.html", f"../p/{target}.html", f"/p/{target}.html")[style % 3]


def page_links(i: int, spec: SiteSpec) -> List[int]:
    """Targets of page i: its tree children (so every page is reachable from `/`), pseudo-random
    other pages up to spec.links, and the home page."""
    rng = random.Random(i * 7919 + 3)
    targets = [c for c in range(CHILDREN * i + 1, CHILDREN * i + CHILDREN + 1) if c < spec.pages]
    while len(targets) < spec.links - 1 and spec.pages > 1:
        targets.append(rng.randrange(1, spec.pages))
    return targets + [0]


def render_page(i: int, spec: SiteSpec, words: Sequence[str]) -> str:
    rng = random.Random(i)
    head = (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Page {i}</title></head>'
            f"<body>\n<h1>Page {i}</h1>\n")
    anchors = [f'<a href="{href(i, t, j)}">link {j}</a>' for j, t in enumerate(page_links(i, spec))]
    parts = [head]
    size = len(head)
    k = 0
    while size < spec.page_bytes - 20 or k < len(anchors):   # bounded: grows by >= 1 each time
        para = f"<p>{' '.join(rng.choices(words, k=30))} {anchors[k] if k < len(anchors) else ''}</p>\n"
        parts.append(para)
        size += len(para)
        k += 1
    parts.append("</body></html>\n")
    return "".join(parts)


def generate_site(spec: SiteSpec, site_dir: Path = SITE_DIR) -> None:
    """Write the site (shared by every host: its links are relative) unless already there."""
    params = site_dir / PARAMS_FILE
    if params.exists() and params.read_text() == json.dumps(asdict(spec)):
        return
    rng = random.Random(12345)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(500)]
    tmp = site_dir.with_name(site_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "p").mkdir(parents=True)
    for i in range(spec.pages):
        name = tmp / "index.html" if i == 0 else tmp / "p" / f"{i}.html"
        name.write_text(render_page(i, spec, words))
    (tmp / PARAMS_FILE).write_text(json.dumps(asdict(spec)))
    shutil.rmtree(site_dir, ignore_errors=True)
    tmp.rename(site_dir)


# --------------------------------------------------------------------------- addresses and port

def host_addrs(count: int) -> List[str]:
    if not 1 <= count <= 254:
        raise SystemExit("--hosts must be between 1 and 254")
    return [f"127.0.0.{n}" for n in range(1, count + 1)]


def port_free_on(addr: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((addr, port))
        except OSError:
            return False
    return True


def choose_port(addrs: Sequence[str], attempts: int = 20) -> int:
    """A port free on every address (bounded number of attempts)."""
    for _ in range(attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((addrs[0], 0))
            port = int(s.getsockname()[1])
        if all(port_free_on(a, port) for a in addrs):
            return port
    raise SystemExit(f"no port free on all of {addrs[0]} .. {addrs[-1]} after {attempts} attempts")


def http_get_status(addr: str, port: int, path: str = "/", timeout: float = 1.0) -> int:
    try:
        conn = http.client.HTTPConnection(addr, port, timeout=timeout)
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return resp.status
    except OSError:
        return 0


def wait_all_up(addrs: Sequence[str], port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    pending = list(addrs)
    while pending and time.monotonic() < deadline:
        pending = [a for a in pending if http_get_status(a, port) != 200]
        if pending:
            time.sleep(0.05)
    if pending:
        raise RuntimeError(f"{len(pending)} host(s) do not answer, e.g. http://{pending[0]}:{port}/")


# --------------------------------------------------------------------------- servers

@dataclass(frozen=True)
class Request:
    t: float        # Unix time the request started, server-side
    host: str       # server address
    uri: str
    status: int


class Servers(Protocol):
    kind: str

    def start(self) -> None: ...
    def mark(self) -> None: ...               # requests before this are not reported
    def requests(self) -> List[Request]: ...
    def stop(self) -> None: ...


NGINX_CONF = """\
# Generated by bench/polite.py: a private nginx, never the system one.
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    types {{ text/html html; }}
    default_type application/octet-stream;
    log_format polite '$msec $request_time $server_addr $status $body_bytes_sent $request_uri';
    access_log {prefix}/access.log polite;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    client_body_temp_path {prefix}/tmp/client;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
{servers}
}}
"""
SERVER_BLOCK = "    server {{ listen {addr}:{port}; root {root}; index index.html; }}"


class NginxServers:
    """One nginx, one `server` block per address, per-request timestamps in its access log."""
    kind = "nginx"

    def __init__(self, addrs: Sequence[str], port: int, root: Path, prefix: Path) -> None:
        self.addrs, self.port, self.root, self.prefix = list(addrs), port, root.resolve(), prefix.resolve()
        self.proc: Optional[subprocess.Popen] = None
        self.offset = 0

    @property
    def log_path(self) -> Path:
        return self.prefix / "access.log"

    def write_conf(self) -> Path:
        shutil.rmtree(self.prefix, ignore_errors=True)
        (self.prefix / "tmp").mkdir(parents=True)
        blocks = "\n".join(SERVER_BLOCK.format(addr=a, port=self.port, root=self.root) for a in self.addrs)
        conf = self.prefix / "nginx.conf"
        conf.write_text(NGINX_CONF.format(prefix=self.prefix, servers=blocks))
        return conf

    def start(self) -> None:
        conf = self.write_conf()
        with open(self.prefix / "stderr.log", "wb") as log:
            self.proc = subprocess.Popen([SITE.find_nginx(), "-p", str(self.prefix), "-e",
                                          str(self.prefix / "error.log"), "-c", str(conf)],
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_all_up(self.addrs, self.port)
        except RuntimeError:
            self.stop()
            raise RuntimeError(f"nginx failed: {(self.prefix / 'stderr.log').read_text()[-1500:]}")

    def mark(self) -> None:
        self.offset = self.log_path.stat().st_size if self.log_path.exists() else 0

    def requests(self) -> List[Request]:
        out: List[Request] = []
        with open(self.log_path, "rb") as f:
            f.seek(self.offset)
            for line in f:
                parts = line.decode("utf-8", "replace").split()
                if len(parts) >= 6:
                    out.append(Request(float(parts[0]) - float(parts[1]), parts[2], parts[5], int(parts[3])))
        return out

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class PythonServers:
    """Fallback: a ThreadingHTTPServer per address, logging the arrival time of each request."""
    kind = "python"

    def __init__(self, addrs: Sequence[str], port: int, root: Path) -> None:
        self.addrs, self.port, self.root = list(addrs), port, root.resolve()
        self.log: List[Request] = []
        self.lock = threading.Lock()
        self.servers: List[ThreadingHTTPServer] = []
        self.threads: List[threading.Thread] = []

    def handler(self) -> type:
        owner = self

        class Handler(SimpleHTTPRequestHandler):
            protocol_version = "HTTP/1.1"   # keep-alive (SimpleHTTPRequestHandler sends Content-Length)

            def parse_request(self) -> bool:
                t = time.time()
                ok = super().parse_request()
                if ok:
                    self._t = t
                return ok

            def log_request(self, code: object = "-", size: object = "-") -> None:
                status = int(code) if isinstance(code, int) else 0   # HTTPStatus is an int
                req = Request(getattr(self, "_t", time.time()), self.server.server_address[0], self.path, status)
                with owner.lock:
                    owner.log.append(req)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def start(self) -> None:
        handler = functools.partial(self.handler(), directory=str(self.root))
        ThreadingHTTPServer.daemon_threads = True
        for addr in self.addrs:
            srv = ThreadingHTTPServer((addr, self.port), handler)
            th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
            th.start()
            self.servers.append(srv)
            self.threads.append(th)
        wait_all_up(self.addrs, self.port)

    def mark(self) -> None:
        with self.lock:
            self.log.clear()

    def requests(self) -> List[Request]:
        with self.lock:
            return list(self.log)

    def stop(self) -> None:
        for srv in self.servers:
            srv.shutdown()
            srv.server_close()
        for th in self.threads:
            th.join(5)


def make_servers(kind: str, addrs: Sequence[str], port: int) -> Servers:
    have_nginx = True
    try:
        SITE.find_nginx()
    except SystemExit:
        have_nginx = False
    if kind == "nginx" or (kind == "auto" and have_nginx):
        return NginxServers(addrs, port, SITE_DIR, RUN_DIR / "nginx")
    return PythonServers(addrs, port, SITE_DIR)


# --------------------------------------------------------------------------- the crawl

@dataclass
class CrawlRun:
    cmd: List[str]
    wall: float
    returncode: Optional[int]
    timed_out: bool


def crawl_cmd(urls: Sequence[str], args: argparse.Namespace, projects: Path) -> List[str]:
    return spider_cmd("crawl", PROJECT, *urls, "--workers", str(args.workers), "--delay", str(args.delay),
                      "--max-depth", str(args.max_depth), "--max-pages", str(args.max_pages),
                      "--scope", "host", "--projects-dir", str(projects))


def stop_crawl(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM the crawl's parent only (its graceful stop, like Ctrl-C), then SIGKILL the whole
    process group (the session started for it) if it is still there after `grace` seconds.

    Not SIGTERM to the whole group: workers then die with SIG_DFL while waiting on the shared
    multiprocessing Event, and the parent's stop_event.set() blocks for ever (seen here).
    Not psutil either: reaping the parent through psutil would leave Popen a fake exit code 0."""
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)   # the workers too, even if the parent is gone
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass


def run_crawl(cmd: List[str], timeout: float, log_dir: Path) -> CrawlRun:
    """Run cmd in its own session; after `timeout` s stop it and kill its process group."""
    with open(log_dir / "stdout.log", "wb") as out, open(log_dir / "stderr.log", "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=str(measure.REPO_DIR), stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            stop_crawl(proc)
        except BaseException:
            stop_crawl(proc, grace=2.0)
            raise
        wall = time.perf_counter() - t0
    return CrawlRun(cmd, wall, proc.poll(), timed_out)


# --------------------------------------------------------------------------- analysis

def by_host(reqs: Sequence[Request]) -> Dict[str, List[float]]:
    times: Dict[str, List[float]] = {}
    for r in reqs:
        times.setdefault(r.host, []).append(r.t)
    for ts in times.values():
        ts.sort()
    return times


def host_gaps(times: Dict[str, List[float]]) -> Dict[str, List[float]]:
    return {h: [b - a for a, b in zip(ts, ts[1:])] for h, ts in times.items()}


def quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def ramp(pages: Sequence[Request]) -> Tuple[float, float]:
    """(seconds until every host had its first page request, page requests/s after that)."""
    if not pages:
        return float("nan"), float("nan")
    t0, t_end = min(r.t for r in pages), max(r.t for r in pages)
    firsts: Dict[str, float] = {}
    for r in pages:
        firsts[r.host] = min(firsts.get(r.host, r.t), r.t)
    t_ramp = max(firsts.values())
    after = sum(1 for r in pages if r.t > t_ramp)
    return t_ramp - t0, (after / (t_end - t_ramp) if t_end > t_ramp else float("nan"))


def analyse(reqs: Sequence[Request], hosts: int, delay: float, tolerance: float) -> Dict[str, object]:
    times = by_host(reqs)                       # every request, robots.txt too, for the gaps
    gaps = host_gaps(times)
    all_gaps = [g for gs in gaps.values() for g in gs]
    pages = [r for r in reqs if r.uri != "/robots.txt"]   # the rate counts pages only
    n = len(pages)
    page_hosts = len({r.host for r in pages})
    span = (max(r.t for r in pages) - min(r.t for r in pages)) if n > 1 else 0.0
    limit = hosts / delay if delay > 0 else float("inf")
    steady = (n - page_hosts) / span if span > 0 else float("nan")
    worst = min(((min(gs), h) for h, gs in gaps.items() if gs), default=(float("nan"), "-"))
    threshold = delay - tolerance
    counts = [len(ts) for ts in times.values()]   # per host, robots.txt included
    ramp_s, after_ramp = ramp(pages)
    seen = [(r.host, r.uri) for r in reqs]
    return {
        "requests": len(reqs),
        "page_requests": n,
        "robots_requests": len(reqs) - n,
        "hosts_seen": len(times),
        "requests_per_host_min": min(counts, default=0),
        "requests_per_host_max": max(counts, default=0),
        "non_200": sum(1 for r in reqs if r.status != 200),
        "duplicate_requests": len(seen) - len(set(seen)),
        "span_s": round(span, 3),
        "pages_per_s_raw": round(n / span, 3) if span > 0 else None,
        "pages_per_s": round(steady, 3),
        "limit_per_s": limit,
        "ratio": round(steady / limit, 4),
        "ratio_raw": round(n / span / limit, 4) if span > 0 else None,
        "ramp_s": round(ramp_s, 3),
        "pages_per_s_after_ramp": round(after_ramp, 3),
        "min_gap_s": round(worst[0], 4),
        "min_gap_host": worst[1],
        "gaps": len(all_gaps),
        "gaps_below": sum(1 for g in all_gaps if g < threshold),
        "gap_threshold_s": round(threshold, 4),
        "gap_median_s": round(statistics.median(all_gaps), 4) if all_gaps else None,
        "gap_p90_s": round(quantile(all_gaps, 0.9), 4),
        "gap_max_s": round(max(all_gaps), 4) if all_gaps else None,
    }


def fetch_log_summary(path: Path) -> Dict[str, object]:
    """Requests per status and per worker pid from the client side (fetch.log)."""
    statuses: Dict[str, int] = {}
    pids: Dict[str, int] = {}
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            parts = line.split("\t")
            if len(parts) >= 6 and not line.startswith("#"):
                statuses[parts[2]] = statuses.get(parts[2], 0) + 1
                pids[parts[1]] = pids.get(parts[1], 0) + 1
    return {"fetch_log_lines": sum(statuses.values()), "fetch_status": statuses,
            "requests_per_worker": sorted(pids.values(), reverse=True)}


# --------------------------------------------------------------------------- report

def report(result: Dict[str, object]) -> None:
    r = result
    ok = r["ratio"] >= TARGET_RATIO if r["ratio"] == r["ratio"] else False  # NaN-safe
    rows: List[Tuple[str, str]] = [
        ("server", f"{r['server']} on 127.0.0.1 .. 127.0.0.{r['hosts']}:{r['port']}"),
        ("pages crawled", f"{r['crawled']} (failed {r['failed']}, budget {r['max_pages']})"),
        ("server requests", f"{r['requests']} ({r['robots_requests']} robots.txt) on {r['hosts_seen']} hosts "
                            f"({r['requests_per_host_min']}"
                            f"..{r['requests_per_host_max']} per host, non-200 {r['non_200']}, "
                            f"duplicates {r['duplicate_requests']})"),
        ("span (server)", f"{fmt(r['span_s'], '.2f')} s, first to last page request"),
        ("command wall", f"{fmt(r['wall_s'], '.2f')} s (exit {r['returncode']}"
                         f"{', TIMED OUT' if r['timed_out'] else ''})"),
        ("pages/s", f"{fmt(r['pages_per_s'], '.2f')}  (raw requests/span {fmt(r['pages_per_s_raw'], '.2f')}, "
                    f"crawled/command wall {fmt(r['pages_per_s_wall'], '.2f')})"),
        ("ratio / limit", f"{fmt(r['ratio'], '.3f')} of {fmt(r['limit_per_s'], '.0f')}/s "
                          f"(target >= {TARGET_RATIO}: {'OK' if ok else 'MISSED'}; raw {fmt(r['ratio_raw'], '.3f')})"),
        ("ramp", f"{fmt(r['ramp_s'], '.2f')} s until every host had a page; "
                 f"{fmt(r['pages_per_s_after_ramp'], '.2f')} pages/s after it"),
        ("min gap", f"{fmt(r['min_gap_s'], '.3f')} s on {r['min_gap_host']}"),
        ("gaps < {:.2f} s".format(r["gap_threshold_s"]), f"{r['gaps_below']} of {r['gaps']}"),
        ("gap median/p90/max", f"{fmt(r['gap_median_s'], '.3f')} / {fmt(r['gap_p90_s'], '.3f')} / "
                               f"{fmt(r['gap_max_s'], '.3f')} s"),
        ("per worker", " ".join(str(x) for x in r["requests_per_worker"]) or "-"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")
    print(json.dumps(r, sort_keys=True))


# --------------------------------------------------------------------------- CLI

def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=50, help="number of hosts 127.0.0.1 .. 127.0.0.H (default 50)")
    ap.add_argument("--pages-per-host", type=int, default=200, help="pages per host, `/` included (default 200)")
    ap.add_argument("--page-bytes", type=int, default=5_000)
    ap.add_argument("--links", type=int, default=10, help="links per page (default 10)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--max-depth", type=int, default=100)
    ap.add_argument("--max-pages", type=int, default=1500, help="crawl budget (default 1500 = 30 s at 50/s)")
    ap.add_argument("--tolerance", type=float, default=0.01, help="gaps below delay - this are counted")
    ap.add_argument("--timeout", type=float, default=180.0, help="kill the crawl after this many seconds")
    ap.add_argument("--server", choices=("auto", "nginx", "python"), default="auto")
    args = ap.parse_args(argv)
    if args.pages_per_host < 1 or args.links < 2 or args.delay <= 0:
        ap.error("--pages-per-host >= 1, --links >= 2 and --delay > 0 are required")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    addrs = host_addrs(args.hosts)
    generate_site(SiteSpec(args.pages_per_host, args.page_bytes, args.links))
    port = choose_port(addrs)
    servers = make_servers(args.server, addrs, port)
    projects = RUN_DIR / "projects"
    shutil.rmtree(projects, ignore_errors=True)
    projects.mkdir(parents=True)
    urls = [f"http://{a}:{port}/" for a in addrs]
    cmd = crawl_cmd(urls, args, projects)
    servers.start()
    try:
        servers.mark()
        (RUN_DIR / "command.txt").write_text(" ".join(cmd) + "\n")
        print(f"crawling {args.hosts} hosts ({servers.kind}, port {port}): {' '.join(cmd[:4])} "
              f"<{len(urls)} URLs> {' '.join(cmd[4 + len(urls):])}", flush=True)
        run = run_crawl(cmd, args.timeout, RUN_DIR)
        time.sleep(0.2)   # let the server flush its last log line
        reqs = servers.requests()
    finally:
        servers.stop()
    if not reqs:
        print(f"no request reached the server; crawler output:\n{(RUN_DIR / 'stderr.log').read_text()[-2000:]}")
        return 1
    base = projects / PROJECT
    crawled = count_lines(base / "crawled.txt")
    result: Dict[str, object] = {
        "bench": "polite", "server": servers.kind, "hosts": args.hosts, "port": port,
        "workers": args.workers, "delay": args.delay, "max_pages": args.max_pages,
        "pages_per_host": args.pages_per_host, "crawled": crawled,
        "failed": count_lines(base / "failed.txt"), "wall_s": round(run.wall, 3),
        "pages_per_s_wall": round(crawled / run.wall, 3) if run.wall > 0 else None,
        "returncode": run.returncode, "timed_out": run.timed_out,
        "loadavg_1m_after": round(os.getloadavg()[0], 2),   # the machine is shared: context
    }
    result.update(analyse(reqs, args.hosts, args.delay, args.tolerance))
    result.update(fetch_log_summary(base / "fetch.log"))
    (RUN_DIR / "result.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    report(result)
    if run.timed_out or run.returncode != 0:
        print(f"crawler {'timed out' if run.timed_out else f'exited {run.returncode}'}; stderr tail:\n"
              f"{(RUN_DIR / 'stderr.log').read_text(errors='replace')[-1500:]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
