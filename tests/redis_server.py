"""A real ``redis-server`` for the tests: started on a free loopback port with its own temporary
directory, stopped after. Import the fixtures into the test modules that use them::

    from redis_server import redis_server, start_redis  # noqa: F401  (pytest fixtures)

Where ``redis-server`` is not installed the tests that use it are skipped with the reason, except
in CI (the ``CI`` variable is set), where a missing server fails them: ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

DEFAULTS = {"save": "''", "appendonly": "no"}   # nothing on disk unless a test asks for it


def need_redis_server() -> str:
    """The path of redis-server, or skip (fail in CI) with the reason."""
    path = shutil.which("redis-server")
    if path is None:
        why = "redis-server is not installed (apt-get install redis-server)"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI must have it (.ci/run installs it)")
        pytest.skip(why)
    try:
        import redis  # noqa: F401
    except ImportError:
        why = "the Python client is not installed (pip install -e '.[redis]')"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI must have it (the test extra includes it)")
        pytest.skip(why)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process. ``options`` are redis-server command-line options (without the
    leading ``--``), e.g. ``{"appendonly": "yes", "appendfsync": "always"}``. ``host``, ``port`` and
    ``wrap`` (a command prefix) place it elsewhere: ``ip netns exec NS`` and a namespace's address
    (tests/netns.py)."""

    def __init__(self, folder: Path, options: dict[str, str] | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, wrap: list[str] | None = None) -> None:
        self.folder = folder
        self.options = {**DEFAULTS, **(options or {})}
        self.host = host
        self.port = self.asked_port = port
        self.wrap = wrap or []
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self) -> "RedisServer":
        binary = need_redis_server()
        for _ in range(5):   # another process may take the free port between our look and the bind
            self.port = self.port or _free_port()
            args = [*self.wrap, binary, "--port", str(self.port), "--bind", self.host, "--dir", str(self.folder)]
            for name, value in self.options.items():
                args += [f"--{name}", "" if value == "''" else value]
            log = open(self.folder / "redis.log", "ab")
            self.proc = subprocess.Popen(args, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
            log.close()
            if self._wait_for_ping():
                return self
            self.proc.kill()
            self.proc.wait()
            self.port = self.asked_port   # 0: try another free one
        raise RuntimeError(f"redis-server did not start; see {self.folder / 'redis.log'}")

    def _wait_for_ping(self, timeout: float = 20.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc is not None and self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def client(self):  # type: ignore[no-untyped-def]
        import redis
        return redis.Redis.from_url(self.url)

    def kill(self) -> None:
        """kill -9: what a power cut or the OOM killer does."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart(self) -> "RedisServer":
        """Start again on the same port and directory (after ``kill`` or ``stop``)."""
        self.kill()
        return self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One server for the session (no persistence); tests use their own key prefix and flush."""
    with tempfile.TemporaryDirectory(prefix="spider-redis-") as d:
        server = RedisServer(Path(d))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def start_redis(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Factory for a server of a test's own (durability tests): ``start_redis(appendonly="yes")``."""
    servers: list[RedisServer] = []

    def start(**options: str) -> RedisServer:
        folder = tmp_path / f"redis{len(servers)}"
        folder.mkdir()
        server = RedisServer(folder, options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
