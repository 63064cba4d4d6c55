"""Recovery: what a start does to the files a killed, torn or hand-edited crawl left.

Only while no worker runs (the caller holds crawl.lock): the journal is folded back into
queue.txt, every line that is not a record is reported and moved to rejected.txt, and queued URLs
the current settings refuse go there too. ``tidy`` ends logs cut by a power loss.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

from .. import safefs
from ..safefs import append_text, atomic_write
from ..politeness import HostState, parse_host_line
from ..records import (QUEUE_HEADER, QueueEntry, data_fields, first_field, is_data, parse_queue_line,
                       rejected_line)
from ..urls import host_key, normalize
from .files import (CHECKS, CLAIMS, CRAWLED, DUPLICATES, FAILED, FAR_AHEAD, HASHES, HEADERS, HOSTS, QUEUE,
                    REJECTED, write_hosts)
from .seen import SeenSet
from . import paste


SIGNATURE = "frontier.txt"


@dataclass
class Repair:
    """What recovery found: problems are reported to the user and kept in rejected.txt."""

    pending: int = 0
    recovered_claims: int = 0
    problems: list[str] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)   # queued URLs the settings now refuse

    def move(self, rejected: list[str], name: str, no: int, line: str, what: str) -> None:
        """Report a line of a state file that is not a record, and keep it in rejected.txt."""
        self.problems.append(f"{name}:{no}: {what}, moved to rejected.txt: {line.strip()[:200]!r}")
        rejected.append(rejected_line(line.rstrip("\n"), f"{name}:{no}: {what}"))


def _signature(folder: Path, settings_key: str) -> str:
    """Identity of the files a person may edit while stopped: any change forces the full check."""
    lines = []
    for name in (QUEUE, CRAWLED, FAILED, HOSTS):
        try:
            st = os.stat(folder / name)
            lines.append(f"{name} {st.st_ino} {st.st_size} {st.st_mtime_ns}\n")
        except FileNotFoundError:
            lines.append(f"{name} missing\n")
    return "".join(lines) + f"settings {settings_key}\n"


def write_signature(folder: Path, settings_key: str) -> None:
    """Remember how a clean stop left queue.txt, so the next start can skip the full check (and
    tell lines appended by hand since from an edit: ``pasted_from``)."""
    atomic_write(folder / SIGNATURE, "# queue.txt as the last clean stop left it (a cache; safe to delete)\n"
                 + _signature(folder, settings_key) + _crc_line(folder / QUEUE))


def _crc_line(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f"crc {paste.crc_of_file(f.fileno())}\n"   # (the fold's, if it just wrote it)
    except OSError:
        return ""


def _saved_signature(folder: Path) -> tuple[str, int | None] | None:
    """The signature the last clean stop wrote, and its CRC of queue.txt (None if it has none)."""
    try:
        text = (folder / SIGNATURE).read_text(encoding="utf-8").split("\n", 1)[1]
        claims = (folder / CLAIMS).read_text(encoding="utf-8")
    except (OSError, IndexError):
        return None
    if any(map(is_data, claims.splitlines())):
        return None
    crc = None
    m = re.search(r"^crc (\d+)\n", text, re.M)
    if m:
        text, crc = text[:m.start()] + text[m.end():], int(m.group(1))
    return text, crc


def is_clean(folder: Path, settings_key: str) -> bool:
    """True when the last run stopped cleanly and nobody touched queue.txt or the settings since."""
    saved = _saved_signature(folder)
    return saved is not None and saved[0] == _signature(folder, settings_key)


def pasted_from(folder: Path, settings_key: str) -> int | None:
    """The size queue.txt had at the last clean stop, when the only change since is lines
    appended to it (a paste, ``spider/frontier/paste.py``): its first bytes are exactly as that
    stop left them, and nothing else changed. None otherwise."""
    saved = _saved_signature(folder)
    if saved is None or saved[1] is None:
        return None
    sig, crc = saved
    m = re.search(r"^queue\.txt (\d+) (\d+) \d+\n", sig, re.M)
    now = _signature(folder, settings_key)
    if not m:
        return None
    ino, size = int(m.group(1)), int(m.group(2))
    if sig[:m.start()] + sig[m.end():] != re.sub(r"^queue\.txt .*\n", "", now, flags=re.M):
        return None   # another file or a setting changed too
    try:
        with open(folder / QUEUE, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_ino != ino or st.st_size < size + paste.LAZY_BYTES or size == 0 \
                    or os.pread(f.fileno(), 1, size - 1) != b"\n":
                return None   # (a short paste: recovery checks it at once, as quick as that)
            return size if paste.crc_of(f.fileno(), size) == crc else None
    except OSError:
        return None


_UNDECODABLE, _shown, _trusted = paste.UNDECODABLE, paste.shown, paste.trusted
_UNIX_TIME = re.compile(r"[0-9]{1,12}(\.[0-9]{1,6})?")
_COUNT = re.compile(r"[0-9]{1,9}")
_PLAIN_URL = re.compile(r"https?://[!-~]+")   # printable ASCII, no spaces: as normalize writes it


def recover(folder: Path, admit: Callable[[str, int], str | None], max_per_host: int | None = None) -> Repair:
    """Fold the journal into the files. Only while no worker runs (the caller holds crawl.lock).

    1. crawled.txt and failed.txt: a line that does not parse (hand edit, or a line torn by power
       loss) is reported and moved to rejected.txt; the file is rewritten atomically without it.
    2. queue.txt + claims.txt: pending = every queued URL and every claim not settled, minus what is
       crawled or failed; a URL queued twice keeps its last line (the latest attempts count).
       Hand-written lines are normalised; a line that is not a crawlable URL is reported (file and
       line number) and moved to rejected.txt; a URL the current settings refuse (``admit``
       returns a reason, or its host already holds ``max_per_host`` URLs: ``host budget``) is
       moved there with that reason.
    3. claims.txt is emptied, then queue.txt is replaced (each atomically): a journal never
       outlives the queue.txt it describes. The queue line of every claim the journal says was
       settled is dropped (a recheck's URL is crawled by design, so only the journal knows).

    Memory stays at a few bytes per URL (``SeenSet`` fingerprints, two passes over queue.txt).
    """
    folder = Path(folder)
    rep = Repair()
    rejected: list[str] = []
    done = SeenSet()
    for name in (CRAWLED, FAILED):
        _repair_outcome_file(folder / name, rep, rejected, done)
    per_host = _urls_per_host(folder) if max_per_host is not None else {}

    def refusal(url: str, depth: int) -> str | None:
        """Why the current settings refuse a queued URL, if they do (the host budget last: only
        a URL admitted otherwise takes one of its host's places)."""
        reason = admit(url, depth)
        if reason is None and max_per_host is not None:
            h = host_key(url)
            if per_host.get(h, 0) >= max_per_host:
                return "host budget"
            per_host[h] = per_host.get(h, 0) + 1
        return reason

    for name in (REJECTED, "fetch.log", "errors.log"):
        _end_torn_log(folder / name, rep)
    qpath, cpath = folder / QUEUE, folder / CLAIMS
    hosts = _repair_hosts(folder, rep, rejected)
    inflight: dict[str, str] = {}
    # Queue lines whose claim was settled (crawled, failed, retried, released, checked, ...): the
    # journal describes the current queue.txt (it is emptied before queue.txt is replaced), so
    # each settled claim consumes one line of the same text. Most such URLs are in crawled.txt
    # or failed.txt anyway; this matters for a recheck, whose URL is crawled by design.
    settled: dict[str, int] = {}
    taken: list[tuple[int, int]] = []
    if cpath.exists():
        with open(cpath, encoding="utf-8", errors="replace") as f:
            for rec in f:
                if not rec.endswith("\n"):
                    continue   # a torn journal record: the files it describes decide
                try:
                    if rec.startswith("C\t"):
                        _, _, _, _, nxt, qline = rec.rstrip("\n").split("\t", 5)
                        url = qline.split("\t", 1)[0]
                        inflight[url] = qline
                        h = host_key(url)
                        st = hosts.get(h, HostState())
                        if float(nxt) > st.next_allowed:
                            hosts[h] = replace(st, next_allowed=float(nxt))
                    elif rec.startswith("D\t"):
                        closed = inflight.pop(rec.rstrip("\n").split("\t", 2)[2], None)
                        if closed is not None:
                            settled[closed] = settled.get(closed, 0) + 1
                    elif rec.startswith("H\t"):
                        h, st = parse_host_line(rec[2:])
                        hosts[h] = st
                    elif rec.startswith("S\t"):   # lines skipped: blank, reported, or a
                        _, off, end, _n = rec.rstrip("\n").split("\t")   # judged paste (paste.py)
                        taken.append((int(off), int(end)))
                except (ValueError, IndexError):
                    continue
    write_hosts(folder, hosts)
    taken = _stretches_of(folder, taken)

    def lines() -> Iterator[tuple[int, str, str]]:
        """(line number, line, raw end) of the data lines of queue.txt, but those the run
        skipped (S records: reported already, or a pasted stretch judged and queued again)."""
        if not qpath.exists():
            return
        # -sig: Notepad's BOM; surrogateescape: bytes that are not UTF-8 are reported, not guessed
        with open(qpath, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
            pos = 3 if taken and open(qpath, "rb").read(3) == b"\xef\xbb\xbf" else 0
            k = 0
            for no, raw in enumerate(f, 1):
                if taken:
                    off, pos = pos, pos + len(raw.encode("utf-8", "surrogateescape"))
                    while k < len(taken) and taken[k][1] <= off:
                        k += 1
                    if k < len(taken) and taken[k][0] <= off:
                        continue
                if is_data(raw):
                    yield no, raw.rstrip("\r\n"), raw

    # One pass: parse, normalise hand-written lines, check admission, write the first line of each
    # URL. A URL queued twice (a retry re-queued before a crash) keeps the *latest* line's fields
    # (its attempts count): such URLs are remembered in ``later`` and patched in a second pass
    # over the output, which only happens when there are any.
    tmp = qpath.with_name(f".{QUEUE}.{os.getpid()}.tmp")
    horizon = time.time() + FAR_AHEAD
    written = SeenSet()
    later: dict[str, QueueEntry] = {}
    with open(safefs.new_temp(tmp), "w", encoding="utf-8", errors="surrogateescape") as out:
        out.write(QUEUE_HEADER)

        def keep(e: QueueEntry) -> None:
            if e.url in done and e.kind != "recheck":   # a recheck is of a crawled page, by design
                return
            # (a recheck's page holds its host's place already; a second line holds none more)
            reason = admit(e.url, e.depth) if e.kind == "recheck" or e.url in written else refusal(e.url, e.depth)
            if e.url in written and not reason:   # admitted twice: the later line's fields count
                later[e.url] = e
                return
            if reason:   # (a refused second line leaves the first one pending)
                rejected.append(rejected_line(e.url, reason, e.source))
                rep.refused[reason] = rep.refused.get(reason, 0) + 1
                return
            written.add(e.url)
            out.write(e.line())
            rep.pending += 1

        for no, line, raw in lines():
            if settled and settled.get(line):
                settled[line] -= 1   # taken and done in the run that stopped
                continue
            fields = line.split("\t") if raw.endswith("\n") and _trusted(line) else ()
            if len(fields) == 5:   # the shape of our own line: checked cheaply, copied as it is
                url, depth, attempts, not_before = fields[:4]
                if (url in written or not _COUNT.fullmatch(depth) or not _COUNT.fullmatch(attempts)
                        or not _UNIX_TIME.fullmatch(not_before) or not _PLAIN_URL.fullmatch(url)
                        or float(not_before) > horizon):
                    pass   # the slow path below reports odd fields (even of a URL already done)
                elif url in done:
                    continue
                else:
                    reason = refusal(url, int(depth))
                    if reason:
                        rejected.append(rejected_line(url, reason, line.rsplit("\t", 1)[-1]))
                        rep.refused[reason] = rep.refused.get(reason, 0) + 1
                    else:
                        written.add(url)
                        out.write(raw)
                        rep.pending += 1
                    continue
            try:
                e = paste.judge_line(line, raw.endswith("\n"), horizon)
            except ValueError as err:
                rep.problems.append(f"{QUEUE}:{no}: not a crawlable URL ({err}): {line[:200]!r}")
                rejected.append(rejected_line(_shown(line), f"{QUEUE}:{no}: {err}"))
                continue
            keep(e)
        for url, qline in inflight.items():
            try:
                e = parse_queue_line(qline)
            except ValueError:
                continue
            if (url not in done or e.kind == "recheck") and url not in written:   # its queue line is gone
                rep.recovered_claims += 1
                keep(e)
        out.flush()
        os.fsync(out.fileno())
    if later:
        _patch_lines(tmp, later)
    if rejected:
        append_text(folder / REJECTED, _shown("".join(rejected)) if _UNDECODABLE.search("".join(rejected))
                    else "".join(rejected))
    atomic_write(cpath, HEADERS[CLAIMS])   # first: a journal must never outlive its queue.txt
    os.replace(tmp, qpath)
    return rep


def _stretches_of(folder: Path, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The judged stretches of the journal, sorted, if the journal was written for the
    queue.txt there is now (its head names the file's inode; byte ranges of another file
    would skip the wrong lines), else none."""
    from .files import _journal_for
    if not taken:
        return []
    try:
        st = os.stat(folder / QUEUE)
    except OSError:
        return []
    size = _journal_for(folder, st.st_ino)
    if size is None or st.st_size < size or any(e > st.st_size for _, e in taken):
        return []
    return sorted(taken)


def _urls_per_host(folder: Path) -> dict[str, int]:
    """How many URLs of each host crawled.txt and failed.txt hold (the host budget's count)."""
    out: dict[str, int] = {}
    for name in (CRAWLED, FAILED):
        for f in data_fields(folder / name):
            url = f[0].strip()
            if url.startswith(("http://", "https://")):
                h = host_key(url)
                out[h] = out.get(h, 0) + 1
    return out


def _patch_lines(path: Path, latest: dict[str, QueueEntry]) -> None:
    """Rewrite the lines of the URLs in ``latest`` with those entries (same position)."""
    tmp = path.with_name(path.name + ".patch")
    with open(path, encoding="utf-8", errors="surrogateescape") as src, \
            open(safefs.new_temp(tmp), "w", encoding="utf-8", errors="surrogateescape") as out:
        for line in src:
            e = latest.get(line.split("\t", 1)[0].rstrip("\n"))
            out.write(e.line() if e is not None else line)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def tidy(folder: Path) -> list[str]:
    """At the start of a crawl (nothing else writes): end logs cut by power loss, and remove
    temp files of rewrites a kill interrupted. Returns what it reported."""
    rep = Repair()
    for name in (REJECTED, "fetch.log", "errors.log", HASHES, DUPLICATES, "stats.txt", CHECKS,
                 "schedule.txt", "removed.txt", "links.txt", "lastmod.txt"):
        _end_torn_log(Path(folder) / name, rep)
    _mend_journal_header(Path(folder) / CLAIMS)
    for tmp in Path(folder).glob(".*.tmp"):
        try:
            tmp.unlink()
        except OSError:
            pass
    return rep.problems


def _mend_journal_header(path: Path) -> None:
    """A journal of header lines only, the last one cut (power loss at a clean stop), is rewritten whole,
    or the first record of the run would be glued to it and lost. A cut *record* is left alone:
    recovery ignores it (the files it describes decide) and rewrites the journal."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n") and all(x.startswith(b"#") for x in data.split(b"\n")):
        atomic_write(path, HEADERS[CLAIMS])


def _end_torn_log(path: Path, rep: Repair) -> None:
    """A log whose last line was cut (power loss): end that line, so the next record starts its own."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
    except FileNotFoundError:
        return
    append_text(path, "\n")
    rep.problems.append(f"{path.name}: its last line was cut (power loss?); kept as it is and ended")


def _repair_hosts(folder: Path, rep: Repair, rejected: list[str]) -> dict[str, HostState]:
    """hosts.txt as a dict; lines that do not parse are reported and moved to rejected.txt."""
    out: dict[str, HostState] = {}
    path = folder / HOSTS
    if not path.exists():
        return out
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        for no, line in enumerate(f, 1):
            line = line.replace("\r\n", "\n")
            if not is_data(line):
                continue
            try:
                if not line.endswith("\n"):
                    raise ValueError("torn last line")
                if line.count("\t") != 4:
                    raise ValueError("expected 5 TAB-separated fields")
                host, state = parse_host_line(line)
                if state.next_allowed > time.time() + FAR_AHEAD:
                    raise ValueError("next_allowed is more than a year ahead")
            except ValueError as e:
                rep.move(rejected, HOSTS, no, line, str(e))
                continue
            out[host] = state
    return out


def _repair_outcome_file(path: Path, rep: Repair, rejected: list[str], done: SeenSet) -> None:
    """Collect the URLs of crawled/failed; lines that are not records are reported and moved to
    rejected.txt. A record is the crawler's line (crawled: 7 or 11 fields; failed: 4 or 7) or a
    shorter one a person wrote (a bare URL in crawled.txt; URL and reason in failed.txt). A
    hand-written line of a URL that is on another line of the file is moved too: it would count
    the page twice."""
    if not path.exists():
        atomic_write(path, HEADERS[path.name])
        return
    crawled = path.name != FAILED
    shapes, full = ((1, 7, 11), 7) if crawled else ((2, 3, 4, 7), 4)
    keep: list[str | tuple[int, str, str]] = []   # lines, and hand-written ones to check at the end
    here = SeenSet()
    bad = False
    with open(path, "rb") as fb:
        bad = fb.read(3) == b"\xef\xbb\xbf"   # a BOM from a hand edit: rewrite without it
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        for no, raw in enumerate(f, 1):
            if not is_data(raw):
                keep.append(raw if raw.endswith("\n") else raw + "\n")
                continue
            line = raw.rstrip("\r\n")
            url = first_field(line)
            torn = not raw.endswith("\n")   # the crawler writes whole lines: a cut one is a torn write
            n = line.count("\t") + 1
            ok = not torn and url.startswith(("http://", "https://")) and n in shapes
            if ok and n < full:   # not one of our own lines: check the URL
                try:
                    ok = normalize(url) == url
                except ValueError:
                    ok = False
            if not ok:
                rep.move(rejected, path.name, no, line, "torn last line" if torn else "not a URL record")
                bad = True
                continue
            if not raw.endswith("\n") or raw.endswith("\r\n"):
                bad = True   # a hand edit without a final newline or with CRLF: fix the ending
            if n < full:
                keep.append((no, line, url))
            else:
                keep.append(line + "\n")
                here.add(url)
                done.add(url)
    for i, item in enumerate(keep):
        if isinstance(item, tuple):
            no, line, url = item
            if not here.add(url):
                rep.move(rejected, path.name, no, line, "URL already on another line")
                keep[i], bad = "", True
                continue
            keep[i] = line + "\n"
            done.add(url)
    if bad:
        atomic_write(path, "".join(keep))  # type: ignore[arg-type]
