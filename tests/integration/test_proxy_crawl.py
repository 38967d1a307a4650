"""Crawling through a proxy (issue 48): the explorative topology on real Storm (local mode) crawls
the proxied farm (tests/farm/proxied.py) through tinyproxy (``http.proxy.type: HTTP``, with Basic
proxy credentials) and through Dante (``SOCKS``) from Debian, both on loopback
(tests/proxyservers.py), the two crawls at once, each known in the farm's log by its User-Agent
(``http.agent.version``) and by a custom request header (``http.custom.headers``).

Judged for each: the farm's log holds exactly the requests of a crawl of its three sites (each
host's robots.txt and TDMRep file, every page once) and every one came from the proxy (the
connection's other end is the proxy's outgoing address; tinyproxy's Via header); the proxy's own
log holds the same requests (tinyproxy: each request line; Dante: the connection each came on);
every request carried the custom headers beside the crawler's own User-Agent; the WARC files
hold the crawl with the target's address when the crawler knows it (SOCKS) and never the
proxy's credentials. The canaries (a literal address and ``localhost`` outside
``http.allowed.networks``, both linked from every home page) are ERROR ``private_address`` and
appear in no log, although each proxy fetches them when asked (the last test asks).

Below the crawl, the fetcher alone through the same proxies: https through tinyproxy's CONNECT
and through Dante, and tinyproxy's answers to wrong credentials.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import gzip
import json
import ssl
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from owler.fetch.http import HttpFetcher
from owler.frontier.sqlite import SQLiteFrontier
from tests.farm import proxied as P
from tests.farm.harness import farm_module
from tests.integration.cli import owler
from tests.proxyservers import dante, free_port, tinyproxy

pytestmark = pytest.mark.integration

KINDS = ("HTTP", "SOCKS")
#: where each proxy's connections to the targets leave from (the farm sees these peers)
OUTGOING = {"HTTP": "127.0.64.1", "SOCKS": "127.0.64.2"}
AUTH = ("owler", "pr0xy-s3cret")
#: the requests of one crawl of the farm: each site's files and pages, once
EXPECTED = collections.Counter(
    (site, path) for site in P.SITES
    for path in ("/robots.txt", "/.well-known/tdmrep.json", *P.PAGES))


def crawl_with(work: Path, kind: str, proxy, port: int) -> dict:
    work.mkdir()
    conf = work / "conf.yaml"
    lines = {"frontier.sqlite.path": str(work / "frontier.sqlite"),
             "warc.dir": str(work / "warc"), "owler.work.dir": str(work),
             "http.allowed.networks": [P.NETWORK], "http.agent.version": f"proxy-{kind}",
             "http.custom.headers": [f"X-Owler-Proxy-Test=via {kind}", "From=ops@example.org"],
             "fetcher.server.delay": 0.2, **proxy.conf()}
    conf.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in lines.items()))
    (work / "seeds.txt").write_text(f"http://{P.SITES[0]}:{port}/\n")
    owler("inject", str(work / "seeds.txt"), "--conf", str(conf))
    run = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "10",
                "--time", "300", check=False)
    with SQLiteFrontier(work / "frontier.sqlite") as f:
        urls = [row[0] for row in f.conn.execute("SELECT url FROM urls")]
        records = {u: f.get(u) for u in urls}
    warc = {}
    raw = b""
    for path in sorted((work / "warc").glob("*.warc.gz")):
        raw += gzip.decompress(path.read_bytes())
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type in ("request", "response"):
                    target = rec.rec_headers.get_header("WARC-Target-URI")
                    warc[(rec.rec_type, target)] = (rec.rec_headers, rec.content_stream().read(),
                                                    rec.http_headers)
    return {"run": run, "records": records, "warc": warc, "raw": raw}


@pytest.fixture(scope="module")
def crawls(tmp_path_factory):
    work = tmp_path_factory.mktemp("proxied")
    log = work / "access.log"
    with farm_module("tests.farm.proxied", log) as ready, \
            tinyproxy(work / "tinyproxy", OUTGOING["HTTP"], auth=AUTH) as http_proxy, \
            dante(work / "dante", OUTGOING["SOCKS"]) as socks_proxy:
        port = int(ready[0])
        proxies = {"HTTP": http_proxy, "SOCKS": socks_proxy}
        with ThreadPoolExecutor(len(KINDS)) as pool:
            done = dict(zip(KINDS, pool.map(
                lambda kind: crawl_with(work / kind, kind, proxies[kind], port), KINDS)))
        requests = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        for kind, crawl in done.items():
            crawl.update(port=port, proxy=proxies[kind], proxy_lines=proxies[kind].lines(),
                         requests=[e for e in requests if e["ua"].startswith(f"OWLer-py/proxy-{kind} ")])
        assert sum(len(c["requests"]) for c in done.values()) == len(requests), \
            "a request of no crawl"
        yield done


@pytest.mark.parametrize("kind", KINDS)
def test_every_request_went_through_the_proxy(crawls, kind):
    crawl = crawls[kind]
    assert crawl["run"].returncode == 0, crawl["run"].stdout + crawl["run"].stderr
    got = collections.Counter((e["host"], e["path"]) for e in crawl["requests"])
    assert got == EXPECTED, (got - EXPECTED, EXPECTED - got)
    assert {e["peer"] for e in crawl["requests"]} == {OUTGOING[kind]}
    if kind == "HTTP":
        assert all("tinyproxy" in e["via"] for e in crawl["requests"])
        logged = collections.Counter(crawl["proxy"].requests())
        assert logged == collections.Counter(
            ("GET", f"http://{e['host']}:{crawl['port']}{e['path']}") for e in crawl["requests"])
    else:
        assert all(e["via"] == "" for e in crawl["requests"])
        made = crawl["proxy"].connections()
        assert len(made) == len(set(made))
        assert {(e["peer"], e["peer_port"]) for e in crawl["requests"]} == \
            {(out, out_port) for out, out_port, _, _ in made}
        assert {(host, port) for _, _, host, port in made} == \
            {(site, crawl["port"]) for site in P.SITES}


@pytest.mark.parametrize("kind", KINDS)
def test_custom_headers_reach_the_farm(crawls, kind):
    for e in crawls[kind]["requests"]:
        headers = collections.defaultdict(list)
        for name, value in e["headers"]:
            headers[name.lower()].append(value)
        assert headers["x-owler-proxy-test"] == [f"via {kind}"], e
        assert headers["from"] == ["ops@example.org"], e
        assert headers["user-agent"] == [e["ua"]] and e["ua"].startswith(f"OWLer-py/proxy-{kind} ")
        assert "proxy-authorization" not in headers  # consumed by the proxy


@pytest.mark.parametrize("kind", KINDS)
def test_private_addresses_refused_through_the_proxy(crawls, kind):
    crawl = crawls[kind]
    port = crawl["port"]
    for url in (f"http://{P.CANARY_ADDR}:{port}/secret", f"http://{P.CANARY_NAME}:{port}/secret"):
        rec = crawl["records"][url]
        assert rec.status.name == "ERROR" and rec.metadata["error.cause"] == ["private_address"], \
            (url, rec.metadata)
    assert not [e for e in crawl["requests"] if e["host"] not in P.SITES]
    text = "\n".join(crawl["proxy_lines"])
    assert P.CANARY_ADDR not in text and "localhost" not in text
    # robots.txt's rule held through the proxy as well
    assert crawl["records"][f"http://{P.SITES[0]}:{port}/private/x"].metadata["error.cause"] \
        == ["robots.txt"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_archive_of_a_proxied_crawl(crawls, kind):
    crawl = crawls[kind]
    pages = {f"http://{site}:{crawl['port']}{path}" for site in P.SITES for path in P.PAGES}
    fetched = {u for u, r in crawl["records"].items() if r.status.name == "FETCHED"}
    assert fetched == pages
    assert {t for rtype, t in crawl["warc"] if rtype == "response"} == pages
    for url in pages:
        headers, _, _ = crawl["warc"][("response", url)]
        ip = headers.get_header("WARC-IP-Address")
        # SOCKS: the address the proxy was handed; HTTP: unknown (the peer was the proxy)
        assert ip == (url.split("/")[2].split(":")[0] if kind == "SOCKS" else None), (url, ip)
        request = crawl["warc"][("request", url)][2]  # what the target was sent
        assert request.get_header("X-Owler-Proxy-Test") == f"via {kind}"
        assert request.get_header("User-Agent").startswith(f"OWLer-py/proxy-{kind} ")
    for secret in (AUTH[1], base64.b64encode(":".join(AUTH).encode()).decode(), "Proxy-Auth"):
        assert secret.encode() not in crawl["raw"], secret


def test_each_proxy_fetches_a_canary_when_asked(crawls, tmp_path):
    """The control: with the guard off, each proxy fetches both canaries for the asking, so the
    crawls above met them unrequested only because the crawler never asked."""
    port = crawls["HTTP"]["port"]
    urls = [f"http://{P.CANARY_ADDR}:{port}/secret", f"http://{P.CANARY_NAME}:{port}/secret"]

    async def ask(conf):
        async with HttpFetcher({"http.agent.name": "control",
                                "http.allow.private.addresses": True, **conf}) as f:
            return [await f.fetch(u) for u in urls]
    for kind in KINDS:
        got = asyncio.run(ask(crawls[kind]["proxy"].conf()))
        assert [r.status for r in got] == [200, 200], [r.error_message for r in got]
        assert got[0].content == b"a canary: no crawl may reach it\n"
    assert [t for _, t in crawls["HTTP"]["proxy"].requests()][-2:] == urls
    assert [(h, p) for _, _, h, p in crawls["SOCKS"]["proxy"].connections()][-2:] == \
        [(P.CANARY_ADDR, port), ("127.0.0.1", port)]  # the name resolved by Dante


# ---- the fetcher alone through the real proxies ----------------------------------------------

@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """An https server on 127.0.65.1 (a self-signed certificate) in a thread of its own."""
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(d / "k.pem"),
                    "-out", str(d / "c.pem"), "-days", "1", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(d / "c.pem", d / "k.pem")
    seen: list = []
    port = free_port("127.0.65.1")

    async def page(request):
        seen.append((request.transport.get_extra_info("peername")[0], request.path,
                     request.headers.get("X-Owler-Proxy-Test")))
        return web.Response(text="over tls")

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.65.1", port, ssl_context=ctx).start())
    import threading

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port, seen
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@pytest.mark.parametrize("kind", KINDS)
def test_https_through_the_proxy(tls_server, tmp_path, kind):
    port, seen = tls_server
    start = tinyproxy(tmp_path, OUTGOING["HTTP"], auth=AUTH) if kind == "HTTP" \
        else dante(tmp_path, OUTGOING["SOCKS"])
    with start as proxy:
        conf = {"http.agent.name": "tls", "http.trust.everything": True,
                "http.allow.private.addresses": False, "http.allowed.networks": ["127.0.65.0/24"],
                "http.custom.headers": [f"X-Owler-Proxy-Test=tls {kind}"], **proxy.conf()}

        async def main():
            async with HttpFetcher(conf) as f:
                return [await f.fetch(f"https://127.0.65.1:{port}/a"),
                        await f.fetch(f"https://127.0.65.1:{port}/b"),
                        await f.fetch(f"https://localhost:{port}/c")]
        a, b, refused = asyncio.run(main())
        lines = proxy.requests() if kind == "HTTP" else proxy.connections()
    assert (a.status, a.content, b.status) == (200, b"over tls", 200), a.error_message
    assert refused.error_cause == "private_address"
    assert seen[-2:] == [(OUTGOING[kind], "/a", f"tls {kind}"), (OUTGOING[kind], "/b", f"tls {kind}")]
    if kind == "HTTP":  # one tunnel, kept alive for both requests
        assert lines == [("CONNECT", f"127.0.65.1:{port}")] and a.ip is None
    else:
        assert [(h, p) for _, _, h, p in lines] == [("127.0.65.1", port)]
        assert a.ip == "127.0.65.1"


def test_tinyproxy_refuses_wrong_credentials(tmp_path, tls_server):
    port, _ = tls_server
    with tinyproxy(tmp_path, OUTGOING["HTTP"], auth=AUTH) as proxy:
        conf = {"http.agent.name": "auth", "http.trust.everything": True,
                "http.allowed.networks": ["127.0.65.0/24"], **proxy.conf(),
                "http.proxy.pass": "wrong"}

        async def main():
            async with HttpFetcher(conf) as f:
                return (await f.fetch(f"http://127.0.65.1:{port}/"),
                        await f.fetch(f"https://127.0.65.1:{port}/"))
        plain, tunnel = asyncio.run(main())
    assert tunnel.error_cause == "proxy" and "401" in tunnel.error_message, tunnel.error_message
    assert "wrong" not in tunnel.error_message
    # tinyproxy 1.11 answers a plain-http request with 401 and a page of its own, not RFC 9110's
    # 407 (which the fetcher takes for the proxy's): a response like any other, its server told
    assert plain.status == 401 and plain.header("Server").startswith("tinyproxy/")


@pytest.mark.parametrize("option, message", [
    ("http.proxy.type=SOCKS", "http.proxy.type set without http.proxy.host"),
    ("http.proxy=https://proxy.example:3128", "the scheme names the proxy's type"),
    ("http.proxy.file=proxies.txt", "a list of proxies is not supported"),
    ("http.custom.headers=[User-Agent=Mozilla]", "User-Agent cannot be set here"),
    ("http.custom.headers=[X-Ok=1, Bad Name=2]", "'Bad Name' is not a header name"),
])
def test_a_bad_proxy_or_header_key_stops_owler_run(tmp_path, option, message):
    """Before Storm starts, with the key named: a crawl must not go out without the proxy the
    operator meant, nor with headers it would not send."""
    conf = tmp_path / "conf.yaml"
    conf.write_text(f"frontier.sqlite.path: {tmp_path / 'f.sqlite'}\n"
                    f"warc.dir: {tmp_path / 'warc'}\nowler.work.dir: {tmp_path}\n")
    r = owler("run", "explorative", "--conf", str(conf), "-o", option, check=False, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "configuration error: " in r.stderr and message in r.stderr, r.stderr
