"""Shared fixtures: loopback test sites, the demo site, a projects folder, and no proxies."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from sitekit import TestSite

PROXY_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
)


# The fast subset for the edit-test loop is ``python -m pytest -m "not slow"`` (about a minute on
# 2 cores; the whole suite, what CI runs, about 10). A test is slow when it runs real crawls as
# subprocesses (``projects_dir``), several sites (``make_site``) or a real redis-server: marked here
# by the fixtures it asks for, so a new test lands on the right side without anyone remembering.
SLOW_FIXTURES = frozenset({"projects_dir", "make_site", "redis_server", "start_redis"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests talk to 127.0.0.0/8 only; a proxy from the environment must never get involved."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "*")


@pytest.fixture
def site() -> Iterator[TestSite]:
    """A started `TestSite` on 127.0.0.1 with no routes (unknown paths answer 404)."""
    with TestSite() as test_site:
        yield test_site


@pytest.fixture
def make_site() -> Iterator[Callable[..., TestSite]]:
    """Factory for extra started sites, e.g. ``make_site("127.0.0.2")`` for multi-host tests."""
    sites: list[TestSite] = []

    def factory(host: str = "127.0.0.1", port: int = 0) -> TestSite:
        new = TestSite(host, port).start()
        sites.append(new)
        return new

    yield factory
    for started in sites:
        started.stop()


@pytest.fixture
def demo_url() -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT/``) of the bundled demo site, served for one test."""
    from spider.demo import serve

    server, url = serve()
    try:
        yield url
    finally:
        server.shutdown()


@pytest.fixture
def projects_dir(tmp_path: Path) -> Path:
    """An empty folder to hold crawl projects, instead of the repository's ``projects/``."""
    path = tmp_path / "projects"
    path.mkdir()
    return path


class FakeClock:
    """``clock()`` is the fake time; ``wait(s)`` advances it and never asks to stop. Passed to
    ``Spider(clock=..., wait=...)`` so tests of time-dependent policy need no patching."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += max(0.0, seconds)
        return False


def run_until_done(spider, limit: int = 5000) -> None:  # type: ignore[no-untyped-def]
    """``spider.run`` until it finishes on its own; the stop condition only trips on a runaway,
    and then the test fails. The in-memory store must end with nothing pending or in flight."""
    import itertools

    calls = itertools.count()
    spider.run(lambda: next(calls) > limit)
    assert next(calls) <= limit + 1, "the worker did not finish on its own"
    assert not spider.store.pending and not spider.store.inflight
