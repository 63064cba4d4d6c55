"""More link sources and page requisites (issue 16).

Link sources: <iframe>/<frame> src, <meta http-equiv=refresh> targets, <link> rels that name
pages, and the Link and Refresh response headers, also on responses that are not HTML.
Requisites (``crawl --requisites``, as wget -p): the images, stylesheets, scripts, fonts and icons
of in-scope pages, fetched and recorded with their page, the url()s of stylesheets too; with
``--check-requisites`` only checked (HEAD, GET when HEAD is refused), broken ones in the
broken-links view. Unit tests of the parser, then real crawls in subprocesses of loopback sites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from redis_server import RedisServer, redis_server  # noqa: F401  (a pytest fixture)
from spider.links import LinkFinder, css_urls, header_links, refresh_target, srcset_urls
from test_cli import assert_error_line, cli, crawl, data_lines, links, ok

# ------------------------------------------------------------------------------------ parsing


def test_frames_meta_refresh_and_page_rels_are_links() -> None:
    page = LinkFinder("http://a.test/").parse(b"""<html><head>
        <link rel="next" href="n.html"><link rel="prev" href="p.html"><link rel="alternate" hreflang="de" href="de/">
        <link rel="stylesheet" href="s.css"><link rel="alternate stylesheet" href="alt.css">
        <link rel="search" type="application/opensearchdescription+xml" href="os.xml">
        <link rel="canonical" href="c.html">
        <meta http-equiv="Refresh" content="5; URL='later.html'"></head>
        <body><a href="a.html">a</a><iframe src="f.html"></iframe><frameset><frame src="fr.html"></frameset>
        <img src="i.png"></body></html>""")
    # The <frameset> after the body's content is ignored with its <frame>, as a browser ignores it (HTML
    # Standard 13.2.6.4.7, "in body", start tag "frameset": the frameset-ok flag is "not ok"); libxml2
    # kept it. A frameset document's frames are links:
    assert [link.href for link in page.links] == ["n.html", "p.html", "de/", "later.html", "a.html", "f.html"]
    assert page.canonical == "c.html" and page.requisites == []   # requisites only when asked for
    frames = LinkFinder("http://a.test/").parse(b"""<html><head><title>t</title></head>
        <frameset cols="50%,50%"><frame src="fr.html"><frame src="fr2.html" name="x"></frameset></html>""")
    assert [link.href for link in frames.links] == ["fr.html", "fr2.html"]


def test_requisites_are_found_when_asked_for() -> None:
    page = LinkFinder("http://a.test/", requisites=True).parse(b"""<html><head>
        <link rel="stylesheet" href="s.css"><link rel="icon" href="fav.ico"><link rel="preload" href="f.woff2" as="font">
        <script src="app.js"></script><style>@import "more.css"; body { background: url(bg.png) }</style></head>
        <body style="background-image: url('body.jpg')"><img src="i.png" srcset="i2.png 2x, i3.png 3x">
        <picture><source srcset="w.webp"></picture><video src="v.mp4" poster="v.jpg"><track src="t.vtt"></video>
        <audio src="a.ogg"></audio><embed src="e.swf"><object data="o.svg"></object>
        <input type="image" src="go.png"><input type="text" src="no.png"><a href="page.html">p</a></body></html>""")
    assert page.requisites == ["s.css", "fav.ico", "f.woff2", "app.js", "more.css", "bg.png", "i.png", "i2.png",
                               "i3.png", "w.webp", "v.mp4", "v.jpg", "t.vtt", "a.ogg", "e.swf", "o.svg", "go.png",
                               "body.jpg"]
    assert [link.href for link in page.links] == ["page.html"]


def test_the_small_parsers() -> None:
    assert refresh_target("0;url=/x") == "/x" and refresh_target("3") is None
    assert refresh_target('1; url="/q?a=1"') == "/q?a=1"
    assert srcset_urls(" a.png, b.png 480w ,c.png 2x") == ["a.png", "b.png", "c.png"]
    assert css_urls("a{b:url(data:image/png;base64,xx)} c{d:url( 'e.woff' ) format('woff')}") == ["e.woff"]
    assert header_links('<https://a.test/doc>; rel="canonical", </s.css>; rel=stylesheet, </x>; rel="search"',
                        None) == (["https://a.test/doc"], ["/s.css"])


@pytest.mark.timeout(60)   # quadratic, these took hours (url(url(... 20,000 times: 28 s)
@pytest.mark.parametrize("text", ["url(" * 300_000, "url(" + " " * 1_000_000 + "x", 'url("' * 300_000,
                                  "url(a " * 300_000, "/*" * 300_000, "@import " * 300_000],
                         ids=["nested", "spaces", "quotes", "unclosed", "comments", "imports"])
def test_css_urls_stay_linear_on_hostile_stylesheets(text: str) -> None:
    assert css_urls(text) == []
    assert srcset_urls(text) != [] or not text.strip()   # and srcset's scan ends too


@pytest.mark.timeout(60)
def test_header_and_refresh_parsing_stay_linear() -> None:
    assert header_links("<a>" + "; " * 300_000 + "rel=next", " " * 300_000 + "5") == (["a"], [])
    assert header_links(";" + " " * 1_000_000, "1;" + " " * 1_000_000) == ([], [])


# ------------------------------------------------------------------------------------ crawls


def crawled(projects: Path, name: str) -> dict[str, list[str]]:
    return {f[0]: f for f in data_lines(projects / name / "crawled.txt")}


def test_a_crawl_follows_frames_refresh_page_rels_and_headers(site, projects_dir: Path) -> None:
    site.route("/", body='<html><head><link rel="next" href="/next.html"><meta http-equiv="refresh" '
                         'content="10;url=/refreshed.html"></head><body><iframe src="/framed.html"></iframe>'
                         '<a href="/doc.pdf">pdf</a></body></html>',
               headers={"Link": '</from-header.html>; rel="alternate"', "Refresh": "5; url=/header-refresh.html"})
    site.route("/doc.pdf", body=b"%PDF-1.4", content_type="application/pdf",
               headers={"Link": '</pdf-canonical.html>; rel="canonical"'})
    for path in ("/next.html", "/refreshed.html", "/framed.html", "/from-header.html", "/header-refresh.html",
                 "/pdf-canonical.html"):
        site.route(path, body=f"<p>{path}</p>")
    ok(crawl(projects_dir, "ls", site.url("/")))
    pages = crawled(projects_dir, "ls")
    assert set(pages) == {site.url(p) for p in ("/", "/doc.pdf", "/next.html", "/refreshed.html", "/framed.html",
                                                "/from-header.html", "/header-refresh.html", "/pdf-canonical.html")}
    assert pages[site.url("/")][9] == "6"        # outlinks: <link rel=next>, refresh, iframe, <a>, 2 headers ...
    assert pages[site.url("/doc.pdf")][9] == "1"  # ... and one Link header of the PDF
    # not requisites: no image was asked for


REQUISITE_PAGE = ('<html><head><link rel="stylesheet" href="/css/site.css"><link rel="icon" href="/favicon.ico">'
                  '<script src="/app.js"></script></head><body><img src="/img/logo.png"><img src="/img/gone.png">'
                  '<img src="http://elsewhere.test/cdn.png"><a href="/page2.html">2</a></body></html>')


def requisite_site(site) -> None:
    site.route("/", body=REQUISITE_PAGE)
    site.route("/page2.html", body="<p>two</p><img src='/img/logo.png'>")
    site.route("/css/site.css", body="@import 'more.css'; body{background:url(../img/bg.png)}",
               content_type="text/css")
    site.route("/css/more.css", body="@font-face{src:url(/fonts/f.woff2) format('woff2')}", content_type="text/css")
    for path, ctype in (("/favicon.ico", "image/x-icon"), ("/app.js", "text/javascript"),
                        ("/img/logo.png", "image/png"), ("/img/bg.png", "image/png"), ("/fonts/f.woff2", "font/woff2")):
        site.route(path, body=b"\x00" * 100, content_type=ctype)


def test_requisites_are_fetched_and_recorded_with_their_page(site, projects_dir: Path) -> None:
    requisite_site(site)
    ok(crawl(projects_dir, "rq", site.url("/"), "--requisites", "--max-depth", "0"))
    pages = crawled(projects_dir, "rq")
    wanted = {"/", "/css/site.css", "/css/more.css", "/favicon.ico", "/app.js", "/img/logo.png", "/img/bg.png",
              "/fonts/f.woff2"}
    assert set(pages) == {site.url(p) for p in wanted}   # --max-depth 0: the page and all it needs, no page2
    assert pages[site.url("/img/logo.png")][1:5] == ["200", "image/png", "100", "0"]   # the page's depth
    folder = projects_dir / "rq"
    [gone] = data_lines(folder / "failed.txt")
    assert gone[0] == site.url("/img/gone.png") and gone[1] == "404" and gone[6] == site.url("/")
    rejected = {f[0]: f for f in data_lines(folder / "rejected.txt")}
    assert rejected["http://elsewhere.test/cdn.png"][1:] == ["scope", site.url("/")]   # same scope as pages
    status = ok(cli(projects_dir, "status", "rq")).stdout
    assert site.url("/img/gone.png") in status and "linked from 1 page, e.g. " + site.url("/") in status, status
    exported = {json.loads(line)["url"]: json.loads(line)
                for line in ok(cli(projects_dir, "export", "rq")).stdout.splitlines()}
    assert exported[site.url("/img/gone.png")]["referrers"] == [site.url("/")]
    assert exported[site.url("/img/logo.png")]["referrers"] == [site.url("/")]   # a crawled requisite too
    assert exported[site.url("/fonts/f.woff2")]["referrers"] == [site.url("/css/more.css")]
    assert exported[site.url("/")]["referrers"] is None   # an HTML page: its links are its own
    # a font's referrer is the stylesheet that named it
    assert any(f[0] == site.url("/css/more.css") and site.url("/fonts/f.woff2") in f[3]
               for f in data_lines(folder / "links.txt"))
    # requisites are not crawled for links: a stylesheet is read for url()s only
    assert site.hits["/page2.html"] == 0 and site.hits["/app.js"] == 1


def test_without_the_option_no_requisite_is_fetched(site, projects_dir: Path) -> None:
    requisite_site(site)
    ok(crawl(projects_dir, "plain", site.url("/")))
    assert set(crawled(projects_dir, "plain")) == {site.url("/"), site.url("/page2.html")}


def test_check_requisites_uses_head_then_get_when_head_is_refused(site, projects_dir: Path) -> None:
    requisite_site(site)

    def no_head(info):   # a server that refuses HEAD
        return (405, None, b"") if info.method == "HEAD" else (200, {"Content-Type": "image/png"}, b"png")
    site.route("/app.js", handler=no_head, content_type=None)
    ok(crawl(projects_dir, "chk", site.url("/"), "--check-requisites", "--max-depth", "0"))
    methods = {(r.method, r.path) for r in site.requests}
    assert ("HEAD", "/img/logo.png") in methods and ("GET", "/img/logo.png") not in methods
    assert ("HEAD", "/app.js") in methods and ("GET", "/app.js") in methods
    assert ("GET", "/css/site.css") in methods   # a stylesheet is read for the fonts and images it names
    pages = crawled(projects_dir, "chk")
    assert pages[site.url("/img/logo.png")][1:4] == ["200", "image/png", "100"]   # the declared length
    assert pages[site.url("/app.js")][1] == "200" and site.url("/fonts/f.woff2") in pages
    [gone] = data_lines(projects_dir / "chk" / "failed.txt")
    assert gone[0] == site.url("/img/gone.png") and gone[6] == site.url("/")


@pytest.mark.parametrize("key", ["requisites", "check_requisites"])
def test_a_bad_requisites_setting_is_one_error_line(site, projects_dir: Path, key: str) -> None:
    site.route("/", body="<p>x</p>")
    ok(crawl(projects_dir, "bad", site.url("/")))
    settings = projects_dir / "bad" / "settings.txt"
    text = settings.read_text(encoding="utf-8").replace(f"\n{key} = False\n", f"\n{key} = sometimes\n")
    settings.write_text(text, encoding="utf-8")
    line = assert_error_line(crawl(projects_dir, "bad"))
    assert f"{key} must be true or false" in line and "sometimes" in line, line


def test_max_links_caps_the_requisites_of_a_page_and_of_a_stylesheet(site, projects_dir: Path) -> None:
    site.route("/", body='<link rel=stylesheet href="/s.css">' + "".join(f'<img src="/i{i}.png">' for i in range(8)))
    site.route("/s.css", body="".join(f"a{{b:url(/c{i}.png)}}" for i in range(8)), content_type="text/css")
    ok(crawl(projects_dir, "cap", site.url("/"), "--requisites", "--max-links", "5"))
    folder = projects_dir / "cap"
    cut = sorted(f[:2] for f in data_lines(folder / "rejected.txt") if f[1].startswith("max-links"))
    assert cut == [[site.url("/"), "max-links: 4 links not followed"], [site.url("/s.css"), "max-links: 3 links not followed"]]
    fetched = {u.rsplit("/", 1)[1] for u in [*crawled(projects_dir, "cap"), *(f[0] for f in data_lines(folder / "failed.txt"))]}
    assert fetched == {"", "s.css", "i0.png", "i1.png", "i2.png", "i3.png", "c0.png", "c1.png", "c2.png", "c3.png", "c4.png"}


def test_pending_requisites_survive_a_stop_and_are_fetched_on_resume(site, projects_dir: Path) -> None:
    """--max-pages stops the crawl with requisites queued (kind ``requisite`` in queue.txt); the
    next run (settings saved) fetches them as requisites: a stylesheet still gives its url()s."""
    requisite_site(site)
    ok(crawl(projects_dir, "resume", site.url("/"), "--requisites", "--max-depth", "0", "--max-pages", "2",
             workers=1))
    folder = projects_dir / "resume"
    queued = data_lines(folder / "queue.txt")
    assert queued and all(f[5] == "requisite" for f in queued), queued
    ok(crawl(projects_dir, "resume", "--max-pages", "100", workers=1))
    assert {site.url(p) for p in ("/css/more.css", "/fonts/f.woff2", "/img/bg.png")} <= set(crawled(projects_dir, "resume"))
    assert "requisites = True" in (folder / "settings.txt").read_text(encoding="utf-8")


def test_requisites_with_the_redis_store(site, projects_dir: Path, redis_server: RedisServer) -> None:  # noqa: F811
    """The queue kind travels through Redis too: the requisites are fetched and the export has them."""
    requisite_site(site)
    ok(crawl(projects_dir, "rr", site.url("/"), "--requisites", "--max-depth", "0", "--store", redis_server.url))
    exported = {json.loads(line)["url"]: json.loads(line) for line in
                ok(cli(projects_dir, "export", "rr", "--store", redis_server.url)).stdout.splitlines()}
    assert exported[site.url("/fonts/f.woff2")]["state"] == "crawled"
    assert exported[site.url("/img/gone.png")]["state"] == "failed"
    assert site.hits["/page2.html"] == 0
