"""The console script's entry point: a Ctrl-C while the modules load exits with 130, quietly."""

import gc
import os
import sys


def main() -> None:
    # No cyclic garbage collection while the modules load (~10 ms of a start: ~60 collections
    # of objects that all stay); on again at once after.
    was = gc.isenabled()
    gc.disable()
    try:
        from .cli import CrawlExit, main as run
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    finally:
        if was:
            gc.enable()
    try:
        run()
    except CrawlExit as e:
        end_now(e.code)
        raise


def end_now(code: object) -> None:
    """Exit with ``code`` at once, without the interpreter's teardown: freeing every module's
    objects one by one was ~30 ms of CPU at the end of every crawl (a sixth of a one-page crawl's).
    What the teardown does that matters here is done first: the atexit functions run and standard
    output and error are flushed. Returns (the caller exits the usual way) when that cannot be
    the same: another thread still runs, the code is not a number, or a flush fails."""
    import atexit
    import threading

    if not (code is None or isinstance(code, int)) or threading.active_count() > 1:
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        os._exit(120)   # as the interpreter's own exit does when its last flush fails
    os._exit(code or 0)
