"""HTTP fetching with limits and the private-address guard (StormCrawler's HTTP protocol).

One :class:`HttpFetcher` per fetcher task holds ONE ``aiohttp.ClientSession``: a keep-alive
connection pool and ONE shared ``ssl.SSLContext`` (building a context per connection costs ~30 ms
of CPU). Redirects are never followed (the fetcher turns 3xx into REDIRECTION), cookies
are never kept, and the body is read raw and decoded here with bounded output.

Every failure becomes a :class:`FetchResult` whose ``error_cause`` says why; :meth:`HttpFetcher.fetch`
never raises (except ``asyncio.CancelledError``). Invariant: ``error_cause is None`` ⇔
``status is not None``. When the response head arrived but the body failed (timeout while reading,
decompression bomb, broken chunking) the headers are kept, ``status`` is None and the HTTP code is
given in ``error_message``.

``error_cause`` values: ``private_address``, ``malformed URL``, ``unsupported_scheme``, ``dns``,
``connection_refused``, ``connection_error``, ``connection_reset``, ``tls``, ``timeout``,
``malformed_response``, ``too_large_decompressed``, ``proxy``, ``exception``.

Private-address guard (an SSRF guard: a crawled page must not make the crawler fetch its own
network): unless ``http.allow.private.addresses`` is true, no request
goes to a loopback, private (RFC 1918, fc00::/7), link-local, multicast, unspecified, reserved,
shared (CGNAT 100.64.0.0/10) or 0.0.0.0/8 address, nor to an IPv6 address carrying one (IPv4-mapped,
NAT64 64:ff9b::/96, 6to4), except inside the networks listed in ``http.allowed.networks`` (CIDRs;
the operator's own networks, the tests' loopback farm). Host names are resolved ONCE by
:class:`GuardedResolver`, which drops refused results before aiohttp connects to them, so the
address connected to is the address checked (no DNS-rebinding gap). Literal IPs are checked before
the request; the URL normaliser has already turned other IPv4 spellings (``2130706433``, ``127.1``,
``0x7f.1``) into the dotted form, and aiohttp refuses those it is given directly. Every redirect
hop is a fetch of its own through the same guard (redirects are never followed here).

Proxy (:class:`ProxySettings`, StormCrawler's keys of its single-proxy manager: ``http.proxy.host``,
``.port``, ``.type``, ``.user``, ``.pass``, or all of it in one URL, ``http.proxy``): every request
of the fetcher goes through it, robots.txt and ``/.well-known/tdmrep.json`` included, since they are
fetched with the same :class:`HttpFetcher`; the environment's ``HTTP_PROXY`` and the like are never
read. The guard still decides on the *target's* address, before anything is handed to the proxy
(which would fetch a private address as readily as any other):

- a literal address is judged as without a proxy, before the request;
- ``HTTP``: the target's host name is resolved here through :class:`GuardedResolver` (the answer
  kept 60 s, as the connector keeps its own), and a name with no allowed address is refused
  (``private_address``) before the proxy is asked. The proxy then resolves the name again: a name
  whose answers change between the two lookups (DNS rebinding) or that the proxy's resolver
  answers differently (split horizon) can still reach an address the guard refused. That gap is
  the price of the HTTP proxy protocol (a plain-http request carries the name in its target, a
  ``CONNECT`` names the host whose certificate is checked and pooled connections are keyed by
  name, so pinning the address would mix hosts); an operator closes it at the proxy, with its
  own rules on destination addresses (Squid's ``dst`` ACLs, for one). ``FetchResult.ip`` is None
  (the address connected to is the proxy's);
- ``SOCKS`` (SOCKS5, python-socks): the connector resolves the target through the guard as
  without a proxy and hands the proxy the checked *address*, never the name: no second lookup,
  no gap, and ``FetchResult.ip`` is that address. With the guard off
  (``http.allow.private.addresses``) the name is handed over and the proxy resolves it.

So with the guard on, the crawler's machine must resolve the names it crawls itself, with or
without a proxy. A failure of the proxy itself (unreachable, its name unknown, a refused
``CONNECT``, a SOCKS rule set or authentication refusing, a 407 to a plain-http request) is
``error_cause`` ``proxy``; what the proxy reports of the target keeps the target's cause (SOCKS:
refused → ``connection_refused``, unreachable → ``connection_error``). Any other failure of a
plain-http request at an HTTP proxy comes back as the proxy's own HTTP response (tinyproxy 1.11:
500 or 502 and a page, and 401 rather than 407 for wrong credentials) and is judged as any
response. The proxy's credentials are never in
``request_headers`` (nor in the WARC request record): aiohttp adds ``Proxy-Authorization`` to a
plain-http request for the proxy, which consumes it. StormCrawler's list of proxies
(``http.proxy.file``, another ``http.proxy.manager``) is not supported and is a configuration
error, as is a proxy key without ``http.proxy.host``: either would crawl without the proxy the
operator meant.

Custom request headers (``http.custom.headers``, StormCrawler's key and form: a list of
``Name=value``; a mapping of name to value is read too): sent with every request, robots.txt and
TDMRep's file included, after the crawler's own. A header the crawler sets itself cannot be
replaced this way (``User-Agent``, ``Host``, ``Accept``, ``Accept-Language``, ``Accept-Encoding``,
the conditional ``If-None-Match``/``If-Modified-Since``, the framing and connection headers), nor
can ``Authorization``/``Proxy-Authorization`` be set (the crawl follows links to every host; the
proxy has its own keys): such a name, a name that is not an HTTP token, a value with a control
character or a non-ASCII one, an entry without ``=`` and a name given twice are each a
:class:`owler.conf.ConfError` at start (:func:`check_conf`, before Storm starts). Values are sent
as written, surrounding blanks removed; they are in every WARC request record.

Config keys (crawler-conf.yaml):

=============================== ============ ====================================================
key                             default      meaning
=============================== ============ ====================================================
http.agent                      ""           verbatim User-Agent; else built from http.agent.*
http.agent.name                 (required)   product token, e.g. ``Owler@ows.eu/1`` (verbatim)
http.agent.version/description/url/email     parts of the built User-Agent
http.accept / http.accept.language           Accept / Accept-Language headers
http.timeout                    10000        ms; connect timeout, and the longest wait for bytes
fetcher.thread.timeout          30           s; deadline of one fetch, body included (≤ 0: none):
                                             a body dripping a byte at a time is cut here
http.content.limit              -1           max body bytes kept (raw and decoded), -1 = none
http.max.decompressed.size      33554432     decoded bytes beyond which the fetch is refused
http.allow.private.addresses    false        turn the private-address guard off
http.allowed.networks           []           CIDRs allowed although not public
http.trust.everything           false        do not verify TLS certificates
http.keepalive.timeout          60.0         s an idle pooled connection is kept (owler key;
                                             StormCrawler's okhttp.protocol.connection.pool.
                                             connection.keep.alive is read when it is absent)
http.keepalive.max.idle         4096         most idle connections kept, the longest idle
                                             closed first; at most a quarter of the open-file
                                             limit by default (okhttp.protocol.connection.
                                             pool.max.idle.connections is read when absent)
http.proxy.host                 (none)       the proxy's host name or address; unset: no proxy
http.proxy.port                 8080         the proxy's port
http.proxy.type                 HTTP         ``HTTP`` (aiohttp's own client: absolute-form for
                                             http, ``CONNECT`` for https) or ``SOCKS`` (SOCKS5)
http.proxy.user / http.proxy.pass            the proxy's credentials, both or neither (HTTP:
                                             Basic ``Proxy-Authorization``; SOCKS5: RFC 1929)
http.proxy                      (none)       the same in one URL, ``type://[user:pass@]host:port``
                                             (type ``http``, ``socks`` or ``socks5``)
http.custom.headers             []           ``Name=value`` entries added to every request
fetcher.threads.number          10           pool limit = 2 x this
fetcher.threads.per.queue       1            per-host pool limit = max(2, 2 x this)
=============================== ============ ====================================================
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import errno
import functools
import io
import ipaddress
import re
import socket
import ssl
import time
import weakref
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping
from urllib.parse import urljoin

import aiohttp
import brotli
import zstandard
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver
from python_socks import ProxyConnectionError as SocksConnectionError
from python_socks import ProxyError as SocksError
from python_socks import ProxyType
from python_socks.async_.asyncio import Proxy as SocksProxy
from yarl import URL

from owler import conf as C
from owler.conf import ConfError
from owler.constants import (AGENT_NAME_KEY, CONTENT_LIMIT_KEY, FETCHER_THREADS_KEY,
                             THREADS_PER_QUEUE_KEY)

DEFAULT_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
DEFAULT_ACCEPT_LANGUAGE = "en-us,en-gb,en;q=0.7,*;q=0.3"
ACCEPT_ENCODING = "gzip, deflate, br, zstd"

_SHARED = ipaddress.ip_network("100.64.0.0/10")
_THIS_NET = ipaddress.ip_network("0.0.0.0/8")
_ULA = ipaddress.ip_network("fc00::/7")
_CHUNK = 64 * 1024


# ---- user agent ------------------------------------------------------------------------------

def max_decompressed_size(conf: Mapping[str, Any]) -> int:
    """``http.max.decompressed.size`` in bytes (default 32 MiB; negative: no limit)."""
    size = C.get_int(conf, "http.max.decompressed.size", 32 * 1024 * 1024)
    return size if size >= 0 else 1 << 62


def user_agent(conf: Mapping[str, Any]) -> str:
    """The User-Agent: ``http.agent`` verbatim when set, else StormCrawler's
    ``name[/version][ (description; url; email)]`` with blank parts left out.

    ``http.agent.name`` is taken verbatim (``Owler@ows.eu/1`` is fine). Raises
    :class:`owler.conf.ConfError` when it is empty and ``http.agent`` is not set.
    """
    verbatim = (C.get_str(conf, "http.agent", "") or "").strip()
    if verbatim:
        return verbatim
    name = (C.get_str(conf, AGENT_NAME_KEY, "") or "").strip()
    if not name:
        raise ConfError("http.agent.name must be set (the crawler must identify itself)")
    version = (C.get_str(conf, "http.agent.version", "") or "").strip()
    ua = f"{name}/{version}" if version else name
    extra = [p for p in ((C.get_str(conf, k, "") or "").strip()
                         for k in ("http.agent.description", "http.agent.url", "http.agent.email"))
             if p]
    if extra:
        ua += " (" + "; ".join(extra) + ")"
    return ua


# ---- private-address guard -------------------------------------------------------------------

ALLOWED_NETWORKS_KEY = "http.allowed.networks"
_REFUSED_NAMES = 10_000  # host names remembered as resolving to refused addresses
DEADLINE_KEY = "fetcher.thread.timeout"
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_6TO4 = ipaddress.ip_network("2002::/16")


def _ip(addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``addr`` names (``[v6]`` and ``%zone`` allowed); an IPv6 form that carries an
    IPv4 address (IPv4-mapped, NAT64's well-known prefix, 6to4) gives that IPv4 address."""
    try:
        ip = ipaddress.ip_address(addr.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if ip in _6TO4:
            return ip.sixtofour
    return ip


def is_public_address(addr: str) -> bool:
    """True when ``addr`` (an IP literal, optionally ``[v6]`` or with a ``%zone``) is a public,
    routable unicast address. Anything unparsable is not public."""
    ip = _ip(addr)
    if ip is None:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip in _ULA:
        return False
    if (ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_multicast
            or ip.is_unspecified or ip.is_reserved):
        return False
    if isinstance(ip, ipaddress.IPv4Address) and (ip in _SHARED or ip in _THIS_NET):
        return False
    return ip.is_global


class AddressGuard:
    """Which addresses requests may go to: public ones, and those inside the networks of
    ``http.allowed.networks`` (CIDRs allowed although not public, e.g. the operator's own
    10.1.0.0/16; default none). An IPv6 form of an IPv4 address is judged as that address."""

    def __init__(self, allowed: list[str] | tuple[str, ...] = ()) -> None:
        nets = []
        for cidr in allowed:
            try:
                nets.append(ipaddress.ip_network(str(cidr).strip(), strict=False))
            except ValueError as exc:
                raise ConfError(f"http.allowed.networks: {cidr!r} is not a network ({exc})") from None
        self.networks = tuple(nets)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "AddressGuard":
        return cls(C.get_list(conf, ALLOWED_NETWORKS_KEY, []))

    def allows(self, addr: str) -> bool:
        if self.networks:
            ip = _ip(addr)
            if ip is not None and any(ip.version == n.version and ip in n for n in self.networks):
                return True
        return is_public_address(addr)


class PrivateAddressError(OSError):
    """A host resolved only to addresses the guard refuses."""


class GuardedResolver(AbstractResolver):
    """Wraps a resolver (default: aiohttp's ThreadedResolver) and keeps only the addresses its
    :class:`AddressGuard` allows (public ones by default).

    aiohttp connects to what the resolver returns, so every connection goes to a checked address.
    A host with no allowed address raises :class:`PrivateAddressError` (aiohttp wraps it in
    ``ClientConnectorDNSError``).
    """

    def __init__(self, inner: AbstractResolver | None = None,
                 guard: AddressGuard | None = None,
                 on_refused: Callable[[str, str], None] | None = None) -> None:
        self._inner = inner or ThreadedResolver()
        self._guard = guard or AddressGuard()
        self._on_refused = on_refused

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        allowed = [r for r in results if self._guard.allows(r["host"])]
        if not allowed:
            refused = ", ".join(sorted({r["host"] for r in results})) or "nothing"
            message = f"{host} resolves to non-public address(es): {refused}"
            if self._on_refused is not None:
                self._on_refused(host, message)
            raise PrivateAddressError(message)
        return allowed

    async def close(self) -> None:
        await self._inner.close()


# ---- proxy -----------------------------------------------------------------------------------

PROXY_KEY = "http.proxy"
PROXY_HOST_KEY = "http.proxy.host"
PROXY_PORT_KEY = "http.proxy.port"
PROXY_TYPE_KEY = "http.proxy.type"
PROXY_USER_KEY = "http.proxy.user"
PROXY_PASS_KEY = "http.proxy.pass"
#: StormCrawler's keys of its other proxy managers: refused (see the module's docstring)
PROXY_MANAGER_KEY = "http.proxy.manager"
PROXY_FILE_KEY = "http.proxy.file"
DEFAULT_PROXY_PORT = 8080  # StormCrawler's
#: http.proxy.type (case-insensitive) and the scheme of http.proxy -> the protocol spoken
_PROXY_TYPES = {"http": "http", "socks": "socks5", "socks5": "socks5"}
_HOST_NAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?"
                        r"(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?")


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """The one proxy every request goes through: ``kind`` is ``http`` or ``socks5``. ``str()``
    hides the password (logs and error messages carry it)."""

    kind: str
    host: str
    port: int
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def url(self) -> URL:
        """The proxy as aiohttp takes it (credentials apart: :meth:`HttpFetcher.start`)."""
        return URL.build(scheme="http", host=self.host, port=self.port)

    def __str__(self) -> str:
        auth = f"{self.user}:***@" if self.user else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.kind}://{auth}{host}:{self.port}"


def _proxy_host(value: str, key: str) -> str:
    host = value.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if _is_ip_literal(host) or _HOST_NAME.fullmatch(host):
        return host
    raise ConfError(f"{key}: {value!r} is not a host name or an address (the scheme, the port "
                    f"and the credentials have keys of their own, or give them all in "
                    f"{PROXY_KEY}: type://user:pass@host:port)")


def _proxy_credentials(kind: str, user: str | None, password: str | None,
                       where: str) -> tuple[str | None, str | None]:
    if not user and not password:
        return None, None
    if not user or not password:
        raise ConfError(f"{where}: a proxy user needs a password and a password a user "
                        "(both or neither)")
    if kind == "http":
        if ":" in user:
            raise ConfError(f"{where}: an HTTP proxy's user name cannot hold ':' (Basic "
                            "authentication separates it from the password with one)")
        try:
            (user + password).encode("latin-1")
        except UnicodeEncodeError:
            raise ConfError(f"{where}: an HTTP proxy's user and password must be Latin-1 "
                            "(Basic authentication)") from None
    elif max(len(user.encode()), len(password.encode())) > 255:
        raise ConfError(f"{where}: a SOCKS5 user or password is at most 255 bytes (RFC 1929)")
    return user, password


def _proxy_from_url(line: str) -> ProxySettings:
    try:
        url = URL(line)
        port = url.explicit_port
    except ValueError as exc:
        raise ConfError(f"{PROXY_KEY}: {line!r} is not a proxy URL ({exc})") from None
    kind = _PROXY_TYPES.get(url.scheme.lower())
    if kind is None:
        raise ConfError(f"{PROXY_KEY}: {line!r}: the scheme names the proxy's type, one of "
                        f"{', '.join(sorted(_PROXY_TYPES))}")
    if not url.host or port is None or url.path not in ("", "/") or url.query_string \
            or url.fragment:
        raise ConfError(f"{PROXY_KEY}: {line!r} is not of the form type://[user:pass@]host:port")
    user, password = _proxy_credentials(kind, url.user, url.password, PROXY_KEY)
    return ProxySettings(kind, _proxy_host(url.host, PROXY_KEY), port, user, password)


def proxy_from_conf(conf: Mapping[str, Any]) -> ProxySettings | None:
    """The proxy of ``conf`` (None: requests go straight to their hosts). Raises
    :class:`owler.conf.ConfError` for anything that would not give the proxy the operator meant:
    an unknown type, a port out of range, one credential without the other, a proxy key without
    ``http.proxy.host``, both forms at once, StormCrawler's proxy list or another manager."""
    manager = (C.get_str(conf, PROXY_MANAGER_KEY, "") or "").strip()
    if manager and manager.rsplit(".", 1)[-1] != "SingleProxyManager":
        raise ConfError(f"{PROXY_MANAGER_KEY}: only one proxy for every request is supported "
                        f"(StormCrawler's SingleProxyManager), got {manager!r}")
    if conf.get(PROXY_FILE_KEY) not in (None, ""):
        raise ConfError(f"{PROXY_FILE_KEY}: a list of proxies is not supported; set the one "
                        f"proxy with {PROXY_HOST_KEY} or {PROXY_KEY}")
    line = (C.get_str(conf, PROXY_KEY, "") or "").strip()
    host = (C.get_str(conf, PROXY_HOST_KEY, "") or "").strip()
    parts = (PROXY_PORT_KEY, PROXY_TYPE_KEY, PROXY_USER_KEY, PROXY_PASS_KEY)
    if line:
        if host or any(conf.get(k) not in (None, "") for k in parts):
            raise ConfError(f"set the proxy either with {PROXY_KEY} (one URL) or with "
                            f"{PROXY_HOST_KEY} and its keys, not both")
        return _proxy_from_url(line)
    if not host:
        stray = [k for k in parts if conf.get(k) not in (None, "")]
        if stray:
            raise ConfError(f"{', '.join(stray)} set without {PROXY_HOST_KEY}: no proxy would "
                            "be used")
        return None
    kind_name = (C.get_str(conf, PROXY_TYPE_KEY, "HTTP") or "HTTP").strip()
    kind = _PROXY_TYPES.get(kind_name.lower())
    if kind is None:
        raise ConfError(f"{PROXY_TYPE_KEY}: expected HTTP or SOCKS, got {kind_name!r}")
    port = C.get_int(conf, PROXY_PORT_KEY, DEFAULT_PROXY_PORT)
    if not 1 <= port <= 65535:
        raise ConfError(f"{PROXY_PORT_KEY}: must be between 1 and 65535, got {port}")
    user, password = _proxy_credentials(kind, C.get_str(conf, PROXY_USER_KEY, None),
                                        C.get_str(conf, PROXY_PASS_KEY, None),
                                        f"{PROXY_USER_KEY}/{PROXY_PASS_KEY}")
    return ProxySettings(kind, _proxy_host(host, PROXY_HOST_KEY), port, user, password)


# ---- custom request headers ------------------------------------------------------------------

CUSTOM_HEADERS_KEY = "http.custom.headers"
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110's token: a field name
_VALUE = re.compile(r"[\t\x20-\x7e]*")  # visible ASCII, blanks and tabs
#: the headers (lower-cased) that http.custom.headers may not set, and why
_NOT_CUSTOM = {
    "user-agent": "the crawler's name, set by http.agent or http.agent.*",
    "host": "the URL's host, set for each request",
    "accept": "set by http.accept",
    "accept-language": "set by http.accept.language",
    "accept-encoding": "the codings the fetcher decodes, its own",
    "if-none-match": "set for each URL from its last answer (http.conditional.requests)",
    "if-modified-since": "set for each URL from its last answer (http.conditional.requests)",
    "authorization": "credentials would go to every host the crawl reaches",
    "proxy-authorization": "set by http.proxy.user and http.proxy.pass",
    **{name: "framing and connections are the HTTP client's"
       for name in ("connection", "keep-alive", "proxy-connection", "content-length",
                    "transfer-encoding", "te", "trailer", "upgrade", "expect")},
}


def custom_headers(conf: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``http.custom.headers`` as (name, value) pairs, in order: a list of ``Name=value`` (or one
    such string; a plain string is split on commas, as StormCrawler's lists are) or a mapping.
    Raises :class:`owler.conf.ConfError` for an entry without ``=``, a name that is not a token
    or is one the crawler sets (:data:`_NOT_CUSTOM`), a name given twice, a value with a control
    character or outside ASCII."""
    raw = conf.get(CUSTOM_HEADERS_KEY)
    if raw is None or raw == "":
        return []
    if isinstance(raw, Mapping):
        pairs = []
        for k, v in raw.items():
            if isinstance(v, (Mapping, list, tuple)):
                raise ConfError(f"{CUSTOM_HEADERS_KEY}: the value of {k} must be a string, "
                                f"got {v!r}")
            pairs.append((str(k), "" if v is None else str(v)))
    else:
        pairs = []
        for entry in C.get_list(conf, CUSTOM_HEADERS_KEY):
            name, sep, value = entry.partition("=")
            if not sep:
                raise ConfError(f"{CUSTOM_HEADERS_KEY}: {entry!r} is not of the form Name=value")
            pairs.append((name, value))
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, value in pairs:
        name, value = name.strip(), value.strip()
        if not _TOKEN.fullmatch(name):
            raise ConfError(f"{CUSTOM_HEADERS_KEY}: {name!r} is not a header name (letters, "
                            "digits and !#$%&'*+.^_`|~-)")
        why = _NOT_CUSTOM.get(name.lower())
        if why:
            raise ConfError(f"{CUSTOM_HEADERS_KEY}: {name} cannot be set here: {why}")
        if not _VALUE.fullmatch(value):
            raise ConfError(f"{CUSTOM_HEADERS_KEY}: the value of {name} must be printable ASCII "
                            f"(no line breaks or control characters), got {value!r}")
        if name.lower() in seen:
            raise ConfError(f"{CUSTOM_HEADERS_KEY}: {name} is given twice")
        seen.add(name.lower())
        out.append((name, value))
    return out


def check_conf(conf: Mapping[str, Any]) -> None:
    """Raise :class:`owler.conf.ConfError` for the keys of this module that would stop a fetcher
    at start (``http.allowed.networks``, the proxy, the custom headers), before Storm starts."""
    AddressGuard.from_conf(conf)
    proxy_from_conf(conf)
    custom_headers(conf)


# ---- result ----------------------------------------------------------------------------------

@dataclass(slots=True)
class FetchResult:
    """What one request gave. ``headers`` are the raw response headers in order, duplicates kept,
    decoded as latin-1 (byte-preserving). ``content`` is decoded from gzip/deflate; when the
    Content-Encoding is unknown the raw bytes are kept and ``content_encoding`` names it."""

    url: str
    status: int | None = None
    reason: str | None = None
    http_version: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    content: bytes = b""
    truncated: bool = False
    ip: str | None = None
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    fetch_time: float = 0.0
    elapsed: float = 0.0
    error_cause: str | None = None
    error_message: str | None = None
    method: str = "GET"
    request_target: str = "/"
    #: coding still applied to ``content`` (None = identity / decoded by us)
    content_encoding: str | None = None
    #: codings removed from the body ("gzip"), for a WARC writer that must adjust the headers
    decoded_from: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_cause is None and self.status is not None

    def header(self, name: str) -> str | None:
        """First value of a response header, case-insensitive; None when absent."""
        lname = name.lower()
        for k, v in self.headers:
            if k.lower() == lname:
                return v
        return None

    @property
    def content_type(self) -> str | None:
        return self.header("Content-Type")

    def request_bytes(self) -> bytes:
        """The request line and headers as sent (for the WARC request record); b"" when nothing
        was sent."""
        if not self.request_headers:
            return b""
        lines = [f"{self.method} {self.request_target} HTTP/1.1"]
        lines.extend(f"{k}: {v}" for k, v in self.request_headers)
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")


def redirect_target(result: FetchResult) -> str | None:
    """The absolute Location of a 3xx result, resolved against the request URL; None otherwise."""
    if result.status is None or not 300 <= result.status < 400:
        return None
    loc = result.header("Location")
    if not loc or not loc.strip():
        return None
    loc = loc.strip()
    try:  # headers are latin-1 decoded; most servers send UTF-8 bytes
        loc = loc.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        pass
    try:
        return urljoin(result.url, loc)
    except ValueError:
        return None


# ---- decoding --------------------------------------------------------------------------------

class _TooLarge(Exception):
    pass


#: raised by :func:`decode_body` when the decoded body would exceed its limit
TooLarge = _TooLarge


class DecodeError(ValueError):
    """A body that its Content-Encoding cannot decode (corrupt from its first bytes)."""


def _inflate(data: bytes, wbits: int, max_out: int) -> bytes:
    """Decompress with at most ``max_out`` bytes of output (raises _TooLarge beyond, having held
    no more than that), following concatenated gzip members. A truncated stream gives what could
    be decoded; garbage after a complete gzip member is ignored."""
    out: list[bytes] = []
    total = 0
    first = True
    while data:
        d = zlib.decompressobj(wbits)
        try:
            buf = d.decompress(data, max_out - total + 1)
            while True:
                total += len(buf)
                if total > max_out:
                    raise _TooLarge
                out.append(buf)
                if not d.unconsumed_tail:
                    break
                buf = d.decompress(d.unconsumed_tail, max_out - total + 1)
            if not d.eof:
                buf = d.flush()
                total += len(buf)
                if total > max_out:
                    raise _TooLarge
                out.append(buf)
        except zlib.error as exc:
            if first:
                raise DecodeError(str(exc)) from None
            break
        if first and not total and not d.eof:
            raise DecodeError("the stream ends before any data")
        first = False
        data = d.unused_data if d.eof and wbits > 16 else b""
    return b"".join(out)


def _unbrotli(data: bytes, max_out: int) -> bytes:
    """Brotli with at most ``max_out`` bytes of output (raises _TooLarge beyond); a truncated
    stream gives what could be decoded, a corrupt one nothing."""
    d = brotli.Decompressor()
    out: list[bytes] = []
    total = 0
    try:
        buf = d.process(data, output_buffer_limit=max_out + 1)
        while True:
            total += len(buf)
            if total > max_out:
                raise _TooLarge
            out.append(buf)
            if d.is_finished() or d.can_accept_more_data():
                break
            buf = d.process(b"", output_buffer_limit=max_out - total + 1)
    except brotli.error as exc:  # no checksum to tell garbage late in a stream: none of it
        raise DecodeError(f"brotli: {exc}") from None
    if data and not total and not d.is_finished():
        raise DecodeError("brotli: the stream ends before any data")
    return b"".join(out)


def _unzstd(data: bytes, max_out: int) -> bytes:
    """Zstandard (all frames) with at most ``max_out`` bytes of output (raises _TooLarge beyond);
    a truncated stream gives what could be decoded."""
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    out: list[bytes] = []
    total = 0
    try:
        while buf := reader.read(min(_CHUNK, max_out - total + 1)):
            total += len(buf)
            if total > max_out:
                raise _TooLarge
            out.append(buf)
    except zstandard.ZstdError as exc:
        raise DecodeError(str(exc)) from None
    if data and not total:
        raise DecodeError("zstd: no data decoded")
    return b"".join(out)


_CODINGS = ("gzip", "x-gzip", "deflate", "br", "zstd")


def decode_body(data: bytes, encoding: str | None, max_out: int) -> tuple[bytes, str | None, str | None]:
    """Undo a Content-Encoding (gzip, deflate, br, zstd, in the order applied). Returns (content,
    still_encoded, decoded_from): ``still_encoded`` names codings it does not know (the data is
    then returned as it was). Raises TooLarge over ``max_out`` decoded bytes and DecodeError when
    the data is not in the coding named."""
    if not encoding:
        return data, None, None
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return data, None, None
    if any(c not in _CODINGS for c in codings):
        return data, encoding.strip(), None
    for coding in reversed(codings):
        if coding in ("gzip", "x-gzip"):
            data = _inflate(data, 16 + zlib.MAX_WBITS, max_out)
        elif coding == "br":
            data = _unbrotli(data, max_out)
        elif coding == "zstd":
            data = _unzstd(data, max_out)
        else:  # deflate: zlib-wrapped per the RFC, raw deflate in practice too
            try:
                data = _inflate(data, zlib.MAX_WBITS, max_out)
            except DecodeError:
                data = _inflate(data, -zlib.MAX_WBITS, max_out)
    return data, None, ", ".join(codings)


# ---- the fetcher -----------------------------------------------------------------------------

#: Where the connector records the peer of the connection a request got (one holder per fetch;
#: each fetch runs in its caller's task, so concurrent fetches never share a holder).
_PEER: contextvars.ContextVar[list] = contextvars.ContextVar("owler_http_peer")


class _PooledConnector(aiohttp.TCPConnector):
    """The fetcher's connection pool: aiohttp's, with two additions.

    - It notes the peer address of the connection handed to each request (the response may
      release it before the caller looks).
    - It keeps at most ``max_idle`` idle connections, closing the longest idle first. aiohttp
      bounds the connections in use (``limit``) and how long an idle one is kept
      (``keepalive_timeout``), but not how many stay idle: a fetcher that visits thousands of
      hosts within the keep-alive would hold a socket (a file descriptor) for each.

    The bound follows aiohttp's pool through three of its methods: ``_release`` (a connection
    goes idle), ``_get`` (an idle one is reused, or found dead and closed) and ``_cleanup``
    (those idle past the keep-alive are closed). ``tests/unit/test_http.py`` checks it against
    real sockets, so a change in those methods fails there.
    """

    def __init__(self, *args: Any, max_idle: int, note_peer: bool = True, **kwargs: Any) -> None:
        """``note_peer`` false: the peer is not the target (an HTTP proxy), note nothing."""
        super().__init__(*args, **kwargs)
        self.max_idle = max_idle
        self.note_peer = note_peer
        # idle connection -> its pool key, the longest idle first
        self._idle: OrderedDict[Any, Any] = OrderedDict()

    @property
    def idle_count(self) -> int:
        return len(self._idle)

    async def connect(self, req, traces, timeout):  # type: ignore[override]
        conn = await super().connect(req, traces, timeout)
        holder = _PEER.get(None)
        if holder is not None and self.note_peer:
            holder[0] = self._peer_of(conn)
        return conn

    def _peer_of(self, conn) -> str | None:
        """The address of the target a connection reaches."""
        if conn.transport is None:
            return None
        peer = conn.transport.get_extra_info("peername")
        return peer[0] if peer else None

    def _release(self, key, protocol, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        super()._release(key, protocol, *args, **kwargs)
        pooled = self._conns.get(key)
        if not pooled or pooled[-1][0] is not protocol:
            return  # closed, not pooled
        self._idle.pop(protocol, None)
        self._idle[protocol] = key  # the most recently idle last
        while len(self._idle) > self.max_idle:
            oldest, oldest_key = self._idle.popitem(last=False)
            conns = self._conns.get(oldest_key)
            if conns:
                kept = [(p, t) for p, t in conns if p is not oldest]
                conns.clear()
                conns.extend(kept)
                if not conns:
                    del self._conns[oldest_key]
            oldest.close()

    async def _get(self, key, *args: Any, **kwargs: Any):  # type: ignore[override]
        conns = self._conns.get(key)
        before = [p for p, _ in conns] if conns else ()
        conn = await super()._get(key, *args, **kwargs)
        if before:  # reused, or found dead and closed: no longer idle
            left = self._conns.get(key)
            still = {id(p) for p, _ in left} if left else set()
            for p in before:
                if id(p) not in still:
                    self._idle.pop(p, None)
        return conn

    def _cleanup(self) -> None:
        super()._cleanup()
        pooled = {id(p) for conns in self._conns.values() for p, _ in conns}
        for p in [p for p in self._idle if id(p) not in pooled]:
            del self._idle[p]


#: SOCKS5 replies (RFC 1928) that say what became of the target rather than of the proxy
_SOCKS_TARGET_REPLIES = {3: errno.ENETUNREACH, 4: errno.EHOSTUNREACH, 5: errno.ECONNREFUSED,
                         6: errno.ETIMEDOUT}


class _SocksConnector(_PooledConnector):
    """The pool of connections through a SOCKS5 proxy: aiohttp's connector, whose last step
    (connecting a socket to one of the target's addresses) asks the proxy for the connection
    instead; TLS, keep-alive and the idle bound are the pool's as without a proxy.

    The addresses come from the connector's resolver: the :class:`GuardedResolver` (the guard
    on: the proxy is handed a checked address, the peer noted is that address), or one that
    gives the name back (the guard off: the proxy resolves it). The proxy's own name is resolved
    by python-socks, outside the guard: the operator chose it. A failure of the proxy raises
    ``ClientProxyConnectionError``; a reply about the target (refused, unreachable) the error a
    direct connection would have met, so both keep their causes.

    Why python-socks alone: it does the SOCKS handshake on an asyncio socket and nothing else
    (Apache-2.0, no dependency on Python 3.11, a 50 KB wheel, kept up with asyncio, trio and
    anyio). aiohttp-socks, its companion, is a connector of its own that resolves nothing (the
    proxy gets every name, out of the guard's sight) and would replace this pool.
    """

    def __init__(self, *args: Any, proxy: ProxySettings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.proxy = proxy
        self._reached: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _peer_of(self, conn) -> str | None:
        return self._reached.get(conn.protocol)

    async def _wrap_create_connection(self, *args: Any, addr_infos, req, timeout,  # type: ignore[override]
                                      client_error: type[Exception] = aiohttp.ClientConnectorError,
                                      **kwargs: Any):
        host, port = addr_infos[0][4][0], addr_infos[0][4][1]
        socks = SocksProxy(ProxyType.SOCKS5, self.proxy.host, self.proxy.port,
                           username=self.proxy.user, password=self.proxy.password, rdns=True)
        key = req.connection_key
        async with asyncio.timeout(timeout.sock_connect):
            try:
                sock = await socks.connect(dest_host=host, dest_port=port)
            except SocksError as exc:
                code = _SOCKS_TARGET_REPLIES.get(exc.error_code)
                if code is None:
                    raise aiohttp.ClientProxyConnectionError(
                        key, OSError(errno.EPROTO, f"SOCKS proxy {self.proxy}: {exc}")) from exc
                raise client_error(key, OSError(code, f"{exc} (SOCKS proxy {self.proxy}, "
                                                      f"{host}:{port})")) from exc
            except SocksConnectionError as exc:  # the proxy itself: unreachable, its name unknown
                raise aiohttp.ClientProxyConnectionError(key, exc) from exc
            try:
                transport, proto = await self._loop.create_connection(*args, **kwargs, sock=sock)
            except ssl.SSLCertVerificationError as exc:
                sock.close()
                raise aiohttp.ClientConnectorCertificateError(key, exc) from exc
            except ssl.SSLError as exc:
                sock.close()
                raise aiohttp.ClientConnectorSSLError(key, exc) from exc
            except OSError as exc:
                sock.close()
                raise client_error(key, exc) from exc
            except BaseException:
                sock.close()
                raise
        if _is_ip_literal(host):
            self._reached[proto] = host
        return transport, proto


class _NameResolver(AbstractResolver):
    """Gives a host name back unresolved: the SOCKS proxy resolves it (the guard off)."""

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        return [{"hostname": host, "host": host, "port": port, "family": socket.AF_INET,
                 "proto": 0, "flags": 0}]

    async def close(self) -> None:
        return None


@functools.lru_cache(maxsize=2)
def shared_ssl_context(trust_everything: bool) -> ssl.SSLContext:
    """One SSLContext per process and mode (a context per connection costs ~30 ms CPU)."""
    ctx = ssl.create_default_context()
    if trust_everything:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _error_cause(exc: BaseException) -> str:
    if isinstance(exc, (aiohttp.ClientProxyConnectionError, aiohttp.ClientHttpProxyError)):
        return "proxy"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "private_address" if isinstance(exc.os_error, PrivateAddressError) else "dns"
    if isinstance(exc, (aiohttp.ClientSSLError, ssl.SSLError)):
        return "tls"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError):
            return "connection_refused"
        if isinstance(exc.os_error, (TimeoutError, asyncio.TimeoutError)):
            return "timeout"
        return "connection_error"
    if isinstance(exc, aiohttp.InvalidURL):
        return "malformed URL"
    if isinstance(exc, (aiohttp.ServerDisconnectedError, ConnectionResetError,
                        aiohttp.ClientConnectionResetError)):
        return "connection_reset"
    if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ClientResponseError)):
        return "malformed_response"
    if isinstance(exc, ConnectionRefusedError):
        return "connection_refused"
    if isinstance(exc, (aiohttp.ClientConnectionError, OSError)):
        return "connection_error"
    return "exception"


def _error_message(exc: BaseException) -> str:
    msg = f"{type(exc).__name__}: {exc}"
    inner = getattr(exc, "os_error", None)
    if isinstance(exc, aiohttp.ClientConnectorError) and inner is not None and str(inner):
        msg += f" ({inner})"
    return msg


KEEPALIVE_KEY = "http.keepalive.timeout"
MAX_IDLE_KEY = "http.keepalive.max.idle"
#: StormCrawler's names for the same two settings (its okhttp protocol), read when ours are absent
SC_KEEPALIVE_KEY = "okhttp.protocol.connection.pool.connection.keep.alive"
SC_MAX_IDLE_KEY = "okhttp.protocol.connection.pool.max.idle.connections"
DEFAULT_KEEPALIVE = 60.0
#: the most idle connections kept by default; fewer when the open-file limit is low
DEFAULT_MAX_IDLE = 4096


def default_max_idle() -> int:
    """4096, or a quarter of this process's open-file limit if that is lower (sockets in use,
    WARC files and the multilang pipes need descriptors too)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 256
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return DEFAULT_MAX_IDLE
    return max(16, min(DEFAULT_MAX_IDLE, soft // 4))


def keepalive_settings(conf: Mapping[str, Any]) -> tuple[float, int]:
    """(seconds an idle connection is kept, most idle connections kept) from ``conf``: our keys,
    else StormCrawler's okhttp ones."""
    def first_set(*keys: str) -> str:
        return next((k for k in keys if conf.get(k) is not None), keys[0])

    key = first_set(KEEPALIVE_KEY, SC_KEEPALIVE_KEY)
    keepalive = C.get_float(conf, key, DEFAULT_KEEPALIVE)
    if keepalive <= 0:
        raise ConfError(f"{key} must be > 0 seconds (to keep no connection idle, set "
                        f"{MAX_IDLE_KEY}: 0), got {conf.get(key)!r}")
    key = first_set(MAX_IDLE_KEY, SC_MAX_IDLE_KEY)
    max_idle = C.get_int(conf, key, default_max_idle())
    if max_idle < 0:
        raise ConfError(f"{key} must be >= 0, got {conf.get(key)!r}")
    return keepalive, max_idle


class HttpFetcher:
    """Async HTTP client for the fetcher: ``await start()``, many ``await fetch(url)``, then
    ``await close()``. Must be used from one event loop."""

    def __init__(self, conf: Mapping[str, Any], resolver: AbstractResolver | None = None) -> None:
        """``resolver`` replaces aiohttp's ThreadedResolver (tests, or aiodns); the guard wraps it
        unless http.allow.private.addresses is true."""
        self._inner_resolver = resolver
        self.user_agent = user_agent(conf)
        self.accept = C.get_str(conf, "http.accept", DEFAULT_ACCEPT) or ""
        self.accept_language = C.get_str(conf, "http.accept.language", DEFAULT_ACCEPT_LANGUAGE) or ""
        self.timeout = max(0.001, C.get_int(conf, "http.timeout", 10000) / 1000.0)
        deadline = C.get_float(conf, DEADLINE_KEY, 30.0)
        self.deadline = deadline if deadline > 0 else None
        self.content_limit = C.get_int(conf, CONTENT_LIMIT_KEY, -1)
        self.max_decompressed = max_decompressed_size(conf)
        self.allow_private = C.get_bool(conf, "http.allow.private.addresses", False)
        self.guard = AddressGuard.from_conf(conf)
        # host name -> why, oldest first (an OrderedDict evicts its oldest in O(1): see
        # owler/outlinks.py, RecentlySent)
        self._refused_names: OrderedDict[str, str] = OrderedDict()
        self.trust_everything = C.get_bool(conf, "http.trust.everything", False)
        self.keepalive, self.max_idle = keepalive_settings(conf)
        threads = max(1, C.get_int(conf, FETCHER_THREADS_KEY, 10))
        per_queue = max(1, C.get_int(conf, THREADS_PER_QUEUE_KEY, 1))
        self.pool_limit = threads * 2
        self.pool_limit_per_host = max(2, per_queue * 2)
        self._headers = {
            "User-Agent": self.user_agent,
            "Accept": self.accept,
            "Accept-Language": self.accept_language,
            "Accept-Encoding": ACCEPT_ENCODING,
            **dict(custom_headers(conf)),
        }
        self.proxy = proxy_from_conf(conf)
        # Basic credentials for an HTTP proxy: a header of the request itself for plain http
        # (aiohttp sends proxy_headers only with a CONNECT), of the CONNECT for https
        self._proxy_auth: dict[str, str] | None = None
        if self.proxy is not None and self.proxy.kind == "http" and self.proxy.user:
            token = base64.b64encode(f"{self.proxy.user}:{self.proxy.password}".encode("latin-1"))
            self._proxy_auth = {"Proxy-Authorization": "Basic " + token.decode("ascii")}
        # through an HTTP proxy: the guard's resolver, asked before each request, and the hosts
        # it allowed lately (host -> until, oldest first)
        self._target_resolver: GuardedResolver | None = None
        self._allowed_names: OrderedDict[str, float] = OrderedDict()
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        if self._session is not None:
            return
        guarded = (None if self.allow_private
                   else GuardedResolver(self._inner_resolver, self.guard, self._note_refused))
        pool = dict(limit=self.pool_limit, limit_per_host=self.pool_limit_per_host,
                    ssl=shared_ssl_context(self.trust_everything),
                    keepalive_timeout=self.keepalive, ttl_dns_cache=60, max_idle=self.max_idle)
        if self.proxy is None:
            connector = _PooledConnector(resolver=guarded or self._inner_resolver, **pool)
        elif self.proxy.kind == "http":  # the connector resolves only the proxy's name
            self._target_resolver = guarded
            connector = _PooledConnector(resolver=self._inner_resolver, note_peer=False, **pool)
        else:
            connector = _SocksConnector(resolver=guarded or _NameResolver(), proxy=self.proxy,
                                        **pool)
        t = self.timeout
        self._session = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=t, sock_read=t),
            auto_decompress=False, headers=self._headers, skip_auto_headers=("Accept-Encoding",),
            max_line_size=32768, max_field_size=32768, raise_for_status=False, trust_env=False)

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def __aenter__(self) -> "HttpFetcher":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def fetch(self, url: str, extra_headers: Mapping[str, str] | None = None, *,
                    method: str = "GET", content_limit: int | None = None) -> FetchResult:
        """GET ``url`` (redirects not followed). ``content_limit`` overrides http.content.limit
        for this request (e.g. robots.txt). Never raises: failures carry ``error_cause``."""
        res = FetchResult(url=url, method=method, fetch_time=time.time())
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(self.deadline):
                await self._fetch(res, url, extra_headers, method,
                                  self.content_limit if content_limit is None else content_limit)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes a result
            if isinstance(exc, TimeoutError) and self.deadline is not None and (
                    time.perf_counter() - t0 >= self.deadline - 0.01):
                self._fail(res, "timeout", "no complete response within "
                           f"fetcher.thread.timeout={self.deadline:g} s")
            elif (isinstance(exc, aiohttp.ClientConnectorDNSError) and self.proxy is not None
                    and self.proxy.kind == "http"):  # the connector resolves only the proxy
                self._fail(res, "proxy", f"HTTP proxy {self.proxy}: {_error_message(exc)}")
            else:
                self._fail(res, _error_cause(exc), _error_message(exc))
        res.elapsed = time.perf_counter() - t0
        return res

    def refuses(self, url: str, names: bool = False) -> str | None:
        """Why the guard refuses ``url`` without a request (its host is an address it may not
        reach; with ``names``, also a host name that lately resolved only to such addresses, of
        the last :data:`_REFUSED_NAMES`), else ``None``."""
        if self.allow_private:
            return None
        try:
            host = URL(url, encoded=True).host
        except (ValueError, TypeError):
            return None
        if not host:
            return None
        if _is_ip_literal(host):
            return None if self.guard.allows(host) else f"{host} is not a public address"
        return self._refused_names.get(host.lower()) if names else None

    async def _target_refused(self, host: str, port: int) -> tuple[str, str] | None:
        """Before a request through an HTTP proxy: (cause, message) when the guard refuses
        ``host`` (a name with no allowed address: ``private_address``; no answer: ``dns``),
        else None. A name allowed is not asked again for 60 s (the connector's DNS cache
        time)."""
        assert self._target_resolver is not None
        name = host.lower()
        now = time.monotonic()
        until = self._allowed_names.get(name)
        if until is not None and until > now:
            return None
        try:
            await self._target_resolver.resolve(host, port, socket.AF_UNSPEC)
        except PrivateAddressError as exc:
            return "private_address", str(exc)
        except OSError as exc:
            return "dns", f"{host}: {type(exc).__name__}: {exc}"
        self._allowed_names.pop(name, None)
        self._allowed_names[name] = now + 60.0
        while len(self._allowed_names) > _REFUSED_NAMES:
            self._allowed_names.popitem(last=False)
        return None

    def _note_refused(self, host: str, message: str) -> None:
        names = self._refused_names
        names[host.lower()] = message
        while len(names) > _REFUSED_NAMES:
            names.popitem(last=False)

    @staticmethod
    def _fail(res: FetchResult, cause: str, message: str) -> None:
        if res.status is not None:
            message = f"HTTP {res.status}: {message}"
        res.status = None
        res.error_cause = cause
        res.error_message = message
        res.content = b""

    async def _fetch(self, res: FetchResult, url: str, extra: Mapping[str, str] | None,
                     method: str, limit: int) -> None:
        try:
            target = URL(url, encoded=True) if url.isascii() and " " not in url else URL(url)
        except (ValueError, TypeError) as exc:
            self._fail(res, "malformed URL", str(exc))
            return
        if target.scheme not in ("http", "https"):
            self._fail(res, "unsupported_scheme" if target.scheme else "malformed URL",
                       f"cannot fetch {url!r}")
            return
        if not target.host:
            self._fail(res, "malformed URL", f"no host in {url!r}")
            return
        if not self.allow_private and _is_ip_literal(target.host) and not self.guard.allows(target.host):
            self._fail(res, "private_address", f"{target.host} is not a public address")
            return
        if self._session is None:
            await self.start()
        assert self._session is not None
        via: dict[str, Any] = {}
        if self.proxy is not None and self.proxy.kind == "http":
            if self._target_resolver is not None and not _is_ip_literal(target.host):
                refused = await self._target_refused(target.raw_host, target.port)
                if refused is not None:
                    self._fail(res, *refused)
                    return
            via = {"proxy": self.proxy.url}
            if self._proxy_auth is not None:
                if target.scheme == "https":
                    via["proxy_headers"] = self._proxy_auth
                else:
                    extra = {**(extra or {}), **self._proxy_auth}
        peer: list = [None]
        _PEER.set(peer)
        async with self._session.request(method, target, headers=extra, allow_redirects=False,
                                         **via) as resp:
            res.status = resp.status
            res.reason = resp.reason
            res.http_version = f"{resp.version.major}.{resp.version.minor}"
            res.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]
            info = resp.request_info
            # (a plain-http request through an HTTP proxy carries the proxy's credentials)
            res.request_headers = [(k, v) for k, v in info.headers.items()
                                   if k.lower() != "proxy-authorization"]
            res.request_target = info.url.raw_path_qs or "/"
            res.ip = peer[0]
            if via and resp.status == 407:  # only a proxy asks for proxy credentials
                self._fail(res, "proxy", f"HTTP proxy {self.proxy} refused the credentials "
                           f"(407 {resp.reason}): set or check http.proxy.user/http.proxy.pass")
                return
            raw, truncated = await _read_body(resp, limit)
        res.truncated = truncated
        try:
            content, still, decoded = decode_body(raw, res.header("Content-Encoding"),
                                                  self.max_decompressed)
        except _TooLarge:
            self._fail(res, "too_large_decompressed",
                       f"decoded body exceeds http.max.decompressed.size={self.max_decompressed}")
            return
        except DecodeError as exc:
            self._fail(res, "malformed_response", f"cannot decode {res.header('Content-Encoding')}: {exc}")
            return
        if limit >= 0 and len(content) > limit:
            content = content[:limit]
            res.truncated = True
        res.content, res.content_encoding, res.decoded_from = content, still, decoded


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
        return True
    except ValueError:
        return False


async def _read_body(resp: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """Read the raw body, at most ``limit`` bytes (-1 = all). When the limit cuts the body the
    connection is closed, never returned half-read to the pool."""
    if limit < 0 or (resp.content_length is not None and resp.content_length <= limit):
        return await resp.read(), False
    chunks: list[bytes] = []
    got = 0
    while got < limit:
        chunk = await resp.content.read(min(_CHUNK, limit - got))
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        got += len(chunk)
    if resp.content.at_eof():
        return b"".join(chunks), False
    resp.close()  # half-read: never back to the pool
    return b"".join(chunks), True
