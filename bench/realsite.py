#!/usr/bin/env python3
"""spider vs GNU wget on a real site: Python's HTML documentation, served by nginx on loopback.

    python bench/realsite.py [--rounds 3] [--workers 2] [--docs /usr/share/doc/python3/html]

The site is Debian's ``python3-doc`` package (530 pages of ~96 KB with ~270 links each for
Python 3.11): real pages, with real menus, much bigger than bench/site.py's. The benchmark
installs ``python3-doc``, ``nginx`` and ``wget`` with apt-get when they are missing (as
bench/setup.sh does for nginx), starts a private nginx on 127.0.0.1 (bench/site.py's), and runs
``--rounds`` interleaved rounds: spider with each ``--workers`` count, then wget, so that the
noise of a shared machine spreads over both. Figures are medians over the rounds:

    pages        HTML pages fetched with status 200 (spider: crawled.txt; wget: files whose
                 URL ends in .html or /, since wget -r also fetches the page requisites
                 it finds in <link> and <script>, which the spider does not)
    pages/s      pages / wall seconds of the whole command (start-up and shutdown included)
    CPU s/1000   user+system CPU seconds of the whole process tree per 1,000 pages

wget runs as a mirror would, without page requisites: ``wget -r -l inf -np -nv -e robots=off
--delete-after``. The pages each tool found (fetched, or answered with an error) are compared
and any difference is printed. Targets: spider's best pages/s >= 1.5x wget's and its CPU per
page <= 1.2x wget's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

import measure
from measure import OUT_DIR, fmt, median, print_table, run_measured
from throughput import ToolRun, fresh_dir

SITE = measure.load_site_module()
RUN_DIR = OUT_DIR / "realsite"
DOCS = Path("/usr/share/doc/python3/html")
PROJECT = "realsite"

TARGET_PAGES_VS_WGET = 1.5
TARGET_CPU_VS_WGET = 1.2


def ensure_packages(docs: Path) -> None:
    """apt-get install what is missing: python3-doc (the site), nginx, wget."""
    need = []
    if not (docs / "index.html").exists() and docs == DOCS:
        need.append("python3-doc")
    if not (shutil.which("nginx") or os.access("/usr/sbin/nginx", os.X_OK)):
        need.append("nginx")
    if not shutil.which("wget"):
        need.append("wget")
    if not need:
        if not (docs / "index.html").exists():
            raise SystemExit(f"no index.html in {docs}")
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    print(f"installing {' '.join(need)} with apt-get", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(sudo + ["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(sudo + ["apt-get", "install", "-y", "-q", *need], check=True, env=env)
    if not (docs / "index.html").exists():
        raise SystemExit(f"no index.html in {docs} after installing python3-doc")


def is_page(url: str) -> bool:
    path = url.split("#")[0].split("?")[0]
    return path.endswith((".html", ".htm", "/"))


@dataclass
class Run(ToolRun):
    """A run (``pages``: HTML pages fetched with status 200) and the pages it found."""

    requests: int = 0                                           # everything fetched or failed
    found: Set[str] = field(default_factory=set, repr=False)    # pages fetched (200)
    errors: Set[str] = field(default_factory=set, repr=False)   # pages answered with an error


def _rows(path: Path) -> List[List[str]]:
    if not path.exists():
        return []
    return [line.split("\t") for line in path.read_text(errors="replace").splitlines()
            if line and not line.startswith("#")]


def run_spider(url: str, workers: int, rnd: int, timeout: float) -> Run:
    base = fresh_dir(RUN_DIR / f"spider-w{workers}-r{rnd}")
    projects = base / "projects"
    cmd = measure.spider_cmd("crawl", PROJECT, url, "--workers", str(workers), "--delay", "0",
                             "--max-depth", "1000", "--max-pages", "100000", "--projects-dir", str(projects))
    res = run_measured(cmd, timeout=timeout, log_dir=base, cwd=measure.SPIDER_DIR,
                       watch=projects / PROJECT / "crawled.txt")
    crawled = _rows(projects / PROJECT / "crawled.txt")
    failed = _rows(projects / PROJECT / "failed.txt")
    found = {r[0] for r in crawled if len(r) > 2 and r[1] == "200" and r[2] in ("text/html", "application/xhtml+xml")}
    errors = {r[0] for r in crawled if len(r) > 1 and r[1] != "200" and is_page(r[0])}
    errors |= {r[0] for r in failed if r and is_page(r[0])}
    return Run("spider", workers, len(found), len(failed), res, requests=len(crawled) + len(failed),
               found=found, errors=errors)


def run_wget(url: str, rnd: int, timeout: float) -> Run:
    base = fresh_dir(RUN_DIR / f"wget-r{rnd}")
    log = base / "wget.log"
    cmd = ["wget", "-r", "-l", "inf", "--no-parent", "-nv", "-e", "robots=off", "--delete-after",
           "-P", str(base / "mirror"), "-o", str(log), url]
    res = run_measured(cmd, timeout=timeout, log_dir=base)
    found: Set[str] = set()
    errors: Set[str] = set()
    fetched = 0
    previous = ""
    for line in (log.read_text(errors="replace").splitlines() if log.exists() else []):
        if " URL:" in line and " -> " in line:
            fetched += 1
            got = line.split(" URL:", 1)[1].split(" ", 1)[0]
            if is_page(got):
                found.add(got)
        elif " ERROR " in line and previous.endswith(":"):
            if is_page(previous[:-1]):
                errors.add(previous[:-1])
        previous = line
    shutil.rmtree(base / "mirror", ignore_errors=True)
    # wget exits 8 when a server answered an error (the site has a dead link): that is no failure
    if res.returncode == 8:
        res.returncode = 0
    return Run("wget", 1, len(found), len(errors), res, requests=fetched + len(errors), found=found, errors=errors)


def describe(run: Run) -> str:
    r = run.res
    status = "TIMEOUT" if r.timed_out else ("ok" if r.returncode == 0 else f"exit {r.returncode}")
    return (f"{run.tool:6} w={run.workers:<2} {status:7} pages={run.pages:<5} requests={run.requests:<5} "
            f"{r.wall:7.2f} s  {run.pages_per_s:7.1f} pages/s  CPU {r.cpu:6.2f} s "
            f"({run.cpu_per_1000:.2f} s per 1000 pages)\n         {r.load_note()}")


def compare(spider: Run, wget: Run) -> List[str]:
    """Differences between the pages each tool found (the first few of each kind)."""
    out = []
    for what, a, b in (("fetched", spider.found, wget.found), ("answered with an error", spider.errors, wget.errors)):
        for name, only in (("spider only", a - b), ("wget only", b - a)):
            if only:
                shown = ", ".join(sorted(only)[:10]) + (" ..." if len(only) > 10 else "")
                out.append(f"pages {what}, {name} ({len(only)}): {shown}")
    return out


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians reported (default 3)")
    ap.add_argument("--workers", default="2", help="spider --workers values, comma-separated (default 2)")
    ap.add_argument("--docs", type=Path, default=DOCS, help=f"the site's folder (default {DOCS})")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run before the tree is killed")
    ap.add_argument("--quiet-wait", type=float, default=10.0,
                    help="before each run, wait up to this many seconds for the machine to be idle")
    ap.add_argument("--spider-dir", type=Path, default=None,
                    help="folder with the crawler's main.py (default: the repository root)")
    ap.add_argument("--json", type=Path, default=OUT_DIR / "realsite.json", help="where to write the results")
    return ap.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    measure.set_spider_dir(args.spider_dir)
    ensure_packages(args.docs)
    docs = args.docs.resolve()
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    port = SITE.free_port()
    url = f"http://{SITE.HOST}:{port}/index.html"
    runs: Dict[Tuple[str, int], List[Run]] = {("spider", w): [] for w in workers}
    runs[("wget", 1)] = []
    t0 = time.monotonic()
    with SITE.Nginx(docs, port, 1, prefix=OUT_DIR / "realsite-nginx") as nginx:
        print(f"site: {docs} at {url}; {args.rounds} round(s) of spider (--workers {args.workers}) and wget")
        for rnd in range(args.rounds):
            for key in runs:
                busy = measure.wait_quiet(args.quiet_wait)
                if busy >= 0.3:
                    print(f"  (machine still busy before this run: {busy:.2f} cores)")
                n0 = nginx.cpu_seconds()
                run = run_spider(url, key[1], rnd, args.timeout) if key[0] == "spider" else run_wget(url, rnd, args.timeout)
                run.res.server_cpu = nginx.cpu_seconds() - n0
                runs[key].append(run)
                print(f"[{rnd + 1}/{args.rounds}] {describe(run)}", flush=True)
    rows, summary = [], {}
    for (tool, w), rs in runs.items():
        ok = [r for r in rs if r.res.ok and r.pages] or rs
        s = summary[(tool, w)] = {"pages": median([r.pages for r in ok]), "pages_per_s": median([r.pages_per_s for r in ok]),
                                  "cpu_per_1000": median([r.cpu_per_1000 for r in ok]),
                                  "seconds": median([r.res.wall for r in ok]),
                                  "others_cores": median([r.res.others_cpu / r.res.wall for r in ok if r.res.wall > 0])}
        rows.append([tool, str(w), fmt(s["pages"], ".0f"), fmt(s["seconds"], ".2f"), fmt(s["pages_per_s"], ",.1f"),
                     fmt(s["cpu_per_1000"], ".2f"), fmt(s["others_cores"], ".2f")])
    print(f"\n=== real site: {docs} (medians of {args.rounds} round(s))")
    print_table(["tool", "workers", "pages", "seconds", "pages/s", "CPU s/1000 pages", "others' cores"], rows)
    wget = summary[("wget", 1)]
    best_w = max(workers, key=lambda w: summary[("spider", w)]["pages_per_s"])
    best = summary[("spider", best_w)]
    ratios = {"pages_per_s_vs_wget": best["pages_per_s"] / wget["pages_per_s"],
              "cpu_vs_wget": best["cpu_per_1000"] / wget["cpu_per_1000"]}
    print(f"\nspider best: --workers {best_w}: {best['pages_per_s']:,.1f} pages/s at {best['cpu_per_1000']:.2f} CPU s "
          f"per 1000 pages; wget {wget['pages_per_s']:,.1f} pages/s at {wget['cpu_per_1000']:.2f}")
    verdict(f"spider pages/s ÷ wget = {ratios['pages_per_s_vs_wget']:.2f}",
            ratios["pages_per_s_vs_wget"] >= TARGET_PAGES_VS_WGET, f">= {TARGET_PAGES_VS_WGET:g}")
    verdict(f"spider CPU per page ÷ wget = {ratios['cpu_vs_wget']:.2f}",
            ratios["cpu_vs_wget"] <= TARGET_CPU_VS_WGET, f"<= {TARGET_CPU_VS_WGET:g}")
    diffs = compare(runs[("spider", best_w)][-1], runs[("wget", 1)][-1])
    print("same pages found as wget" if not diffs else "\n".join(diffs))
    print(f"\ntotal benchmark time {time.monotonic() - t0:.0f} s")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "site": {"docs": str(docs), "url": url}, "ratios": ratios, "same_pages": not diffs, "differences": diffs,
        "summaries": [{"tool": t, "workers": w, **s} for (t, w), s in summary.items()],
        "runs": [{"tool": r.tool, "workers": r.workers, "pages": r.pages, "requests": r.requests,
                  **{k: v for k, v in asdict(r.res).items() if k not in ("stdout_path", "stderr_path")}}
                 for rs in runs.values() for r in rs]}, indent=1, default=str))
    print(f"results written to {args.json}")
    return 0


def verdict(text: str, ok: bool, target: str) -> None:
    print(f"{text:50} target {target:6} {'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    sys.exit(main())
