#!/usr/bin/env python3
"""CPU of ``LinkFinder.parse`` per page, one version of spider/links.py against another.

    python bench/parse_cost.py [--base main] [--pages 200] [--rounds 5]

Loads ``spider/links.py`` twice, as committed at ``--base`` (``git show``) and as it is in the
work tree, and parses the same pages with each in interleaved rounds, in this one process:
``--pages`` of Python's HTML documentation (``/usr/share/doc/python3-doc/html/library``, ~90 KB
and ~300 links a page; Debian's python3-doc) and as many pages of bench/site.py's site (20 KB,
40 links). Per page: CPU (``time.process_time``) of the whole parse, and of the parse without
the text hash (``text_hash=False``); minimum and median over the rounds, in ms, the median's
ratio new/base, and the text hash's share of the parse (the medians' difference). Then it says
whether both versions found the same facts (links, base href, canonical, title, robots flags,
truncated, dropped and, with ``requisites=True``, the requisites) on every page, and on how many
pages their text hashes agree (a recrawl sees a page whose hash changed as "changed" once).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Dict, List, Tuple

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
DOCS = Path("/usr/share/doc/python3-doc/html/library")
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(REPO_DIR))   # the spider package: links.py imports ``.hashes``


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def load_base(rev: str, folder: Path) -> ModuleType:
    source = subprocess.run(["git", "show", f"{rev}:spider/links.py"], cwd=REPO_DIR, check=True,
                            capture_output=True).stdout
    path = folder / "links_base.py"
    path.write_bytes(source)
    return load("spider.links_base", path)   # in the package: its relative imports


def docs_pages(count: int) -> List[Tuple[str, bytes]]:
    files = sorted(DOCS.glob("*.html"))[:count]
    if not files:
        sys.exit(f"Error: no pages in {DOCS} (apt-get install python3-doc)")
    return [(f"http://127.0.0.1/library/{f.name}", f.read_bytes()) for f in files]


def bench_pages(count: int) -> List[Tuple[str, bytes]]:
    site = load("bench_site", BENCH_DIR / "site.py")
    params = site.SiteParams(pages=max(count, 2000), port=site.DEFAULT_PORT)
    pool = site._paragraph_pool()
    return [(f"{params.origin}/p/{i}.html", site.render_page(i, params, pool).encode()) for i in range(count)]


def cost(module: ModuleType, pages: List[Tuple[str, bytes]], text_hash: bool) -> float:
    """CPU seconds per page to parse every page once."""
    finder = module.LinkFinder
    start = time.process_time()
    for url, body in pages:
        finder(url, text_hash=text_hash).parse(body, "utf-8")
    return (time.process_time() - start) / len(pages)


def page_facts(page: object) -> tuple:
    """A ParsedPage's fields, its links as tuples (the two versions' Link classes differ)."""
    fields = dict(vars(page))
    fields["links"] = [(x.href, x.nofollow) for x in fields["links"]]
    del fields["text_hash"]
    return tuple(sorted(fields.items()))


def compare(base: ModuleType, new: ModuleType, pages: List[Tuple[str, bytes]]) -> str:
    same_hash = 0
    differ: List[str] = []
    for url, body in pages:
        same = True
        for requisites in (False, True):
            a = base.LinkFinder(url, requisites=requisites).parse(body, "utf-8")
            b = new.LinkFinder(url, requisites=requisites).parse(body, "utf-8")
            if page_facts(a) != page_facts(b) and url.rsplit("/", 1)[1] not in differ:
                differ.append(url.rsplit("/", 1)[1])
            same = same and a.text_hash == b.text_hash
        same_hash += same
    facts = "same facts on every page" if not differ else f"facts differ on {len(differ)}: {' '.join(differ[:8])}"
    return f"{facts}; same text hash on {same_hash} of {len(pages)} pages (with and without requisites)"


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="main", help="git revision of the 'before' links.py (default: main)")
    ap.add_argument("--pages", type=int, default=200, help="pages of each site (default: 200)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default: 5)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = load_base(args.base, Path(tmp))
        new = load("spider.links_new", REPO_DIR / "spider" / "links.py")
        sites = {"python docs": docs_pages(args.pages), "bench site": bench_pages(args.pages)}
        for name, pages in sites.items():
            size = statistics.mean(len(b) for _, b in pages) / 1000
            print(f"\n{name}: {len(pages)} pages, {size:.0f} KB a page; "
                  f"{compare(base, new, pages)}")
            runs: Dict[Tuple[str, bool], List[float]] = {}
            for _ in range(args.rounds):
                for label, module in (("base", base), ("new", new)):
                    for text_hash in (True, False):
                        runs.setdefault((label, text_hash), []).append(cost(module, pages, text_hash))
            print(f"  {'version':<10} {'parse, ms/page (min / median)':>30} {'without text hash':>22}"
                  f" {'hash share':>11}")
            median = {key: statistics.median(values) for key, values in runs.items()}
            for label in ("base", "new"):
                whole, bare = runs[(label, True)], runs[(label, False)]
                share = (median[(label, True)] - median[(label, False)]) / median[(label, True)]
                print(f"  {label + (' ' + args.base if label == 'base' else ''):<10} "
                      f"{min(whole) * 1e3:>18.3f} / {median[(label, True)] * 1e3:<9.3f}"
                      f"{min(bare) * 1e3:>12.3f} / {median[(label, False)] * 1e3:<9.3f} {share:>6.0%}")
            print(f"  {'new/base':<10} {median[('new', True)] / median[('base', True)]:>30.2f}"
                  f" {median[('new', False)] / median[('base', False)]:>22.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
