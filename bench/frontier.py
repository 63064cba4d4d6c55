#!/usr/bin/env python3
"""Frontier scaling and memory of spider: does a huge queue.txt slow the crawl or blow up memory?

    bash bench/setup.sh && python bench/frontier.py [--extras 1000,100000,1000000] [--m 3000] [--workers 4]
    python bench/frontier.py --extras 1000,1000000 --no-appended --against DIR --repeat 3   # A/B, interleaved
    python bench/frontier.py --stop 1000,1000000 --repeat 6 [--against DIR]   # the clean stop alone, no site
    python bench/frontier.py --intake 1000000 [--repeat 3] [--against DIR] [--mixed]   # a paste's intake alone
    python bench/frontier.py --memory 1000,1000000 --workers-list 1,2,4 [--compare-dir OLD] [--m 300]

``--memory N,...``: memory of a clean resume against the number of workers. For each N, a project
as a clean stop leaves it with N pending URLs (a 1-page crawl, N queue lines in the crawler's
shape, then the view saved and the signature written in this process: no start-up check to wait
for), then, each on a fresh copy of that project (so that every run finds the site's pages new and
adds as many URLs to the dedup table), `crawl NAME --max-pages 1+M --workers W` for each W, in
interleaved rounds, with the
crawler of this tree and, with --compare-dir, of another one (e.g. `git worktree add /tmp/old main`)
on the same project. Figures: peak summed PSS of the process tree / known URLs, and the marginal
PSS of a worker ((PSS at the most workers - at the fewest) / extra workers / known URLs): with the
dedup table shared between processes (seen.bin) a worker should add next to nothing per URL.

For each EXTRA, in a fresh projects dir:
  1. `crawl NAME START_URL --max-pages 1 --delay 0 ...` creates the project (crawls /index.html);
  2. EXTRA lines are appended to its queue.txt, each a real page with a distinct query string
     (http://127.0.0.1:PORT/p/123.html?v=K; nginx ignores the query, so each is a 20 KB page);
  3. "appended" run: `crawl NAME --max-pages 1+M --workers W --delay 0` is timed and sampled (it
     resumes the project and crawls M more pages while it takes in the hand-appended lines: a
     paste after a clean stop is judged during the crawl, spider/frontier/paste.py);
  4. "clean resume" run (unless --no-clean-resume): a fresh project as a clean stop leaves it
     with EXTRA pending URLs (created as in 1., then EXTRA lines in the crawler's own shape, its
     view saved and the stop's signature written, as ``--memory`` builds it), one untimed
     `crawl NAME --max-pages 1+M ...` that stops cleanly (the crawler writes its own view,
     census and signature), then `crawl NAME --max-pages 1+2M ...`, timed and sampled: a resume
     of a frontier the crawler
     itself keeps, without the one-off cost of taking in hand-edited lines (the appended run's
     own folder is not used: its M pages may be done before it has taken the whole paste in).

Figures (medians over --repeat), for each timed run:
    pages/s         pages crawled by the run / its wall seconds (start-up, i.e. loading the
                    frontier, and shut-down included)
    start s         seconds until the first page reached crawled.txt
    crawl pages/s   pages/s between the first and the last page written to crawled.txt
    end s           seconds from the last page written until the command exited
    known URLs      lines of queue.txt + crawled.txt + failed.txt after the run
    RSS, PSS        peak over 50 ms samples of the summed RSS / PSS of the whole process tree
    bytes/URL       peak RSS (PSS) / known URLs
and, for each of the two ways the extra URLs got there, against the issue's targets:
    scaling         pages/s at the largest EXTRA / pages/s at the smallest       target >= 0.9
    bytes/URL       at the largest EXTRA (RSS and PSS)                           target <= 100
    marginal        (peak at largest - peak at smallest) / (known at largest - known at smallest):
                    the cost of one more URL without the fixed per-process Python baseline
The clean resume is the frontier as a crawl keeps it (a start loads the view the last clean stop
saved, frontier.view); the appended run adds the one-off cost of checking, normalising and
admitting every hand-written line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import measure
from measure import MB, OUT_DIR, RunResult, fmt, median, print_table, run_measured

SITE = measure.load_site_module()
RUN_DIR = OUT_DIR / "frontier"
PROJECT = "frontier"
TARGET_SCALING = 0.9
TARGET_BYTES_PER_URL = 100.0
PHASES = ("appended", "clean resume")


@dataclass
class Phase:
    """One timed `crawl NAME --max-pages ...` run of a project."""
    name: str
    pages: int
    known: int
    res: RunResult
    counts: Dict[str, int] = field(default_factory=dict)
    note: str = ""

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.res.wall if self.res.wall > 0 else float("nan")

    @property
    def cpu_per_1000(self) -> float:
        return 1000.0 * self.res.cpu / self.pages if self.pages else float("nan")

    @property
    def startup(self) -> float:
        """Seconds until the first page reached crawled.txt."""
        return self.res.first_growth if self.res.first_growth is not None else float("nan")

    @property
    def shutdown(self) -> float:
        """Seconds from the last page written to crawled.txt until the command exited."""
        return self.res.wall - self.res.last_growth if self.res.last_growth is not None else float("nan")

    @property
    def crawl_rate(self) -> float:
        """Pages/s between the first and the last page written (start-up and shut-down excluded)."""
        r = self.res
        if r.first_growth is None or r.last_growth is None or r.last_growth <= r.first_growth:
            return float("nan")
        return (self.pages - 1) / (r.last_growth - r.first_growth)


@dataclass
class FrontierRun:
    extra: int
    phases: Dict[str, Phase] = field(default_factory=dict)
    error: str = ""


# --------------------------------------------------------------------------- steps

def fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def append_extra_urls(queue: Path, params, extra: int) -> None:
    """Append `extra` bare URL lines (depth 0) of real pages with distinct query strings."""
    needs_newline = queue.exists() and queue.stat().st_size > 0 and not queue.read_bytes().endswith(b"\n")
    chunk = 50_000
    with open(queue, "a", encoding="utf-8") as f:
        if needs_newline:
            f.write("\n")
        for start in range(0, extra, chunk):
            f.write("".join(f"{params.origin}/p/{k % params.pages}.html?v={k}\n"
                            for k in range(start, min(extra, start + chunk))))


def create_project(params, projects: Path, base: Path, workers: int, timeout: float) -> Optional[str]:
    """Step 1; returns an error text or None."""
    cmd = measure.spider_cmd("crawl", PROJECT, params.start_url, "--workers", str(workers), "--delay", "0",
                             "--max-depth", "1000", "--max-pages", "1", "--projects-dir", str(projects))
    res = run_measured(cmd, timeout=timeout, log_dir=base / "create", cwd=measure.SPIDER_DIR)
    counts = measure.project_counts(projects, PROJECT)
    if not res.ok:
        return f"create run failed ({'timeout' if res.timed_out else res.returncode}): {res.tail(800)}"
    if not (projects / PROJECT).is_dir():
        return f"no project folder {projects / PROJECT}"
    if counts["crawled"] + counts["failed"] != 1:
        return f"create run left crawled={counts['crawled']} failed={counts['failed']} (expected 1 in all)"
    return None


def timed_resume(name: str, projects: Path, log_dir: Path, budget: int, m: int, workers: int,
                 timeout: float, nginx, quiet_wait: float) -> Phase:
    """`crawl NAME --max-pages budget` (resume), timed and sampled; expects m more pages done."""
    before = measure.project_counts(projects, PROJECT)
    busy = measure.wait_quiet(quiet_wait)
    if busy >= 0.3:
        print(f"  (machine still busy before this run: {busy:.2f} cores)")
    n0 = nginx.cpu_seconds()
    cmd = measure.spider_cmd("crawl", PROJECT, "--max-pages", str(budget), "--workers", str(workers),
                             "--delay", "0", "--projects-dir", str(projects))
    res = run_measured(cmd, timeout=timeout, log_dir=log_dir, cwd=measure.SPIDER_DIR,
                       watch=projects / PROJECT / "crawled.txt")
    res.server_cpu = nginx.cpu_seconds() - n0
    after = measure.project_counts(projects, PROJECT)
    notes = []
    if not res.ok:
        notes.append(f"{'timed out' if res.timed_out else f'exited {res.returncode}'}: {res.tail(800)}")
    done = after["crawled"] + after["failed"] - before["crawled"] - before["failed"]
    if done != m:
        notes.append(f"crawled+failed grew by {done}, expected {m}")
    return Phase(name, after["crawled"] - before["crawled"], sum(after.values()), res, after, "; ".join(notes))


def run_one(params, extra: int, m: int, workers: int, rep: int, timeout: float, clean_resume: bool,
            nginx, quiet_wait: float, appended: bool = True, tag: str = "") -> FrontierRun:
    base = fresh_dir(RUN_DIR / f"extra-{extra}-r{rep}{tag}")
    projects = base / "projects"
    run = FrontierRun(extra)
    if appended:
        error = create_project(params, projects, base, workers, timeout)
        if error is not None:
            run.error = error
            return run
        append_extra_urls(projects / PROJECT / "queue.txt", params, extra)
        run.phases[PHASES[0]] = timed_resume(PHASES[0], projects, base / "appended", 1 + m, m, workers, timeout,
                                             nginx, quiet_wait)
        shutil.rmtree(projects, ignore_errors=True)  # up to ~100 MB at 1M URLs; the logs stay
    if clean_resume and (not appended or run.phases[PHASES[0]].res.ok):
        # A project of its own, as a clean stop leaves it with ``extra`` pending URLs: not the
        # appended run's folder, whose crawl may have stopped (its M pages done) before it had
        # taken in the whole paste; the next start then goes on judging it, which is the
        # appended case again, not the clean one.
        error = create_project(params, projects, base, workers, timeout)
        if error is not None:
            run.error = error
            return run
        if str(measure.SPIDER_DIR) not in sys.path:
            sys.path.insert(0, str(measure.SPIDER_DIR))
        clean_stop_with(projects / PROJECT, params, extra)
        # One untimed run first, so that the timed one resumes what the crawler's own clean stop
        # wrote (its view, census.txt and signature), not what this script built.
        timed_resume("warm-up", projects, base / "clean-warm-up", 1 + m, m, workers, timeout, nginx, quiet_wait)
        run.phases[PHASES[1]] = timed_resume(PHASES[1], projects, base / "clean-resume", 1 + 2 * m, m, workers,
                                             timeout, nginx, quiet_wait)
        shutil.rmtree(projects, ignore_errors=True)
    return run


def describe(run: FrontierRun) -> str:
    if run.error:
        return f"extra={run.extra:<8} ERROR {run.error}"
    lines = []
    for ph in run.phases.values():
        r = ph.res
        pss = fmt(r.peak_pss / MB if r.peak_pss else None, ".0f")
        lines.append(
            f"extra={run.extra:<8} {ph.name:12} pages={ph.pages:<5} known={ph.known:<8} {r.wall:7.2f} s "
            f"{ph.pages_per_s:7.1f} pages/s (start-up {ph.startup:.2f} s, {ph.crawl_rate:.1f} pages/s between "
            f"first and last page, shut-down {ph.shutdown:.2f} s)\n"
            f"    CPU {r.cpu:.1f} s; RSS {r.peak_rss / MB:.0f} MB (parent {r.peak_rss_root / MB:.0f}, largest "
            f"worker {r.peak_rss_child / MB:.0f}); PSS {pss} MB; procs {r.peak_procs}; files {ph.counts}\n"
            f"    {r.load_note()}")
        if ph.note:
            lines.append(f"    note: {ph.note}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- summary

@dataclass
class Row:
    extra: int
    known: float
    pages: float
    seconds: float
    pages_per_s: float
    startup: float
    crawl_rate: float
    shutdown: float
    cpu_per_1000: float
    rss: float            # bytes
    pss: Optional[float]  # bytes
    rss_root: float       # bytes
    rss_child: float      # bytes


def summarize(extra: int, phases: Sequence[Phase]) -> Optional[Row]:
    ok = [p for p in phases if p.res.ok and p.pages > 0] or list(phases)
    if not ok:
        return None
    pss = [p.res.peak_pss for p in ok if p.res.peak_pss]
    return Row(extra, median([p.known for p in ok]), median([p.pages for p in ok]),
               median([p.res.wall for p in ok]), median([p.pages_per_s for p in ok]),
               median([p.startup for p in ok]), median([p.crawl_rate for p in ok]),
               median([p.shutdown for p in ok]), median([p.cpu_per_1000 for p in ok]),
               median([p.res.peak_rss for p in ok]), median(pss) if pss else None,
               median([p.res.peak_rss_root for p in ok]), median([p.res.peak_rss_child for p in ok]))


def per_url(value: Optional[float], known: float) -> Optional[float]:
    return value / known if value and known else None


def print_rows(title: str, rows: Sequence[Row]) -> None:
    print(f"\n--- {title}")
    print_table(["extra URLs", "known URLs", "pages", "seconds", "pages/s", "start s", "crawl pages/s", "end s",
                 "CPU s/1000", "peak RSS MB", "parent MB", "worker MB", "peak PSS MB", "RSS B/URL", "PSS B/URL"],
                [[f"{r.extra:,}", fmt(r.known, ",.0f"), fmt(r.pages, ".0f"), fmt(r.seconds, ".2f"),
                  fmt(r.pages_per_s, ",.1f"), fmt(r.startup, ".2f"), fmt(r.crawl_rate, ",.1f"),
                  fmt(r.shutdown, ".2f"), fmt(r.cpu_per_1000, ".2f"), fmt(r.rss / MB, ".0f"),
                  fmt(r.rss_root / MB, ".0f"), fmt(r.rss_child / MB, ".0f"),
                  fmt(r.pss / MB if r.pss else None, ".0f"), fmt(per_url(r.rss, r.known), ",.0f"),
                  fmt(per_url(r.pss, r.known), ",.0f")] for r in rows])


def verdicts(rows: Sequence[Row], label: str) -> Dict[str, Optional[float]]:
    out: Dict[str, Optional[float]] = {}
    good = [r for r in rows if r.pages > 0 and r.known > 0]
    if len(good) < 2:
        print(f"{label}: not enough successful runs for ratios")
        return out
    small, big = good[0], good[-1]
    scaling = out["scaling"] = big.pages_per_s / small.pages_per_s
    out["crawl_phase_scaling"] = big.crawl_rate / small.crawl_rate
    out["rss_bytes_per_url"] = per_url(big.rss, big.known)
    out["pss_bytes_per_url"] = per_url(big.pss, big.known)
    dk = big.known - small.known
    out["marginal_rss_bytes_per_url"] = (big.rss - small.rss) / dk if dk else None
    out["marginal_pss_bytes_per_url"] = (big.pss - small.pss) / dk if dk and big.pss and small.pss else None
    verdict(f"{label}: pages/s at {big.extra:,} extra ÷ at {small.extra:,} = {out['scaling']:.2f} "
         f"(crawl phase only: {out['crawl_phase_scaling']:.2f})", scaling >= TARGET_SCALING,
         f">= {TARGET_SCALING:g}")
    for kind in ("rss", "pss"):
        v = out[f"{kind}_bytes_per_url"]
        if v is not None:
            verdict(f"{label}: peak {kind.upper()} (all processes) / known URLs at {big.extra:,} = {v:,.0f} B/URL",
                 v <= TARGET_BYTES_PER_URL, f"<= {TARGET_BYTES_PER_URL:g}")
    for kind in ("rss", "pss"):
        v = out[f"marginal_{kind}_bytes_per_url"]
        if v is not None:
            print(f"{label}: marginal {kind.upper()} (peak at {big.extra:,} - peak at {small.extra:,}) / "
                  f"({big.known:,.0f} - {small.known:,.0f} known URLs) = {v:,.1f} B/URL")
    return out


def verdict(text: str, ok: bool, target: str) -> None:
    print(f"{text:100} target {target:6} {'PASS' if ok else 'FAIL'}")


def print_summary(runs: Dict[int, List[FrontierRun]], repeat: int, workers: int, m: int) -> Dict[str, object]:
    print(f"\n=== frontier scaling: --workers {workers}, M={m} pages per timed run, medians of {repeat} run(s)")
    print("(start s: until the first page reached crawled.txt; crawl pages/s: between the first and the last "
          "page written;\n end s: from the last page written to exit. pages/s = pages / seconds includes both. "
          "parent / worker MB: peak RSS\n of the crawl's own process / of its largest worker.)")
    result: Dict[str, object] = {}
    for n, phase in enumerate(PHASES):
        rows = [row for extra, rs in runs.items()
                if (row := summarize(extra, [r.phases[phase] for r in rs if phase in r.phases])) is not None]
        if not rows:
            continue
        title = ("timed run after appending the extra lines to queue.txt by hand (each is checked once)" if n == 0 else
                 "clean resume of the same frontier, as the crawler saved it (M more pages)")
        print_rows(title, rows)
        result[phase] = {"rows": [asdict(r) for r in rows]}
    print()
    for phase in PHASES:
        if phase in result:
            rows = [Row(**r) for r in result[phase]["rows"]]  # type: ignore[index]
            result[phase]["ratios"] = verdicts(rows, phase)  # type: ignore[index]
    return result


def compare(results: Dict[str, Dict[str, object]], every: Dict[str, Dict[int, List[FrontierRun]]],
            extras: Sequence[int]) -> None:
    """``--against``: the two crawlers side by side, each ratio taken within the same run."""
    print("\n=== this crawler against the other, same run (medians)")
    for phase in PHASES:
        if not all(phase in r for r in results.values()):
            continue
        for name in every:
            rows = [Row(**r) for r in results[name][phase]["rows"]]   # type: ignore[index]
            small, big = rows[0], rows[-1]
            print(f"{phase:12} {name:8} pages/s {small.pages_per_s:7.1f} at {small.extra:,} -> "
                  f"{big.pages_per_s:7.1f} at {big.extra:,}: ratio {big.pages_per_s / small.pages_per_s:.2f} "
                  f"(crawl phase {big.crawl_rate / small.crawl_rate:.2f}); start s {small.startup:.3f} -> "
                  f"{big.startup:.3f}, end s {small.shutdown:.3f} -> {big.shutdown:.3f}")
        for extra in extras:   # per round: the ratio of each round, then their median
            per = {name: [r.phases[phase].pages_per_s for r in every[name][extra] if phase in r.phases]
                   for name in every}
            print(f"{phase:12} at {extra:,}: pages/s per round, this {[round(x) for x in per['this']]}, "
                  f"against {[round(x) for x in per['against']]}")


# --------------------------------------------------------------------------- intake of a paste

def _mixed_lines(lines: int) -> List[str]:
    """``lines`` pasted lines of every kind a judge meets (``--mixed``): bare URLs of several hosts
    (in scope or not, some not in their normal form), paths and queries that trip a trap rule or
    come near one, known URLs again, full lines, and lines that are no URL. The same in every run."""
    import random
    rnd = random.Random(7)
    hosts = ["paste.test", "www.paste.test", "other.test", "a.paste.test", "127.0.0.1:8080", "PASTE.test"]
    paths = ["/p/{k}.html", "/a/b/c/{k}", "/a/a/a/{k}", "/2024-01-05/{k}", "/x/{k}/", "/./{k}", "/%7e{k}", "/{k}"]
    queries = ["", "?v={k}", "?view={k}", "?a=1&b=2&c=3&d=4&e={k}", "?year={k}", "?utm_source={k}", "?Sort={k}",
               "?d=2099-01-01&k={k}"]
    out = []
    for k in range(lines):
        r = rnd.random()
        if r < 0.002:
            out.append(f"garbage line {k}")
        elif r < 0.003:
            out.append(f"ftp://x/{k}")
        elif r < 0.004:
            out.append(f"http://bad host/{k}")
        elif r < 0.005:
            out.append("# a comment")
        elif r < 0.006:
            out.append(f"http://paste.test/p/{k}\t1\t0\t0\t-")
        elif r < 0.007:
            out.append(f"http://paste.test/\u00e9/{k}")
        elif r < 0.05:
            out.append(f"http://paste.test/p/{rnd.randrange(k + 1)}.html?v=1")   # known already
        else:
            j = k if rnd.random() < 0.9 else rnd.randrange(k + 1)
            out.append(f"http{'s' if rnd.random() < 0.2 else ''}://{rnd.choice(hosts)}"
                       + rnd.choice(paths).format(k=j) + rnd.choice(queries).format(k=j))
    return out


def _left(folder: Path, store, warned: List[str]) -> str:   # type: ignore[no-untyped-def]
    """A digest of what an intake left (``--mixed``): queue.txt, rejected.txt, the members of the
    shared table (seen.bin: its fingerprints, not where they sit), the warnings, then the order of
    the first claims (where the store has its selection index). Two crawlers that judge alike agree."""
    import hashlib
    from array import array
    digest = hashlib.sha1()
    for name in ("queue.txt", "rejected.txt"):
        digest.update((folder / name).read_bytes())
    table = array("q")
    if (folder / "seen.bin").exists():
        table.frombytes((folder / "seen.bin").read_bytes()[4096:])
    digest.update(repr(sorted(x for x in table if x)).encode())
    digest.update("\n".join(warned).encode())
    for _ in range(100):
        digest.update(repr([getattr(c, "url", c) for c in store.claim(50, time.time(), lambda h: 0.0).claims]).encode())
    return digest.hexdigest()[:16]


def _stopped_with_paste(folder: Path, lines: int, mixed: bool = False) -> int:
    """A project folder as a clean stop leaves it (3 pending URLs, view and signature saved), then
    ``lines`` bare URLs pasted into its queue.txt (or ``_mixed_lines``); returns where the paste begins."""
    from spider.frontier.files import FileStore
    from spider.frontier.recovery import pasted_from, write_signature
    from spider.records import QueueEntry
    fresh_dir(folder)
    store = FileStore(folder).open()
    store.add(QueueEntry(f"http://paste.test/old/{i}") for i in range(3))
    store.save_view()
    store.fold()
    write_signature(folder, "bench")
    with open(folder / "queue.txt", "a") as f:
        if mixed:
            f.write("".join(line + "\n" for line in _mixed_lines(lines)))
        for start in range(0, 0 if mixed else lines, 50_000):
            f.write("".join(f"http://paste.test/p/{k % 10_000}.html?v={k}\n"
                            for k in range(start, min(lines, start + 50_000))))
    start = pasted_from(folder, "bench")
    assert start is not None, "the paste was not recognised as one"
    return start


SHAPES = ("parent", "worker")


def intake_once(folder: Path, lines: int, startup_check: bool = False, mixed: bool = False) -> Dict[str, float]:
    """One round in this process, with the crawler of ``measure.SPIDER_DIR``: the paste taken in by
    the crawl's parent ("parent": no selection index, as ``Crawl._pause`` judges it while the
    workers crawl) and by one process that claims ("worker": it indexes what it admits, as a
    worker's claim step does), both with the admission rules of a crawl of the paste's host; optionally the start-up check of
    the same paste (recovery, what a start did before the paste was judged lazily)."""
    from spider.config import CrawlConfig
    from spider.frontier.files import FileStore
    from spider.scope import Admission
    config = CrawlConfig(seeds=("http://paste.test/",))
    admission, seeds = Admission(config), set(config.seeds)

    def admit(url: str, depth: int) -> Optional[str]:   # as spider/crawl.py gives it to the store
        return None if url in seeds else admission.check(url, depth)

    def admit_many(urls: List[str], depth: int) -> List[Optional[str]]:   # (likewise; a tree without it: admit)
        reasons = admission.check_many(urls, depth)
        if not seeds.isdisjoint(urls):
            reasons = [None if url in seeds else r for url, r in zip(urls, reasons)]
        return reasons

    many = hasattr(admission, "check_many")
    out: Dict[str, float] = {}
    for shape in SHAPES:
        start = _stopped_with_paste(folder, lines, mixed)
        t0, c0 = time.perf_counter(), time.process_time()
        store = _crawl_store(FileStore, folder).open(paste_from=start)
        warned: List[str] = []
        if mixed:
            store.warn = warned.append
        store.admit = admit
        if many:
            store.admit_many = admit_many
        first = store.claim(1, time.time(), lambda h: 0.0)
        t1 = time.perf_counter()
        assert first.claims and store.paste_left() > 0
        if shape == "parent":
            store.drop_index()
        c1 = time.process_time()
        while store.judge_paste():
            pass
        t2, c2 = time.perf_counter(), time.process_time()
        if mixed:
            out[f"{shape} left"] = _left(folder, store, warned)   # type: ignore[assignment]
        else:
            assert store.counts().pending == lines + 2, store.counts()   # (3 old URLs, one claimed)
        out[f"{shape} first claim s"] = t1 - t0
        out[f"{shape} judged all s"] = t2 - t0
        out[f"{shape} CPU us/line"] = (c2 - c1) / lines * 1e6
        out[f"{shape} CPU all s"] = c2 - c0
    if startup_check:
        from spider.frontier.recovery import recover
        _stopped_with_paste(folder, lines)
        t4 = time.perf_counter()
        recover(folder, admit)
        FileStore(folder).open()
        out["start-up check s"] = time.perf_counter() - t4
    return out


def _crawl_store(cls, folder: Path):   # type: ignore[no-untyped-def]
    """A store as a crawl opens it: with the dedup table shared by its processes (seen.bin) where
    the crawler has one (an older tree's store takes no ``shared``)."""
    try:
        return cls(folder, shared=True)
    except TypeError:
        return cls(folder)


def _intake_round(tree: Path, lines: int, startup_check: bool, mixed: bool = False) -> Dict[str, float]:
    """One round in a fresh process with the crawler of ``tree`` (its figures as JSON)."""
    cmd = [sys.executable, __file__, "--intake-round", str(lines), "--spider-dir", str(tree)]
    if startup_check:
        cmd.append("--startup-check")
    if mixed:
        cmd.append("--mixed")
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def intake(lines: int, repeat: int, against: Optional[Path], startup_check: bool, mixed: bool = False) -> int:
    """``--intake N``: how fast N pasted lines are taken in; medians of ``repeat`` rounds, each in
    a fresh process, interleaved with the same rounds of the crawler in ``against`` if given (the
    machine's load then weighs on both alike)."""
    trees = {"this": measure.SPIDER_DIR}
    if against is not None:
        measure.precompile(against / "spider")
        trees["against"] = against
    rounds: Dict[str, List[Dict[str, float]]] = {name: [] for name in trees}
    for r in range(repeat):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for name in order:
            rounds[name].append(_intake_round(trees[name], lines, startup_check, mixed))
            print(f"  round {r + 1} {name}: " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                                          for k, v in rounds[name][-1].items()), flush=True)
    shutil.rmtree(RUN_DIR / "intake", ignore_errors=True)
    what = "lines of every kind (--mixed)" if mixed else "bare URLs (new, in their normal form)"
    print(f"=== intake of {lines:,} pasted {what}, one process, median of {repeat} round(s)")
    if mixed:   # what each crawler left, whatever its speed: the same or not
        for shape in SHAPES:   # (the two shapes differ in their claims: a parent has no selection index)
            left = {name: {r[f"{shape} left"] for r in rounds[name]} for name in trees}
            same = len(set.union(*left.values())) == 1
            print(f"  {shape}: what the intake left (queue.txt, rejected.txt, seen.bin's members, warnings, first "
                  f"claims): {'the same in every round and crawler' if same else 'NOT THE SAME: ' + repr(left)}")
    for name, tree in trees.items():
        med = {k: median([r[k] for r in rounds[name]]) for k in rounds[name][0] if not k.endswith(" left")}
        print(f"  {name} ({tree}):")
        for shape in SHAPES:
            judged = med[f"{shape} judged all s"]
            print(f"    {shape:6s}  first claim {med[f'{shape} first claim s']:.3f} s after open began; "
                  f"all judged after {judged:.2f} s: {lines / judged * 5 / 1e6:.2f} M lines per 5 s "
                  f"(target >= 1); judging CPU {med[f'{shape} CPU us/line']:.2f} us/line "
                  f"({5e6 / med[f'{shape} CPU us/line'] / 1e6:.2f} M lines per 5 CPU s)")
        if "start-up check s" in med:
            print(f"    before: start-up check (recovery) + open {med['start-up check s']:.1f} s before the first claim")
    return 0


# --------------------------------------------------------------------------- memory against workers

def clean_stop_with(folder: Path, params, n: int) -> None:
    """The project after a clean stop with ``n`` more pending URLs: lines in the crawler's shape,
    the view built and saved here (as the crawl would at its start), then the stop's signature."""
    from spider.frontier.files import FileStore
    from spider.frontier.recovery import write_signature
    key = settings_key(folder)
    with open(folder / "queue.txt", "a", encoding="utf-8") as f:
        for start in range(0, n, 50_000):
            f.write("".join(f"{params.origin}/p/{k % params.pages}.html?v={k}\t0\t0\t0\t-\n"
                            for k in range(start, min(n, start + 50_000))))
    store = FileStore(folder).open()
    assert store.save_view() and store.fold(), "the view was not saved"
    del store
    write_signature(folder, key)


def settings_key(folder: Path) -> str:
    import re
    return re.search(r"^settings (.*)$", (folder / "frontier.txt").read_text(), re.M).group(1)  # type: ignore[union-attr]


def copy_clean_stop(template: Path, projects: Path) -> None:
    """A copy of a project as a clean stop left it that a start still takes as one: the saved view,
    the census and the stop's signature name the files by inode, so they are written again for
    the copies (the view's arrays copied as they are)."""
    import os
    import re
    from spider.frontier import view as views
    from spider.frontier.recovery import write_signature
    shutil.rmtree(projects, ignore_errors=True)
    shutil.copytree(template, projects)
    folder = projects / PROJECT
    key = settings_key(folder)
    src, tmp = folder / "frontier.view", folder / ".frontier.view.tmp"
    with open(src, "rb") as f, open(tmp, "wb") as out:
        out.write(f.readline())
        meta = json.loads(f.readline())
        meta["files"] = {name: views.identity(folder / name) for name in meta["files"]}
        out.write(json.dumps(meta, separators=(",", ":")).encode() + b"\n")
        shutil.copyfileobj(f, out, 1 << 24)
    os.replace(tmp, src)
    census = folder / "census.txt"
    if census.exists():
        me = " ".join(map(str, views.identity(folder / "queue.txt") or []))
        census.write_text(re.sub(r"^queue\t.*$", lambda m: f"queue\t{me}", census.read_text(), flags=re.M))
    write_signature(folder, key)


def memory_mode(args: argparse.Namespace) -> int:
    sizes = sorted(int(x.replace("_", "")) for x in args.memory.split(",") if x.strip())
    workers = [int(w) for w in args.workers_list.split(",")]
    dirs = {"this": measure.SPIDER_DIR}
    if args.compare_dir is not None:
        measure.set_spider_dir(args.compare_dir)
        dirs["other"] = measure.SPIDER_DIR
        measure.set_spider_dir(dirs["this"])
    sys.path.insert(0, str(dirs["this"]))
    params = SITE.prepare_site(args.pages, SITE.DEFAULT_SITE_DIR, args.port)
    print(f"memory: sizes {sizes}, workers {workers}, M={args.m}, {args.repeat} round(s); crawlers {dirs}")
    rows: Dict[tuple, List[Phase]] = {}
    with SITE.Nginx(SITE.DEFAULT_SITE_DIR, params.port, args.nginx_workers) as nginx:
        SITE.check_rate(params)
        for n in sizes:
            base = fresh_dir(RUN_DIR / f"memory-{n}")
            template, projects = base / "template", base / "projects"
            error = create_project(params, template, base, 1, args.timeout)
            if error:
                print(f"N={n}: {error}")
                continue
            t0 = time.monotonic()
            clean_stop_with(template / PROJECT, params, n)
            print(f"N={n:,}: clean stop built in {time.monotonic() - t0:.0f} s", flush=True)
            for rep in range(args.repeat):
                for w in workers:
                    for name, d in dirs.items():
                        measure.SPIDER_DIR = d
                        copy_clean_stop(template, projects)
                        budget = 1 + args.m
                        ph = timed_resume(f"{name} w{w}", projects, base / f"{name}-w{w}-r{rep}", budget, args.m,
                                          w, args.timeout, nginx, args.quiet_wait)
                        rows.setdefault((n, w, name), []).append(ph)
                        pss = ph.res.peak_pss
                        print(f"  [{rep + 1}] N={n:,} {name:5} workers {w}: known {ph.known:,} peak PSS "
                              f"{fmt(pss / MB if pss else None, '.0f')} MB = {fmt(per_url(pss, ph.known), '.1f')} B/URL, "
                              f"{ph.pages_per_s:.1f} pages/s {ph.note}", flush=True)
            measure.SPIDER_DIR = dirs["this"]
            shutil.rmtree(projects, ignore_errors=True)
            shutil.rmtree(template, ignore_errors=True)
    print(f"\n=== memory of a clean resume (medians of {args.repeat}); peak summed PSS of the process tree")
    table = []
    for (n, w, name), phs in sorted(rows.items()):
        pss = median([p.res.peak_pss for p in phs if p.res.peak_pss] or [float("nan")])
        known = median([p.known for p in phs])
        table.append([f"{n:,}", name, str(w), f"{known:,.0f}", fmt(pss / MB, ".0f"), fmt(pss / known, ".1f"),
                      fmt(median([p.pages_per_s for p in phs]), ".1f")])
    print_table(["pending N", "crawler", "workers", "known URLs", "peak PSS MB", "PSS B/URL", "pages/s"], table)
    lo, hi = min(workers), max(workers)
    for n in sizes:
        for name in dirs:
            a, b = rows.get((n, lo, name)), rows.get((n, hi, name))
            if a and b and hi > lo:
                pa = median([p.res.peak_pss or 0 for p in a])
                pb = median([p.res.peak_pss or 0 for p in b])
                known = median([p.known for p in b])
                print(f"N={n:,} {name}: a worker adds {(pb - pa) / (hi - lo) / MB:.1f} MB = "
                      f"{(pb - pa) / (hi - lo) / known:.1f} B per known URL ({lo} -> {hi} workers)")
    small, big = min(sizes), max(sizes)
    for name in dirs:
        for w in workers:
            a, b = rows.get((small, w, name)), rows.get((big, w, name))
            if a and b and big > small:
                r = median([p.pages_per_s for p in b]) / median([p.pages_per_s for p in a])
                verdict(f"{name}, {w} worker(s): clean resume pages/s at {big:,} ÷ at {small:,} = {r:.2f}",
                        r >= TARGET_SCALING, f">= {TARGET_SCALING:g}")
    return 0


# --------------------------------------------------------------------------- the stop alone

STOP_PAGES = 3000   # pages the worker of a --stop round crawls before the stop


def stop_build(folder: Path, n: int) -> None:
    """A project as a clean stop leaves it with ``n`` pending lines (view and signature saved)."""
    from spider.frontier.files import FileStore
    from spider.frontier.recovery import write_signature
    from spider.records import QueueEntry
    fresh_dir(folder)
    store = FileStore(folder).open()
    store.add([QueueEntry("http://127.0.0.1:9/index.html", 0)])
    with open(folder / "queue.txt", "a", encoding="utf-8") as f:
        for start in range(0, n, 50_000):
            f.write("".join(f"http://127.0.0.1:9/p/{k % 10_000}.html?v={k}\t0\t0\t0\t-\n"
                            for k in range(start, min(n, start + 50_000))))
    store = FileStore(folder).open()
    assert store.save_view() and store.fold()
    write_signature(folder, "bench")


def stop_round(folder: Path) -> Dict[str, float]:
    """One round, in this process: the copy opened as the crawl's parent opens it (shared table,
    view loaded), a forked worker crawls STOP_PAGES pages (3 new links each), then the parent's
    fold and the stop's signature, timed (wall, and CPU of all threads by getrusage)."""
    import os
    import resource
    from spider.frontier.files import FileStore
    from spider.frontier.recovery import is_clean, write_signature
    from spider.records import QueueEntry, crawled_line

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    assert is_clean(folder, "bench")
    t0, c0 = time.perf_counter(), cpu()
    parent = FileStore(folder, shared=True).open()
    t1, c1 = time.perf_counter(), cpu()
    assert parent.from_view
    pid = os.fork()
    if pid == 0:
        try:
            parent.after_fork(os.getpid())
            done = 0
            while done < STOP_PAGES:
                for c in parent.claim(4, time.time(), lambda h: 0.0).claims:
                    with parent.hold():
                        parent.add([QueueEntry(f"{c.url}&new={j}", 1) for j in range(3)])
                        parent.settle(c, "crawled", record=crawled_line(c.url, 200, "text/html", 20_000, 0, time.time()))
                    done += 1
        finally:
            os._exit(0)
    parent.drop_seen()
    os.waitpid(pid, 0)
    t2, c2 = time.perf_counter(), cpu()
    assert parent.fold()
    write_signature(folder, "bench")
    t3, c3 = time.perf_counter(), cpu()
    return {"open s": t1 - t0, "open CPU s": c1 - c0, "stop s": t3 - t2, "stop CPU s": c3 - c2}


def stop_mode(sizes: Sequence[int], rounds: int, against: Optional[Path]) -> int:
    """``--stop N,...``: the clean stop (fold + signature) and the start (open) alone, no site and
    no fetch, so the machine's load on a crawl's pages does not drown them; each round in fresh
    processes, interleaved with the crawler in ``against`` if given."""
    trees = {"this": measure.SPIDER_DIR}
    if against is not None:
        measure.precompile(against / "spider")
        trees["against"] = against
    if str(measure.SPIDER_DIR) not in sys.path:   # copy_clean_stop reads the view with this tree's code
        sys.path.insert(0, str(measure.SPIDER_DIR))
    for n in sizes:
        base = RUN_DIR / f"stop-{n}"
        template = base / "template"
        subprocess.run([sys.executable, __file__, "--stop-build", str(n), "--spider-dir", str(trees["this"]),
                        "--stop-round", str(template / PROJECT)], check=True)
        got: Dict[str, List[Dict[str, float]]] = {name: [] for name in trees}
        for r in range(rounds):
            for name in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                copy_clean_stop(template, base / "projects")
                done = subprocess.run([sys.executable, __file__, "--stop-round", str(base / "projects" / PROJECT),
                                       "--spider-dir", str(trees[name])], check=True, capture_output=True, text=True)
                got[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"  N={n:,} round {r + 1} {name}: " + ", ".join(f"{k} {v * 1000:.1f} ms"
                                                                    for k, v in got[name][-1].items()), flush=True)
        for name, tree in trees.items():
            print(f"N={n:,} {name} ({tree}), medians of {rounds}: " + ", ".join(
                f"{k} {median([g[k] for g in got[name]]) * 1000:.1f} ms" for k in got[name][0]))
        shutil.rmtree(base, ignore_errors=True)
    return 0


# --------------------------------------------------------------------------- main

def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--extras", default="1000,100000,1000000", help="EXTRA queue sizes (default 1k,100k,1M)")
    ap.add_argument("--m", type=int, default=3000, help="pages crawled by each timed run (default 3000)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--pages", type=int, default=10_000, help="content pages of the site (default 10000)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per crawl run before it is killed")
    ap.add_argument("--no-clean-resume", action="store_true", help="skip the second timed run (step 4)")
    ap.add_argument("--no-appended", action="store_true", help="skip the appended run (steps 2-3)")
    ap.add_argument("--quiet-wait", type=float, default=20.0,
                    help="before each timed run, wait up to this many seconds for the machine to be idle")
    ap.add_argument("--spider-dir", type=Path, default=None,
                    help="folder with the crawler's main.py (default: the repository root)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--nginx-workers", type=int, default=1)
    ap.add_argument("--json", type=Path, default=OUT_DIR / "frontier.json")
    ap.add_argument("--intake", type=int, default=0, metavar="N",
                    help="only measure the intake of N pasted lines in one process (no site, no crawl)")
    ap.add_argument("--memory", default="", metavar="N,...",
                    help="only measure memory of clean resumes of N pending URLs against --workers-list")
    ap.add_argument("--workers-list", default="1,2,4", help="worker counts for --memory (default 1,2,4)")
    ap.add_argument("--compare-dir", type=Path, default=None,
                    help="with --memory: also run the crawler in this folder (e.g. the old code) on each project")
    ap.add_argument("--against", type=Path, default=None, metavar="DIR",
                    help="with --intake or the default mode: the same rounds, interleaved, with the crawler "
                         "in DIR (e.g. a `git worktree` of main)")
    ap.add_argument("--startup-check", action="store_true",
                    help="with --intake: time the start-up check of the same paste as well (slow)")
    ap.add_argument("--mixed", action="store_true",
                    help="with --intake: paste lines of every kind (scope, traps, known, bad lines) and say "
                         "whether every crawler left the same files, table and first claims")
    ap.add_argument("--intake-round", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--stop", default="", metavar="N,...",
                    help="only time the clean stop (fold + signature) and the start's open with N pending URLs, "
                         "no site (with --against: interleaved with that crawler)")
    ap.add_argument("--stop-build", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--stop-round", type=Path, default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    measure.set_spider_dir(args.spider_dir)
    if args.intake_round:   # (one round of --intake, in a process of its own)
        sys.path.insert(0, str(measure.SPIDER_DIR))
        print(json.dumps(intake_once(RUN_DIR / "intake", args.intake_round, args.startup_check, args.mixed)))
        return 0
    if args.stop_build or args.stop_round:   # (one step of --stop, in a process of its own)
        sys.path.insert(0, str(measure.SPIDER_DIR))
        if args.stop_build:   # (--stop-round names the folder then)
            stop_build(args.stop_round, args.stop_build)
        else:
            print(json.dumps(stop_round(args.stop_round)))
        return 0
    if args.stop:
        return stop_mode(sorted(int(x.replace("_", "")) for x in args.stop.split(",") if x.strip()), args.repeat,
                         args.against and args.against.resolve())
    if args.intake:
        return intake(args.intake, args.repeat, args.against and args.against.resolve(), args.startup_check,
                      args.mixed)
    if args.memory:
        return memory_mode(args)
    extras = sorted(int(x.replace("_", "")) for x in args.extras.split(",") if x.strip())
    if not measure.spider_ready():
        print("spider CLI not working (`python main.py --help` fails); nothing to measure")
        return 1
    params = SITE.prepare_site(args.pages, SITE.DEFAULT_SITE_DIR, args.port)
    print(f"site: {params.total_pages} pages at {params.start_url}; extras {extras}, M={args.m}, "
          f"workers {args.workers}, {args.repeat} repeat(s); crawler {measure.SPIDER_DIR}")
    trees = {"this": measure.SPIDER_DIR}
    if args.against is not None:   # the same rounds with another crawler, interleaved (same load on both)
        measure.set_spider_dir(args.against)
        trees["against"] = measure.SPIDER_DIR
        measure.set_spider_dir(trees["this"])
        print(f"interleaved with the crawler in {trees['against']}")
    every: Dict[str, Dict[int, List[FrontierRun]]] = {name: {e: [] for e in extras} for name in trees}
    t0 = time.monotonic()
    with SITE.Nginx(SITE.DEFAULT_SITE_DIR, params.port, args.nginx_workers) as nginx:
        SITE.check_rate(params)
        for rep in range(args.repeat):
            for extra in extras:
                for name in (list(trees) if rep % 2 == 0 else list(trees)[::-1]):
                    measure.SPIDER_DIR = trees[name]
                    run = run_one(params, extra, args.m, args.workers, rep, args.timeout, not args.no_clean_resume,
                                  nginx, args.quiet_wait, appended=not args.no_appended,
                                  tag="" if name == "this" else f"-{name}")
                    every[name][extra].append(run)
                    print(f"[{rep + 1}/{args.repeat}] {name if len(trees) > 1 else ''} {describe(run)}", flush=True)
    measure.SPIDER_DIR = trees["this"]
    results = {}
    for name, runs in every.items():
        if len(trees) > 1:
            print(f"\n##### crawler {name}: {trees[name]}")
        results[name] = print_summary(runs, args.repeat, args.workers, args.m)
    result = results["this"]
    if len(trees) > 1:
        compare(results, every, extras)
        result = {"trees": {k: str(v) for k, v in trees.items()}, **results}
        runs = {e: every["this"][e] + every["against"][e] for e in extras}
    else:
        runs = every["this"]
    print(f"\ntotal benchmark time {time.monotonic() - t0:.0f} s")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    result["runs"] = [{"extra": r.extra, "error": r.error,
                       "phases": {k: {"pages": p.pages, "known": p.known, "counts": p.counts, "note": p.note,
                                      **{f: v for f, v in asdict(p.res).items()
                                         if f not in ("stdout_path", "stderr_path")}}
                                  for k, p in r.phases.items()}}
                      for rs in runs.values() for r in rs]
    args.json.write_text(json.dumps(result, indent=1, default=str))
    print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
