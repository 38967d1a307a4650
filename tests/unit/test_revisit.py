"""Re-visits: conditional requests and what a re-fetch leaves in the metadata
(owler.fetch.revisit), through the fetch engine against a real HTTP server on loopback; revisit
records (owler.warc.storage.files) read back by warcio and checked by ``warcio check``; the parser's
signatureOld and 304 handling (owler.parse.page); a page whose content is withheld
(signals.refused.action strip) from the fetch to its WARC records and the parser."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
import threading
from email.utils import formatdate

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from owler import wire
from owler.constants import CAPTURE_DATE, CAPTURE_DIGEST, Status
from owler.fetch.engine import FetchEngine, FetchItem
from owler.fetch.revisit import IDENTICAL, NOT_MODIFIED, Revisits
from owler.parse.page import PageHandler
from owler.warc.storage.files import WARCWriter

AGENT = {"http.agent.name": "OWLer-py", "http.allow.private.addresses": True,
         "fetcher.server.delay": 0.0, "http.robots.file.skip": True, "tdmrep.enabled": False}
PAGE = b"<html><head><title>t</title></head><body><p>" + b"words " * 40 + b"</p></body></html>"
LAST_MODIFIED = formatdate(1_700_000_000, usegmt=True)


# -- the rules ------------------------------------------------------------------------------------

def test_conditional_headers_come_from_the_stored_validators():
    r = Revisits({})
    assert r.conditional_headers({}) is None
    md = {"protocol.etag": ['"v1"'], "protocol.last-modified": [LAST_MODIFIED]}
    assert r.conditional_headers(md) == {"If-None-Match": '"v1"', "If-Modified-Since": LAST_MODIFIED}
    # StormCrawler's last-modified (the adaptive scheduler's change date) goes first
    md["last-modified"] = ["Tue, 14 Nov 2023 00:00:00 GMT"]
    assert r.conditional_headers(md)["If-Modified-Since"] == "Tue, 14 Nov 2023 00:00:00 GMT"
    assert r.conditional_headers({"protocol.etag": ['"a"\r\nX-Evil: 1']}) is None
    assert Revisits({"http.conditional.requests": False}).conditional_headers(md) is None
    assert Revisits({"protocol.md.prefix": "p."}).conditional_headers({"p.etag": ["x"]}) == {
        "If-None-Match": "x"}


def test_validators_of_the_answer_replace_the_stored_ones():
    r = Revisits({})
    md = {"protocol.etag": ['"old"'], "protocol.last-modified": [LAST_MODIFIED]}
    r.note_validators(md, {"ETag": '"new"'}.get)
    assert md == {"protocol.etag": ['"new"']}  # the server no longer sends Last-Modified


def test_a_capture_is_new_unless_its_payload_is_the_last_captures():
    r = Revisits({})
    md: dict = {}
    r.note_capture(md, b"payload", 1_700_000_000.25)
    digest = wire.payload_digest(b"payload")
    assert md[CAPTURE_DIGEST] == [digest] and md[CAPTURE_DATE] == ["2023-11-14T22:13:20.250000Z"]
    assert wire.RAW_REVISIT not in md
    again = {CAPTURE_DIGEST: [digest], CAPTURE_DATE: md[CAPTURE_DATE]}
    r.note_capture(again, b"payload", 1_800_000_000)
    assert again[wire.RAW_REVISIT] == [IDENTICAL]
    assert again[CAPTURE_DATE] == md[CAPTURE_DATE]  # still the full capture's date
    changed = {CAPTURE_DIGEST: [digest], CAPTURE_DATE: md[CAPTURE_DATE]}
    r.note_capture(changed, b"other", 1_800_000_000)
    assert wire.RAW_REVISIT not in changed and changed[CAPTURE_DIGEST] != [digest]
    off = {CAPTURE_DIGEST: [digest], CAPTURE_DATE: md[CAPTURE_DATE]}
    Revisits({"warc.revisit.identical": False}).note_capture(off, b"payload", 1_800_000_000)
    assert wire.RAW_REVISIT not in off and off[CAPTURE_DATE] != md[CAPTURE_DATE]


# -- the engine against a real server -------------------------------------------------------------

class Server:
    """/etag answers 304 to its ETag, /lm to If-Modified-Since, /blind always 304, /plain 200,
    /refused 304 to its ETag, else 200, both saying ``Content-Usage: search=n``."""

    def __init__(self):
        self.seen: list[tuple[str, dict]] = []
        self.port = 0
        self._ready = threading.Event()
        self._loop = None

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.path, dict(request.headers)))
        if request.path == "/etag":
            if request.headers.get("If-None-Match") == '"v1"':
                return web.Response(status=304, headers={"ETag": '"v1"'})
            return web.Response(body=PAGE, content_type="text/html", headers={"ETag": '"v1"'})
        if request.path == "/lm":
            if request.headers.get("If-Modified-Since") == LAST_MODIFIED:
                return web.Response(status=304)
            return web.Response(body=PAGE, content_type="text/html",
                                headers={"Last-Modified": LAST_MODIFIED})
        if request.path == "/blind":
            return web.Response(status=304)
        if request.path == "/refused":  # its content may not be used for search
            refusal = {"ETag": '"r1"', "Content-Usage": "search=n"}
            if request.headers.get("If-None-Match") == '"r1"':
                return web.Response(status=304, headers=refusal)
            return web.Response(body=PAGE, content_type="text/html", headers=refusal)
        return web.Response(body=PAGE, content_type="text/html")

    def __enter__(self):
        threading.Thread(target=self._run, daemon=True).start()
        assert self._ready.wait(60), "the server did not start within 60 s (hang?)"
        return self

    def _run(self):
        self._loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self.handle)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def __exit__(self, *exc):
        self._loop.call_soon_threadsafe(self._loop.stop)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"


def fetch_all(conf, items, refuse=None):
    got, done = [], threading.Event()

    def on_outcome(out):
        got.append(out)
        if len(got) == len(items):
            done.set()

    engine = FetchEngine({**AGENT, **conf}, on_outcome, refuse=refuse)
    engine.start()
    try:
        for url, md in items:
            engine.submit(FetchItem(url, "127.0.0.1", md))
        assert done.wait(60), f"{len(got)} of {len(items)} outcomes within 60 s (hang?)"
    finally:
        engine.stop()
    return {o.item.url: o for o in got}


@pytest.fixture(scope="module")
def server():
    with Server() as s:
        yield s


def test_a_refetch_is_conditional_and_a_304_is_a_page_archived_as_a_revisit(server):
    first = fetch_all({}, [(server.url("/etag"), {}), (server.url("/lm"), {})])
    md1 = {k: v for k, v in first[server.url("/etag")].metadata.items()
           if not k.startswith("_raw.")}
    assert md1["protocol.etag"] == ['"v1"'] and md1[CAPTURE_DIGEST] == [wire.payload_digest(PAGE)]
    md2 = {k: v for k, v in first[server.url("/lm")].metadata.items() if not k.startswith("_raw.")}
    assert md2["protocol.last-modified"] == [LAST_MODIFIED] and "protocol.etag" not in md2
    server.seen.clear()
    again = fetch_all({}, [(server.url("/etag"), md1), (server.url("/lm"), md2)])
    sent = dict(server.seen)
    assert sent["/etag"]["If-None-Match"] == '"v1"'
    assert sent["/lm"]["If-Modified-Since"] == LAST_MODIFIED
    for path, md in (("/etag", md1), ("/lm", md2)):
        out = again[server.url(path)]
        assert out.kind == "page" and out.content == b"", path
        assert out.metadata["fetch.statusCode"] == ["304"]
        assert out.metadata[wire.RAW_REVISIT] == [NOT_MODIFIED]
        assert out.metadata[CAPTURE_DATE] == md[CAPTURE_DATE]  # refers to the full capture
        assert out.metadata[CAPTURE_DIGEST] == md[CAPTURE_DIGEST]
    # turned off: no validators sent, a full 200
    server.seen.clear()
    off = fetch_all({"http.conditional.requests": False}, [(server.url("/etag"), md1)])
    assert "If-None-Match" not in dict(server.seen)["/etag"]
    assert off[server.url("/etag")].metadata[wire.RAW_REVISIT] == [IDENTICAL]


def test_a_url_refused_just_before_its_fetch_gets_the_cause_and_no_request(server):
    server.seen.clear()
    got = fetch_all({}, [(server.url("/plain"), {}), (server.url("/etag"), {})],
                    refuse=lambda url: "blacklist:optout" if url.endswith("/plain") else None)
    out = got[server.url("/plain")]
    assert out.status is Status.ERROR and out.metadata["error.cause"] == ["blacklist:optout"]
    assert [path for path, _ in server.seen] == ["/etag"]


def test_an_unsolicited_304_is_not_a_fetch(server):
    out = fetch_all({}, [(server.url("/blind"), {})])[server.url("/blind")]
    assert out.kind == "status" and out.status is Status.FETCH_ERROR
    assert out.metadata["error.cause"] == ["unsolicited_304"]


def test_an_unchanged_200_is_a_revisit_of_identical_payload(server):
    first = fetch_all({}, [(server.url("/plain"), {})])[server.url("/plain")]
    md = {k: v for k, v in first.metadata.items() if not k.startswith("_raw.")}
    assert wire.RAW_REVISIT not in first.metadata
    again = fetch_all({}, [(server.url("/plain"), md)])[server.url("/plain")]
    assert again.kind == "page" and again.content == PAGE
    assert again.metadata[wire.RAW_REVISIT] == [IDENTICAL]
    assert again.metadata[CAPTURE_DATE] == md[CAPTURE_DATE]


def test_a_page_whose_signals_refuse_the_crawl_is_archived_without_content_nor_parsed(
        server, tmp_path):
    """signals.refused.action strip: the response record holds the HTTP head, no payload,
    WARC-Truncated; the metadata record says why; no revisit refers to this fetch; the parser
    takes nothing from it. A 304 to a page refused so is the exchange it was, not a revisit."""
    import json

    url = server.url("/refused")
    conf = {"signals.refused.action": "strip"}
    earlier = {CAPTURE_DIGEST: [wire.payload_digest(b"earlier")],
               CAPTURE_DATE: ["2026-01-01T00:00:00.000000Z"], "signature": ["0" * 32]}
    full = fetch_all(conf, [(url, dict(earlier))])[url]
    server.seen.clear()
    again = fetch_all(conf, [(url, {**earlier, "protocol.etag": ['"r1"']})])[url]
    assert dict(server.seen)["/refused"]["If-None-Match"] == '"r1"'
    assert full.content == again.content == b""
    assert "protocol.etag" not in full.metadata and again.metadata["protocol.etag"] == ['"r1"']
    for out in (full, again):
        md = out.metadata
        assert md["signals.withheld"] == ["search"] and md["signals.search"] == ["refused"]
        assert md[CAPTURE_DIGEST] == earlier[CAPTURE_DIGEST] and wire.RAW_REVISIT not in md
    with WARCWriter(tmp_path, partition="00") as w:
        for out in (full, again):
            w.write_page(url, out.content, out.metadata)
    path = next(tmp_path.glob("*.warc.gz"))
    with open(path, "rb") as fh:
        recs = [(r.rec_type, r.rec_headers, r.http_headers, r.content_stream().read())
                for r in ArchiveIterator(fh) if r.rec_type != "warcinfo"]
    assert [r[0] for r in recs] == ["request", "response", "metadata"] * 2
    _, head, http, body = recs[1]
    assert body == b"" and head.get_header("WARC-Truncated") == "unspecified"
    assert http.get_statuscode() == "200" and http.get_header("Content-Usage") == "search=n"
    assert http.get_header("X-Crawler-Content-Length") == str(len(PAGE))
    assert http.get_header("Content-Length") == "0"
    assert head.get_header("WARC-Payload-Digest") == wire.payload_digest(b"")
    meta = json.loads(recs[2][3])
    assert meta["withheld"] == "search" and recs[2][1].get_header(
        "WARC-Concurrent-To") == head.get_header("WARC-Record-ID")
    _, head304, http304, body304 = recs[4]
    assert http304.get_statuscode() == "304" and body304 == b""
    assert head304.get_header("WARC-Truncated") is None  # a 304 has no content to cut
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
                           capture_output=True, text=True)
    assert check.returncode == 0 and "fail" not in check.stdout, check.stdout + check.stderr
    # the parser: FETCHED, what the last fetch found, no text, no outlinks, no SimHash
    parsed = PageHandler({}).handle_page(url, full.content, full.metadata)
    assert parsed.status is Status.FETCHED and parsed.outlinks == [] and not parsed.text
    assert parsed.metadata["signature"] == ["0" * 32] and "simhash" not in parsed.metadata
    assert parsed.metadata["signals.withheld"] == ["search"]


# -- revisit records ------------------------------------------------------------------------------

def exchange(revisit=None, payload=PAGE, status="HTTP/1.1 200 OK", fetch_time=1_700_000_100.0,
             capture_date="2023-11-14T22:13:20.250000Z"):
    md = {wire.RAW_REQUEST: ["GET /p HTTP/1.1\r\nHost: a.example\r\n\r\n"],
          wire.RAW_STATUS_LINE: [status],
          wire.RAW_HEADERS: wire.encode_headers([("Content-Type", "text/html"),
                                                 ("Content-Encoding", "gzip")]),
          wire.RAW_FETCH_TIME: [repr(fetch_time)],
          CAPTURE_DIGEST: [wire.payload_digest(PAGE)], CAPTURE_DATE: [capture_date]}
    if revisit:
        md[wire.RAW_REVISIT] = [revisit]
    return "http://a.example/p", payload, md


def test_revisit_records_refer_to_the_capture_and_pass_warcio_check(tmp_path):
    with WARCWriter(tmp_path, partition="00") as w:
        w.write_page(*exchange(fetch_time=1_700_000_000.25))  # the capture
        w.write_page(*exchange(IDENTICAL))
        w.write_page(*exchange(NOT_MODIFIED, b"", "HTTP/1.1 304 Not Modified"))
        assert (w.stats.responses, w.stats.revisits) == (1, 2)
    path = next(tmp_path.glob("*.warc.gz"))
    with open(path, "rb") as fh:
        recs = [(r.rec_type, r.rec_headers, r.content_stream().read())
                for r in ArchiveIterator(fh) if r.rec_type in ("response", "revisit")]
    (_, orig, body), (_, same, same_body), (_, nm, nm_body) = recs
    assert body == PAGE and same_body == b"" and nm_body == b""
    assert same.get_header("WARC-Profile").endswith("/revisit/identical-payload-digest")
    assert nm.get_header("WARC-Profile").endswith("/revisit/server-not-modified")
    for h in (same, nm):
        assert h.get_header("WARC-Refers-To-Target-URI") == orig.get_header("WARC-Target-URI")
        assert h.get_header("WARC-Refers-To-Date") == orig.get_header("WARC-Date")
        assert h.get_header("WARC-Payload-Digest") == orig.get_header("WARC-Payload-Digest")
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "digest pass" in check.stdout and "fail" not in check.stdout


def test_an_unknown_revisit_profile_is_refused(tmp_path):
    with WARCWriter(tmp_path, partition="00") as w, pytest.raises(ValueError, match="profile"):
        w.write_page(*exchange("bogus"))


# -- the parser -----------------------------------------------------------------------------------

def page_md(**extra):
    md = {wire.RAW_HEADERS: ["Content-Type: text/html"], "fetch.statusCode": ["200"]}
    md.update({k: [v] for k, v in extra.items()})
    return md


def test_the_parser_keeps_the_old_signature_and_does_not_parse_a_304():
    handler = PageHandler({})
    sig = hashlib.md5(PAGE).hexdigest()  # noqa: S324
    out = handler.handle_page("http://a.example/p", PAGE, page_md(signature="0" * 32))
    assert out.metadata["signatureOld"] == ["0" * 32] and out.metadata["signature"] == [sig]
    nm = page_md(signature=sig, simhash="00ff00ff00ff00ff")
    nm["fetch.statusCode"] = ["304"]
    out = handler.handle_page("http://a.example/p", b"", nm)
    assert out.status is Status.FETCHED and not out.outlinks
    assert out.metadata["signature"] == out.metadata["signatureOld"] == [sig]
    assert out.metadata["simhash"] == ["00ff00ff00ff00ff"]


def test_a_feed_served_as_rss_is_tagged():
    md = page_md()
    md[wire.RAW_HEADERS] = ["Content-Type: application/rss+xml; charset=utf-8"]
    out = PageHandler({}).handle_page("http://a.example/feed", b"<rss/>", md)
    assert out.metadata["isFeed"] == ["true"] and out.status is Status.FETCHED


def test_a_full_response_never_takes_the_stored_capture_digest(tmp_path):
    url, _, md = exchange()  # a stale capture.digest in the metadata, no _raw.payload_digest
    with WARCWriter(tmp_path, partition="00") as w:
        w.write_page(url, b"new content", md)
    with open(next(tmp_path.glob("*.warc.gz")), "rb") as fh:
        rec = next(r for r in ArchiveIterator(fh) if r.rec_type == "response")
        assert rec.rec_headers.get_header("WARC-Payload-Digest") == wire.payload_digest(
            b"new content")


def test_revisit_records_carry_what_revisits_of_other_writers_carry(tmp_path):
    """The revisit records of two crawls shipped with pywb 2.10.0 (iana.org in dupes.warc.gz,
    example.com in example.warc.gz; downloaded by make setup, read in place): every WARC header
    they all have, ours have too, and ours, like theirs, hold an HTTP head and no payload."""
    from pathlib import Path

    warcs = Path(__file__).resolve().parents[2] / ".work" / "testdata" / "pywb-2.10.0" / "warcs"
    theirs = []
    for path in (warcs / "dupes.warc.gz", warcs / "example.warc.gz"):
        assert path.is_file(), f"{path} is missing (make setup fetches the pywb samples)"
        with open(path, "rb") as fh:
            rec = next(r for r in ArchiveIterator(fh) if r.rec_type == "revisit")
            theirs.append((rec.rec_headers, rec.http_headers, rec.content_stream().read()))
    common = set.intersection(*({k.lower() for k, _ in h.headers} for h, _, _ in theirs))
    assert {"warc-profile", "warc-refers-to-target-uri", "warc-refers-to-date",
            "warc-payload-digest"} <= common
    with WARCWriter(tmp_path, partition="00") as w:
        w.write_page(*exchange(IDENTICAL))
        w.write_page(*exchange(NOT_MODIFIED, b"", "HTTP/1.1 304 Not Modified"))
    with open(next(tmp_path.glob("*.warc.gz")), "rb") as fh:
        ours = [(r.rec_headers, r.http_headers, r.content_stream().read())
                for r in ArchiveIterator(fh) if r.rec_type == "revisit"]
    assert len(ours) == 2
    for headers, http, body in ours + theirs:
        assert http is not None and http.statusline and body == b""
        assert headers.get_header("WARC-Profile").rsplit("/", 1)[-1] in (IDENTICAL, NOT_MODIFIED)
    for headers, _, _ in ours:
        assert common <= {k.lower() for k, _ in headers.headers}, common - {
            k.lower() for k, _ in headers.headers}
