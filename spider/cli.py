"""The command line: ``crawl``, ``recrawl``, ``seed``, ``status``, ``report``, ``export``, ``push``, ``pull`` and ``demo``. Thin: it validates, builds the frozen
config and hands over. User mistakes become one ``Error: ...`` line here (exit 1), or a usage
error (exit 2); never a traceback."""

from __future__ import annotations

import math
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

import click

from . import __version__
from . import config as settings
from .config import SCOPES, CrawlConfig
from .crawl import EXIT_INTERRUPTED, LOCK, Crawl, CrawlError, ProjectLock
from .order import ORDERS
from .traps import RULES as TRAP_RULES
from . import safefs
from .frontier.contract import StoreError
from .records import QueueEntry
from .urls import normalize

JOIN_POLL = 0.05   # --join-wait: how often a machine looks for the crawl it waits for
LEASE = 60.0   # --lease's default: seconds a host stays leased without a sign of life from its holder


def _projects_dir(ctx: click.Context, param: click.Parameter, value: str) -> Path:
    # Path("") is Path("."): an empty --projects-dir put the project in the current folder
    if not value.strip():
        raise click.BadParameter("must not be empty", ctx, param)
    return Path(value)


projects_dir_option = click.option(
    "--projects-dir", type=click.Path(file_okay=False), default="projects", callback=_projects_dir,
    show_default=True, help="Folder holding one folder per crawl.")


class Number(click.ParamType):
    """A number option's type: converted and checked against its range by ``config.parse``, as
    settings.txt's lines are (one table of ranges for both). Out of range is a usage error
    (exit 2); nan and inf go on to the settings check, which says they must be finite (exit 1)."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.name = "integer" if settings.NUMBERS[field].kind is int else "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return settings.parse(self.field, value)
        except ValueError as e:
            if self.name == "float":
                try:
                    x = float(value)
                except ValueError:
                    x = 0.0
                if not math.isfinite(x):
                    return x
            self.fail(str(e), param, ctx)


def _range(field: str) -> str:
    """``  [a whole number from 1 to 256]``: an option's range, from the table, for its help."""
    limit = settings.NUMBERS[field]
    return f"  [{limit.describe()}]"


store_option = click.option(
    "--store", metavar="URL", help="The crawl's frontier is in Redis at redis://HOST:PORT/DB, shared by "
    "every machine that runs the same command (default: the project folder's files).")


def project_folder(projects_dir: Path, name: str) -> Path:
    """The folder of project NAME, refusing names that could leave the projects folder."""
    if not name or not name.strip():
        raise click.ClickException("project NAME must not be empty")
    bad = [c for c in name if c in "/\\" or ord(c) < 32 or c == "\x7f"]
    if bad or name in (".", "..") or name.startswith(".") or (os.altsep and os.altsep in name):
        raise click.ClickException(
            f"invalid project NAME {name!r}: use a plain folder name (no path separators, no '..', "
            "no leading '.')")
    if len(name.encode("utf-8", "surrogateescape")) > 255:
        raise click.ClickException("invalid project NAME: longer than 255 bytes")
    folder = projects_dir / name
    if folder.is_symlink():
        raise click.ClickException(f"{folder} is a symbolic link; refusing to follow it out of {projects_dir}")
    if folder.exists() and not folder.is_dir():
        raise click.ClickException(f"{folder} exists and is not a folder")
    try:   # links out of the project, or a FIFO that would hang a read: refused before any I/O
        safefs.check_tree(folder)
    except OSError as e:
        raise click.ClickException(str(e)) from None
    return folder


def parse_start_urls(urls: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for u in urls:
        try:
            n = normalize(u)
        except ValueError as e:
            why = str(e)
            hint = ""
            if "://" not in u and not u.startswith(("/", "#", "?")) and "." in u.split("/")[0]:
                try:   # example.org/docs: the scheme was left out
                    hint = f" (did you mean {normalize('https://' + u)}?)"
                except ValueError:
                    pass
            raise click.ClickException((f"invalid START_URL: {why}" if u in why
                                        else f"invalid START_URL {u!r}: {why}") + hint) from None
        if n not in out:
            out.append(n)
    return tuple(out)


class _Commands(click.Group):
    """The command group: Ctrl-C at any moment of a command (start-up included, before the
    crawl's own handler is in place) ends it with exit 130 and one line, as the README says,
    not click's "Aborted!" and 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)   # a second Ctrl-C: the same one line, no traceback
            try:
                click.echo("\ninterrupted; run the same command again to resume", err=True)
            except OSError:   # nobody reads standard error any more
                pass
            ctx.exit(EXIT_INTERRUPTED)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="spider")
def main() -> None:
    """spider: a multi-process web crawler whose whole state lives in plain text files.

    Start a crawl with `crawl NAME URL`, stop it any way you like, resume it with `crawl NAME`.
    Try `demo` first: it crawls a small site served on this machine.
    """


def crawl_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options shared by ``crawl`` and ``recrawl`` (saved in settings.txt unless said)."""
    for option in reversed(CRAWL_OPTIONS):
        f = option(f)
    return f


CRAWL_OPTIONS = [
    click.option("--workers", type=Number("workers"), help="Worker processes.  [default: 4]" + _range("workers")),
    click.option("--delay", type=Number("delay"), metavar="SECONDS",
                 help="Minimum gap between two requests to one host, across all workers.  [default: 1.0]" + _range("delay")),
    click.option("--max-depth", type=Number("max_depth"), help="Links deeper than this are refused.  [default: 5]"),
    click.option("--max-pages", type=Number("max_pages"),
                 help="Stop after this many URLs are completed (crawled or failed), all runs together."),
    click.option("--scope", type=click.Choice(SCOPES), help="host, domain or prefix of the start URLs.  [default: host]"),
    click.option("--any-port/--same-port", "any_port", default=None,
                 help="Scope takes in every port of its hosts, not only the start URLs' (80 and 443 count as none).  [default: same port]"),
    click.option("--allow", multiple=True, metavar="REGEX", help="Only follow URLs matching one of these (repeatable)."),
    click.option("--deny", multiple=True, metavar="REGEX", help="Never follow URLs matching one of these (repeatable)."),
    click.option("--user-agent", metavar="TEXT", help=f"User-Agent header.  [default: {settings.DEFAULT_USER_AGENT}]"),
    click.option("--connect-timeout", type=Number("connect_timeout"), metavar="SECONDS",
                 help="[default: 5]" + _range("connect_timeout")),
    click.option("--read-timeout", type=Number("read_timeout"), metavar="SECONDS",
                 help="[default: 10]" + _range("read_timeout")),
    click.option("--max-time", type=Number("max_time"), metavar="SECONDS",
                 help="Total time allowed for one response.  [default: 30]" + _range("max_time")),
    click.option("--max-bytes", type=Number("max_bytes"), help="Body size cap, after decompression.  [default: 10 MiB]"),
    click.option("--max-attempts", type=Number("max_attempts"), help="Attempts for transient failures.  [default: 3]"),
    click.option("--max-redirects", type=Number("max_redirects"), help="[default: 10]"),
    click.option("--max-links", type=Number("max_links"), help="Links taken from one page (the rest: a max-links line in rejected.txt).  [default: 100000]"),
    click.option("--max-pages-per-host", type=Number("max_pages_per_host"),
                 help="Admit at most N URLs of one host (refused ones: rejected.txt, 'host budget')."),
    click.option("--max-delay", type=Number("max_delay"), metavar="SECONDS",
                 help="Cap for robots.txt Crawl-delay and for backing off after 429/503 without "
                      "Retry-After (a server's Retry-After is obeyed up to 1 hour).  [default: 60]"),
    click.option("--ignore-robots/--obey-robots", default=None,
                 help="Do not fetch or obey robots.txt (a warning is printed).  [default: obey]"),
    click.option("--follow-nofollow/--no-follow-nofollow", default=None,
                 help="Follow rel=nofollow links and links of meta robots nofollow pages.  [default: no]"),
    click.option("--auto-throttle/--no-auto-throttle", default=None,
                 help="Each host's delay follows its latency, within [--delay, --max-delay].  [default: off]"),
    click.option("--confirm-404/--no-confirm-404", default=None,
                 help="Try a 404 once more later before failing it.  [default: off]"),
    click.option("--order", type=click.Choice(ORDERS),
                 help="What to fetch next: bfs (shallow first), dfs (newest first) or best (score).  [default: bfs]"),
    click.option("--prefer", multiple=True, metavar="REGEX",
                 help="--order best: URLs matching this go earlier (-50, five levels of depth; repeatable)."),
    click.option("--defer", multiple=True, metavar="REGEX",
                 help="--order best: URLs matching this go later (+100; repeatable)."),
    click.option("--trap", "traps", multiple=True, metavar="RULE=VALUE",
                 help="Tune or turn off (RULE=off) a trap rule: " + ", ".join(TRAP_RULES) + " (repeatable; see README)."),
    click.option("--no-traps/--traps", "no_traps", default=None,
                 help="Turn every trap rule off (--trap may turn some back on).  [default: on]"),
    click.option("--recrawl-min", type=Number("recrawl_min"), metavar="SECONDS",
                 help="A page is checked at most this often by recrawl.  [default: 3600]"),
    click.option("--recrawl-max", type=Number("recrawl_max"), metavar="SECONDS",
                 help="... and at least this often.  [default: 2592000 (30 days)]"),
    click.option("--warc/--no-warc", default=None,
                 help="Keep every response as received in warc/*.warc.gz (WARC 1.1).  [default: off]"),
    click.option("--requisites/--no-requisites", default=None,
                 help="Also fetch the images, stylesheets, scripts, fonts and icons of in-scope pages (wget -p).  [default: off]"),
    click.option("--check-requisites/--no-check-requisites", default=None,
                 help="Find requisites as --requisites does, but only check them (HEAD, else GET without keeping the body).  [default: off]"),
    click.option("--sitemaps", "use_sitemaps", is_flag=True, default=False,
                 help="This run: first queue the URLs of the in-scope hosts' sitemaps (not saved)."),
    click.option("--discover", multiple=True, metavar="REGEX",
                 help="This run: fetch only seeds and URLs matching REGEX (listing pages); leave the rest pending (not saved; repeatable)."),
]


@main.command()
@click.argument("name")
@click.argument("start_urls", nargs=-1, metavar="[START_URL]...")
@crawl_options
@projects_dir_option
@store_option
@click.option("--lease", type=click.FloatRange(min=1), metavar="SECONDS",
              help="--store: a host whose worker shows no sign of life for this long goes to another.  [default: 60]")
@click.option("--join-wait", type=click.FloatRange(min=0), metavar="SECONDS",
              help="--store, joining: wait up to this long for the crawl to be started in Redis by "
                   "another machine (machines started together).  [default: 0, not at all]")
def crawl(name: str, start_urls: tuple[str, ...], projects_dir: Path, store: str | None, lease: float | None,
          join_wait: float | None, **options: Any) -> None:
    """Crawl from START_URLs into the project folder NAME, or resume NAME's crawl.

    A new project needs at least one START_URL. Run the same command again (URLs optional) to
    resume after Ctrl-C, a crash or kill -9; START_URLs given then are added as seeds. Options
    given on resume override the saved settings and are saved.

    With --store redis://HOST:PORT/DB the frontier is in Redis: the same command on another
    machine (START_URLs optional) joins the crawl with that machine's --workers.
    """
    if store:
        _crawl_on_store(name, start_urls, projects_dir, options, store, LEASE if lease is None else lease,
                        join_wait=join_wait or 0.0)
    elif lease is not None:
        raise click.UsageError("--lease is for a crawl on Redis (--store URL)")
    elif join_wait is not None:
        raise click.UsageError("--join-wait is for a crawl on Redis (--store URL)")
    else:
        _crawl(name, start_urls, projects_dir, options)


@main.command()
@click.argument("name")
@click.option("--all", "everything", is_flag=True, help="Check every crawled page now, due or not.")
@click.option("--failed", "failed", is_flag=True,
              help="Fetch every failed URL again (moved from failed.txt back to the queue); "
                   "only those, unless --all is given too.")
@crawl_options
@projects_dir_option
@store_option
def recrawl(name: str, everything: bool, failed: bool, projects_dir: Path, store: str | None,
            **options: Any) -> None:
    """Fetch again the crawled pages of NAME that are due (or --all), with conditional requests.

    Same workers, politeness and options as crawl. A 304 costs no parse; a changed page's new
    links are crawled too; 404/410 marks a page removed (removed.txt). See checks.txt.

    With --store: the crawl in Redis, with this machine's workers (others running it help)."""
    recheck = "all" if everything else None if failed else "due"
    if store:
        _crawl_on_store(name, (), projects_dir, options, store, LEASE, recheck=recheck, refetch_failed=failed)
    folder = project_folder(projects_dir, name)
    if not (folder / settings.SETTINGS).exists():
        raise click.ClickException(f"no project named {name!r} in {projects_dir}")
    _crawl(name, (), projects_dir, options, recheck=recheck, refetch_failed=failed)


@main.command()
@click.argument("name")
@projects_dir_option
@store_option
def seed(name: str, projects_dir: Path, store: str | None) -> None:
    """Queue the URLs of NAME's in-scope sitemaps (robots.txt Sitemap: lines, else /sitemap.xml).

    With --store: into the crawl NAME in Redis."""
    if store:
        _crawl_on_store(name, (), projects_dir, {}, store, LEASE, seed_only=True)
    folder = project_folder(projects_dir, name)
    if not (folder / settings.SETTINGS).exists():
        raise click.ClickException(f"no project named {name!r} in {projects_dir}")
    try:
        code = Crawl(folder, _config(folder, (), {})).run(seed_only=True)
    except (CrawlError, StoreError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        raise click.ClickException(f"{e.filename or folder}: {e.strerror or e}") from None
    sys.exit(code)


@main.command()
@click.argument("name")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True,
              help="JSON lines (one object per line) or CSV with a header row.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Where to write the records.  [default: standard output]")
@projects_dir_option
@store_option
def export(name: str, fmt: str, output: Path | None, projects_dir: Path, store: str | None) -> None:
    """Write one record per page (url, status, title, state ...) as JSON lines or CSV."""
    from .export import Skipped

    folder = project_folder(projects_dir, name)
    if not store and not (folder / settings.SETTINGS).exists():
        raise click.ClickException(f"no project named {name!r} in {projects_dir}")
    if output is not None and not output.parent.is_dir():
        raise click.ClickException(f"cannot write {output}: folder {output.parent} does not exist")
    skipped = Skipped()
    if store:   # the logs export reads, from Redis into a folder of their own
        import tempfile
        from .cluster import EXPORTED

        with tempfile.TemporaryDirectory(prefix="spider-export-") as d:
            _export(_copy_out(store, name, Path(d), EXPORTED), fmt, output, skipped)
    else:
        _export(folder, fmt, output, skipped)
    if skipped:
        click.echo(skipped.message(), err=True)


def _copy_out(url: str, name: str, where: Path, logs: tuple[str, ...], pending: bool = False) -> Path:
    """What export or report reads of the crawl NAME in Redis, as files in ``where``/NAME."""
    from .cluster import ClusterStore, copy_out

    folder = where / name
    try:
        redis_store = ClusterStore.connect(url, name)
        if redis_store.saved_settings() is None:
            raise click.ClickException(f"no crawl named {name!r} in Redis at {url}")
        folder.mkdir()
        copy_out(redis_store, folder, logs, pending)
        return folder
    except (StoreError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        raise click.ClickException(f"{e.filename or folder}: {e.strerror or e}") from None


def _export(folder: Path, fmt: str, output: Path | None, skipped: Any) -> None:
    from .export import export as write_export

    try:
        if output is None:
            stream = click.get_text_stream("stdout", encoding="utf-8")
            try:
                write_export(folder, fmt, stream, skipped)
                stream.flush()
            except BrokenPipeError:   # `export ... | head`: the reader has what it wanted
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        else:
            import io
            from .safefs import atomic_write
            buf = io.StringIO()
            n = write_export(folder, fmt, buf, skipped)
            atomic_write(output, buf.getvalue())
            click.echo(f"{n} records written to {output}", err=True)
    except OSError as e:
        raise click.ClickException(f"{e.filename or output or folder}: {e.strerror or e}") from None


def _config(folder: Path, seeds: tuple[str, ...], options: dict[str, Any],
            saved: dict[str, Any] | None = None) -> CrawlConfig:
    """Defaults, then the project's settings.txt (or ``saved``), then the options given now."""
    exists = saved is not None or (folder / settings.SETTINGS).exists()
    given = {k: (v if v != () else None) for k, v in options.items()}
    try:
        if saved is None:
            saved = settings.load(folder) if exists else {}
        old_seeds = tuple(saved.get("seeds", ()))
        given["seeds"] = old_seeds + tuple(s for s in seeds if s not in old_seeds)
        return settings.build(saved, given)
    except ValueError as e:
        raise click.ClickException(str(e)) from None


def _crawl(name: str, start_urls: tuple[str, ...], projects_dir: Path, options: dict[str, Any],
           recheck: str | None = None, refetch_failed: bool = False) -> None:
    folder = project_folder(projects_dir, name)
    seeds = parse_start_urls(start_urls)
    if not (folder / settings.SETTINGS).exists() and not seeds:
        raise click.UsageError(f"project {name!r} does not exist in {projects_dir}: "
                               "give at least one START_URL to create it")
    sitemaps = bool(options.pop("use_sitemaps", False))
    config = _config(folder, seeds, options)
    run(folder, config, seeds, recheck=recheck, sitemaps=sitemaps, refetch_failed=refetch_failed)


def _crawl_on_store(name: str, start_urls: tuple[str, ...], projects_dir: Path, options: dict[str, Any],
                    url: str, lease: float, recheck: str | None = None, refetch_failed: bool = False,
                    seed_only: bool = False, join_wait: float = 0.0) -> None:
    """Start or join the crawl NAME whose frontier is in Redis at ``url`` (spider/cluster.py);
    ``recheck``/``refetch_failed``: a recrawl; ``seed_only``: the seed command; ``join_wait``:
    seconds a joining machine waits for another to start the crawl."""
    from .cluster import ClusterCrawl, ClusterStore
    from .crawl import order_of

    folder = project_folder(projects_dir, name)
    seeds = parse_start_urls(start_urls)
    sitemaps = bool(options.pop("use_sitemaps", False))
    try:
        store = ClusterStore.connect(url, name, folder)
        saved = store.saved_settings()
        if saved is None and (recheck or refetch_failed or seed_only):
            raise click.ClickException(f"no crawl named {name!r} in Redis at {url}")
        if saved is None and not seeds and join_wait > 0:
            saved = _wait_for_crawl(store, name, url, join_wait)
        if saved is None and not seeds:
            waited = f" (waited {join_wait:g} s)" if join_wait > 0 else ""
            raise click.UsageError(f"no crawl named {name!r} in Redis at {url}{waited}: "
                                   "give at least one START_URL to start it, or --join-wait SECONDS "
                                   "to wait for the machine that does")
        config = _config(folder, seeds, options, saved or {})
        store.max_pages, store.max_per_host = config.max_pages, config.max_pages_per_host
        store.order = order_of(config)
        store.discover(config)
        if saved is None:
            # A new crawl: its seeds go in before its settings, which are what a joining machine
            # waits for, so a machine that joins at once never finds a crawl with nothing queued
            # (its workers would take that for a finished crawl and stop).
            store.add(QueueEntry(s, 0, 0, 0.0, "-") for s in config.seeds)
        store.save_settings(config)
        folder.mkdir(parents=True, exist_ok=True)
        code = ClusterCrawl(folder, config, store, seeds=seeds, lease=lease, recheck=recheck, sitemaps=sitemaps,
                            refetch_failed=refetch_failed).run(seed_only=seed_only)
    except (CrawlError, StoreError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        raise click.ClickException(f"{e.filename or folder}: {e.strerror or e}") from None
    raise CrawlExit(code)   # the same fast end as a crawl on the files (its children reaped)


def _wait_for_crawl(store: Any, name: str, url: str, seconds: float) -> dict[str, Any] | None:
    """``--join-wait``: the crawl's saved settings once another machine has started it, or None
    after ``seconds``. Ctrl-C meanwhile ends the command as an interrupted crawl does."""
    click.echo(f"waiting up to {seconds:g} s for crawl {name!r} to start in Redis at {url}", err=True)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            time.sleep(min(JOIN_POLL, max(0.0, end - time.monotonic())))
            saved = store.saved_settings()
            if saved is not None:
                return saved
    except KeyboardInterrupt:
        click.echo(f"interrupted while waiting for crawl {name!r}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    return None


def run(folder: Path, config: CrawlConfig, seeds: tuple[str, ...],
        after: Callable[[], None] | None = None, recheck: str | None = None, sitemaps: bool = False,
        refetch_failed: bool = False) -> None:
    """Create or update the project folder, then crawl; exit with the crawl's code."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        code = Crawl(folder, config, seeds=seeds, recheck=recheck, sitemaps=sitemaps,
                     refetch_failed=refetch_failed).run()
    except (CrawlError, StoreError) as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        raise click.ClickException(f"{e.filename or folder}: {e.strerror or e}") from None
    if after is not None and code == 0:
        after()
    raise CrawlExit(code)


class CrawlExit(SystemExit):
    """The end of a crawl run on the project's files: its parent wrote its files through
    descriptors and ``with`` blocks and reaped its children, so the entry point may end the
    process without the interpreter's teardown (``spider/_entry.py``)."""


@main.command()
@click.argument("name")
@projects_dir_option
@store_option
def status(name: str, projects_dir: Path, store: str | None) -> None:
    """Show a project's progress: pending, in flight, crawled, failed, hosts, running or not.

    With --store: the crawl in Redis, and the machines taking part (hosts held, rates, WARC folders)."""
    from .status import report

    folder = project_folder(projects_dir, name)
    if store:
        from .cluster import ClusterStore, status_report
        try:
            click.echo(status_report(ClusterStore.connect(store, name)))
        except (StoreError, ValueError) as e:
            raise click.ClickException(str(e)) from None
        return
    if not (folder / settings.SETTINGS).exists():
        raise click.ClickException(f"no project named {name!r} in {projects_dir}")
    try:
        click.echo(report(folder, name))
    except (StoreError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        raise click.ClickException(f"{e.filename or folder}: {e.strerror or e}") from None


@main.command()
@click.argument("name")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Where to write the page.  [default: projects/NAME/report.html]")
@projects_dir_option
@store_option
def report(name: str, output: Path | None, projects_dir: Path, store: str | None) -> None:
    """Write a self-contained HTML report of a crawl (charts as inline SVG) and print its path.

    With --store: the crawl in Redis; the page goes to projects/NAME/report.html on this
    machine unless --output says where."""
    from .report import write_report

    folder = project_folder(projects_dir, name)
    if not store and not (folder / settings.SETTINGS).exists():
        raise click.ClickException(f"no project named {name!r} in {projects_dir}")
    if output is not None and not output.parent.is_dir():
        raise click.ClickException(f"cannot write {output}: folder {output.parent} does not exist")
    if store:
        import tempfile
        from .cluster import REPORTED

        with tempfile.TemporaryDirectory(prefix="spider-report-") as d:
            copy = _copy_out(store, name, Path(d), REPORTED, pending=True)
            try:
                folder.mkdir(parents=True, exist_ok=True)
                path = write_report(copy, output or folder / "report.html")
            except OSError as e:
                raise click.ClickException(f"{e.filename or output or folder}: {e.strerror or e}") from None
        click.echo(str(path))
        return
    try:
        path = write_report(folder, output)
    except StoreError as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        raise click.ClickException(f"{e.filename or output or folder}: {e.strerror or e}") from None
    click.echo(str(path))


def transfer_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options of ``push`` and ``pull``."""
    for option in reversed(TRANSFER_OPTIONS):
        f = option(f)
    return f


TRANSFER_OPTIONS = [
    click.option("--store", "store_url", required=True, metavar="redis://HOST:PORT/DB",
                 help="The Redis that holds (or will hold) the crawl; its keys are prefixed by NAME."),
    click.option("--replace", is_flag=True, help="Overwrite what is there already."),
    projects_dir_option,
]


def _transfer(action: Callable[[], list[str]], folder: Path) -> None:
    try:
        for line in action():
            click.echo(line, err=True)
    except StoreError as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:
        raise click.ClickException(f"{e.filename or folder}: {e.strerror or e}") from None


@main.command()
@click.argument("name")
@transfer_options
def push(name: str, store_url: str, replace: bool, projects_dir: Path) -> None:
    """Load project NAME (every state file) into Redis, to crawl it there with --store.

    A crawl that was killed is recovered first, as `crawl NAME` would. Refused if Redis already
    holds a crawl named NAME, unless --replace. The project folder is left as it is."""
    from .frontier.transfer import push as push_project

    folder = project_folder(projects_dir, name)
    if not (folder / settings.SETTINGS).exists():
        raise click.ClickException(f"no project named {name!r} in {projects_dir}")
    _transfer(lambda: push_project(folder, store_url, replace=replace), folder)


@main.command()
@click.argument("name")
@transfer_options
def pull(name: str, store_url: str, replace: bool, projects_dir: Path) -> None:
    """Write the Redis crawl NAME back as the plain-text project folder NAME.

    Refused while the crawl runs on any machine, and if the folder exists and is not empty,
    unless --replace. Redis is left as it is. Resume it alone with `crawl NAME`."""
    from .frontier.transfer import pull as pull_project

    folder = project_folder(projects_dir, name)
    _transfer(lambda: pull_project(projects_dir, name, store_url, replace=replace), folder)


@main.command()
@click.option("--workers", type=click.IntRange(1, 64), default=4, show_default=True)
@projects_dir_option
def demo(workers: int, projects_dir: Path) -> None:
    """Serve the bundled demo site on 127.0.0.1 and crawl it into projects/demo."""
    from .demo import serve

    folder = project_folder(projects_dir, "demo")
    _clear_demo(folder)
    server, url = serve()
    click.echo(f"serving the demo site at {url}", err=True)
    config = CrawlConfig(seeds=(normalize(url),), workers=workers, delay=0.05, max_depth=10, demo=True)
    more = "" if projects_dir == Path("projects") else f" --projects-dir {projects_dir}"
    try:
        run(folder, config, config.seeds, after=lambda: click.echo(
            f"the crawl is in {folder}/ (crawled.txt, failed.txt, rejected.txt, fetch.log); "
            f"try: python main.py status demo{more}", err=True))
    finally:
        server.shutdown()


def _clear_demo(folder: Path) -> None:
    """Empty the demo's folder for a fresh crawl, under the folder's crawl.lock: a second demo
    started while one crawls is refused with one line (it deleted the first one's folder, the
    lock with it, and crawled beside it). The lock file itself stays: whoever deletes or writes
    the files holds the lock on that same file."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = ProjectLock(folder / LOCK)
        if not lock.acquire():
            raise click.ClickException(f"a crawl of {folder} is already running (another demo?); "
                                       "wait for it or stop it (Ctrl-C) first") from None
        try:
            leftovers = [p for p in folder.iterdir() if p.name != LOCK]
            if leftovers and not _is_demo(folder):
                raise click.ClickException(f"{folder} exists and is not a demo crawl; move it away first")
            for p in leftovers:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
        finally:
            lock.release()
    except OSError as e:
        raise click.ClickException(f"{e.filename or folder}: {e.strerror or e}") from None


def _is_demo(folder: Path) -> bool:
    try:
        return bool(settings.load(folder).get("demo", False))
    except (OSError, ValueError):
        return False


if __name__ == "__main__":
    main()
