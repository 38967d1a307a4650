"""owler.fetch.http against local servers on 127.0.0.1, port 0 (aiohttp.web and raw asyncio sockets)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import ssl
import subprocess
import time
import tracemalloc
import zlib

import pytest
from aiohttp import web

from owler.conf import ConfError
from owler.fetch.http import (AddressGuard, FetchResult, GuardedResolver, HttpFetcher,
                              PrivateAddressError, decode_body, is_public_address, redirect_target,
                              user_agent)

BIG = b"<html>" + b"x" * 100_000 + b"</html>"


def make_conf(**over):
    conf = {
        "http.agent.name": "TestBot",
        "http.agent.version": "1",
        "http.timeout": 2000,
        "http.content.limit": -1,
        "http.allow.private.addresses": True,
        "http.max.decompressed.size": 1_000_000,
    }
    conf.update(over)
    return conf


def gzip_bomb(size: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 20)
    parts = [c.compress(block) for _ in range(size >> 20)]
    parts.append(c.flush())
    return b"".join(parts)


BOMB = gzip_bomb(100 << 20)  # ~100 KB on the wire, 100 MB decoded


def make_app(seen: list) -> web.Application:
    async def record(request: web.Request):
        seen.append({"path": request.path_qs, "headers": dict(request.headers),
                     "port": request.transport.get_extra_info("peername")[1]})

    async def ok(request):
        await record(request)
        return web.Response(body=b"<html>hello</html>", content_type="text/html")

    async def status(request):
        await record(request)
        return web.Response(status=int(request.match_info["code"]), body=b"nope")

    async def redirect(request):
        await record(request)
        return web.Response(status=301, headers={"Location": "/new/place?x=1"})

    async def gz(request):
        await record(request)
        return web.Response(body=gzip.compress(b"decoded text " * 100),
                            headers={"Content-Encoding": "gzip", "Content-Type": "text/plain"})

    async def deflate_raw(request):
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return web.Response(body=c.compress(b"raw deflate") + c.flush(),
                            headers={"Content-Encoding": "deflate"})

    async def brotli_body(request):
        import brotli

        return web.Response(body=brotli.compress(b"brotli text " * 50),
                            headers={"Content-Encoding": "br"})

    async def lzw(request):
        return web.Response(body=b"opaque", headers={"Content-Encoding": "compress"})

    async def bad_gzip(request):
        return web.Response(body=b"this is not gzip", headers={"Content-Encoding": "gzip"})

    async def bomb(request):
        await record(request)
        return web.Response(body=BOMB, headers={"Content-Encoding": "gzip"})

    async def big(request):
        await record(request)
        return web.Response(body=BIG, content_type="text/html")

    async def chunked(request):
        await record(request)
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(10):
            await resp.write(b"chunk%d;" % i)
        await resp.write_eof()
        return resp

    async def big_chunked(request):
        await record(request)
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for _ in range(50):
            await resp.write(b"y" * 10_000)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/", ok)
    app.router.add_get("/page", ok)
    app.router.add_get("/status/{code}", status)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/gzip", gz)
    app.router.add_get("/deflate", deflate_raw)
    app.router.add_get("/br", brotli_body)
    app.router.add_get("/lzw", lzw)
    app.router.add_get("/badgzip", bad_gzip)
    app.router.add_get("/bomb", bomb)
    app.router.add_get("/big", big)
    app.router.add_get("/chunked", chunked)
    app.router.add_get("/bigchunked", big_chunked)
    return app


@contextlib.asynccontextmanager
async def web_server(seen: list):
    runner = web.AppRunner(make_app(seen), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def raw_server(on_connect):
    """A TCP server on 127.0.0.1:0 whose behaviour is ``on_connect(reader, writer)``."""
    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 1)


def fetch_all(paths, conf=None, **kw):
    """Fetch each path from a fresh web server; returns (results, seen requests)."""
    async def main():
        seen: list = []
        async with web_server(seen) as base:
            async with HttpFetcher(conf or make_conf()) as f:
                return [await f.fetch(base + p, **kw) for p in paths], seen
    return asyncio.run(main())


# ---- user agent ------------------------------------------------------------------------------

def test_user_agent_built_stormcrawler_style():
    conf = {"http.agent.name": "OWLer-py", "http.agent.version": "0.1",
            "http.agent.description": "open web index crawler", "http.agent.url": "https://x.eu/",
            "http.agent.email": "c@x.eu"}
    assert user_agent(conf) == "OWLer-py/0.1 (open web index crawler; https://x.eu/; c@x.eu)"
    assert user_agent({"http.agent.name": "Bot", "http.agent.url": "https://x.eu/"}) == \
        "Bot (https://x.eu/)"
    assert user_agent({"http.agent.name": "Bot"}) == "Bot"


def test_user_agent_owler_name_verbatim_and_agent_override():
    assert user_agent({"http.agent.name": "Owler@ows.eu/1"}) == "Owler@ows.eu/1"
    assert user_agent({"http.agent.name": "x", "http.agent": "Mozilla/5.0 (compatible; Y)"}) == \
        "Mozilla/5.0 (compatible; Y)"


@pytest.mark.parametrize("conf", [{}, {"http.agent.name": ""}, {"http.agent.name": "  "},
                                  {"http.agent": "", "http.agent.version": "1"}])
def test_user_agent_requires_name(conf):
    with pytest.raises(ConfError, match="http.agent.name"):
        user_agent(conf)


def test_fetcher_refuses_missing_agent_name():
    with pytest.raises(ConfError):
        HttpFetcher({"http.agent.name": ""})


# ---- responses -------------------------------------------------------------------------------

def test_200_body_headers_ip_and_request_bytes():
    t0, p0 = time.time(), time.perf_counter()
    (res,), seen = fetch_all(["/page?q=1&b=%2F"])
    t1, p1 = time.time(), time.perf_counter()
    assert res.ok and res.status == 200 and res.reason == "OK"
    assert res.content == b"<html>hello</html>"
    assert res.http_version == "1.1"
    assert res.content_type.startswith("text/html")
    assert res.header("content-type") == res.header("Content-Type")
    assert res.header("X-Missing") is None
    assert res.ip == "127.0.0.1"
    assert res.error_cause is None and not res.truncated
    assert t0 <= res.fetch_time <= t1 and 0 < res.elapsed <= p1 - p0  # taken during the fetch
    # the server saw our headers
    h = seen[0]["headers"]
    assert h["User-Agent"] == "TestBot/1"
    assert h["Accept-Encoding"] == "gzip, deflate, br, zstd"
    assert "Cookie" not in h
    assert seen[0]["path"] == "/page?q=1&b=%2F"  # sent as given, not re-quoted
    req = res.request_bytes()
    assert req.startswith(b"GET /page?q=1&b=%2F HTTP/1.1\r\n")
    assert req.endswith(b"\r\n\r\n")
    assert b"\r\nUser-Agent: TestBot/1\r\n" in req
    assert b"\r\nAccept-Language: " in req and b"\r\nAccept: " in req
    assert b"\r\nHost: 127.0.0.1:" in req


def test_raw_headers_keep_order_and_duplicates():
    async def on_connect(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-B: 2\r\nSet-Cookie: c=3\r\n"
                     b"Content-Length: 2\r\n\r\nhi")
        await writer.drain()
        writer.close()

    async def main():
        async with raw_server(on_connect) as port, HttpFetcher(make_conf()) as f:
            return await f.fetch(f"http://127.0.0.1:{port}/")
    res = asyncio.run(main())
    assert res.ok and res.content == b"hi"
    assert [h for h in res.headers if h[0] != "Content-Length"] == [
        ("Set-Cookie", "a=1"), ("X-B", "2"), ("Set-Cookie", "c=3")]
    assert res.header("set-cookie") == "a=1"


def test_error_statuses_are_responses():
    (r404, r500), _ = fetch_all(["/status/404", "/status/500"])
    assert (r404.status, r404.content, r404.error_cause) == (404, b"nope", None)
    assert (r500.status, r500.error_cause) == (500, None)
    assert redirect_target(r404) is None


def test_redirect_not_followed_and_target_resolved():
    (res,), seen = fetch_all(["/redirect"])
    assert res.status == 301
    assert len(seen) == 1  # not followed
    assert redirect_target(res) == res.url.rsplit("/", 1)[0] + "/new/place?x=1"


def test_redirect_target_absolute_and_missing():
    r = FetchResult(url="http://a.example/x/y", status=302,
                    headers=[("location", "https://b.example/z")])
    assert redirect_target(r) == "https://b.example/z"
    r = FetchResult(url="http://a.example/x/y", status=302, headers=[("location", "../q")])
    assert redirect_target(r) == "http://a.example/q"
    assert redirect_target(FetchResult(url="http://a.example/", status=302)) is None
    assert redirect_target(FetchResult(url="http://a.example/", status=None)) is None


def test_gzip_and_deflate_decoded_unknown_kept():
    (gz, dfl, br, lzw), _ = fetch_all(["/gzip", "/deflate", "/br", "/lzw"])
    assert gz.ok and gz.content == b"decoded text " * 100
    assert gz.decoded_from == "gzip" and gz.content_encoding is None
    assert gz.header("Content-Encoding") == "gzip"  # raw headers untouched
    assert dfl.content == b"raw deflate"
    assert br.ok and br.content == b"brotli text " * 50 and br.decoded_from == "br"
    assert lzw.ok and lzw.content == b"opaque" and lzw.content_encoding == "compress"


def test_corrupt_gzip_is_malformed_response():
    (res,), _ = fetch_all(["/badgzip"])
    assert res.status is None and res.error_cause == "malformed_response"
    assert "HTTP 200" in res.error_message and res.header("Content-Encoding") == "gzip"


def test_gzip_bomb_refused_in_bounded_memory():
    async def main():
        seen: list = []
        async with web_server(seen) as base, HttpFetcher(make_conf()) as f:
            tracemalloc.start()
            try:
                res = await f.fetch(base + "/bomb")
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            return res, peak
    res, peak = asyncio.run(main())
    assert len(BOMB) < 200_000
    assert res.status is None and res.error_cause == "too_large_decompressed"
    assert res.content == b""
    assert peak < 10_000_000, peak  # limit is 1 MB; 100 MB were never materialised


def test_decode_body_limits_and_multimember():
    data = gzip.compress(b"a" * 10) + gzip.compress(b"b" * 10)
    assert decode_body(data, "gzip", 100)[0] == b"a" * 10 + b"b" * 10
    assert decode_body(gzip.compress(b"a" * 100), "gzip", 100)[0] == b"a" * 100
    with pytest.raises(Exception):
        decode_body(gzip.compress(b"a" * 101), "gzip", 100)
    # a cut stream gives what it can
    part = decode_body(gzip.compress(bytes(range(256)) * 100)[:300], "gzip", 10**6)[0]
    assert 0 < len(part) < 25600
    assert decode_body(b"x", "identity", 10) == (b"x", None, None)
    assert decode_body(zlib.compress(b"zz"), "deflate", 10)[0] == b"zz"


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd", "br, gzip"])
def test_every_coding_is_decoded_bounded_and_refuses_garbage(coding):
    import brotli
    import zstandard

    from owler.fetch.http import DecodeError, TooLarge

    encode = {"gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress,
              "zstd": zstandard.ZstdCompressor().compress}

    def encoded(data: bytes) -> bytes:
        for c in coding.split(", "):
            data = encode[c](data)
        return data

    text = b"".join(b"%07d " % i for i in range(200_000))  # 1.6 MB: several zstd blocks
    assert decode_body(encoded(text), coding, len(text)) == (text, None, coding)
    with pytest.raises(TooLarge):  # a bomb: refused once the output passes the limit
        decode_body(encoded(b"\0" * 20_000_000), coding, 2_000_000)
    whole = encoded(text)
    part = decode_body(whole[: len(whole) * 3 // 4], coding, 10**7)[0]
    assert 0 < len(part) < len(text) and text.startswith(part)  # a cut stream: what it holds
    for junk in (b"<html>plain</html>", b"\x00" * 64, whole[:4]):
        with pytest.raises(DecodeError):
            decode_body(junk, coding, 10**6)


def test_content_limit_truncates_and_drops_connection():
    conf = make_conf(**{"http.content.limit": 10_000})
    (small, big, big2, small2), seen = fetch_all(["/page", "/big", "/bigchunked", "/page"], conf)
    assert small.ok and not small.truncated
    assert small2.ok and small2.content == b"<html>hello</html>"
    assert big.ok and big.truncated and big.content == BIG[:10_000]
    assert big2.ok and big2.truncated and big2.content == b"y" * 10_000
    ports = [s["port"] for s in seen]
    assert ports[0] == ports[1]  # keep-alive reuse after a fully read body
    assert ports[2] != ports[1]  # the truncated connection was not reused
    assert ports[3] != ports[2]


# ---- the connection pool: keep-alive and the bound on idle connections ----------------------

def fetch_hosts(order, conf, n_hosts):
    """Start ``n_hosts`` web servers (each a pool key of its own) and fetch ``/page`` from them in
    ``order`` (server indices). Returns the (server, client port) of each request as the servers
    saw it, and the connector's idle count after each fetch."""
    async def main():
        seen: list[list] = [[] for _ in range(n_hosts)]
        async with contextlib.AsyncExitStack() as stack:
            bases = [await stack.enter_async_context(web_server(seen[i])) for i in range(n_hosts)]
            calls, idle = [], []
            async with HttpFetcher(conf) as f:
                for i in order:
                    res = await f.fetch(bases[i] + "/page")
                    assert res.ok, res.error_message
                    calls.append((i, seen[i][-1]["port"]))
                    idle.append(f._session.connector.idle_count)
            return calls, idle
    return asyncio.run(main())


def test_idle_connections_to_many_hosts_are_kept_up_to_the_bound():
    # five hosts, then each again: with room for all, every host keeps its connection
    calls, idle = fetch_hosts([0, 1, 2, 3, 4, 0, 1, 2, 3, 4], make_conf(), 5)
    assert [p for _, p in calls[:5]] == [p for _, p in calls[5:]]
    assert idle == [1, 2, 3, 4, 5, 5, 5, 5, 5, 5]
    # room for two: the longest idle are closed first, the two most recent are reused
    conf = make_conf(**{"http.keepalive.max.idle": 2})
    calls, idle = fetch_hosts([0, 1, 2, 3, 2, 3, 0], conf, 4)
    port = dict(calls[:4])
    assert idle == [1, 2, 2, 2, 2, 2, 2]
    assert calls[4] == (2, port[2]) and calls[5] == (3, port[3])  # reused
    assert calls[6][0] == 0 and calls[6][1] != port[0]  # host 0 was closed when host 2 went idle
    # none kept: every request opens a connection
    calls, idle = fetch_hosts([0, 0, 0], make_conf(**{"http.keepalive.max.idle": 0}), 1)
    assert len({p for _, p in calls}) == 3 and idle == [0, 0, 0]


def test_a_connection_the_server_closed_is_not_counted_idle_and_the_next_fetch_works():
    async def main():
        ports: list[int] = []
        conns: list[asyncio.StreamWriter] = []

        async def on_connect(reader, writer):
            ports.append(writer.get_extra_info("peername")[1])
            conns.append(writer)
            with contextlib.suppress(Exception):
                while True:
                    await reader.readuntil(b"\r\n\r\n")
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    await writer.drain()

        async with raw_server(on_connect) as port:
            async with HttpFetcher(make_conf()) as f:
                pool = f._session.connector
                first = await f.fetch(f"http://127.0.0.1:{port}/a")
                assert first.ok and pool.idle_count == 1
                conns[0].close()  # the server ends its idle connection
                # the next fetch must come after the client saw the end (not a race with it)
                loop = asyncio.get_running_loop()
                deadline = loop.time() + HANG
                while any(p.is_connected() for key in pool._conns.values() for p, _ in key):
                    assert loop.time() < deadline, "the client never saw the server's close"
                    await asyncio.sleep(0.01)
                again = await f.fetch(f"http://127.0.0.1:{port}/b")
                assert again.ok and again.content == b"ok"
                assert len(ports) == 2 and pool.idle_count == 1
    asyncio.run(main())


def test_keepalive_settings_ours_then_stormcrawlers_then_defaults():
    from owler.fetch.http import DEFAULT_KEEPALIVE, default_max_idle, keepalive_settings

    assert keepalive_settings({}) == (DEFAULT_KEEPALIVE, default_max_idle())
    sc = {"okhttp.protocol.connection.pool.connection.keep.alive": 300,
          "okhttp.protocol.connection.pool.max.idle.connections": 5}
    assert keepalive_settings(sc) == (300.0, 5)
    assert keepalive_settings({**sc, "http.keepalive.timeout": 20,
                               "http.keepalive.max.idle": 100}) == (20.0, 100)
    for bad in ({"http.keepalive.timeout": 0}, {"http.keepalive.timeout": "soon"},
                {"http.keepalive.max.idle": -1},
                {"okhttp.protocol.connection.pool.max.idle.connections": "many"}):
        with pytest.raises(ConfError):
            keepalive_settings(bad)


def test_default_idle_bound_follows_the_open_file_limit():
    import resource

    from owler.fetch.http import DEFAULT_MAX_IDLE, default_max_idle

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
        assert default_max_idle() == 256
        if hard == resource.RLIM_INFINITY or hard >= 65536:
            resource.setrlimit(resource.RLIMIT_NOFILE, (65536, hard))
            assert default_max_idle() == DEFAULT_MAX_IDLE
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_per_request_content_limit_and_decoded_limit():
    conf = make_conf(**{"http.content.limit": 100})
    (gz,), _ = fetch_all(["/gzip"], conf)  # ~60 B on the wire, 1300 B decoded
    assert gz.ok and gz.truncated and gz.content == (b"decoded text " * 100)[:100]
    (big,), _ = fetch_all(["/big"], make_conf(), content_limit=50)
    assert big.truncated and len(big.content) == 50


def test_chunked_body():
    (res,), _ = fetch_all(["/chunked"])
    assert res.ok and res.content == b"".join(b"chunk%d;" % i for i in range(10))
    assert res.header("Transfer-Encoding") == "chunked"


# ---- failures --------------------------------------------------------------------------------

#: the longest a fetch may take in these tests before it counts as hung (its own timeouts are
#: 0.5 to 2 s; the servers hold their answer until the fetch has returned)
HANG = 60.0


def _fetch_raw(on_connect, conf):
    """Fetch ``/`` from a raw server whose behaviour is ``on_connect(reader, writer, release)``:
    ``release`` is an asyncio.Event set once the fetch has returned, for a server that holds its
    connection until then (so the fetch can only end by its own timeouts)."""
    async def main():
        release = asyncio.Event()

        async def handler(reader, writer):
            await on_connect(reader, writer, release)

        async with raw_server(handler) as port, HttpFetcher(conf) as f:
            try:
                return await asyncio.wait_for(f.fetch(f"http://127.0.0.1:{port}/"), HANG)
            except TimeoutError:
                raise AssertionError(f"the fetch did not end within {HANG:g} s (hang?)") from None
            finally:
                release.set()
    return asyncio.run(main())


def test_hanging_server_times_out():
    async def never_answer(reader, writer, release):
        await release.wait()

    res = _fetch_raw(never_answer, make_conf(**{"http.timeout": 500}))
    assert res.status is None and res.error_cause == "timeout"
    assert "fetcher.thread.timeout" not in res.error_message  # the read timeout, not the deadline
    assert res.elapsed >= 0.49  # it waited http.timeout (0.5 s) for the answer


def test_stalled_body_times_out_keeping_headers():
    async def stall(reader, writer, release):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
        await writer.drain()
        await release.wait()

    res = _fetch_raw(stall, make_conf(**{"http.timeout": 500}))
    assert res.status is None and res.error_cause == "timeout"
    assert "HTTP 200" in res.error_message and res.header("Content-Length") == "1000"
    assert "fetcher.thread.timeout" not in res.error_message  # the read timeout, not the deadline
    assert res.elapsed >= 0.49


def test_a_dripping_body_is_cut_by_the_fetch_deadline():
    """A byte every 0.1 s never trips the read timeout (1.5 s); fetcher.thread.timeout ends it."""
    async def drip(reader, writer, release):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        while not release.is_set():
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.1)

    conf = make_conf(**{"http.timeout": 1500, "fetcher.thread.timeout": 2})
    res = _fetch_raw(drip, conf)
    assert res.status is None and res.error_cause == "timeout"
    # the fetcher names the deadline only once it has passed (HttpFetcher.fetch)
    assert res.error_message == "HTTP 200: no complete response within fetcher.thread.timeout=2 s"


def test_garbage_response_is_malformed():
    async def garbage(reader, writer, release):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"SPDY/9 what\r\n\r\n")
        await writer.drain()
        writer.close()

    res = _fetch_raw(garbage, make_conf())
    assert res.status is None and res.error_cause in ("malformed_response", "connection_reset")


def test_connection_refused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()

    async def main():
        async with HttpFetcher(make_conf()) as f:
            return await f.fetch(f"http://127.0.0.1:{port}/")
    res = asyncio.run(main())
    assert res.status is None and res.error_cause == "connection_refused"
    assert res.error_message and res.request_bytes() == b""


@pytest.mark.parametrize("url,cause", [
    ("ftp://example.com/x", "unsupported_scheme"),
    ("mailto:someone@example.com", "unsupported_scheme"),
    ("not a url", "malformed URL"),
    ("http:///nohost", "malformed URL"),
])
def test_bad_urls_give_causes(url, cause):
    async def main():
        async with HttpFetcher(make_conf()) as f:
            return await f.fetch(url)
    res = asyncio.run(main())
    assert res.status is None and res.error_cause == cause, res


# ---- private-address guard -------------------------------------------------------------------

@pytest.mark.parametrize("addr,public", [
    ("93.184.215.14", True), ("2606:4700::6810:85e5", True), ("8.8.8.8", True),
    ("127.0.0.1", False), ("10.1.2.3", False), ("172.16.0.1", False), ("192.168.1.1", False),
    ("169.254.169.254", False), ("100.64.0.1", False), ("100.127.255.254", False),
    ("0.0.0.0", False), ("0.1.2.3", False), ("224.0.0.1", False), ("239.1.1.1", False),
    ("240.0.0.1", False), ("255.255.255.255", False), ("::1", False), ("::", False),
    ("fc00::1", False), ("fd12:3456::1", False), ("fe80::1", False), ("fe80::1%eth0", False),
    ("ff02::1", False), ("ff0e::1", False), ("::ffff:127.0.0.1", False), ("::ffff:8.8.8.8", True),
    ("[::1]", False), ("not-an-ip", False),
])
def test_is_public_address(addr, public):
    assert is_public_address(addr) is public


class FakeResolver:
    def __init__(self, hosts):
        self.hosts = hosts
        self.calls = 0

    async def resolve(self, host, port=0, family=socket.AF_INET):
        self.calls += 1
        return [{"hostname": host, "host": h, "port": port, "family": family, "proto": 0,
                 "flags": 0} for h in self.hosts]

    async def close(self):
        pass


def test_guarded_resolver_filters_and_refuses():
    async def main():
        mixed = GuardedResolver(FakeResolver(["10.0.0.1", "8.8.8.8", "127.0.0.1"]))
        got = [r["host"] for r in await mixed.resolve("mixed.example", 80)]
        private = GuardedResolver(FakeResolver(["192.168.0.7"]))
        with pytest.raises(PrivateAddressError, match="192.168.0.7"):
            await private.resolve("rebind.example", 80)
        return got
    assert asyncio.run(main()) == ["8.8.8.8"]


def test_guard_refuses_literal_and_resolved_loopback():
    paths = ["/page"]

    async def main():
        seen: list = []
        async with web_server(seen) as base:
            port = base.rsplit(":", 1)[1]
            guarded = make_conf(**{"http.allow.private.addresses": False})
            async with HttpFetcher(guarded) as f:
                lit = await f.fetch(base + paths[0])
                name = await f.fetch(f"http://localhost:{port}/page")
                v6 = await f.fetch(f"http://[::1]:{port}/page")
                assert f.refuses(f"http://localhost:{port}/other", names=True)  # remembered
            async with HttpFetcher(make_conf()) as f:
                allowed = await f.fetch(base + paths[0])
            return lit, name, v6, allowed, seen
    lit, name, v6, allowed, seen = asyncio.run(main())
    for res in (lit, name, v6):
        assert res.status is None and res.error_cause == "private_address", res
        assert res.error_message
    assert "127.0.0.1" in lit.error_message
    assert allowed.ok and allowed.status == 200
    assert len(seen) == 1  # only the allowed fetch reached the server


@pytest.mark.parametrize("addr, public", [
    ("::ffff:127.0.0.1", False), ("::ffff:7f00:1", False), ("[::ffff:10.0.0.1]", False),
    ("64:ff9b::7f00:1", False), ("64:ff9b::808:808", True),  # NAT64 of loopback / of 8.8.8.8
    ("2002:7f00:1::1", False), ("2002:808:808::1", True),  # 6to4 of loopback / of 8.8.8.8
    ("fe80::1%eth0", False), ("169.254.169.254", False), ("::", False), ("0.0.0.0", False),
    ("100.64.1.1", False), ("fd00::1", False), ("8.8.8.8", True), ("2001:4860:4860::8888", True),
    ("127.1", False), ("2130706433", False), ("not an address", False)])
def test_public_addresses_whatever_the_spelling(addr, public):
    assert is_public_address(addr) is public


def test_allowed_networks_open_exactly_their_addresses():
    guard = AddressGuard(["127.0.1.0/24", "fd12::/16"])
    assert guard.allows("127.0.1.9") and guard.allows("::ffff:127.0.1.9")
    assert guard.allows("fd12::7") and guard.allows("8.8.8.8")
    for refused in ("127.0.0.1", "127.0.2.1", "::1", "10.0.0.1", "fd13::1", "::ffff:127.0.2.1"):
        assert not guard.allows(refused), refused
    assert AddressGuard.from_conf({"http.allowed.networks": "10.1.0.0/16"}).allows("10.1.2.3")
    with pytest.raises(ConfError, match="http.allowed.networks.*'10.0.0.300/8'"):
        AddressGuard(["10.0.0.300/8"])


def test_allowed_networks_in_the_fetcher_and_its_resolver():
    """The farm on one loopback address is allowed; a canary on another is never reached, by
    literal address, by name, or in an IPv6 spelling."""
    async def main():
        seen: list = []
        async with web_server(seen) as base:
            port = base.rsplit(":", 1)[1]
            conf = make_conf(**{"http.allow.private.addresses": False,
                                "http.allowed.networks": ["127.0.0.1/32"]})
            async with HttpFetcher(conf, resolver=FakeResolver(["127.0.0.1"])) as f:
                allowed = [await f.fetch(base + "/page"),
                           await f.fetch(f"http://farm.example:{port}/page")]
            async with HttpFetcher(conf, resolver=FakeResolver(["127.0.0.2"])) as f:
                refused = [await f.fetch(f"http://canary.example:{port}/page"),
                           await f.fetch(f"http://127.0.0.2:{port}/page"),
                           await f.fetch(f"http://[::ffff:127.0.0.2]:{port}/page"),
                           await f.fetch(f"http://[::1]:{port}/page")]
            return allowed, refused, seen
    allowed, refused, seen = asyncio.run(main())
    assert all(r.ok for r in allowed) and len(seen) == 2
    f = HttpFetcher(make_conf(**{"http.allow.private.addresses": False,
                                 "http.allowed.networks": ["127.0.0.1/32"]}))
    assert f.refuses("http://127.0.0.2/x") and f.refuses("http://[::ffff:7f00:2]/")
    assert f.refuses("http://127.0.0.1/") is None and f.refuses("http://localhost/") is None
    f._note_refused("LocalHost", "localhost resolves to non-public address(es): ::1")
    assert f.refuses("http://localhost/") is None  # names only when asked: DNS may change
    assert "non-public" in f.refuses("http://localhost:8080/x", names=True)
    for r in refused:
        assert r.error_cause == "private_address", r


def test_fetch_before_start_and_close_twice():
    async def main():
        seen: list = []
        async with web_server(seen) as base:
            f = HttpFetcher(make_conf())
            res = await f.fetch(base + "/page")  # starts lazily
            await f.close()
            await f.close()
            return res
    assert asyncio.run(main()).ok


def test_resolver_results_are_what_we_connect_to():
    async def main():
        seen: list = []
        async with web_server(seen) as base:
            port = base.rsplit(":", 1)[1]
            fake = FakeResolver(["127.0.0.1"])
            async with HttpFetcher(make_conf(), resolver=fake) as f:
                res = await f.fetch(f"http://site.example:{port}/page")
                res2 = await f.fetch(f"http://site.example:{port}/page")
            mixed = FakeResolver(["10.0.0.1", "127.0.0.1"])
            guarded = make_conf(**{"http.allow.private.addresses": False})
            async with HttpFetcher(guarded, resolver=mixed) as f:
                refused = await f.fetch(f"http://rebind.example:{port}/page")
            return res, res2, refused, fake.calls, mixed.calls, seen
    res, res2, refused, calls, mixed_calls, seen = asyncio.run(main())
    assert res.ok and res.ip == "127.0.0.1" and res2.ok
    assert calls == 1  # resolved once, connection kept alive
    assert seen[0]["headers"]["Host"].startswith("site.example:")
    assert refused.error_cause == "private_address" and mixed_calls == 1
    assert "10.0.0.1" in refused.error_message and len(seen) == 2


class FailingResolver(FakeResolver):
    async def resolve(self, host, port=0, family=socket.AF_INET):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@pytest.mark.parametrize("allow_private", [True, False])
def test_dns_failure(allow_private):
    async def main():
        conf = make_conf(**{"http.allow.private.addresses": allow_private})
        async with HttpFetcher(conf, resolver=FailingResolver([])) as f:
            return await f.fetch("http://no-such-host.example/")
    res = asyncio.run(main())
    assert res.status is None and res.error_cause == "dns"


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(d / "k.pem"),
                    "-out", str(d / "c.pem"), "-days", "1", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(d / "c.pem", d / "k.pem")
    return ctx


@pytest.mark.parametrize("trust,expect", [(False, "tls"), (True, None)])
def test_tls_verification(self_signed, trust, expect):
    async def main():
        seen: list = []
        runner = web.AppRunner(make_app(seen), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self_signed)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        try:
            conf = make_conf(**{"http.trust.everything": trust})
            async with HttpFetcher(conf) as f:
                return await f.fetch(f"https://127.0.0.1:{port}/page")
        finally:
            await runner.cleanup()
    res = asyncio.run(main())
    assert res.error_cause == expect, res.error_message
    if expect is None:
        assert res.status == 200 and res.content == b"<html>hello</html>"
