"""Shared helpers of the benchmarks: run a command tree and measure wall time, CPU and memory.

CPU: resource.getrusage(RUSAGE_CHILDREN) deltas around the (single, sequential) subprocess. It
counts every descendant that was waited for by its parent (the crawler's workers are, when the
crawler reaps them), so it is the CPU of the whole tree. A psutil figure (last seen cpu_times of
each process of the tree, children included) is kept as a cross-check for processes that were
never reaped (it misses the CPU of processes that live less than one sampling period).

Memory: a thread samples the process tree every `interval` seconds (default 50 ms) and sums RSS
over all its processes; PSS (proportional set size, from /proc/PID/smaps_rollup via psutil's
memory_full_info) is summed too, every `pss_every` samples. RSS double-counts pages shared
between processes (the interpreter, copy-on-write pages of forked workers); PSS splits them.
The peaks are the largest sums seen.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import psutil

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
OUT_DIR = BENCH_DIR / "out"
MB = 1024 * 1024


def load_site_module():  # -> module bench/site.py
    """bench/site.py, imported under another name (`import site` would give the stdlib module)."""
    name = "bench_site"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / "site.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class RunResult:
    cmd: List[str]
    wall: float = 0.0
    cpu_rusage: float = 0.0          # user+sys seconds of all reaped descendants
    cpu_psutil: float = 0.0          # user+sys seconds seen by sampling (cross-check)
    peak_rss: int = 0                # bytes, max over samples of the sum over the tree
    peak_pss: Optional[int] = None   # bytes, same with PSS (None where unavailable)
    peak_procs: int = 0              # max number of processes seen at once
    peak_rss_root: int = 0           # bytes, peak RSS of the command's own process
    peak_rss_child: int = 0          # bytes, largest peak RSS of any one descendant
    returncode: Optional[int] = None
    timed_out: bool = False
    stdout_path: Optional[Path] = None
    stderr_path: Optional[Path] = None
    machine_busy: float = 0.0             # CPU seconds the whole machine spent busy during the run
    server_cpu: float = 0.0               # CPU seconds of the web server during the run (set by callers)
    first_growth: Optional[float] = None  # seconds from start until the watched file first grew
    last_growth: Optional[float] = None   # seconds from start until it last grew

    @property
    def cpu(self) -> float:
        return max(self.cpu_rusage, self.cpu_psutil)

    @property
    def others_cpu(self) -> float:
        """CPU seconds used during the run by everything but the tree and the web server (the
        sampler, other users of this shared machine)."""
        return max(0.0, self.machine_busy - self.cpu - self.server_cpu)

    def load_note(self) -> str:
        per = (lambda x: x / self.wall) if self.wall > 0 else (lambda x: 0.0)
        return (f"nginx {self.server_cpu:.1f} CPU s ({per(self.server_cpu):.2f} cores); rest of the machine "
                f"(sampler, other users) {self.others_cpu:.1f} CPU s ({per(self.others_cpu):.2f} cores)")

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def tail(self, n: int = 1500) -> str:
        parts = []
        for p in (self.stdout_path, self.stderr_path):
            if p and p.exists():
                text = p.read_text(errors="replace")[-n:].strip()
                if text:
                    parts.append(f"[{p.name}] {text}")
        return "\n".join(parts)


@dataclass
class _Sampler:
    root: psutil.Process
    interval: float = 0.05
    pss_every: int = 2
    peak_rss: int = 0
    peak_pss: Optional[int] = None
    peak_procs: int = 0
    rss_by_pid: Dict[int, int] = field(default_factory=dict)   # pid -> peak RSS
    own_cpu: Dict[int, float] = field(default_factory=dict)   # pid -> last seen user+system
    watch: Optional[Path] = None       # a file whose growth is timed (e.g. crawled.txt)
    watch_size: int = 0
    t0: float = 0.0
    first_growth: Optional[float] = None
    last_growth: Optional[float] = None
    seen: Dict[int, psutil.Process] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def tree(self) -> List[psutil.Process]:
        try:
            return [self.root] + self.root.children(recursive=True)
        except psutil.Error:
            return []

    def sample(self, with_pss: bool) -> None:
        rss = 0
        pss = 0
        pss_ok = with_pss
        procs = self.tree()
        for p in procs:
            p = self.seen.setdefault(p.pid, p)
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    one = p.memory_info().rss
                rss += one
                self.rss_by_pid[p.pid] = max(one, self.rss_by_pid.get(p.pid, 0))
                self.own_cpu[p.pid] = t.user + t.system
                if pss_ok:
                    pss += p.memory_full_info().pss
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
            except (psutil.AccessDenied, AttributeError):
                pss_ok = False
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_procs = max(self.peak_procs, len(procs))
        if pss_ok and procs:
            self.peak_pss = max(self.peak_pss or 0, pss)

    def check_watch(self) -> None:
        """Note the time when data lines (not '#' headers) were appended to the watched file."""
        if self.watch is None:
            return
        try:
            size = self.watch.stat().st_size
        except OSError:
            return
        if size < self.watch_size:   # replaced by a shorter file: start over
            self.watch_size = 0
        if size == self.watch_size:
            return
        try:
            with open(self.watch, "rb") as f:
                f.seek(self.watch_size)
                new = f.read(size - self.watch_size)
        except OSError:
            return
        self.watch_size = size
        if any(line.strip() and not line.startswith(b"#") for line in new.split(b"\n")):
            now = time.perf_counter() - self.t0
            if self.first_growth is None:
                self.first_growth = now
            self.last_growth = now

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            self.check_watch()
            self.sample(with_pss=(n % self.pss_every == 0))
            n += 1
            self.stop.wait(self.interval)

    def cpu_total(self) -> float:
        """Own user+system time last seen of every process of the tree (a lower bound: it misses
        the last <interval of each process and processes shorter than one interval)."""
        return sum(self.own_cpu.values())


def kill_tree(proc: subprocess.Popen, extra: Sequence[psutil.Process] = (), grace: float = 3.0) -> None:
    """SIGTERM then SIGKILL the process group we created and every descendant we know of."""
    procs: List[psutil.Process] = []
    try:
        root = psutil.Process(proc.pid)
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        pass
    known = {p.pid for p in procs}
    procs += [p for p in extra if p.pid not in known and p.is_running()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for p in procs:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(procs, timeout=grace)
        if not alive:
            break
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass


def run_measured(cmd: Sequence[str], *, cwd: Path = REPO_DIR, timeout: float = 1800.0,
                 log_dir: Optional[Path] = None, env: Optional[Dict[str, str]] = None,
                 interval: float = 0.05, pss_every: int = 2, watch: Optional[Path] = None) -> RunResult:
    """Run cmd (in its own session), sample its tree, and return wall/CPU/memory figures.

    With `watch`, also the times (from the start, at the sampling resolution) when that file
    first and last grew: e.g. crawled.txt, to split start-up, crawl and shut-down."""
    res = RunResult(cmd=list(cmd))
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        res.stdout_path, res.stderr_path = log_dir / "stdout.log", log_dir / "stderr.log"
    out = open(res.stdout_path, "wb") if res.stdout_path else subprocess.DEVNULL
    err = open(res.stderr_path, "wb") if res.stderr_path else subprocess.DEVNULL
    initial_size = watch.stat().st_size if watch is not None and watch.exists() else 0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    machine_before = _machine_busy()
    t0 = time.perf_counter()
    proc = subprocess.Popen(list(cmd), cwd=str(cwd), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                            env=env, start_new_session=True)
    sampler = _Sampler(psutil.Process(proc.pid), interval=interval, pss_every=pss_every, watch=watch,
                       watch_size=initial_size, t0=t0)
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    try:
        res.returncode = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        res.timed_out = True
        kill_tree(proc, list(sampler.seen.values()))
        res.returncode = proc.poll()
    except BaseException:
        kill_tree(proc, list(sampler.seen.values()))
        raise
    finally:
        res.wall = time.perf_counter() - t0
        sampler.stop.set()
        thread.join(5)
        sampler.check_watch()  # a last look: growth in the final interval
        for f in (out, err):
            if hasattr(f, "close"):
                f.close()
    # Stragglers (e.g. workers that outlived the parent): end them so they don't skew the next run.
    stray = [p for p in sampler.seen.values() if p.pid != proc.pid and _alive(p)]
    if stray:
        print(f"  warning: {len(stray)} process(es) of the tree outlived it; killing them", file=sys.stderr)
        for p in stray:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(stray, timeout=3)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    res.machine_busy = _machine_busy() - machine_before
    res.cpu_rusage = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    res.cpu_psutil = sampler.cpu_total()
    res.peak_rss = sampler.peak_rss
    res.peak_pss = sampler.peak_pss
    res.peak_procs = sampler.peak_procs
    res.peak_rss_root = sampler.rss_by_pid.get(proc.pid, 0)
    res.peak_rss_child = max((v for k, v in sampler.rss_by_pid.items() if k != proc.pid), default=0)
    res.first_growth, res.last_growth = sampler.first_growth, sampler.last_growth
    return res


def wait_quiet(max_wait: float, threshold: float = 0.3, window: float = 1.0) -> float:
    """Wait (at most max_wait seconds) until the machine's busy CPU over `window` seconds is below
    `threshold` cores; returns the last figure. Lowers the odds that another user's burst of work
    lands in a measurement on this shared machine."""
    deadline = time.monotonic() + max_wait
    busy = float("nan")
    while True:
        b0 = _machine_busy()
        time.sleep(window)
        busy = (_machine_busy() - b0) / window
        if busy < threshold or time.monotonic() >= deadline:
            return busy


def _machine_busy() -> float:
    """System-wide busy CPU seconds so far (all CPUs; idle and iowait excluded)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# --------------------------------------------------------------------------- small utilities

def count_lines(path: Path) -> int:
    """Number of non-empty lines of a file that are not '#' comments (0 when it does not exist)."""
    if not path.exists():
        return 0
    n = 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip() and not line.startswith(b"#"):
                n += 1
    return n


def median(values: Sequence[float]) -> float:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else float("nan")


def fmt(value: Optional[float], spec: str = ",.1f") -> str:
    if value is None or value != value:  # None or NaN
        return "-"
    return format(value, spec)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(headers, widths)))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))


SPIDER_DIR = REPO_DIR  # the folder holding the crawler's main.py (see set_spider_dir)


def set_spider_dir(path: Optional[Path]) -> None:
    """Benchmark the crawler in another folder (e.g. `git archive HEAD | tar -x -C DIR`, a
    snapshot that does not change while the benchmark runs) instead of the work tree."""
    global SPIDER_DIR
    if path is not None:
        path = path.resolve()
        if not (path / "main.py").exists():
            raise SystemExit(f"no main.py in {path}")
        SPIDER_DIR = path
    precompile(SPIDER_DIR / "spider")


def precompile(package: Path) -> None:
    """Byte-compile the crawler's modules once, as `pip install` does for an installed package.
    With PYTHONDONTWRITEBYTECODE set (some shells and sandboxes set it) and an editable install,
    every `python main.py` would compile them again: ~0.1 CPU s a start, which the benchmarks
    would charge to the crawl (a 2,000-page run: ~0.05 ms a page; a joining machine: its start)."""
    import compileall
    compileall.compile_dir(str(package), quiet=1)


def spider_cmd(*args: str) -> List[str]:
    """`python main.py ARGS` for the crawler, to run with cwd=SPIDER_DIR."""
    return [sys.executable, str(SPIDER_DIR / "main.py"), *args]


def spider_ready(timeout: float = 60.0) -> bool:
    try:
        r = subprocess.run(spider_cmd("--help"), cwd=str(SPIDER_DIR), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return r.returncode == 0


# --------------------------------------------------------------------------- spider projects

PROJECT_FILES = ("queue.txt", "crawled.txt", "failed.txt")


def project_counts(projects_dir: Path, name: str) -> Dict[str, int]:
    """Lines of queue.txt, crawled.txt and failed.txt of a project (0 for a missing file)."""
    base = projects_dir / name
    return {f.split(".")[0]: count_lines(base / f) for f in PROJECT_FILES}


def distinct_first_fields(path: Path) -> int:
    """Distinct URLs (first TAB field) in a project file."""
    if not path.exists():
        return 0
    seen = set()
    with open(path, "rb") as f:
        for line in f:
            url = line.split(b"\t", 1)[0].strip()
            if url and not url.startswith(b"#"):
                seen.add(url)
    return len(seen)
