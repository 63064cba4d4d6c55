"""``RedisStore``: the frontier in Redis, behind the same verbs as ``FileStore`` and ``MemoryStore``.

Many workers on many machines share one frontier. Every state change of a URL is one Lua script
(registered once, run by SHA), so it is atomic in Redis: add (dedup, host budget, pending),
claim, settle, requeue, admit-and-claim, reissue, lease expiry. Keys (``P`` is the prefix, the
project's name; ``{host}`` is a Redis Cluster hash tag, so one host's keys share a slot):

- ``P:q:{host}`` / ``P:r:{host}``: pending lines of the host (rechecks in ``r``), a sorted set whose
  member is the queue line and whose score is ``Order.key`` packed into one number
  (``score * 2**36 + seq``, ``- seq`` for dfs); a member of ``q`` written by ``add`` is a block of
  up to 64 lines of one host and score (``pending_lines``): ~20 bytes of Redis memory over the
  URL a pending URL, not ~100. ``P:d:{host}``: retries not due yet, scored by ``not_before``, the
  member ``"<key> <line>"``.
- ``P:hosts`` / ``P:rhosts``: each host's best key (all lines / rechecks), the claim step's index;
  ``P:dhosts``: each host's earliest retry time.
- ``P:h:{host}``: the host's politeness state (``next``, ``delay``, ``failures``, ``reason``), its
  admitted count, ``pace`` (the delay its last claimer keeps: "0" lets it have several holders),
  ``tok`` (the fencing-token counter, up one at every new lease of the host) and a summary of its
  leases for status, push and pull (``lowner`` one holder, ``luntil`` the latest expiry).
- ``P:l:{host}``: the host's leases, owner -> expiry (server milliseconds) TAB token; ``P:leases``:
  leased hosts by their earliest lease expiry.
- ``P:f:{host}``: in flight, url -> ``owner TAB token TAB key TAB line``; ``P:fhosts``: hosts with any.
- ``P:seen:XYZ``: deduplication. 8-byte BLAKE2b fingerprints (``spider.frontier.seen.stable_fingerprint``'s
  bytes) packed into 4,096 strings by their first 12 bits: ~12 bytes of Redis memory per known URL,
  never the URL itself. ``P:over:XYZ`` the same for URLs refused by the host budget (logged once).
- ``P:log:NAME``: the lines of crawled.txt, failed.txt, rejected.txt and the other logs, a list of
  the same text lines the files hold. ``P:counts``: counters; ``P:owners``: in flight per owner;
  ``P:held:OWNER``: the hosts an owner leases; ``P:texts``: first URL of each page text hash.
- ``P:robots:{host}``: the host's robots.txt (``spider.cluster.RedisRobots``; push and pull too).

The scripts name keys inside Lua and mix global keys with per-host ones, so they need one Redis
(with replicas or Sentinel if wanted), not a Redis Cluster, though the per-host keys are tagged for it.

Hosts are leased, per host and worker: a worker claims only URLs of a host it holds (its own
expiry and fencing token). A lease is taken at the worker's first claim of the host, renewed by
each of its claims and settles there, and let go when the host has nothing left for it or waits
long, or at a clean stop (``close``); ``max_hosts`` caps how many hosts a worker holds alone, so
hosts spread over workers. A host that keeps a pace (a delay, a slot ahead, failures, a reason
such as Retry-After, or a pace nobody told yet) has one holder, so its politeness needs no
coordination per request. A host that keeps none (``pace`` "0": --delay 0, no Crawl-delay) may
have several: a worker that may ``join`` and has no other host ready joins it. When a shared host
comes to keep a pace, no claim is granted on it until all its holders but one have let go (each
at its next claim, once nothing of it is in flight there).
An expired lease (its holder died or stalled) is taken back by the next script that looks at the
host's holders (every claim): its in-flight URLs go back to pending, the other holders go on, and
the stalled worker's settle, which names its token, records nothing. Lease times are Redis's own
clock (``TIME``), never a worker's.
"""

from __future__ import annotations

import functools
import math
import os
import socket
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Iterable, TypeVar

try:
    import redis
except ImportError:   # an optional extra: pip install -e ".[redis]"
    redis = None  # type: ignore[assignment]

from ..hashes import blake2b
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
CLAIM_BATCH = 4              # a crawl's worker at --delay 0 claims up to this many URLs of a host at once
KNOWN_SLOTS = 1 << 15        # a worker's table of fingerprints Redis said it knows: 256 KB, fixed
HOT_KNOWN = 4096             # of those, the URLs seen lately kept as strings too (a site's menus fit)

_LUA_COMMON = r"""
local PFX, OPS = ARGV[1], nil
do   -- "PREFIX\0N": the last N arguments are the writes the worker buffered since its last call
  -- (RedisStore._carry), each op its name then its fields; taken off ARGV, so each script sees
  -- its own arguments only. Not one packed string: every string made in Lua costs Redis a pass
  -- over its bytes (its hash), and a page's log lines are ~2 KB.
  local z = string.find(PFX, '\0', 1, true)
  if z then
    local top = #ARGV
    OPS = top - tonumber(string.sub(PFX, z + 1)) + 1   -- the first of them
    PFX = string.sub(PFX, 1, z - 1)
    local f = {}
    for i = OPS, top do f[#f + 1] = ARGV[i] end
    for i = top, OPS, -1 do ARGV[i] = nil end   -- from the end: #ARGV is the script's own count
    OPS = f
  end
end
local function k(name) return PFX .. ':' .. name end
local function hk(name, host) return PFX .. ':' .. name .. ':{' .. host .. '}' end
local function num(x) return string.format('%.0f', x) end
local function is_recheck(line) return string.sub(line, -8) == '\trecheck' end
local function first_field(line) return string.match(line, '^[^\t]*') end
local NOW_MS = nil   -- read once a script: a script lasts well under a millisecond
local function server_ms()
  if NOW_MS == nil then
    local t = redis.call('TIME')
    NOW_MS = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return NOW_MS
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
  local seq
  if touched and touched.seq then   -- numbers the batch took at once (INCRBY), in the same order
    touched.seq = touched.seq + 1
    seq = touched.seq
  else
    seq = redis.call('INCR', k('seq'))
  end
  local key = num(tonumber(score) * 68719476736 + (lifo == '1' and -seq or seq))
  local added
  if tonumber(not_before) > 0 then
    added = redis.call('ZADD', hk('d', host), not_before, key .. ' ' .. line)
    redelay(host)
  elseif touched and not is_recheck(line) then
    -- A batch's lines of one host and one score: no other line of the host can ever get a key
    -- between theirs (keys are score, then a sequence number), so they are pending as blocks.
    local id = host .. '\n' .. score
    local b = touched.blocks[id]
    if b == nil then b = {host = host}; touched.blocks[id] = b end
    b[#b + 1] = {tonumber(key), key, line}
    added = 1
  else
    added = push_ready(host, key, line)
    if touched then touched.hosts[host] = true else reindex(host) end
  end
  if touched then touched.n = touched.n + added
  else redis.call('HINCRBY', k('counts'), 'pending', added) end
end
-- A block is one member of P:q:{host} for up to 64 lines, "line LF step SP line LF ...", scored
-- by its first line's key, each step the next line's key less the line's before: a sorted-set entry costs ~100 bytes of Redis memory besides its member,
-- once a block, not once a URL (bench/redis_memory.py). A later line whose source (the page that
-- linked to it) is the first line's ends in TAB '^' instead: a page's links share their source.
local SOURCE = '^[^\t]*\t[^\t]*\t[^\t]*\t[^\t]*\t([^\t]*)$'
local function flush(touched)
  for _, b in pairs(touched.blocks) do
    table.sort(b, function(x, y) return x[1] < y[1] end)
    for i = 1, #b, 64 do
      local parts = {b[i][3]}
      local src = string.match(b[i][3], SOURCE)
      for j = i + 1, math.min(#b, i + 63) do
        local line = b[j][3]
        if src and string.match(line, SOURCE) == src then line = string.sub(line, 1, -#src - 1) .. '^' end
        parts[#parts + 1] = num(b[j][1] - b[j - 1][1]) .. ' ' .. line
      end
      redis.call('ZADD', hk('q', b.host), b[i][2], table.concat(parts, '\n'))
    end
    touched.hosts[b.host] = true
  end
  for host, _ in pairs(touched.hosts) do reindex(host) end
  if touched.n ~= 0 then redis.call('HINCRBY', k('counts'), 'pending', touched.n) end
end
local function batch() return {hosts = {}, blocks = {}, n = 0} end
-- Take the first lines of a pending member (a line or a block), at most ``m``, and only those
-- whose keys are below ``below`` (nil: any; the first line always); the rest stays, scored by its
-- next key. Returns {line, key} pairs. A line ending in TAB '^' has the block's first line's source:
-- the rest's first line gets it written out, and when the rest's first line has a source of its
-- own, so do the rest's later '^' lines.
local function take_lines(zkey, member, key, m, below)
  redis.call('ZREM', zkey, member)
  local lf = string.find(member, '\n', 1, true)
  if not lf then return {{member, key}} end
  local first = string.sub(member, 1, lf - 1)
  local src = string.match(first, '[^\t]*$')
  local out, at, k = {{first, key}}, lf + 1, tonumber(key)
  while true do
    local sp = string.find(member, ' ', at, true)
    local nk = k + tonumber(string.sub(member, at, sp - 1))
    local lf2 = string.find(member, '\n', sp + 1, true)
    if #out >= m or (below and nk >= below) then
      -- the rest, made once (each string made costs Redis a pass over its bytes): unchanged
      -- when its first line has the block's source, else that line or the '^' lines rewritten
      local last = (lf2 or #member + 1) - 1   -- the rest's first line ends here
      local rest
      if string.sub(member, last - 1, last) == '\t^' then
        rest = string.sub(member, sp + 1, last - 1) .. src .. (lf2 and string.sub(member, lf2) or '')
      else
        local head = string.sub(member, sp + 1, last)
        if string.match(head, '[^\t]*$') == src then
          rest = string.sub(member, sp + 1)
        else
          local tail = string.gsub((lf2 and string.sub(member, lf2) or '') .. '\n', '\t%^\n',
                                   function() return '\t' .. src .. '\n' end)
          rest = head .. string.sub(tail, 1, -2)
        end
      end
      redis.call('ZADD', zkey, num(nk), rest)
      return out
    end
    local line = string.sub(member, sp + 1, (lf2 or #member + 1) - 1)
    if string.sub(line, -2) == '\t^' then line = string.sub(line, 1, -2) .. src end
    out[#out + 1] = {line, num(nk)}
    if not lf2 then return out end
    at, k = lf2 + 1, nk
  end
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
-- The host's lease summary, for readers outside the scripts (status, push, pull): ``lowner`` one
-- holder, ``luntil`` the latest expiry; ``P:leases`` scores the host by its earliest expiry (the
-- expiry scan of select_hosts finds it when any of its holders runs out).
local HFIELDS = {}   -- host -> the fields of P:h:{host} slot_pace read in this script, until they change
local function resum(host)
  HFIELDS[host] = nil
  local all = redis.call('HGETALL', hk('l', host))
  local h = hk('h', host)
  if #all == 0 then
    redis.call('HDEL', h, 'lowner', 'luntil')
    redis.call('ZREM', k('leases'), host)
    return
  end
  local lo, hi = nil, nil
  for i = 2, #all, 2 do
    local u = tonumber(string.match(all[i], '^[^\t]*'))
    if lo == nil or u < lo then lo = u end
    if hi == nil or u > hi then hi = u end
  end
  redis.call('HSET', h, 'lowner', all[1], 'luntil', num(hi))
  redis.call('ZADD', k('leases'), num(lo), host)
end
local HOLDERS = {}   -- host -> {holders, how many}, as read in this script (``holders``)
-- end this owner's lease of the host (its in-flight URLs there are given back first, or settled)
local function end_lease(host, owner)
  HOLDERS[host] = nil
  redis.call('HDEL', hk('l', host), owner)
  redis.call('SREM', k('held:' .. owner), host)
  resum(host)
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
-- The host's live holders (owner -> token) and how many; a holder whose lease ran out is let go
-- here, its in-flight URLs back to pending (whoever looks first takes an expired lease back).
local function holders(host)
  local seen = HOLDERS[host]
  if seen then return seen[1], seen[2] end
  local all = redis.call('HGETALL', hk('l', host))
  local out, n = {}, 0
  for i = 1, #all, 2 do
    local u, t = string.match(all[i + 1], '^([^\t]*)\t(.*)$')
    if tonumber(u) <= server_ms() then
      give_back(host, all[i])
      end_lease(host, all[i])
    else
      out[all[i]] = t
      n = n + 1
    end
  end
  HOLDERS[host] = {out, n}
  return out, n
end
-- The host's slot, whether it keeps a pace (a delay, a slot ahead, failures, a reason such as
-- Retry-After, or a pace not told yet: ``pace`` is the delay its last claimer works to, "0" for
-- none), one of its holders (false: none), its pace as told (false: never), and the fields read
-- (next, pace, delay, failures, reason, lowner). A host that keeps a pace has one holder at most.
-- Read once a script (a claim looked at its host three times): every write to them forgets them.
local function slot_pace(host, now)
  local st = HFIELDS[host]
  if st == nil then
    st = redis.call('HMGET', hk('h', host), 'next', 'pace', 'delay', 'failures', 'reason', 'lowner')
    HFIELDS[host] = st
  end
  local nxt = tonumber(st[1] or '0')
  return nxt, st[2] ~= '0' or nxt > now or tonumber(st[3] or '0') > 0 or tonumber(st[4] or '0') > 0
              or (st[5] or '-') ~= '-', st[6], st[2], st
end
-- May this owner claim on the host (``pc``: it keeps a pace), whose slot after the claim is
-- ``nxt`` ('0': no delay)? Others hold it: only if shared, it keeping no pace.
local function claimable(host, owner, pc, nxt, join)
  local hs, n = holders(host)
  local mine = hs[owner] ~= nil
  return n == (mine and 1 or 0) or (nxt == '0' and (mine or join == '1') and not pc)
end
-- take (or keep) this owner's lease of the host, its expiry ttl ms from now; returns its token
local function hold(host, owner, ttl)
  local l = hk('l', host)
  local tok, seen = nil, HOLDERS[host]
  if seen then   -- the holders as read in this script (expired ones let go): no need to ask
    tok = seen[1][owner]
  else
    local cur = redis.call('HGET', l, owner)
    if cur then tok = string.match(cur, '\t(.*)$') end
  end
  if tok == nil then   -- a new lease, a new token: a settle under an earlier one is refused
    HOLDERS[host] = nil
    tok = tostring(redis.call('HINCRBY', hk('h', host), 'tok', 1))
    redis.call('SADD', k('held:' .. owner), host)
  end
  redis.call('HSET', l, owner, num(server_ms() + tonumber(ttl)) .. '\t' .. tok)
  resum(host)
  return tok
end
-- extend this owner's lease of the host, if it holds one; returns whether it does
local function extend(host, owner, ttl)
  local l = hk('l', host)
  local cur = redis.call('HGET', l, owner)
  if not cur then return false end
  redis.call('HSET', l, owner, num(server_ms() + tonumber(ttl)) .. string.match(cur, '\t.*$'))
  resum(host)
  return true
end
-- has this owner URLs in flight on the host?
local function busy(host, owner)
  for _, v in ipairs(redis.call('HVALS', hk('f', host))) do
    if first_field(v) == owner then return true end
  end
  return false
end
-- these lines ({line, key} each) of the host in flight, this owner's under this token: four
-- commands for the lot (a batch claim's lines), not four a line
local function in_flight(host, owner, tok, lines)
  local fields = {}
  for _, lk in ipairs(lines) do
    fields[#fields + 1] = first_field(lk[1])
    fields[#fields + 1] = owner .. '\t' .. tok .. '\t' .. lk[2] .. '\t' .. lk[1]
  end
  redis.call('HSET', hk('f', host), unpack(fields))
  redis.call('SADD', k('fhosts'), host)
  redis.call('HINCRBY', k('counts'), 'inflight', #lines)
  redis.call('HINCRBY', k('owners'), owner, #lines)
end
-- let go of a host that has nothing left for this holder
local function maybe_release(host, owner)
  -- one ZCARD while the host has lines ready (the usual case), not three
  if redis.call('ZCARD', hk('q', host)) > 0 or redis.call('ZCARD', hk('r', host)) > 0
     or redis.call('ZCARD', hk('d', host)) > 0 then
    return
  end
  if not busy(host, owner) then end_lease(host, owner) end
end
-- settle a claim (RedisStore.settle): 1, or 0 when it is no longer this owner's (lease lost)
local function settle(lifo, host, owner, url, tok, kind, logname, record, rhost, rscore, rline, rnb)
  local f = hk('f', host)
  local cur = redis.call('HGET', f, url)
  if not cur then return 0 end
  local o, t = string.match(cur, '^([^\t]*)\t([^\t]*)\t')
  if o ~= owner or (tok ~= '' and t ~= tok) then return 0 end
  redis.call('HDEL', f, url)
  if redis.call('HLEN', f) == 0 then redis.call('SREM', k('fhosts'), host) end
  redis.call('HINCRBY', k('counts'), 'inflight', -1)
  if redis.call('HINCRBY', k('owners'), owner, -1) <= 0 then redis.call('HDEL', k('owners'), owner) end
  if record ~= '' then redis.call('RPUSH', k('log:' .. logname), record) end
  if kind == 'crawled' or kind == 'failed' or kind == 'hop' or kind == 'rejected' or kind == 'rechecked' then
    redis.call('HINCRBY', k('counts'), kind, 1)
  end
  if rline ~= '' then push(rhost, rline, rscore, lifo, rnb) end
  -- the lease is not renewed here (5 commands a page): the lease thread renews it every second
  -- and each claim of the host does, so a settle only asks whether this owner still holds it
  -- (once the host has nothing ready: one ZCARD a page while it has)
  if redis.call('ZCARD', hk('q', host)) == 0 and redis.call('HEXISTS', hk('l', host), owner) == 1 then
    maybe_release(host, owner)
  end
  return 1
end
-- extend this owner's leases of the hosts ARGV[from], ARGV[from + 1], ...; returns those it holds
local function renew(owner, lease, from)
  local held = {}
  for i = from, #ARGV do
    if extend(ARGV[i], owner, lease) then held[#held + 1] = ARGV[i] end
  end
  return held
end
-- a host's slot, only ever later
local function later_slot(host, nxt)
  HFIELDS[host] = nil
  local cur = redis.call('HGET', hk('h', host), 'next')
  if not cur or tonumber(nxt) > tonumber(cur) then redis.call('HSET', hk('h', host), 'next', nxt) end
end
-- the buffered writes, in order: each op its name then its fields
if OPS then
  local f, i = OPS, 1
  while i <= #f do
    local op = f[i]
    if op == 'L' then redis.call('RPUSH', k('log:' .. f[i + 1]), f[i + 2]); i = i + 3
    elseif op == 'N' then later_slot(f[i + 1], f[i + 2]); i = i + 3
    elseif op == 'P' then HFIELDS[f[i + 1]] = nil; redis.call('HSET', hk('h', f[i + 1]), 'pace', f[i + 2]); i = i + 3
    elseif op == 'S' then settle(unpack(f, i + 1, i + 12)); i = i + 13
    else return redis.error_reply('spider: unknown buffered op ' .. tostring(op)) end
  end
end
"""

# add: ARGV 1 prefix, 2 lifo, 3 host budget ('' none), then one argument an entry (one string,
# since encoding arguments is most of the client's work): the 8-byte fingerprint, then
# host LF score LF queue line [LF rejected line, for the host budget]
_ADD = _LUA_COMMON + r"""
-- A few commands an add, not four an entry: the fingerprint strings read with one MGET and
-- written with one MSET, the sequence numbers taken with one INCRBY, each host's admitted count
-- read once and raised once; the same end state as the entries taken one by one, in order.
local out, touched, cap = {}, batch(), tonumber(ARGV[3])
local buckets, keys, of = {}, {}, {}
for i = 4, #ARGV do
  local b1, b2 = string.byte(ARGV[i], 1, 2)
  local bucket = PFX .. ':seen:' .. string.format('%03x', b1 * 16 + math.floor(b2 / 16))
  if buckets[bucket] == nil then keys[#keys + 1] = bucket; buckets[bucket] = '' end
  of[i] = bucket
end
for i = 1, #keys, 256 do
  local got = redis.call('MGET', unpack(keys, i, math.min(#keys, i + 255)))
  for j = 1, #got do buckets[keys[i + j - 1]] = got[j] or '' end
end
local admitted, changed, new = {}, {}, {}
for i = 4, #ARGV do
  local fp, bucket = string.sub(ARGV[i], 1, 8), of[i]
  local result = 0
  if not packed_has(buckets[bucket], fp) then
    local host, score, line, refused = string.match(ARGV[i], '^([^\n]*)\n([^\n]*)\n([^\n]*)\n?(.*)$', 9)
    local a = admitted[host]
    if a == nil then   -- {admitted before, admitted now}
      a = {cap and tonumber(redis.call('HGET', hk('h', host), 'admitted') or '0') or 0, 0}
      admitted[host] = a
    end
    if cap and a[1] + a[2] >= cap then
      if packed_add(PFX .. ':over:' .. string.sub(bucket, #PFX + 7), fp) then
        redis.call('RPUSH', k('log:rejected'), refused .. '\n')
      end
      result = 2
    else
      buckets[bucket] = buckets[bucket] .. fp
      changed[#changed + 1] = bucket
      a[2] = a[2] + 1
      new[#new + 1] = {host, line, score}
      result = 1
    end
  end
  out[#out + 1] = result
end
if #new > 0 then
  touched.seq = redis.call('INCRBY', k('seq'), #new) - #new
  for _, e in ipairs(new) do push(e[1], e[2], e[3], ARGV[2], 0, touched) end
  local set, done = {}, {}
  for _, bucket in ipairs(changed) do
    if not done[bucket] then
      done[bucket] = true
      set[#set + 1] = bucket
      set[#set + 1] = buckets[bucket]   -- SET, not APPEND: APPEND's spare room would double the size
    end
  end
  for i = 1, #set, 512 do redis.call('MSET', unpack(set, i, math.min(#set, i + 511))) end
  for host, a in pairs(admitted) do
    if a[2] > 0 then redis.call('HINCRBY', hk('h', host), 'admitted', a[2]) end
  end
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
# further than this many seconds away (Retry-After, backoff) and that has nothing in flight,
# 8 join ('1': with no other host ready, this owner may join a host others hold that keeps no
# pace). Takes back expired leases, lets due retries join the index, then walks the index (best
# key first) for up to ``limit`` hosts that are ready and this owner's to take. Returns
# {room, wait ('' none), pending, in flight, host...}: room is what --max-pages still allows (as
# ``store.claim_limit``), wait the earliest time a host or retry passed over becomes ready.
_SELECT_FN = r"""
local function select_hosts(nowarg, limitarg, cap, owner, share, letgo, join, want)
local now = tonumber(nowarg)
for _, host in ipairs(redis.call('ZRANGEBYSCORE', k('leases'), '-inf', num(server_ms()))) do
  holders(host)   -- those whose lease ran out are let go, their URLs back to pending
end
for _, host in ipairs(redis.call('ZRANGEBYSCORE', k('dhosts'), '-inf', nowarg)) do
  local d = hk('d', host)
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', d, '-inf', nowarg)) do
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
local limit = tonumber(limitarg)
local room = want or limit   -- the most URLs the claim takes (a batch of one host: more than its hosts)
if cap ~= '' then
  room = math.max(0, math.min(room, tonumber(cap) - tonumber(c[3] or '0') - tonumber(c[4] or '0') - inflight))
end
local wait = nil
local function later(t) if wait == nil or t < wait then wait = t end end
local index = room > 0 and k('hosts') or k('rhosts')
-- Let go of the held hosts that wait long (Retry-After, backoff), and of those that keep a pace
-- while others hold them too (a shared host whose state changed: one holder stays, the last one
-- to look), if nothing of this owner is in flight there. The share counts hosts held alone.
local held = 0
for _, host in ipairs(redis.call('SMEMBERS', k('held:' .. owner))) do
  local hs, n = holders(host)
  if hs[owner] then
    local nxt, pc = slot_pace(host, now)
    if (nxt > now + tonumber(letgo) or (n > 1 and pc)) and not busy(host, owner) then
      end_lease(host, owner)
    elseif n == 1 then
      held = held + 1
    end
  end
end
-- Hosts this owner holds, or free ones within its share, first; with none ready, a host others
-- hold that keeps no pace is joined (``join``): several holders, each with its own lease.
local ready, joinable, start = {}, {}, 0
while #ready < limit do
  local hosts = redis.call('ZRANGE', index, start, start + 63)
  if #hosts == 0 then break end
  for _, host in ipairs(hosts) do
    local nxt, pc, lo, told = slot_pace(host, now)
    local n, mine = 0, false
    if lo and lo ~= owner and pc then   -- another's, keeping a pace (leases run out: scanned above)
      n = 1
    elseif lo then
      local hs
      hs, n = holders(host)
      mine = hs[owner] ~= nil
    end
    if n > (mine and 1 or 0) and (not mine or pc) then
      -- other workers' host: joined only when it keeps no pace and nothing else is ready; while
      -- its first holder has not told its pace yet (robots.txt being fetched), asked again soon
      if join == '1' and not mine and not pc and #joinable < limit then
        joinable[#joinable + 1] = host
      elseif join == '1' and not mine and not told then
        later(now + 0.05)
      end
    elseif not mine and share ~= '' and held >= tonumber(share) then
      -- a free host, but this worker holds its share of hosts already
    elseif nxt > now then
      later(nxt)
    else
      if not mine then held = held + 1 end
      ready[#ready + 1] = host
      if #ready >= limit then break end
    end
  end
  start = start + 64
end
if #ready == 0 then ready = joinable end
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
return room, wait, c[1] or '0', inflight, ready
end
"""

# claim_from: up to ``limit`` URLs, best key first among the hosts of ``slot`` (host -> its next
# slot after a claim, '0' none); a host whose slot is not '0' gives one URL. ``batch`` (a worker's
# claim of one host, RedisStore's ``batch``): all from the first URL's host, and more than one
# only while that host keeps no pace (the pace rule of a shared host then allows no new claim).
_CLAIM_FN = r"""
local function claim_from(owner, now, lease, room, limit, slot, join, batch)
local wait = nil
local function later(t) if wait == nil or t < wait then wait = t end end
local out, taken, toks, states, done = {}, 0, {}, {}, {}
local level = nil
while taken < tonumber(limit) do
  local best, bz, bline, bkey, bpc, br, braw = nil, nil, nil, nil, nil, nil, nil
  for host, _ in pairs(slot) do
    local nx, pc, _, _, raw = slot_pace(host, now)
    local ok = claimable(host, owner, pc, slot[host], join)
    if ok and nx > now then ok = false; later(nx) end
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
        best, bz, bline, bkey, bpc, br, braw = host, z, line, key, pc, r[2], raw
      end
    end
    if not ok then slot[host] = nil end
  end
  if best == nil then break end
  -- A batch keeps to its first URL's level (its score; a block holds one score): a batch of the
  -- next level's pages could be crawled while another worker still crawls this one's, and meet
  -- a page a level too deep.
  local lv = math.floor(tonumber(bkey) / 68719476736)
  if level ~= nil and lv ~= level then break end
  if batch then level = lv end
  -- a batch of a host that keeps no pace: the block's next lines too, in key order (not past a recheck)
  local m, below = 1, nil
  if batch and not bpc and bz == 'q' then
    m = math.min(tonumber(limit) - taken, room)
    if br then below = tonumber(br) end   -- the host's first recheck, as read just now
  end
  local lines = take_lines(hk(bz, best), bline, bkey, m, below)
  local tok = toks[best]
  if tok == nil then tok = hold(best, owner, lease); toks[best] = tok end
  local nxt = slot[best]
  if nxt ~= '0' then
    HFIELDS[best] = nil
    local cur = redis.call('HGET', hk('h', best), 'next')
    if not cur or tonumber(nxt) > tonumber(cur) then redis.call('HSET', hk('h', best), 'next', nxt) end
    slot[best] = nil
    later(tonumber(nxt))
  elseif batch then
    slot = bpc and {} or {[best] = '0'}
  end
  done[best] = true
  local st = states[best]
  if nxt ~= '0' then
    st = redis.call('HMGET', hk('h', best), 'next', 'delay', 'failures', 'reason', 'pace')
    states[best] = st
  elseif st == nil then   -- its slot unchanged: as slot_pace read it (the lease changes no other field)
    st = {braw[1], braw[3], braw[4], braw[5], braw[2]}
    states[best] = st
  end
  if #lines > 0 then in_flight(best, owner, tok, lines) end
  for _, lk in ipairs(lines) do
    out[#out + 1] = lk[1]
    out[#out + 1] = tok
    for i = 1, 5 do out[#out + 1] = st[i] or '' end
    taken = taken + 1
    if room > 0 and not is_recheck(lk[1]) then room = room - 1 end
  end
end
if taken > 0 then redis.call('HINCRBY', k('counts'), 'pending', -taken) end
for host, _ in pairs(done) do reindex(host) end
return wait, out
end
"""

_SELECT = _LUA_COMMON + _SELECT_FN + r"""
local room, wait, pending, inflight, ready = select_hosts(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
local out = {tostring(room), wait and string.format('%.17g', wait) or '', pending, tostring(inflight)}
for _, host in ipairs(ready) do out[#out + 1] = host end
return out
"""

# claim, the second half: ARGV 1 prefix, 2 owner, 3 now, 4 lease ms, 5 room, 6 limit, 7 join, then
# pairs (host, its next slot after a claim, '0' for none) of the hosts select found. Takes up to limit
# URLs, best key first among them, each with its host's lease. Returns
# {wait ('' none), pending, in flight, then per URL: line, token, and its host's next, delay,
# failures, reason, pace}.
_CLAIM = _LUA_COMMON + _CLAIM_FN + r"""
local slot = {}
for i = 8, #ARGV, 2 do slot[ARGV[i]] = ARGV[i + 1] end
local wait, out = claim_from(ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), slot, ARGV[7], false)
local c = redis.call('HMGET', k('counts'), 'pending', 'inflight')
local head = {wait and string.format('%.17g', wait) or '', c[1] or '0', c[2] or '0'}
for _, x in ipairs(out) do head[#head + 1] = x end
return head
"""

# claim in one round trip (a worker's claim): select one host and claim in one script, no slot
# (the client raises the host's slot after, in its next call: the lease keeps others off the host).
# ARGV 1 prefix, 2 now, 3 --max-pages ('' none), 4 owner, 5 most hosts ('' no limit), 6 let go,
# 7 lease ms, 8 join, 9 batch (most URLs of that host, while it keeps no pace). Returns {room,
# wait, pending, in flight, then per URL: line, token, next, delay, failures, reason, pace}.
_CLAIM_ONE = _LUA_COMMON + _SELECT_FN + _CLAIM_FN + r"""
local room, wait, pending, inflight, ready = select_hosts(ARGV[2], '1', ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[8], tonumber(ARGV[9]))
local out = {}
if #ready > 0 then
  local slot = {}
  for _, host in ipairs(ready) do slot[host] = '0' end
  local w
  w, out = claim_from(ARGV[4], tonumber(ARGV[2]), ARGV[7], room, tonumber(ARGV[9]), slot, ARGV[8], true)
  if w and (wait == nil or w < wait) then wait = w end
  local c = redis.call('HMGET', k('counts'), 'pending', 'inflight')
  pending, inflight = c[1] or '0', c[2] or '0'
end
local head = {tostring(room), wait and string.format('%.17g', wait) or '', pending, tostring(inflight)}
for _, x in ipairs(out) do head[#head + 1] = x end
return head
"""

# a redirect target: ARGV 1 prefix, 2 lifo, 3 host, 4 owner, 5 now, 6 delay, 7 lease ms,
# 8 fingerprint, 9 bucket key, 10 score, 11 line, 12 join ('1': may join a shared host). Returns
# {'known'}, {'queued'} (its host is other workers' and this one may not join them: left pending
# for them) or {'ok', start, token}.
_ADMIT = _LUA_COMMON + r"""
local host, owner = ARGV[3], ARGV[4]
if not packed_add(ARGV[9], ARGV[8]) then return {'known'} end
local h = hk('h', host)
redis.call('HINCRBY', h, 'admitted', 1)
local delay = tonumber(ARGV[6])
local _, pc = slot_pace(host, tonumber(ARGV[5]))
if not claimable(host, owner, pc, delay > 0 and '1' or '0', ARGV[12]) then
  push(host, ARGV[11], ARGV[10], ARGV[2], 0)
  return {'queued'}
end
HFIELDS[host] = nil
redis.call('HSET', h, 'pace', delay > 0 and string.format('%.3f', delay) or '0')
local start = math.max(tonumber(ARGV[5]), tonumber(redis.call('HGET', h, 'next') or '0'))
if delay > 0 then
  redis.call('HSET', h, 'next', string.format('%.3f', math.ceil((start + delay) * 1000) / 1000))
end
local tok = hold(host, owner, ARGV[7])
local seq = redis.call('INCR', k('seq'))
in_flight(host, owner, tok, {{ARGV[11], num(tonumber(ARGV[10]) * 68719476736 + (ARGV[2] == '1' and -seq or seq))}})
return {'ok', string.format('%.17g', start), tok}
"""

# settle: ARGV 1 prefix, 2 lifo, 3 host, 4 owner, 5 url, 6 token ('' any), 7 kind, 8 log name,
# 9 record ('' none), then for a requeue: 10 host, 11 score, 12 line, 13 not_before.
# Returns 1, or 0 when the claim is no longer this owner's (lease lost): nothing recorded.
_SETTLE = _LUA_COMMON + r"""
return settle(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11],
              ARGV[12], ARGV[13])
"""

# reissue: ARGV 1 prefix, 2 owner. Every in-flight URL of a dead owner back to pending, its leases ended.
_REISSUE = _LUA_COMMON + r"""
local n = 0
for _, host in ipairs(redis.call('SMEMBERS', k('fhosts'))) do n = n + give_back(host, ARGV[2]) end
for _, host in ipairs(redis.call('SMEMBERS', k('held:' .. ARGV[2]))) do end_lease(host, ARGV[2]) end
return n
"""

# renew: ARGV 1 prefix, 2 owner, 3 lease ms, then hosts. Returns the hosts still held.
_RENEW = _LUA_COMMON + "return renew(ARGV[2], ARGV[3], 4)"


# The scripts below read or write little; each carries the worker's buffered writes like any other.
_FLUSH = _LUA_COMMON + "return 1"

# first URL of a page text: ARGV 1 prefix, 2 text hash, 3 url
_TEXT = _LUA_COMMON + r"""
if redis.call('HSETNX', k('texts'), ARGV[2], ARGV[3]) == 1 then return ARGV[3] end
return redis.call('HGET', k('texts'), ARGV[2])
"""

_KNOWN_FN = r"""
local function known(fps)
  local keys, at_key, of = {}, {}, {}
  for at = 1, #fps, 8 do
    local b1, b2 = string.byte(fps, at, at + 1)
    local key = PFX .. ':seen:' .. string.format('%03x', b1 * 16 + math.floor(b2 / 16))
    if at_key[key] == nil then keys[#keys + 1] = key; at_key[key] = #keys end
    of[#of + 1] = at_key[key]
  end
  local buckets = {}
  for i = 1, #keys, 512 do   -- one MGET, not a GET a link (a page's links: ~25 commands less)
    for _, b in ipairs(redis.call('MGET', unpack(keys, i, math.min(#keys, i + 511)))) do
      buckets[#buckets + 1] = b or ''
    end
  end
  local out = {}
  for i = 1, #of do out[i] = packed_has(buckets[of[i]], string.sub(fps, 8 * i - 7, 8 * i)) and '1' or '0' end
  return table.concat(out)
end
"""

# known: ARGV 1 prefix, 2 the 8-byte fingerprints one after the other. Returns '1' or '0' each.
_KNOWN = _LUA_COMMON + _KNOWN_FN + "return known(ARGV[2])"

# a page's text and its links at once: ARGV 1 prefix, 2 text hash ('' none), 3 url, 4 the links'
# fingerprints. Returns {first url with that text, '1' or '0' per link}.
_FIRST_AND_KNOWN = _LUA_COMMON + _KNOWN_FN + r"""
local first = ARGV[3]
if ARGV[2] ~= '' and redis.call('HSETNX', k('texts'), ARGV[2], ARGV[3]) == 0 then   -- not the first
  first = redis.call('HGET', k('texts'), ARGV[2])
end
return {first, known(ARGV[4])}
"""

# how many lines a host has pending (ready, rechecks, retries): ARGV 1 prefix, 2 host
_PENDING_ON = _LUA_COMMON + r"""
local n = redis.call('ZCARD', hk('r', ARGV[2])) + redis.call('ZCARD', hk('d', ARGV[2]))
for _, m in ipairs(redis.call('ZRANGE', hk('q', ARGV[2]), 0, -1)) do
  local _, lfs = string.gsub(m, '\n', '')
  n = n + 1 + lfs
end
return n
"""

HOST_FIELDS = ("next", "delay", "failures", "reason")

# a host's politeness state: ARGV 1 prefix, 2 host
_STATE = _LUA_COMMON + r"""
return redis.call('HMGET', hk('h', ARGV[2]), 'next', 'delay', 'failures', 'reason')
"""

# change a host's politeness state if it is still what the worker read: ARGV 1 prefix, 2 host,
# 3-6 the fields read ('' none), 7-10 the new ones. Returns {1}, or {0, the fields now} to try again.
_PUT_HOST = _LUA_COMMON + r"""
local h = hk('h', ARGV[2])
local cur = redis.call('HMGET', h, 'next', 'delay', 'failures', 'reason')
for i = 1, 4 do
  if (cur[i] or '') ~= ARGV[2 + i] then
    return {0, cur[1] or '', cur[2] or '', cur[3] or '', cur[4] or ''}
  end
end
redis.call('HSET', h, 'next', ARGV[7], 'delay', ARGV[8], 'failures', ARGV[9], 'reason', ARGV[10])
return {1}
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


class _OwnLine:
    """The connection of one thread of one process (the one that first runs a script here: a
    worker's own thread) on which the scripts a page runs are sent as EVALSHA written here, not
    through redis-py's command path (its pool, command packing and checks were 40-70 µs of a
    worker's CPU a call against ~20). Any other thread or a forked child, a script Redis does not
    have (NOSCRIPT: loaded, then run), and a connection that fails (sent again on a new one, as
    redis-py's own retries do) go through redis-py as before; errors are redis-py's."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.conn: Any = None
        self.owner: tuple[int, int] | None = None   # (pid, thread) the connection is for

    def script(self, source: str) -> Callable[..., Any]:
        script = self.client.register_script(source)
        head = b"$7\r\nEVALSHA\r\n$40\r\n" + script.sha.encode() + b"\r\n$1\r\n0\r\n"

        def run(args: list[Any], client: Any = None) -> Any:
            conn = self._conn() if client is None else None
            if conn is None:
                return script(args=args, client=client)
            out = [b"*%d\r\n" % (len(args) + 3), head]
            for a in args:
                if not isinstance(a, bytes):
                    a = (a if isinstance(a, str) else repr(a)).encode()
                out += (b"$%d\r\n" % len(a), a, b"\r\n")
            try:
                conn.send_packed_command([b"".join(out)], check_health=False)
                return conn.read_response()
            except redis.exceptions.NoScriptError:
                return script(args=args)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                conn.disconnect()
                return script(args=args)
        run.script = script  # type: ignore[attr-defined]
        return run

    def _conn(self) -> Any:
        me = (os.getpid(), threading.get_ident())
        if self.owner is None or self.owner[0] != me[0]:   # the first user, or a fork's child
            pool = self.client.connection_pool
            self.conn, self.owner = pool.connection_class(**pool.connection_kwargs), me
        return self.conn if self.owner == me else None


class _KnownHere:
    """Fingerprints Redis said it knows, kept by this worker so that a page's links that were
    asked before (menus, the links every page repeats) are not asked again: deduplication never
    forgets a URL, so a "known" once is known for good. A fixed table (``KNOWN_SLOTS`` slots of
    8 bytes, allocated once): a worker's memory does not grow with the URLs the crawl knows; a
    fingerprint whose slot another took is asked again, never answered "known" wrongly."""

    EMPTY = bytes(8)

    def __init__(self, slots: int | None = None) -> None:
        slots = slots or KNOWN_SLOTS   # a power of two
        self.mask = slots - 1
        self.table = bytearray(8 * slots)

    def _at(self, fp: bytes) -> int:
        # Bytes 2-5: bytes 0-1 pick the Redis bucket, so every slot sees all of them.
        return (int.from_bytes(fp[2:6], "little") & self.mask) << 3

    def has(self, fp: bytes) -> bool:
        at = self._at(fp)
        return self.table[at:at + 8] == fp and fp != self.EMPTY

    def put(self, fp: bytes) -> None:
        at = self._at(fp)
        self.table[at:at + 8] = fp


class _Seen:
    """``url in store.seen``: asks Redis for the URL's fingerprint bucket."""

    def __init__(self, store: "RedisStore") -> None:
        self._store = store

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and bool(self._store.known([url]))


def pending_lines(member: bytes, key: float) -> list[tuple[bytes, float]]:
    """The queue lines of one member of ``P:q:{host}`` with their keys: a line, or a block of
    lines (``line LF step SP line ...``, made by ``add``, each step from the line before's key to
    its own; a line ending in TAB ``^`` has the first
    line's source), the member's score the first line's key."""
    first, *rest = member.split(b"\n")
    out = [(first, key)]
    source = first.rsplit(b"\t", 1)[-1]
    for item in rest:
        step, line = item.split(b" ", 1)
        if line.endswith(b"\t^"):   # the same source as the first line's
            line = line[:-1] + source
        key += float(step)
        out.append((line, key))
    return out


def _pace(delay: float) -> str:
    """A host's ``pace`` field: "0" (no delay: the host may have several holders) or the delay."""
    return "0" if delay <= 0 else f"{delay:.3f}"


def _host_state(raw: Iterable[bytes | None]) -> HostState:
    nxt, delay, failures, reason = raw
    return HostState(float(nxt or 0), float(delay or 0), int(failures or 0), (reason or b"-").decode())


class RedisStore:
    """The frontier of one project in one Redis: ``RedisStore(client, "NAME", owner=pid)``.

    ``owner`` is the worker's pid as in the file store; ``machine`` tells machines apart (pids
    repeat across machines), the default being the host name. ``lease`` is a host lease in
    seconds: a worker that neither claims nor settles on a host for that long loses it.
    ``max_hosts``, when given, is the most hosts this worker leases at once (its share, so that
    the hosts spread over all workers); a held host whose next slot is more than ``let_go``
    seconds away (Retry-After, backoff) is let go at the next claim, if nothing of it is in flight.

    Round trips (a worker's page costs at most three on Redis, ``tests/test_redisstore.py``):

    - ``defer`` (a crawl's workers): settles and log lines are kept and sent with the worker's
      next script, whatever it is (their own atomic steps, applied first, in order). A worker
      killed before that loses them as it would lose a page it had not settled: the URL is in
      flight and comes back pending when its lease runs out. ``settle`` then answers True at once;
      the fencing check is made when it is sent, and a refused settle records nothing.
    - A claim of one URL is one script; the host's slot is raised in the next call (the lease
      keeps every other worker off the host meanwhile). With ``batch`` (a crawl's workers at
      --delay 0), that claim takes up to ``batch`` URLs of its host while the host keeps no pace
      (no delay, slot, failures or reason): fewer claims a page, and at most ``batch`` URLs of a
      worker in flight (what a kill -9 of it can make fetched twice).
    - The state of a host this worker leases is the one its claim read, kept until it settles
      there: no other worker changes it while the lease runs (``update_host`` still checks, and
      tries again if it did). ``holds`` answers without asking while the lease cannot have run
      out: less than half a lease since the claim or renewal that granted it, on this machine's
      monotonic clock, which runs on through a SIGSTOP."""

    def __init__(self, client: Any, name: str, *, owner: int = 1, machine: str | None = None,
                 max_pages: int | None = None, max_per_host: int | None = None,
                 order: Order | None = None, lease: float = 60.0, max_hosts: int | None = None,
                 let_go: float = 10.0, defer: bool = False, join: bool = False, batch: int = 1) -> None:
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
        self.defer = defer
        self.join = join
        self.batch = max(1, batch)
        self.seen = _Seen(self)
        self._lifo = "1" if self.order.lifo else "0"
        self._tokens: dict[str, str] = {}   # url -> fencing token of each claim this instance made
        self._held: set[str] = set()        # hosts this instance took a lease on
        self._granted: dict[str, float] = {}   # host -> monotonic time before the call that leased it
        self._states: dict[str, tuple[HostState, tuple[bytes, ...]]] = {}   # leased hosts' state, raw
        self._paces: dict[str, str] = {}    # host -> its pace as Redis last said or was told (``_tell_pace``)
        self._ops: list[bytes] = []         # buffered writes' fields, sent with the next script (``_carry``)
        self._ops_lock = threading.Lock()
        self._added: dict[str, bool] = {}   # the last add's URLs: known after it (False: host budget)
        self._known_here = _KnownHere()
        self._hot: set[str] = set()   # URLs of _known_here as strings, lately found (HOT_KNOWN)
        self._line = _OwnLine(client)
        reg, fast = client.register_script, self._line.script   # fast: the scripts a page runs
        self._add_script, self._requeue_script, self._select = fast(_ADD), reg(_REQUEUE), fast(_SELECT)
        self._claim_script, self._admit, self._settle = fast(_CLAIM), fast(_ADMIT), fast(_SETTLE)
        self._reissue, self._renew, self._claim_one = reg(_REISSUE), reg(_RENEW), fast(_CLAIM_ONE)
        self._flush_script, self._text, self._known = fast(_FLUSH), fast(_TEXT), fast(_KNOWN)
        self._state, self._put_host, self._first_known = fast(_STATE), fast(_PUT_HOST), fast(_FIRST_AND_KNOWN)
        self._pending_on = reg(_PENDING_ON)

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
    def _join(self) -> str:
        return "1" if self.join else "0"

    @property
    def _who(self) -> str:
        return f"{self.machine}/{self.owner}"

    def _score(self, e: QueueEntry) -> int:
        return max(-SCORE_LIMIT, min(SCORE_LIMIT, self.order.score(e.url, e.depth)))

    # -- buffered writes ---------------------------------------------------------------------------
    def _buffer(self, *fields: object) -> None:
        with self._ops_lock:
            self._ops += [str(f).encode("utf-8", "surrogatepass") for f in fields]
        if not self.defer:
            self.flush()

    def _carry(self, *args: Any) -> list[Any]:
        """A script's arguments: the prefix, ``args``, then the buffered writes' fields (each op
        its name then its fields), their count after a NUL in the prefix (the script applies them
        first). Only the worker's own thread sends them: the lease thread's scripts (renew,
        shed) take the plain prefix, so writes keep their order."""
        with self._ops_lock:
            ops, self._ops = self._ops, []
        if not ops:
            return [self.prefix, *args]
        return [f"{self.prefix}\0{len(ops)}", *args, *ops]

    @_one_line_errors
    def flush(self) -> None:
        """Send the buffered writes now (before a read that must see them, and at a stop)."""
        if self._ops:
            self._flush_script(args=self._carry())

    # -- leases seen from here -----------------------------------------------------------------
    def _granted_now(self, hosts: Iterable[str], since: float) -> None:
        for host in hosts:
            self._granted[host] = since

    def _drop(self, host: str) -> None:
        self._granted.pop(host, None)
        self._states.pop(host, None)

    def leased(self, host: str) -> bool:
        """Does this worker surely still lease ``host``? True only less than half a lease after
        the call that granted or renewed it (sent after ``since``): Redis cannot have let it go."""
        since = self._granted.get(host)
        return since is not None and time.monotonic() - since < self.lease_ms / 2000

    # -- counts ----------------------------------------------------------------------------------
    @_one_line_errors
    def known(self, urls: Iterable[str]) -> set[str]:
        """Which URLs Redis has seen: one script for all the links of a page (a GET per link was
        40 round trips a page: bench/redis_overhead.py). URLs all from the last ``add`` are
        answered from what that add was told (``Spider.add_links_to_queue`` asks right after),
        and URLs Redis said it knew are answered here (``_KnownHere``)."""
        todo = list(dict.fromkeys(urls))
        if not todo:
            return set()
        added, self._added = self._added, {}   # answered once: the next question asks Redis
        if added and all(u in added for u in todo):
            return {u for u in todo if added[u]}
        out, ask, fps = self._known_locally(todo)
        if ask:
            flags = self._known(args=self._carry(fps))
            out |= self._learn(ask, flags)
        return out

    def _known_locally(self, urls: list[str]) -> tuple[set[str], list[tuple[str, bytes]], bytes]:
        """The URLs known here, and the others with their fingerprints (and those joined) to ask.
        The URLs found known lately are kept as strings (at most ``HOT_KNOWN``, then started
        again): a page's menu links are answered without hashing them."""
        here, hot, out, ask = self._known_here, self._hot, set(), []
        if len(hot) > HOT_KNOWN:
            hot.clear()
        for u in urls:
            if u in hot:
                out.add(u)
                continue
            fp = fingerprint(u)
            if here.has(fp):
                out.add(u)
                hot.add(u)
            else:
                ask.append((u, fp))
        return out, ask, b"".join(fp for _, fp in ask)

    def _learn(self, asked: list[tuple[str, bytes]], flags: bytes) -> set[str]:
        """Redis's answer ('1' or '0' per URL asked): the known ones, kept here too."""
        out = set()
        for (u, fp), f in zip(asked, flags):
            if f == 49:   # b"1"
                out.add(u)
                self._known_here.put(fp)
        self._hot |= out
        return out

    @_one_line_errors
    def first_and_known(self, text_hash: str | None, url: str, links: Iterable[str]) -> tuple[str, set[str]]:
        """``first_with_text`` and ``known`` in one script: a page's two questions, one round trip
        (the links known here are not sent)."""
        out, ask, fps = self._known_locally(list(dict.fromkeys(links)))
        first, flags = self._first_known(args=self._carry(text_hash or "", url, fps))
        return first.decode("utf-8", "replace"), out | self._learn(ask, flags)

    @_one_line_errors
    def counts(self) -> Counts:
        self.flush()
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
        self._added = {}
        for i in range(0, len(todo), ADD_BATCH):
            batch = todo[i:i + ADD_BATCH]
            packed: list[bytes] = []
            for e in batch:
                refused = "\n" + rejected_line(e.url, "host budget", e.source)[:-1] if cap else ""
                packed.append(fingerprint(e.url) + f"{host_key(e.url)}\n{self._score(e)}\n{e.line()[:-1]}{refused}"
                              .encode("utf-8", "surrogatepass"))
            got = self._add_script(args=self._carry(self._lifo, cap, *packed))
            new += [e for e, ok in zip(batch, got) if ok == 1]
            self._added.update((e.url, ok != 2) for e, ok in zip(batch, got))
            for a, ok in zip(packed, got):
                if ok != 2:   # queued now, or known already (2: refused by the host budget, not known)
                    self._known_here.put(a[:8])
        return new

    @_one_line_errors
    def requeue(self, entries: Iterable[QueueEntry], client: Any = None) -> int:
        """Queue entries whatever deduplication says (rechecks of crawled pages); returns how many.
        ``client``: a transaction to run it in (``recrawl --failed`` moves failed URLs back in one);
        the buffered writes do not go in it (a transaction may be dropped and tried again)."""
        if client is not None:
            self.flush()
        args: list[Any] = []
        for e in entries:
            args += [host_key(e.url), self._score(e), e.line()[:-1], self._time(e.not_before)]
        if args:
            self._requeue_script(args=[self.prefix, self._lifo, *args] if client is not None
                                 else self._carry(self._lifo, *args), client=client)
        return len(args) // 4

    @staticmethod
    def _time(t: float) -> str:
        return f"{t:.3f}" if t > 0 else "0"

    @staticmethod
    def _slot(now: float, delay: float) -> str:
        # Rounded up to the millisecond, as the file store writes it: politeness never shrinks.
        return f"{math.ceil((now + delay) * 1000) / 1000:.3f}"

    # -- the claim step --------------------------------------------------------------------------
    @_one_line_errors
    def claim(self, limit: int, now: float, delay_for: Callable[[str], float]) -> ClaimResult:
        """Take up to ``limit`` URLs, best key first among hosts that are ready and not another
        worker's, each with its host's lease. One URL (a worker's claim) is one script, its host's
        slot raised in the next call (with ``batch``, up to that many URLs of that host); more take two: select finds the hosts, then claim takes
        their URLs with the slots from ``delay_for`` (one URL per host when it has a delay)."""
        cap = "" if self.max_pages is None else str(self.max_pages)
        share = "" if self.max_hosts is None else str(self.max_hosts)
        since = time.monotonic()
        if limit == 1:
            got = self._claim_one(args=self._carry(repr(now), cap, self._who, share, repr(self.let_go),
                                                 self.lease_ms, self._join, self.batch))
            room, wait = int(got[0]), _time_or_none(got[1])
            taken = self._taken(got[4:], since)
            for host in dict.fromkeys(host_key(c.url) for c in taken):   # a batch is one host's
                delay = delay_for(host)
                if delay > 0:
                    self._later_slot(host, self._slot(now, delay))
                self._tell_pace(host, delay)
            if room:
                room = max(0, room - sum(1 for c in taken if c.entry.kind != "recheck"))
            return ClaimResult(taken, int(got[2]), int(got[3]), wait,
                               room == 0 and not taken and wait is None)
        sel = self._select(args=self._carry(repr(now), limit, cap, self._who, share, repr(self.let_go),
                                          self._join))
        room, wait, pending, in_flight = int(sel[0]), _time_or_none(sel[1]), int(sel[2]), int(sel[3])
        taken: list[Claim] = []
        if len(sel) > 4:
            args: list[Any] = [self.prefix, self._who, repr(now), self.lease_ms, room, limit, self._join]
            delays: dict[str, float] = {}
            for h in sel[4:]:
                host = h.decode()
                delay = delays[host] = delay_for(host)
                args += [host, self._slot(now, delay) if delay > 0 else "0"]
            got = self._claim_script(args=args)
            w = _time_or_none(got[0])
            if w is not None:
                wait = w if wait is None else min(wait, w)
            pending, in_flight = int(got[1]), int(got[2])
            taken = self._taken(got[3:], since)
            for c in taken:
                self._tell_pace(host_key(c.url), delays[host_key(c.url)])
            room = max(0, room - sum(1 for c in taken if c.entry.kind != "recheck")) if room else room
        return ClaimResult(taken, pending, in_flight, wait, room == 0 and not taken and wait is None)

    def _taken(self, raw: list[bytes], since: float) -> list[Claim]:
        """The claims of a claim script's answer: line, token, the host's state and pace, per URL."""
        out = []
        for i in range(0, len(raw), 7):
            entry = parse_queue_line(raw[i].decode("utf-8", "replace"))
            host = host_key(entry.url)
            self._tokens[entry.url] = raw[i + 1].decode()
            self._held.add(host)
            self._granted[host] = since
            state = tuple(x or None for x in raw[i + 2:i + 6])
            self._states[host] = (_host_state(state), state)
            self._paces[host] = raw[i + 6].decode()
            out.append(Claim(entry, self.owner))
        return out

    def _tell_pace(self, host: str, delay: float) -> None:
        """The delay this worker keeps on a host it claimed, for Redis to know whether the host
        may have several holders (only at 0); sent with the next call, when it changed."""
        pace = _pace(delay)
        if self._paces.get(host) != pace:
            self._paces[host] = pace
            self._buffer("P", host, pace)

    def _later_slot(self, host: str, slot: str) -> None:
        """Raise the host's slot (never lower it), sent with the next call."""
        cached = self._states.get(host)
        if cached is not None:
            state, raw = cached
            if raw[0] is None or float(slot) > float(raw[0]):
                self._states[host] = (replace(state, next_allowed=float(slot)), (slot.encode(), *raw[1:]))
        self._buffer("N", host, slot)

    @_one_line_errors
    def admit_and_claim(self, entry: QueueEntry, now: float, delay: float) -> Claim | None:
        """A redirect target: queue and claim it at once, or None when its URL is already known or
        its host is another worker's (then it is left pending for that worker)."""
        fp = fingerprint(entry.url)
        host = host_key(entry.url)
        since = time.monotonic()
        got = self._admit(args=self._carry(self._lifo, host, self._who, repr(now), repr(delay), self.lease_ms,
                                         fp, self._bucket(fp), self._score(entry), entry.line()[:-1], self._join))
        if got[0] != b"ok":
            return None
        self._paces[host] = _pace(delay)   # the script told Redis
        self._tokens[entry.url] = got[2].decode()
        self._held.add(host)
        self._states.pop(host, None)   # the script moved its slot: read it again when asked
        self._granted[host] = since
        return Claim(entry, self.owner, float(got[1]))

    # -- settling --------------------------------------------------------------------------------
    @_one_line_errors
    def settle(self, claim: Claim, kind: str, *, record: str | None = None,
               requeue: QueueEntry | None = None) -> bool:
        """End a claim (kinds as ``FileStore.settle``), its record and requeue in the same script.
        Returns False, recording nothing, when the claim is no longer this worker's: its host's
        lease expired and another worker took the URL back (the fencing token moved on). With
        ``defer`` it is sent with the next call, and answers True (the check is made then)."""
        token = self._tokens.pop(claim.url, "")
        again = ["", "", "", "0"] if requeue is None else \
            [host_key(requeue.url), self._score(requeue), requeue.line()[:-1], self._time(requeue.not_before)]
        host = host_key(claim.url)
        if not any(host_key(u) == host for u in self._tokens):
            self._drop(host)   # the settle may let the host go (nothing else of ours in flight there)
        fields = [self._lifo, host, f"{self.machine}/{claim.owner}", claim.url, token, kind,
                  LIST_OF.get(kind, "crawled"), record or "", *again]
        if self.defer:
            self._buffer("S", *fields)
            return True
        return bool(self._settle(args=self._carry(*fields)))

    @_one_line_errors
    def reissue(self, owner: int) -> int:
        """Put the in-flight URLs of a dead worker of this machine back to pending; end its leases."""
        return int(self._reissue(args=self._carry(f"{self.machine}/{owner}")))

    @_one_line_errors
    def close(self) -> int:
        """A clean stop of this worker: what it still holds goes back to pending and its hosts
        are let go now, for other workers to take at once. Returns how many URLs went back."""
        self._held.clear()
        self._granted.clear()
        self._states.clear()
        return int(self._reissue(args=self._carry(self._who)))

    @_one_line_errors
    def renew_leases(self) -> list[str]:
        """Extend the leases this worker holds (call it while a fetch runs long); returns those held."""
        if not self._held:
            return []
        asked = sorted(self._held)   # a copy: a lease thread renews while the worker claims
        since = time.monotonic()
        held = [h.decode() for h in self._renew(args=[self.prefix, self._who, self.lease_ms, *asked])]
        return self._renewed(asked, held, since)

    def _renewed(self, asked: list[str], held: list[str], since: float) -> list[str]:
        """After a renewal sent after ``since``: the hosts lost are let go here too."""
        lost = set(asked) - set(held)
        self._held -= lost   # only the hosts lost; those taken meanwhile stay
        for host in lost:
            self._drop(host)
        for host in held:
            if host in self._granted:
                self._granted[host] = max(self._granted[host], since)
        return held

    # -- hosts -----------------------------------------------------------------------------------
    def _read_host(self, host: str) -> tuple[HostState, tuple[bytes, ...]]:
        if self.leased(host) and host in self._states:
            return self._states[host]
        raw = tuple(self._state(args=self._carry(host)))
        got = (_host_state(raw), raw)
        if self.leased(host):
            self._states[host] = got
        return got

    @_one_line_errors
    def host_state(self, host: str) -> HostState:
        return self._read_host(host)[0]

    @_one_line_errors
    def update_host(self, host: str, change: Callable[[HostState], HostState]) -> HostState:
        """Apply a politeness rule to the host's shared state: optimistic (the new state is
        written only if the host's fields are still those read, else read and tried again)."""
        state, raw = self._read_host(host)
        while True:
            new = change(state)
            fields = (f"{new.next_allowed:.3f}", f"{new.delay:.3f}", str(new.failures), new.reason or "-")
            got = self._put_host(args=self._carry(host, *(x or b"" for x in raw), *fields))
            if got[0] == 1:
                written = tuple(f.encode() for f in fields)
                if self.leased(host):
                    self._states[host] = (_host_state(written), written)
                return _host_state(written)
            raw = tuple(x or None for x in got[1:])
            state = _host_state(raw)

    @_one_line_errors
    def reserve_host(self, host: str, until: float) -> None:
        self.update_host(host, lambda s: replace(s, next_allowed=max(s.next_allowed, until)))

    @_one_line_errors
    def first_with_text(self, text_hash: str, url: str) -> str:
        return (self._text(args=self._carry(text_hash, url)) or url.encode()).decode()

    @_one_line_errors
    def pending_on(self, host: str) -> int:
        """How many lines the host has pending (blocks counted by their lines)."""
        return int(self._pending_on(args=[self.prefix, host]))

    # -- logs ------------------------------------------------------------------------------------
    @_one_line_errors
    def log(self, name: str, text: str) -> None:
        """Append whole lines to a log (``P:log:NAME``, one list item per line); with ``defer``,
        sent with the next call."""
        lines = text.splitlines(keepends=True)
        if not lines:
            return
        if self.defer:
            for line in lines:
                self._buffer("L", name, line)
        else:
            self.flush()
            self.r.rpush(self.key(f"log:{name}"), *lines)

    @_one_line_errors
    def lines(self, name: str) -> list[str]:
        """The lines of a log, as its file would hold them."""
        self.flush()
        return [x.decode("utf-8", "replace") for x in self.r.lrange(self.key(f"log:{name}"), 0, -1)]
