"""Crawl settings: the defaults (one place), and ``settings.txt``, where a project keeps them.

``settings.txt`` is plain ``key = value`` lines (``#`` comments allowed; ``seed``, ``allow`` and
``deny`` may repeat). A new project saves the settings it was created with; a resumed crawl reads
them back, and options given on the command line override them and are saved.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

from . import __version__
from .hashes import sha1
from .order import ORDERS, Order
from .patterns import compile_pattern
from .safefs import atomic_write
from .traps import TrapRules
from .urls import normalize

SETTINGS = "settings.txt"
DEFAULT_USER_AGENT = f"spider/{__version__} (plain-text web crawler)"
SCOPES = ("host", "domain", "prefix")


@dataclass(frozen=True)
class CrawlConfig:
    """Everything a worker needs to know; frozen and picklable, passed to each worker."""

    seeds: tuple[str, ...] = ()
    workers: int = 4
    delay: float = 1.0             # seconds between two requests to one host, across all workers
    max_depth: int = 5
    max_pages: int | None = None   # URLs completed (crawled or failed), all runs together
    scope: str = "host"
    any_port: bool = False         # scope ignores the port (by default a link to another port is out)
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    user_agent: str = DEFAULT_USER_AGENT
    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    max_time: float = 30.0         # whole response, so a server trickling bytes cannot hold a worker
    max_bytes: int = 10 * 1024 * 1024
    max_attempts: int = 3
    max_redirects: int = 10
    max_links: int = 100_000       # links taken from one page (the rest: one max-links line in rejected.txt)
    ignore_robots: bool = False
    follow_nofollow: bool = False  # follow rel="nofollow" links and pages with meta robots nofollow
    auto_throttle: bool = False    # delay follows each host's latency, within [delay, max_delay]
    max_delay: float = 60.0        # cap for Crawl-delay and for backing off after 429/503
    max_pages_per_host: int | None = None
    confirm_404: bool = False      # a 404 is tried once more later before it is failed
    order: str = "bfs"             # bfs, dfs or best (spider/order.py)
    prefer: tuple[str, ...] = ()   # --order best: URLs matching these go earlier
    defer: tuple[str, ...] = ()    # --order best: URLs matching these go later
    traps: tuple[str, ...] = ()    # trap rule overrides, NAME=VALUE (spider/traps.py)
    no_traps: bool = False         # every trap rule off (overrides may turn some back on)
    recrawl_min: float = 3600.0    # a page is checked at most this often (seconds) ...
    recrawl_max: float = 30 * 86400.0   # ... and at least this often
    warc: bool = False             # keep every response as received in warc/*.warc.gz
    requisites: bool = False       # also fetch the images, stylesheets, scripts, ... of pages (wget -p)
    check_requisites: bool = False # find them as --requisites does, but only check them (HEAD)
    discover: tuple[str, ...] = () # this run only: fetch seeds and URLs matching these (not saved)
    demo: bool = False

    def key(self) -> str:
        """A fingerprint of what decides admission: if it changes, the queue is checked again."""
        text = repr((self.seeds, self.max_depth, self.scope, self.allow, self.deny, self.max_pages_per_host,
                     self.traps, self.no_traps, self.any_port))
        return sha1(text.encode()).hexdigest()[:16]


RUN_ONLY = ("discover",)   # options of one run, never saved
_MULTI = {"seeds": "seed", "allow": "allow", "deny": "deny", "prefer": "prefer", "defer": "defer",
          "traps": "trap"}
PATTERNS = ("allow", "deny", "prefer", "defer", "discover")   # user regular expressions (RE2)

DAY = 86400.0


@dataclass(frozen=True)
class Limit:
    """The range of a number setting: ``lo`` excluded when ``lo_open``; ``none_ok``: ``none``
    (no limit) is a value too."""

    kind: type
    lo: float
    hi: float
    lo_open: bool = False
    none_ok: bool = False

    def describe(self) -> str:
        what = "a whole number" if self.kind is int else "a number"
        low = f"above {_num(self.lo)}" if self.lo_open else f"from {_num(self.lo)}"
        return f"{what} {low} {'and at most' if self.lo_open else 'to'} {_num(self.hi)}"


def _num(x: float) -> str:
    """1073741824, not 1.07374e+09: a limit as a user would type it."""
    return str(int(x)) if x == int(x) else f"{x:g}"


# The one table of what a number setting may be, used by the command line's option types and by
# settings.txt alike (a setting that skipped the command line's limits started 90 processes for
# one page). Timeouts are bounded: --max-time 1e10 overflowed the timer and failed every URL.
NUMBERS: dict[str, Limit] = {
    "workers": Limit(int, 1, 256),
    "delay": Limit(float, 0, DAY),
    "max_depth": Limit(int, 0, 10_000),
    "max_pages": Limit(int, 1, 10**12, none_ok=True),
    "connect_timeout": Limit(float, 0, 600, lo_open=True),
    "read_timeout": Limit(float, 0, 600, lo_open=True),
    "max_time": Limit(float, 0, 3600, lo_open=True),
    "max_bytes": Limit(int, 1, 2**30),
    "max_attempts": Limit(int, 1, 100),
    "max_redirects": Limit(int, 0, 100),
    "max_links": Limit(int, 0, 1_000_000),
    "max_delay": Limit(float, 0, DAY),
    "max_pages_per_host": Limit(int, 1, 10**12, none_ok=True),
    "recrawl_min": Limit(float, 0, 365 * DAY, lo_open=True),
    "recrawl_max": Limit(float, 0, 365 * DAY, lo_open=True),
}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def parse(name: str, raw: str, *, saved: bool = False) -> Any:
    """The value of setting ``name`` (a CrawlConfig field) written as ``raw``, checked: the one
    conversion of the command line's options and of settings.txt's lines (``saved``: where
    ``none`` writes "no limit"). A multi-valued setting (``allow``, ``seeds``, ...) takes one item.
    ValueError with a one-line message."""
    default = getattr(CrawlConfig(), name)
    if name in NUMBERS:
        limit = NUMBERS[name]
        if saved and limit.none_ok and raw.strip().lower() in ("", "none", "unlimited", "0"):
            return None
        try:
            value: Any = limit.kind(raw.strip())
        except ValueError:
            raise ValueError(f"{name} must be {limit.describe()}, not {raw!r}") from None
        try:
            check_value(name, value)
        except ValueError as e:   # the value as it was written, not as Python prints it
            raise ValueError(str(e).replace(f"not {value!r}", f"not {raw!r}")) from None
        return value
    if isinstance(default, bool):
        low = raw.strip().lower()
        if low not in _TRUE + _FALSE:
            raise ValueError(f"{name} must be true or false, not {raw!r}")
        return low in _TRUE
    if name == "seeds" and saved:
        # A seed saved by an older version in an older spelling (RFC 3986 before the WHATWG
        # rules) is the same seed: take it in today's spelling instead of refusing the project.
        try:
            raw = normalize(raw)
        except ValueError as e:
            raise ValueError(f"bad seed {raw!r}: {e}") from None
    check_value(name, raw)
    return raw


def check_value(name: str, value: Any) -> None:
    """ValueError with a one-line message if ``value`` (one item of a multi-valued setting) is
    not a possible value of setting ``name``."""
    if name in NUMBERS:
        limit = NUMBERS[name]
        if value is None and limit.none_ok:
            return
        if isinstance(value, float) and not math.isfinite(value):
            # nan compares false with everything and would pass any range
            raise ValueError(f"{name} must be a finite number of seconds, not {value}")
        low_ok = value > limit.lo if limit.lo_open else value >= limit.lo
        if not (low_ok and value <= limit.hi):
            raise ValueError(f"{name} must be {limit.describe()}, not {value!r}")
    elif name == "scope" and value not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {value!r}")
    elif name == "order":
        if value not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {value!r}")
    elif name in PATTERNS:
        _one_line(name, value)
        compile_pattern(value)
    elif name == "traps":
        _one_line("trap", value)
        TrapRules.from_settings((value,))
    elif name == "seeds":
        try:
            if normalize(value) != value:
                raise ValueError("not in normalised form")
        except ValueError as e:
            raise ValueError(f"bad seed {value!r}: {e}") from None
    elif name == "user_agent":
        _one_line(name, value)
        if not value.strip() or value != value.strip():
            raise ValueError("user_agent must not be empty or start or end with spaces")
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError(f"user_agent must be ASCII (it is an HTTP header): {value!r}") from None


def _one_line(name: str, text: str) -> None:
    """settings.txt is one setting per line, and the user agent is an HTTP header."""
    if any(ord(c) < 32 or ord(c) == 127 or c in "\x85\u2028\u2029" for c in text):
        raise ValueError(f"{name} must be one line of text without control characters: {text!r}")


def load(folder: Path) -> dict[str, Any]:
    """The settings saved in a project folder, as a dict of CrawlConfig field values.

    Every line is checked as an option given on the command line is (``parse``): raises
    ValueError naming the file and line for a line it cannot read or a value out of range.
    """
    path = Path(folder) / SETTINGS
    known = {f.name for f in fields(CrawlConfig)}
    singular = {v: k for k, v in _MULTI.items()}
    out: dict[str, Any] = {}
    multi: dict[str, list[str]] = {}
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        key, sep, value = s.partition("=")
        key, value = key.strip().replace("-", "_"), value.strip()
        if not sep:
            raise ValueError(f"{path}:{no}: expected 'key = value', got {s!r}")
        field = singular.get(key, key)
        if field in RUN_ONLY:
            raise ValueError(f"{path}:{no}: {key} is an option of one run (--{key}), never saved; "
                             "remove this line")
        if field not in known:
            raise ValueError(f"{path}:{no}: unknown setting {key!r}")
        try:
            parsed = parse(field, value, saved=True)
        except ValueError as e:
            raise ValueError(f"{path}:{no}: {e}") from None
        if field in _MULTI:
            multi.setdefault(field, []).append(parsed)
        else:
            out[field] = parsed
    for k, values in multi.items():
        out[k] = tuple(values)
    return out


def save(folder: Path, config: CrawlConfig) -> None:

    lines = ["# spider settings for this project: edit while no crawl runs, or pass options on resume\n"]
    for name, value in asdict(config).items():
        if name in RUN_ONLY:
            continue
        if name in _MULTI:
            lines += [f"{_MULTI[name]} = {v}\n" for v in value]
        else:
            lines.append(f"{name} = {'none' if value is None else value}\n")
    atomic_write(Path(folder) / SETTINGS, "".join(lines))


def build(saved: Mapping[str, Any], given: Mapping[str, Any]) -> CrawlConfig:
    """Defaults, then saved settings, then options given now (None means not given)."""
    values = {**saved, **{k: v for k, v in given.items() if v is not None}}
    for k in _MULTI:
        if k in values:
            values[k] = tuple(values[k])
    cfg = replace(CrawlConfig(), **values)
    check(cfg)
    return cfg


def check(cfg: CrawlConfig) -> None:
    """ValueError with a one-line message for settings that cannot work: each value as ``parse``
    checks it, then the settings that must agree with each other."""
    for f in fields(CrawlConfig):
        value = getattr(cfg, f.name)
        for item in (value if f.name in _MULTI or f.name in RUN_ONLY else (value,)):
            check_value(f.name, item)
    if cfg.recrawl_min > cfg.recrawl_max:
        raise ValueError("recrawl_min must not be above recrawl_max")
    if cfg.max_delay < cfg.delay:
        raise ValueError(f"--max-delay ({cfg.max_delay:g}) must not be below --delay ({cfg.delay:g})")
    Order(cfg.order, cfg.prefer, cfg.defer)
    TrapRules.from_settings(cfg.traps, not cfg.no_traps)


def warnings_for(cfg: CrawlConfig) -> list[str]:
    """Settings that work but do nothing (one line each): said at start instead of silently ignored."""
    out = []
    given = [f"--{name}" for name in ("prefer", "defer") if getattr(cfg, name)]
    if given and cfg.order != "best":
        verb = "only applies" if len(given) == 1 else "only apply"
        out.append(f"{' and '.join(given)} {verb} to --order best; ignored with --order {cfg.order}")
    return out


__all__ = ["CrawlConfig", "SETTINGS", "DEFAULT_USER_AGENT", "SCOPES", "NUMBERS", "Limit", "parse",
           "check_value", "load", "save", "build", "check", "warnings_for"]
