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

import gc
import math
import os
import re
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

from . import config as settings
from . import recrawl
from .broken import split_failed
from .config import CrawlConfig
from .crawl import (EXIT_INTERRUPTED, RUNNING, WORKER_STORE_ERROR, Crawl, Summary,
                    _die_with_parent, child_signals, order_of)
from .frontier.contract import Claim, ClaimResult, StoreError
from .frontier.redisstore import _LUA_COMMON, CLAIM_BATCH, KEY_SCALE, RedisStore, pending_lines
from .records import QueueEntry, first_field, is_data, utc_stamp
from .robots import FRESH_FOR, PENDING, Rules, dump, load
from .safefs import atomic_write
from .stats import STATS_EVERY, Census, StatsRecorder, crawl_seconds, pages_per_second
from .urls import host_key
from .words import plural

SCHEMES = ("redis://", "rediss://", "unix://")
LEASE = 60.0            # seconds a host stays leased without a sign of life from its holder
BEAT_EVERY = 1.0        # heartbeat and lease renewal, at most this far apart (lease / 3 if shorter)
ERRORS = "errors.log"   # in the machine's project folder: why a worker stopped
GONE_AFTER = 30.0       # a worker without a heartbeat for this long is shown as gone
WATCH_EVERY = 0.1       # how often a worker's lease thread looks for workers joining (one HLEN)

# shed: ARGV 1 prefix, 2 owner, 3 how many to let go, then hosts. Ends this owner's lease of
# those hosts that have nothing of it in flight, up to that many; returns the hosts let go.
_SHED = _LUA_COMMON + r"""
local out = {}
for i = 4, #ARGV do
  if #out >= tonumber(ARGV[3]) then break end
  local host = ARGV[i]
  if redis.call('HEXISTS', hk('l', host), ARGV[2]) == 1 and not busy(host, ARGV[2]) then
    end_lease(host, ARGV[2])
    out[#out + 1] = host
  end
end
return out
"""


# A discovery run (--discover) parks the pending URLs it is not to fetch: moved from the host's
# ready queue to its retries (``d``) with a time that never comes (``PARKED``), as "key line"
# like any retry, so they stay pending (counted, and pull writes them to queue.txt) but no claim
# takes them; ``counts.parked`` counts them. A run without --discover lets them all go back.
PARKED = 1e12
# park: ARGV 1 prefix, then groups: host, lowest key, highest key, n, then n queue lines. The
# members of the host's ready queue scored within those keys are read as their lines (a member
# of ``q`` may be a block of lines, ``RedisStore.add``): each of the n lines found goes to ``d``
# under its own key; the lines of a block that stay are one member again, scored by the first
# one's key (a block's lines keep their keys, so the order is the same). Returns how many.
_PARK = _LUA_COMMON + r"""
local function lines_of(member, key)   -- redisstore.pending_lines
  local lf = string.find(member, '\n', 1, true)
  if not lf then return {{key, member}} end
  local first = string.sub(member, 1, lf - 1)
  local out, source = {{key, first}}, string.match(first, '[^\t]*$')
  local at = lf + 1
  while at <= #member do
    local e = string.find(member, '\n', at, true) or (#member + 1)
    local sp = string.find(member, ' ', at, true)
    local line = string.sub(member, sp + 1, e - 1)
    if string.sub(line, -2) == '\t^' then line = string.sub(line, 1, -2) .. source end
    key = key + tonumber(string.sub(member, at, sp - 1))
    out[#out + 1] = {key, line}
    at = e + 1
  end
  return out
end
local function block_of(items)   -- as flush writes a block
  local parts = {items[1][2]}
  local src = string.match(items[1][2], SOURCE)
  for j = 2, #items do
    local line = items[j][2]
    if src and string.match(line, SOURCE) == src then line = string.sub(line, 1, -#src - 1) .. '^' end
    parts[#parts + 1] = num(items[j][1] - items[j - 1][1]) .. ' ' .. line
  end
  return table.concat(parts, '\n')
end
local n, touched, i = 0, {}, 2
while i <= #ARGV do
  local host, lo, hi, m = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  local todo = {}
  for j = i + 4, i + 3 + m do todo[ARGV[j]] = true end
  i = i + 4 + m
  local q = hk('q', host)
  local got = redis.call('ZRANGEBYSCORE', q, lo, hi, 'WITHSCORES')
  for j = 1, #got, 2 do
    local keep, moved = {}, 0
    for _, item in ipairs(lines_of(got[j], tonumber(got[j + 1]))) do
      if todo[item[2]] then
        redis.call('ZADD', hk('d', host), '""" + f"{PARKED:.0f}" + r"""', num(item[1]) .. ' ' .. item[2])
        moved = moved + 1
      else
        keep[#keep + 1] = item
      end
    end
    if moved > 0 then
      redis.call('ZREM', q, got[j])
      if #keep > 0 then redis.call('ZADD', q, num(keep[1][1]), block_of(keep)) end
      n = n + moved
      touched[host] = true
    end
  end
end
for host, _ in pairs(touched) do reindex(host); redelay(host) end
redis.call('HINCRBY', k('counts'), 'parked', n)
return n
"""
# unpark: ARGV 1 prefix, 2 most lines to let go. Returns how many went back to the ready queues.
_UNPARK = _LUA_COMMON + r"""
local n = 0
for _, host in ipairs(redis.call('ZRANGE', k('dhosts'), 0, -1)) do
  if n >= tonumber(ARGV[2]) then break end
  local d = hk('d', host)
  local parked = redis.call('ZRANGEBYSCORE', d, '""" + f"{PARKED:.0f}" + r"""', '+inf', 'LIMIT', 0, tonumber(ARGV[2]) - n)
  for _, m in ipairs(parked) do
    local sp = string.find(m, ' ', 1, true)
    redis.call('ZREM', d, m)
    if push_ready(host, string.sub(m, 1, sp - 1), string.sub(m, sp + 1)) == 0 then
      redis.call('HINCRBY', k('counts'), 'pending', -1)
    end
    n = n + 1
  end
  if #parked > 0 then reindex(host); redelay(host) end
end
-- (-n of a Lua 0 is "-0", which HINCRBY refuses)
if redis.call('HINCRBY', k('counts'), 'parked', n > 0 and -n or 0) <= 0 then redis.call('HDEL', k('counts'), 'parked') end
return n
"""
UNPARK_BATCH = 1000   # lines let go per script: one script must not hold Redis for long
# tick, a worker's lease thread once a second, in one round trip: ARGV 1 prefix, 2 owner, 3 lease
# ms, 4 heartbeat fields before the time (started), 5 those after it (crawled TAB failed TAB warc),
# 6 seconds within which a heartbeat counts as alive, then the hosts this owner believes it holds.
# Renews those it still holds, writes the heartbeat on Redis's clock, and answers {its share of
# hosts (update_share), 1 if another live worker holds none, the heartbeats counted, the hosts
# still held...}.
_TICK = _LUA_COMMON + r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local out = {0, 0, 0}
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
out[3] = #beats / 2
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
        self._park, self._unpark = client.register_script(_PARK), client.register_script(_UNPARK)
        self.someone_idle = False   # another live worker holds no host (update_share)
        self.beating = -1           # the heartbeats update_share counted
        self.only: tuple[Any, ...] = ()       # a discovery run: the patterns of the URLs it fetches
        self.seeds: frozenset[str] = frozenset()

    @classmethod
    def connect(cls, url: str, name: str, folder: Path | None = None, **kw: Any) -> "ClusterStore":
        """The store at ``url``; StoreError with one line for a bad URL or a Redis out of reach.
        The parent's machine name is this host's name and the parent's pid, so that two crawls
        on one host are two machines (owner ids ``HOST:PID/WORKERPID`` stay unique everywhere)."""
        kw.setdefault("machine", f"{machine_name()}:{os.getpid()}")
        return cls.from_url(check_url(url), name, at=url, folder=folder, **kw)

    def for_worker(self, pid: int, config: CrawlConfig, lease: float) -> "ClusterStore":
        """A store of this worker's own (its own connections: none are shared across a fork)."""
        store = ClusterStore.connect(self.url, self.prefix, self.folder, owner=pid, machine=self.machine,
                                     max_pages=config.max_pages, max_per_host=config.max_pages_per_host,
                                     order=order_of(config), lease=lease, defer=True,
                                     join=config.delay == 0 and not config.auto_throttle,
                                     batch=CLAIM_BATCH if (config.delay == 0 and not config.auto_throttle
                                                           and order_of(config).batch_keeps_order) else 1)
        store.discover(config)
        return store

    # -- a discovery run (--discover) ------------------------------------------------------------
    def discover(self, config: CrawlConfig) -> None:
        """A discovery run fetches only seeds, rechecks and URLs matching ``config.discover``."""
        from .patterns import compile_pattern
        self.only = tuple(compile_pattern(p) for p in config.discover)
        self.seeds = frozenset(config.seeds)

    def wanted(self, e: QueueEntry) -> bool:
        """As the file store's ``_wanted``: the seeds, rechecks and URLs matching a pattern."""
        return e.url in self.seeds or e.kind == "recheck" or any(p.search(e.url) for p in self.only)

    def add(self, entries: Iterable[QueueEntry]) -> list[QueueEntry]:
        new = super().add(entries)
        if self.only:   # left pending for the fetch run
            self.park(e for e in new if not self.wanted(e))
        return new

    def park(self, entries: Iterable[QueueEntry]) -> int:
        """Park these entries, queued ready (by ``add`` or a give-back): each is looked for
        among the members of its host's queue within its score's keys (its key is the score,
        then a sequence number), blocks included."""
        groups: dict[tuple[str, int, int], list[str]] = {}
        for e in entries:
            score = self._score(e)
            groups.setdefault((host_key(e.url), (score - 1) * KEY_SCALE, (score + 1) * KEY_SCALE),
                              []).append(e.line()[:-1])
        return self._park_groups(groups)

    def _park_groups(self, groups: dict[tuple[str, int, int], list[Any]]) -> int:
        """Park lines of the hosts' ready queues, given as (host, lowest key, highest key) -> lines,
        at most UNPARK_BATCH lines a script. The worker's buffered writes go first (a give-back's
        settle puts the line back that this parks)."""
        n, args, count = 0, [], 0
        for (host, lo, hi), lines in groups.items():
            for at in range(0, len(lines), UNPARK_BATCH):
                part = lines[at:at + UNPARK_BATCH]
                args += [host, lo, hi, len(part), *part]
                count += len(part)
                if count >= UNPARK_BATCH:
                    n += self._park_script(args)
                    args, count = [], 0
        return n + (self._park_script(args) if args else 0)

    def _park_script(self, args: list[Any]) -> int:
        return int(self._do(lambda: self._park(args=self._carry(*args))))

    def park_pending(self) -> int:
        """At the start of a discovery run: the ready URLs it is not to fetch are parked."""
        groups: dict[tuple[str, int, int], list[Any]] = {}
        r = self.r
        for key in self._do(lambda: list(r.scan_iter(f"{self.prefix}:q:{{*}}", count=1000))):
            host = key.decode("utf-8", "surrogatepass")[len(self.prefix) + 4:-1]
            for member, score in self._do(lambda: r.zrange(key, 0, -1, withscores=True)):
                todo = [line for line, _ in pending_lines(member, 0.0)   # bytes: as Redis holds them
                        if not self.wanted(QueueEntry(first_field(line.decode("utf-8", "replace"))))]
                if todo:   # the member's own score: its lines are found there
                    groups.setdefault((host, int(score), int(score)), []).extend(todo)
        return self._park_groups(groups)

    def unpark(self) -> int:
        """A run without --discover: every parked URL goes back to its host's ready queue."""
        n = 0
        while True:
            got = int(self._do(lambda: self._unpark(args=[self.prefix, UNPARK_BATCH])))
            n += got
            if got < UNPARK_BATCH:
                return n

    def claim(self, limit: int, now: float, delay_for: Callable[[str], float]) -> ClaimResult:
        got = super().claim(limit, now, delay_for)
        if self.only:
            # A URL claimed in the instant between its admission by another worker and its
            # parking (or a retry of an earlier run that came due): given back, and parked.
            unwanted = [c for c in got.claims if not self.wanted(c.entry)]
            # (A due retry goes back ready: into its host's queue, where parking finds it.)
            back = [replace(c.entry, not_before=0.0) for c in unwanted]
            for c, e in zip(unwanted, back):
                self.settle(c, "released", requeue=e)
            self.park(back)
            got.claims = [c for c in got.claims if c not in unwanted]
            # Parked URLs wait for the fetch run: the discovery run ends without them.
            parked = self._do(lambda: self.r.hget(self.key("counts"), "parked"))
            got.pending = max(0, got.pending - int(parked or 0))
        return got

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

    def beat_count(self) -> int:
        """How many workers have a heartbeat (live, gone, or killed not long ago)."""
        return int(self._do(lambda: self.r.hlen(self.key("beats"))))

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
        self.beating = workers   # the heartbeats counted: the lease thread looks for a change
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
        self.beating = int(got[2])   # as update_share: the lease thread looks for a change
        return self._renewed(asked, [h.decode() for h in got[3:]], since)

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

    # -- recrawl and sitemaps --------------------------------------------------------------------
    logs_in_store = True   # sitemaps.py: lastmod lines go to the log in Redis, not to a file

    def read_schedule(self) -> dict[str, recrawl.Page]:
        """schedule.txt's pages, from its log in Redis (a worker reads it at its first recheck)."""
        return recrawl.schedule_of(line.rstrip("\r\n").split("\t") for line in self.lines("schedule")
                                   if is_data(line))[0]

    def file_text(self, name: str) -> str | None:
        """A state file that is rewritten, not appended to (round.txt, unlinked.txt): kept in
        ``NAME:files`` (file name -> text), where push and pull carry it."""
        raw = self._do(lambda: self.r.hget(self.key("files"), name))
        return None if raw is None else raw.decode("utf-8", "replace")

    def save_file(self, name: str, text: str | None) -> None:
        """Replace (None: delete) a file of ``NAME:files``: one command, so atomic."""
        if text is None:
            self._do(lambda: self.r.hdel(self.key("files"), name))
        else:
            self._do(lambda: self.r.hset(self.key("files"), name, text.encode("utf-8")))

    def requeue_failed(self) -> int:
        """``recrawl --failed``: every failed URL back to pending (its depth, no attempts spent,
        its source), its lines out of the failed log and the failed count, in one MULTI/EXEC
        (WATCH on the log: tried again if a worker appended to it meanwhile). Returns how many."""
        failed = self.key("log:failed")

        def move(pipe: Any) -> int:
            lines = [x.decode("utf-8", "replace") for x in pipe.lrange(failed, 0, -1)]
            crawled = {first_field(x.decode("utf-8", "replace")) for x in pipe.lrange(self.key("log:crawled"), 0, -1)}
            queued, kept = split_failed(lines, crawled)
            pipe.multi()
            if queued:
                gone = sum(map(is_data, lines)) - sum(map(is_data, kept))
                pipe.delete(failed)
                if kept:
                    pipe.rpush(failed, *kept)
                pipe.hincrby(self.key("counts"), "failed", -gone)
                self.requeue(queued.values(), client=pipe)
            return len(queued)
        return int(self._do(lambda: self.r.transaction(move, failed, value_from_callable=True)))

    def compact_schedule(self) -> None:
        """The schedule log with one line per URL (its latest), as ``recrawl.compact_schedule``
        rewrites schedule.txt at the end of a run: in one MULTI/EXEC, under WATCH (tried again
        if a worker of any machine appends meanwhile)."""
        key = self.key("log:schedule")

        def compact(pipe: Any) -> None:
            lines = [x.decode("utf-8", "replace") for x in pipe.lrange(key, 0, -1)]
            rows = [x.rstrip("\r\n").split("\t") for x in lines if is_data(x)]
            pipe.multi()
            if len(rows) == len(lines) and recrawl._compact(rows):
                return   # one good line per URL already (a fresh crawl's): nothing to parse or rewrite
            pages = recrawl.schedule_of(rows)[0]
            if len(pages) < len(lines):
                pipe.delete(key)
                if pages:
                    pipe.rpush(key, *(page.line() for page in pages.values()))
        self._do(lambda: self.r.transaction(compact, key))

    def has_rechecks(self) -> bool:
        return bool(self._do(lambda: self.r.zcard(self.key("rhosts"))))


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
    writes its heartbeat and recomputes its share of hosts, every ``every`` seconds. In between,
    every WATCH_EVERY seconds, it counts the heartbeats (one HLEN): when a worker joins (or
    leaves cleanly) it recomputes its share at once and lets go of the hosts beyond it, so that a
    machine joining a crawl gets hosts within a tenth of a second instead of waiting for the
    holders' next tick (bench/scaleout.py: the joining machines idled ~0.7 s, out of a 14 s run)."""

    def __init__(self, store: ClusterStore, every: float, warc: str) -> None:
        super().__init__(daemon=True, name="lease")
        self.store, self.every, self.warc = store, every, warc
        self.halt = threading.Event()

    def tick(self) -> None:
        self.store.tick(self.warc, 3 * self.every)
        self.store.shed()

    def reshare(self) -> None:
        self.store.update_share(3 * self.every)
        self.store.shed()

    def run(self) -> None:
        due = time.monotonic() + self.every
        while not self.halt.wait(min(WATCH_EVERY, self.every)):
            try:
                if time.monotonic() >= due:
                    due = time.monotonic() + self.every
                    self.tick()
                elif self.store.beat_count() != self.store.beating:
                    self.reshare()
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

    _die_with_parent(parent)
    child_signals()
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
        spider.run(stop.stopped)
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

    def _start_worker(self, store: Any) -> Any:
        # What lives now (the modules, redis-py's among them, and the crawl's setup) is kept out of
        # the cyclic collector's sight before the fork: no worker's collection walks it (nor
        # copies its pages), and the parent's exit does not either (redis-py's modules made it
        # ~30 ms, a tenth of a one-page crawl). Only cyclic garbage of these objects would stay.
        gc.freeze()
        return super()._start_worker(store)

    def _workers_started(self, store: Any) -> None:
        pass

    def _worker_store_error(self, store: Any) -> Exception:
        self.store.refresh()   # Redis gone: that StoreError is the message
        why = _last_note(self.folder)
        return StoreError(f"a worker stopped: {why}" if why else
                          f"a worker lost the Redis store (see {self.folder / ERRORS})")

    def _seed(self) -> int:
        """``seed NAME --store URL``: the sitemaps' URLs queued in Redis, no crawling."""
        self._begin()
        self._seed_from_sitemaps(self.store)
        c = self.store.refresh()
        self._say(f"pending {c.pending}; crawl them with: crawl {self.store.prefix} --store {self.store.url}")
        return EXIT_INTERRUPTED if self.interrupts else 0

    def _begin(self) -> None:
        cfg, store = self.config, self.store
        atomic_write(self.folder / RUNNING, f"pid {os.getpid()}\nstarted {utc_stamp()}\nworkers {cfg.workers}\n"
                                            f"store {store.url}\n")
        if cfg.ignore_robots:
            self._say("warning: --ignore-robots: robots.txt is neither fetched nor obeyed; "
                      "crawl only sites whose owners agree")
        for text in settings.warnings_for(cfg):
            self._say(f"warning: {text}")
        store.add(QueueEntry(s, 0, 0, 0.0, "-") for s in cfg.seeds)

    def _seed_from_sitemaps(self, store: Any) -> None:
        super()._seed_from_sitemaps(store)
        # lastmod.txt's mtime says when its lines were read at the latest (recrawl.read_lastmod
        # caps a lastmod in the future there): in Redis, a comment line says it.
        store.log("lastmod", f"{recrawl.LASTMOD_READ} {self.store.server_time():.3f}\n")

    def _queue_rechecks(self, store: Any, only: Callable[[str], bool] | None = None) -> None:
        """A recrawl on Redis: the crawled pages due (or all) queued as rechecks, once; the
        schedule is read from a copy of the logs, as the file store reads its files."""
        with tempfile.TemporaryDirectory(prefix="spider-recrawl-") as d:
            folder = Path(d)
            copy_out(self.store, folder, ("crawled", "schedule", "removed", "lastmod"), files=(recrawl.ROUND,))
            pending = {first_field(line) for line in pending_queue_lines(self.store, in_flight=True)
                       if line.endswith("\trecheck")}
            everything = self.recheck == "all" or only is not None
            now = time.time()
            since = None
            if everything:
                since = recrawl.open_round(folder, now)
                self.store.save_file(recrawl.ROUND, (folder / recrawl.ROUND).read_text(encoding="utf-8"))
            due = [(u, depth) for u, depth in recrawl.due_pages(folder, now, everything, since)
                   if u not in pending and (only is None or only(u))]
            n = store.requeue(QueueEntry(u, depth, 0, 0.0, "-", "recheck") for u, depth in due)
            if n or pending or everything:
                self._say(f"recrawl: {plural(n, 'page')} to check" + (f" ({len(pending)} already queued)" if pending else ""))
            else:
                self._say(recrawl.nothing_due(folder, now, self.folder.name))

    def _after_recrawl(self, code: int, pending: int) -> None:
        """As after a recrawl on files: a round of checks all made is closed; after a complete
        recrawl, pages no live page links to count a miss (three: ``inactive`` in removed)."""
        store = self.store
        if code == 0 and store.file_text(recrawl.ROUND) is not None and not any(
                line.endswith("\trecheck") for line in pending_queue_lines(store, in_flight=True)):
            store.save_file(recrawl.ROUND, None)
        if not (self.recheck and code == 0 and not pending):
            return
        with tempfile.TemporaryDirectory(prefix="spider-recrawl-") as d:
            folder = Path(d)
            copy_out(store, folder, ("crawled", "removed", "lastmod", "links"), files=(recrawl.UNLINKED,))
            before = len(store.lines("removed"))
            marked = recrawl.mark_inactive(folder, self.config.seeds, time.time())
            store.save_file(recrawl.UNLINKED, (folder / recrawl.UNLINKED).read_text(encoding="utf-8"))
            if marked:
                lines = (folder / recrawl.REMOVED).read_text(encoding="utf-8").splitlines(keepends=True)
                store.log("removed", "".join(lines[before:]))
                self._say(f"recrawl: {len(marked)} page(s) no longer linked from anywhere in "
                          f"{recrawl.INACTIVE_AFTER} recrawls in a row: marked inactive in removed")

    def _run(self) -> int:
        cfg, store = self.config, self.store
        if self.refetch_failed:
            self._say(f"recrawl: {plural(store.requeue_failed(), 'failed URL')} queued again")
        self._begin()
        if self.sitemaps:
            self._seed_from_sitemaps(store)
        if self.recheck:
            self._queue_rechecks(store)
        elif cfg.discover:   # discovery again: listing pages are fetched anew for new links
            self._queue_rechecks(store, lambda url: store.wanted(QueueEntry(url)))
        if cfg.discover:
            store.park_pending()
        else:
            store.unpark()
        self.stats = RedisStats(store)
        self.stats.catch_up()
        before = store.refresh()
        self._say(f"crawl {store.prefix} in Redis at {store.url}: machine {store.machine} "
                  f"with {cfg.workers} worker(s)")
        started = time.monotonic()
        if cfg.max_pages is not None and before.completed >= cfg.max_pages and not store.has_rechecks():
            self._say(f"--max-pages {cfg.max_pages} already reached in this crawl; "
                      "nothing to do (raise it to go on)")
            code = 0
        else:
            code = self._supervise(store)
            self._give_back()
        c = store.refresh()
        self._sample(c)
        self.stats.close()
        store.compact_schedule()
        self._after_recrawl(code, c.pending)
        budget = cfg.max_pages is not None and c.completed >= cfg.max_pages and c.pending > 0
        rows = self.stats.rows
        self._finish_line(Summary(c.crawled, c.hops, c.failed, c.pending, c.rejected,
                                  crawl_seconds(rows) if len(rows) > 1 else time.monotonic() - started,
                                  "interrupted" if code == EXIT_INTERRUPTED else ("budget" if budget else "done"),
                                  c.crawled - before.crawled, c.rechecked, pages_per_second(rows)))
        if cfg.discover and code == 0 and c.pending:
            self._say(f"discovery done: {c.pending} URL(s) left pending for the fetch run; fetch them with: "
                      f"crawl {store.prefix} --store {store.url} (without --discover)")
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
    out += _log_lines(store, c.crawled)
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
            holders = store._do(lambda: r.hkeys(store.per_host("l", host)))   # several: a host with no delay
            holder = ",".join(sorted(h.decode() for h in holders)) or "-"
            pending = store.pending_on(host)
            fl = store._do(lambda: r.hlen(store.per_host("f", host)))
            out.append(f"  {host[:32]:32} {holder[:34]:34} {pending:>7} {fl:>6} {until / 1000 - now:>5.0f}s")
    return "\n".join(out)


def _log_lines(store: ClusterStore, crawled: int) -> list[str]:
    """What ``status`` says from the logs, as for a file crawl: the recrawl lines (rounds of
    checks, pages due, removed) and the trap alarm, from the stats rows kept in Redis."""
    from .stats import alarm_from_rows, read_stats
    from .status import _freshness_lines

    with tempfile.TemporaryDirectory(prefix="spider-status-") as d:
        folder = Path(d)
        copy_out(store, folder, ("crawled", "checks", "schedule", "removed", "lastmod", "stats"))
        rows = read_stats(folder)
        out = [line.replace(f"`recrawl {store.prefix}", f"`recrawl {store.prefix} --store {store.url}")
               for line in _freshness_lines(folder, crawled, store.prefix, rows)]
    alarm = alarm_from_rows(rows)
    return out + ([f"WARNING   {alarm}"] if alarm else [])


EXPORTED = ("crawled", "failed", "checks", "removed")                          # what export reads
REPORTED = ("crawled", "failed", "rejected", "duplicates", "checks", "removed", "stats")   # and report


def copy_out(store: ClusterStore, folder: Path, logs: tuple[str, ...], pending: bool = False,
             files: tuple[str, ...] = ()) -> None:
    """Write a read-only copy of what ``export``, ``report``, ``status`` or a recrawl reads, from
    Redis into ``folder`` (a temporary one): the logs as their files, the ``files`` kept in
    ``NAME:files`` that exist, and with ``pending`` settings.txt and queue.txt (the pending
    lines, ready and retries). The commands then read it as a project folder."""
    for name in logs:
        lines = store.lines(name)
        atomic_write(folder / f"{name}.txt", "".join(lines))
        when = recrawl.lastmod_read_at(lines) if name == "lastmod" else None
        if when is not None:   # when the sitemaps were read, as the file's mtime says it
            os.utime(folder / recrawl.LASTMOD, (when, when))
    for name in files:
        text = store.file_text(name)
        if text is not None:
            atomic_write(folder / name, text)
    if not pending:
        return
    raw = store._do(lambda: store.r.get(store.key("settings"))) or b""
    atomic_write(folder / settings.SETTINGS, raw.decode("utf-8", "replace"))
    atomic_write(folder / "queue.txt", "".join(line + "\n" for line in pending_queue_lines(store)))


def pending_queue_lines(store: ClusterStore, in_flight: bool = False,
                        kinds: tuple[str, ...] = ("q", "r", "d")) -> list[str]:
    """The queue lines (no LF) of the pending URLs: ready (a block of ``q`` gives its lines,
    ``redisstore.pending_lines``), rechecks, retries (or ``kinds`` of them); with ``in_flight``,
    those claimed too."""
    lines: list[str] = []
    r = store.r
    for kind in kinds + ("f",) if in_flight else kinds:
        for key in store._do(lambda: list(r.scan_iter(f"{store.prefix}:{kind}:{{*}}", count=1000))):
            items = store._do(lambda: r.hvals(key) if kind == "f" else r.zrange(key, 0, -1))
            for member in items:
                if kind in ("q", "r"):
                    lines += [line.decode("utf-8", "replace") for line, _ in pending_lines(member, 0.0)]
                    continue
                line = member.decode("utf-8", "replace")
                lines.append(line.split("\t", 3)[3] if kind == "f" else line.split(" ", 1)[1])
    return lines


CENSUS_BUDGET = 5000   # pending URLs read per sample for the census of a Redis crawl
CENSUS_HOSTS = 2000    # of the first hosts of the index
STATS_WRITER = 10.0    # seconds one machine stays the writer of the stats rows without a sample


class RedisStats(StatsRecorder):
    """stats.txt for a crawl on Redis: the same rows, counted from the logs in Redis (each a
    list: a sample reads only what was appended since the last one) and kept in the list
    ``NAME:log:stats``, which ``report --store`` and ``status --store`` read and ``pull`` writes
    as stats.txt. One machine at a time writes the rows (``NAME:stats:writer``, a lock renewed
    at each sample, so the rows are one series); every machine keeps the trap alarm of its own
    samples. The census of the pending URL patterns reads at most ``CENSUS_BUDGET`` pending
    URLs, spread over the hosts by their pending counts, each host's share scaled back up. It is
    taken again once a sample is ``STATS_EVERY`` after the last one (the trap alarm compares
    samples that far apart), not at each of a run's first samples (four a second: on a crawl of
    one host at --delay 0 the census of every sample was a third of the parent's CPU), and at
    every sample while rechecks are pending or in flight (they count in the row's figures)."""

    LOGS = ("crawled", "rejected", "duplicates", "checks", "links")

    def __init__(self, store: ClusterStore) -> None:
        super().__init__(store.folder or Path("."))
        self.store = store
        self._at = dict.fromkeys(self.LOGS, 0)
        self._now: float | None = None      # the time of the sample being taken
        self._census_at = -math.inf          # that of the last census

    def sample(self, pending: int, in_flight: int, crawled: int, hops: int, failed: int,
               rejected_claims: int = 0, when: float | None = None, census: bool = True) -> str:
        """``census`` is the file store's (a pasted queue.txt read later): Redis has no paste,
        and its census is timed by ``_read`` itself."""
        self._now = time.time() if when is None else when
        return super().sample(pending, in_flight, crawled, hops, failed, rejected_claims, self._now)

    def _read(self) -> None:
        store, new = self.store, {}
        for name in self.LOGS:
            key, lines = store.key(f"log:{name}"), []
            while True:   # a resumed crawl's logs are read in slices, not in one reply
                got = store._do(lambda: store.r.lrange(key, self._at[name], self._at[name] + 9999))
                self._at[name] += len(got)
                lines += [x.decode("utf-8", "replace") for x in got]
                if len(got) < 10000:
                    break
            new[name] = lines
        self.take(new)
        now = time.time() if self._now is None else self._now
        if now - self._census_at >= STATS_EVERY * 0.9 or self.rechecks or self._recheck_flight:
            self._census_at = now
            self.census, self.rechecks, self._recheck_flight = census_of(store)
        self._every = 1

    def _append(self, text: str) -> None:
        r, key, me = self.store.r, self.store.key("stats:writer"), self.store.machine
        ms = int(STATS_WRITER * 1000)
        if self.store._do(lambda: r.set(key, me, nx=True, px=ms) or (
                r.get(key) == me.encode() and r.pexpire(key, ms))):
            self.store.log("stats", text)

    def close(self) -> None:
        """The run's last row is written: another machine may write the next ones at once."""
        r, key, me = self.store.r, self.store.key("stats:writer"), self.store.machine
        self.store._do(lambda: r.get(key) == me.encode() and r.delete(key))


def census_of(store: ClusterStore) -> tuple[Census, int, set[str]]:
    """The census of pending URL patterns (see ``RedisStats``), the pending rechecks and the
    URLs of the rechecks in flight."""
    r = store.r

    def look() -> tuple[Census, int, set[str]]:
        hosts = [h.decode() for h in r.zrange(store.key("hosts"), 0, CENSUS_HOSTS - 1)]
        pipe = r.pipeline(transaction=False)
        for host in hosts:
            pipe.zcard(store.per_host("q", host))
        sizes = pipe.execute()
        pipe = r.pipeline(transaction=False)
        for h in r.zrange(store.key("rhosts"), 0, -1):
            pipe.zcard(store.per_host("r", h.decode()))
        rechecks = sum(pipe.execute())
        total = sum(sizes)   # members: a line, or a block of lines (RedisStore.add)
        taken = [(n if total <= CENSUS_BUDGET else max(1, CENSUS_BUDGET * n // total), n) for n in sizes]
        pipe = r.pipeline(transaction=False)
        for host, (k, _) in zip(hosts, taken):
            pipe.zrange(store.per_host("q", host), 0, k - 1)
        census = Census()
        for members, (k, n) in zip(pipe.execute(), taken):
            lines = [line for m in members for line, _ in pending_lines(m, 0.0)]
            if not lines:
                continue
            # The host's lines: its members times the lines a member read holds (exact when all
            # were read); its share of the budget of lines is looked at, each standing for its
            # share of them.
            every = n * len(lines) // len(members)
            lines = lines[:max(k, CENSUS_BUDGET * n // total)]
            for i, line in enumerate(lines):
                census.add(line.decode("utf-8", "replace").split("\t", 1)[0],
                           every // len(lines) + (i < every % len(lines)))
        pipe = r.pipeline(transaction=False)
        for h in r.smembers(store.key("fhosts")):
            pipe.hvals(store.per_host("f", h.decode()))
        flight = {v.decode("utf-8", "replace").split("\t", 4)[3]
                  for values in pipe.execute() for v in values if v.endswith(b"\trecheck")}
        return census, rechecks, flight
    return store._do(look)  # type: ignore[no-any-return]
