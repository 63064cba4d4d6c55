#!/usr/bin/env python3
"""Crash-consistency soak: kill -9 a real crawl again and again, then check every guarantee.

    python bench/soak.py [--kills 60] [--seed 1] [--pages 800] [--workers 4]
    python bench/soak.py --plans worker --worker-modes at-record     # only one kind of kill

A loopback site (``tests/sitekit.py``'s ``TestSite``: a generated tree of --pages pages, plus
redirects and broken links, every request delayed by --page-delay so a crawl takes seconds)
counts every request server-side. The crawl is the user's command, in its own session:

    python main.py crawl NAME URL --workers 4 --delay 0 --max-depth 1000 --projects-dir DIR

and it is killed with SIGKILL, then the same command is run again without URL, until a run ends
with exit 0; that is one *round*. Rounds (a fresh project each) go on until --kills kills have
happened. The kills of a run follow a plan drawn at random:

- ``startup``: the whole group the instant the run has rewritten settings.txt (its first write),
  or up to 60 ms later: recovery of the previous kill, opening the store, queueing the seeds of a
  first run, forking the workers;
- ``early``:  the whole process group, 0-0.45 s after the start (interpreter start-up included);
- ``random``: the whole group at a uniformly random instant;
- ``lock``:   the whole group the moment ``/proc/locks`` shows the claim lock (``frontier.lock``)
  held, i.e. while some process is inside the claim/add/settle critical section;
- ``worker``: one worker only (the others go on; the parent must re-queue its claims and start a
  replacement): at a random instant, the moment it holds the claim lock, or the moment its line
  for the page it fetched lands in crawled.txt (inside the settle step, before the journal record
  that closes the claim); then maybe the whole group too;
- ``edit``: hand edits of queue.txt while the crawl runs (README, Guarantees, "Hand edits during a
  run"), one to three of --edit-modes at random instants once pages flow: ``append`` a URL of the
  site without its newline (``printf URL >> queue.txt``), ``truncate`` (``: > queue.txt``), ``rm``,
  ``sed`` (``sed -i``: a new file with the same lines). After each edit that takes a file away the
  soak waits (up to 5 s) for the crawl's one warning line that it rebuilt queue.txt; then the
  whole group is killed, or (half the time) the run goes on to its end. The round's invariants
  below must hold as after kills: nothing lost, no URL twice;
- ``pause``: not a kill but Ctrl-C (SIGINT to the group) once pages flow: the crawl stops cleanly
  (exit 130), the files at rest are checked, ``frontier.view`` must be there, and the next run
  resumes from it (the saved view, not the files), so later kills hit a run that loaded it.

After each whole-group kill (nothing running) the files must satisfy what README promises for a
killed crawl: crawled.txt and failed.txt exact (no URL twice, none in both), every line of every
state file whole and parseable. After each round (its last run stopped cleanly):

- crawled.txt holds exactly the site's reachable pages and redirects, failed.txt the broken links;
- no URL in two of queue.txt / crawled.txt / failed.txt, none twice in one; queue.txt and
  claims.txt have no data line; every line of every state file parses (crawled 7 fields, failed 4,
  queue ``parse_queue_line``, hosts ``parse_host_line``, rejected 3, fetch.log 6); nothing
  rejected, no ``warning:``, no traceback, no errors.log;
- refetches (requests minus distinct URLs minus robots.txt) <= workers x group kills + worker
  kills (README: "at most the ones that were in flight, one per worker"; the brief's looser bound
  workers x kills is printed too).

Kills are classified by phase: ``startup`` (the run had sent no request yet: fetch.log had not
grown), ``crawling``, ``ending`` (the run had already printed its summary); and flagged
``mid-rewrite`` when a temp file of an atomic rewrite was left behind. Prints a summary and one
JSON line; exits 1 when any guarantee was violated (the project folders are kept then).
Every request goes to 127.0.0.1; every wait is bounded (--max-seconds for the whole soak).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Set, Tuple

import psutil

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "main.py"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from sitekit import TestSite  # noqa: E402
from spider.politeness import parse_host_line  # noqa: E402
from spider.records import is_data, parse_queue_line  # noqa: E402

NAME = "soak"
STATE_FILES = ("queue.txt", "claims.txt", "crawled.txt", "failed.txt", "rejected.txt", "hosts.txt",
               "fetch.log")
PLANS = ["startup", "early", "random", "lock", "worker", "pause", "edit"]
WORKER_MODES = ["random", "at-lock", "at-record"]
EDIT_MODES = ["append", "truncate", "rm", "sed"]
REBUILT = "while the crawl ran: rebuilt"   # the crawl's warning after queue.txt was taken away
TEMP_PATTERN = re.compile(r"(^\..*\.tmp$)|(\.patch$)")


# -- the site -------------------------------------------------------------------------------------

@dataclass
class Site:
    server: TestSite
    pages: Set[str]        # 200 pages (paths)
    redirects: Set[str]    # 301 paths (crawled as hops)
    missing: Set[str]      # 404 paths (failed)

    def url(self, path: str) -> str:
        return self.server.url(path)

    @property
    def crawled_urls(self) -> Set[str]:
        return {self.url(p) for p in self.pages | self.redirects}

    @property
    def failed_urls(self) -> Set[str]:
        return {self.url(p) for p in self.missing}

    @property
    def distinct(self) -> int:
        return len(self.pages) + len(self.redirects) + len(self.missing)


def body_of(server: TestSite, path: str) -> bytes:
    route = server._route_for(path)
    assert route is not None, path
    return route.body


def make_site(n_pages: int, links: int, page_size: int, delay: float, extras: int) -> Site:
    server = TestSite().start()
    pages = server.add_tree(n_pages, links, page_size=page_size)
    redirects = {f"/r/{i}.html" for i in range(extras)}
    missing = {f"/m/{i}.html" for i in range(extras)}
    for i in range(extras):
        server.add_redirect(f"/r/{i}.html", f"/p/{(i * 37 + 5) % n_pages}.html")
    # The home page: add_tree's, plus the redirects and the broken links.
    extra_links = "".join(f'<a href="/r/{i}.html">r{i}</a> <a href="/m/{i}.html">m{i}</a>\n'
                          for i in range(extras))
    home = body_of(server, "/").replace(b"</ul>", extra_links.encode() + b"</ul>", 1)
    server.route("/", body=home, delay=delay)
    for p in pages - {"/"}:   # same bodies, now served after a delay: a crawl takes seconds
        server.route(p, body=body_of(server, p), delay=delay)
    server.reset()
    return Site(server, pages, redirects, missing)


# -- reading the project files --------------------------------------------------------------------

def lines_of(path: Path) -> List[str]:
    if not path.exists():
        return []
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def data_lines(path: Path) -> List[str]:
    return [x for x in lines_of(path) if is_data(x)]


def queued_lines(folder: Path, typed: Set[str]) -> List[str]:
    """The data lines of queue.txt, without bare lines of URLs the edit plan typed."""
    return [x for x in data_lines(folder / "queue.txt") if x not in typed]


def check_files(folder: Path, at_rest: bool, typed: Set[str] = frozenset()) -> List[str]:
    """Problems with the state files. ``at_rest``: the last run stopped cleanly. ``typed``: URLs
    the edit plan appended to queue.txt without their newline: a last line that is one of them is
    not a torn write of the crawl's, and a bare line of one left in queue.txt is a person's line
    (typed after the crawl's last look: the next start takes it, or drops it if crawled)."""
    bad: List[str] = []
    for name in STATE_FILES:
        p = folder / name
        if name == "queue.txt" and p.exists() and any(p.read_bytes().endswith(t.encode()) for t in typed):
            continue
        if p.exists() and p.stat().st_size and not p.read_bytes().endswith(b"\n"):
            bad.append(f"{name}: last line torn: {p.read_bytes()[-80:]!r}")
    crawled = [x.split("\t", 1)[0] for x in data_lines(folder / "crawled.txt")]
    failed = [x.split("\t", 1)[0] for x in data_lines(folder / "failed.txt")]
    for name, urls in (("crawled.txt", crawled), ("failed.txt", failed)):
        dup = [u for u, n in Counter(urls).items() if n > 1]
        if dup:
            bad.append(f"{name}: {len(dup)} URL(s) twice, e.g. {dup[:3]}")
    both = set(crawled) & set(failed)
    if both:
        bad.append(f"{len(both)} URL(s) in crawled.txt and failed.txt: {sorted(both)[:3]}")
    for name, shapes in (("crawled.txt", (7, 11)), ("failed.txt", (4,)), ("rejected.txt", (3,)), ("fetch.log", (6,))):
        for i, line in enumerate(data_lines(folder / name)):
            if len(line.split("\t")) not in shapes:
                bad.append(f"{name}: line with {len(line.split(chr(9)))} fields, not {' or '.join(map(str, shapes))}: "
                           f"{line[:120]!r}")
                break
    queue: List[str] = []
    for line in queued_lines(folder, typed):
        try:
            queue.append(parse_queue_line(line).url)
        except ValueError as e:
            bad.append(f"queue.txt: unparsable line ({e}): {line[:120]!r}")
    for line in data_lines(folder / "hosts.txt"):
        try:
            parse_host_line(line)
        except ValueError as e:
            bad.append(f"hosts.txt: unparsable line ({e}): {line[:120]!r}")
    if at_rest:
        dup = [u for u, n in Counter(queue).items() if n > 1]
        if dup:
            bad.append(f"queue.txt: {len(dup)} URL(s) twice at rest, e.g. {dup[:3]}")
        two = (set(queue) & set(crawled)) | (set(queue) & set(failed))
        if two:
            bad.append(f"{len(two)} URL(s) both queued and completed at rest: {sorted(two)[:3]}")
        if data_lines(folder / "claims.txt"):
            bad.append(f"claims.txt not empty at rest: {data_lines(folder / 'claims.txt')[:2]}")
    return bad


def temp_files(folder: Path) -> Set[str]:
    return {p.name for p in folder.iterdir() if TEMP_PATTERN.search(p.name)} if folder.exists() else set()


def ino(path: Path) -> int:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return 0


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


# -- processes ------------------------------------------------------------------------------------

def lock_holders(lock_path: Path) -> List[int]:
    """Pids holding an flock on ``lock_path`` right now (from /proc/locks; waiters excluded)."""
    try:
        ino = os.stat(lock_path).st_ino
        text = open("/proc/locks").read()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        f = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; a waiter's line has "->" after "1:"
        if len(f) >= 6 and f[1] == "FLOCK" and f[5].rsplit(":", 1)[-1] == str(ino):
            out.append(int(f[4]))
    return out


def wait_group_gone(pgid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return True
        time.sleep(0.01)
    return False


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def workers_of(pid: int) -> List[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=False)
    except psutil.NoSuchProcess:
        return []


# -- the soak -------------------------------------------------------------------------------------

@dataclass
class Stats:
    kills: int = 0
    group_kills: int = 0
    worker_kills: int = 0
    by_plan: Counter = field(default_factory=Counter)
    by_phase: Counter = field(default_factory=Counter)
    lock_seen: int = 0          # kills sent while /proc/locks showed the claim lock held
    mid_rewrite: int = 0        # kills that left a temp file of an atomic rewrite behind
    pauses: int = 0             # clean stops by Ctrl-C (the next run resumes from frontier.view)
    edits: Counter = field(default_factory=Counter)   # hand edits of queue.txt during a run, by mode
    rebuilt: int = 0            # ... that the crawl noticed and rebuilt queue.txt after (its warning)
    runs: int = 0
    rounds: int = 0
    refetches: int = 0
    robots_requests: int = 0
    max_refetch: int = 0
    max_refetch_url: str = "-"
    bound_readme: int = 0       # sum over rounds of workers*group kills + worker kills
    rerun_with_url: int = 0     # first run killed before settings.txt existed
    leftover_temp: int = 0      # temp files of atomic rewrites still there after a round
    violations: List[str] = field(default_factory=list)


class Soak:
    def __init__(self, args: argparse.Namespace, site: Site, base: Path) -> None:
        self.a = args
        self.site = site
        self.base = base
        self.rng = random.Random(args.seed)
        self.s = Stats()
        self.t0 = time.monotonic()
        self.env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        self.env["NO_PROXY"] = "*"
        self.log = base / "run-000.stderr"   # the stderr of the run going on
        self.typed: Set[str] = set()   # URLs the edit plan appended to queue.txt without a newline

    def left(self) -> float:
        return self.a.max_seconds - (time.monotonic() - self.t0)

    def violation(self, text: str) -> None:
        self.s.violations.append(text)
        print(f"  VIOLATION: {text}", flush=True)

    def cmd(self, projects: Path, with_url: bool) -> List[str]:
        url = [self.site.url("/")] if with_url else []
        return [sys.executable, str(MAIN), "crawl", NAME, *url, "--workers", str(self.a.workers),
                "--delay", "0", "--max-depth", "1000", "--projects-dir", str(projects)]

    # One run: start it, carry out the kill plan (or none), return (exit code or None, plan, stderr).
    def run_once(self, projects: Path, rno: int, with_url: bool, plan: Optional[str]) -> Tuple[Optional[int], str]:
        folder = projects / NAME
        log = self.base / f"run-{rno:03d}.stderr"
        fetch0, tmp0, ino0 = size(folder / "fetch.log"), temp_files(folder), ino(folder / "settings.txt")
        self.log = log
        with open(log, "w") as err:
            proc = subprocess.Popen(self.cmd(projects, with_url), stdout=subprocess.DEVNULL, stderr=err,
                                    cwd=str(ROOT), env=self.env, start_new_session=True)
        self.s.runs += 1
        group_killed = False
        lock_seen = False
        try:
            if plan is not None:
                group_killed, lock_seen = self.carry_out(plan, proc, folder, fetch0, ino0)
            try:
                proc.wait(timeout=max(1.0, min(self.a.run_timeout, self.left())))
            except subprocess.TimeoutExpired:
                kill_group(proc)
                proc.wait(timeout=10)
                self.violation(f"run {rno} did not finish within {self.a.run_timeout:.0f} s (hang?)")
                return None, log.read_text(errors="replace")
        finally:
            if proc.poll() is None:
                kill_group(proc)
                proc.wait(timeout=10)
            if not wait_group_gone(proc.pid):
                self.violation(f"run {rno}: processes of the crawl still alive 10 s after SIGKILL")
        stderr = log.read_text(errors="replace")
        if group_killed:
            self.s.kills += 1
            self.s.group_kills += 1
            self.round_group_kills += 1
            self.s.by_plan["worker+group" if plan == "worker" else plan] += 1
            if lock_seen:
                self.s.lock_seen += 1
            if re.search(r"^(done|stopped):", stderr, re.M):
                phase = "ending"
            elif size(folder / "fetch.log") > fetch0:
                phase = "crawling"
            else:
                phase = "startup"
            self.s.by_phase[phase] += 1
            if temp_files(folder) - tmp0:
                self.s.mid_rewrite += 1
            for problem in check_files(folder, at_rest=False, typed=self.typed) if folder.exists() else []:
                self.violation(f"after kill {self.s.kills} (run {rno}, {plan}, {phase}): {problem}")
            return None, stderr
        return proc.returncode, stderr

    def carry_out(self, plan: str, proc: subprocess.Popen, folder: Path, fetch0: int,
                  ino0: int) -> Tuple[bool, bool]:
        """Returns (the whole group was killed, the claim lock was seen held at that kill)."""
        rng = self.rng
        lock = folder / "frontier.lock"

        def started(limit: float) -> bool:   # this run has sent a request (workers are up)
            end = time.monotonic() + limit
            while time.monotonic() < end and proc.poll() is None:
                if size(folder / "fetch.log") > fetch0:
                    return True
                time.sleep(0.005)
            return False

        def hunt(limit: float, worker_only: bool) -> Optional[int]:
            """Poll /proc/locks until someone holds the claim lock; the holder's pid."""
            end = time.monotonic() + limit
            kids = {p.pid for p in workers_of(proc.pid)}
            n = 0
            while time.monotonic() < end and proc.poll() is None:
                for pid in lock_holders(lock):
                    if not worker_only or pid in kids:
                        return pid
                n += 1
                if n % 200 == 0:
                    kids = {p.pid for p in workers_of(proc.pid)}
            return None

        def record_then_kill(limit: float) -> Optional[int]:
            """Pick a worker, wait for its next claim (a ``C`` record in claims.txt, written before
            the request), then for that URL's line in crawled.txt, and SIGKILL the worker at once:
            it is then inside the settle step, between its crawled.txt line and the journal record
            that closes its claim (microseconds apart, so often a little later). The pid killed."""
            kids = workers_of(proc.pid)
            if not kids:
                return None
            victim = str(rng.choice(kids).pid).encode()
            end = time.monotonic() + limit
            jpath, clog = folder / "claims.txt", folder / "crawled.txt"
            try:
                jfd, cfd = os.open(jpath, os.O_RDONLY), os.open(clog, os.O_RDONLY)
            except FileNotFoundError:
                return None
            try:
                pos, url = os.fstat(jfd).st_size, None
                while url is None and time.monotonic() < end and proc.poll() is None:
                    new = os.fstat(jfd).st_size
                    if new > pos:
                        chunk = os.pread(jfd, new - pos, pos)
                        pos += chunk.rfind(b"\n") + 1
                        for rec in chunk.splitlines():
                            f = rec.split(b"\t")
                            if len(f) > 5 and f[0] == b"C" and f[3] == victim:
                                url = f[5] + b"\t"
                                break
                if url is None:
                    return None
                seen = os.fstat(cfd).st_size
                while time.monotonic() < end and proc.poll() is None:
                    now = os.fstat(cfd).st_size
                    if now > seen:
                        if url in os.pread(cfd, now - seen, seen):
                            try:
                                os.kill(int(victim), signal.SIGKILL)
                            except ProcessLookupError:
                                return None
                            return int(victim)
                        seen = now
            finally:
                os.close(jfd)
                os.close(cfd)
            return None

        if plan == "early":
            time.sleep(rng.uniform(0.0, 0.45))
        elif plan == "startup":
            # The instant this run has saved settings.txt (its first write), or a few ms later:
            # recovery of the previous kill, opening the store, queueing the seeds, forking.
            end = time.monotonic() + 5.0
            while time.monotonic() < end and proc.poll() is None and ino(folder / "settings.txt") == ino0:
                time.sleep(0.0005)
            time.sleep(rng.choice([0.0, rng.uniform(0.0, 0.06)]))
        elif plan == "random":
            time.sleep(rng.uniform(0.3, self.a.horizon))
        elif plan == "lock":
            started(3.0)
            time.sleep(rng.uniform(0.0, 0.5))
            holder = hunt(2.0, worker_only=False)
            if proc.poll() is None:
                kill_group(proc)
                return True, holder is not None
            return False, False
        elif plan == "pause":
            if not started(3.0):
                return False, False
            time.sleep(rng.uniform(0.0, 1.0))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)   # what Ctrl-C on a terminal sends
                self.s.pauses += 1
            return False, False
        elif plan == "edit":
            if not started(3.0):
                return False, False
            for _ in range(rng.randint(1, 3)):
                time.sleep(rng.uniform(0.05, 0.6))
                if proc.poll() is not None:
                    break
                self.hand_edit(rng.choice(self.a.edit_modes), folder / "queue.txt", proc)
            if rng.random() < 0.5 or self.s.kills >= self.a.kills:
                return False, False   # let this run go on to its end
            time.sleep(rng.uniform(0.1, 1.0))
        elif plan == "worker":
            if not started(3.0):
                return False, False
            for _ in range(rng.randint(1, 3)):
                time.sleep(rng.uniform(0.05, 0.6))
                how = rng.choice(self.a.worker_modes)
                if how == "at-lock":
                    victim = hunt(1.0, worker_only=True)
                elif how == "at-record":   # killed by record_then_kill itself
                    victim = record_then_kill(2.0)
                else:
                    kids = workers_of(proc.pid)
                    victim = rng.choice(kids).pid if kids else None
                if victim is None or proc.poll() is not None:
                    continue
                if how != "at-record":
                    try:
                        os.kill(victim, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                self.s.kills += 1
                self.s.worker_kills += 1
                self.round_worker_kills += 1
                self.s.by_plan[f"worker-{how}"] += 1
                if how == "at-lock":
                    self.s.lock_seen += 1
            if rng.random() < 0.5 or self.s.kills >= self.a.kills:
                return False, False   # let this run go on (to its end, or to the next plan)
            time.sleep(rng.uniform(0.1, 1.0))
        if proc.poll() is None:
            kill_group(proc)
            return True, False
        return False, False

    def hand_edit(self, how: str, queue: Path, proc: subprocess.Popen) -> None:
        """One hand edit of queue.txt under the running crawl, as a person makes it; an edit that
        takes lines away is followed by a wait for the crawl to say it rebuilt the file (a kill
        in between would lose what the edit took: the crawl had no time to put it back)."""
        before = self.log.read_text(errors="replace").count(REBUILT)
        if how == "append":   # printf 'URL' >> queue.txt: a page of the site, no newline
            url = self.site.url(self.rng.choice(sorted(self.site.pages)))
            with open(queue, "a+b") as f:   # (a line this plan typed before and the crawl has not
                f.seek(0, os.SEEK_END)      # ended yet is ended first, as a person would see to)
                end = f.tell()
                f.seek(max(0, end - 1))
                lead = b"\n" if end and f.read(1) != b"\n" else b""
                f.write(lead + url.encode())
            self.typed.add(url)
        elif how == "truncate":
            with open(queue, "w"):
                pass
        elif how == "rm":
            try:
                queue.unlink()
            except FileNotFoundError:
                pass
        else:
            subprocess.run(["sed", "-i", "s/x/x/", str(queue)], check=False, stderr=subprocess.DEVNULL)
        self.s.edits[how] += 1
        if how == "append":
            return
        end = time.monotonic() + 5.0
        while time.monotonic() < end and proc.poll() is None:
            if self.log.read_text(errors="replace").count(REBUILT) > before:
                self.s.rebuilt += 1
                return
            time.sleep(0.01)

    def plan(self, first: bool) -> str:
        """The first run of a project gets more start-up kills (settings saved, seeds not yet
        queued); later runs more kills mid-crawl."""
        weights = ({"startup": 0.3, "early": 0.2, "random": 0.3, "lock": 0.1, "worker": 0.1, "pause": 0.05,
                    "edit": 0.1} if first else
                   {"startup": 0.1, "early": 0.15, "random": 0.25, "lock": 0.2, "worker": 0.2, "pause": 0.15,
                    "edit": 0.2})
        weights = {k: v for k, v in weights.items() if k in self.a.plans} or {self.a.plans[0]: 1.0}
        return self.rng.choices(list(weights), list(weights.values()))[0]

    def round(self, rno_start: int) -> int:
        """One project from its first run to a run that exits 0; returns the next run number."""
        self.s.rounds += 1
        self.round_group_kills = self.round_worker_kills = 0
        self.typed = set()
        projects = self.base / f"round-{self.s.rounds:02d}"
        projects.mkdir()
        folder = projects / NAME
        self.site.server.reset()
        started = time.monotonic()
        rno, with_url, code = rno_start, True, None
        warnings: List[str] = []
        for _ in range(self.a.kills + 50):
            if self.left() <= 0:
                self.violation("--max-seconds reached before the round finished")
                return rno
            plan = self.plan(first=not (folder / 'queue.txt').exists()) if self.s.kills < self.a.kills else None
            code, stderr = self.run_once(projects, rno, with_url, plan)
            rno += 1
            if code == 2 and "does not exist" in stderr and not (folder / "settings.txt").exists():
                # The first run was killed before it saved settings.txt: nothing to resume; the
                # user runs the first command again.
                self.s.rerun_with_url += 1
                with_url = True
                continue
            for line in stderr.splitlines():
                if "Traceback" in line or line.startswith("Error:"):
                    self.violation(f"run {rno - 1} ({plan}): {line.strip()[:200]}")
                if line.startswith("warning:") and "--ignore-robots" not in line and REBUILT not in line:
                    warnings.append(line.strip())
            if code is None:
                with_url = False
                continue
            if code == 0:
                break
            if plan == "pause" and code == 130:   # stopped cleanly by Ctrl-C: resume it
                for problem in check_files(folder, at_rest=True, typed=self.typed):
                    self.violation(f"after Ctrl-C (run {rno - 1}): {problem}")
                if not (folder / "frontier.view").exists():
                    self.violation(f"after Ctrl-C (run {rno - 1}): the clean stop saved no frontier.view")
                with_url = False
                continue
            if plan == "worker":   # the run ended by itself after a worker kill, not with 0
                self.violation(f"run {rno - 1} exited {code} after worker kills: {stderr.strip()[-300:]!r}")
                with_url = False
                continue
            self.violation(f"run {rno - 1} exited {code}: {stderr.strip()[-300:]!r}")
            break
        else:
            self.violation("the round never ended with exit 0")
        for w in warnings:
            self.violation(f"round {self.s.rounds}: recovery found a bad line: {w[:200]}")
        self.verify_round(folder, time.monotonic() - started)
        return rno

    def verify_round(self, folder: Path, seconds: float) -> None:
        site, a = self.site, self.a
        for problem in check_files(folder, at_rest=True, typed=self.typed):
            self.violation(f"round {self.s.rounds}: {problem}")
        crawled = {x.split("\t", 1)[0] for x in data_lines(folder / "crawled.txt")}
        failed = {x.split("\t", 1)[0] for x in data_lines(folder / "failed.txt")}
        left = sorted(temp_files(folder))
        self.s.leftover_temp += len(left)
        if not crawled and not failed:
            seeds = [x for x in lines_of(folder / "settings.txt") if x.startswith("seed")]
            self.violation(f"round {self.s.rounds}: the last run exited 0 but nothing was ever crawled "
                           f"(settings.txt: {seeds}; queue.txt: {len(data_lines(folder / 'queue.txt'))} "
                           f"lines; {len(self.site.server.hits)} paths requested in the whole round)")
            print(f"round {self.s.rounds}: {self.round_group_kills} group + {self.round_worker_kills} worker "
                  f"kills, nothing crawled, {seconds:.1f} s", flush=True)
            return
        if crawled != site.crawled_urls:
            miss, extra = site.crawled_urls - crawled, crawled - site.crawled_urls
            self.violation(f"round {self.s.rounds}: crawled set wrong: {len(miss)} missing "
                           f"{sorted(miss)[:3]}, {len(extra)} extra {sorted(extra)[:3]}")
        if failed != site.failed_urls:
            self.violation(f"round {self.s.rounds}: failed set wrong: {sorted(failed ^ site.failed_urls)[:3]}")
        if queued_lines(folder, self.typed):
            self.violation(f"round {self.s.rounds}: queue.txt not empty after exit 0")
        rejected = data_lines(folder / "rejected.txt")
        if rejected:
            self.violation(f"round {self.s.rounds}: rejected.txt has {len(rejected)} line(s): {rejected[:2]}")
        if (folder / "errors.log").exists() and (folder / "errors.log").stat().st_size:
            self.violation(f"round {self.s.rounds}: errors.log: {(folder / 'errors.log').read_text()[:300]!r}")
        hits = site.server.hits
        robots = hits.pop("/robots.txt", 0)
        refetches = sum(hits.values()) - site.distinct
        unknown = set(hits) - site.pages - site.redirects - site.missing
        if unknown:
            self.violation(f"round {self.s.rounds}: requests for unknown paths {sorted(unknown)[:3]}")
        never = (site.pages | site.redirects | site.missing) - set(hits)
        if never:
            self.violation(f"round {self.s.rounds}: {len(never)} URL(s) never requested, e.g. {sorted(never)[:3]}")
        bound = a.workers * self.round_group_kills + self.round_worker_kills
        if refetches > bound:
            self.violation(f"round {self.s.rounds}: {refetches} refetches > {bound} "
                           f"(workers x {self.round_group_kills} group kills + {self.round_worker_kills} worker kills)")
        top, n = hits.most_common(1)[0] if hits else ("-", 1)
        self.s.refetches += refetches
        self.s.robots_requests += robots
        self.s.bound_readme += bound
        if n - 1 > self.s.max_refetch:
            self.s.max_refetch, self.s.max_refetch_url = n - 1, top
        print(f"round {self.s.rounds}: {self.round_group_kills} group + {self.round_worker_kills} worker kills, "
              f"{len(crawled)} crawled, {len(failed)} failed, {refetches} refetches (bound {bound}), "
              f"robots.txt x{robots}, {seconds:.1f} s" + (f"; temp files left: {left}" if left else ""),
              flush=True)

    def go(self) -> None:
        rno = 1
        while self.s.kills < self.a.kills and self.left() > 0:
            rno = self.round(rno)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=60, help="kills to deliver in all (default 60)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pages", type=int, default=800, help="pages of the generated site")
    ap.add_argument("--links", type=int, default=8, help="links per page")
    ap.add_argument("--page-size", type=int, default=2000)
    ap.add_argument("--page-delay", type=float, default=0.02, help="server seconds per request")
    ap.add_argument("--extras", type=int, default=10, help="redirects and broken links on the home page")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--horizon", type=float, default=2.5, help="latest instant of a 'random' kill (s)")
    ap.add_argument("--plans", type=lambda v: v.split(","), default=PLANS,
                    help=f"kill plans to draw from (default {','.join(PLANS)})")
    ap.add_argument("--worker-modes", type=lambda v: v.split(","), default=WORKER_MODES,
                    help=f"how single workers are picked (default {','.join(WORKER_MODES)})")
    ap.add_argument("--edit-modes", type=lambda v: v.split(","), default=EDIT_MODES,
                    help=f"hand edits of queue.txt the edit plan makes (default {','.join(EDIT_MODES)})")
    ap.add_argument("--run-timeout", type=float, default=120.0)
    ap.add_argument("--max-seconds", type=float, default=600.0, help="bound for the whole soak")
    ap.add_argument("--out", type=Path, default=None, help="folder for projects and logs (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the folder even when all is well")
    a = ap.parse_args()
    for name in a.plans:
        if name not in PLANS:
            ap.error(f"unknown plan {name!r}; choose from {','.join(PLANS)}")
    for name in a.edit_modes:
        if name not in EDIT_MODES:
            ap.error(f"unknown edit mode {name!r}; choose from {','.join(EDIT_MODES)}")
    for name in a.worker_modes:
        if name not in WORKER_MODES:
            ap.error(f"unknown worker mode {name!r}; choose from {','.join(WORKER_MODES)}")

    base = a.out or Path(tempfile.mkdtemp(prefix="spider-soak-"))
    if a.out is not None:
        if base.exists():
            shutil.rmtree(base)
        base.mkdir(parents=True)
    site = make_site(a.pages, a.links, a.page_size, a.page_delay, a.extras)
    print(f"soak: {a.kills} kills, seed {a.seed}, site {site.url('/')} ({len(site.pages)} pages, "
          f"{len(site.redirects)} redirects, {len(site.missing)} broken), {a.workers} workers, "
          f"{a.page_delay * 1000:.0f} ms per request; files in {base}", flush=True)
    # The site's threads share this interpreter: switch often, so that a kill aimed at an instant
    # (claim lock held, page just recorded) is not held up for 5 ms behind a request handler.
    sys.setswitchinterval(0.0002)
    soak = Soak(a, site, base)
    try:
        soak.go()
    finally:
        site.server.stop()
    s = soak.s
    seconds = time.monotonic() - soak.t0
    if s.kills < a.kills:
        soak.violation(f"only {s.kills} of {a.kills} kills delivered within --max-seconds")
    if s.refetches > a.workers * s.kills:
        soak.violation(f"{s.refetches} refetches > workers x kills = {a.workers * s.kills}")
    per_kill = s.refetches / s.kills if s.kills else 0.0
    print()
    print(f"kills        {s.kills} ({s.group_kills} whole crawl, {s.worker_kills} one worker) in "
          f"{s.runs} runs, {s.rounds} rounds, {seconds:.0f} s")
    print("plans        " + ", ".join(f"{k} {v}" for k, v in sorted(s.by_plan.items())))
    print("phases       " + ", ".join(f"{k} {v}" for k, v in sorted(s.by_phase.items()))
          + f" (whole-crawl kills); claim lock held at {s.lock_seen} kills; "
          f"{s.mid_rewrite} left an atomic-rewrite temp file ({s.leftover_temp} still there at the end)")
    print(f"refetches    {s.refetches} ({per_kill:.2f} per kill; README bound {s.bound_readme}, "
          f"workers x kills {a.workers * s.kills}); max refetch of one URL {s.max_refetch} "
          f"({s.max_refetch_url}); robots.txt requests {s.robots_requests}")
    print(f"pauses       {s.pauses} clean stops by Ctrl-C, each resumed from frontier.view")
    print("hand edits   " + (", ".join(f"{k} {v}" for k, v in sorted(s.edits.items())) or "none")
          + f" of queue.txt during a run; {s.rebuilt} rebuilds said by the crawl")
    if s.rerun_with_url:
        print(f"note         {s.rerun_with_url} first run(s) killed before settings.txt existed: rerun with URL")
    print(f"violations   {len(s.violations)}")
    for v in s.violations[:20]:
        print(f"  - {v}")
    summary = dict(kills=s.kills, group_kills=s.group_kills, worker_kills=s.worker_kills, runs=s.runs,
                   rounds=s.rounds, seconds=round(seconds, 1), refetches=s.refetches,
                   refetches_per_kill=round(per_kill, 3), max_refetch_one_url=s.max_refetch,
                   readme_bound=s.bound_readme, robots_requests=s.robots_requests,
                   by_plan=dict(s.by_plan), by_phase=dict(s.by_phase), lock_seen=s.lock_seen,
                   mid_rewrite=s.mid_rewrite, leftover_temp=s.leftover_temp, pauses=s.pauses,
                   edits=dict(s.edits), rebuilt=s.rebuilt, rerun_with_url=s.rerun_with_url,
                   violations=len(s.violations), seed=a.seed, pages=len(site.pages), workers=a.workers)
    print(json.dumps(summary, sort_keys=True))
    if s.violations or a.keep:
        print(f"project folders and run logs kept in {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if s.violations else 0


if __name__ == "__main__":
    sys.exit(main())
