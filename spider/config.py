"""Crawl settings: the defaults (one place), and ``settings.txt``, where a project keeps them.

``settings.txt`` is plain ``key = value`` lines (``#`` comments allowed; ``seed``, ``allow`` and
``deny`` may repeat). A new project saves the settings it was created with; a resumed crawl reads
them back, and options given on the command line override them and are saved.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

from . import __version__
from .order import Order
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
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    user_agent: str = DEFAULT_USER_AGENT
    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    max_time: float = 30.0         # whole response, so a server trickling bytes cannot hold a worker
    max_bytes: int = 10 * 1024 * 1024
    max_attempts: int = 3
    max_redirects: int = 10
    max_links: int = 5000          # links taken from one page
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
    discover: tuple[str, ...] = () # this run only: fetch seeds and URLs matching these (not saved)
    demo: bool = False

    def key(self) -> str:
        """A fingerprint of what decides admission: if it changes, the queue is checked again."""
        text = repr((self.seeds, self.max_depth, self.scope, self.allow, self.deny, self.max_pages_per_host,
                     self.traps, self.no_traps))
        return hashlib.sha1(text.encode()).hexdigest()[:16]


RUN_ONLY = ("discover",)   # options of one run, never saved
_MULTI = {"seeds": "seed", "allow": "allow", "deny": "deny", "prefer": "prefer", "defer": "defer",
          "traps": "trap"}


def _parse_value(name: str, raw: str, default: Any) -> Any:
    if name in ("max_pages", "max_pages_per_host"):
        return None if raw.lower() in ("", "none", "0", "unlimited") else int(raw)
    if isinstance(default, bool):
        return raw.lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    return raw


def load(folder: Path) -> dict[str, Any]:
    """The settings saved in a project folder, as a dict of CrawlConfig field values.

    Raises ValueError naming the file and line for a line it cannot read.
    """
    path = Path(folder) / SETTINGS
    defaults = CrawlConfig()
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
        if key in singular:
            multi.setdefault(singular[key], []).append(value)
        elif key in known:
            try:
                out[key] = _parse_value(key, value, getattr(defaults, key))
            except ValueError:
                raise ValueError(f"{path}:{no}: bad value for {key}: {value!r}") from None
        else:
            raise ValueError(f"{path}:{no}: unknown setting {key!r}")
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
    """ValueError with a one-line message for settings that cannot work."""
    if cfg.scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {cfg.scope!r}")
    for what, n in (("workers", cfg.workers), ("max_attempts", cfg.max_attempts)):
        if n < 1:
            raise ValueError(f"{what} must be at least 1")
    # First: nan compares false with everything, and inf would pass as "positive" below.
    for what, x in (("delay", cfg.delay), ("max_delay", cfg.max_delay), ("connect_timeout", cfg.connect_timeout),
                    ("read_timeout", cfg.read_timeout), ("max_time", cfg.max_time),
                    ("recrawl_min", cfg.recrawl_min), ("recrawl_max", cfg.recrawl_max)):
        if not math.isfinite(x):
            raise ValueError(f"{what} must be a finite number of seconds, not {x}")
    for what, x in (("delay", cfg.delay), ("max_delay", cfg.max_delay), ("max_depth", cfg.max_depth), ("max_redirects", cfg.max_redirects),
                    ("max_links", cfg.max_links)):
        if x < 0:
            raise ValueError(f"{what} must not be negative")
    # settings.txt is one setting per line, and the user agent is an HTTP header (Latin-1)
    for what, text in [("user_agent", cfg.user_agent)] + [("allow", p) for p in cfg.allow] + \
            [("deny", p) for p in cfg.deny] + [("prefer", p) for p in cfg.prefer] + \
            [("defer", p) for p in cfg.defer] + [("trap", t) for t in cfg.traps]:
        if any(ord(c) < 32 or ord(c) == 127 or c in "\x85\u2028\u2029" for c in text):
            raise ValueError(f"{what} must be one line of text without control characters: {text!r}")
    if not cfg.user_agent.strip() or cfg.user_agent != cfg.user_agent.strip():
        raise ValueError("user_agent must not be empty or start or end with spaces")
    try:
        cfg.user_agent.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"user_agent must be ASCII (it is an HTTP header): {cfg.user_agent!r}") from None
    for what, x in (("connect_timeout", cfg.connect_timeout), ("read_timeout", cfg.read_timeout),
                    ("max_time", cfg.max_time), ("max_bytes", cfg.max_bytes)):
        if x <= 0:
            raise ValueError(f"{what} must be positive")
    for what, limit in (("max_pages", cfg.max_pages), ("max_pages_per_host", cfg.max_pages_per_host)):
        if limit is not None and limit < 1:
            raise ValueError(f"{what} must be at least 1")
    if not (0 < cfg.recrawl_min <= cfg.recrawl_max):
        raise ValueError("recrawl_min must be positive and not above recrawl_max")
    if cfg.max_delay < cfg.delay:
        raise ValueError(f"--max-delay ({cfg.max_delay:g}) must not be below --delay ({cfg.delay:g})")
    for seed in cfg.seeds:
        try:
            if normalize(seed) != seed:
                raise ValueError("not in normalised form")
        except ValueError as e:
            raise ValueError(f"bad seed {seed!r}: {e}") from None
    for pattern in cfg.allow + cfg.deny + cfg.prefer + cfg.defer + cfg.discover:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"bad regular expression {pattern!r}: {e}") from None
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


__all__ = ["CrawlConfig", "SETTINGS", "DEFAULT_USER_AGENT", "SCOPES", "load", "save", "build", "check",
           "warnings_for"]
