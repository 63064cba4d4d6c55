"""How long one robots.txt check takes against a huge file of wildcard rules.

    python bench/robots_rules.py [--rules 24000] [--links 2000]

Builds a robots.txt of about 500 KiB (``Disallow: /dir{i}/*.ext{i}$`` style wildcard rules, the
issue-13 case), then times ``Rules.allowed`` for a page's worth of links: each link checked once
(a page's links), then the same links again (the cache's case: pages of one site link the same
URLs), and protego's own ``can_fetch`` for comparison. Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protego import Protego  # noqa: E402

from spider.robots import MAX_BODY, from_fetch  # noqa: E402


def robots_txt(n: int) -> bytes:
    lines = ["User-agent: *"]
    for i in range(n):
        lines.append(f"Disallow: /*/p{i}*x$" if i % 2 else f"Allow: /a{i}/*.html")
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rules", type=int, default=24000)
    ap.add_argument("--links", type=int, default=2000)
    args = ap.parse_args()
    body = robots_txt(args.rules)
    print(f"robots.txt: {len(body) / 1024:.0f} KiB, {args.rules} rules (cut at {MAX_BODY // 1024} KiB)")
    rng = random.Random(1)
    urls = [f"http://example.com/{rng.choice('abcxyz')}{rng.randrange(30000)}/p{rng.randrange(30000)}/page.html"
            for _ in range(args.links)]
    t = time.perf_counter()
    plain = Protego.parse(body[:MAX_BODY].decode())
    plain.can_fetch(urls[0], "spider")
    print(f"{'protego parse':28s} {time.perf_counter() - t:8.3f} s")
    t = time.perf_counter()
    rules = from_fetch(200, body, time.time())
    rules.allowed(urls[0], "spider")
    print(f"{'Rules parse and index':28s} {time.perf_counter() - t:8.3f} s")
    rules = from_fetch(200, body, time.time())   # parsed and indexed again, outside the timing
    rules.allowed("http://example.com/", "spider")
    for label, check in (("protego can_fetch", lambda u: plain.can_fetch(u, "spider")),
                         ("Rules.allowed, first look", lambda u: rules.allowed(u, "spider")),
                         ("Rules.allowed, again", lambda u: rules.allowed(u, "spider"))):
        t = time.perf_counter()
        for u in urls:
            check(u)
        dt = time.perf_counter() - t
        print(f"{label:28s} {dt * 1000 / len(urls):8.3f} ms per URL, {dt:6.2f} s for {len(urls)} links")


if __name__ == "__main__":
    main()
