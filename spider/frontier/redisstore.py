"""``RedisStore``: the frontier in Redis, behind the same verbs as ``FileStore`` and ``MemoryStore``.

Many workers on many machines share one frontier. Every state change of a URL is one Lua script
(registered once, run by SHA), so it is atomic in Redis: add (dedup, host budget, pending),
claim, settle, requeue, admit-and-claim, reissue, lease expiry. Keys (``P`` is the prefix, the
project's name; ``{host}`` is a Redis Cluster hash tag, so one host's keys share a slot):

- ``P:q:{host}`` / ``P:r:{host}``: pending lines of the host (rechecks in ``r``), a sorted set whose
  member is the queue line and whose score is ``Order.key`` packed into one number
  (``score * 2**36 + seq``, ``- seq`` for dfs); ``P:d:{host}``: retries not due yet, scored by
  ``not_before``, the member ``"<key> <line>"``.
- ``P:hosts`` / ``P:rhosts``: each host's best key (all lines / rechecks), the claim step's index;
  ``P:dhosts``: each host's earliest retry time.
- ``P:h:{host}``: the host's politeness state (``next``, ``delay``, ``failures``, ``reason``), its
  admitted count, and its lease (``lowner``, ``luntil`` in server milliseconds, ``tok`` the fencing
  token, incremented at every new lease); ``P:leases``: hosts by lease expiry.
- ``P:f:{host}``: in flight, url -> ``owner TAB token TAB key TAB line``; ``P:fhosts``: hosts with any.
- ``P:seen:XYZ``: deduplication. 8-byte BLAKE2b fingerprints (``spider.frontier.seen.stable_fingerprint``'s
  bytes) packed into 4,096 strings by their first 12 bits: ~12 bytes of Redis memory per known URL,
  never the URL itself. ``P:over:XYZ`` the same for URLs refused by the host budget (logged once).
- ``P:log:NAME``: the lines of crawled.txt, failed.txt, rejected.txt and the other logs, a list of
  the same text lines the files hold. ``P:counts``: counters; ``P:owners``: in flight per owner;
  ``P:held:OWNER``: the hosts an owner leases; ``P:texts``: first URL of each page text hash.

The scripts name keys inside Lua and mix global keys with per-host ones, so they need one Redis
(with replicas or Sentinel if wanted), not a Redis Cluster, though the per-host keys are tagged for it.

Hosts are leased: a worker claims only URLs of a host it holds (owner, expiry, fencing token), so
a host's politeness needs no coordination per request. A lease is taken at the first claim of the
host, renewed by each claim and settle, and let go when the host has nothing left for its holder
or waits long, or at a clean stop (``close``); ``max_hosts`` caps how many a worker holds, so
hosts spread over workers.
An expired lease (its holder died or stalled) is taken back at the next claim of anyone: its
in-flight URLs go back to pending and the token moves on, so the stalled worker's settle, which
names its token, records nothing. Lease times are Redis's own clock (``TIME``), never a worker's.
"""

from __future__ import annotations

import functools
import math
import socket
from dataclasses import replace
from hashlib import blake2b
from typing import Any, Callable, Iterable, TypeVar

try:
    import redis
except ImportError:   # an optional extra: pip install -e ".[redis]"
    redis = None  # type: ignore[assignment]

from ..order import Order
from ..politeness import HostState
from ..records import QueueEntry, parse_queue_line, rejected_line
from .contract import Claim, ClaimResult, Counts, StoreError
from ..urls import host_key

KEY_SCALE = 1 << 36          # seq below 2**36, |score| below 2**16: the key stays an exact double
SCORE_LIMIT = (1 << 16) - 1
BUCKET_BITS = 12             # 4,096 fingerprint strings
ADD_BATCH = 500              # entries per add script: one script must not hold Redis for long
LIST_OF = {"failed": "failed", "rejected": "rejected"}   # a settle's record goes to this log, else crawled
COUNTED = ("crawled", "failed", "hop", "rejected", "rechecked")

_LUA_COMMON = r"""
local PFX = ARGV[1]
local function k(name) return PFX .. ':' .. name end
local function hk(name, host) return PFX .. ':' .. name .. ':{' .. host .. '}' end
local function num(x) return string.format('%.0f', x) end
local function is_recheck(line) return string.sub(line, -8) == '\trecheck' end
local function first_field(line) return string.match(line, '^[^\t]*') end
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function reindex(host)
  local q = redis.call('ZRANGE', hk('q', host), 0, 0, 'WITHSCORES')
  local r = redis.call('ZRANGE', hk('r', host), 0, 0, 'WITHSCORES')
  local best = q[2] and tonumber(q[2]) or nil
  if r[2] then
    local s = tonumber(r[2])
    if best == nil or s < best then best = s end
    redis.call('ZADD', k('rhosts'), r[2], host)
  else
    redis.call('ZREM', k('rhosts'), host)
  end
  if best then redis.call('ZADD', k('hosts'), num(best), host) else redis.call('ZREM', k('hosts'), host) end
end
local function redelay(host)
  local d = redis.call('ZRANGE', hk('d', host), 0, 0, 'WITHSCORES')
  if d[2] then redis.call('ZADD', k('dhosts'), d[2], host) else redis.call('ZREM', k('dhosts'), host) end
end
-- a pending line: ready (indexed by key) or a retry waiting for its time
local function push_ready(host, key, line)
  if redis.call('ZADD', hk(is_recheck(line) and 'r' or 'q', host), key, line) == 1 then
    return 1
  end
  return 0   -- the very same line is pending already: one line, as one pending URL
end
-- queue a line; with ``touched`` (a batch), its host is indexed and the count kept once at the end
local function push(host, line, score, lifo, not_before, touched)
  local seq = redis.call('INCR', k('seq'))
  local key = num(tonumber(score) * 68719476736 + (lifo == '1' and -seq or seq))
  local added
  if tonumber(not_before) > 0 then
    added = redis.call('ZADD', hk('d', host), not_before, key .. ' ' .. line)
    redelay(host)
  else
    added = push_ready(host, key, line)
    if touched then touched[host] = true else reindex(host) end
  end
  if touched then touched[''] = (touched[''] or 0) + added
  else redis.call('HINCRBY', k('counts'), 'pending', added) end
end
local function flush(touched)
  for host, _ in pairs(touched) do if host ~= '' then reindex(host) end end
  if touched[''] then redis.call('HINCRBY', k('counts'), 'pending', touched['']) end
end
local function packed_has(bucket, fp)
  local at = 1
  while true do
    local i = string.find(bucket, fp, at, true)
    if i == nil then return false end
    if (i - 1) % 8 == 0 then return true end
    at = i + 1
  end
end
-- add a fingerprint to a packed set; false when it was there
local function packed_add(key, fp)
  local bucket = redis.call('GET', key) or ''
  if packed_has(bucket, fp) then return false end
  redis.call('SET', key, bucket .. fp)   -- SET, not APPEND: APPEND's spare room would double the size
  return true
end
local function end_lease(host)
  local o = redis.call('HGET', hk('h', host), 'lowner')
  if o then redis.call('SREM', k('held:' .. o), host) end
  redis.call('HDEL', hk('h', host), 'lowner', 'luntil')
  redis.call('HINCRBY', hk('h', host), 'tok', 1)   -- a later settle under the old token is refused
  redis.call('ZREM', k('leases'), host)
end
-- the in-flight URLs of this owner on this host go back to pending; returns how many
local function give_back(host, owner)
  local f = hk('f', host)
  local all = redis.call('HGETALL', f)
  local n = 0
  for i = 1, #all, 2 do
    local o, t, key, line = string.match(all[i + 1], '^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')
    if o == owner then
      redis.call('HDEL', f, all[i])
      redis.call('HINCRBY', k('counts'), 'pending', push_ready(host, key, line))
      n = n + 1
    end
  end
  if n > 0 then
    reindex(host)
    redis.call('HINCRBY', k('counts'), 'inflight', -n)
    if redis.call('HINCRBY', k('owners'), owner, -n) <= 0 then redis.call('HDEL', k('owners'), owner) end
    if redis.call('HLEN', f) == 0 then redis.call('SREM', k('fhosts'), host) end
  end
  return n
end
local function hold(host, owner, ttl)
  local h = hk('h', host)
  local lo = redis.call('HGET', h, 'lowner')
  local tok
  if lo == owner then
    tok = redis.call('HGET', h, 'tok')
  else
    tok = tostring(redis.call('HINCRBY', h, 'tok', 1))
    redis.call('SADD', k('held:' .. owner), host)
  end
  local untl = server_ms() + tonumber(ttl)
  redis.call('HSET', h, 'lowner', owner, 'luntil', num(untl))
  redis.call('ZADD', k('leases'), num(untl), host)
  return tok
end
local function in_flight(host, owner, tok, key, line)
  redis.call('HSET', hk('f', host), first_field(line), owner .. '\t' .. tok .. '\t' .. key .. '\t' .. line)
  redis.call('SADD', k('fhosts'), host)
  redis.call('HINCRBY', k('counts'), 'inflight', 1)
  redis.call('HINCRBY', k('owners'), owner, 1)
end
-- let go of a host that has nothing left for its holder
local function maybe_release(host, owner)
  local h = hk('h', host)
  if redis.call('HGET', h, 'lowner') ~= owner then return end
  if redis.call('ZCARD', hk('q', host)) + redis.call('ZCARD', hk('r', host)) + redis.call('ZCARD', hk('d', host)) > 0 then
    return
  end
  for _, v in ipairs(redis.call('HVALS', hk('f', host))) do
    if string.match(v, '^[^\t]*') == owner then return end
  end
  end_lease(host)
end
"""

# add: ARGV 1 prefix, 2 lifo, 3 host budget ('' none), then one argument an entry (one string,
# since encoding arguments is most of the client's work): the 8-byte fingerprint, then
# host LF score LF queue line [LF rejected line, for the host budget]
_ADD = _LUA_COMMON + r"""
local out, touched = {}, {}
for i = 4, #ARGV do
  local fp = string.sub(ARGV[i], 1, 8)
  local host, score, line, refused = string.match(ARGV[i], '^([^\n]*)\n([^\n]*)\n([^\n]*)\n?(.*)$', 9)
  local b1, b2 = string.byte(fp, 1, 2)
  local bucket = PFX .. ':seen:' .. string.format('%03x', b1 * 16 + math.floor(b2 / 16))
  local result = 0
  local packed = redis.call('GET', bucket) or ''
  if not packed_has(packed, fp) then
    if ARGV[3] ~= '' and tonumber(redis.call('HGET', hk('h', host), 'admitted') or '0') >= tonumber(ARGV[3]) then
      if packed_add(PFX .. ':over:' .. string.sub(bucket, #PFX + 7), fp) then
        redis.call('RPUSH', k('log:rejected'), refused .. '\n')
      end
    else
      redis.call('SET', bucket, packed .. fp)
      redis.call('HINCRBY', hk('h', host), 'admitted', 1)
      push(host, line, score, ARGV[2], 0, touched)
      result = 1
    end
  end
  out[#out + 1] = result
end
flush(touched)
return out
"""

# requeue: ARGV 1 prefix, 2 lifo, then groups of 4: host, score, line, not_before
_REQUEUE = _LUA_COMMON + r"""
for i = 3, #ARGV, 4 do push(ARGV[i], ARGV[i + 2], ARGV[i + 1], ARGV[2], ARGV[i + 3]) end
return 1
"""

# select, the claim step's first half: ARGV 1 prefix, 2 now, 3 limit, 4 --max-pages ('' none),
# 5 owner, 6 most hosts this owner may hold ('' no limit), 7 let go of a held host whose slot is
# further than this many seconds away (Retry-After, backoff) and that has nothing in flight. Takes back expired leases, lets due retries join the index, then walks the index (best
# key first) for up to ``limit`` hosts that are ready and not another worker's. Returns
# {room, wait ('' none), pending, in flight, host...}: room is what --max-pages still allows (as
# ``store.claim_limit``), wait the earliest time a host or retry passed over becomes ready.
_SELECT = _LUA_COMMON + r"""
local now = tonumber(ARGV[2])
for _, host in ipairs(redis.call('ZRANGEBYSCORE', k('leases'), '-inf', num(server_ms()))) do
  local o = redis.call('HGET', hk('h', host), 'lowner')
  if o then give_back(host, o) end
  end_lease(host)
end
for _, host in ipairs(redis.call('ZRANGEBYSCORE', k('dhosts'), '-inf', ARGV[2])) do
  local d = hk('d', host)
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', d, '-inf', ARGV[2])) do
    local sp = string.find(m, ' ', 1, true)
    redis.call('ZREM', d, m)
    if push_ready(host, string.sub(m, 1, sp - 1), string.sub(m, sp + 1)) == 0 then
      redis.call('HINCRBY', k('counts'), 'pending', -1)
    end
  end
  reindex(host)
  redelay(host)
end
local c = redis.call('HMGET', k('counts'), 'pending', 'inflight', 'crawled', 'failed')
local inflight = tonumber(c[2] or '0')
local limit = tonumber(ARGV[3])
local room = limit
if ARGV[4] ~= '' then
  room = math.max(0, math.min(limit, tonumber(ARGV[4]) - tonumber(c[3] or '0') - tonumber(c[4] or '0') - inflight))
end
local wait = nil
local function later(t) if wait == nil or t < wait then wait = t end end
local index = room > 0 and k('hosts') or k('rhosts')
for _, host in ipairs(redis.call('SMEMBERS', k('held:' .. ARGV[5]))) do
  local nxt = tonumber(redis.call('HGET', hk('h', host), 'next') or '0')
  if nxt > now + tonumber(ARGV[7]) then
    local busy = false
    for _, v in ipairs(redis.call('HVALS', hk('f', host))) do
      if first_field(v) == ARGV[5] then busy = true; break end
    end
    if not busy then end_lease(host) end
  end
end
local held = redis.call('SCARD', k('held:' .. ARGV[5]))
local ready, start = {}, 0
while #ready < limit do
  local hosts = redis.call('ZRANGE', index, start, start + 63)
  if #hosts == 0 then break end
  for _, host in ipairs(hosts) do
    local st = redis.call('HMGET', hk('h', host), 'next', 'lowner')
    if st[2] and st[2] ~= ARGV[5] then
      -- another worker's host (an expired lease was taken back above)
    elseif not st[2] and ARGV[6] ~= '' and held >= tonumber(ARGV[6]) then
      -- a free host, but this worker holds its share of hosts already
    elseif st[1] and tonumber(st[1]) > now then
      later(tonumber(st[1]))
    else
      if not st[2] then held = held + 1 end
      ready[#ready + 1] = host
      if #ready >= limit then break end
    end
  end
  start = start + 64
end
local d = redis.call('ZRANGE', k('dhosts'), 0, 63, 'WITHSCORES')
for i = 1, #d, 2 do
  local host, nb = d[i], tonumber(d[i + 1])
  if room == 0 then   -- past --max-pages only a recheck may go
    nb = nil
    local all = redis.call('ZRANGE', hk('d', host), 0, -1, 'WITHSCORES')
    for j = 1, #all, 2 do
      if is_recheck(all[j]) then nb = tonumber(all[j + 1]); break end
    end
  end
  if nb then later(math.max(nb, tonumber(redis.call('HGET', hk('h', host), 'next') or '0'))) end
end
local out = {tostring(room), wait and string.format('%.17g', wait) or '', c[1] or '0', tostring(inflight)}
for _, host in ipairs(ready) do out[#out + 1] = host end
return out
"""

# claim, the second half: ARGV 1 prefix, 2 owner, 3 now, 4 lease ms, 5 room, 6 limit, then pairs
# (host, its next slot after a claim, '0' for none) of the hosts select found. Takes up to limit
# URLs, best key first among them, each with its host's lease. Returns
# {wait ('' none), pending, in flight, line, token, line, token, ...}.
_CLAIM = _LUA_COMMON + r"""
local owner, now, room = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[5])
local slot = {}
for i = 7, #ARGV, 2 do slot[ARGV[i]] = ARGV[i + 1] end
local wait = nil
local function later(t) if wait == nil or t < wait then wait = t end end
local out, taken = {}, 0
while taken < tonumber(ARGV[6]) do
  local best, bz, bline, bkey = nil, nil, nil, nil
  for host, _ in pairs(slot) do
    local lo, lu, nx = unpack(redis.call('HMGET', hk('h', host), 'lowner', 'luntil', 'next'))
    local ok = true
    if lo and lo ~= owner then
      if tonumber(lu) > server_ms() then ok = false else give_back(host, lo); end_lease(host) end
    end
    if ok and nx and tonumber(nx) > now then ok = false; later(tonumber(nx)) end
    if ok then
      local r = redis.call('ZRANGE', hk('r', host), 0, 0, 'WITHSCORES')
      local q = {}
      if room > 0 then q = redis.call('ZRANGE', hk('q', host), 0, 0, 'WITHSCORES') end
      local z, line, key = nil, nil, nil
      if q[2] and (not r[2] or tonumber(q[2]) < tonumber(r[2])) then z, line, key = 'q', q[1], q[2]
      elseif r[2] then z, line, key = 'r', r[1], r[2] end
      if not z then
        ok = false
      elseif bkey == nil or tonumber(key) < tonumber(bkey) then
        best, bz, bline, bkey = host, z, line, key
      end
    end
    if not ok then slot[host] = nil end
  end
  if best == nil then break end
  redis.call('ZREM', hk(bz, best), bline)
  local tok = hold(best, owner, ARGV[4])
  local nxt = slot[best]
  if nxt ~= '0' then
    local cur = redis.call('HGET', hk('h', best), 'next')
    if not cur or tonumber(nxt) > tonumber(cur) then redis.call('HSET', hk('h', best), 'next', nxt) end
    slot[best] = nil
    later(tonumber(nxt))
  end
  in_flight(best, owner, tok, bkey, bline)
  redis.call('HINCRBY', k('counts'), 'pending', -1)
  reindex(best)
  out[#out + 1] = bline
  out[#out + 1] = tok
  taken = taken + 1
  if room > 0 and not is_recheck(bline) then room = room - 1 end
end
local c = redis.call('HMGET', k('counts'), 'pending', 'inflight')
local head = {wait and string.format('%.17g', wait) or '', c[1] or '0', c[2] or '0'}
for _, x in ipairs(out) do head[#head + 1] = x end
return head
"""

# a redirect target: ARGV 1 prefix, 2 lifo, 3 host, 4 owner, 5 now, 6 delay, 7 lease ms,
# 8 fingerprint, 9 bucket key, 10 score, 11 line. Returns {'known'}, {'queued'} (its host is
# another worker's: left pending for it) or {'ok', start, token}.
_ADMIT = _LUA_COMMON + r"""
local host, owner = ARGV[3], ARGV[4]
if not packed_add(ARGV[9], ARGV[8]) then return {'known'} end
local h = hk('h', host)
redis.call('HINCRBY', h, 'admitted', 1)
local lo, lu = unpack(redis.call('HMGET', h, 'lowner', 'luntil'))
if lo and lo ~= owner and tonumber(lu) > server_ms() then
  push(host, ARGV[11], ARGV[10], ARGV[2], 0)
  return {'queued'}
end
if lo and lo ~= owner then give_back(host, lo); end_lease(host) end
local start = math.max(tonumber(ARGV[5]), tonumber(redis.call('HGET', h, 'next') or '0'))
local delay = tonumber(ARGV[6])
if delay > 0 then
  redis.call('HSET', h, 'next', string.format('%.3f', math.ceil((start + delay) * 1000) / 1000))
end
local tok = hold(host, owner, ARGV[7])
local seq = redis.call('INCR', k('seq'))
in_flight(host, owner, tok, num(tonumber(ARGV[10]) * 68719476736 + (ARGV[2] == '1' and -seq or seq)), ARGV[11])
return {'ok', string.format('%.17g', start), tok}
"""

# settle: ARGV 1 prefix, 2 lifo, 3 host, 4 owner, 5 url, 6 token ('' any), 7 kind, 8 log name,
# 9 record ('' none), then for a requeue: 10 host, 11 score, 12 line, 13 not_before; 14 lease ms.
# Returns 1, or 0 when the claim is no longer this owner's (lease lost): nothing recorded.
_SETTLE = _LUA_COMMON + r"""
local host, owner, url, kind = ARGV[3], ARGV[4], ARGV[5], ARGV[7]
local f = hk('f', host)
local cur = redis.call('HGET', f, url)
if not cur then return 0 end
local o, t = string.match(cur, '^([^\t]*)\t([^\t]*)\t')
if o ~= owner or (ARGV[6] ~= '' and t ~= ARGV[6]) then return 0 end
redis.call('HDEL', f, url)
if redis.call('HLEN', f) == 0 then redis.call('SREM', k('fhosts'), host) end
redis.call('HINCRBY', k('counts'), 'inflight', -1)
if redis.call('HINCRBY', k('owners'), owner, -1) <= 0 then redis.call('HDEL', k('owners'), owner) end
if ARGV[9] ~= '' then redis.call('RPUSH', k('log:' .. ARGV[8]), ARGV[9]) end
if kind == 'crawled' or kind == 'failed' or kind == 'hop' or kind == 'rejected' or kind == 'rechecked' then
  redis.call('HINCRBY', k('counts'), kind, 1)
end
if ARGV[12] ~= '' then push(ARGV[10], ARGV[12], ARGV[11], ARGV[2], ARGV[13]) end
local h = hk('h', host)
if redis.call('HGET', h, 'lowner') == owner then
  local untl = server_ms() + tonumber(ARGV[14])
  redis.call('HSET', h, 'luntil', num(untl))
  redis.call('ZADD', k('leases'), num(untl), host)
  maybe_release(host, owner)
end
return 1
"""

# reissue: ARGV 1 prefix, 2 owner. Every in-flight URL of a dead owner back to pending, its leases ended.
_REISSUE = _LUA_COMMON + r"""
local n = 0
for _, host in ipairs(redis.call('SMEMBERS', k('fhosts'))) do n = n + give_back(host, ARGV[2]) end
for _, host in ipairs(redis.call('ZRANGE', k('leases'), 0, -1)) do
  if redis.call('HGET', hk('h', host), 'lowner') == ARGV[2] then end_lease(host) end
end
return n
"""

# renew: ARGV 1 prefix, 2 owner, 3 lease ms, then hosts. Returns the hosts still held.
_RENEW = _LUA_COMMON + r"""
local held = {}
local untl = num(server_ms() + tonumber(ARGV[3]))
for i = 4, #ARGV do
  local h = hk('h', ARGV[i])
  if redis.call('HGET', h, 'lowner') == ARGV[2] then
    redis.call('HSET', h, 'luntil', untl)
    redis.call('ZADD', k('leases'), untl, ARGV[i])
    held[#held + 1] = ARGV[i]
  end
end
return held
"""


F = TypeVar("F", bound=Callable[..., Any])


def _one_line_errors(fn: F) -> F:
    """A Redis that cannot be reached or goes away becomes one StoreError line, never a traceback."""
    @functools.wraps(fn)
    def guarded(self: "RedisStore", *args: Any, **kw: Any) -> Any:
        try:
            return fn(self, *args, **kw)
        except redis.RedisError as e:
            raise _store_error(self.prefix, e) from None
    return guarded  # type: ignore[return-value]


def _store_error(prefix: str, e: Exception) -> StoreError:
    return StoreError(f"Redis store {prefix!r}: {type(e).__name__}: {e}")


def _time_or_none(raw: bytes) -> float | None:
    return float(raw) if raw else None


def fingerprint(url: str) -> bytes:
    """The URL's 8-byte BLAKE2b: the bytes of ``spider.frontier.seen.stable_fingerprint`` (little-endian)."""
    return blake2b(url.encode("utf-8", "surrogatepass"), digest_size=8).digest()


class _Seen:
    """``url in store.seen``: asks Redis for the URL's fingerprint bucket."""

    def __init__(self, store: "RedisStore") -> None:
        self._store = store

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and bool(self.among([url]))

    def among(self, urls: Iterable[str]) -> set[str]:
        """The URLs among ``urls`` whose fingerprints Redis holds: one pipeline of one GET per
        bucket, a single round trip for all the links of a page (a GET per link was 40 round
        trips a page: bench/redis_overhead.py)."""
        by_bucket: dict[str, list[tuple[bytes, str]]] = {}
        for url in dict.fromkeys(urls):
            fp = fingerprint(url)
            by_bucket.setdefault(self._store._bucket(fp), []).append((fp, url))
        if not by_bucket:
            return set()
        pipe = self._store.r.pipeline(transaction=False)
        for key in by_bucket:
            pipe.get(key)
        try:
            buckets = pipe.execute()
        except redis.RedisError as e:
            raise _store_error(self._store.prefix, e) from None
        out = set()
        for (key, wanted), bucket in zip(by_bucket.items(), buckets):
            held = {bytes(bucket[i:i + 8]) for i in range(0, len(bucket or b""), 8)}
            out.update(url for fp, url in wanted if fp in held)
        return out


class RedisStore:
    """The frontier of one project in one Redis: ``RedisStore(client, "NAME", owner=pid)``.

    ``owner`` is the worker's pid as in the file store; ``machine`` tells machines apart (pids
    repeat across machines), the default being the host name. ``lease`` is a host lease in
    seconds: a worker that neither claims nor settles on a host for that long loses it.
    ``max_hosts``, when given, is the most hosts this worker leases at once (its share, so that
    the hosts spread over all workers); a held host whose next slot is more than ``let_go``
    seconds away (Retry-After, backoff) is let go at the next claim, if nothing of it is in flight."""

    def __init__(self, client: Any, name: str, *, owner: int = 1, machine: str | None = None,
                 max_pages: int | None = None, max_per_host: int | None = None,
                 order: Order | None = None, lease: float = 60.0, max_hosts: int | None = None,
                 let_go: float = 10.0) -> None:
        self.r = client
        self.prefix = name
        self.owner = owner
        self.machine = machine or socket.gethostname()
        self.max_pages = max_pages
        self.max_per_host = max_per_host
        self.order = order or Order()
        self.lease_ms = max(1, int(lease * 1000))
        self.max_hosts = max_hosts
        self.let_go = let_go
        self.seen = _Seen(self)
        self._lifo = "1" if self.order.lifo else "0"
        self._tokens: dict[str, str] = {}   # url -> fencing token of each claim this instance made
        self._held: set[str] = set()        # hosts this instance took a lease on
        reg = client.register_script
        self._add_script, self._requeue_script, self._select = reg(_ADD), reg(_REQUEUE), reg(_SELECT)
        self._claim_script, self._admit, self._settle = reg(_CLAIM), reg(_ADMIT), reg(_SETTLE)
        self._reissue, self._renew = reg(_REISSUE), reg(_RENEW)

    @classmethod
    def from_url(cls, url: str, name: str, **kw: Any) -> "RedisStore":
        """A store on ``redis://HOST:PORT/DB``; StoreError with one line if Redis cannot be reached."""
        if redis is None:
            raise StoreError("the Redis store needs the redis package: pip install -e '.[redis]'")
        try:
            client = redis.Redis.from_url(url, socket_timeout=30, socket_connect_timeout=10)
            client.ping()
        except (redis.RedisError, ValueError) as e:
            raise StoreError(f"cannot use Redis at {url}: {e}") from None
        return cls(client, name, **kw)

    def open(self) -> "RedisStore":
        return self

    # -- keys ------------------------------------------------------------------------------------
    def key(self, name: str) -> str:
        return f"{self.prefix}:{name}"

    def per_host(self, name: str, host: str) -> str:
        """A key of one host's, hash-tagged by the host (one Redis Cluster slot for all of them)."""
        return f"{self.prefix}:{name}:{{{host}}}"

    def _bucket(self, fp: bytes) -> str:
        return f"{self.prefix}:seen:{(fp[0] << 4 | fp[1] >> 4):03x}"

    @property
    def _who(self) -> str:
        return f"{self.machine}/{self.owner}"

    def _score(self, e: QueueEntry) -> int:
        return max(-SCORE_LIMIT, min(SCORE_LIMIT, self.order.score(e.url, e.depth)))

    # -- counts ----------------------------------------------------------------------------------
    def known(self, urls: Iterable[str]) -> set[str]:
        return self.seen.among(urls)

    @_one_line_errors
    def counts(self) -> Counts:
        raw, owners = self.r.pipeline().hgetall(self.key("counts")).hgetall(self.key("owners")).execute()
        n = {k.decode(): int(v) for k, v in raw.items()}
        mine = self.machine + "/"
        by_owner = {int(o.decode()[len(mine):]): int(c) for o, c in owners.items()
                    if o.decode().startswith(mine) and int(c) > 0}
        return Counts(n.get("pending", 0), n.get("inflight", 0), n.get("crawled", 0), n.get("hop", 0),
                      n.get("failed", 0), by_owner, n.get("rejected", 0), n.get("rechecked", 0))

    refresh = counts

    # -- adding ----------------------------------------------------------------------------------
    @_one_line_errors
    def add(self, entries: Iterable[QueueEntry]) -> list[QueueEntry]:
        """Queue the entries whose URL was never queued, crawled or failed; returns those. With
        ``max_per_host``, a host's URLs beyond that many go to the rejected log as ``host budget``."""
        todo = list(entries)
        cap = "" if self.max_per_host is None else str(self.max_per_host)
        new: list[QueueEntry] = []
        for i in range(0, len(todo), ADD_BATCH):
            batch = todo[i:i + ADD_BATCH]
            args: list[Any] = [self.prefix, self._lifo, cap]
            for e in batch:
                refused = "\n" + rejected_line(e.url, "host budget", e.source)[:-1] if cap else ""
                args.append(fingerprint(e.url) + f"{host_key(e.url)}\n{self._score(e)}\n{e.line()[:-1]}{refused}"
                            .encode("utf-8", "surrogatepass"))
            got = self._add_script(args=args)
            new += [e for e, ok in zip(batch, got) if ok]
        return new

    @_one_line_errors
    def requeue(self, entries: Iterable[QueueEntry], client: Any = None) -> int:
        """Queue entries whatever deduplication says (rechecks of crawled pages); returns how many.
        ``client``: a transaction to run it in (``recrawl --failed`` moves failed URLs back in one)."""
        args: list[Any] = [self.prefix, self._lifo]
        for e in entries:
            args += [host_key(e.url), self._score(e), e.line()[:-1], self._time(e.not_before)]
        if len(args) > 2:
            self._requeue_script(args=args, client=client)
        return (len(args) - 2) // 4

    @staticmethod
    def _time(t: float) -> str:
        return f"{t:.3f}" if t > 0 else "0"

    # -- the claim step --------------------------------------------------------------------------
    @_one_line_errors
    def claim(self, limit: int, now: float, delay_for: Callable[[str], float]) -> ClaimResult:
        """Take up to ``limit`` URLs, best key first among hosts that are ready and not another
        worker's, each with its host's lease. Two round trips: select finds the hosts, then claim
        takes their URLs (the hosts' delays come from ``delay_for`` in between)."""
        cap = "" if self.max_pages is None else str(self.max_pages)
        share = "" if self.max_hosts is None else str(self.max_hosts)
        sel = self._select(args=[self.prefix, repr(now), limit, cap, self._who, share, repr(self.let_go)])
        room, wait, pending, in_flight = int(sel[0]), _time_or_none(sel[1]), int(sel[2]), int(sel[3])
        taken: list[Claim] = []
        if len(sel) > 4:
            args: list[Any] = [self.prefix, self._who, repr(now), self.lease_ms, room, limit]
            for h in sel[4:]:
                host = h.decode()
                delay = delay_for(host)
                # Rounded up to the millisecond, as the file store writes it: politeness never shrinks.
                args += [host, f"{math.ceil((now + delay) * 1000) / 1000:.3f}" if delay > 0 else "0"]
            got = self._claim_script(args=args)
            w = _time_or_none(got[0])
            if w is not None:
                wait = w if wait is None else min(wait, w)
            pending, in_flight = int(got[1]), int(got[2])
            for line, token in zip(got[3::2], got[4::2]):
                entry = parse_queue_line(line.decode("utf-8", "replace"))
                self._tokens[entry.url] = token.decode()
                self._held.add(host_key(entry.url))
                taken.append(Claim(entry, self.owner))
                if room and entry.kind != "recheck":
                    room -= 1
        return ClaimResult(taken, pending, in_flight, wait, room == 0 and not taken and wait is None)

    @_one_line_errors
    def admit_and_claim(self, entry: QueueEntry, now: float, delay: float) -> Claim | None:
        """A redirect target: queue and claim it at once, or None when its URL is already known or
        its host is another worker's (then it is left pending for that worker)."""
        fp = fingerprint(entry.url)
        host = host_key(entry.url)
        got = self._admit(args=[self.prefix, self._lifo, host, self._who, repr(now), repr(delay), self.lease_ms,
                                fp, self._bucket(fp), self._score(entry), entry.line()[:-1]])
        if got[0] != b"ok":
            return None
        self._tokens[entry.url] = got[2].decode()
        self._held.add(host)
        return Claim(entry, self.owner, float(got[1]))

    # -- settling --------------------------------------------------------------------------------
    @_one_line_errors
    def settle(self, claim: Claim, kind: str, *, record: str | None = None,
               requeue: QueueEntry | None = None) -> bool:
        """End a claim (kinds as ``FileStore.settle``), its record and requeue in the same script.
        Returns False, recording nothing, when the claim is no longer this worker's: its host's
        lease expired and another worker took the URL back (the fencing token moved on)."""
        token = self._tokens.pop(claim.url, "")
        again = ["", "", "", "0"] if requeue is None else \
            [host_key(requeue.url), self._score(requeue), requeue.line()[:-1], self._time(requeue.not_before)]
        ok = self._settle(args=[self.prefix, self._lifo, host_key(claim.url), f"{self.machine}/{claim.owner}",
                                claim.url, token, kind, LIST_OF.get(kind, "crawled"), record or "", *again,
                                self.lease_ms])
        return bool(ok)

    @_one_line_errors
    def reissue(self, owner: int) -> int:
        """Put the in-flight URLs of a dead worker of this machine back to pending; end its leases."""
        return int(self._reissue(args=[self.prefix, f"{self.machine}/{owner}"]))

    @_one_line_errors
    def close(self) -> int:
        """A clean stop of this worker: what it still holds goes back to pending and its hosts
        are let go now, for other workers to take at once. Returns how many URLs went back."""
        self._held.clear()
        return int(self._reissue(args=[self.prefix, self._who]))

    @_one_line_errors
    def renew_leases(self) -> list[str]:
        """Extend the leases this worker holds (call it while a fetch runs long); returns those held."""
        if not self._held:
            return []
        asked = sorted(self._held)   # a copy: a lease thread renews while the worker claims
        held = [h.decode() for h in self._renew(args=[self.prefix, self._who, self.lease_ms, *asked])]
        self._held -= set(asked) - set(held)   # only the hosts lost; those taken meanwhile stay
        return held

    # -- hosts -----------------------------------------------------------------------------------
    @_one_line_errors
    def host_state(self, host: str) -> HostState:
        nxt, delay, failures, reason = self.r.hmget(self.per_host("h", host), "next", "delay", "failures", "reason")
        return HostState(float(nxt or 0), float(delay or 0), int(failures or 0), (reason or b"-").decode())

    @_one_line_errors
    def update_host(self, host: str, change: Callable[[HostState], HostState]) -> HostState:
        """Apply a politeness rule to the host's shared state: optimistic (WATCH, MULTI/EXEC),
        tried again if another worker changed the host in between."""
        key = self.per_host("h", host)

        def apply(pipe: Any) -> HostState:
            new = change(self.host_state(host))
            pipe.multi()
            pipe.hset(key, mapping={"next": f"{new.next_allowed:.3f}", "delay": f"{new.delay:.3f}",
                                    "failures": str(new.failures), "reason": new.reason or "-"})
            return new

        return self.r.transaction(apply, key, value_from_callable=True)

    @_one_line_errors
    def reserve_host(self, host: str, until: float) -> None:
        self.update_host(host, lambda s: replace(s, next_allowed=max(s.next_allowed, until)))

    @_one_line_errors
    def first_with_text(self, text_hash: str, url: str) -> str:
        key = self.key("texts")
        self.r.hsetnx(key, text_hash, url)
        return (self.r.hget(key, text_hash) or url.encode()).decode()

    # -- logs ------------------------------------------------------------------------------------
    @_one_line_errors
    def log(self, name: str, text: str) -> None:
        """Append whole lines to a log (``P:log:NAME``, one list item per line)."""
        lines = text.splitlines(keepends=True)
        if lines:
            self.r.rpush(self.key(f"log:{name}"), *lines)

    @_one_line_errors
    def lines(self, name: str) -> list[str]:
        """The lines of a log, as its file would hold them."""
        return [x.decode("utf-8", "replace") for x in self.r.lrange(self.key(f"log:{name}"), 0, -1)]

