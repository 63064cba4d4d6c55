"""WARC 1.1 files of what the fetcher sent and received (``crawl --warc``).

Why: a broken parser can be re-run over a crawl without fetching it again, and archive tools
(warcio, pywb, jwarc, ...) can replay or index it.

Layout
- One writer per worker process, one file open at a time:
  ``warc/spider-<UTC yyyymmddHHMMSS>-<pid>-<serial>.warc.gz`` (Annex B: prefix, the 14-digit time the
  file was begun, a serial within the process; the pid keeps the workers of a crawl apart).
- Every record is its own gzip member (Annex A.2, record-at-time compression), so an index may point
  at any record and a reader can seek to it.
- A file starts with a ``warcinfo`` record (6.2). Each fetch that got a response adds a ``request``
  record (6.5.2) and a ``response`` record (6.3.2), appended together in one write; they share the
  WARC-Date of the moment the fetch began (5.4) and name each other in WARC-Concurrent-To (5.7).
- Rotation: once an exchange brings the file to ``max_size`` bytes (default 100 MB) the file is
  finished and the next fetch begins a new one; a request and its response never straddle two files,
  so a file may pass ``max_size`` by one exchange.

Crash safety
- The file being written is named ``*.warc.gz.open`` and renamed to ``*.warc.gz`` when it is rotated
  or closed (Heritrix does the same): a ``*.warc.gz`` file is always whole.
- An exchange is appended with whole gzip members; a write that fails half-way (disk full, Ctrl-C) is
  cut back off the file before the error goes on, so the records after it stay readable. Such an
  error reaches the crawler as an exception of the fetch (the worker records it and goes on).
- ``kill -9`` may leave a ``.open`` file whose last member is cut short; warcio still reads every
  whole record before it. The next writer started on that folder (``WarcWriter.for_worker``) finishes
  the ``.open`` files of processes that are gone: cut back to the last whole gzip member and renamed
  (``finish_stale``).

What is recorded
- request: request line and headers as sent (Host first, then the session's and the call's headers
  in order, as http.client writes them), rebuilt from the prepared request: requests does not expose
  the bytes it wrote.
- response: status line and header lines as received, then the body bytes as received, before any
  content decoding (Content-Encoding kept). urllib3 has already removed a chunked transfer coding by
  the time the bytes reach us, so the payload is the entity body as 6.3.2 defines it and that header
  line is kept as ``X-Spider-Transfer-Encoding: chunked`` (a reader would otherwise try to de-chunk
  bytes that are not chunked).
- Every body is archived whole, whatever its type or status (an image, a PDF, a 404 page, a redirect's
  body, a body in a content coding the crawler cannot undo), as wget --warc-file and Heritrix do: the
  fetcher reads to the end for the archive what the crawler itself does not need, up to --max-bytes
  bytes as received (the crawler's own answer is the same as without --warc).
- WARC-Truncated (5): ``length`` when --max-bytes stopped reading (the record then holds exactly that
  many bytes of a body the crawler did not need), ``time`` for --max-time or a read timeout,
  ``disconnect`` when the connection broke, ``unspecified`` for anything else that left the body
  unread (none is known).
- A fetch that got no response (refused, DNS, timeout before the headers, invalid status line)
  writes nothing: there is no capture to replay, and failed.txt says what happened.
- WARC-Block-Digest and WARC-Payload-Digest are SHA-1 in base32 (5.8, 5.9).
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Union
from urllib.parse import urlsplit

from . import __version__, safefs

MAX_SIZE = 100 * 1000 * 1000          # bytes; Annex B recommends 1 GB, smaller files are easier to move
PREFIX = "spider"
OPEN_SUFFIX = ".open"
SPEC_URL = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
_NAME = re.compile(r"^[\w.-]+-\d{14}-(\d+)-\d+\.warc\.gz\.open$")
_OPEN_HERE: set[str] = set()          # files this process is writing: never "stale"

HeaderValue = Union[str, bytes]


@dataclass
class Exchange:
    """One fetch as seen on the wire, filled in by the fetcher while it runs."""

    url: str
    started: float = field(default_factory=time.time)  # WARC-Date: the instant capture began (5.4)
    request: bytes = b""            # request line and headers as sent
    response: bytes = b""           # status line and headers as received; b"" when none came
    body: list[bytes] = field(default_factory=list)   # body bytes as received (content coding kept)
    declared: int | None = None     # the response's Content-Length
    complete: bool = False          # the body was read to its end (or has none)
    truncated: str | None = None    # WARC-Truncated reason
    ip: str | None = None           # the peer's address (WARC-IP-Address, 5.10)

    @property
    def received(self) -> int:
        return sum(len(b) for b in self.body)

    def cut(self, reason: str) -> None:
        """Note why reading stopped, unless the body was whole anyway. The first reason stays."""
        if self.truncated or self.complete or not self.response:
            return
        if self.declared is not None and self.received >= self.declared:
            return
        self.truncated = reason


# ---------------------------------------------------------------------------- HTTP message heads


def request_head(method: str, url: str, headers: Iterable[tuple[str, HeaderValue]]) -> bytes:
    """The request line and header block as http.client writes them: Host first, then ``headers``."""
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    lines = [f"{method} {target} HTTP/1.1".encode("latin-1", "replace"), b"Host: " + _host(url)]
    lines += [_header_line(k, v) for k, v in headers if k.lower() != "host"]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def response_head(version: int, status: int, reason: str, headers: Iterable[tuple[str, HeaderValue]]) -> bytes:
    """The status line and header lines as received (http.client decoded them as latin-1)."""
    lines = [f"HTTP/{version // 10}.{version % 10} {status} {reason}".rstrip().encode("latin-1", "replace")]
    for name, value in headers:
        if name.lower() == "transfer-encoding" and _text(value).strip().lower() == "chunked":
            name = "X-Spider-Transfer-Encoding"   # the body below is no longer chunked
        lines.append(_header_line(name, value))
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _host(url: str) -> bytes:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(parts.scheme)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and port != default:
        host += f":{port}"
    return host.encode("idna" if not host.isascii() else "ascii", "replace")


def _text(value: HeaderValue) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _header_line(name: str, value: HeaderValue) -> bytes:
    raw = value if isinstance(value, bytes) else value.encode("latin-1", "replace")
    return name.encode("latin-1", "replace") + b": " + raw


# ---------------------------------------------------------------------------- records


def record_id() -> str:
    """A uuid URN (5.2: any registered URI scheme; urn:uuid is what every tool writes)."""
    return f"<urn:uuid:{uuid.uuid4()}>"


def warc_date(t: float) -> str:
    """YYYY-MM-DDThh:mm:ssZ (5.4); whole seconds, which every reader accepts."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def digest(data: bytes | Iterable[bytes]) -> str:
    """``sha1:`` + base32, the labelled digest of 5.8 and 5.9."""
    import hashlib   # (here: OpenSSL's sha1, faster on a body, loaded only with --warc)

    h = hashlib.sha1()
    for piece in ([data] if isinstance(data, bytes) else data):
        h.update(piece)
    return "sha1:" + base64.b32encode(h.digest()).decode("ascii")


def clean_uri(url: str) -> str:
    """A target URI with no whitespace or control characters in it (5.14: 'no internal whitespace')."""
    return "".join(c if ord(c) > 0x20 and ord(c) != 0x7F else "%%%02X" % ord(c) for c in url)


def record(fields: list[tuple[str, str]], block: bytes | list[bytes]) -> bytes:
    """One record as a gzip member of its own (4: header, CRLF, block, CRLF CRLF; Annex A.2)."""
    pieces = block if isinstance(block, list) else [block]
    length = sum(len(p) for p in pieces)
    head = "WARC/1.1\r\n" + "".join(f"{k}: {_one_line(v)}\r\n" for k, v in fields)
    head += f"Content-Length: {length}\r\n\r\n"
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [z.compress(head.encode("utf-8"))]
    out += [z.compress(p) for p in pieces]
    out += [z.compress(b"\r\n\r\n"), z.flush()]
    return b"".join(out)


def _one_line(value: str) -> str:
    return re.sub(r"[\r\n]+", " ", value)


def exchange_records(ex: Exchange, warcinfo_id: str | None = None) -> bytes:
    """The request and response records of one fetch, linked to each other (5.7)."""
    req_id, resp_id = record_id(), record_id()
    date, uri = warc_date(ex.started), clean_uri(ex.url)
    common = [("WARC-Date", date), ("WARC-Target-URI", uri)]
    if warcinfo_id:
        common.append(("WARC-Warcinfo-ID", warcinfo_id))
    if ex.ip:
        common.append(("WARC-IP-Address", ex.ip))
    request = record([("WARC-Type", "request"), ("WARC-Record-ID", req_id), *common,
                      ("WARC-Concurrent-To", resp_id),
                      ("Content-Type", "application/http;msgtype=request"),
                      ("WARC-Block-Digest", digest(ex.request))], ex.request)
    block = [ex.response, *ex.body]
    fields = [("WARC-Type", "response"), ("WARC-Record-ID", resp_id), *common,
              ("WARC-Concurrent-To", req_id),
              ("Content-Type", "application/http;msgtype=response"),
              ("WARC-Block-Digest", digest(block)), ("WARC-Payload-Digest", digest(ex.body))]
    if ex.truncated:
        fields.append(("WARC-Truncated", ex.truncated))
    return request + record(fields, block)


def warcinfo_record(filename: str, info: Mapping[str, str]) -> tuple[str, bytes]:
    """The record that opens a file (6.2): what wrote it, as application/warc-fields."""
    rid = record_id()
    values = {"software": f"spider/{__version__}", "format": "WARC File Format 1.1",
              "conformsTo": SPEC_URL, **info}
    block = "".join(f"{k}: {_one_line(v)}\r\n" for k, v in values.items()).encode("utf-8")
    fields = [("WARC-Type", "warcinfo"), ("WARC-Record-ID", rid), ("WARC-Date", warc_date(time.time())),
              ("WARC-Filename", filename), ("Content-Type", "application/warc-fields")]
    return rid, record(fields, block)


# ---------------------------------------------------------------------------- the writer


class WarcWriter:
    """Appends exchanges to ``folder``: one open file at a time, rotated at ``max_size`` bytes.

    Use one writer per process, made in that process (``for_worker``). Files are opened lazily, so a
    worker that fetches nothing leaves no file.
    """

    def __init__(self, folder: Path, pid: int | None = None, *, max_size: int = MAX_SIZE,
                 prefix: str = PREFIX, info: Mapping[str, str] | None = None) -> None:
        self.folder = Path(folder)
        self.pid = os.getpid() if pid is None else pid
        self.max_size = max_size
        self.prefix = prefix
        self.info: dict[str, str] = dict(info or {})
        self.files: list[Path] = []     # finished files, in order
        self.path: Path | None = None   # the ``.open`` file being written
        self._fd: int | None = None
        self._size = 0
        self._serial = 0
        self._warcinfo_id: str | None = None

    @classmethod
    def for_worker(cls, folder: Path, pid: int, max_size: int = MAX_SIZE) -> "WarcWriter":
        """The writer of one crawl worker (``folder`` is ``projects/NAME/warc``). Finishes first the
        ``.open`` files that processes gone since left there."""
        folder = Path(folder)
        finish_stale(folder)
        return cls(folder, pid, max_size=max_size, info={"isPartOf": folder.resolve().parent.name})

    def add_info(self, fields: Mapping[str, str]) -> None:
        """Fields for the warcinfo records of the files begun from now on."""
        self.info.update(fields)

    def write(self, ex: Exchange) -> None:
        """Append the request and response records of ``ex``; nothing if no response came."""
        if not ex.response:
            return
        if self._fd is None:
            self._open()
        self._append(exchange_records(ex, self._warcinfo_id))
        if self._size >= self.max_size:
            self._finish()

    def close(self) -> None:
        """Finish the open file, if any (rename it to ``*.warc.gz``)."""
        if self._fd is not None:
            self._finish()

    def __enter__(self) -> "WarcWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- files ------------------------------------------------------------------------------------

    def _open(self) -> None:
        safefs.ensure_dir(self.folder)
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        while True:
            name = f"{self.prefix}-{stamp}-{self.pid}-{self._serial:05d}.warc.gz"
            self._serial += 1
            final = self.folder / name
            if final.exists():
                continue
            try:
                fd = safefs.open_fd(str(final) + OPEN_SUFFIX, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND)
            except FileExistsError:
                continue
            break
        self._fd, self.path, self._size = fd, Path(str(final) + OPEN_SUFFIX), 0
        _OPEN_HERE.add(str(self.path))
        rid, info = warcinfo_record(name, self.info)
        self._append(info)
        self._warcinfo_id = rid

    def _append(self, data: bytes) -> None:
        """Write whole members, or nothing: a failed write is cut back off the file."""
        assert self._fd is not None
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)

    def _finish(self) -> None:
        assert self._fd is not None and self.path is not None
        fd, path = self._fd, self.path
        self._fd, self.path, self._warcinfo_id = None, None, None
        _OPEN_HERE.discard(str(path))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        final = Path(str(path)[: -len(OPEN_SUFFIX)])
        os.replace(path, final)
        self.files.append(final)


# ---------------------------------------------------------------------------- recovery


def finish_stale(folder: Path) -> list[Path]:
    """Finish the ``.open`` files of processes that are gone: cut each back to its last whole gzip
    member and rename it (or remove it if nothing whole is left). Safe to run in several workers at
    once: the cut point of a file is the same for all, and losing a race to rename is ignored."""
    done: list[Path] = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return done
    for name in names:
        m = _NAME.match(name)
        path = Path(folder) / name
        if not m or str(path) in _OPEN_HERE or not _gone(int(m.group(1))):
            continue
        with contextlib.suppress(FileNotFoundError):
            end = whole_length(path)
            if end == 0:
                path.unlink()
                continue
            os.truncate(path, end)
            final = path.with_name(name[: -len(OPEN_SUFFIX)])
            os.replace(path, final)
            done.append(final)
    return done


def _gone(pid: int) -> bool:
    """True when no process ``pid`` runs; this process's own pid counts as gone, since a writer
    of this process would be in ``_OPEN_HERE``."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False   # it exists (another user's)
    return False


def whole_length(path: Path) -> int:
    """How many leading bytes of ``path`` are whole gzip members (where a cut-short one begins)."""
    end = start = 0
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    data = b""
    with open(path, "rb") as f:
        while True:
            if not data:
                data = f.read(1 << 16)
                if not data:
                    return end
            try:
                d.decompress(data, 1 << 16)   # output bounded and dropped: only the framing matters
            except zlib.error:
                return end
            rest = d.unused_data if d.eof else d.unconsumed_tail
            start += len(data) - len(rest)
            data = rest
            if d.eof:
                end = start
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
