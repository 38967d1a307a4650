"""URLs: normalisation, resolution of links, URL ids, pay-level domains and partition keys.

Hot path: a page has ~200 outlinks, each resolved and normalised here, so the
parsing is done by ada (a WHATWG URL parser in C++) and the rest is a few string operations on its
serialisation; no per-call heavy objects. ada is called through ``ada_url``'s own cffi binding
(:func:`_ada_href`), without the wrapper around it: ``ada_url.join_url`` gives every result a
cffi finaliser and copies its text twice, a third of its ~3 µs per link
(docs/benchmarks-history.md, issue 20, twelfth session; ``tests/unit/test_urls.py`` checks that
both give the same on real links).

Normalisation (:func:`normalize`) = the WHATWG URL standard's parse + serialise, which already
lower-cases scheme and host, converts IDN hosts to punycode, decodes ``%XX`` in hosts, drops the
default port, resolves ``.``/``..`` segments (also ``%2e``), percent-encodes spaces, controls and
non-ASCII per the standard's encode sets and turns an empty path into ``/``. On top of that:

- only ``http`` and ``https`` are kept (``None`` for any other scheme or an unparsable URL);
- the fragment is removed (optional);
- an empty query (a trailing ``?``) is removed;
- RFC 3986 §6.2.2 equivalences in path and query: ``%XX`` escapes of unreserved characters
  (``A-Z a-z 0-9 - . _ ~``) are decoded and the other escapes' hex digits are upper-cased.

Known differences with other normalisers, on purpose (the WHATWG standard decides): query
parameters are never sorted or dropped here (that is a URL filter's job), ``+`` stays ``+``,
duplicate slashes in the path are kept, IPv4 hosts written in hex/octal/short forms are
canonicalised (``http://0x7f.1/`` → ``http://127.0.0.1/``). A host's trailing dot is removed.

A normalised URL normalises to itself. :func:`normalize` does not parse again a URL that
:func:`resolve` returned lately (a bounded set, emptied when full): the URL filters' normaliser
sees every link the parser resolved, and a second WHATWG parse was a third of the filter chain's
cost for a new link (docs/benchmarks-history.md, issue 20).

Config keys read: ``partition.url.mode`` (:func:`partition_mode`, the one reader of the key; the
other functions take the mode as an argument).
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
import socket
import threading

import ada_url
from ada_url._ada_wrapper import ffi as _ffi, lib as _ada

from owler import conf as C
from owler.constants import (PARTITION_MODE_DOMAIN, PARTITION_MODE_HOST, PARTITION_MODE_IP,
                             PARTITION_MODE_KEY)

__all__ = [
    "normalize",
    "resolve",
    "host_of",
    "url_id",
    "pay_level_domain",
    "partition_key",
    "partition_mode",
    "PARTITION_MODES",
]

PARTITION_MODES = (PARTITION_MODE_HOST, PARTITION_MODE_DOMAIN, PARTITION_MODE_IP)

_ada_parse, _ada_parse_with_base = _ada.ada_parse, _ada.ada_parse_with_base
_ada_is_valid, _ada_get_href, _ada_free, _unpack = (_ada.ada_is_valid, _ada.ada_get_href,
                                                    _ada.ada_free, _ffi.unpack)


def _ada_href(result) -> str:
    """The serialisation of an ada parse result, which is freed; ValueError when it failed."""
    try:
        if not _ada_is_valid(result):
            raise ValueError("Invalid URL")
        href = _ada_get_href(result)
        return _unpack(href.data, href.length).decode()
    finally:
        _ada_free(result)


def _normalize_url(url: str) -> str:
    """ada's serialisation of ``url`` (``ada_url.normalize_url``); ValueError when it is not a
    URL, UnicodeError when it cannot be UTF-8 (a lone surrogate)."""
    data = url.encode()
    return _ada_href(_ada_parse(data, len(data)))


def _join_url(base: str, href: str) -> str:
    """ada's serialisation of ``href`` joined to ``base`` (``ada_url.join_url``); ValueError
    when either is not a URL (even for an absolute ``href``: :func:`resolve` then normalises
    ``href`` alone), UnicodeError for a lone surrogate."""
    data, base_data = href.encode(), base.encode()
    return _ada_href(_ada_parse_with_base(data, len(data), base_data, len(base_data)))


_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _pct_sub(m: re.Match[str]) -> str:
    hx = m.group(1)
    code = int(hx, 16)
    if code in _UNRESERVED:
        return chr(code)
    return "%" + hx.upper()


def _finish(href: str, keep_fragment: bool) -> str | None:
    """Post-process an ada serialisation: scheme check, host's trailing dot, fragment, empty
    query, %XX escapes."""
    if href.startswith("https://"):
        start = 8
    elif href.startswith("http://"):
        start = 7
    else:
        return None
    # In a WHATWG serialisation of an http(s) URL the path always starts with "/", and the first
    # "/" after "//" is the path's ("/" in userinfo is always percent-encoded).
    p = href.find("/", start)
    if p < 0:
        return None
    if href[p - 1] == "." or ".:" in href[start:p]:
        auth = href[start:p]
        at = auth.rfind("@") + 1
        host, colon, port = auth[at:].partition(":")  # never IPv6 here: it has no "."
        host = host.rstrip(".")
        if not host:
            return None
        href = href[:start] + auth[:at] + host + colon + port + href[p:]
    frag = ""
    i = href.find("#")
    if i >= 0:
        if keep_fragment and i < len(href) - 1:
            frag = href[i:]
        href = href[:i]
    if href.endswith("?") and href.find("?") == len(href) - 1:
        href = href[:-1]
    if "%" in href:
        # hosts are already percent-decoded by the parser: only userinfo, path and query remain
        href = href[:start] + _PCT.sub(_pct_sub, href[start:])
    if frag and "%" in frag:
        frag = _PCT.sub(_pct_sub, frag)
    return href + frag


#: URLs :func:`resolve` returned without a fragment, which :func:`normalize` returns as they are
_RESOLVED: set[str] = set()
_RESOLVED_MAX = 1 << 15


def _remember(url: str) -> None:
    if len(_RESOLVED) >= _RESOLVED_MAX:
        _RESOLVED.clear()
    _RESOLVED.add(url)


def normalize(url: str, keep_fragment: bool = False) -> str | None:
    """The normalised form of an absolute http(s) URL, or ``None`` when it is not one.

    Never raises on garbage input (any non-string, unparsable URL or other scheme gives ``None``).
    Leading/trailing spaces and control characters, tabs and newlines inside are dropped as the
    WHATWG parser does. ``keep_fragment=True`` keeps a non-empty ``#fragment``.
    """
    if type(url) is str and url in _RESOLVED:  # normalised already, and without a fragment
        return url
    return _normalize_anew(url, keep_fragment)


def _normalize_anew(url: str, keep_fragment: bool = False) -> str | None:
    try:
        href = _normalize_url(url)
    except (ValueError, TypeError, AttributeError, UnicodeError):
        return None
    return _finish(href, keep_fragment)


def resolve(base: str, href: str, keep_fragment: bool = False) -> str | None:
    """Resolve a link ``href`` found on page ``base`` and normalise the result (as
    :func:`normalize`). ``None`` for ``javascript:``, ``mailto:``, ``data:``, ``tel:`` and any other
    non-http(s) target, for an unparsable href or base. Surrounding whitespace is stripped like
    browsers do. Never raises."""
    try:
        href = href.strip()
        joined = _join_url(base, href)
    except (ValueError, TypeError, AttributeError, UnicodeError):
        # an absolute href needs no base (an empty or broken base does not spoil it)
        return normalize(href, keep_fragment) if isinstance(href, str) else None
    out = _finish(joined, keep_fragment)
    if out is not None and not (keep_fragment and "#" in out):
        _remember(out)
    return out


# An http(s) URL whose authority is already canonical: a lower-case ASCII host name (no user
# info, no IPv6, no percent-encoding) whose last label starts with a letter (so it is no IPv4 form,
# however written), and an optional valid port. Only for such a URL the fast path of host_of is
# taken.
_CANONICAL_HTTP = re.compile(
    r"https?://((?:[a-z0-9\-]+\.)*[a-z][a-z0-9\-]*\.?)(?::([0-9]{1,5}))?(?=[/?#]|$)")


def host_of(url: str) -> str:
    """Host name of a URL without port (lower-case, punycode; IPv6 in brackets); ``""`` when the
    URL is unparsable or has no host. Never raises.

    An http(s) URL whose authority is already canonical (the crawler's own URLs: normalized) is
    split by a regular expression, which gives exactly what the URL parser gives for such a URL
    (checked against every URL of the test cases) at a third of its cost: it runs for every outlink
    a status updater writes."""
    m = _CANONICAL_HTTP.match(url) if isinstance(url, str) else None
    if m is not None and (m.group(2) is None or int(m.group(2)) <= 65535):
        return m.group(1)
    try:
        return ada_url.URL(url).hostname
    except (ValueError, TypeError, AttributeError, UnicodeError):
        return ""


def url_id(url: str) -> str:
    """The document id of a URL in the frontier: sha256 hex digest of its UTF-8 string
    (StormCrawler's OpenSearch ``_id``)."""
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


# ---- pay-level domains -------------------------------------------------------------------------

_psl = None
_psl_lock = threading.Lock()


def _get_psl():
    """The PublicSuffixList, built once (~0.1 s) on first use."""
    global _psl
    if _psl is None:
        with _psl_lock:
            if _psl is None:
                from publicsuffixlist import PublicSuffixList

                _psl = PublicSuffixList()
    return _psl


def _is_ip(host: str) -> bool:
    if not host:
        return False
    if host[0] == "[" or ":" in host:
        return True
    last = host.rstrip(".").rpartition(".")[2]
    if last.isdigit():
        try:
            ipaddress.ip_address(host)
            return True
        except ValueError:
            # WHATWG canonicalises IPv4 hosts, so a numeric last label is an invalid host anyway
            return True
    return False


@functools.lru_cache(maxsize=65536)
def pay_level_domain(host: str) -> str:
    """The registrable ("pay-level") domain of a host by the Public Suffix List, ICANN and private
    sections (``www.bbc.co.uk`` → ``bbc.co.uk``, ``foo.github.io`` → ``foo.github.io``).

    IP addresses, hosts that are themselves a public suffix (``co.uk``, ``localhost``) and hosts
    the list cannot split (empty labels) are returned as they are (lower-cased, without a trailing
    dot). TLDs unknown to the list fall under the PSL's default rule ``*``: the last label is the
    public suffix, so ``a.site1.farm.test`` → ``farm.test``.
    """
    h = host.lower().rstrip(".")
    if not h or _is_ip(h):
        return h
    try:
        pld = _get_psl().privatesuffix(h)
    except (ValueError, TypeError, UnicodeError):
        pld = None
    return pld or h


# ---- partition keys ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _ip_of(host: str) -> str:
    """IPv4 address of a host, cached (including failures, which give the host itself)."""
    if host.startswith("[") and host.endswith("]"):
        return host[1:-1]
    try:
        return socket.gethostbyname(host)
    except (OSError, UnicodeError):
        return host


def partition_mode(conf, key: str = PARTITION_MODE_KEY) -> str:
    """The partition mode that ``key`` (``partition.url.mode`` by default) names in ``conf``;
    ``byDomain`` when it is unset or empty. Checked by :func:`partition_key`, not here."""
    return C.get_str(conf, key, PARTITION_MODE_DOMAIN) or PARTITION_MODE_DOMAIN


def partition_key(url: str, mode: str) -> str:
    """The queue / partition key of a URL under ``partition.url.mode`` ``mode``:

    - ``byHost``: the host name (``www.example.com``);
    - ``byDomain``: its pay-level domain (``example.com``);
    - ``byIP``: its IP address by DNS (cached; the host itself when resolution fails).

    Raises ``ValueError`` for an unknown mode or a URL without a host.
    """
    host = host_of(url)
    if not host:
        raise ValueError(f"cannot compute a partition key for {url!r}: not a valid URL with a host")
    if mode == PARTITION_MODE_DOMAIN:
        return pay_level_domain(host)
    if mode == PARTITION_MODE_HOST:
        return host
    if mode == PARTITION_MODE_IP:
        return _ip_of(host)
    raise ValueError(
        f"unknown partition mode {mode!r} (partition.url.mode): expected one of "
        + ", ".join(PARTITION_MODES)
    )
