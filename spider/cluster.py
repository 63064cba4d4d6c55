"""A crawl whose frontier lives in Redis, shared by machines: ``crawl NAME --store redis://HOST:PORT/DB``.

The first machine starts it with START_URLs; the same command without them, on any machine,
joins it with that machine's ``--workers``. Each machine runs the usual parent and workers
(``spider/crawl.py``), on its own project folder, which holds only what is that machine's: the
crawl lock, ``running.txt``, its WARC files and its workers' error notes. Everything the crawl
needs is in Redis under the prefix NAME (``spider/frontier/redisstore.py``), plus:

- ``NAME:settings``: the text of settings.txt (the first machine's options; options given when
  joining override them and are saved, as on a resume);
- ``NAME:beats``: a heartbeat per worker (``machine/pid`` -> started, last beat, pages, failures,
  WARC folder), written every few seconds by a thread of the worker that also renews its host
  leases while a fetch runs long; ``status --store`` reads the machines taking part from it;
- ``NAME:robots:{host}``: each host's robots.txt, fetched once for the whole cluster (a short
  ``SET NX`` lock makes the others wait for it), in the robots/HOST.txt format, kept past its
  freshness so that failed fetches still count up.

A machine's workers stop when Redis says nothing is pending and nothing in flight, on any
machine. Ctrl-C on one machine stops its workers only: they finish their page, give back their
claims and let their hosts go (``RedisStore.close``); a machine killed outright loses its leases
when they expire, and its in-flight URLs go back to pending then.
"""

from __future__ import annotations

import math
import os
import re
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from . import config as settings
from .config import CrawlConfig
from .crawl import (EXIT_INTERRUPTED, RUNNING, WORKER_STORE_ERROR, Crawl, Summary,
                    _die_with_parent, order_of)
from .frontier.contract import Claim, StoreError
from .frontier.redisstore import _LUA_COMMON, RedisStore, pending_lines
from .records import QueueEntry, utc_stamp
from .robots import FRESH_FOR, PENDING, Rules, dump, load
from .safefs import atomic_write
from .urls import host_key

SCHEMES = ("redis://", "rediss://", "unix://")
LEASE = 60.0            # seconds a host stays leased without a sign of life from its holder
BEAT_EVERY = 1.0        # heartbeat and lease renewal, at most this far apart (lease / 3 if shorter)
ERRORS = "errors.log"   # in the machine's project folder: why a worker stopped
GONE_AFTER = 30.0       # a worker without a heartbeat for this long is shown as gone

# shed: ARGV 1 prefix, 2 owner, 3 how many to let go, then hosts. Ends this owner's lease of
# those hosts that have nothing of it in flight, up to that many; returns the hosts let go.
_SHED = _LUA_COMMON + r"""
local out = {}
for i = 4, #ARGV do
  if #out >= tonumber(ARGV[3]) then break end
  local host = ARGV[i]
  if redis.call('HGET', hk('h', host), 'lowner') == ARGV[2] then
    local busy = false
    for _, v in ipairs(redis.call('HVALS', hk('f', host))) do
      if first_field(v) == ARGV[2] then busy = true; break end
    end
    if not busy then end_lease(host); out[#out + 1] = host end
  end
end
return out
"""


# tick, a worker's lease thread once a second, in one round trip: ARGV 1 prefix, 2 owner, 3 lease
# ms, 4 heartbeat fields before the time (started), 5 those after it (crawled TAB failed TAB warc),
# 6 seconds within which a heartbeat counts as alive, then the hosts this owner believes it holds.
# Renews those it still holds, writes the heartbeat on Redis's clock, and answers {its share of
# hosts (update_share), 1 if another live worker holds none, the hosts still held...}.
_TICK = _LUA_COMMON + r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local out = {0, 0}
for _, host in ipairs(renew(ARGV[2], ARGV[3], 7)) do out[#out + 1] = host end
redis.call('HSET', k('beats'), ARGV[2], ARGV[4] .. '\t' .. string.format('%.3f', now) .. '\t' .. ARGV[5])
local hosts = math.max(redis.call('ZCARD', k('hosts')), redis.call('ZCARD', k('leases')))
local beats = redis.call('HGETALL', k('beats'))
local alive = 0
for i = 1, #beats, 2 do
  local last = tonumber(string.match(beats[i + 1], '^[^\t]*\t([^\t]*)'))
  if last and now - last <= tonumber(ARGV[6]) then
    alive = alive + 1
    if beats[i] ~= ARGV[2] and redis.call('SCARD', k('held:' .. beats[i])) == 0 then out[2] = 1 end
  end
end
if alive == 0 then alive = #beats / 2 end
out[1] = math.max(1, math.ceil(hosts / math.max(1, alive)))
return out
"""


def check_url(url: str) -> str:
    """The --store URL, or StoreError with one line saying what is wrong with it."""
    if not url.startswith(SCHEMES):
        raise StoreError(f"--store {url}: not a Redis URL; use redis://HOST:PORT/DB "
                         "(the file store needs no --store)")
    return url


def machine_name() -> str:
    """This machine's name, as it goes into owner ids and WARC file names."""
    return re.sub(r"[^\w.-]", "_", socket.gethostname()) or "localhost"


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis
    return (redis.RedisError,)


def _guard(prefix: str, action: Callable[[], Any]) -> Any:
    try:
        return action()
    except _redis_errors() as e:
        raise StoreError(f"Redis store {prefix!r}: {type(e).__name__}: {e}") from None


class ClusterStore(RedisStore):
    """The Redis store of one machine's crawl: the frontier's verbs, plus the settings, the
    heartbeats and the shared robots.txt cache. ``url`` is where it was opened, for the workers;
    ``folder`` is this machine's project folder."""

    def __init__(self, client: Any, name: str, *, at: str = "", folder: Path | None = None,
                 **kw: Any) -> None:
        super().__init__(client, name, **kw)
        self.url = at
        self.folder = folder
        self.done: Counter[str] = Counter()   # this worker's settles, by kind
        self.started = time.time()
        self._shed, self._tick = client.register_script(_SHED), client.register_script(_TICK)
        self.someone_idle = False   # another live worker holds no host (update_share)

    @classmethod
    def connect(cls, url: str, name: str, folder: Path | None = None, **kw: Any) -> "ClusterStore":
        """The store at ``url``; StoreError with one line for a bad URL or a Redis out of reach.
        The parent's machine name is this host's name and the parent's pid, so that two crawls
        on one host are two machines (owner ids ``HOST:PID/WORKERPID`` stay unique everywhere)."""
        kw.setdefault("machine", f"{machine_name()}:{os.getpid()}")
        return cls.from_url(check_url(url), name, at=url, folder=folder, **kw)

    def for_worker(self, pid: int, config: CrawlConfig, lease: float) -> "ClusterStore":
        """A store of this worker's own (its own connections: none are shared across a fork)."""
        return ClusterStore.connect(self.url, self.prefix, self.folder, owner=pid, machine=self.machine,
                                 max_pages=config.max_pages, max_per_host=config.max_pages_per_host,
                                 order=order_of(config), lease=lease, defer=True)

    def _do(self, action: Callable[[], Any]) -> Any:
        return _guard(self.prefix, action)

    # -- settings --------------------------------------------------------------------------------
    def saved_settings(self) -> dict[str, Any] | None:
        """The crawl's settings as ``settings.load`` gives them, or None if there is no such crawl."""
        raw = self._do(lambda: self.r.get(self.key("settings")))
        if raw is None:
            return None
        with tempfile.TemporaryDirectory(prefix="spider-settings-") as d:
            (Path(d) / settings.SETTINGS).write_bytes(raw)
            try:
                return settings.load(Path(d))
            except ValueError as e:
                raise ValueError(str(e).replace(str(Path(d) / settings.SETTINGS),
                                                f"the settings in Redis ({self.key('settings')})")) from None

    def save_settings(self, config: CrawlConfig) -> None:
        with tempfile.TemporaryDirectory(prefix="spider-settings-") as d:
            settings.save(Path(d), config)
            text = (Path(d) / settings.SETTINGS).read_bytes()
        self._do(lambda: self.r.set(self.key("settings"), text))

    # -- a worker's life -------------------------------------------------------------------------
    def settle(self, claim: Claim, kind: str, *, record: str | None = None,
               requeue: QueueEntry | None = None) -> bool:
        ok = super().settle(claim, kind, record=record, requeue=requeue)
        if ok:
            self.done[kind] += 1
        return ok

    def holds(self, claim: Claim) -> bool:
        """Is the claim still this worker's (in flight under its owner and fencing token)? Asked
        right before each request: a worker paused past its lease must not send it, since the
        host's new holder keeps the host's pace without it."""
        token = self._tokens.get(claim.url)
        if token is not None and self.leased(host_key(claim.url)):
            return True   # leased less than half a lease ago: Redis cannot have taken it back
        raw = self._do(lambda: self.r.hget(self.per_host("f", host_key(claim.url)), claim.url))
        return token is not None and raw is not None and raw.decode("utf-8", "replace").startswith(
            f"{self.machine}/{claim.owner}\t{token}\t")

    def beat(self, warc: str = "-") -> None:
        """This worker's heartbeat: started, now (Redis's clock), pages crawled, failed, WARC folder."""
        def write() -> None:
            now = self.r.time()
            self.r.hset(self.key("beats"), self._who,
                        f"{self.started:.3f}\t{now[0] + now[1] / 1e6:.3f}\t{self.done['crawled']}\t"
                        f"{self.done['failed']}\t{warc}")
        self._do(write)

    def forget(self, who: str | None = None) -> None:
        """A worker gone: its heartbeat goes (a clean stop, or the parent saw it die)."""
        self._do(lambda: self.r.hdel(self.key("beats"), who or self._who))

    def reissue(self, owner: int) -> int:
        n = super().reissue(owner)
        self.forget(f"{self.machine}/{owner}")
        return n

    def beats(self) -> dict[str, list[str]]:
        raw = self._do(lambda: self.r.hgetall(self.key("beats")))
        return {k.decode(): v.decode().split("\t") for k, v in raw.items()}

    def server_time(self) -> float:
        now = self._do(self.r.time)
        return now[0] + now[1] / 1e6

    def update_share(self, alive_within: float) -> None:
        """``max_hosts``: the hosts with work, spread over the workers alive on every machine
        (rounded up), so that no worker takes every host while others have none."""
        def count() -> tuple[int, int]:
            hosts, leased, beats = (self.r.pipeline().zcard(self.key("hosts")).zcard(self.key("leases"))
                                    .hvals(self.key("beats")).execute())
            return max(hosts, leased), len(beats)
        hosts, workers = self._do(count)
        now = self.server_time()
        alive = [who for who, f in self.beats().items() if len(f) > 1 and now - float(f[1]) <= alive_within]
        self.max_hosts = max(1, math.ceil(hosts / max(1, len(alive) or workers)))
        # Rounded up, the shares can leave a worker with none (4 hosts, 3 workers: 2 + 2 + 0):
        # then a worker holding two or more gives one up (``shed``).
        others = [who for who in alive if who != self._who]
        pipe = self.r.pipeline()
        for who in others:
            pipe.scard(self.key(f"held:{who}"))
        self.someone_idle = 0 in self._do(pipe.execute) if others else False

    def tick(self, warc: str, alive_within: float) -> list[str]:
        """The lease thread's work in one round trip: ``renew_leases``, ``beat`` and
        ``update_share`` (four to six round trips a second per worker when they were apart, more
        than a polite crawl's pages cost). Returns the hosts still held."""
        asked = sorted(self._held)   # a copy: the worker's thread claims meanwhile
        since = time.monotonic()
        got = self._do(lambda: self._tick(args=[
            self.prefix, self._who, self.lease_ms, f"{self.started:.3f}",
            f"{self.done['crawled']}\t{self.done['failed']}\t{warc}", repr(alive_within), *asked]))
        self.max_hosts, self.someone_idle = int(got[0]), bool(int(got[1]))
        return self._renewed(asked, [h.decode() for h in got[2:]], since)

    def shed(self) -> list[str]:
        """Let go of the hosts held beyond this worker's share (when a machine joins, the share
        of the others goes down), those with nothing of it in flight, for others to take."""
        extra = len(self._held) - (self.max_hosts or len(self._held))
        if extra <= 0 and self.someone_idle and len(self._held) >= 2:
            extra = 1
            self.max_hosts = len(self._held) - 1   # until the next tick: not taken back at once
        if extra <= 0:
            return []
        gone = [h.decode() for h in self._do(lambda: self._shed(
            args=[self.prefix, self._who, extra, *sorted(self._held)]))]
        self._held -= set(gone)
        for host in gone:
            self._drop(host)
        return gone

    def held_hosts(self, now: float, most: int = 1000) -> list[tuple[str, str, float]]:
        """(host, reason, until) of the hosts with work that are held back for a reason
        (robots.txt unavailable, Retry-After, parked), among the first ``most`` of the index."""
        def look() -> list[tuple[str, str, float]]:
            hosts = [h.decode() for h in self.r.zrange(self.key("hosts"), 0, most - 1)]
            pipe = self.r.pipeline()
            for host in hosts:
                pipe.hmget(self.per_host("h", host), "reason", "next")
            out = []
            for host, (reason, nxt) in zip(hosts, pipe.execute()):
                if reason and reason != b"-" and float(nxt or 0) > now:
                    out.append((host, reason.decode(), float(nxt)))
            return sorted(out)
        return self._do(look)  # type: ignore[no-any-return]

    def robots_cache(self, clock: Callable[[], float]) -> "RedisRobots":
        return RedisRobots(self, clock)


class RedisRobots:
    """``RobotsCache``'s twin with Redis behind it: each host's robots.txt, fetched by one worker
    of the whole cluster and read from Redis by every other (``known``, ``get``, as RobotsCache)."""

    def __init__(self, store: ClusterStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._rules: dict[str, Rules] = {}
        self._missing: dict[str, float] = {}   # host -> when Redis last had nothing fresh

    def _key(self, host: str) -> str:
        return self.store.per_host("robots", host)

    def _read(self, host: str) -> Rules | None:
        raw = self.store._do(lambda: self.store.r.get(self._key(host)))
        if raw is None:
            return None
        try:
            return load(raw.decode("utf-8", "replace"))
        except (ValueError, KeyError):
            return None

    def known(self, host: str) -> Rules | None:
        now = self.clock()
        r = self._rules.get(host)
        if r is not None and r.fresh_until > now:
            return r
        if now - self._missing.get(host, -1e18) < 1.0:
            return None
        r = self._read(host)
        if r is None or r.fresh_until <= now:
            self._missing[host] = now
            return None
        self._rules[host] = r
        return r

    def get(self, host: str, fetch: Callable[[Rules | None], tuple[Rules, str]]) -> tuple[Rules, bool]:
        r = self.known(host)
        if r is not None:
            return r, False
        lock, r_ = self.store.per_host("robotslock", host), self.store.r
        # The lock lasts as long as a host lease: a fetcher killed with it is waited for no longer.
        hold = min(PENDING, self.store.lease_ms / 1000)
        end = time.monotonic() + hold
        while not self.store._do(lambda: r_.set(lock, self.store._who, nx=True, px=int(hold * 1000))):
            if time.monotonic() > end:   # its fetcher died: fetch it here
                break
            time.sleep(0.05)
            self._missing.pop(host, None)
            r = self.known(host)
            if r is not None:
                return r, False
        try:
            self._missing.pop(host, None)
            r = self.known(host)
            if r is not None:
                return r, False
            r, url = fetch(self._read(host))
            # Kept a day past its freshness: an expired "disallow-all" still counts the attempts.
            self.store._do(lambda: r_.set(self._key(host), dump(r, url).encode("utf-8"),
                                          exat=int(r.fresh_until + FRESH_FOR)))
            self._rules[host] = r
            return r, True
        finally:
            self.store._do(lambda: r_.delete(lock))


class _Lease(threading.Thread):
    """A worker's second thread: renews its host leases (a fetch may run longer than a lease),
    writes its heartbeat and recomputes its share of hosts, every ``every`` seconds."""

    def __init__(self, store: ClusterStore, every: float, warc: str) -> None:
        super().__init__(daemon=True, name="lease")
        self.store, self.every, self.warc = store, every, warc
        self.halt = threading.Event()

    def tick(self) -> None:
        self.store.tick(self.warc, 3 * self.every)
        self.store.shed()

    def run(self) -> None:
        while not self.halt.wait(self.every):
            try:
                self.tick()
            except (StoreError, RuntimeError):   # Redis gone: the worker's next call says so
                pass

    def stop(self) -> None:
        self.halt.set()
        self.join(5)


def beat_every(lease: float) -> float:
    return min(BEAT_EVERY, lease / 3)


def _note(folder: Path | None, text: str) -> None:
    """A worker's last words, in the machine's errors.log (the parent says them)."""
    if folder is None:
        return
    try:
        with open(Path(folder) / ERRORS, "a", encoding="utf-8") as f:
            f.write(f"{utc_stamp()} worker {os.getpid()}: {text}\n")
    except OSError:
        pass


def _last_note(folder: Path) -> str | None:
    try:
        lines = (Path(folder) / ERRORS).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    return lines[-1].split(": ", 1)[-1] if lines else None


def _worker_main(config: CrawlConfig, parent_store: ClusterStore, stop: Any, parent: int,
                 lease: float = LEASE) -> None:
    """A worker of a crawl on Redis: its own connections, a lease thread, the usual Spider."""
    import signal

    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stop.in_worker()
    from .fetch import Fetcher
    from .spider import Spider

    folder = parent_store.folder
    try:
        store = parent_store.for_worker(os.getpid(), config, lease)
        store.beat()
        store.update_share(3 * beat_every(lease))
    except StoreError as e:
        _note(folder, str(e))
        sys.exit(WORKER_STORE_ERROR)
    warc = _warc_writer(config, folder)
    thread = _Lease(store, beat_every(lease), str(warc.folder.resolve()) if warc else "-")
    thread.start()
    spider = Spider(config, store, wait=stop.wait, fetcher=Fetcher(config, warc=warc))
    code = 0
    try:
        spider.run(lambda: stop.wait(0))
        thread.stop()
        store.close()    # what it still holds goes back, its hosts are let go now
        store.forget()
    except StoreError as e:
        _note(folder, str(e))
        code = WORKER_STORE_ERROR
    finally:
        thread.stop()
        spider.close()
        try:
            store.flush()   # a settle or log line still buffered (an exit on an internal error)
        except StoreError:
            pass
    sys.exit(code)


def _warc_writer(config: CrawlConfig, folder: Path | None):  # type: ignore[no-untyped-def]
    """WARC files stay on the machine's disk, named by machine: spider-HOSTNAME-TIME-PID-N.warc.gz."""
    if not config.warc or folder is None:
        return None
    from .warc import WarcWriter
    w = WarcWriter.for_worker(Path(folder) / "warc", os.getpid())
    w.prefix = f"spider-{machine_name()}"
    return w


class ClusterCrawl(Crawl):
    """One machine's part of a crawl on Redis: the parent of its workers. No file recovery, fold,
    view or census: the frontier is Redis's. A local worker that dies has its claims given back
    at once (``reissue``); the run ends when Redis has nothing pending or in flight anywhere."""

    def __init__(self, folder: Path, config: CrawlConfig, store: ClusterStore, *,
                 seeds: tuple[str, ...] = (), lease: float = LEASE, **kw: Any) -> None:
        super().__init__(folder, config, seeds=seeds, **kw)
        self.store = store
        self.lease = lease

    def _worker_target(self) -> Callable[..., None]:
        lease = self.lease
        return lambda config, store, stop, parent: _worker_main(config, store, stop, parent, lease)

    def _workers_started(self, store: Any) -> None:
        pass

    def _watch(self, store: Any) -> None:
        self._tell_held_hosts(store)   # no stats.txt: the frontier's figures are Redis's

    def _worker_store_error(self, store: Any) -> Exception:
        self.store.refresh()   # Redis gone: that StoreError is the message
        why = _last_note(self.folder)
        return StoreError(f"a worker stopped: {why}" if why else
                          f"a worker lost the Redis store (see {self.folder / ERRORS})")

    def _seed(self) -> int:   # pragma: no cover - refused by the command line
        raise StoreError("seed is not supported with --store yet")

    def _run(self) -> int:
        cfg, store = self.config, self.store
        atomic_write(self.folder / RUNNING, f"pid {os.getpid()}\nstarted {utc_stamp()}\nworkers {cfg.workers}\n"
                                            f"store {store.url}\n")
        if cfg.ignore_robots:
            self._say("warning: --ignore-robots: robots.txt is neither fetched nor obeyed; "
                      "crawl only sites whose owners agree")
        for text in settings.warnings_for(cfg):
            self._say(f"warning: {text}")
        store.add(QueueEntry(s, 0, 0, 0.0, "-") for s in cfg.seeds)
        before = store.refresh()
        self._say(f"crawl {store.prefix} in Redis at {store.url}: machine {store.machine} "
                  f"with {cfg.workers} worker(s)")
        started = time.monotonic()
        if cfg.max_pages is not None and before.completed >= cfg.max_pages:
            self._say(f"--max-pages {cfg.max_pages} already reached in this crawl; "
                      "nothing to do (raise it to go on)")
            code = 0
        else:
            code = self._supervise(store)
            self._give_back()
        c = store.refresh()
        budget = cfg.max_pages is not None and c.completed >= cfg.max_pages and c.pending > 0
        self._finish_line(Summary(c.crawled, c.hops, c.failed, c.pending, c.rejected,
                                  time.monotonic() - started,
                                  "interrupted" if code == EXIT_INTERRUPTED else ("budget" if budget else "done"),
                                  c.crawled - before.crawled, c.rechecked))
        return code

    def _give_back(self) -> None:
        """Workers killed (a second Ctrl-C) or dead: their claims go back now, not at lease expiry."""
        for p in self.children:
            if p.pid is not None and p.exitcode not in (None, 0):
                self.store.reissue(p.pid)

    def _finish_line(self, s: Summary) -> None:
        self._say_summary(s)
        if s.stopped_by == "budget":
            self._say(f"--max-pages {self.config.max_pages} reached; {s.pending} URLs still pending")
        elif s.stopped_by == "interrupted":
            self._say("this machine's workers stopped (their claims went back); the other machines "
                      "go on; run the same command again to rejoin")


# -- status ---------------------------------------------------------------------------------------
def status_report(store: ClusterStore) -> str:
    """``status NAME --store URL``: the counts, the machines taking part and the hosts leased."""
    cfg = store.saved_settings()
    if cfg is None:
        raise StoreError(f"no crawl named {store.prefix!r} in Redis at {store.url}")
    c = store.refresh()
    now = store.server_time()
    out = [f"project   {store.prefix} (Redis at {store.url})",
           f"seeds     {' '.join(cfg.get('seeds', ())) or '-'}",
           f"pending   {c.pending}",
           f"in flight {c.in_flight}",
           f"crawled   {c.crawled}" + (f" (+{c.hops} redirects)" if c.hops else ""),
           f"failed    {c.failed}",
           f"rejected  {c.rejected}"]
    if cfg.get("max_pages"):
        out.append(f"budget    --max-pages {cfg['max_pages']}: {c.completed} used")
    machines: dict[str, dict[str, Any]] = {}
    r = store.r
    owners = {k.decode(): int(v) for k, v in store._do(lambda: r.hgetall(store.key("owners"))).items()}
    for who, f in sorted(store.beats().items()):
        machine = who.rsplit("/", 1)[0]
        m = machines.setdefault(machine, {"workers": 0, "gone": 0, "hosts": 0, "flight": 0, "pages": 0,
                                          "rate": 0.0, "seen": 1e18, "warc": set()})
        started, beat, pages = float(f[0]), float(f[1]), int(f[2]) + int(f[3])
        age = max(0.0, now - beat)
        m["seen"] = min(m["seen"], age)
        if len(f) > 4 and f[4] != "-":
            m["warc"].add(f[4])
        if age > GONE_AFTER:   # no heartbeat for long: killed, its leases expired
            m["gone"] += 1
            continue
        m["workers"] += 1
        m["hosts"] += int(store._do(lambda: r.scard(store.key(f"held:{who}"))))
        m["flight"] += owners.get(who, 0)
        m["pages"] += pages
        m["rate"] += pages / (beat - started) if beat > started else 0.0
    live = {k: v for k, v in machines.items() if v["workers"]}
    out.append("")
    out.append(f"machines  {len(live)} taking part" + (f", {len(machines) - len(live)} gone" if len(machines) > len(live) else ""))
    if machines:
        out.append(f"  {'machine':28} {'workers':>7} {'hosts':>5} {'flight':>6} {'pages':>7} {'pages/s':>7} "
                   f"{'seen':>6}  warc")
        for name, m in sorted(machines.items()):
            seen = "gone" if not m["workers"] else ("now" if m["seen"] < 1 else f"{m['seen']:.0f}s")
            out.append(f"  {name[:28]:28} {m['workers']:>7} {m['hosts']:>5} {m['flight']:>6} {m['pages']:>7} "
                       f"{m['rate']:>7.1f} {seen:>6}  {', '.join(sorted(m['warc'])) or '-'}")
    leases = store._do(lambda: r.zrange(store.key("leases"), 0, 99, withscores=True))
    if leases:
        out.append("")
        out.append(f"  {'host (leased)':32} {'holder':34} {'pending':>7} {'flight':>6} {'lease':>6}")
        for raw, until in leases:
            host = raw.decode()
            holder = (store._do(lambda: r.hget(store.per_host("h", host), "lowner")) or b"-").decode()
            pending = store.pending_on(host)
            fl = store._do(lambda: r.hlen(store.per_host("f", host)))
            out.append(f"  {host[:32]:32} {holder[:34]:34} {pending:>7} {fl:>6} {until / 1000 - now:>5.0f}s")
    return "\n".join(out)


EXPORTED = ("crawled", "failed", "checks", "removed")                          # what export reads
REPORTED = ("crawled", "failed", "rejected", "duplicates", "checks", "removed")   # and report


def copy_out(store: ClusterStore, folder: Path, logs: tuple[str, ...], pending: bool = False) -> None:
    """Write a read-only copy of what ``export`` or ``report`` reads, from Redis into ``folder``
    (a temporary one): the logs as their files, and with ``pending`` settings.txt and queue.txt
    (the pending lines, ready and retries). The commands then read it as a project folder."""
    for name in logs:
        atomic_write(folder / f"{name}.txt", "".join(store.lines(name)))
    if not pending:
        return
    raw = store._do(lambda: store.r.get(store.key("settings"))) or b""
    atomic_write(folder / settings.SETTINGS, raw.decode("utf-8", "replace"))
    lines: list[str] = []
    for kind in ("q", "r", "d"):
        for key in store._do(lambda: list(store.r.scan_iter(f"{store.prefix}:{kind}:{{*}}", count=1000))):
            for member in store._do(lambda: store.r.zrange(key, 0, -1)):
                if kind == "d":
                    lines.append(member.decode("utf-8", "replace").split(" ", 1)[1] + "\n")
                else:   # a line, or a block of lines (RedisStore.add)
                    lines += [line.decode("utf-8", "replace") + "\n" for line, _ in pending_lines(member, 0.0)]
    atomic_write(folder / "queue.txt", "".join(lines))
