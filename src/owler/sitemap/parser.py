"""Sitemaps and feeds as the sitemap parser bolt reads them: safe, streaming, bounded.

``parse_sitemap(content, limits)`` turns the bytes of a fetched sitemap into a
:class:`SitemapResult`: the page URLs of an XML ``<urlset>``, a plain-text sitemap, an RSS or an
Atom feed, or the sitemaps of a ``<sitemapindex>``, each with its ``lastmod`` (normalised to
``YYYY-MM-DDTHH:MM:SSZ``, UTC), ``changefreq``, ``priority`` and extension attributes. It resolves
nothing and filters nothing (that is :mod:`owler.sitemap.processor`' job).

Which XML parser, and why (measured in ``bench/bench_sitemap.py``, figures in its docstring): the
standard library's expat, driven incrementally (``Parser.Parse(chunk)`` per 64 KiB) with our own
handlers and guards: 50,000 URLs with every field extracted in ~0.5–0.8 s, against ~0.3–0.5 s
for lxml's ``iterparse(resolve_entities=False, no_network=True, huge_tree=False)`` and defusedxml
merely counting the elements. defusedxml is expat with the same guards as below; lxml would be a
binary dependency for a gain that the downstream work per entry (filters, one status tuple)
dwarfs. So no new dependency.

Safety (every input is hostile):

- no entity is ever declared: the first ``<!ENTITY`` (general, parameter, external or unparsed)
  stops the parse with :class:`SitemapError` cause ``xml_entities`` — billion laughs, quadratic
  blow-up and XXE inputs never expand; parameter entities are never parsed, external DTDs and
  entities are never fetched (expat has no loader; ``SetParamEntityParsing(NEVER)``);
- gzip (magic bytes ``1f 8b``, whatever the Content-Type says) is inflated incrementally and at
  most ``max_bytes`` decompressed bytes are parsed (the protocol's 50 MB), so a gzip bomb costs at
  most that much inflating and never that much memory;
- at most ``max_urls`` entries (the protocol's 50,000) are kept; elements nest at most
  :data:`MAX_NESTING` deep; one text field keeps at most :data:`MAX_FIELD` characters (an entry
  with a longer ``<loc>`` is dropped);
- a parse that hits a limit or a syntax error keeps what it read so far (``truncated`` says
  why); for a ``urlset`` or ``sitemapindex`` broken by a syntax error (typically a raw ``&`` in a
  URL) the rest of the document is still scanned for ``<loc>`` elements with a bounded regular
  expression, as lenient crawlers do.

Encodings: expat reads UTF-8, UTF-16, ISO-8859-1 and US-ASCII itself; a document declaring any
other encoding Python knows (windows-1252, big5, euc-kr, …) is transcoded to UTF-8 on the fly
(incremental decoder, undecodable bytes replaced).

Leniency: namespaces are ignored for the sitemap's own elements (sitemaps declaring Google's old
namespace, no namespace, or an undeclared prefix parse the same); element names compare
case-insensitively; leading whitespace and a UTF-8 BOM before the XML declaration are skipped;
whitespace around a ``<loc>`` is stripped; a ``<url>`` or ``<sitemap>`` without ``<loc>`` whose
own text is a URL is taken as that URL; a missing ``<loc>`` otherwise drops the entry (counted).

Extensions (StormCrawler's ``<EXT>.<attr>`` metadata names, crawler-commons' extension names):
``IMAGE.*`` (image:image children), ``VIDEO.*``, ``NEWS.*`` (leaf element names, e.g.
``NEWS.title``, ``NEWS.publication_date``, ``NEWS.name``), ``LINKS.href`` and
``LINKS.params.<attr>`` (hreflang alternates, ``xhtml:link``), ``MOBILE.mobile``. An extension is
recognised by its namespace URI or, when the prefix is undeclared, by its usual prefix.

Feeds: RSS 2.0/0.9x ``<item><link>`` (``pubDate`` → lastmod), RSS 1.0 ``<item rdf:about>``,
Atom ``<entry><link href>`` (rel ``alternate`` or none; ``updated``, else ``published`` →
lastmod).
"""

from __future__ import annotations

import codecs
import datetime as dt
import functools
import re
import zlib
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Iterator
from xml.parsers import expat

__all__ = ["SitemapEntry", "SitemapResult", "SitemapError", "Limits", "parse_sitemap",
           "normalize_lastmod", "CHANGEFREQS"]

MAX_URLS = 50_000
MAX_BYTES = 50 * 1024 * 1024
MAX_NESTING = 64
MAX_FIELD = 8192
CHUNK = 64 * 1024
CHANGEFREQS = ("always", "hourly", "daily", "weekly", "monthly", "yearly", "never")

URLSET, INDEX, TEXT, RSS, ATOM = "urlset", "sitemapindex", "text", "rss", "atom"

_EXT_NS = {
    "http://www.google.com/schemas/sitemap-image/1.1": "IMAGE",
    "http://www.google.com/schemas/sitemap-video/1.1": "VIDEO",
    "http://www.google.com/schemas/sitemap-news/0.9": "NEWS",
    "http://www.w3.org/1999/xhtml": "LINKS",
    "http://www.google.com/schemas/sitemap-mobile/1.0": "MOBILE",
}
_EXT_PREFIX = {"image": "IMAGE", "video": "VIDEO", "news": "NEWS", "xhtml": "LINKS",
               "mobile": "MOBILE"}
_ROOTS = {"urlset": URLSET, "sitemapindex": INDEX, "rss": RSS, "rdf": RSS, "feed": ATOM}


class SitemapError(ValueError):
    """The content is not a sitemap that can be used at all; ``cause`` is a short word
    (``xml_entities``, ``not_a_sitemap``, ``malformed``, ``gzip``, ``empty``)."""

    def __init__(self, cause: str, message: str):
        super().__init__(message)
        self.cause = cause


@dataclass(slots=True)
class Limits:
    max_urls: int = MAX_URLS
    max_bytes: int = MAX_BYTES


@dataclass(slots=True)
class SitemapEntry:
    loc: str
    lastmod: str | None = None
    changefreq: str | None = None
    priority: float | None = None
    extensions: dict[str, list[str]] = field(default_factory=dict)


@dataclass(slots=True)
class SitemapResult:
    kind: str
    entries: list[SitemapEntry]
    truncated: str | None = None  # None | "max_urls" | "max_bytes" | "malformed: …" | "gzip: …"
    dropped: int = 0  # entries without a usable location
    bytes_parsed: int = 0

    @property
    def is_index(self) -> bool:
        return self.kind == INDEX


# ---- dates ----------------------------------------------------------------------------------

_W3C = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?"
                  r"\s*(Z|[+-]\d{2}:?\d{2})?)?)?)?$", re.I)


@functools.lru_cache(maxsize=8192)
def normalize_lastmod(text: str | None) -> str | None:
    """A W3C datetime (``2024``, ``2024-05``, ``2024-05-06``, ``2024-05-06T07:08+02:00``, with
    seconds and fractions) or an RFC 822 date (RSS) as ``YYYY-MM-DDTHH:MM:SSZ`` in UTC; ``None``
    when it is none of these. A date without a zone is taken as UTC."""
    if not text:
        return None
    text = text.strip()
    m = _W3C.match(text)
    try:
        if m:
            y, mo, d, h, mi, s, tz = m.groups()
            when = dt.datetime(int(y), int(mo or 1), int(d or 1), int(h or 0), int(mi or 0),
                               int(s or 0), tzinfo=dt.timezone.utc)
            if tz and tz.upper() != "Z":
                sign = 1 if tz[0] == "+" else -1
                digits = tz[1:].replace(":", "")
                when -= sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        else:
            when = parsedate_to_datetime(text)
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.timezone.utc)
            when = when.astimezone(dt.timezone.utc)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- input: gzip or plain, bounded ----------------------------------------------------------

class _Input:
    """The decompressed content in chunks, at most ``max_bytes`` in all."""

    def __init__(self, content: bytes, max_bytes: int):
        self.content = content
        self.max_bytes = max_bytes if max_bytes >= 0 else 1 << 62
        self.total = 0
        self.truncated: str | None = None
        self.gzipped = content[:2] == b"\x1f\x8b"

    def chunks(self) -> Iterator[bytes]:
        if not self.gzipped:
            end = min(len(self.content), self.max_bytes)
            for i in range(0, end, CHUNK):
                piece = self.content[i:min(i + CHUNK, end)]
                self.total += len(piece)
                yield piece
            if len(self.content) > self.max_bytes:
                self.truncated = "max_bytes"
            return
        data = self.content
        while data:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            buf = data
            while buf:
                room = self.max_bytes - self.total
                if room <= 0:
                    self.truncated = "max_bytes"
                    return
                try:
                    out = d.decompress(buf, min(CHUNK, room))
                except zlib.error as exc:
                    if self.total == 0:
                        raise SitemapError("gzip", f"not valid gzip data: {exc}") from exc
                    self.truncated = f"gzip: {exc}"
                    return
                buf = d.unconsumed_tail
                if out:
                    self.total += len(out)
                    yield out
                elif not buf:
                    break
            if not d.eof:
                if self.total == 0:
                    raise SitemapError("gzip", "truncated gzip data")
                self.truncated = "gzip: truncated data"
                return
            data = d.unused_data  # another gzip member follows (concatenated members)
            if data[:2] != b"\x1f\x8b":
                return


# ---- XML ------------------------------------------------------------------------------------

class _Forbidden(Exception):
    pass


class _Stop(Exception):
    pass


@functools.lru_cache(maxsize=1024)
def _local(name: str) -> tuple[str, str]:
    prefix, _, local = name.rpartition(":")
    return prefix, local.lower()


class _XmlHandler:
    def __init__(self, limits: Limits):
        self.limits = limits
        self.kind: str | None = None
        self.entries: list[SitemapEntry] = []
        self.dropped = 0
        self.stack: list[str] = []
        self.ns: dict[str, str] = {}
        self.entry: dict | None = None  # fields of the entry being read
        self.entry_depth = 0
        self.field: str | None = None  # name of the text field being collected
        self.text: list[str] = []
        self.text_len = 0
        self.ext: str | None = None  # extension being read ("IMAGE", …)
        self.ext_depth = 0

    # expat callbacks
    def start(self, name: str, attrs: dict) -> None:
        if attrs:
            for k, v in attrs.items():
                if k.startswith("xmlns:"):
                    self.ns[k[6:]] = v
        prefix, local = _local(name)
        depth = len(self.stack)
        if depth >= MAX_NESTING:
            raise _Stop("malformed: elements nested too deeply")
        self.stack.append(local)
        if depth == 0:
            kind = _ROOTS.get(local)
            if kind is None:
                raise SitemapError("not_a_sitemap", f"root element <{name}> is not a sitemap or "
                                                    "feed (urlset, sitemapindex, rss, feed)")
            self.kind = kind
            return
        if self.entry is None:
            if self._starts_entry(local, attrs):
                self.entry = {"loc": None, "own": [], "ext": {}}
                self.entry_depth = depth
                if self.kind == RSS and "rdf:about" in attrs:
                    self.entry["about"] = attrs["rdf:about"]
            return
        if self.ext is not None:
            self._ext_start(local, attrs)
            return
        ext = self._extension(prefix)
        if ext is not None:
            self.ext, self.ext_depth = ext, depth
            if ext == "LINKS":
                self._links(attrs)
            elif ext == "MOBILE":
                self.entry["ext"].setdefault("MOBILE.mobile", ["true"])
            return
        if depth == self.entry_depth + 1:
            self._field_start(local, attrs)

    def end(self, name: str) -> None:
        depth = len(self.stack) - 1
        local = self.stack.pop() if self.stack else ""
        if self.entry is None:
            return
        if self.field is not None and depth == self.entry_depth + 1:
            self._field_end()
        elif self.ext is not None:
            if depth == self.ext_depth:
                self.ext = None
            elif self.field is not None:
                self._field_end()
        if depth == self.entry_depth and local:
            self._entry_end()

    def chars(self, data: str) -> None:
        if self.field is None:
            if self.entry is not None and len(self.stack) == self.entry_depth + 1:
                own = self.entry["own"]
                if sum(map(len, own)) < MAX_FIELD:
                    own.append(data)
            return
        self.text_len += len(data)
        if self.text_len <= MAX_FIELD:
            self.text.append(data)

    @staticmethod
    def forbid(*args) -> None:
        raise _Forbidden()

    # helpers
    def _starts_entry(self, local: str, attrs: dict) -> bool:
        kind = self.kind
        if kind == URLSET:
            return local == "url"
        if kind == INDEX:
            return local == "sitemap"
        if kind == RSS:
            return local == "item"
        return local == "entry"

    def _extension(self, prefix: str) -> str | None:
        if not prefix:
            return None
        uri = self.ns.get(prefix)
        if uri is not None:
            return _EXT_NS.get(uri.strip())
        return _EXT_PREFIX.get(prefix.lower())

    def _field_start(self, local: str, attrs: dict) -> None:
        kind = self.kind
        if kind in (URLSET, INDEX):
            if local in ("loc", "lastmod", "changefreq", "priority"):
                self._collect(local)
        elif kind == RSS:
            if local in ("link", "pubdate", "date"):
                self._collect("lastmod" if local in ("pubdate", "date") else "loc")
        else:  # Atom
            if local == "link":
                rel = (attrs.get("rel") or "alternate").strip().lower()
                href = attrs.get("href")
                if rel == "alternate" and href and self.entry["loc"] is None:
                    self.entry["loc"] = href
            elif local in ("updated", "published"):
                self._collect(local)

    def _ext_start(self, local: str, attrs: dict) -> None:
        if self.ext == "LINKS" and local == "link":
            self._links(attrs)
            return
        self._collect(f"{self.ext}.{local}")

    def _links(self, attrs: dict) -> None:
        ext = self.entry["ext"]
        href = attrs.get("href")
        if href:
            ext.setdefault("LINKS.href", []).append(href.strip())
            for k, v in attrs.items():
                if k != "href" and not k.startswith("xmlns"):
                    ext.setdefault(f"LINKS.params.{k}", []).append(v)

    def _collect(self, name: str) -> None:
        self.field = name
        self.text = []
        self.text_len = 0

    def _field_end(self) -> None:
        name, self.field = self.field, None
        if self.text_len > MAX_FIELD:
            if name == "loc":
                self.entry["too_long"] = True
            return
        value = "".join(self.text).strip()
        if not value:
            return
        if "." in name:  # an extension attribute
            self.entry["ext"].setdefault(name, []).append(value)
        elif name in ("updated", "published"):
            if name == "updated" or "lastmod" not in self.entry:
                self.entry["lastmod"] = value
        elif name == "loc" and self.entry["loc"] is not None:
            return  # the first <loc> wins
        else:
            self.entry[name] = value

    def _entry_end(self) -> None:
        e, self.entry = self.entry, None
        self.field = None
        self.ext = None
        loc = e.get("loc") or e.get("about")
        if loc is None and not e.get("too_long"):
            own = "".join(e["own"]).strip()  # <sitemap>URL</sitemap>: no <loc>, the URL as text
            if own and not any(c.isspace() for c in own) and "://" in own:
                loc = own
        loc = loc.strip() if loc else None
        if not loc or e.get("too_long") or len(loc) > MAX_FIELD:
            self.dropped += 1
            return
        self.entries.append(_entry(loc, e))
        if len(self.entries) >= self.limits.max_urls:
            raise _Stop("max_urls")


def _entry(loc: str, fields: dict) -> SitemapEntry:
    changefreq = (fields.get("changefreq") or "").strip().lower() or None
    if changefreq not in CHANGEFREQS:
        changefreq = None
    priority = None
    if fields.get("priority"):
        try:
            p = float(fields["priority"])
            if 0.0 <= p <= 1.0:
                priority = p
        except ValueError:
            pass
    return SitemapEntry(loc, normalize_lastmod(fields.get("lastmod")), changefreq, priority,
                        fields.get("ext") or {})


_SALVAGE = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?loc\s*>\s*([^<>]{1,8192}?)\s*</(?:[A-Za-z_][\w.-]*:)?loc\s*>",
                      re.I)
_XML_ESC = {b"&amp;": b"&", b"&lt;": b"<", b"&gt;": b">", b"&quot;": b'"', b"&apos;": b"'"}
_ESC = re.compile(rb"&(?:amp|lt|gt|quot|apos);")


def _salvage(handler: _XmlHandler, rest: bytes, chunks: Iterator[bytes]) -> None:
    """After a syntax error: the ``<loc>`` values of the rest of the stream (bounded regex over a
    rolling buffer), added as entries without other fields."""
    buf = rest
    for more in [None, *chunks]:
        if more:
            buf += more
        last = 0
        for m in _SALVAGE.finditer(buf):
            value = _ESC.sub(lambda x: _XML_ESC[x.group(0)], m.group(1)).strip()
            last = m.end()
            if value:
                handler.entries.append(SitemapEntry(value.decode("utf-8", "replace")))
                if len(handler.entries) >= handler.limits.max_urls:
                    raise _Stop("max_urls")
        buf = buf[last:] if last else buf[-(MAX_FIELD + 64):]


# ---- plain text -----------------------------------------------------------------------------

def _parse_text(first: bytes, chunks: Iterator[bytes], limits: Limits) -> SitemapResult:
    entries: list[SitemapEntry] = []
    dropped = 0
    pending = b""
    for piece in _chain(first, chunks):
        data = pending + piece
        lines = data.split(b"\n")
        pending = lines.pop()
        if len(pending) > MAX_FIELD:
            pending = b""
            dropped += 1
        for raw in lines:
            line = raw.strip().decode("utf-8", "replace").lstrip("\ufeff").strip()
            if not line or line.startswith("#"):
                continue
            if "://" not in line or any(c.isspace() for c in line) or len(line) > MAX_FIELD:
                dropped += 1
                continue
            entries.append(SitemapEntry(line))
            if len(entries) >= limits.max_urls:
                return SitemapResult(TEXT, entries, "max_urls", dropped)
    line = pending.strip().decode("utf-8", "replace").lstrip("\ufeff").strip()
    if line and "://" in line and not any(c.isspace() for c in line):
        entries.append(SitemapEntry(line))
    return SitemapResult(TEXT, entries, None, dropped)


_DECL = re.compile(rb"""^(<\?xml[^>]*?encoding\s*=\s*["'])([A-Za-z0-9._:-]+)(["'])""")
_NATIVE = {"utf-8", "utf8", "utf-16", "utf16", "iso-8859-1", "latin-1", "latin1", "us-ascii",
           "ascii"}


def _transcode(first: bytes, chunks: Iterator[bytes]) -> tuple[bytes, Iterator[bytes]]:
    """The stream as UTF-8 when its XML declaration names an encoding expat lacks; one nobody
    knows (a typo, ``Aig5``) is read as UTF-8, as feed readers do, instead of failing."""
    m = _DECL.match(first)
    if m is None or m.group(2).decode("ascii").lower() in _NATIVE:
        return first, chunks
    try:
        decoder = codecs.getincrementaldecoder(m.group(2).decode("ascii"))(errors="replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def rest() -> Iterator[bytes]:
        for piece in chunks:
            yield decoder.decode(piece).encode("utf-8")
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail.encode("utf-8")

    head = m.group(1) + b"UTF-8" + m.group(3) + decoder.decode(first[m.end():]).encode("utf-8")
    return head, rest()


def _chain(first: bytes, chunks: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from chunks


# ---- entry point ----------------------------------------------------------------------------

def parse_sitemap(content: bytes, limits: Limits | None = None) -> SitemapResult:
    """Parse a sitemap, sitemap index, text sitemap or feed (module docstring). Raises
    :class:`SitemapError` when nothing usable can be read; a partial read is returned with
    ``truncated`` set."""
    limits = limits or Limits()
    inp = _Input(content or b"", limits.max_bytes)
    chunks = inp.chunks()
    first = b""
    for piece in chunks:  # skip a UTF-8 BOM and leading whitespace
        first += piece
        stripped = first.lstrip(b" \t\r\n\x00")
        if stripped.startswith(b"\xef\xbb\xbf"):
            stripped = stripped[3:].lstrip(b" \t\r\n")
        if stripped:
            first = stripped
            break
        first = b""
    if not first:
        raise SitemapError("empty", "the document is empty")
    if first[:1] == b"<" or first[:2] in (b"\xff\xfe", b"\xfe\xff"):
        first, chunks = _transcode(first, chunks)
        result = _parse_xml(first, chunks, limits)
    else:
        result = _parse_text(first, chunks, limits)
    if inp.truncated:  # the input was cut: that, not the syntax error it causes, is the reason
        result.truncated = inp.truncated
    result.bytes_parsed = inp.total
    return result


def _parse_xml(first: bytes, chunks: Iterator[bytes], limits: Limits) -> SitemapResult:
    """expat fed piece by piece; ``fed`` (bytes before the current piece) locates a syntax
    error inside the piece, so that the salvage scan starts where expat stopped."""
    h = _XmlHandler(limits)
    p = expat.ParserCreate()
    p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    p.buffer_text = True
    p.StartElementHandler = h.start
    p.EndElementHandler = h.end
    p.CharacterDataHandler = h.chars
    p.EntityDeclHandler = h.forbid
    p.UnparsedEntityDeclHandler = h.forbid
    p.ExternalEntityRefHandler = h.forbid
    truncated = None
    piece, fed = first, 0
    try:
        try:
            while True:
                p.Parse(piece, False)
                fed += len(piece)
                piece = next(chunks, None)
                if piece is None:
                    piece = b""
                    p.Parse(b"", True)
                    break
        except expat.ExpatError as exc:
            if h.kind is None:
                raise SitemapError("malformed", f"not well-formed XML: {exc}") from exc
            truncated = f"malformed: {expat.ErrorString(exc.code)} at line {exc.lineno}"
            if h.kind in (URLSET, INDEX):
                pos = max(0, min(len(piece), p.ErrorByteIndex - fed)) if p.ErrorByteIndex >= 0 else 0
                # back up to the start of the element that failed: its <loc> may be salvaged
                start = piece.rfind(b"<loc", 0, pos + 1) if pos else -1
                if start < 0 or start < pos - MAX_FIELD:
                    start = pos
                _salvage(h, piece[start:], chunks)
    except LookupError as exc:  # an encoding name the declaration pattern did not catch
        raise SitemapError("malformed", f"unknown XML encoding: {exc}") from None
    except _Forbidden:
        raise SitemapError("xml_entities", "the document declares XML entities (forbidden: "
                                           "entity expansion and external entities are never "
                                           "processed)") from None
    except _Stop as stop:
        truncated = str(stop)
    if h.kind is None:
        raise SitemapError("empty", "no XML element found")
    return SitemapResult(h.kind, h.entries, truncated, h.dropped)
