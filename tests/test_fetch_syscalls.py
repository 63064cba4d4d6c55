"""The direct path's system calls: its socket blocks with its timeouts set in the kernel
(SO_RCVTIMEO, SO_SNDTIMEO: no poll before each send and recv, as Python's timeout mode makes),
and --max-time's timer is set by each fetch and left running after it instead of being turned
off (one setitimer call a page, not two). The guarantees stay: a read that waits too long fails
as the same timeout, with the same text, as through urllib3; a server trickling bytes under the
read timeout is cut at --max-time; a ring between fetches interrupts nothing."""

from __future__ import annotations

import signal
import socket
import struct
import time

import pytest

from spider import fetch
from spider.config import CrawlConfig
from spider.fetch import Fetcher, Response
from spider.policy import FetchFailure
from test_fetch_direct import RawServer, _text
from test_fetch_lean import _stop

PAGE = b"<html><body>hi</body></html>"
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (len(PAGE), PAGE)


def _serve(server: RawServer, conn: socket.socket, n: int) -> None:
    """/ok: a page; /trickle: a head one byte every 50 ms, for ever; /stall: half a body, then
    nothing for 3 s."""
    while True:
        request = server.read_request(conn)
        if not request:
            return
        if request.startswith(b"GET /trickle"):
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while True:
                conn.sendall(b"X")
                time.sleep(0.05)
        if request.startswith(b"GET /stall"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 900\r\n\r\n<html>")
            time.sleep(3)
            return
        conn.sendall(OK)


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    s = RawServer(_serve)
    yield s
    _stop(s)


def _fetcher(direct: bool = True, **kw: float) -> Fetcher:
    f = Fetcher(CrawlConfig(**{"connect_timeout": 1.0, "read_timeout": 0.5, "max_time": 1.0, **kw}))
    f.direct_http = direct
    return f


def test_the_socket_blocks_with_its_timeouts_in_the_kernel(server: RawServer) -> None:
    f = _fetcher(read_timeout=0.75)
    try:
        assert isinstance(f.fetch(server.url("/ok")), Response)
        sock = f._direct[server.url("")].wire.sock  # type: ignore[union-attr]
        assert sock.gettimeout() is None and sock.getblocking()   # no poll before each call
        for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):   # the kernel keeps it in ticks
            seconds, usec = struct.unpack("@ll", sock.getsockopt(socket.SOL_SOCKET, option, 16))
            assert 0.75 <= seconds + usec / 1e6 < 0.77, (seconds, usec)
    finally:
        f.close()


@pytest.mark.parametrize("path", ["/stall", "/silent"])
def test_a_read_that_waits_too_long_fails_as_through_urllib3(path: str) -> None:
    """A body that stops coming, or no answer at all, fails as the same timeout (kind, text) as
    through urllib3's pool (Python's timeout mode), after the read timeout, not at --max-time."""
    def serve(server: RawServer, conn: socket.socket, n: int) -> None:
        server.read_request(conn)
        if path == "/stall":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 900\r\n\r\n<html>")
        time.sleep(3)

    server = RawServer(serve)
    failures = []
    try:
        for direct in (False, True):
            f = _fetcher(direct, max_time=2.5)
            try:
                began = time.monotonic()
                r = f.fetch(server.url(path))
                took = time.monotonic() - began
            finally:
                f.close()
            assert isinstance(r, FetchFailure) and r.kind == "timeout", r
            assert 0.4 < took < 1.5, took
            failures.append(_text(r))
    finally:
        _stop(server)
    assert failures[1] == failures[0]


def test_a_fetch_sets_the_timer_once_and_leaves_it_running(server: RawServer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    setitimer = signal.setitimer

    def counted(which: int, seconds: float, interval: float = 0.0) -> tuple[float, float]:
        calls.append(seconds)
        return setitimer(which, seconds, interval)

    monkeypatch.setattr(signal, "setitimer", counted)
    f = _fetcher(max_time=30.0)
    try:
        for _ in range(20):
            assert isinstance(f.fetch(server.url("/ok")), Response)
        assert calls == [30.0] * 20
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30.0
    finally:
        f.close()
    assert calls == [30.0] * 20 + [0] and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def _too_slow(f: Fetcher, url: str, max_time: float) -> None:
    began = time.monotonic()
    r = f.fetch(url)
    took = time.monotonic() - began
    assert isinstance(r, FetchFailure) and r.kind == "too slow", r
    assert max_time - 0.05 < took < max_time + 0.5, took


def test_a_trickling_server_is_cut_at_max_time_after_other_fetches(server: RawServer) -> None:
    """The timer each fetch leaves running does not cut the next one early nor let it run on."""
    f = _fetcher(max_time=1.0)
    try:
        assert isinstance(f.fetch(server.url("/ok")), Response)
        time.sleep(0.5)
        _too_slow(f, server.url("/trickle"), 1.0)
        _too_slow(f, server.url("/trickle"), 1.0)
        assert isinstance(f.fetch(server.url("/ok")), Response)
    finally:
        f.close()


def test_a_shorter_max_time_after_a_longer_one(server: RawServer) -> None:
    long, short = _fetcher(max_time=30.0), _fetcher(max_time=1.0)
    try:
        assert isinstance(long.fetch(server.url("/ok")), Response)
        _too_slow(short, server.url("/trickle"), 1.0)
        assert isinstance(long.fetch(server.url("/ok")), Response)
    finally:
        long.close()
        short.close()


def test_the_timer_of_the_fetch_before_ringing_as_the_next_starts_does_not_cut_it(server: RawServer) -> None:
    """A ring left from the fetch before, coming once the next fetch is armed but before it set
    the timer anew, is not that fetch's deadline: it goes on, and is still cut at its own."""
    f = _fetcher(max_time=1.0)
    arm = fetch._arm

    def ring_first(seconds: float) -> bool:
        fetch._deadline, fetch._armed = time.monotonic() + seconds, True
        fetch._on_alarm(signal.SIGALRM, None)   # the old timer's ring, just then
        return arm(seconds)

    try:
        fetch._arm = ring_first  # type: ignore[assignment]
        assert isinstance(f.fetch(server.url("/ok")), Response)
        _too_slow(f, server.url("/trickle"), 1.0)
    finally:
        fetch._arm = arm  # type: ignore[assignment]
        f.close()


def test_a_timer_someone_else_stopped_is_set_again(server: RawServer) -> None:
    """Another user of SIGALRM (pytest-timeout's signal method, between two tests) puts its own
    handler and stops the timer this module left running: the next fetch still sets its own."""
    f = _fetcher(max_time=1.0)
    try:
        assert isinstance(f.fetch(server.url("/ok")), Response)
        old = signal.signal(signal.SIGALRM, signal.SIG_IGN)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        _too_slow(f, server.url("/trickle"), 1.0)
    finally:
        f.close()


def test_a_ring_between_fetches_interrupts_nothing(server: RawServer) -> None:
    f = _fetcher(max_time=0.3)
    try:
        assert isinstance(f.fetch(server.url("/ok")), Response)
        time.sleep(0.5)   # the timer rings meanwhile, and is ignored
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        assert isinstance(f.fetch(server.url("/ok")), Response)
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 0.3
    finally:
        f.close()


def test_a_fetch_in_another_thread_leaves_the_timer_and_the_main_threads_fetch_be(server: RawServer) -> None:
    """Only the main thread can take a signal: a fetch elsewhere neither sets the timer nor
    disarms the one of a fetch the main thread has running."""
    import threading

    f = _fetcher(max_time=1.0)
    got: list[object] = []
    try:
        before = signal.getitimer(signal.ITIMER_REAL)[0]   # pytest-timeout's, or none
        thread = threading.Thread(target=lambda: got.append(f.fetch(server.url("/ok"))))
        thread.start()
        thread.join()
        assert isinstance(got[0], Response)
        assert abs(signal.getitimer(signal.ITIMER_REAL)[0] - before) < 5   # not set to 1 s
        fetch._arm(1.0)   # as the main thread's fetch does, with one running meanwhile elsewhere
        other = Fetcher(CrawlConfig(connect_timeout=1.0, read_timeout=0.5, max_time=1.0))
        thread = threading.Thread(target=lambda: got.append(other.fetch(server.url("/ok"))))
        thread.start()
        thread.join()
        other.close()
        assert isinstance(got[1], Response) and fetch._armed
    finally:
        fetch._disarm()
        f.close()
