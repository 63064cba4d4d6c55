"""The done-when of issue 16 on a real documentation site nobody here wrote: 30 pages of
Python's HTML documentation (Debian's ``python3-doc``) with all their ``_static`` and ``_images``
files, served by the tests' own loopback server, one broken link planted in a page. A crawl with
``--requisites --warc`` must fetch every page and what it needs (stylesheets through a chain of
four @imports, scripts, icons, images), show the planted link in the broken-links view (status,
report, export), and leave an archive in which every response record has its whole body.

Links to pages outside the copy are kept out with ``--allow`` (they are refused, not broken).
Skipped when python3-doc is not installed (``apt-get install python3-doc``)."""

from __future__ import annotations

import json
import mimetypes
import os
import re
from pathlib import Path

import pytest

from test_cli import cli, crawl, data_lines, ok

DOCS = Path("/usr/share/doc/python3/html")
PAGES = 30
PLANTED = "planted-missing.html"



@pytest.fixture(autouse=True)
def _docs_installed() -> None:
    """Skipped where Python's docs cannot be had; in CI (.ci/run installs them) a failure."""
    if (DOCS / "library" / "index.html").is_file():
        return
    why = "Python's HTML docs are not installed (apt-get install python3-doc)"
    if os.environ.get("CI"):
        pytest.fail(f"{why}; CI must have them (.ci/run installs them)")
    pytest.skip(why)


def library_pages() -> list[str]:
    """library/index.html, the first pages it links to, and pathlib.html (it shows an image)."""
    index = (DOCS / "library" / "index.html").read_text(encoding="utf-8")
    names = ["index.html"] + list(dict.fromkeys(re.findall(r'href="([a-z_0-9]+\.html)"', index)))
    chosen = [n for n in names if n != "pathlib.html"][:PAGES - 1] + ["pathlib.html"]
    return ["library/" + n for n in chosen]


def serve_copy(site, pages: list[str]) -> None:
    """The pages, every _static and _images file, and a broken link planted in the first page."""
    files = pages + [str(p.relative_to(DOCS)) for d in ("_static", "_images")
                     for p in sorted((DOCS / d).iterdir()) if p.is_file()]
    for rel in files:
        body = (DOCS / rel).read_bytes()
        if rel == pages[0]:
            body = body.replace(b"</body>", f'<a href="{PLANTED}">planted</a></body>'.encode())
        ctype = mimetypes.guess_type(rel)[0] or "application/octet-stream"
        site.route("/" + rel, body=body, content_type=ctype + ("; charset=utf-8" if ctype.startswith("text/") else ""))


def test_a_crawl_of_python_docs_shows_broken_links_and_archives_every_body(site, projects_dir: Path) -> None:
    warcio = pytest.importorskip("warcio")   # in the `test` extra
    from warcio.archiveiterator import ArchiveIterator

    pages = library_pages()
    serve_copy(site, pages)
    names = "|".join(re.escape(p.removeprefix("library/").removesuffix(".html")) for p in pages + [PLANTED])
    allow = rf"^{re.escape(site.url('/'))}(_static/|_images/|library/({names})\.html$)"
    ok(crawl(projects_dir, "docs", site.url("/" + pages[0]), "--requisites", "--warc", "--allow", allow))
    folder = projects_dir / "docs"

    crawled = {f[0]: f for f in data_lines(folder / "crawled.txt")}
    assert {site.url("/" + p) for p in pages} <= set(crawled)
    needed = ["_static/pydoctheme.css", "_static/default.css", "_static/classic.css", "_static/basic.css",
              "_static/file.png", "_static/caret-down.svg", "_static/pygments.css", "_static/py.svg",
              "_static/jquery.js", "_static/sidebar.js", "_images/pathlib-inheritance.png"]
    requisites = {u for u, f in crawled.items() if "/_static/" in u or "/_images/" in u}
    assert {site.url("/" + n) for n in needed} <= {u.split("?")[0] for u in requisites}
    assert all(f[1] == "200" for f in crawled.values())

    # the broken-links view: exactly the planted link, with the page that has it
    planted = site.url("/library/" + PLANTED)
    assert [f[0] for f in data_lines(folder / "failed.txt")] == [planted]
    status = ok(cli(projects_dir, "status", "docs")).stdout
    assert "broken    1 failed URL:" in status and planted in status and site.url("/" + pages[0]) in status, status
    ok(cli(projects_dir, "report", "docs"))
    report = (folder / "report.html").read_text(encoding="utf-8")
    assert "Broken links" in report and planted in report
    exported = {r["url"]: r for r in map(json.loads, ok(cli(projects_dir, "export", "docs")).stdout.splitlines())}
    assert exported[planted]["referrers"] == [site.url("/" + pages[0])]

    # the archive: a response record for every URL fetched, each with its whole body
    records = {}
    for path in sorted((folder / "warc").glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests="raise"):
                if rec.rec_type == "response":
                    uri = rec.rec_headers.get_header("WARC-Target-URI")
                    records[uri] = (rec.rec_headers.get_header("WARC-Truncated"),
                                    len(rec.raw_stream.read()), rec.http_headers.get_header("Content-Length"))
    assert set(crawled) | {planted} <= set(records)
    for uri, (truncated, size, declared) in records.items():
        assert truncated is None and size == int(declared), uri
