"""Link resolution speed: spider.urls (ada + the crawler's rules) against the hand-written resolver.

Realistic links: every href of Python's HTML documentation (Debian's ``python3-doc``, 530 pages,
~270 links each), each resolved against its page's URL as the crawler resolves them
(``resolve(page_url, href)``, page after page in one process, so the caches are as warm as a
worker's). Compared:

- ``spider.urls`` of this work tree: ada (the WHATWG URL parser of Node.js) plus the crawler's
  normalisation on top, with its shortcut for plain relative paths;
- the hand-written RFC 3986 resolver that came before it (``spider/urls.py`` at ``--old-rev``,
  read with ``git show``);
- ``ada_url.join_url`` alone: the parser through the package's public API, no crawler rules.

Then the parsers alone, without the shortcuts and caches: the uncached ``_normalize`` of each
module on every link's absolute URL (with its fragment, so that none is already normal).

Prints the median over ``--repeat`` passes of the time per link, and how many links the two
resolvers resolve differently (with a few examples). One command::

    python bench/urls.py              # needs python3-doc: sudo apt-get install python3-doc
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import re
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spider import urls as new_urls  # noqa: E402  (the work tree's package, not an installed one)

DOCS = Path("/usr/share/doc/python3.11/html")
OLD_REV = "8c2bb00"  # the last commit with the hand-written RFC 3986 resolver
HREF_RE = re.compile(r"""<a\s[^>]*?href\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
ORIGIN = "http://127.0.0.1:8080/"


def doc_links(folder: Path) -> list[tuple[str, list[str]]]:
    """(page URL, hrefs as written) for every HTML page under ``folder``."""
    pages = []
    for path in sorted(folder.rglob("*.html")):
        text = path.read_text(encoding="utf-8", errors="replace")
        hrefs = [html.unescape(m.group(1) if m.group(1) is not None else m.group(2)) for m in HREF_RE.finditer(text)]
        pages.append((ORIGIN + path.relative_to(folder).as_posix(), hrefs))
    return pages


def old_module(rev: str) -> types.ModuleType:
    """``spider/urls.py`` as it was at ``rev``, imported under another name."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:spider/urls.py"], check=True,
                            capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("spider_urls_old", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{rev}:spider/urls.py", "exec"), module.__dict__)  # noqa: S102 - our own file
    return module


def ada_join() -> Optional[Callable[[str, str], Optional[str]]]:
    try:
        from ada_url import join_url
    except ImportError:
        return None

    def resolve(base: str, href: str) -> Optional[str]:
        try:
            return join_url(base, href)
        except ValueError:
            return None

    return resolve


# CPU time of this process: on a shared machine, waiting for a core is not counted.
clock = time.process_time


def time_pass(resolve: Callable[[str, str], Optional[str]], pages: list[tuple[str, list[str]]]) -> float:
    start = clock()
    for page, hrefs in pages:
        for href in hrefs:
            resolve(page, href)
    return clock() - start


def time_parse(parse: Callable[[str], str], absolute: list[str]) -> float:
    start = clock()
    for url in absolute:
        try:
            parse(url)
        except ValueError:
            pass
    return clock() - start


def interleaved(runs: list[Callable[[], float]], repeat: int) -> list[list[float]]:
    """Each run ``repeat`` times, taking turns, so that a busy moment hits them all alike."""
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeat):
        for i, run in enumerate(runs):
            times[i].append(run())
    return times


def report(name: str, times: list[float], count: int) -> None:
    median = statistics.median(times)
    print(f"  {name:<36} {median * 1e9 / count:7.0f} ns/link  {median:6.3f} s/pass  "
          f"(min {min(times):.3f}, max {max(times):.3f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, default=DOCS, help="folder of HTML pages (default: %(default)s)")
    parser.add_argument("--old-rev", default=OLD_REV, help="git revision of the hand-written resolver")
    parser.add_argument("--repeat", type=int, default=5, help="passes per resolver (median)")
    args = parser.parse_args()
    if not args.docs.is_dir():
        print(f"Error: no HTML documentation in {args.docs} (sudo apt-get install python3-doc, or --docs DIR)",
              file=sys.stderr)
        return 1
    pages = doc_links(args.docs)
    count = sum(len(hrefs) for _, hrefs in pages)
    old = old_module(args.old_rev)
    contenders: list[tuple[str, Callable[[str, str], Optional[str]]]] = [
        (f"hand-written RFC 3986 ({args.old_rev})", old.resolve),
        ("spider.urls: ada + crawler rules", new_urls.resolve),
    ]
    join = ada_join()
    if join is not None:
        contenders.append(("ada_url.join_url alone", join))
    print(f"{len(pages)} pages, {count} links ({args.docs}); median of {args.repeat} passes")
    print("resolve(page, href), as the crawler calls it (CPU time):")
    times = interleaved([lambda r=resolve: time_pass(r, pages) for _, resolve in contenders], args.repeat)
    for (name, _), each in zip(contenders, times):
        report(name, each, count)
    # "#x" alone resolves to None; with the page's URL in front it is a link to parse like the rest.
    absolute = [(new_urls.resolve(page, href) or page) + "#" + href.partition("#")[2]
                for page, hrefs in pages for href in hrefs]
    print("the parser alone: _normalize(absolute URL), no shortcut, no cache (CPU time):")
    old_times, new_times = interleaved([lambda: time_parse(old._normalize, absolute),
                                        lambda: time_parse(new_urls._normalize, absolute)], args.repeat)
    report(f"hand-written RFC 3986 ({args.old_rev})", old_times, count)
    report("ada + crawler rules", new_times, count)
    differ = [(page, href, old.resolve(page, href), new_urls.resolve(page, href))
              for page, hrefs in pages for href in hrefs
              if old.resolve(page, href) != new_urls.resolve(page, href)]
    print(f"links resolved differently: {len(differ)} of {count}")
    for page, href, before, after in differ[:5]:
        print(f"  {href!r} on {page}: {before} -> {after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
