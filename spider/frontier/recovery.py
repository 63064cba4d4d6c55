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
    """Remember how a clean stop left queue.txt, so the next start can skip the full check."""
    atomic_write(folder / SIGNATURE, "# queue.txt as the last clean stop left it (a cache; safe to delete)\n"
                 + _signature(folder, settings_key))


def is_clean(folder: Path, settings_key: str) -> bool:
    """True when the last run stopped cleanly and nobody touched queue.txt or the settings since."""
    try:
        sig = (folder / SIGNATURE).read_text(encoding="utf-8").split("\n", 1)[1]
        claims = (folder / CLAIMS).read_text(encoding="utf-8")
        return sig == _signature(folder, settings_key) and not any(map(is_data, claims.splitlines()))
    except (OSError, IndexError):
        return False


_UNDECODABLE = re.compile("[\udc80-\udcff]")   # what surrogateescape makes of bytes that are not UTF-8
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def _shown(text: str) -> str:
    """A hand-written line as rejected.txt shows it: bytes that are not UTF-8 and control
    characters as \\xNN escapes, so nothing of it is silently lost."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


_UNIX_TIME = re.compile(r"[0-9]{1,12}(\.[0-9]{1,6})?")
_COUNT = re.compile(r"[0-9]{1,9}")
_PLAIN_URL = re.compile(r"https?://[!-~]+")   # printable ASCII, no spaces: as normalize writes it


def _trusted(line: str) -> bool:
    """A full line the crawler wrote itself: its URL is already normalised."""
    return line.count("\t") >= 4 and line.startswith(("http://", "https://"))


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
                except (ValueError, IndexError):
                    continue
    write_hosts(folder, hosts)

    def lines() -> Iterator[tuple[int, str, str]]:
        """(line number, line, raw end) of the data lines of queue.txt."""
        if not qpath.exists():
            return
        # -sig: Notepad's BOM; surrogateescape: bytes that are not UTF-8 are reported, not guessed
        with open(qpath, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
            for no, raw in enumerate(f, 1):
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
                if _UNDECODABLE.search(line):
                    raise ValueError("bytes that are not UTF-8")
                if "\t" not in line:   # a bare URL, the way a person adds one
                    e = QueueEntry(line.strip())
                    url = normalize(e.url)
                else:
                    if not raw.endswith("\n"):   # only bare URLs are hand-written so
                        raise ValueError("torn last line")
                    e = parse_queue_line(line)
                    url = e.url if _trusted(line) else normalize(e.url)
                    if e.not_before > horizon:   # a typo (milliseconds?) would stall the crawl for ever
                        raise ValueError("not_before is more than a year ahead")
            except ValueError as err:
                rep.problems.append(f"{QUEUE}:{no}: not a crawlable URL ({err}): {line[:200]!r}")
                rejected.append(rejected_line(_shown(line), f"{QUEUE}:{no}: {err}"))
                continue
            keep(e if url == e.url else QueueEntry(url, e.depth, e.attempts, e.not_before, e.source))
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
