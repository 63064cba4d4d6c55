"""Tests for spider.warc and the WARC hook of spider.fetch: fetch from a loopback `TestSite` through
a `Fetcher` with a `WarcWriter`, then read the files back with warcio (digests checked).

What the crawler sees must not change with WARC on; what the WARC holds is the exchange as it went
over the wire (Content-Encoding kept), marked WARC-Truncated where reading stopped early.
"""

from __future__ import annotations

import gzip
import os
import re
import signal
import socket
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import pytest

warcio = pytest.importorskip("warcio")   # in the `test` extra
from warcio.archiveiterator import ArchiveIterator  # noqa: E402

from sitekit import TestSite  # noqa: E402
from spider.config import CrawlConfig  # noqa: E402
from spider.fetch import Fetcher, Response  # noqa: E402
from spider.policy import FetchFailure  # noqa: E402
from spider.warc import Exchange, WarcWriter, exchange_records, finish_stale, whole_length  # noqa: E402

MAIN = Path(__file__).resolve().parent.parent / "main.py"
NAME = re.compile(r"^spider-\d{14}-(\d+)-(\d{5})\.warc\.gz$")
PAGE = b"<!DOCTYPE html><html><head><title>t</title></head><body>" + b"spider silk " * 200 + b"</body></html>"


def config(**kw) -> CrawlConfig:
    values = dict(connect_timeout=1.0, read_timeout=1.0, max_time=2.0, max_bytes=64 * 1024)
    values.update(kw)
    return CrawlConfig(**values)


@dataclass
class Rec:
    """A record read back by warcio, with its payload both as stored and content-decoded."""

    type: str
    headers: dict[str, str]
    http: Optional[object]
    raw: bytes       # payload as stored (content coding kept)
    content: bytes   # payload with the content coding undone by warcio

    def h(self, name: str) -> Optional[str]:
        return self.headers.get(name.lower())


def read_file(path: Path, check: bool = True, decode: bool = True) -> list[Rec]:
    """Every record of ``path``; with ``check``, a digest that does not match raises; with
    ``decode``, warcio also undoes the content coding."""
    out = []
    with open(path, "rb") as fh:
        for r in ArchiveIterator(fh, check_digests="raise" if check else False):
            headers = {k.lower(): v for k, v in r.rec_headers.headers}
            raw = r.raw_stream.read()
            out.append(Rec(r.rec_type, headers, r.http_headers, raw, b""))
    if decode:
        with open(path, "rb") as fh:   # a second pass for the decoded payloads
            for rec, r in zip(out, ArchiveIterator(fh)):
                rec.content = r.content_stream().read()
    return out


def files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.warc.gz"))


def read_all(folder: Path, decode: bool = True) -> list[Rec]:
    return [rec for path in files(folder) for rec in read_file(path, decode=decode)]


def responses(recs: list[Rec]) -> list[Rec]:
    return [r for r in recs if r.type == "response"]


class Rig:
    """A Fetcher writing WARC into ``folder``; ``records()`` closes it and reads everything back."""

    def __init__(self, folder: Path, max_size: int = 10**8, **kw) -> None:
        self.folder = folder
        self.writer = WarcWriter.for_worker(folder, os.getpid(), max_size=max_size)
        self.fetcher = Fetcher(config(**kw), warc=self.writer)

    def fetch(self, url: str, **kw) -> Response | FetchFailure:
        return self.fetcher.fetch(url, **kw)

    def records(self, decode: bool = True) -> list[Rec]:
        self.fetcher.close()
        return read_all(self.folder, decode)


@pytest.fixture
def warc_dir(tmp_path: Path) -> Path:
    return tmp_path / "projects" / "demo" / "warc"


@pytest.fixture
def rig(warc_dir: Path) -> Iterator[Rig]:
    r = Rig(warc_dir)
    yield r
    r.fetcher.close()


# --------------------------------------------------------------------------- what is recorded


def test_the_ip_address_of_a_server_that_closes_the_connection(site: TestSite, rig: Rig, warc_dir: Path) -> None:
    """An HTTP/1.0 server closes after each response: urllib3 gives the connection up at once,
    and the address comes from the socket the response is read from."""
    def http10(req, info) -> None:  # type: ignore[no-untyped-def]
        req.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + PAGE)
        req.close_connection = True
    site.route("/old.html", raw=http10)
    assert rig.fetch(site.url("/old.html")).body == PAGE  # type: ignore[union-attr]
    rig.fetcher.close()
    [path] = files(warc_dir)
    _info, req, resp = read_file(path)
    assert resp.h("WARC-IP-Address") == req.h("WARC-IP-Address") == "127.0.0.1"


def test_request_and_response_records_in_order(site: TestSite, rig: Rig, warc_dir: Path) -> None:
    site.route("/page.html", body=PAGE)
    assert rig.fetch(site.url("/page.html")).body == PAGE  # type: ignore[union-attr]
    rig.fetcher.close()
    [path] = files(warc_dir)
    assert NAME.match(path.name) and NAME.match(path.name).group(1) == str(os.getpid())  # type: ignore[union-attr]
    info, req, resp = read_file(path)
    assert [info.type, req.type, resp.type] == ["warcinfo", "request", "response"]
    assert info.h("WARC-Filename") == path.name and b"software: spider/" in info.raw
    assert b"isPartOf: demo" in info.raw
    for rec in (req, resp):
        assert rec.h("WARC-Target-URI") == site.url("/page.html")
        assert rec.h("WARC-IP-Address") == "127.0.0.1"
        assert rec.h("WARC-Warcinfo-ID") == info.h("WARC-Record-ID")
        assert re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", rec.h("WARC-Record-ID") or "")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rec.h("WARC-Date") or "")
    assert req.h("WARC-Date") == resp.h("WARC-Date")
    assert req.h("WARC-Concurrent-To") == resp.h("WARC-Record-ID")
    assert resp.h("WARC-Concurrent-To") == req.h("WARC-Record-ID")
    assert req.h("Content-Type") == "application/http;msgtype=request"
    assert resp.h("Content-Type") == "application/http;msgtype=response"
    assert resp.h("WARC-Payload-Digest").startswith("sha1:") and resp.h("WARC-Block-Digest").startswith("sha1:")  # type: ignore[union-attr]
    assert resp.h("WARC-Truncated") is None
    assert resp.raw == PAGE and resp.content == PAGE
    assert resp.http.get_statuscode() == "200"  # type: ignore[union-attr]


def test_request_record_holds_the_headers_as_sent(site: TestSite, rig: Rig) -> None:
    site.route("/p", body=PAGE, headers={"ETag": '"v1"'})
    rig.fetch(site.url("/p?x=1"), headers={"If-None-Match": '"v0"'})
    [req] = [r for r in rig.records() if r.type == "request"]
    http = req.http
    assert http.protocol == "GET" and http.statusline == "/p?x=1 HTTP/1.1"  # type: ignore[union-attr]
    [sent] = site.requests
    assert http.get_header("Host") == f"127.0.0.1:{site.port}"  # type: ignore[union-attr]
    for name in ("User-Agent", "Accept-Encoding", "Accept", "If-None-Match"):
        assert http.get_header(name) == sent.headers[name], name  # type: ignore[union-attr]
    assert http.get_header("If-None-Match") == '"v0"'  # type: ignore[union-attr]
    assert list(http.headers) == list(sent.headers.items())   # all of them, in the order sent  # type: ignore[union-attr]


def test_gzip_response_is_kept_as_received(site: TestSite, rig: Rig) -> None:
    packed = gzip.compress(PAGE)
    site.route("/gz", body=packed, headers={"Content-Encoding": "gzip"})
    r = rig.fetch(site.url("/gz"))
    assert isinstance(r, Response) and r.body == PAGE and r.size == len(PAGE)
    [resp] = responses(rig.records())
    assert resp.http.get_header("Content-Encoding") == "gzip"  # type: ignore[union-attr]
    assert resp.raw == packed            # the bytes of the wire
    assert resp.content == PAGE          # what warcio decodes them to


@pytest.mark.parametrize("encoding", ["zlib-deflate", "raw-deflate", "gzip-members", "gzip-gzip"])
def test_other_content_codings_decode_as_before_and_are_kept(site: TestSite, rig: Rig, encoding: str) -> None:
    half = len(PAGE) // 2
    if encoding == "zlib-deflate":
        packed, header = zlib.compress(PAGE), "deflate"
    elif encoding == "raw-deflate":   # what some servers send for 'deflate'
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        packed, header = c.compress(PAGE) + c.flush(), "deflate"
    elif encoding == "gzip-members":
        packed, header = gzip.compress(PAGE[:half]) + gzip.compress(PAGE[half:]), "gzip"
    else:
        packed, header = gzip.compress(gzip.compress(PAGE)), "gzip, gzip"
    site.route("/enc", body=packed, headers={"Content-Encoding": header})
    r = rig.fetch(site.url("/enc"))
    assert isinstance(r, Response) and r.body == PAGE
    [resp] = responses(rig.records())
    assert resp.raw == packed


@pytest.mark.parametrize("encoding", ["zlib-deflate", "raw-deflate", "gzip-members", "gzip-gzip", "garbage-after"])
@pytest.mark.parametrize("step", [1, 3, 7, 1000])
def test_decoder_gives_the_same_bytes_however_the_input_is_cut(encoding: str, step: int) -> None:
    from spider.fetch import _Decoder   # the decoder that replaced urllib3's, so the raw bytes can be kept

    half = len(PAGE) // 2
    raw = zlib.compressobj(6, zlib.DEFLATED, -15)
    codings = {"zlib-deflate": (zlib.compress(PAGE), ["deflate"]),
               "raw-deflate": (raw.compress(PAGE) + raw.flush(), ["deflate"]),
               "gzip-members": (gzip.compress(PAGE[:half]) + gzip.compress(PAGE[half:]), ["gzip"]),
               "gzip-gzip": (gzip.compress(gzip.compress(PAGE)), ["gzip", "gzip"]),
               "garbage-after": (gzip.compress(PAGE) + b"\x00junk", ["gzip"])}
    packed, encodings = codings[encoding]
    d = _Decoder(encodings)
    out = []
    for i in range(0, len(packed), step):
        d.feed(packed[i:i + step])
        while True:
            piece = d.read(100)
            assert len(piece) <= 100
            if not piece:
                break
            out.append(piece)
    assert b"".join(out) == PAGE


def test_brotli_when_a_bounded_decoder_is_installed(site: TestSite, rig: Rig) -> None:
    brotli = pytest.importorskip("brotli")
    if not hasattr(brotli.Decompressor(), "can_accept_more_data"):
        pytest.skip("brotli < 1.2 cannot bound its output: br is not asked for")
    packed = brotli.compress(PAGE)
    site.route("/br", body=packed, headers={"Content-Encoding": "br"})
    r = rig.fetch(site.url("/br"))
    assert isinstance(r, Response) and r.body == PAGE
    assert "br" in site.requests[0].headers["Accept-Encoding"]
    # warcio 1.8 cannot decode br with brotli 1.2 (it wants Decompressor.unused_data): raw only
    assert responses(rig.records(decode=False))[0].raw == packed


def test_chunked_body_is_stored_dechunked_and_the_header_renamed(site: TestSite, rig: Rig) -> None:
    def raw(req, info) -> None:
        req.send_head(200, {"Transfer-Encoding": "chunked"})
        for i in range(0, len(PAGE), 1000):
            piece = PAGE[i:i + 1000]
            req.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        req.wfile.write(b"0\r\n\r\n")

    site.route("/chunked", raw=raw)
    assert rig.fetch(site.url("/chunked")).body == PAGE  # type: ignore[union-attr]
    [resp] = responses(rig.records())   # digests checked: the payload is the de-chunked entity body
    assert resp.raw == PAGE and resp.content == PAGE
    assert resp.http.get_header("Transfer-Encoding") is None  # type: ignore[union-attr]
    assert resp.http.get_header("X-Spider-Transfer-Encoding") == "chunked"  # type: ignore[union-attr]
    assert resp.h("WARC-Truncated") is None


def test_each_redirect_hop_is_recorded(site: TestSite, rig: Rig) -> None:
    site.route("/to", body=PAGE)
    site.add_redirect("/from", "/to", status=301)
    first = rig.fetch(site.url("/from"))
    assert isinstance(first, Response) and first.status == 301
    rig.fetch(site.url("/to"))
    resps = responses(rig.records())
    assert [r.h("WARC-Target-URI") for r in resps] == [site.url("/from"), site.url("/to")]
    assert resps[0].http.get_statuscode() == "301"  # type: ignore[union-attr]
    assert resps[0].http.get_header("Location") == "/to"  # type: ignore[union-attr]
    assert resps[1].raw == PAGE


def test_robots_txt_is_recorded(site: TestSite, rig: Rig) -> None:
    robots = b"User-agent: *\nDisallow: /private/\n"
    site.route("/robots.txt", body=robots, content_type="text/plain")
    r = rig.fetch(site.url("/robots.txt"), any_type=True, limit=500 * 1024)   # as the worker asks
    assert isinstance(r, Response) and r.body == robots
    [resp] = responses(rig.records())
    assert resp.h("WARC-Target-URI") == site.url("/robots.txt")
    assert resp.raw == robots and resp.h("WARC-Truncated") is None


def test_304_has_no_body_and_is_not_truncated(site: TestSite, rig: Rig) -> None:
    site.route("/same", status=304, body=b"", headers={"ETag": '"v1"'})
    r = rig.fetch(site.url("/same"), headers={"If-None-Match": '"v1"'})
    assert isinstance(r, Response) and r.status == 304
    [resp] = responses(rig.records())
    assert resp.http.get_statuscode() == "304" and resp.raw == b""  # type: ignore[union-attr]
    assert resp.h("WARC-Truncated") is None


# --------------------------------------------------------------------------- cut short


def test_body_over_the_cap_is_recorded_as_far_as_read(site: TestSite, warc_dir: Path) -> None:
    big = b"<html>" + b"a" * 300_000
    site.route("/big", body=big)
    rig = Rig(warc_dir, max_bytes=1000)
    f = rig.fetch(site.url("/big"))
    assert isinstance(f, FetchFailure) and f.kind == "too large"
    [resp] = responses(rig.records())
    assert resp.h("WARC-Truncated") == "length"
    assert 1000 < len(resp.raw) < len(big) and big.startswith(resp.raw)


def test_gzip_bomb_is_recorded_compressed_and_truncated(site: TestSite, warc_dir: Path) -> None:
    site.gzip_bomb("/bomb", decompressed_size=1 << 30)
    rig = Rig(warc_dir, max_bytes=1 << 20)
    f = rig.fetch(site.url("/bomb"))
    assert isinstance(f, FetchFailure) and f.kind == "too large"
    [resp] = responses(rig.records())
    assert resp.h("WARC-Truncated") == "length"
    assert resp.raw.startswith(b"\x1f\x8b") and len(resp.raw) < 1 << 20   # compressed bytes, a few KB


def test_robots_limit_cut_is_marked(site: TestSite, rig: Rig) -> None:
    site.route("/robots.txt", body=b"#" * 1_000_000, content_type="text/plain")
    site.route("/small.txt", body=b"#" * 5000, content_type="text/plain")
    r = rig.fetch(site.url("/robots.txt"), any_type=True, limit=1000)
    assert isinstance(r, Response) and r.body == b"#" * 1000
    r = rig.fetch(site.url("/small.txt"), any_type=True, limit=1000)
    assert isinstance(r, Response) and r.body == b"#" * 1000
    big, small = responses(rig.records())
    assert big.h("WARC-Truncated") == "length" and 1000 <= len(big.raw) < 1_000_000
    # the crawler keeps 1000 bytes, but the whole response had arrived: the record is complete
    assert small.h("WARC-Truncated") is None and small.raw == b"#" * 5000


def test_a_body_the_crawler_does_not_read_is_archived_whole(site: TestSite, rig: Rig) -> None:
    """An image, a PDF, a 404 page and a redirect's body: the crawler reads none of them (same
    answer as without --warc), the archive has every byte (no WARC-Truncated)."""
    png = b"\x89PNG" + bytes(range(256)) * 200   # under the rig's 64 KiB --max-bytes
    site.route("/pic.png", body=png, content_type="image/png")
    site.route("/doc.pdf", body=b"%PDF-1.4 " + b"x" * 40_000, content_type="application/pdf")
    site.status("/gone", 404)
    site.route("/moved", status=301, body=b"<p>moved</p>", headers={"Location": "/pic.png"})
    site.route("/odd", body=b"not really zstd", headers={"Content-Encoding": "zstd"})
    r = rig.fetch(site.url("/pic.png"))
    assert isinstance(r, Response) and r.body == b"" and r.size == len(png)
    for path in ("/doc.pdf", "/gone", "/moved", "/odd"):
        rig.fetch(site.url(path))
    got = {r.h("WARC-Target-URI"): r for r in responses(rig.records())}   # digests checked by warcio
    assert got[site.url("/pic.png")].raw == png
    assert got[site.url("/doc.pdf")].raw == b"%PDF-1.4 " + b"x" * 40_000
    assert got[site.url("/gone")].http.get_statuscode() == "404"  # type: ignore[union-attr]
    assert b"<title>Status 404</title>" in got[site.url("/gone")].raw
    assert got[site.url("/moved")].raw == b"<p>moved</p>"
    assert got[site.url("/odd")].raw == b"not really zstd"
    assert all(rec.h("WARC-Truncated") is None for rec in got.values())


def test_a_body_not_read_is_archived_up_to_max_bytes(site: TestSite, warc_dir: Path) -> None:
    """Over --max-bytes, an image is still crawled as before, its record cut at exactly that size."""
    site.route("/big.png", body=bytes(range(256)) * 1000, content_type="image/png")
    rig = Rig(warc_dir, max_bytes=100_000)
    r = rig.fetch(site.url("/big.png"))
    assert isinstance(r, Response) and r.status == 200 and r.size == 256_000
    [resp] = responses(rig.records())
    assert resp.h("WARC-Truncated") == "length" and resp.raw == (bytes(range(256)) * 1000)[:100_000]


def test_a_body_not_read_is_archived_within_max_time(site: TestSite, warc_dir: Path) -> None:
    site.trickle("/drip.bin", total_bytes=5000, bytes_per_second=1000, content_type="application/octet-stream")
    rig = Rig(warc_dir, max_time=0.5)
    rig.fetch(site.url("/drip.bin"))
    [resp] = responses(rig.records())
    assert resp.h("WARC-Truncated") == "time" and 0 < len(resp.raw) < 5000


def test_trickle_is_marked_time(site: TestSite, warc_dir: Path) -> None:
    site.trickle("/drip", total_bytes=5000, bytes_per_second=100)
    rig = Rig(warc_dir, max_time=0.5)
    f = rig.fetch(site.url("/drip"))
    assert isinstance(f, FetchFailure) and f.kind == "too slow"
    [resp] = responses(rig.records())
    assert resp.h("WARC-Truncated") == "time" and 0 < len(resp.raw) < 5000


def test_reset_mid_body_is_marked_disconnect(site: TestSite, rig: Rig) -> None:
    site.reset_mid_body("/cut", total_bytes=20_000, sent_bytes=5000)
    f = rig.fetch(site.url("/cut"))
    assert isinstance(f, FetchFailure) and f.transient
    [resp] = responses(rig.records())
    assert resp.h("WARC-Truncated") == "disconnect" and len(resp.raw) <= 5000


def test_broken_gzip_is_recorded_as_received(site: TestSite, rig: Rig) -> None:
    site.route("/badgz", body=b"this is not gzip data", headers={"Content-Encoding": "gzip"})
    f = rig.fetch(site.url("/badgz"))
    assert isinstance(f, FetchFailure) and f.kind == "bad content encoding"
    [resp] = responses(rig.records())
    assert resp.raw == b"this is not gzip data"


def test_no_response_writes_nothing(site: TestSite, rig: Rig, warc_dir: Path) -> None:
    site.slow("/slow", seconds=3)
    f = rig.fetch(site.url("/slow"))
    assert isinstance(f, FetchFailure) and f.kind in ("timeout", "too slow")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    assert rig.fetch(f"http://127.0.0.1:{port}/").kind == "connection refused"  # type: ignore[union-attr]
    rig.fetcher.close()
    assert not warc_dir.exists() or list(warc_dir.iterdir()) == []   # not even a warcinfo


# --------------------------------------------------------------------------- the crawler's view


@pytest.mark.parametrize("path", ["/page", "/gz", "/untyped", "/big", "/pic"])
def test_the_crawler_sees_the_same_with_and_without_warc(site: TestSite, warc_dir: Path, path: str) -> None:
    site.route("/page", body=PAGE)
    site.route("/gz", body=gzip.compress(PAGE), headers={"Content-Encoding": "gzip"})
    site.route("/untyped", body=PAGE, content_type=None)
    site.route("/big", body=PAGE * 100)
    site.route("/pic", body=bytes(5000), content_type="image/png")
    plain = Fetcher(config())
    rig = Rig(warc_dir)
    try:
        a, b = plain.fetch(site.url(path)), rig.fetch(site.url(path))
    finally:
        plain.close()
    if isinstance(a, Response):
        assert isinstance(b, Response)
        assert (a.status, a.content_type, a.body, a.size) == (b.status, b.content_type, b.body, b.size)
    else:
        assert isinstance(b, FetchFailure) and (a.kind, a.transient) == (b.kind, b.transient)


# --------------------------------------------------------------------------- files


def test_rotation_by_size_keeps_every_file_readable(site: TestSite, warc_dir: Path) -> None:
    pages = [b"<html>" + os.urandom(1000).hex().encode() for _ in range(12)]   # ~1 KB each compressed
    for i, page in enumerate(pages):
        site.route(f"/p{i}", body=page)
    rig = Rig(warc_dir, max_size=4000)
    for i in range(12):
        rig.fetch(site.url(f"/p{i}"))
    rig.fetcher.close()
    paths = files(warc_dir)
    assert len(paths) >= 3 and not list(warc_dir.glob("*.open"))
    assert [NAME.match(p.name).group(2) for p in paths] == [f"{i:05d}" for i in range(len(paths))]  # type: ignore[union-attr]
    seen = []
    for path in paths:
        recs = read_file(path)
        assert recs[0].type == "warcinfo" and recs[0].h("WARC-Filename") == path.name
        pairs = recs[1:]
        assert pairs and [r.type for r in pairs] == ["request", "response"] * (len(pairs) // 2)   # never split
        seen += [(r.h("WARC-Target-URI"), r.raw) for r in pairs if r.type == "response"]
        assert path.stat().st_size < 4000 + 4000   # passes max_size by one exchange at most
    assert seen == [(site.url(f"/p{i}"), page) for i, page in enumerate(pages)]


def test_file_is_open_until_closed(site: TestSite, rig: Rig, warc_dir: Path) -> None:
    site.route("/", body=PAGE)
    rig.fetch(site.url("/"))
    [open_file] = list(warc_dir.iterdir())
    assert open_file.name.endswith(".warc.gz.open")
    assert len(read_file(open_file)) == 3   # readable while written
    rig.fetcher.close()
    assert [p.name for p in warc_dir.iterdir()] == [open_file.name[: -len(".open")]]


def _exchange(i: int, body: bytes = b"hello") -> Exchange:
    return Exchange(f"http://127.0.0.1/{i}", request=b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                    response=b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body), body=[body],
                    complete=True)


def _left_open(folder: Path, pid: int, n: int) -> Path:
    """A ``.open`` file of ``n`` exchanges named for process ``pid``, as a killed worker leaves it."""
    with WarcWriter(folder, pid) as w:
        for i in range(n):
            w.write(_exchange(i))
    [final] = w.files
    left = final.with_name(final.name + ".open")
    final.rename(left)
    return left


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_partial_last_record_is_cut_off_by_the_next_writer(tmp_path: Path) -> None:
    folder = tmp_path / "warc"
    path = _left_open(folder, _dead_pid(), 3)
    whole = path.stat().st_size
    more = exchange_records(_exchange(9, os.urandom(3000)))
    with open(path, "ab") as f:   # one more exchange cut short, as kill -9 mid-write leaves it
        f.write(more[: len(more) - 1000])
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    d.decompress(more)
    request_member = len(more) - len(d.unused_data)   # the request record got out whole
    assert whole_length(path) == whole + request_member
    types = [r.type for r in read_file(path, check=False)]
    assert types[:8] == ["warcinfo"] + ["request", "response"] * 3 + ["request"]
    WarcWriter.for_worker(folder, os.getpid())
    [final] = files(folder)
    assert final.name == path.name[: -len(".open")] and final.stat().st_size == whole + request_member
    assert [r.type for r in read_file(final)] == types[:8]
    assert not list(folder.glob("*.open"))


def test_a_stale_file_with_nothing_whole_is_removed(tmp_path: Path) -> None:
    folder = tmp_path / "warc"
    folder.mkdir()
    junk = folder / f"spider-20260101000000-{_dead_pid()}-00000.warc.gz.open"
    junk.write_bytes(gzip.compress(b"WARC/1.1\r\n" + os.urandom(100))[:50])
    assert finish_stale(folder) == [] and list(folder.iterdir()) == []


def test_open_files_of_live_processes_are_left_alone(tmp_path: Path) -> None:
    folder = tmp_path / "warc"
    live = _left_open(folder, os.getppid(), 1)      # a live process's pid
    with WarcWriter(folder) as w:                   # a file open in this process
        w.write(_exchange(0))
        mine = w.path
        assert finish_stale(folder) == []
        assert mine is not None and mine.exists() and live.exists()


WRITER_LOOP = """
import sys, time
from spider.warc import Exchange, WarcWriter
w = WarcWriter(sys.argv[1], max_size=10**9)
i = 0
while True:
    w.write(Exchange(f"http://127.0.0.1/{i}", request=b"GET / HTTP/1.1\\r\\n\\r\\n",
                     response=b"HTTP/1.1 200 OK\\r\\n\\r\\n", body=[bytes(range(256)) * 40], complete=True))
    i += 1
    if i == 20:
        print("ready", flush=True)
"""


def test_kill_9_mid_write_leaves_every_whole_record_readable(tmp_path: Path) -> None:
    folder = tmp_path / "warc"
    proc = subprocess.Popen([sys.executable, "-c", WRITER_LOOP, str(folder)], stdout=subprocess.PIPE,
                            cwd=Path(__file__).resolve().parent.parent)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    [left] = list(folder.iterdir())
    assert left.name.endswith(".open")
    before = read_file(left, check=False)
    assert len(before) >= 41
    WarcWriter.for_worker(folder, os.getpid())
    [final] = files(folder)
    recs = read_file(final)    # every digest checks out: no partial record is left
    assert recs[0].type == "warcinfo" and len(recs) >= 41
    assert [r.h("WARC-Record-ID") for r in recs] == [r.h("WARC-Record-ID") for r in before[: len(recs)]]
    assert all(r.type != "response" or r.raw == bytes(range(256)) * 40 for r in recs)


def test_a_failed_write_is_cut_back_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def half_then_fail(fd: int, data) -> int:
        calls.append(1)
        if len(calls) == 1:
            return real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    w = WarcWriter(tmp_path / "warc")
    w.write(_exchange(0))
    opened = w.path
    assert opened is not None
    size = opened.stat().st_size
    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(OSError):
        w.write(_exchange(1))
    monkeypatch.setattr(os, "write", real_write)
    assert opened.stat().st_size == size
    w.write(_exchange(2))
    w.close()
    recs = read_file(w.files[0])
    assert [r.h("WARC-Target-URI") for r in recs] == [None] + ["http://127.0.0.1/0"] * 2 + ["http://127.0.0.1/2"] * 2


# --------------------------------------------------------------------------- end to end


def crawl_with_warc(seed: str, tmp_path: Path, *options: str) -> Path:
    """Run `crawl w SEED --warc` (2 workers, no delay) in a subprocess; the project's warc folder."""
    projects = tmp_path / "projects"
    result = subprocess.run(
        [sys.executable, str(MAIN), "crawl", "w", seed, "--warc", "--workers", "2", "--delay", "0",
         "--projects-dir", str(projects), *options],
        cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return projects / "w" / "warc"


def test_crawl_with_warc_end_to_end(site: TestSite, tmp_path: Path) -> None:
    """`crawl --warc` writes projects/NAME/warc/*.warc.gz with robots.txt and every page.

    Passes once --warc is wired: CrawlConfig.warc -> Fetcher(warc=WarcWriter.for_worker(folder / "warc",
    os.getpid())) in each worker, and the fetcher closed when the worker ends.
    """
    site.route("/robots.txt", body="User-agent: *\nDisallow: /private/\n", content_type="text/plain")
    site.route("/", body='<html><body><a href="/a.html">a</a> <a href="/gz.html">gz</a></body></html>')
    site.route("/a.html", body=PAGE)
    packed = gzip.compress(PAGE)
    site.route("/gz.html", body=packed, headers={"Content-Encoding": "gzip"})
    folder = crawl_with_warc(site.url("/"), tmp_path)
    assert files(folder) and not list(folder.glob("*.open"))
    recs = read_all(folder)
    targets = {r.h("WARC-Target-URI") for r in responses(recs)}
    assert {site.url("/robots.txt"), site.url("/"), site.url("/a.html"), site.url("/gz.html")} <= targets
    [gz] = [r for r in responses(recs) if r.h("WARC-Target-URI") == site.url("/gz.html")]
    assert gz.raw == packed and gz.content == PAGE
    assert all(NAME.match(p.name) for p in files(folder))


def test_crawl_with_warc_archives_every_body(site: TestSite, tmp_path: Path) -> None:
    """`crawl --warc`: every response record has its whole body (digests checked by warcio), an
    image, a PDF and a 404 page included: none is WARC-Truncated, each holds its Content-Length."""
    png = b"\x89PNG" + bytes(range(256)) * 40
    site.route("/", body='<html><body><a href="/pic.png">p</a> <a href="/doc.pdf">d</a> '
                         '<a href="/missing">m</a> <a href="/a.html">a</a></body></html>')
    site.route("/a.html", body=PAGE)
    site.route("/pic.png", body=png, content_type="image/png")
    site.route("/doc.pdf", body=b"%PDF-1.4 " + bytes(5000), content_type="application/pdf")
    got = {r.h("WARC-Target-URI"): r for r in responses(read_all(crawl_with_warc(site.url("/"), tmp_path)))}
    assert {site.url(p) for p in ("/", "/a.html", "/pic.png", "/doc.pdf", "/missing", "/robots.txt")} <= set(got)
    for uri, rec in got.items():
        assert rec.h("WARC-Truncated") is None, uri
        assert len(rec.raw) == int(rec.http.get_header("Content-Length")), uri  # type: ignore[union-attr]
    assert got[site.url("/pic.png")].raw == png
    assert got[site.url("/missing")].http.get_statuscode() == "404"  # type: ignore[union-attr]
