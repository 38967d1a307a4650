"""owler.fetch.http with a proxy and custom request headers: the keys read (StormCrawler's
http.proxy.* and http.custom.headers), their errors, and the guard's decision with a proxy.

The proxies here are small recording servers on 127.0.0.1 that answer for the target themselves
(an HTTP proxy that answers every request, a SOCKS5 server that grants or refuses a CONNECT and
then answers as the target): they show what the fetcher hands a proxy, and nothing ever leaves
loopback, whatever address a test names. The real proxies (tinyproxy, Dante) are crawled
through in tests/integration/test_proxy_crawl.py."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

import pytest

from owler.conf import ConfError
from owler.fetch import engine
from owler.fetch.http import (HttpFetcher, ProxySettings, check_conf, custom_headers,
                              proxy_from_conf)
from tests.unit.test_http import FailingResolver, FakeResolver, make_conf, web_server

GUARDED = {"http.allow.private.addresses": False}


# ---- the keys --------------------------------------------------------------------------------

@pytest.mark.parametrize("conf, expected", [
    ({}, None),
    ({"http.proxy.host": ""}, None),
    ({"http.proxy.host": "proxy.example"}, ProxySettings("http", "proxy.example", 8080)),
    ({"http.proxy.host": " 10.0.0.5 ", "http.proxy.port": "3128", "http.proxy.type": "http"},
     ProxySettings("http", "10.0.0.5", 3128)),
    ({"http.proxy.host": "[::1]", "http.proxy.port": 1080, "http.proxy.type": "SOCKS",
      "http.proxy.user": "crawler", "http.proxy.pass": "s3cret"},
     ProxySettings("socks5", "::1", 1080, "crawler", "s3cret")),
    ({"http.proxy.host": "proxy.example", "http.proxy.type": "Socks5"},
     ProxySettings("socks5", "proxy.example", 8080)),
    ({"http.proxy": "http://proxy.example:3128"}, ProxySettings("http", "proxy.example", 3128)),
    ({"http.proxy": "socks5://u:p%40ss@127.0.0.1:1080/"},
     ProxySettings("socks5", "127.0.0.1", 1080, "u", "p@ss")),
    ({"http.proxy": "SOCKS://[fd00::2]:1080"}, ProxySettings("socks5", "fd00::2", 1080)),
    ({"http.proxy.host": "proxy.example",
      "http.proxy.manager": "org.apache.stormcrawler.proxy.SingleProxyManager"},
     ProxySettings("http", "proxy.example", 8080)),
])
def test_proxy_keys(conf, expected):
    assert proxy_from_conf(conf) == expected


@pytest.mark.parametrize("conf, message", [
    ({"http.proxy.host": "proxy.example", "http.proxy.type": "HTTPS"},
     "http.proxy.type: expected HTTP or SOCKS, got 'HTTPS'"),
    ({"http.proxy.host": "proxy.example", "http.proxy.port": 0}, "between 1 and 65535, got 0"),
    ({"http.proxy.host": "proxy.example", "http.proxy.port": 65536}, "got 65536"),
    ({"http.proxy.host": "proxy.example", "http.proxy.port": "x"}, "expected an integer"),
    ({"http.proxy.host": "http://proxy.example"}, "is not a host name or an address"),
    ({"http.proxy.host": "proxy.example:3128"}, "is not a host name or an address"),
    ({"http.proxy.host": "p", "http.proxy.user": "u"}, "both or neither"),
    ({"http.proxy.host": "p", "http.proxy.pass": "x"}, "both or neither"),
    ({"http.proxy.host": "p", "http.proxy.user": "a:b", "http.proxy.pass": "x"}, "cannot hold ':'"),
    ({"http.proxy.host": "p", "http.proxy.user": "u", "http.proxy.pass": "\u20ac"}, "Latin-1"),
    ({"http.proxy.host": "p", "http.proxy.type": "SOCKS", "http.proxy.user": "u" * 256,
      "http.proxy.pass": "x"}, "at most 255 bytes"),
    ({"http.proxy.port": 3128}, "http.proxy.port set without http.proxy.host"),
    ({"http.proxy.type": "SOCKS", "http.proxy.user": "u"},
     "http.proxy.type, http.proxy.user set without http.proxy.host"),
    ({"http.proxy": "http://a:1", "http.proxy.host": "b"}, "not both"),
    ({"http.proxy": "http://a:1", "http.proxy.port": 2}, "not both"),
    ({"http.proxy": "http://proxy.example"}, "type://[user:pass@]host:port"),
    ({"http.proxy": "http://proxy.example:3128/path"}, "type://[user:pass@]host:port"),
    ({"http.proxy": "https://proxy.example:3128"}, "the scheme names the proxy's type"),
    ({"http.proxy": "proxy.example:3128"}, "the scheme names the proxy's type"),
    ({"http.proxy": "socks5://u@proxy.example:1080"}, "both or neither"),
    ({"http.proxy.file": "proxies.txt"}, "a list of proxies is not supported"),
    ({"http.proxy.manager": "org.apache.stormcrawler.proxy.MultiProxyManager",
      "http.proxy.host": "p"}, "only one proxy for every request"),
])
def test_proxy_key_errors(conf, message):
    with pytest.raises(ConfError, match=message.replace("[", r"\[").replace("(", r"\(")):
        proxy_from_conf(conf)
    with pytest.raises(ConfError):  # before Storm starts (owler run)
        engine.check_conf(conf)


def test_proxy_password_never_shown():
    proxy = proxy_from_conf({"http.proxy": "socks5://crawler:s3cret@127.0.0.1:1080"})
    assert str(proxy) == "socks5://crawler:***@127.0.0.1:1080"
    assert "s3cret" not in repr(proxy)
    assert str(ProxySettings("http", "::1", 3128)) == "http://[::1]:3128"


@pytest.mark.parametrize("value, expected", [
    (None, []),
    ([], []),
    (["X-Crawl=owler", "From = ops@example.org "], [("X-Crawl", "owler"),
                                                    ("From", "ops@example.org")]),
    ("X-A=1, X-B=2", [("X-A", "1"), ("X-B", "2")]),  # a string is a comma-separated list
    (["X-Q=a=b", "X-Empty="], [("X-Q", "a=b"), ("X-Empty", "")]),
    ({"X-Map": "yes", "X-Num": 7}, [("X-Map", "yes"), ("X-Num", "7")]),
])
def test_custom_headers(value, expected):
    assert custom_headers({"http.custom.headers": value}) == expected


@pytest.mark.parametrize("value, message", [
    (["X-NoEquals"], "'X-NoEquals' is not of the form Name=value"),
    ("X-A=1,2", "'2' is not of the form Name=value"),  # a comma in a value of the string form
    (["Bad Name=1"], "'Bad Name' is not a header name"),
    (["=1"], "'' is not a header name"),
    (["User-Agent=Mozilla"], "User-Agent cannot be set here: the crawler's name"),
    (["host=example.org"], "host cannot be set here"),
    (["Accept=*/*"], "set by http.accept"),
    (["Accept-Encoding=identity"], "Accept-Encoding cannot be set here"),
    (["If-None-Match=x"], "http.conditional.requests"),
    (["Authorization=Bearer x"], "every host the crawl reaches"),
    (["Proxy-Authorization=Basic x"], "http.proxy.user"),
    (["Transfer-Encoding=chunked"], "framing"),
    (["Connection=close"], "framing"),
    (["X-A=line\r\nX-Injected: 1"], "printable ASCII"),
    (["X-A=caf\u00e9"], "printable ASCII"),
    (["X-A=nul\x00"], "printable ASCII"),
    (["X-A=1", "x-a=2"], "x-a is given twice"),
    ({"X-A": ["a", "list"]}, "the value of X-A must be a string"),
])
def test_custom_header_errors(value, message):
    conf = {"http.custom.headers": value}
    with pytest.raises(ConfError, match=message.replace("*", r"\*")):
        custom_headers(conf)
    with pytest.raises(ConfError):
        check_conf(conf)
    with pytest.raises(ConfError):
        HttpFetcher(make_conf(**conf))


def test_custom_headers_on_every_request():
    """Sent with every request after the crawler's own, which they never replace."""
    async def main():
        seen: list = []
        conf = make_conf(**{"http.custom.headers": ["X-Crawl-Run=test 1", "From=ops@example.org"]})
        async with web_server(seen) as base, HttpFetcher(conf) as f:
            res = [await f.fetch(base + "/page"),
                   await f.fetch(base + "/page", extra_headers={"If-None-Match": '"e"'})]
        return res, seen
    res, seen = asyncio.run(main())
    assert len(seen) == 2
    for request in seen:
        assert request["headers"]["X-Crawl-Run"] == "test 1"
        assert request["headers"]["From"] == "ops@example.org"
        assert request["headers"]["User-Agent"] == "TestBot/1"
    assert seen[1]["headers"]["If-None-Match"] == '"e"'
    for r in res:
        names = [k for k, _ in r.request_headers]
        assert names.index("User-Agent") < names.index("X-Crawl-Run") < names.index("From")
        assert ("X-Crawl-Run", "test 1") in r.request_headers
        assert b"X-Crawl-Run: test 1\r\n" in r.request_bytes()


# ---- recording proxies -----------------------------------------------------------------------

class HttpProxy:
    """An HTTP proxy on 127.0.0.1 that answers every request itself (200 ``proxied``; 403 to
    ``CONNECT`` when ``refuse_connect``) and records the request line and headers."""

    def __init__(self, refuse_connect: bool = False, status: int = 200) -> None:
        self.requests: list[tuple[str, dict]] = []
        self.connections = 0
        self.refuse_connect = refuse_connect
        self.status = status

    async def handle(self, reader, writer):
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *fields = head.decode("latin-1").split("\r\n")
                headers = dict(f.split(": ", 1) for f in fields if f)
                self.requests.append((line, headers))
                if line.startswith("CONNECT"):
                    status = 403 if self.refuse_connect else 502
                    writer.write(f"HTTP/1.1 {status} No\r\nContent-Length: 0\r\n\r\n".encode())
                    await writer.drain()
                    break
                writer.write(f"HTTP/1.1 {self.status} X\r\nContent-Length: 7\r\n\r\nproxied"
                             .encode())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


class SocksServer:
    """A SOCKS5 server on 127.0.0.1 (RFC 1928; RFC 1929 when ``auth`` is set) that records each
    CONNECT's destination as sent (an address, or a name), answers it with ``reply`` and, when
    it granted it, answers HTTP requests on the connection itself."""

    def __init__(self, reply: int = 0, auth: tuple[str, str] | None = None) -> None:
        self.reply = reply
        self.auth = auth
        self.destinations: list[tuple[str, str, int]] = []  # (kind, host, port)
        self.connections = 0
        self.http_requests: list[str] = []

    async def handle(self, reader, writer):
        self.connections += 1
        try:
            ver, n = await reader.readexactly(2)
            methods = await reader.readexactly(n)
            if self.auth:
                if 2 not in methods:
                    writer.write(b"\x05\xff")
                    return
                writer.write(b"\x05\x02")
                _, ulen = await reader.readexactly(2)
                user = (await reader.readexactly(ulen)).decode()
                plen = (await reader.readexactly(1))[0]
                password = (await reader.readexactly(plen)).decode()
                ok = (user, password) == self.auth
                writer.write(b"\x01\x00" if ok else b"\x01\x01")
                if not ok:
                    return
            else:
                writer.write(b"\x05\x00")
            _, cmd, _, atyp = await reader.readexactly(4)
            if atyp == 1:
                dest = ("ipv4", socket.inet_ntop(socket.AF_INET, await reader.readexactly(4)))
            elif atyp == 4:
                dest = ("ipv6", socket.inet_ntop(socket.AF_INET6, await reader.readexactly(16)))
            else:
                size = (await reader.readexactly(1))[0]
                dest = ("name", (await reader.readexactly(size)).decode())
            port = struct.unpack("!H", await reader.readexactly(2))[0]
            self.destinations.append((*dest, port))
            writer.write(bytes([5, self.reply, 0, 1, 127, 0, 0, 1, 0, 80]))
            await writer.drain()
            if self.reply:
                return
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.http_requests.append(head.decode("latin-1").split("\r\n", 1)[0])
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\ntarget")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def serving(handler):
    server = await asyncio.start_server(handler.handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 1)


def through(kind: str, port: int, **over) -> dict:
    return make_conf(**{"http.proxy.host": "127.0.0.1", "http.proxy.port": port,
                        "http.proxy.type": kind, **over})


# ---- the guard's decision with an HTTP proxy -------------------------------------------------

def test_http_proxy_gets_only_what_the_guard_allows():
    """Through an HTTP proxy the target's name is resolved through the guard first: a name with
    only refused addresses and a refused literal never reach the proxy; an allowed name is
    handed over by name (absolute-form), resolved once for two requests."""
    proxy = HttpProxy()
    resolver = FakeResolver(["8.8.8.8"])
    private = FakeResolver(["10.0.0.1", "192.168.1.1"])

    async def main():
        async with serving(proxy) as port:
            async with HttpFetcher(through("HTTP", port, **GUARDED), resolver=resolver) as f:
                ok = [await f.fetch("http://public.example/a"),
                      await f.fetch("http://public.example/b"),
                      await f.fetch("http://8.8.4.4/c")]
                literal = [await f.fetch("http://10.1.2.3/"), await f.fetch("http://[::1]:81/"),
                           await f.fetch("http://127.0.0.1/")]
                remembered = f.refuses("http://rebind.example/x", names=True)
            async with HttpFetcher(through("HTTP", port, **GUARDED), resolver=private) as f:
                rebind = await f.fetch("http://rebind.example/x")
                remembered = f.refuses("http://rebind.example/y", names=True)
        return ok, literal, rebind, remembered
    ok, literal, rebind, remembered = asyncio.run(main())
    assert [r.status for r in ok] == [200, 200, 200] and ok[0].content == b"proxied"
    assert [line for line, _ in proxy.requests] == [
        "GET http://public.example/a HTTP/1.1", "GET http://public.example/b HTTP/1.1",
        "GET http://8.8.4.4/c HTTP/1.1"]
    assert resolver.calls == 1  # the allowed name kept, the literal never resolved
    assert all(r.ip is None for r in ok)  # the peer is the proxy, not the target
    assert ok[0].request_target == "/a"
    for r in literal:
        assert r.error_cause == "private_address", r
    assert rebind.error_cause == "private_address"
    assert "10.0.0.1" in rebind.error_message and "192.168.1.1" in rebind.error_message
    assert remembered and "non-public" in remembered  # the engine's early refusal sees it
    assert len(proxy.requests) == 3  # nothing refused was handed to the proxy


def test_http_proxy_with_the_guard_off_hands_everything_over():
    proxy = HttpProxy()
    resolver = FakeResolver(["10.0.0.1"])

    async def main():
        async with serving(proxy) as port:
            async with HttpFetcher(through("HTTP", port), resolver=resolver) as f:
                return [await f.fetch("http://intranet.example/"), await f.fetch("http://10.1.2.3/")]
    res = asyncio.run(main())
    assert [r.status for r in res] == [200, 200]
    assert resolver.calls == 0  # the proxy resolves
    assert [line for line, _ in proxy.requests] == ["GET http://intranet.example/ HTTP/1.1",
                                                    "GET http://10.1.2.3/ HTTP/1.1"]


def test_http_proxy_credentials_go_to_the_proxy_only():
    proxy = HttpProxy()

    async def main():
        async with serving(proxy) as port:
            conf = through("HTTP", port, **{"http.proxy.user": "crawler",
                                           "http.proxy.pass": "s3cret",
                                           "http.custom.headers": ["X-Run=1"]})
            async with HttpFetcher(conf) as f:
                return await f.fetch("http://public.example/"), await f.fetch("https://public.example/")
    res, tunnel = asyncio.run(main())
    _, headers = proxy.requests[0]
    assert headers["Proxy-Authorization"] == "Basic Y3Jhd2xlcjpzM2NyZXQ="  # crawler:s3cret
    line, connect = proxy.requests[1]  # https: the CONNECT carries them, the tunnel nothing
    assert line == "CONNECT public.example:443 HTTP/1.1"
    assert connect["Proxy-Authorization"] == "Basic Y3Jhd2xlcjpzM2NyZXQ="
    assert tunnel.error_cause == "proxy" and "502" in tunnel.error_message
    assert headers["X-Run"] == "1" and headers["User-Agent"] == "TestBot/1"
    assert res.ok
    assert all(k.lower() != "proxy-authorization" for k, _ in res.request_headers)
    assert b"s3cret" not in res.request_bytes() and b"Y3Jhd2xlcjpzM2NyZXQ" not in res.request_bytes()


def test_http_proxy_failures_are_the_proxys():
    async def main():
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            closed = s.getsockname()[1]
        async with HttpFetcher(through("HTTP", closed)) as f:
            down = await f.fetch("http://public.example/")
        refusing = HttpProxy(refuse_connect=True)
        async with serving(refusing) as port, HttpFetcher(through("HTTP", port)) as f:
            connect = await f.fetch("https://public.example/")
        asking = HttpProxy(status=407)
        async with serving(asking) as port, HttpFetcher(through("HTTP", port)) as f:
            auth = await f.fetch("http://public.example/")
        conf = make_conf(**{"http.proxy.host": "proxy.invalid", "http.proxy.port": 3128})
        async with HttpFetcher(conf, resolver=FailingResolver([])) as f:
            unknown = await f.fetch("http://8.8.8.8/")
        async with HttpFetcher(through("HTTP", closed, **GUARDED),
                               resolver=FailingResolver([])) as f:
            dns = await f.fetch("http://no-such-host.example/")
        return down, connect, refusing, auth, unknown, dns
    down, connect, refusing, auth, unknown, dns = asyncio.run(main())
    assert down.error_cause == "proxy" and "Connect call failed" in down.error_message
    assert connect.error_cause == "proxy" and "403" in connect.error_message
    assert refusing.requests[0][0] == "CONNECT public.example:443 HTTP/1.1"
    assert auth.error_cause == "proxy" and "407" in auth.error_message
    assert unknown.error_cause == "proxy" and "proxy.invalid" in unknown.error_message
    assert dns.error_cause == "dns"  # the target's name, asked before the proxy is


# ---- the guard's decision with a SOCKS proxy -------------------------------------------------

def test_socks_proxy_gets_the_checked_address_never_the_name():
    """Through SOCKS5 the connector resolves the target through the guard and hands the proxy
    the address it allowed: no second lookup at the proxy, the peer noted is the target's."""
    socks = SocksServer()
    mixed = FakeResolver(["10.0.0.1", "8.8.8.8"])
    private = FakeResolver(["10.0.0.1"])

    async def main():
        async with serving(socks) as port:
            async with HttpFetcher(through("SOCKS", port, **GUARDED), resolver=mixed) as f:
                ok = [await f.fetch("http://public.example/a"),
                      await f.fetch("http://public.example/b"),
                      await f.fetch("http://[2001:4860:4860::8888]:8080/c")]
                literal = [await f.fetch("http://10.1.2.3/"), await f.fetch("http://127.0.0.1/")]
            async with HttpFetcher(through("SOCKS", port, **GUARDED), resolver=private) as f:
                rebind = await f.fetch("http://rebind.example/")
        return ok, literal, rebind
    ok, literal, rebind = asyncio.run(main())
    assert [r.content for r in ok] == [b"target"] * 3
    assert socks.destinations == [("ipv4", "8.8.8.8", 80), ("ipv6", "2001:4860:4860::8888", 8080)]
    assert socks.http_requests == ["GET /a HTTP/1.1", "GET /b HTTP/1.1", "GET /c HTTP/1.1"]
    assert socks.connections == 2  # kept alive through the proxy
    assert [r.ip for r in ok] == ["8.8.8.8", "8.8.8.8", "2001:4860:4860::8888"]
    for r in (*literal, rebind):
        assert r.error_cause == "private_address", r
    assert mixed.calls == 1 and private.calls == 1


def test_socks_proxy_with_the_guard_off_resolves_names_itself():
    socks = SocksServer()
    resolver = FakeResolver(["10.0.0.1"])

    async def main():
        async with serving(socks) as port:
            async with HttpFetcher(through("SOCKS", port), resolver=resolver) as f:
                return await f.fetch("http://intranet.example:8080/")
    res = asyncio.run(main())
    assert res.content == b"target" and res.ip is None
    assert socks.destinations == [("name", "intranet.example", 8080)] and resolver.calls == 0


@pytest.mark.parametrize("reply, cause", [(5, "connection_refused"), (4, "connection_error"),
                                          (2, "proxy"), (1, "proxy")])
def test_socks_replies(reply, cause):
    """What the proxy says of the target keeps the target's cause; a refusal of its own (a rule
    set, a general failure) is the proxy's."""
    socks = SocksServer(reply=reply)

    async def main():
        async with serving(socks) as port, HttpFetcher(through("SOCKS", port)) as f:
            return await f.fetch("http://8.8.8.8/")
    res = asyncio.run(main())
    assert res.error_cause == cause, res.error_message
    assert "SOCKS proxy socks5://127.0.0.1:" in res.error_message


def test_socks_authentication():
    socks = SocksServer(auth=("crawler", "s3cret"))

    async def main():
        async with serving(socks) as port:
            good = through("SOCKS", port, **{"http.proxy.user": "crawler",
                                            "http.proxy.pass": "s3cret"})
            async with HttpFetcher(good) as f:
                ok = await f.fetch("http://8.8.8.8/")
            bad = through("SOCKS", port, **{"http.proxy.user": "crawler",
                                           "http.proxy.pass": "wrong"})
            async with HttpFetcher(bad) as f:
                refused = await f.fetch("http://8.8.8.8/")
            async with HttpFetcher(through("SOCKS", port)) as f:
                anonymous = await f.fetch("http://8.8.8.8/")
        return ok, refused, anonymous
    ok, refused, anonymous = asyncio.run(main())
    assert ok.content == b"target"
    assert refused.error_cause == "proxy" and "authentication failure" in refused.error_message
    assert "s3cret" not in refused.error_message and "wrong" not in refused.error_message
    assert anonymous.error_cause == "proxy"
    assert socks.destinations == [("ipv4", "8.8.8.8", 80)]  # only the authenticated one


def test_socks_proxy_down():
    async def main():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            closed = s.getsockname()[1]
        async with HttpFetcher(through("SOCKS", closed)) as f:
            return await f.fetch("http://8.8.8.8/")
    res = asyncio.run(main())
    assert res.error_cause == "proxy" and "Could not connect to proxy" in res.error_message
