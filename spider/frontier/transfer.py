"""``push`` and ``pull``: a crawl moves between the file store (``projects/NAME/``) and Redis.

Both directions go through an ``Image``, the crawl as plain data (pending queue lines, log lines,
host states, ...), so each direction is a reader and a writer with pure mappings in between.
What moves (``P`` is the project's prefix; the keys are ``redisstore.py``'s):

- ``queue.txt`` <-> the pending lines ``P:q|r|d:{host}`` (a member of ``q`` may be a block of
  lines, ``redisstore.pending_lines``; scored by the crawl order, in
  queue.txt's order: insertion numbers follow the file), their index and count; every URL
  queued, crawled or failed also gets its fingerprint in ``P:seen:XYZ`` and counts in its host's
  ``admitted`` (deduplication and the host budget, as the file store rebuilds them on open);
- ``crawled.txt``, ``failed.txt``, ``rejected.txt`` and every other log of ``files.LOGS``
  (``fetch.log``, ``errors.log``, ``duplicates.txt``, ``checks.txt``, ...) <-> ``P:log:NAME``, the
  same lines byte for byte (the column header line is left out in Redis), and the counts;
- ``hosts.txt`` <-> ``P:h:{host}`` (next, delay, failures, reason); ``hashes.txt`` <-> ``P:texts``;
- ``settings.txt`` <-> ``P:settings``; ``robots/HOST-HASH.txt`` <-> ``P:robots:{host}``, the very
  key a crawl on Redis reads its robots.txt from (``cluster.RedisRobots``), kept as long as a crawl
  keeps it (a day past its freshness), so no robots.txt is fetched again after push or pull; a
  file that is not one host's cache file, or is older than that, <-> ``P:robots`` (name -> text);
  ``stats.txt`` and ``lastmod.txt`` <-> ``P:log:stats``, ``P:log:lastmod`` (a crawl on Redis appends
  to them there; lastmod.txt's mtime, when its lines were read, is a ``# sitemaps read at UNIX``
  line in Redis); any other state file (``unlinked.txt``, ``round.txt``, ...) <-> ``P:files``
  (file name -> text).

Not moved: ``claims.txt`` (empty once recovered), locks, ``running.txt``, the caches
(``frontier.txt``, ``frontier.view``, ``census.txt``), ``report.html`` and ``warc/``.

Guarantees. push: a killed file crawl is recovered first, under ``crawl.lock``, exactly as a
crawl start recovers it; the image is written under a temporary prefix and goes live in one
MULTI/EXEC (delete the replaced crawl's keys, RENAME the new ones), so a kill of push leaves
the target as it was and the files untouched, and a rerun starts over. pull: reads Redis in one
MULTI/EXEC (a consistent snapshot; Redis is left as it is), writes every file atomically into a
hidden folder beside the project's, then renames that folder into place: a kill of pull leaves
no half project, and a rerun starts over. A URL in flight under a lease that ran out (a dead
machine) comes back pending, as recovery brings back a killed file crawl's claims; a live lease
anywhere refuses the pull (and a push ``--replace`` over it), naming the machines.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from filelock import FileLock, Timeout

from .. import config as settings
from ..order import Order
from ..politeness import HostState
from ..robots import FRESH_FOR, cache_name, load as load_robots
from ..records import QUEUE_HEADER, first_field, is_data, is_redirect_hop, parse_queue_line
from ..recrawl import LASTMOD, LASTMOD_READ, lastmod_read_at
from ..safefs import atomic_write_with
from ..urls import host_key
from .contract import StoreError
from .files import CLAIMS, HASHES, HEADERS, HOSTS, LOGS, QUEUE, read_hosts
from .recovery import SIGNATURE, is_clean, recover, tidy, write_signature
from .redisstore import ADD_BATCH, KEY_SCALE, RedisStore, fingerprint, pending_lines

LOCK = "crawl.lock"   # the crawl's own lock (crawl.py): a push holds it as a crawl start does
SETTINGS = settings.SETTINGS
SKIPPED = {CLAIMS, "running.txt", SIGNATURE, "census.txt"}   # not state, or empty once recovered
# stats.txt and lastmod.txt are appended to as well: a crawl on Redis appends their lines to
# P:log:stats and P:log:lastmod, so they move as logs (a file crawl's lines, then Redis's).
LOG_FILES = {file: name for name, file in LOGS.items()} | {"stats.txt": "stats", "lastmod.txt": "lastmod"}
STRUCTURED = {QUEUE, HOSTS, HASHES, SETTINGS, CLAIMS}
ROBOTS = "robots"
PIPELINE = 1000        # Redis commands sent per round trip while writing an image
_PLAIN_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@\[\]-]{0,250}\.(txt|log)")
_LOG_NAME = re.compile(r"[a-z][a-z0-9_]{0,40}")
_PER_HOST = re.compile(r"([qrdhfl]|robots):\{([^{}]*)\}")
_NAMED = re.compile(r"(seen|over):[0-9a-f]{3}|log:[a-z][a-z0-9_]*|held:[^:]+")
_FIXED = {"hosts", "rhosts", "dhosts", "leases", "fhosts", "counts", "owners", "seq", "texts",
          "settings", "robots", "files"}


class TransferError(StoreError):
    """push or pull cannot go on; one line for the user, nothing changed."""


@dataclass
class Image:
    """A crawl as plain data, the same whichever store it comes from or goes to."""

    pending: list[str] = field(default_factory=list)              # queue lines, no LF, in queue order
    logs: dict[str, list[bytes]] = field(default_factory=dict)    # log name -> its lines (each ends in LF)
    hosts: dict[str, HostState] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)           # text hash -> first URL (hashes.txt)
    settings: bytes | None = None
    robots: dict[str, bytes] = field(default_factory=dict)        # robots/ file name -> content
    files: dict[str, bytes] = field(default_factory=dict)         # other state files, verbatim

    def summary(self) -> str:
        n = outcome_counts(self)
        return f"{len(self.pending)} pending, {n['crawled']} crawled, {n['failed']} failed"


# -- pure mappings -------------------------------------------------------------------------------

def split_lines(data: bytes) -> list[bytes]:
    """The lines of a file, each ending in LF (a last line without one gets it), bytes kept as they are."""
    parts = data.split(b"\n")
    return [p + b"\n" for p in parts[:-1]] + ([parts[-1] + b"\n"] if parts[-1] else [])


def log_lines(file_name: str, data: bytes) -> list[bytes]:
    """A log file's lines as Redis keeps them: its column header (the crawler's own) left out."""
    lines = split_lines(data)
    header = HEADERS.get(file_name, "").encode()
    if header and lines and lines[0] == header:
        lines = lines[1:]
    return lines


def log_file(name: str) -> str | None:
    """The file a Redis log is written to, or None for a name that cannot be a plain state file."""
    if name in LOGS:
        return LOGS[name]
    file = f"{name}.txt"
    return file if _LOG_NAME.fullmatch(name) and file not in STRUCTURED | SKIPPED else None


def queue_lines(data: bytes) -> list[str]:
    """queue.txt's pending lines in file order, as the crawler writes them (recovery ran first, so
    each is a record; a hand-written bare URL gets its default fields)."""
    out = []
    for no, raw in enumerate(data.decode("utf-8", "surrogateescape").split("\n"), 1):
        if is_data(raw):
            try:
                out.append(parse_queue_line(raw).line()[:-1])
            except ValueError as e:
                raise TransferError(f"queue.txt:{no}: {e}; run `crawl NAME` once to have it moved to rejected.txt") \
                    from None
    return out


def text_hashes(data: bytes) -> dict[str, str]:
    """hashes.txt: text hash -> the first URL seen with it (the first line wins, as in the file store)."""
    out: dict[str, str] = {}
    for line in data.decode("utf-8", "surrogateescape").split("\n"):
        if is_data(line) and "\t" in line:
            h, url = line.split("\t", 1)
            out.setdefault(h.strip(), url.strip())
    return out


def known_urls(image: Image) -> Iterator[str]:
    """Every URL the crawl knows (queued, crawled or failed): the file store's dedup set."""
    for line in image.pending:
        yield first_field(line)
    for name in ("crawled", "failed"):
        for raw in image.logs.get(name, []):
            if _is_data(raw):
                yield first_field(raw.decode("utf-8", "surrogateescape"))


def outcome_counts(image: Image) -> dict[str, int]:
    """``P:counts``' crawled, hop and failed numbers for the image's records (as the file store counts them)."""
    crawled = [x.decode("utf-8", "replace") for x in image.logs.get("crawled", []) if _is_data(x)]
    hops = sum(1 for line in crawled if is_redirect_hop(line))
    failed = sum(1 for x in image.logs.get("failed", []) if _is_data(x))
    return {"crawled": len(crawled) - hops, "hop": hops, "failed": failed}


def host_fields(state: HostState) -> dict[str, str]:
    """A host's politeness state as ``RedisStore.update_host`` writes it."""
    return {"next": f"{state.next_allowed:.3f}", "delay": f"{state.delay:.3f}",
            "failures": str(state.failures), "reason": state.reason or "-"}


def host_state(fields: dict[bytes, bytes]) -> HostState | None:
    """A host hash's politeness state, or None when it holds none (only a lease or a count)."""
    if not any(k in fields for k in (b"next", b"delay", b"failures", b"reason")):
        return None
    return HostState(float(fields.get(b"next") or 0), float(fields.get(b"delay") or 0),
                     int(fields.get(b"failures") or 0), (fields.get(b"reason") or b"-").decode("utf-8", "replace"))


def insertion_number(key: int, lifo: bool) -> int:
    """The insertion number inside a Redis order key (``score * KEY_SCALE +- seq``): queue.txt's order."""
    return (-key if lifo else key) % KEY_SCALE


def classify(prefix: str, key: str) -> tuple[str, str] | None:
    """(kind, host or name) of one of the crawl's keys, or None for a key that is not one."""
    if not key.startswith(prefix + ":"):
        return None
    rest = key[len(prefix) + 1:]
    m = _PER_HOST.fullmatch(rest)
    if m:
        return m.group(1), m.group(2)
    if rest in _FIXED:
        return rest, ""
    if _NAMED.fullmatch(rest):
        kind, name = rest.split(":", 1)
        return kind, name
    return None


def machine_of(owner: str) -> str:
    """The machine of a lease owner (``machine/pid``)."""
    return owner.rsplit("/", 1)[0]


@dataclass
class Snapshot:
    """What pull reads from Redis, in one MULTI/EXEC."""

    now_ms: int = 0
    ready: dict[str, list[tuple[bytes, float]]] = field(default_factory=dict)    # q and r: (line, key)
    delayed: dict[str, list[tuple[bytes, float]]] = field(default_factory=dict)  # d: ("key line", not_before)
    in_flight: dict[str, dict[bytes, bytes]] = field(default_factory=dict)       # f: url -> owner TAB tok TAB key TAB line
    hosts: dict[str, dict[bytes, bytes]] = field(default_factory=dict)           # h
    logs: dict[str, list[bytes]] = field(default_factory=dict)
    texts: dict[bytes, bytes] = field(default_factory=dict)
    settings: bytes | None = None
    robots: dict[bytes, bytes] = field(default_factory=dict)                     # P:robots: name -> text
    host_robots: dict[str, bytes] = field(default_factory=dict)                 # P:robots:{host}
    files: dict[bytes, bytes] = field(default_factory=dict)


def live_owners(snap: Snapshot) -> list[str]:
    """The owners (``machine/pid``) of the host leases that have not run out."""
    def until(v: dict[bytes, bytes]) -> float:
        try:
            return float(v.get(b"luntil") or 0)
        except ValueError:   # not a time: no lease anybody could renew
            return 0.0
    return sorted({v[b"lowner"].decode("utf-8", "replace") for v in snap.hosts.values()
                   if b"lowner" in v and until(v) > snap.now_ms})


def image_of(snap: Snapshot, lifo: bool) -> Image:
    """The crawl a snapshot holds as an Image. A URL in flight under a lease that ran out goes
    back to pending (its machine died), at its place in the order."""
    img = Image()
    pending: list[tuple[int, str]] = []
    for items in snap.ready.values():
        pending += [(insertion_number(int(key), lifo), line.decode("utf-8", "surrogateescape")) for line, key in items]
    for items in snap.delayed.values():
        for member, _ in items:
            key, line = member.split(b" ", 1)
            pending.append((insertion_number(int(key), lifo), line.decode("utf-8", "surrogateescape")))
    for host, flights in snap.in_flight.items():
        for value in flights.values():
            _owner, _token, key, line = value.split(b"\t", 3)
            pending.append((insertion_number(int(key), lifo), line.decode("utf-8", "surrogateescape")))
    img.pending = [line for _, line in sorted(pending, key=lambda p: p[0])]
    img.logs = {name: [x if x.endswith(b"\n") else x + b"\n" for x in lines] for name, lines in snap.logs.items()}
    for host, fields in snap.hosts.items():
        state = host_state(fields)
        if state is not None:
            img.hosts[host] = state
    img.texts = {h.decode("utf-8", "surrogateescape"): u.decode("utf-8", "surrogateescape") for h, u in snap.texts.items()}
    img.settings = snap.settings
    img.robots = {k.decode("utf-8", "surrogateescape"): v for k, v in snap.robots.items()}
    img.robots.update((cache_name(host), text) for host, text in snap.host_robots.items())
    img.files = {k.decode("utf-8", "surrogateescape"): v for k, v in snap.files.items()}
    return img


def _is_data(raw: bytes) -> bool:
    return is_data(raw.decode("utf-8", "replace"))


# -- the file side -------------------------------------------------------------------------------

def read_folder(folder: Path) -> Image:
    """Every state file of a stopped, recovered project folder."""
    img = Image()
    for path in sorted(folder.iterdir()):
        name = path.name
        if name in SKIPPED or not _PLAIN_FILE.fullmatch(name) or path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if name == QUEUE:
            img.pending = queue_lines(data)
        elif name in LOG_FILES:
            img.logs[LOG_FILES[name]] = log_lines(name, data)
            if name == LASTMOD:   # its mtime (when its lines were read) as Redis keeps it
                img.logs["lastmod"].append(f"{LASTMOD_READ} {path.stat().st_mtime:.3f}\n".encode())
        elif name == HOSTS:
            img.hosts = read_hosts(folder)
        elif name == HASHES:
            img.texts = text_hashes(data)
        elif name == SETTINGS:
            img.settings = data
        else:
            img.files[name] = data
    robots = folder / ROBOTS
    if robots.is_dir() and not robots.is_symlink():
        for path in sorted(robots.iterdir()):
            if _PLAIN_FILE.fullmatch(path.name) and path.name.endswith(".txt") and path.is_file() \
                    and not path.is_symlink():
                img.robots[path.name] = path.read_bytes()
    return img


def write_folder(img: Image, folder: Path) -> None:
    """The image as project files in ``folder`` (new and empty), each written atomically."""
    def put(path: Path, data: bytes) -> None:
        atomic_write_with(path, lambda f: f.write(data))

    if img.settings is not None:
        put(folder / SETTINGS, img.settings)
    put(folder / QUEUE, QUEUE_HEADER.encode() + b"".join(
        line.encode("utf-8", "surrogateescape") + b"\n" for line in img.pending))
    put(folder / CLAIMS, HEADERS[CLAIMS].encode())
    logs = {"crawled": [], "failed": [], "rejected": [], **img.logs}
    read_at = None
    if "lastmod" in logs:
        read_at = lastmod_read_at(x.decode("utf-8", "replace") for x in logs["lastmod"])
        logs["lastmod"] = [x for x in logs["lastmod"] if not x.startswith(LASTMOD_READ.encode() + b" ")]
    for name, lines in sorted(logs.items()):
        file = log_file(name)
        if file is not None:
            put(folder / file, HEADERS.get(file, "").encode() + b"".join(lines))
    if read_at is not None:   # when its lines were read, as a file says it
        os.utime(folder / LASTMOD, (read_at, read_at))
    put(folder / HOSTS, (HEADERS[HOSTS] + "".join(s.line(h) for h, s in sorted(img.hosts.items()))).encode())
    if img.texts:
        put(folder / HASHES, (HEADERS[HASHES] + "".join(f"{h}\t{u}\n" for h, u in sorted(img.texts.items())))
            .encode("utf-8", "surrogateescape"))
    for name, data in sorted(img.files.items()):
        if _PLAIN_FILE.fullmatch(name) and name not in STRUCTURED | SKIPPED | set(LOG_FILES):
            put(folder / name, data)
    if img.robots:
        (folder / ROBOTS).mkdir()
        for name, data in sorted(img.robots.items()):
            if _PLAIN_FILE.fullmatch(name) and name.endswith(".txt"):
                put(folder / ROBOTS / name, data)
    _fsync_dir(folder)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def project_config(folder: Path) -> settings.CrawlConfig:
    try:
        saved = settings.load(folder)
        return settings.build(saved, {"seeds": tuple(saved.get("seeds", ()))})
    except ValueError as e:
        raise TransferError(f"{folder / SETTINGS}: {e}") from None


def recover_folder(folder: Path, cfg: settings.CrawlConfig) -> list[str]:
    """What a crawl start does to the files a kill left (the caller holds crawl.lock): claims in
    flight back to pending, torn lines and refused URLs to rejected.txt. Returns the messages."""
    from ..scope import Admission

    admission = Admission(cfg)
    seeds = set(cfg.seeds)

    def admit(url: str, depth: int) -> str | None:
        return None if url in seeds else admission.check(url, depth)

    said = [f"warning: {p}" for p in tidy(folder)]
    if not is_clean(folder, cfg.key()):
        rep = recover(folder, admit, cfg.max_pages_per_host)
        said += [f"warning: {p}" for p in rep.problems]
        if rep.recovered_claims:
            said.append(f"recovered {rep.recovered_claims} URLs that were in flight when the last run stopped")
        # The folder is now as a clean stop leaves it: the next push or pull of it (or a crawl
        # start) need not check and rewrite every file again. Without this, each push rewrote
        # queue.txt, and one killed mid-rewrite left its temporary file in the folder.
        write_signature(folder, cfg.key())
    return said


# -- the Redis side ------------------------------------------------------------------------------

def connect(url: str) -> Any:
    """A Redis client on ``url`` (``redis://HOST:PORT/DB``); one-line StoreError if it cannot be had."""
    return RedisStore.from_url(url, "-").r


def _glob(text: str) -> str:
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


def crawl_keys(r: Any, prefix: str) -> list[bytes]:
    """The keys of the crawl under ``prefix`` (not those of a project whose name merely starts with it)."""
    return [k for k in r.scan_iter(match=_glob(prefix) + ":*", count=1000)
            if classify(prefix, k.decode("utf-8", "surrogateescape")) is not None]


def running_machines(r: Any, prefix: str) -> list[str]:
    """The owners of the live host leases of the crawl under ``prefix``, on Redis's clock."""
    sec, usec = r.time()
    now_ms = sec * 1000 + usec // 1000
    hosts = r.zrangebyscore(f"{prefix}:leases", f"({now_ms}", "+inf")
    owners = [r.hget(f"{prefix}:h:{{{h.decode()}}}", "lowner") for h in hosts]
    return sorted({o.decode("utf-8", "replace") for o in owners if o})


def _running_error(name: str, owners: list[str]) -> TransferError:
    machines = sorted({machine_of(o) for o in owners})
    return TransferError(f"a Redis crawl of {name!r} is running on {', '.join(machines)} "
                         f"({len(owners)} worker(s) hold host leases); stop it there first "
                         "(Ctrl-C), or wait for its leases to run out")


def write_image(r: Any, prefix: str, img: Image, order: Order) -> None:
    """The image under ``prefix``, laid out as ``RedisStore`` keeps a crawl (its own scripts queue
    the pending lines, so scores, index and counts are exactly its own)."""
    store = RedisStore(r, prefix, order=order)
    entries = [parse_queue_line(line) for line in img.pending]
    try:
        for i in range(0, len(entries), ADD_BATCH):
            store.requeue(entries[i:i + ADD_BATCH])
    except StoreError as e:   # "Redis store 'TEMP PREFIX': ...": the user knows no temp prefix
        raise TransferError(f"push failed: Redis: {str(e).split(': ', 1)[-1]}; nothing was changed, run it again") \
            from None
    pipe = r.pipeline(transaction=False)
    queued = 0

    def send(fn: str, *args: Any, **kw: Any) -> None:
        nonlocal queued
        getattr(pipe, fn)(*args, **kw)
        queued += 1
        if queued >= PIPELINE:
            pipe.execute()
            queued = 0

    buckets: dict[str, set[bytes]] = {}
    admitted: Counter[str] = Counter()
    for url in known_urls(img):
        fp = fingerprint(url)
        bucket = buckets.setdefault(store._bucket(fp), set())
        if fp not in bucket:
            bucket.add(fp)
            admitted[host_key(url)] += 1
    for key, fps in buckets.items():
        send("set", key, b"".join(sorted(fps)))
    for host, n in admitted.items():
        send("hset", store.per_host("h", host), "admitted", n)
    for host, state in img.hosts.items():
        send("hset", store.per_host("h", host), mapping=host_fields(state))
    send("hset", store.key("counts"), mapping=outcome_counts(img))
    for name, lines in img.logs.items():
        for i in range(0, len(lines), PIPELINE):
            send("rpush", store.key(f"log:{name}"), *lines[i:i + PIPELINE])
    texts = list(img.texts.items())
    for i in range(0, len(texts), PIPELINE):
        send("hset", store.key("texts"), mapping=dict(texts[i:i + PIPELINE]))
    if img.settings is not None:
        send("set", store.key("settings"), img.settings)
    for name, data in img.robots.items():
        host, until = robots_key_of(name, data)
        if host is not None and until > time.time() + 60:
            send("set", store.per_host("robots", host), data, exat=until)
        else:
            send("hset", store.key("robots"), name, data)
    for name, data in img.files.items():
        send("hset", store.key("files"), name, data)
    pipe.execute()


def robots_key_of(name: str, data: bytes) -> tuple[str | None, int]:
    """The host whose robots/ cache file this is, and until when a crawl keeps it in Redis (its
    freshness and a day, as ``RedisRobots`` sets it); (None, 0) for a file that is not a host's."""
    try:
        text = data.decode("utf-8")
        url = text.partition("\n")[0].removeprefix("url: ")
        rules = load_robots(text)
        host = host_key(url)
    except (ValueError, KeyError):
        return None, 0
    if not host or cache_name(host) != name:
        return None, 0
    return host, int(rules.fresh_until + FRESH_FOR)


def go_live(r: Any, temp: str, name: str, replace: bool) -> None:
    """Make the image under ``temp`` the crawl ``name`` in one MULTI/EXEC: the replaced crawl's keys
    deleted, the new ones renamed. WATCH refuses it if a crawl of ``name`` started meanwhile."""
    import redis

    watched = [f"{name}:seq", f"{name}:counts", f"{name}:leases"]
    while True:
        with r.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(*watched)
                old = crawl_keys(r, name)
                if old and not replace:
                    raise _already_there(name)
                owners = running_machines(r, name)
                if owners:
                    raise _running_error(name, owners)
                new = crawl_keys(r, temp)
                pipe.multi()
                for i in range(0, len(old), PIPELINE):
                    pipe.delete(*old[i:i + PIPELINE])
                for key in new:
                    pipe.rename(key, name.encode("utf-8", "surrogateescape") + key[len(temp.encode("utf-8", "surrogateescape")):])
                pipe.execute()
                return
            except redis.WatchError:
                continue


def temp_prefix(name: str) -> str:
    """Where push writes before going live: no project can be named so (a name has no ``/``), and a
    rerun on this machine finds its killed run's keys there."""
    return f"{name}/push@{socket.gethostname()}"


def read_snapshot(r: Any, prefix: str) -> Snapshot:
    """The crawl under ``prefix``, read in one MULTI/EXEC (a consistent state even while it runs)."""
    keys = crawl_keys(r, prefix)
    if not keys:
        raise TransferError(f"Redis holds no crawl named {prefix!r}")
    pipe = r.pipeline(transaction=True)
    pipe.time()
    wanted: list[tuple[str, str]] = []
    for key in keys:
        kind, arg = classify(prefix, key.decode("utf-8", "surrogateescape"))  # type: ignore[misc]
        if kind in ("q", "r", "d"):
            pipe.zrange(key, 0, -1, withscores=True)
        elif kind == "robots" and arg:   # one host's robots.txt, as a crawl on Redis keeps it
            pipe.get(key)
        elif kind in ("f", "h", "texts", "robots", "files"):
            pipe.hgetall(key)
        elif kind == "log":
            pipe.lrange(key, 0, -1)
        elif kind == "settings":
            pipe.get(key)
        else:
            continue
        wanted.append((kind, arg))
    got = pipe.execute()
    snap = Snapshot(now_ms=got[0][0] * 1000 + got[0][1] // 1000)
    for (kind, arg), value in zip(wanted, got[1:]):
        if kind in ("q", "r"):   # a member of q may be a block of lines (RedisStore.add)
            snap.ready.setdefault(arg, []).extend(x for member, key in value for x in pending_lines(member, key))
        elif kind == "d":
            snap.delayed[arg] = value
        elif kind == "f":
            snap.in_flight[arg] = value
        elif kind == "h":
            snap.hosts[arg] = value
        elif kind == "log":
            snap.logs[arg] = value
        elif kind == "texts":
            snap.texts = value
        elif kind == "settings":
            snap.settings = value
        elif kind == "robots" and arg:
            if value is not None:
                snap.host_robots[arg] = value
        elif kind == "robots":
            snap.robots = value
        elif kind == "files":
            snap.files = value
    return snap


@contextlib.contextmanager
def _redis_errors(what: str) -> Iterator[None]:
    """A Redis that goes away half-way is one error line (the source is intact; run it again)."""
    import redis
    try:
        yield
    except redis.RedisError as e:
        raise TransferError(f"{what} failed: Redis: {type(e).__name__}: {e}; "
                            "nothing was changed, run it again") from None


@contextlib.contextmanager
def _locked(path: Path, busy: str) -> Iterator[None]:
    """Hold a sidecar lock file (``crawl.lock``: no crawl of the folder meanwhile), or refuse with ``busy``."""
    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise TransferError(busy) from None
    try:
        yield
    finally:
        lock.release()


def _crawl_running(folder: Path) -> str:
    return f"a crawl of {folder} is running; stop it first (Ctrl-C)"


def _already_there(name: str) -> TransferError:
    return TransferError(f"Redis already holds a crawl named {name!r}; "
                         "pull it first, or push with --replace to overwrite it")


# -- the two commands ----------------------------------------------------------------------------

def push(folder: Path, url: str, *, replace: bool = False) -> list[str]:
    """Load the project folder into Redis under its name; returns the lines to tell the user."""
    name = folder.name
    r = connect(url)
    with _locked(folder / LOCK, _crawl_running(folder)), _redis_errors("push"):
        if crawl_keys(r, name) and not replace:   # early, before any work; go_live checks again
            raise _already_there(name)
        owners = running_machines(r, name)
        if owners:
            raise _running_error(name, owners)
        cfg = project_config(folder)
        said = recover_folder(folder, cfg)
        img = read_folder(folder)
        temp = temp_prefix(name)
        old = crawl_keys(r, temp)   # a killed push's
        for i in range(0, len(old), PIPELINE):
            r.delete(*old[i:i + PIPELINE])
        write_image(r, temp, img, Order(cfg.order, cfg.prefer, cfg.defer))
        go_live(r, temp, name, replace)
    return said + [f"pushed {folder} to {url} as {name!r}: {img.summary()}; "
                   f"crawl it there with: crawl {name} --store {url}"]


def pull(projects_dir: Path, name: str, url: str, *, replace: bool = False) -> list[str]:
    """Write the Redis crawl ``name`` back as the project folder ``projects_dir/name``."""
    folder = projects_dir / name
    if folder.exists() and any(folder.iterdir()) and not replace:
        raise _not_empty(folder)
    r = connect(url)
    projects_dir.mkdir(parents=True, exist_ok=True)
    with _locked(projects_dir / f".{name}.pull.lock", f"another pull of {name!r} into {projects_dir} is running"):
        with _redis_errors("pull"):
            snap = read_snapshot(r, name)
        owners = live_owners(snap)
        if owners:
            raise _running_error(name, owners)
        temp, old = projects_dir / f".{name}.pull", projects_dir / f".{name}.old"
        for leftover in (temp, old):   # a killed pull's
            _remove(leftover)
        temp.mkdir()
        try:
            if snap.settings is not None:   # first: the crawl order tells how to read the keys
                atomic_write_with(temp / SETTINGS, lambda f: f.write(snap.settings))
            try:
                img = image_of(snap, lifo=_lifo(temp))
            except ValueError as e:   # a key written by hand, or by something else than the crawler
                raise TransferError(f"the crawl {name!r} in Redis holds a record that is not one ({e}); "
                                    "nothing was written") from None
            write_folder(img, temp)
            _install(temp, folder, old, replace)
        except BaseException:
            _remove(temp)
            raise
    said = [f"pulled {name!r} from {url} into {folder}: {img.summary()}; resume it alone with: crawl {name}"]
    if img.settings is None:
        said.insert(0, f"warning: Redis holds no settings for {name!r}: give its START_URL(s) and options "
                       f"to the first `crawl {name}`")
    return said


def _not_empty(folder: Path) -> TransferError:
    return TransferError(f"{folder} exists and is not empty; move it away, or pull with --replace")


def _lifo(folder: Path) -> bool:
    """True for a dfs crawl, whose order keys count down (no settings: the default order)."""
    if not (folder / SETTINGS).exists():
        return False
    try:
        return project_config(folder).order == "dfs"
    except TransferError:
        return False


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _install(temp: Path, folder: Path, old: Path, replace: bool) -> None:
    """Put the pulled folder in place with renames: an empty target is replaced at once; a full
    one (``--replace``) is moved aside under its crawl.lock first, then deleted."""
    if folder.is_symlink():
        raise TransferError(f"{folder} is a symbolic link; refusing to replace it")
    if folder.exists() and any(folder.iterdir()):
        if not replace:   # filled while we read Redis
            raise _not_empty(folder)
        with _locked(folder / LOCK, _crawl_running(folder)):
            os.rename(folder, old)
    os.rename(temp, folder)   # onto a missing or empty folder
    _fsync_dir(folder.parent)
    _remove(old)
