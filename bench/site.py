#!/usr/bin/env python3
"""Static benchmark site generator and a private nginx that serves it on 127.0.0.1.

Site layout (N pages, H = min(100, N) hubs):
    /index.html          links to the H hubs                      (depth 0)
    /hub/H.html          links to every page i with i % H == h    (depth 1)
    /p/I.html            ~20 KB of text and ~40 links             (depth 2)
    /robots.txt          allows everything

Every page's links point at deterministic pseudo-random pages, in a mix of href styles
(relative "12.html", "./12.html#s3", "../p/12.html", absolute-path "/p/12.html" and absolute
"http://127.0.0.1:PORT/p/12.html"), plus one link to a hub and one to /index.html. So the site
has exactly 1 + H + N distinct pages, all reachable from /index.html within depth 2.

Absolute hrefs embed the port, so the port is one of the site's parameters: the site is
regenerated only when the parameters (pages, size, links, port, format version) change.

Usage:
    python bench/site.py                 # generate (if needed), start nginx, check its rate, stop
    python bench/site.py --pages 500 --serve 60   # ... and keep serving for 60 s
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, List, Optional

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
DEFAULT_SITE_DIR = OUT_DIR / "site"
DEFAULT_PORT = 18731
HOST = "127.0.0.1"
FORMAT_VERSION = 2
PARAMS_FILE = ".params.json"
NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")


@dataclass(frozen=True)
class SiteParams:
    pages: int
    port: int
    page_bytes: int = 20_000
    links: int = 40
    hubs: int = 100
    version: int = FORMAT_VERSION

    @property
    def hub_count(self) -> int:
        return max(1, min(self.hubs, self.pages))

    @property
    def total_pages(self) -> int:
        """Distinct HTML pages reachable from /index.html (index + hubs + pages)."""
        return 1 + self.hub_count + self.pages

    @property
    def origin(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def start_url(self) -> str:
        return f"{self.origin}/index.html"

    def page_url(self, i: int) -> str:
        return f"{self.origin}/p/{i}.html"


# --------------------------------------------------------------------------- site generation

def _vocabulary(rng: random.Random, size: int = 600) -> List[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(size)]


def _paragraph_pool(seed: int = 12345, count: int = 400, words: int = 60) -> List[str]:
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    return [" ".join(rng.choices(vocab, k=words)) for _ in range(count)]


def _href(style: int, target: int, j: int, params: SiteParams) -> str:
    if style == 0:
        return f"{target}.html"
    if style == 1:
        return f"./{target}.html#s{j}"
    if style == 2:
        return f"../p/{target}.html"
    if style == 3:
        return f"/p/{target}.html"
    return f"{params.origin}/p/{target}.html"


def render_page(i: int, params: SiteParams, pool: List[str]) -> str:
    rng = random.Random(i * 7919 + 17)
    n_links = max(2, params.links)
    anchors = [f'<a href="{_href(j % 5, rng.randrange(params.pages), j, params)}">link {j}</a>'
               for j in range(n_links - 2)]
    anchors.append(f'<a href="../hub/{i % params.hub_count}.html">hub</a>')
    anchors.append('<a href="/index.html">home</a>')
    parts = [f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Page {i}</title></head>'
             f'<body>\n<h1 id="top">Page {i}</h1>\n']
    size = len(parts[0])
    k = 0
    while size < params.page_bytes - 40 or k < len(anchors):
        text = pool[rng.randrange(len(pool))]
        link = anchors[k] if k < len(anchors) else ""
        para = f'<p id="s{k}">{text} {link}</p>\n'
        parts.append(para)
        size += len(para)
        k += 1
    parts.append("</body></html>\n")
    return "".join(parts)


def render_hub(h: int, params: SiteParams) -> str:
    items = []
    for n, i in enumerate(range(h, params.pages, params.hub_count)):
        href = f"../p/{i}.html" if n % 2 == 0 else f"{params.origin}/p/{i}.html"
        items.append(f'<li><a href="{href}">page {i}</a></li>')
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Hub {h}</title></head>'
            f'<body><h1>Hub {h}</h1>\n<ul>\n' + "\n".join(items) +
            '\n</ul>\n<a href="/index.html">home</a></body></html>\n')


def render_index(params: SiteParams) -> str:
    items = [f'<li><a href="hub/{h}.html">hub {h}</a></li>' for h in range(params.hub_count)]
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Benchmark site</title>'
            '</head><body><h1>Benchmark site</h1>\n<ul>\n' + "\n".join(items) +
            "\n</ul></body></html>\n")


def read_params(site_dir: Path) -> Optional[SiteParams]:
    try:
        data = json.loads((site_dir / PARAMS_FILE).read_text())
        return SiteParams(**data)
    except (OSError, ValueError, TypeError):
        return None


def generate_site(params: SiteParams, site_dir: Path = DEFAULT_SITE_DIR, quiet: bool = False) -> bool:
    """Write the site into site_dir unless it is already there with the same parameters.

    Returns True when it (re)generated the site."""
    if read_params(site_dir) == params:
        return False
    t0 = time.perf_counter()
    tmp = site_dir.with_name(site_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "p").mkdir(parents=True)
    (tmp / "hub").mkdir()
    pool = _paragraph_pool()
    for i in range(params.pages):
        (tmp / "p" / f"{i}.html").write_text(render_page(i, params, pool))
    for h in range(params.hub_count):
        (tmp / "hub" / f"{h}.html").write_text(render_hub(h, params))
    (tmp / "index.html").write_text(render_index(params))
    (tmp / "robots.txt").write_text("User-agent: *\nDisallow:\n")
    (tmp / PARAMS_FILE).write_text(json.dumps(asdict(params)))
    shutil.rmtree(site_dir, ignore_errors=True)
    tmp.rename(site_dir)
    if not quiet:
        print(f"generated {params.total_pages} pages into {site_dir} in {time.perf_counter() - t0:.1f} s")
    return True


# --------------------------------------------------------------------------- ports

def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def choose_port(site_dir: Path, wanted: int = 0) -> int:
    """An explicit port, else the existing site's port, else DEFAULT_PORT if free, else any free one.

    An existing site whose port is busy is not regenerated for another port (another benchmark
    may be crawling it right now): that is an error; pass --port to move the site."""
    if wanted:
        return wanted
    old = read_params(site_dir)
    if old is not None:
        if not port_is_free(old.port):
            raise SystemExit(f"the site in {site_dir} uses port {old.port}, which is busy (another benchmark "
                             f"running?); stop it or pass --port N to regenerate the site for another port")
        return old.port
    return DEFAULT_PORT if port_is_free(DEFAULT_PORT) else free_port()


def prepare_site(pages: int, site_dir: Path = DEFAULT_SITE_DIR, port: int = 0,
                 page_bytes: int = 20_000, links: int = 40) -> SiteParams:
    params = SiteParams(pages=pages, port=choose_port(site_dir, port), page_bytes=page_bytes, links=links)
    generate_site(params, site_dir)
    return params


# --------------------------------------------------------------------------- nginx

def find_nginx() -> str:
    found = shutil.which("nginx")
    if found:
        return found
    for cand in NGINX_CANDIDATES:
        if os.access(cand, os.X_OK):
            return cand
    raise SystemExit("nginx not found: run `bash bench/setup.sh` first")


NGINX_CONF = """\
# Generated by bench/site.py: a private nginx for the benchmark, never the system one.
worker_processes {workers};
daemon off;
master_process on;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    types {{ text/html html; text/plain txt; }}
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    open_file_cache max=50000 inactive=120s;
    open_file_cache_valid 300s;
    client_body_temp_path {prefix}/tmp/client;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    server {{
        listen {host}:{port} reuseport;
        server_name localhost;
        root {root};
        index index.html;
    }}
}}
"""


class Nginx:
    """nginx as a child process (daemon off) serving site_dir on 127.0.0.1:port."""

    def __init__(self, site_dir: Path, port: int, workers: int = 1, prefix: Optional[Path] = None) -> None:
        self.site_dir = site_dir.resolve()
        self.port = port
        self.workers = workers
        self.prefix = (prefix or OUT_DIR / f"nginx-{port}").resolve()
        self.proc: Optional[subprocess.Popen] = None

    @property
    def conf_path(self) -> Path:
        return self.prefix / "nginx.conf"

    def write_conf(self) -> None:
        (self.prefix / "tmp").mkdir(parents=True, exist_ok=True)
        self.conf_path.write_text(NGINX_CONF.format(workers=self.workers, prefix=self.prefix, host=HOST,
                                                    port=self.port, root=self.site_dir))

    def start(self, timeout: float = 10.0) -> None:
        if not port_is_free(self.port):
            raise RuntimeError(f"port {self.port} is busy")
        self.write_conf()
        log = open(self.prefix / "stderr.log", "wb")
        self.proc = subprocess.Popen([find_nginx(), "-p", str(self.prefix), "-e", str(self.prefix / "error.log"),
                                      "-c", str(self.conf_path)],
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited ({self.proc.returncode}): "
                                   f"{(self.prefix / 'stderr.log').read_text()[-2000:]}")
            if http_status(self.port, "/index.html") == 200:
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not answer in time")

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()  # SIGTERM to the master: fast shutdown of master and workers
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)

    def cpu_seconds(self) -> float:
        """user+system CPU seconds used so far by nginx (master and workers)."""
        if self.proc is None:
            return 0.0
        try:
            import psutil  # only needed for this figure
            master = psutil.Process(self.proc.pid)
            total = 0.0
            for p in [master] + master.children():
                t = p.cpu_times()
                total += t.user + t.system
            return total
        except Exception:  # psutil missing or nginx gone
            return 0.0

    def __enter__(self) -> "Nginx":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def http_status(port: int, path: str, timeout: float = 1.0) -> int:
    try:
        conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return resp.status
    except OSError:
        return 0


# --------------------------------------------------------------------------- rate checks

def python_rate(params: SiteParams, max_requests: int = 5000, max_seconds: float = 3.0) -> float:
    """Pages/s of one keep-alive connection from Python fetching distinct pages (bounded loop)."""
    conn = http.client.HTTPConnection(HOST, params.port, timeout=5)
    n = 0
    nbytes = 0
    t0 = time.perf_counter()
    deadline = t0 + max_seconds
    while n < max_requests and time.perf_counter() < deadline:
        conn.request("GET", f"/p/{n % params.pages}.html")
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status} for /p/{n % params.pages}.html")
        nbytes += len(body)
        n += 1
    elapsed = time.perf_counter() - t0
    conn.close()
    return n / elapsed


def wrk_rate(params: SiteParams, seconds: int = 3, connections: int = 16) -> Optional[float]:
    """Requests/s measured by wrk (if installed) against one page; None without wrk."""
    wrk = shutil.which("wrk")
    if not wrk:
        return None
    out = subprocess.run([wrk, "-t1", f"-c{connections}", f"-d{seconds}s", f"{params.origin}/p/0.html"],
                         capture_output=True, text=True, timeout=seconds + 30).stdout
    m = re.search(r"Requests/sec:\s*([\d.]+)", out)
    return float(m.group(1)) if m else None


def check_rate(params: SiteParams, minimum: float = 1000.0) -> float:
    rate = python_rate(params)
    wrk = wrk_rate(params)
    extra = f", wrk -c16: {wrk:,.0f} req/s" if wrk else ""
    status = "OK" if rate > minimum else f"TOO SLOW (< {minimum:.0f})"
    print(f"nginx on {params.origin}: one Python keep-alive client {rate:,.0f} pages/s{extra} -> {status}")
    return rate


# --------------------------------------------------------------------------- CLI

def iter_sample_urls(params: SiteParams, count: int) -> Iterator[str]:
    yield params.start_url
    for i in range(count - 1):
        yield params.page_url(i % params.pages)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=10_000, help="number of content pages (default 10000)")
    ap.add_argument("--site-dir", type=Path, default=DEFAULT_SITE_DIR)
    ap.add_argument("--port", type=int, default=0, help="port (default: the site's own, else %d, else any free)"
                    % DEFAULT_PORT)
    ap.add_argument("--page-bytes", type=int, default=20_000)
    ap.add_argument("--links", type=int, default=40)
    ap.add_argument("--nginx-workers", type=int, default=1)
    ap.add_argument("--serve", type=float, default=0.0, help="keep serving this many seconds (bounded)")
    ap.add_argument("--no-serve", action="store_true", help="only generate the site")
    args = ap.parse_args(argv)
    params = prepare_site(args.pages, args.site_dir, args.port, args.page_bytes, args.links)
    print(f"site: {params.total_pages} pages ({params.pages} content + {params.hub_count} hubs + index), "
          f"start URL {params.start_url}")
    if args.no_serve:
        return 0
    with Nginx(args.site_dir, params.port, args.nginx_workers):
        check_rate(params)
        if args.serve > 0:
            print(f"serving for {args.serve:.0f} s ...")
            time.sleep(args.serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
