"""Pages built by scripts in a crawl (issue 48): the explorative topology on real Storm (local
mode) crawls the scripted farm (tests/farm/scripted.py) from its home page alone, with the
JsRenderingDetector parse filter on and the default routing (``fetch.with=browser`` to the
browser). Every page of the single-page application is a shell whose links exist only once its
script ran: the crawl reaches them only through the browser.

Judged against the farm's log and the archive: every page of the site is FETCHED; each shell was
fetched once over HTTP (marked by the detector, sent back due now) and once more for the browser
(rendered from that response: no third request), the static page once; the page whose network
never rests and the page whose script never ends ended at their budget with their cause; nothing
the page scripts asked for escaped the guards (the private address, robots.txt's disallowed
path, images); the WARC holds every response as the server sent it and, for each render, a
``conversion`` record of the rendered DOM referring to the response it was made from."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler.conf import resource_path
from owler.frontier.sqlite import SQLiteFrontier
from tests.farm import scripted as S
from tests.farm.harness import farm_module
from tests.integration.cli import farm_conf, owler

pytestmark = pytest.mark.integration

SHELLS = sorted(S.LINKS)


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    work = tmp_path_factory.mktemp("scripted")
    chain = json.loads(resource_path("parsefilters.json").read_text())
    chain["org.apache.stormcrawler.parse.ParseFilters"].append(
        {"class": "owler.parse.filters.jsrender.JsRenderingDetector",
         "name": "JsRenderingDetector", "params": {"minTextLength": 200}})
    (work / "parsefilters.json").write_text(json.dumps(chain))
    with farm_module("tests.farm.scripted", work / "access.log") as ready:
        port = int(ready[0])
        conf = farm_conf(work, S.NETWORK, f"warc.dir: {work / 'warc'}",
                         f"parsefilters.config.file: {work / 'parsefilters.json'}",
                         "browser.page.budget: 5")
        (work / "seeds.txt").write_text(f"http://{S.HOST}:{port}/\n")
        owler("inject", str(work / "seeds.txt"), "--conf", str(conf))
        run = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "15",
                    "--time", "400", check=False)
    base = f"http://{S.HOST}:{port}"
    with SQLiteFrontier(work / "frontier.sqlite") as f:
        records = {path: f.get(base + path) for path in S.PAGES}
    log = [json.loads(line) for line in (work / "access.log").read_text().splitlines()]
    warc = []
    for path in sorted((work / "warc").glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests="raise"):
                warc.append((rec.rec_type, dict(rec.rec_headers.headers),
                             rec.content_stream().read()))
    return {"run": run, "records": records, "log": log, "warc": warc, "base": base}


def test_every_page_of_the_site_is_fetched(crawl):
    run = crawl["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    missing = {p: r and r.status.name for p, r in crawl["records"].items()
               if r is None or r.status.name != "FETCHED"}
    assert not missing, missing


def test_the_shells_were_marked_and_rendered(crawl):
    for path in SHELLS:
        md = crawl["records"][path].metadata
        assert md["fetch.with"] == ["browser"], path
        assert md["fetch.with.reason"] == ["empty-root:root"], path
        want = "budget" if path in ("/forever", "/busy") else "idle"
        assert md["browser.end"] == [want], (path, md.get("browser.end.detail"))
        assert md["parse.title"] == [f"Rendered {path}"], path  # from the rendered DOM
    about = crawl["records"][S.STATIC].metadata
    assert "fetch.with" not in about and "browser.end" not in about
    assert "at the end of the budget" in crawl["records"]["/forever"].metadata[
        "browser.end.detail"][0]
    assert "its scripts never finished" in crawl["records"]["/busy"].metadata[
        "browser.end.detail"][0]
    port = crawl["base"].rsplit(":", 1)[1]
    assert crawl["records"]["/private"].metadata["browser.refused"] == [
        f"private_address http://{S.PRIVATE}:{port}/secret"]
    assert crawl["records"]["/a"].metadata["browser.refused"] == [
        f"robots.txt http://{S.HOST}:{port}/api/hidden"]


def test_the_farm_saw_each_shell_twice_and_nothing_the_guards_refused(crawl):
    seen = Counter((r["host"], r["path"]) for r in crawl["log"])
    assert not [k for k in seen if k[0] == S.PRIVATE]
    for path in SHELLS:
        assert seen[(S.HOST, path)] == 2, path  # over HTTP, then for the browser
    assert seen[(S.HOST, S.STATIC)] == 1
    for never in ("/api/hidden", "/pic.png", "/pic2.png"):
        assert seen[(S.HOST, never)] == 0, never
    assert seen[(S.HOST, "/api/links.json")] == 1
    for request in ((S.FRAME_HOST, "/frame"), (S.FRAME_HOST, "/api/from-frame"),
                    (S.HOST, "/api/worker.js"), (S.HOST, "/api/from-worker")):
        assert seen[request] == 1, request  # a frame's and a worker's, through the crawler
    assert seen[(S.HOST, "/app.js")] == 1  # the fetcher's cache answered the other pages
    pages = {p for h, p in seen if h == S.HOST and not p.startswith("/api/")} - {
        "/robots.txt", "/.well-known/tdmrep.json", "/app.js"}
    assert pages == set(S.PAGES)


def test_the_warc_holds_each_response_and_each_rendered_dom(crawl):
    """The second fetch of a shell brought the same bytes: a revisit record of the first
    (identical-payload-digest), and the rendered DOM a conversion record referring to it."""
    base = crawl["base"]
    records = [(t, h, body) for t, h, body in crawl["warc"] if t in ("response", "revisit")]
    conversions = [(h, body) for t, h, body in crawl["warc"] if t == "conversion"]
    kinds = Counter((h["WARC-Target-URI"], t) for t, h, _ in records)
    assert kinds == Counter({**{(base + p, "response"): 1 for p in [*SHELLS, S.STATIC]},
                             **{(base + p, "revisit"): 1 for p in SHELLS}})
    shell = S.SHELL.format(private=S.PRIVATE).encode()
    assert all(body == shell for t, h, body in records
               if t == "response" and h["WARC-Target-URI"] != base + S.STATIC)
    revisits = {h["WARC-Record-ID"]: h["WARC-Target-URI"] for t, h, _ in records
                if t == "revisit"}
    assert sorted(h["WARC-Target-URI"] for h, _ in conversions) == sorted(base + p
                                                                          for p in SHELLS)
    for h, dom in conversions:
        assert revisits[h["WARC-Refers-To"]] == h["WARC-Target-URI"]
        path = h["WARC-Target-URI"][len(base):]
        assert f"This text of {path} exists only after the script ran".encode() in dom
        assert h["Content-Type"] == "text/html; charset=utf-8"
