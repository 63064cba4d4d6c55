"""End-to-end tests of the selection policy: crawl order (bfs, dfs, best) and crawler traps.

Every test runs `python main.py crawl ...` as a real subprocess (always with --projects-dir and a
timeout) against a loopback trap site (`tests/trapsite.py`) or a list/detail site, then checks
the project files (crawled.txt, rejected.txt, duplicates.txt, hashes.txt) and what the server
saw against the site's ground truth.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import pytest

from sitekit import TestSite
from trapsite import (
    GUIDE_PATH,
    LONG_PATH,
    SESSION_KEYS,
    TRAP_RULES,
    ListDetailSite,
    TrapTruth,
    build_trap_site,
    strip_session,
    target_of,
)

MAIN = Path(__file__).resolve().parent.parent / "main.py"
TIMEOUT = 60  # seconds; no crawl may take longer (it must end by itself well before)
HEX32 = re.compile(r"^[0-9a-f]{32}$")


# ------------------------------------------------------------------------------------ helpers


def clean_env() -> dict[str, str]:
    """The environment without proxies (module-scoped fixtures cannot use monkeypatch)."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["NO_PROXY"] = "*"
    return env


def run_crawl(projects: Path, name: str, *args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """`python main.py crawl NAME ARGS --projects-dir PROJECTS`; never a traceback."""
    result = subprocess.run(
        [sys.executable, str(MAIN), "crawl", name, *args, "--projects-dir", str(projects)],
        cwd=projects.parent, capture_output=True, text=True, timeout=timeout, env=clean_env(),
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Error" not in result.stderr, result.stderr
    return result


def data_lines(path: Path) -> list[list[str]]:
    """Data lines of a project file split on TAB (blank and '#' lines skipped); [] if missing."""
    if not path.exists():
        return []
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def crawled_pages(folder: Path) -> list[list[str]]:
    """crawled.txt lines in file order (with one worker: fetch order), redirect hops left out."""
    return [f for f in data_lines(folder / "crawled.txt") if not re.fullmatch(r"3\d\d", f[1]) or f[1] == "304"]


def crawled_targets(folder: Path) -> list[str]:
    return [strip_session(target_of(f[0])) for f in crawled_pages(folder)]


def requested(site_hits: Counter) -> Counter:
    """Requests per target with session ids stripped, robots.txt left out."""
    out: Counter = Counter()
    for target, n in site_hits.items():
        if target != "/robots.txt":
            out[strip_session(target)] += n
    return out


@dataclass
class Run:
    truth: TrapTruth
    result: subprocess.CompletedProcess
    folder: Path
    hits: Counter  # raw request targets -> count


def crawl_trap_site(site: TestSite, projects: Path, *args: str, parts: Sequence[str] = (),
                    limits: Optional[dict] = None, max_depth: int = 50, workers: int = 2) -> Run:
    kwargs = {"parts": parts} if parts else {}
    truth = build_trap_site(site, limits=limits, max_depth=max_depth, **kwargs)
    result = run_crawl(projects, "trap", site.url("/"), "--delay", "0", "--workers", str(workers),
                       "--max-depth", str(max_depth), *args)
    return Run(truth, result, projects / "trap", site.hits)


def check_against_truth(run: Run) -> None:
    """Everything a correct crawl of the trap site does, checked against the ground truth."""
    truth, folder = run.truth, run.folder
    ok(run.result)
    assert not (folder / "errors.log").exists() or not (folder / "errors.log").read_text().strip()
    assert data_lines(folder / "failed.txt") == []
    crawled = crawled_targets(folder)
    crawled_set = set(crawled)
    allowed = truth.must_fetch | truth.may_fetch

    # every real page fetched, nothing else, each once
    missing = truth.must_fetch - crawled_set
    assert not missing, f"real pages not fetched: {sorted(missing)[:10]} ({len(missing)})"
    extra = crawled_set - allowed
    assert not extra, f"trap pages fetched: {sorted(extra)[:10]} ({len(extra)})"
    twice = {t: n for t, n in Counter(crawled).items() if n > 1}
    assert not twice, f"in crawled.txt more than once: {twice}"

    # what the server saw: nothing outside the real pages, each real page once (session ids stripped)
    seen = requested(run.hits)
    unexpected = {t: n for t, n in seen.items() if t not in allowed}
    assert not unexpected, f"trap URLs requested: {dict(list(unexpected.items())[:10])} ({len(unexpected)})"
    repeated = {t: n for t, n in seen.items() if n > 1}
    assert not repeated, f"requested more than once: {repeated}"
    assert not truth.never & set(seen), "a link of a variant whose canonical was known was followed"

    # rejected.txt: each refusal with the rule expected and a page that links it as source
    rejected = data_lines(folder / "rejected.txt")
    logged: set[str] = set()
    for fields in rejected:
        assert len(fields) == 3, fields
        url, reason, source = fields
        t = strip_session(target_of(url))
        assert t in truth.traps, f"refused but not a trap: {fields}"
        assert reason == truth.traps[t], f"{t[:80]}: reason {reason!r}, expected {truth.traps[t]!r}"
        src = strip_session(target_of(source))
        assert src in truth.sources[t] and src in crawled_set, f"{t[:80]}: source {source}, expected one of " \
            f"{sorted(truth.sources[t] & crawled_set)}"
        logged.add(t)
    expected = {t for t, srcs in truth.sources.items() if t not in truth.optional and srcs & crawled_set}
    not_logged = expected - logged
    assert not not_logged, f"trap URLs missing from rejected.txt: " \
        f"{[(t[:80], truth.traps[t]) for t in sorted(not_logged)][:10]} ({len(not_logged)})"
    for t in truth.optional:  # a month at the calendar limit: fetched or refused, not both
        assert (t in crawled_set) + (t in logged) <= 1, t

    # duplicates.txt: the duplicate pages and the canonical variants, nothing else
    lines = data_lines(folder / "duplicates.txt")
    assert all(len(f) == 3 and f[1] in ("duplicate", "variant") for f in lines), lines
    variants = [(strip_session(target_of(u)), strip_session(target_of(o))) for u, k, o in lines if k == "variant"]
    assert sorted(variants) == sorted(truth.variants.items())
    dups = [(strip_session(target_of(u)), strip_session(target_of(o))) for u, k, o in lines if k == "duplicate"]
    assert len(dups) == sum(len(g) - 1 for g in truth.duplicate_groups), dups
    for dup, of in dups:
        group = next((g for g in truth.duplicate_groups if dup in g), None)
        assert group is not None and of in group and of != dup, (dup, of)
    originals = {of for _, of in dups}

    # hashes.txt: one line per distinct text; duplicates share their original's hash in crawled.txt
    hashes = data_lines(folder / "hashes.txt")
    assert (folder / "hashes.txt").exists()
    assert all(len(f) == 2 and HEX32.match(f[0]) for f in hashes), hashes[:3]
    hashed = {strip_session(target_of(f[1])): f[0] for f in hashes}
    assert len(hashed) == len(hashes) == len({f[0] for f in hashes})
    assert len(hashes) == len(crawled) - len(dups)
    assert set(hashed) == crawled_set - {d for d, _ in dups}
    assert originals <= set(hashed)
    by_target = {strip_session(target_of(f[0])): f for f in crawled_pages(folder)}
    for t, fields in by_target.items():
        assert len(fields) == 11, fields
        assert fields[10] == truth.titles[t], (t, fields[10])
    for dup, of in dups:
        assert by_target[dup][7] == by_target[of][7] == hashed[of]
    for variant, canonical in truth.variants.items():
        assert by_target[variant][8] == truth.url(canonical)
    for t in hashed:
        assert by_target[t][7] == hashed[t]


# ------------------------------------------------------------------------------------ the whole trap site


@pytest.fixture(scope="module")
def trap_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One crawl of the whole trap site with the default rules, shared by the tests below."""
    projects = tmp_path_factory.mktemp("selection") / "projects"
    projects.mkdir()
    with TestSite() as site:
        run = crawl_trap_site(site, projects)
        assert site.errors == []
    yield run


def test_trap_site_crawl_ends_by_itself_with_the_ground_truth(trap_run: Run) -> None:
    check_against_truth(trap_run)


def test_trap_site_every_real_page_is_fetched_once(trap_run: Run) -> None:
    ok(trap_run.result)
    seen = requested(trap_run.hits)
    for target in trap_run.truth.must_fetch:
        assert seen[target] == 1, (target, seen[target])


def test_trap_site_no_trap_url_is_requested(trap_run: Run) -> None:
    seen = requested(trap_run.hits)
    truth = trap_run.truth
    assert not [t for t in truth.traps if t not in truth.optional and seen[t]]
    for probe in ("/docs/a/a/a/", "/shop/x/y/x/y/x/y/", LONG_PATH, "/products?sort=price", "/products?view=grid",
                  "/deep/" + "/".join(f"d{i}" for i in range(2, 14)), "/only-via-variant-1"):
        assert seen[probe] == 0, probe


def test_session_id_links_are_fetched_once_per_real_page(trap_run: Run) -> None:
    # Every page view links /account, /cart and /help with a fresh session id.
    seen = requested(trap_run.hits)
    assert [seen["/account"], seen["/cart"], seen["/help?topic=start"]] == [1, 1, 1], \
        [t for t in trap_run.hits if "/account" in t or "/cart" in t or "/help" in t]
    # never refused, never logged
    for url, _reason, _source in data_lines(trap_run.folder / "rejected.txt"):
        assert not re.search(r"[;?&](%s)=" % "|".join(SESSION_KEYS), url, re.I), url


def test_each_trap_rule_is_in_rejected_txt(trap_run: Run) -> None:
    reasons = Counter(f[1] for f in data_lines(trap_run.folder / "rejected.txt"))
    for rule in TRAP_RULES:
        assert reasons[rule] > 0, (rule, reasons)
    lines = {(strip_session(target_of(f[0])), f[1], strip_session(target_of(f[2])))
             for f in data_lines(trap_run.folder / "rejected.txt")}
    assert ("/docs/a/a/a/", "repeated-segments", "/docs/a/a/") in lines
    assert ("/shop/x/y/x/y/x/y/", "repeated-segments", "/shop/x/y/x/y/") in lines
    assert (LONG_PATH, "url-length", "/links") in lines
    assert ("/products?sort=price", "presentation-params", "/products") in lines
    assert ("/products?view=grid", "presentation-params", "/products") in lines
    deep12 = "/deep/" + "/".join(f"d{i}" for i in range(2, 13))
    assert (deep12 + "/d13", "path-segments", deep12) in lines
    five = [t for t, reason, _ in lines if reason == "query-params"]
    assert five and all(t.startswith("/products?") and t.count("&") == 4 for t in five), five


def test_duplicates_and_variants_are_listed(trap_run: Run) -> None:
    lines = {(strip_session(target_of(u)), k, strip_session(target_of(o)))
             for u, k, o in data_lines(trap_run.folder / "duplicates.txt")}
    assert ("/product?id=1&ref=x", "variant", "/product?id=1") in lines
    assert ("/product?id=2&ref=mail", "variant", "/product?id=2") in lines
    assert {frozenset((u, o)) for u, k, o in lines if k == "duplicate"} == {
        frozenset(("/article-1", "/print/article-1")), frozenset(("/article-2", "/mirror/article-2"))}
    crawled = set(crawled_targets(trap_run.folder))
    # both kinds are still fetched and recorded; the canonical only a variant links is queued
    assert {"/print/article-1", "/mirror/article-2", "/product?id=1&ref=x", "/product?id=2"} <= crawled
    # links of a variant whose canonical is unknown are followed (/promo), else not (/only-via-variant-1)
    assert "/promo" in crawled and "/only-via-variant-1" not in crawled
    assert (trap_run.folder / "hashes.txt").exists()


def test_calendar_is_cut_at_both_ends(trap_run: Run) -> None:
    today = trap_run.truth.today

    def day(target: str) -> dt.date:
        year, month = target.split("/")[2:4]
        return dt.date(int(year), int(month), 1)

    crawled = {day(t) for t in crawled_targets(trap_run.folder) if re.match(r"/calendar/\d{4}/", t)}
    refused = {day(strip_session(target_of(f[0]))) for f in data_lines(trap_run.folder / "rejected.txt")
               if f[1] == "calendar"}
    # fetched: from about 20 years back to about one year ahead, every month
    assert min(crawled) <= today - dt.timedelta(days=7300 - 70) and max(crawled) >= today + dt.timedelta(days=365 - 70)
    assert len(crawled) >= 20 * 12
    # refused: the months just beyond, in both directions, and none in between
    assert [d for d in refused if d > today] and [d for d in refused if d < today], sorted(refused)
    assert not [d for d in refused if min(crawled) < d < max(crawled)], sorted(refused)


# ------------------------------------------------------------------------------------ one rule tuned or off


TUNED_OR_OFF = [  # (parts of the site, --trap value, limits of the ground truth, --max-depth)
    (("long",), "url-length=100", {"url-length": 100}, 50),
    (("deep",), "path-segments=5", {"path-segments": 5}, 50),
    (("repeats",), "repeated-segments=2", {"repeated-segments": 2}, 50),
    (("facets",), "query-params=2", {"query-params": 2}, 50),
    (("calendar",), "calendar=40", {"calendar": 40}, 50),
    (("calendar",), "calendar-past=100", {"calendar-past": 100}, 50),
    (("deep",), "path-segments=off", {"path-segments": None}, 16),
    (("repeats",), "repeated-segments=off", {"repeated-segments": None}, 4),  # not path-segments too
    (("long",), "url-length=off", {"url-length": None}, 50),
    (("facets",), "query-params=off", {"query-params": None}, 6),
    (("calendar",), "calendar=off", {"calendar": None}, 6),
]


@pytest.mark.parametrize("parts, trap, limits, max_depth", TUNED_OR_OFF, ids=[row[1] for row in TUNED_OR_OFF])
def test_trap_rule_tuned_or_off(site: TestSite, projects_dir: Path, parts: tuple, trap: str, limits: dict,
                                max_depth: int) -> None:
    run = crawl_trap_site(site, projects_dir, "--trap", trap, parts=parts, limits=limits,
                          max_depth=max_depth, workers=1)
    check_against_truth(run)
    rule, _, value = trap.partition("=")
    reasons = Counter(f[1] for f in data_lines(run.folder / "rejected.txt"))
    crawled = set(crawled_targets(run.folder))
    if value == "off":
        assert reasons[rule] == 0, reasons
        assert (reasons["depth"] > 0) == (max_depth < 50), reasons  # the trap now ends at --max-depth
    else:
        assert reasons[rule.replace("-past", "")] > 0, reasons
    probes = {  # a URL on the other side of the default limit
        "url-length=100": (GUIDE_PATH, False),
        "path-segments=5": ("/deep/d2/d3/d4/d5/d6", False),
        "repeated-segments=2": ("/docs/a/a/", False),
        "query-params=2": ("/products?brand=acme&color=red&size=s", False),
        "path-segments=off": ("/deep/" + "/".join(f"d{i}" for i in range(2, 17)), True),
        "repeated-segments=off": ("/docs/a/a/a/", True),
        "url-length=off": (LONG_PATH, True),
        "query-params=off": ("/products?brand=acme&brand=zeta&color=red&color=blue&size=s", True),
    }
    if trap in probes:
        target, fetched = probes[trap]
        assert (target in crawled) == fetched, (target, sorted(crawled)[:20])
        assert (requested(run.hits)[target] == 1) == fetched


def test_presentation_params_tuned_and_off(site: TestSite, projects_dir: Path) -> None:
    run = crawl_trap_site(site, projects_dir, "--trap", "presentation-params=off", parts=("facets",), workers=1)
    ok(run.result)
    crawled = set(crawled_targets(run.folder))
    assert {"/products?sort=price", "/products?view=grid", "/products?brand=acme&sort=price"} <= crawled
    assert "presentation-params" not in {f[1] for f in data_lines(run.folder / "rejected.txt")}


def test_presentation_params_value_is_the_list_of_keys(site: TestSite, projects_dir: Path) -> None:
    run = crawl_trap_site(site, projects_dir, "--trap", "presentation-params=brand", parts=("facets",), workers=1)
    ok(run.result)
    crawled = set(crawled_targets(run.folder))
    assert "/products?sort=price" in crawled and "/products?color=red" in crawled
    refused = {(strip_session(target_of(f[0])), f[1]) for f in data_lines(run.folder / "rejected.txt")}
    assert ("/products?brand=acme", "presentation-params") in refused
    assert requested(run.hits)["/products?brand=acme"] == 0


def test_session_ids_off_fetches_every_fresh_id(site: TestSite, projects_dir: Path) -> None:
    truth = build_trap_site(site, parts=("sessions",))
    assert truth.must_fetch == {"/", "/account", "/cart", "/help?topic=start"}
    run = run_crawl(projects_dir, "s", site.url("/"), "--delay", "0", "--workers", "1", "--max-depth", "5",
                    "--trap", "session-ids=off")
    ok(run)
    # "/" links 3 fresh ids, each of those pages 3 more: 1 + 3 + 9 fetched. The 9 at depth 2 have
    # the text of a depth-1 page: duplicates, whose links are not extracted, so the loop ends there.
    assert requested(site.hits) == {"/": 1, "/account": 4, "/cart": 4, "/help?topic=start": 4}
    lines = data_lines(projects_dir / "s" / "duplicates.txt")
    assert len(lines) == 9 and {f[1] for f in lines} == {"duplicate"}, lines
    assert {strip_session(target_of(f[0])) for f in lines} == truth.must_fetch - {"/"}


def test_no_traps_turns_every_rule_off(site: TestSite, projects_dir: Path) -> None:
    truth = build_trap_site(site)
    run = run_crawl(projects_dir, "trap", site.url("/"), "--delay", "0", "--workers", "2", "--max-depth", "50",
                    "--no-traps", "--max-pages", "150")
    ok(run)
    folder = projects_dir / "trap"
    assert len(crawled_pages(folder)) + len(data_lines(folder / "failed.txt")) == 150
    reasons = Counter(f[1] for f in data_lines(folder / "rejected.txt"))
    assert not set(reasons) & set(TRAP_RULES), reasons
    seen = requested(site.hits)
    assert seen["/products?sort=price"] == 1  # presentation-params off
    assert seen["/account"] > 1  # session ids not stripped: every fresh id is a new URL
    assert [t for t in seen if t in truth.traps]


# ------------------------------------------------------------------------------------ crawl order


def order_crawl(site: TestSite, projects: Path, name: str, *args: str, pages: int) -> list[tuple[str, int]]:
    """(target, depth) of the pages crawled with one worker, in fetch order."""
    ok(run_crawl(projects, name, site.url("/"), "--delay", "0", "--workers", "1", "--max-depth", "50",
                 "--max-pages", str(pages), *args))
    out = [(target_of(f[0]), int(f[4])) for f in crawled_pages(projects / name)]
    assert len(out) == pages, out
    return out


@pytest.fixture
def catalogue(site: TestSite) -> ListDetailSite:
    return ListDetailSite(site, lists=10, per_list=10, details=300, related=3).install()


@pytest.mark.parametrize("args", [("--order", "bfs"), ()], ids=["bfs", "default"])
def test_bfs_fetches_every_depth_1_page_before_any_depth_2_page(
    site: TestSite, projects_dir: Path, catalogue: ListDetailSite, args: tuple
) -> None:
    order = order_crawl(site, projects_dir, "o", *args, pages=25)
    depths = [d for _, d in order]
    assert depths == sorted(depths), order
    assert order[:11] == [("/", 0)] + [(f"/list/{n}", 1) for n in range(1, 11)], order[:11]  # FIFO
    assert all(d == 2 for d in depths[11:]), order
    assert [t for t, _ in order[11:21]] == catalogue.links("/list/1")[1:], order  # /list/1's details, in order


def test_dfs_goes_deep_first(site: TestSite, projects_dir: Path, catalogue: ListDetailSite) -> None:
    order = order_crawl(site, projects_dir, "o", "--order", "dfs", pages=25)
    known = {"/"}
    new: set[str] = set()
    for i, (target, depth) in enumerate(order):
        if i and new:  # LIFO: the next page is one of the links the previous page discovered
            assert target in new, (i, target, sorted(new), order[: i + 1])
            assert depth == order[i - 1][1] + 1
        new = {t for t in catalogue.links(target) if t not in known}
        known |= new
    assert max(d for _, d in order) >= 15, order


def test_best_with_prefer_reaches_more_detail_pages_than_bfs(
    site: TestSite, projects_dir: Path, catalogue: ListDetailSite
) -> None:
    bfs = order_crawl(site, projects_dir, "bfs", "--order", "bfs", pages=30)
    best = order_crawl(site, projects_dir, "best", "--order", "best", "--prefer", "/detail/", pages=30)
    bfs_details = sum(catalogue.is_detail(t) for t, _ in bfs)
    best_details = sum(catalogue.is_detail(t) for t, _ in best)
    assert best_details > bfs_details, (best_details, bfs_details)
    # score = 10*depth - 50: /list/1's details (-30) and their related details (-20, -10, ...) come
    # before the other lists (10); FIFO among equal scores
    assert [t for t, _ in best[:2]] == ["/", "/list/1"]
    assert [t for t, _ in best[2:12]] == catalogue.links("/list/1")[1:], best
    assert best_details == 28, best


def test_best_with_defer_pushes_matching_urls_back(site: TestSite, projects_dir: Path,
                                                   catalogue: ListDetailSite) -> None:
    best = order_crawl(site, projects_dir, "best", "--order", "best", "--defer", "/list/", pages=30)
    # lists score 10 + 100: after /list/1 (the only way on), details down to depth 10 come first
    assert [t for t, _ in best[:2]] == ["/", "/list/1"], best
    assert all(catalogue.is_detail(t) for t, _ in best[2:]), best


# ------------------------------------------------------------------------------------ bad values


@pytest.mark.parametrize(
    "args",
    [
        ("--order", "nope"),
        ("--trap", "nope=1"),
        ("--trap", "url-length=abc"),
        ("--trap", "url-length"),
        ("--prefer", "["),
        ("--defer", "("),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, tuple) else None,
)
def test_bad_selection_values_are_one_clear_error(site: TestSite, projects_dir: Path, args: tuple) -> None:
    site.route("/", body="<a href='/a'>a</a>")
    result = run_crawl(projects_dir, "bad", site.url("/"), "--delay", "0", *args)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    assert all(line.startswith(("Error:", "Usage:", "Try ")) for line in lines), result.stderr
    assert site.hits == {}
    assert not (projects_dir / "bad" / "settings.txt").exists()
