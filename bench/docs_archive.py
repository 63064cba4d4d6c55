"""A crawl of a real documentation site into a WARC archive, and a check of that archive.

Python's HTML documentation (Debian's ``python3-doc``: 530 pages, their stylesheets, scripts,
fonts and images) is copied to ``bench/out/docs-site`` with one broken link planted in
``library/index.html``, served by a private nginx on 127.0.0.1 (bench/site.py's, with nginx's
own MIME types so stylesheets are ``text/css``), and crawled with ``--requisites --warc``.
Printed: what was crawled (pages, requisites), failed and refused, the broken-links section of
``status``, and the archive's counts: response records, records cut short (``WARC-Truncated``),
records whose body is not their Content-Length, and whether every digest matches (warcio).

    python bench/docs_archive.py                 # needs python3-doc, nginx and warcio
    python bench/docs_archive.py --check-requisites   # HEAD the requisites instead

Exit status 1 when the archive misses a body, a digest does not match or the planted link is
not in the broken-links view.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import measure  # noqa: E402  (bench/measure.py: kill_tree, spider_cmd, load_site_module)

SITE = measure.load_site_module()
DOCS = Path("/usr/share/doc/python3/html")
PLANTED = "planted-missing.html"
NAME = "docs-archive"


class DocsNginx(SITE.Nginx):
    """bench/site.py's nginx, knowing the MIME types of a real site (text/css, image/png, ...)."""

    def write_conf(self) -> None:
        super().write_conf()
        conf = self.conf_path.read_text().replace("types { text/html html; text/plain txt; }",
                                                  "include /etc/nginx/mime.types;")
        self.conf_path.write_text(conf)


def copy_docs(docs: Path, dest: Path) -> Path:
    """The docs with their symlinks followed (jquery.js, underscore.js) and one planted link."""
    if not (dest / "library" / "index.html").is_file():
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(docs, dest, symlinks=False)
    index = dest / "library" / "index.html"
    text = index.read_text(encoding="utf-8")
    if PLANTED not in text:
        index.write_text(text.replace("</body>", f'<a href="{PLANTED}">planted</a></body>'), encoding="utf-8")
    return dest


def archive_counts(folder: Path) -> dict[str, int]:
    from warcio.archiveiterator import ArchiveIterator   # the `test` extra

    counts = dict(files=0, records=0, responses=0, head=0, truncated=0, short=0, bad_digest=0, body_bytes=0)
    methods: dict[str, str] = {}   # request record id -> its method (a HEAD's response has no body)
    for path in sorted(folder.glob("*.warc.gz")):
        counts["files"] += 1
        with open(path, "rb") as fh:
            it = ArchiveIterator(fh, check_digests=True)
            for rec in it:
                counts["records"] += 1
                if rec.rec_type == "request":
                    methods[rec.rec_headers.get_header("WARC-Record-ID")] = rec.http_headers.protocol
                if rec.rec_type != "response":
                    continue
                counts["responses"] += 1
                if methods.get(rec.rec_headers.get_header("WARC-Concurrent-To")) == "HEAD":
                    counts["head"] += 1
                    continue
                body = rec.raw_stream.read()   # reading it is what checks the digests
                counts["body_bytes"] += len(body)
                counts["truncated"] += rec.rec_headers.get_header("WARC-Truncated") is not None
                declared = rec.http_headers.get_header("Content-Length")
                counts["short"] += declared is not None and int(declared) != len(body)
                counts["bad_digest"] += rec.digest_checker.passed is False
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=Path, default=DOCS)
    ap.add_argument("--port", type=int, default=0, help="nginx port (default: a free one)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--check-requisites", action="store_true", help="HEAD the requisites instead of fetching them")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds the crawl may take")
    ap.add_argument("--spider-dir", type=Path, help="a folder holding the main.py to run")
    args = ap.parse_args()
    if not (args.docs / "library" / "index.html").is_file():
        print(f"Error: no HTML documentation in {args.docs} (apt-get install python3-doc, or --docs DIR)",
              file=sys.stderr)
        return 1
    try:
        import warcio  # noqa: F401
    except ImportError:
        print("Error: warcio is needed to read the archive back (pip install -e '.[test]')", file=sys.stderr)
        return 1
    measure.set_spider_dir(args.spider_dir)
    site_dir = copy_docs(args.docs, SITE.OUT_DIR / "docs-site")
    port = args.port or SITE.free_port()
    projects = SITE.OUT_DIR / "docs-projects"
    shutil.rmtree(projects / NAME, ignore_errors=True)
    projects.mkdir(parents=True, exist_ok=True)
    seed = f"http://{SITE.HOST}:{port}/index.html"
    mode = "--check-requisites" if args.check_requisites else "--requisites"
    with DocsNginx(site_dir, port):
        cmd = measure.spider_cmd("crawl", NAME, seed, mode, "--warc", "--workers", str(args.workers),
                                 "--delay", "0", "--projects-dir", str(projects))
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=measure.SPIDER_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            measure.kill_tree(proc)
            print(f"Error: the crawl took over {args.timeout:g} s", file=sys.stderr)
            return 1
        elapsed = time.monotonic() - t0
        if proc.returncode != 0:
            print(f"Error: the crawl exited {proc.returncode}: {err.strip()[-500:]}", file=sys.stderr)
            return 1
    folder = projects / NAME
    crawled = [line.split("\t") for line in (folder / "crawled.txt").read_text(encoding="utf-8").splitlines()
               if line and not line.startswith("#")]
    html = sum(1 for f in crawled if f[2] == "text/html")
    failed = [line.split("\t")[0] for line in (folder / "failed.txt").read_text(encoding="utf-8").splitlines()
              if line and not line.startswith("#")] if (folder / "failed.txt").exists() else []
    status = subprocess.run(measure.spider_cmd("status", NAME, "--projects-dir", str(projects)),
                            cwd=measure.SPIDER_DIR, capture_output=True, text=True).stdout
    broken: list[str] = []   # status's broken-links section: its header line and the lines below it
    for line in status.splitlines():
        if line.startswith("broken") or (broken and line.startswith(" " * 10) and ":" not in line.split()[0]):
            broken.append(line)
        elif broken:
            break
    counts = archive_counts(folder / "warc")
    print(f"crawl {mode} --warc --workers {args.workers} --delay 0 of {seed}: {elapsed:.1f} s "
          f"(machine shared: the time is a rough figure)")
    print(f"crawled   {len(crawled)} URLs: {html} HTML pages, {len(crawled) - html} other (requisites)")
    print(f"failed    {len(failed)}")
    print("\n".join(broken) or "broken    (none shown)")
    print(f"archive   {counts['files']} files, {counts['records']} records, {counts['responses']} responses "
          f"({counts['head']} to HEAD, bodiless by definition), {counts['body_bytes']:,} body bytes")
    print(f"          truncated {counts['truncated']}, body != Content-Length {counts['short']}, "
          f"digest mismatches {counts['bad_digest']}")
    planted = f"http://{SITE.HOST}:{port}/library/{PLANTED}"
    good = (counts["truncated"] == counts["short"] == counts["bad_digest"] == 0 and planted in failed
            and any(planted in line for line in broken) and counts["responses"] >= len(crawled) + len(failed))
    print("OK: every response record has its body; the planted link is in the broken-links view" if good else
          "FAILED: see the counts above")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
