"""Three machines, each in its own network namespace, crawling one site through one Redis.

The same scenarios and checks as tests/test_cluster.py, but the machines do not share a loopback:
redis-server runs in a namespace of its own (bound to its 198.18.0.x address), the site (the test's
own ``TestSite`` threads, its listening sockets made in the site's namespace) in another, and each
``crawl --store redis://198.18.0.x:6379/0`` process tree in its own (``ip netns exec``), with its
own working directory; all reach each other over veth pairs on a bridge in a hub namespace, where
the test's own Redis client lives (tests/netns.py). Needs root; skipped with the reason otherwise.

After each scenario: every URL crawled or failed exactly once in the records, none lost, pages
fetched twice no more than were in flight where the trouble struck, and each host's requests, as
its server saw them, never closer than --delay, whichever machine sent them.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest

from netns import Net, ip, why_not
from redis_server import RedisServer, need_redis_server
from sitekit import TestSite
from test_cluster import machines  # noqa: F401  (a pytest fixture)
from test_cluster import Machine, assert_each_once, busy, in_flight_of, make_sites, pause_mid_fetch, wait_for

HOSTS = 4
LEASE = ("--lease", "2")
REDIS_PORT = 6379   # the namespace is the test's own: no other server there


@dataclass
class Lan:
    """The namespaces of one test and what runs in them."""

    net: Net
    root: Path
    site_ns: str
    redis: RedisServer
    machine_ns: dict[str, str] = field(default_factory=dict)   # "a" -> its namespace

    def make_site(self, make_site: Callable[..., TestSite]) -> Callable[[str], TestSite]:
        """``make_sites``'s factory: 127.0.0.N becomes the site namespace's N-th address, and the
        server's socket is made in that namespace."""
        def factory(host: str) -> TestSite:
            address = self.net.addrs[self.site_ns][int(host.rsplit(".", 1)[1]) - 1]
            with self.net.entered(self.site_ns):
                return make_site(address)
        return factory

    def machine(self, key: str, name: str, *args: str, workers: int = 2) -> Machine:
        """Machine ``key`` (a, b, c), in its namespace, with its own folder."""
        return Machine(self.root / key, name, self.redis.url, *args, *LEASE, workers=workers,
                       wrap=self.net.exec(self.machine_ns[key]))


@pytest.fixture
def lan(tmp_path: Path) -> Iterator[Lan]:
    """A hub, a namespace for redis-server (AOF, appendfsync always), one for the site and one
    for each of machines a, b and c; everything in them is killed and they are deleted after."""
    why = why_not()
    if why:
        if os.environ.get("CI") and os.geteuid() == 0:
            pytest.fail(f"{why}; CI runs as root and must run these")
        pytest.skip(why)
    need_redis_server()
    net = Net()
    server = None
    try:
        redis_ns = net.add("r")
        site_ns = net.add("s", extra=HOSTS)
        machine_ns = {k: net.add(k) for k in "abc"}
        net.enter(net.hub)   # the test's Redis client connects from the hub
        (tmp_path / "redis").mkdir()
        # protected-mode no: Redis refuses clients from other addresses than its loopback unless
        # told; only the test's namespaces can reach this one.
        options = {"appendonly": "yes", "appendfsync": "always", "protected-mode": "no"}
        server = RedisServer(tmp_path / "redis", options,
                             host=net.addr[redis_ns], port=REDIS_PORT, wrap=net.exec(redis_ns))
        server.start()
        yield Lan(net, tmp_path, site_ns, server, machine_ns)
    finally:
        if server is not None:
            server.kill()
        net.close()


def three(lan: Lan, name: str, sites: list[TestSite], machines: list[Machine]) -> tuple[Machine, Machine, Machine]:
    """a starts the crawl, b and c join it (b and c with one worker each)."""
    a = lan.machine("a", name, *(s.url("/") for s in sites))
    machines.append(a)
    r = lan.redis.client()
    wait_for(lambda: r.exists(f"{name}:settings"), message="the crawl to start")
    b = lan.machine("b", name, workers=1)
    c = lan.machine("c", name, workers=1)
    machines += [b, c]
    return a, b, c


def test_the_machines_reach_the_site_and_redis_over_the_namespaces_only(
        lan: Lan, make_site: Callable[..., TestSite]) -> None:
    """The layout: a machine's namespace reaches the site and Redis at their 198.18 addresses,
    and no namespace has a route anywhere else (no default route)."""
    site = lan.make_site(make_site)("127.0.0.2")
    site.route("/", body="hi")
    assert site.host.startswith("198.18.0.")
    probe = ("import sys, urllib.request, socket; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode());"
             "socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=5)")
    done = subprocess.run([*lan.net.exec(lan.machine_ns["c"]), sys.executable, "-c", probe, site.url("/"),
                           lan.redis.host, str(lan.redis.port)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.strip() == "hi", done.stderr
    assert site.hits["/"] == 1
    for ns in lan.net.names:
        routes = ip("-n", ns, "route", "show").splitlines()
        assert routes and all(line.startswith("198.18.0.0/24 ") for line in routes), (ns, routes)


def test_a_machine_killed_at_a_random_moment_loses_nothing(
        lan: Lan, make_site: Callable[..., TestSite], machines: list[Machine]) -> None:
    """b (its whole process group) is killed at a random moment once it has URLs in flight (the
    seed is printed); a and c finish the crawl once b's leases expire."""
    seed = random.randrange(1 << 30)
    print(f"random seed {seed}")
    rng = random.Random(seed)
    name = "nskill"
    sites, urls = make_sites(lan.make_site(make_site), hosts=HOSTS)
    a, b, c = three(lan, name, sites, machines)
    r = lan.redis.client()
    wait_for(lambda: busy(r, name, b, len(sites)), message="machine b to have URLs in flight")
    time.sleep(rng.uniform(0.0, 1.0))
    b.signal(signal.SIGKILL)   # the whole machine, parent and workers
    b.proc.wait()
    lost_with_b = in_flight_of(r, name, b.owner_prefix)
    assert a.finish() == 0, a.err
    assert c.finish() == 0, c.err
    assert not in_flight_of(r, name, b.owner_prefix)
    assert_each_once(r, name, sites, urls, lost_with_b)


def test_a_machine_paused_past_its_lease_records_nothing_twice(
        lan: Lan, make_site: Callable[..., TestSite], machines: list[Machine]) -> None:
    """b is stopped in the middle of a fetch (its request is at the server), past its lease; a
    and c take its hosts back; b, continued, records nothing over them."""
    name = "nspause"
    sites, urls = make_sites(lan.make_site(make_site), hosts=HOSTS)
    a, b, c = three(lan, name, sites, machines)
    held = pause_mid_fetch(lan.redis.client(), name, sites, b)
    for m in (a, b, c):
        assert m.finish() == 0, m.err
    assert_each_once(lan.redis.client(), name, sites, urls, held)


def test_redis_killed_and_restarted_loses_nothing(
        lan: Lan, make_site: Callable[..., TestSite], machines: list[Machine]) -> None:
    """kill -9 of redis-server (AOF, appendfsync always) while three machines crawl: each says
    so in one error line; Redis restarted, the three machines, started again, finish the crawl."""
    name = "nsredis"
    sites, urls = make_sites(lan.make_site(make_site), hosts=HOSTS)
    first = three(lan, name, sites, machines)
    r = lan.redis.client()
    wait_for(lambda: busy(r, name, first[0], len(sites)), message="machine a to have URLs in flight")
    lan.redis.kill()
    for m in first:
        assert m.finish(40) == 1, m.err
        errors = [line for line in m.err.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and "Redis" in errors[0], m.err
    lan.redis.restart()
    r = lan.redis.client()
    lost = in_flight_of(r, name, "")   # what was in flight when Redis died, as its AOF has it
    again = [lan.machine(k, name, workers=1 if k != "a" else 2) for k in "abc"]
    machines += again
    for m in again:
        assert m.finish() == 0, m.err
    assert_each_once(r, name, sites, urls, lost)
