"""Host names as the lists read them: a URL's host cheaply (:func:`fast_host`), a list's host
token made canonical (:func:`clean_host`), and the addresses and names of hosts files that are not
entries. Shared by the blacklists, the take-downs (:mod:`owler.blacklist.takedown`) and the risk
filter's lists."""

from __future__ import annotations

import re

import ada_url

HOSTS_IPS = frozenset({"0.0.0.0", "127.0.0.1", "::1", "::", "0", "fe80::1%lo0", "255.255.255.255"})
HOSTS_BOILERPLATE = frozenset({
    "localhost", "localhost.localdomain", "local", "broadcasthost", "ip6-localhost", "ip6-loopback",
    "ip6-localnet", "ip6-mcastprefix", "ip6-allnodes", "ip6-allrouters", "ip6-allhosts", "0.0.0.0",
})
_LABEL = r"(?!-)[a-z0-9_-]{1,63}(?<!-)"
_HOST_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
IPV4_RE = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def fast_host(url: str) -> str | None:
    """Host of an already normalized http(s) URL by string slicing (the usual case, ~10x cheaper
    than parsing); None when the URL does not look normalized and needs the parser."""
    if url.startswith("https://"):
        start = 8
    elif url.startswith("http://"):
        start = 7
    else:
        return None
    end = len(url)
    for ch in "/?#\\":
        i = url.find(ch, start)
        if 0 <= i < end:
            end = i
    auth = url[start:end]
    if "@" in auth or "%" in auth or "[" in auth or not auth.isascii() or auth != auth.lower():
        return None
    host = auth.partition(":")[0]
    return host or None


def clean_host(token: str) -> str | None:
    """A domain/host token → canonical host (lower-case, punycode), or None if invalid."""
    h = token.strip().lower().rstrip(".")
    if h.startswith("*."):
        h = h[2:]
    elif h.startswith("."):
        h = h[1:]
    if not h:
        return None
    if IPV4_RE.match(h):
        return h if all(int(p) < 256 for p in h.split(".")) else None
    if not h.isascii():
        try:
            h = ada_url.idna_to_ascii(h).decode("ascii")
        except (ValueError, UnicodeError):
            return None
    return h if len(h) <= 253 and _HOST_RE.match(h) else None
