"""fetch.log's pid column is the pid of the process that fetched, also in a forked worker (spider.py
keeps the pid rather than asking the system on every page)."""
import os
from types import SimpleNamespace

from spider.policy import FetchFailure
from spider.spider import Spider


def _logged_pid() -> str:
    lines: list[str] = []
    store = SimpleNamespace(log=lambda name, line: lines.append(line))
    Spider._log_fetch(SimpleNamespace(clock=lambda: 0.0, store=store), "http://a/",  # type: ignore[arg-type]
                      FetchFailure("timeout", True, "x"))
    return lines[0].split("\t")[1]


def test_fetch_log_names_the_process_that_fetched_also_after_a_fork() -> None:
    assert _logged_pid() == str(os.getpid())
    r, w = os.pipe()
    child = os.fork()
    if child == 0:   # a worker, as multiprocessing forks it
        try:
            os.write(w, _logged_pid().encode())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 100).decode()
    os.close(r)
    os.waitpid(child, 0)
    assert got == str(child)
    assert _logged_pid() == str(os.getpid())
