"""robots.txt for the fetcher (RFC 9309): parse, match, fetch policy, cache.

An RFC 9309 matcher of our own (protego is used in the tests as a cross-check): groups are chosen
by product token (the leading ``[a-zA-Z_-]`` characters of a user-agent line, case-insensitive),
groups for the same agent are merged, ``*`` is the fallback; the longest matching rule wins and
Allow wins ties; ``*`` and ``$`` wildcards; paths are compared after normalizing percent-encoding
(unreserved escapes decoded, other escapes upper-cased, non-ASCII encoded as UTF-8); an empty
path is ``/``; ``/robots.txt`` is always allowed; only the first ``http.robots.content.limit``
bytes are parsed.

Fetch policy (RFC 9309 §2.3.1): 2xx → parsed rules; 4xx → allow all (403 too unless
``http.robots.403.allow`` is false); 5xx or no answer → disallow all for ``robots.error.cache.ttl``
seconds (``http.robots.5xx.allow`` turns 5xx into allow all). Keys: ``http.robots.agents``,
``http.agent.name``, ``http.robots.content.limit``, ``robots.cache.ttl``, ``robots.error.cache.ttl``.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from owler import conf as C

_TOKEN = re.compile(r"[a-zA-Z_-]+")
_ESC = re.compile(r"%([0-9a-fA-F]{2})")
_UNRESERVED = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _norm_escape(m: re.Match) -> str:
    b = int(m.group(1), 16)
    return chr(b) if b in _UNRESERVED else "%" + m.group(1).upper()


def normalize_path(path: str) -> str:
    """Percent-encoding normalized so that equivalent paths compare equal."""
    if not path:
        return "/"
    if any(ord(c) > 127 or c == " " for c in path):
        path = "".join(c if (ord(c) < 128 and c != " ") else
                       "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in path)
    return _ESC.sub(_norm_escape, path)


def product_token(agent: str) -> str:
    m = _TOKEN.match(agent.strip())
    return m.group(0).lower() if m else ""


def robots_url(url: str) -> str:
    p = urlsplit(url)
    return f"{p.scheme}://{p.netloc}/robots.txt"


@dataclass
class RobotRules:
    kind: str = "parsed"  # parsed | allow_all | disallow_all
    rules: list = field(default_factory=list)
    crawl_delay: float | None = None
    sitemaps: list = field(default_factory=list)
    expires_at: float = float("inf")

    @classmethod
    def allow_all(cls, ttl: float = 21600, now: float | None = None) -> "RobotRules":
        return cls("allow_all", expires_at=(now or time.time()) + ttl)

    @classmethod
    def disallow_all(cls, ttl: float = 3600, now: float | None = None) -> "RobotRules":
        return cls("disallow_all", expires_at=(now or time.time()) + ttl)

    def allowed(self, url: str) -> bool:
        if self.kind == "allow_all":
            return True
        try:
            p = urlsplit(url)
        except ValueError:
            return False
        path = p.path or "/"
        if path == "/robots.txt":
            return True
        if self.kind == "disallow_all":
            return False
        target = normalize_path(path + ("?" + p.query if p.query else ""))
        best: tuple[int, bool] | None = None
        for allow, length, rx in self.rules:
            if rx.match(target) and (best is None or length > best[0]
                                     or (length == best[0] and allow and not best[1])):
                best = (length, allow)
        return True if best is None else best[1]


def _rule(allow: bool, value: str):
    value = normalize_path(value)
    anchored = value.endswith("$")
    body = value[:-1] if anchored else value
    rx = ".*".join(re.escape(part) for part in body.split("*"))
    return (allow, len(value), re.compile(rx + ("$" if anchored else ""), re.S))


def parse_robots(content: bytes, agents: list[str], robots_url: str | None = None,
                 limit: int = 524288, now: float | None = None, ttl: float = 21600) -> RobotRules:
    """The rules of the group that matches ``agents`` (first agent with a group wins, then ``*``)."""
    if limit and limit > 0:
        content = content[:limit]
    text = content.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    groups: list[tuple[list[str], list, list]] = []  # (tokens, rules, delays)
    sitemaps: list[str] = []
    current = None
    last_was_agent = False
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep:
            parts = line.split(None, 1)  # tolerate "Disallow /x"
            if len(parts) != 2:
                continue
            key, value = parts
        key, value = key.strip().lower().replace("_", "-"), value.strip()
        if key in ("user-agent", "useragent", "user agent"):
            if not last_was_agent or current is None:
                current = ([], [], [])
                groups.append(current)
            tok = "*" if value.strip() == "*" else product_token(value)
            if tok:
                current[0].append(tok)
            last_was_agent = True
            continue
        last_was_agent = False
        if key == "sitemap" or key == "site-map":
            if value:
                sitemaps.append(value)
        elif current is None:
            continue
        elif key in ("allow", "disallow", "dissallow", "dissalow", "disalow", "diasllow"):
            if value:
                current[1].append(_rule(key == "allow", value))
        elif key == "crawl-delay":
            try:
                current[2].append(float(value))
            except ValueError:
                pass
    tokens = [product_token(a) for a in agents if product_token(a)]
    chosen = []
    for tok in tokens:
        chosen = [g for g in groups if tok in g[0]]
        if chosen:
            break
    if not chosen:
        chosen = [g for g in groups if "*" in g[0]]
    rules = [r for g in chosen for r in g[1]]
    delays = [d for g in chosen for d in g[2]]
    return RobotRules("parsed", rules, delays[0] if delays else None, sitemaps,
                      (now or time.time()) + ttl)


def agents_from_conf(conf) -> list[str]:
    agents = C.get_list(conf, "http.robots.agents", [])
    name = C.get_str(conf, "http.agent.name", "") or ""
    if name and product_token(name) not in [product_token(a) for a in agents]:
        agents.append(name)
    return agents


def rules_from_fetch(status: int | None, content: bytes | None, agents: list[str], conf,
                     now: float | None = None) -> RobotRules:
    now = now or time.time()
    ttl = C.get_float(conf, "robots.cache.ttl", 21600)
    err_ttl = C.get_float(conf, "robots.error.cache.ttl", 3600)
    if status is not None and 200 <= status < 300:
        return parse_robots(content or b"", agents, limit=C.get_int(conf, "http.robots.content.limit", 524288),
                            now=now, ttl=ttl)
    if status == 403 and not C.get_bool(conf, "http.robots.403.allow", True):
        return RobotRules.disallow_all(ttl, now)
    if status is not None and 300 <= status < 500:
        return RobotRules.allow_all(ttl, now)  # unavailable (incl. redirects not resolved)
    if status is not None and status >= 500 and C.get_bool(conf, "http.robots.5xx.allow", False):
        return RobotRules.allow_all(err_ttl, now)
    return RobotRules.disallow_all(err_ttl, now)  # unreachable


class RobotsCache:
    def __init__(self, max_entries: int = 10000):
        self.max_entries = max_entries
        self._d: OrderedDict[str, RobotRules] = OrderedDict()

    def get(self, key: str, now: float | None = None) -> RobotRules | None:
        rules = self._d.get(key)
        if rules is None:
            return None
        if rules.expires_at <= (now or time.time()):
            del self._d[key]
            return None
        self._d.move_to_end(key)
        return rules

    def put(self, key: str, rules: RobotRules) -> None:
        self._d[key] = rules
        self._d.move_to_end(key)
        while len(self._d) > self.max_entries:
            self._d.popitem(last=False)


def check_robots(agent: str, robots_content: bytes, urls: list[str]) -> list[tuple[str, bool]]:
    rules = parse_robots(robots_content, [agent])
    return [(u, rules.allowed(u)) for u in urls]
