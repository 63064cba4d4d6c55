"""Network namespaces for tests that run "machines" on networks of their own (needs root).

One ``Net`` is a set of namespaces made for one test, named ``sp<pid>n<k><role>``: a hub holding a
bridge, and a member namespace per role (redis, site, machine a, ...) joined to the bridge by a veth
pair whose outer end is created in the hub (the root namespace's links and routes are never
touched: no default route, no NAT). Addresses are from the RFC 2544 benchmarking range
198.18.0.0/15 only, on those veths, all on the bridge's /24: the hub's bridge is 198.18.0.1, the
members the next free ones (more than one for a member with ``extra``: the site's hosts). Nothing
outside the namespaces can be reached from them, and nothing outside can reach them::

    net = Net()
    redis_ns = net.add("r")             # 198.18.0.2
    site_ns = net.add("s", extra=2)     # 198.18.0.3, .4 and .5 (net.addrs[site_ns])
    net.enter(net.hub)               # this thread's new sockets are in the hub (198.18.0.1)
    with net.entered(site_ns):       # a listening socket of the test's own in the site namespace
        server = make_server(net.addrs[site_ns][1], 0)
    subprocess.Popen([*net.exec(redis_ns), "redis-server", ...])   # ``ip netns exec`` keeps the pid
    net.close()                      # back to the thread's namespace; processes left are killed

A namespace is per thread for the sockets it creates (setns(2) with CLONE_NEWNET), and a socket
keeps the namespace it was created in: the test's Redis client and a site served by the test's own
threads work from the hub and the site's namespace while pytest goes on in the root namespace once
``close`` has run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from typing import Iterator

CLONE_NEWNET = 0x40000000
NET = "198.18.0"          # the bridge's /24: hub .1, members .2 ...
PREFIX = 24
_made = 0                 # namespaces sets made by this process, for unique names


class NetnsError(RuntimeError):
    """An ``ip`` command failed: the message says which and why."""


def ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetnsError(f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def why_not() -> str | None:
    """Why network namespaces cannot be had here (not root, ``ip netns`` fails), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    name = f"sp{os.getpid()}probe"
    try:
        ip("netns", "add", name)
        ip("netns", "del", name)
    except (NetnsError, OSError, subprocess.SubprocessError) as e:
        return f"ip netns does not work here: {e}"
    return None


class Net:
    """The namespaces of one test: a hub with a bridge, members on it (see the module's text)."""

    def __init__(self) -> None:
        global _made
        _made += 1
        self.base = f"sp{os.getpid()}n{_made}"
        self.hub = self.base + "h"
        self.names: list[str] = []          # every namespace made, the hub first
        self.addr: dict[str, str] = {}      # namespace -> its first address
        self.addrs: dict[str, list[str]] = {}   # namespace -> its addresses
        self._next = 2                      # the next free address of the bridge's /24
        self._home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)   # where close() goes back
        try:
            self._make(self.hub)
            ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            ip("-n", self.hub, "addr", "add", f"{NET}.1/{PREFIX}", "dev", "br0")
            ip("-n", self.hub, "link", "set", "br0", "up")
            self.addr[self.hub] = f"{NET}.1"
        except BaseException:
            self.close()
            raise

    def _make(self, name: str) -> None:
        ip("netns", "add", name)
        self.names.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def add(self, role: str, extra: int = 0) -> str:
        """A new namespace on the bridge with 1 + ``extra`` addresses, the next free ones of
        198.18.0.0/24 (``addrs[name]``; ``addr[name]`` is the first): all on the one segment, so
        no route is needed anywhere."""
        name = self.base + role
        if self._next + extra > 254:
            raise NetnsError("no more addresses on the bridge")
        self._make(name)
        outer = f"v{role}"
        ip("-n", self.hub, "link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", name)
        ip("-n", self.hub, "link", "set", outer, "master", "br0", "up")
        self.addrs[name] = [f"{NET}.{self._next + i}" for i in range(1 + extra)]
        self._next += 1 + extra
        for a in self.addrs[name]:
            ip("-n", name, "addr", "add", f"{a}/{PREFIX}", "dev", "eth0")
        ip("-n", name, "link", "set", "eth0", "up")
        self.addr[name] = self.addrs[name][0]
        return name

    def exec(self, name: str) -> list[str]:
        """The command prefix that runs a program in namespace ``name`` (same pid: ip execs it)."""
        return ["ip", "netns", "exec", name]

    def enter(self, name: str) -> None:
        """This thread's new sockets are in namespace ``name`` from now (until ``close``)."""
        _setns(f"/run/netns/{name}")

    @contextlib.contextmanager
    def entered(self, name: str) -> Iterator[None]:
        """Sockets made inside the block are in ``name``; the thread's namespace is kept after."""
        keep = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            self.enter(name)
            yield
        finally:
            try:
                _setns(f"/proc/self/fd/{keep}")
            finally:
                os.close(keep)

    def pids(self, name: str) -> list[int]:
        try:
            return [int(p) for p in ip("netns", "pids", name).split()]
        except (NetnsError, ValueError):
            return []

    def close(self) -> None:
        """Back to the thread's first namespace; every process still in one of these is killed
        (the test started them all); the namespaces are deleted, and their veths with them."""
        if self._home >= 0:
            try:
                _setns(f"/proc/self/fd/{self._home}")
            finally:
                os.close(self._home)
                self._home = -1
        for name in reversed(self.names):
            for pid in self.pids(name):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(NetnsError):
                ip("netns", "del", name)
        self.names = []
