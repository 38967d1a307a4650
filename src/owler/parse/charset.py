"""Charset detection for fetched HTML (StormCrawler's ``CharsetIdentification``, "fast" order).

:func:`detect` picks the encoding to decode a page with, by precedence:

1. a byte-order mark (UTF-8, UTF-16LE/BE; UTF-32 BOMs too, which browsers do not honour but
   which w3lib and ICU do);
2. the ``charset`` parameter of the HTTP ``Content-Type`` header;
3. the HTML5 "prescan a byte stream to determine its encoding" algorithm (``<meta charset>``,
   ``<meta http-equiv=content-type content=...>``) over the first ``max_length`` bytes
   (conf ``detect.charset.maxlength``, default 10000; the HTML standard uses 1024), plus an XML
   declaration ``<?xml ... encoding="..."?>`` at the very start (XHTML);
4. a statistical guess (charset-normalizer on at most 4 KB from the first non-ASCII byte),
   only when the bytes are not valid UTF-8;
5. ``utf-8`` when the bytes are valid UTF-8, else ``windows-1252``.

Labels are normalised per the WHATWG Encoding standard (``latin1``, ``iso-8859-1``, ``ascii`` →
``windows-1252``; ``utf8`` → ``utf-8``; ``gb2312`` → ``gbk``; ...). Unknown labels, UTF-7 and
the "replacement" labels (``iso-2022-kr``, ``hz-gb-2312``, ...) are ignored, so the next source
decides. The returned name is the WHATWG name in lower case; :func:`decode` maps it to the
Python codec that implements the WHATWG decoder (``gbk`` → gb18030, ``big5`` → big5hkscs,
``shift_jis`` → cp932, ``euc-kr`` → cp949, ...).

Nothing here raises on any input bytes.
"""

from __future__ import annotations

import codecs
import re

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "decode",
    "detect",
    "from_content_type",
    "guess",
    "lookup",
    "prescan",
    "python_codec",
    "read_bom",
]

#: conf key: bytes used for the meta prescan and the statistical guess
MAX_LENGTH_KEY = "detect.charset.maxlength"
DEFAULT_MAX_LENGTH = 10000

# WHATWG Encoding standard: encoding name -> its labels (lower case, before whitespace trimming).
_WHATWG: dict[str, str] = {
    "utf-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
    "ibm866": "866 cp866 csibm866 ibm866",
    "iso-8859-2": "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 "
    "iso_8859-2:1987 l2 latin2",
    "iso-8859-3": "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 "
    "iso_8859-3:1988 l3 latin3",
    "iso-8859-4": "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 "
    "iso_8859-4:1988 l4 latin4",
    "iso-8859-5": "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 "
    "iso_8859-5 iso_8859-5:1988",
    "iso-8859-6": "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 "
    "iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987",
    "iso-8859-7": "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 "
    "iso8859-7 iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    "iso-8859-8": "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 "
    "iso8859-8 iso88598 iso_8859-8 iso_8859-8:1988 visual",
    "iso-8859-8-i": "csiso88598i iso-8859-8-i logical",
    "iso-8859-10": "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
    "iso-8859-13": "iso-8859-13 iso8859-13 iso885913",
    "iso-8859-14": "iso-8859-14 iso8859-14 iso885914",
    "iso-8859-15": "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
    "iso-8859-16": "iso-8859-16",
    "koi8-r": "cskoi8r koi koi8 koi8-r koi8_r",
    "koi8-u": "koi8-ru koi8-u",
    "macintosh": "csmacintosh mac macintosh x-mac-roman",
    "windows-874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
    "windows-1250": "cp1250 windows-1250 x-cp1250",
    "windows-1251": "cp1251 windows-1251 x-cp1251",
    "windows-1252": "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 "
    "iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252",
    "windows-1253": "cp1253 windows-1253 x-cp1253",
    "windows-1254": "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 "
    "iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254",
    "windows-1255": "cp1255 windows-1255 x-cp1255",
    "windows-1256": "cp1256 windows-1256 x-cp1256",
    "windows-1257": "cp1257 windows-1257 x-cp1257",
    "windows-1258": "cp1258 windows-1258 x-cp1258",
    "x-mac-cyrillic": "x-mac-cyrillic x-mac-ukrainian",
    "gbk": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk",
    "gb18030": "gb18030",
    "big5": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
    "euc-jp": "cseucpkdfmtjapanese euc-jp x-euc-jp",
    "iso-2022-jp": "csiso2022jp iso-2022-jp",
    "shift_jis": "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
    "euc-kr": "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 "
    "ksc5601 ksc_5601 windows-949",
    "utf-16be": "unicodefffe utf-16be",
    "utf-16le": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
    "x-user-defined": "x-user-defined",
}
# "replacement" labels (csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr
# replacement) are deliberately absent: a browser decodes such a page as one U+FFFD, which is
# useless to a crawler, so they are treated as unknown and the next source decides.

_LABELS: dict[str, str] = {
    label: name for name, labels in _WHATWG.items() for label in labels.split()
}
# Names Python codecs / charset-normalizer use that are not WHATWG labels.
_LABELS.update(
    {
        "utf_8": "utf-8", "utf_16": "utf-16le", "utf_16_le": "utf-16le",
        "utf_16_be": "utf-16be", "cp932": "shift_jis", "shift_jis_2004": "shift_jis",
        "shift_jisx0213": "shift_jis", "euc_jp": "euc-jp", "euc_jis_2004": "euc-jp",
        "euc_jisx0213": "euc-jp", "iso2022_jp": "iso-2022-jp", "euc_kr": "euc-kr",
        "cp949": "euc-kr", "big5hkscs": "big5", "cp950": "big5", "mac_roman": "macintosh",
        "mac_cyrillic": "x-mac-cyrillic", "cp874": "windows-874", "tis_620": "windows-874",
        "latin_1": "windows-1252", "iso8859_1": "windows-1252", "latin-1": "windows-1252",
    }
)
# Non-WHATWG UTF-32 only comes from a BOM (browsers ignore it; w3lib and ICU honour it).
_UTF32 = ("utf-32le", "utf-32be")

# WHATWG name -> Python codec implementing that decoder (identity when absent).
_PY_CODEC: dict[str, str] = {
    "gbk": "gb18030",  # the WHATWG gbk decoder is the gb18030 decoder
    "big5": "big5hkscs",  # WHATWG big5 includes HKSCS
    "shift_jis": "cp932",  # WHATWG Shift_JIS is Windows-31J
    "euc-kr": "cp949",  # WHATWG EUC-KR is windows-949 (UHC)
    "windows-874": "cp874",
    "iso-8859-8-i": "iso-8859-8",
    "x-mac-cyrillic": "mac-cyrillic",
    "x-user-defined": "windows-1252",
    "iso-8859-16": "iso8859_16",
}

_BOMS = (
    # UTF-32 before UTF-16: FF FE 00 00 starts with the UTF-16LE BOM
    (codecs.BOM_UTF32_LE, "utf-32le"),
    (codecs.BOM_UTF32_BE, "utf-32be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16le"),
    (codecs.BOM_UTF16_BE, "utf-16be"),
)


def lookup(label: str | bytes | None) -> str | None:
    """WHATWG "get an encoding": the encoding name for ``label`` (ASCII whitespace trimmed, case
    insensitive), or ``None`` for an unknown, empty, UTF-7 or "replacement" label."""
    if label is None:
        return None
    if isinstance(label, bytes):
        label = label.decode("latin-1")
    return _LABELS.get(label.strip("\t\n\f\r ").lower())


def python_codec(name: str) -> str:
    """The Python codec implementing the WHATWG decoder for encoding ``name``."""
    return _PY_CODEC.get(name, name)


def read_bom(content: bytes) -> tuple[str, int] | None:
    """``(encoding, bom_length)`` when ``content`` starts with a byte-order mark, else None."""
    if content[:1] not in (b"\xef", b"\xfe", b"\xff", b"\x00"):
        return None
    for bom, name in _BOMS:
        if content.startswith(bom):
            return name, len(bom)
    return None


# --- HTTP Content-Type ----------------------------------------------------------------------
_CT_PREFIX = re.compile(r"\s*content-type\s*:", re.I)
_CT_TYPE = re.compile(r'[^;,"]*')
_CT_PARAM = re.compile(
    r'[ \t]*;[ \t]*([^\s;,="]+)=(?:"([^"]*)"|([^\s;,"]*))(?=[ \t]*(?:;|,|$|\r|\n))'
)


def from_content_type(content_type: str | None) -> str | None:
    """The encoding named by the ``charset`` parameter of a Content-Type value, or None.

    Only the first media type of a comma-joined value counts; the first non-empty ``charset``
    wins; parameter values are tokens or double-quoted strings; parsing stops at the first
    malformed parameter (``charset = x``, ``charset='x'``, ``charset="x"y``)."""
    if not content_type:
        return None
    m = _CT_PREFIX.match(content_type)
    pos = m.end() if m else 0
    pos = _CT_TYPE.match(content_type, pos).end()
    while True:
        m = _CT_PARAM.match(content_type, pos)
        if m is None:
            return None
        pos = m.end()
        if m.group(1).lower() == "charset":
            value = m.group(2) if m.group(2) is not None else m.group(3)
            if value:
                return lookup(value)


# --- HTML5 prescan --------------------------------------------------------------------------
# One "get an attribute" step of the HTML standard's prescan, as a regex on bytes:
# skip whitespace and "/", then either ">" (no more attributes) or a name (first byte may be
# "="), optional whitespace, optional "=" + whitespace + value (quoted, or unquoted up to
# whitespace / ">"). Groups: 1 ">", 2 name, 3 "=", 4 double-quoted value, 5 closing
# quote, 6/7 the same for single quotes, 8 unquoted value.
_ATTR = re.compile(
    rb"[\t\n\x0c\r /]*(?:(>)|([^\t\n\x0c\r />][^\t\n\x0c\r /=>]*)[\t\n\x0c\r ]*"
    rb"(?:(=)[\t\n\x0c\r ]*(?:\"([^\"]*)(\")?|'([^']*)(')?|([^\t\n\x0c\r >]*)))?)"
)
_LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_TAG_END = re.compile(rb"[\t\n\x0c\r >]")
_META_CHARSET = re.compile(rb"charset[\t\n\x0c\r ]*=[\t\n\x0c\r ]*", re.I)
_XML_DECL = re.compile(rb"<\?xml[^>]{0,200}?encoding\s*=\s*[\"']([A-Za-z0-9._:-]+)[\"']")


class _Abort(Exception):
    """End of input inside a construct: the prescan fails."""


def _get_attr(data: bytes, pos: int) -> tuple[bytes | None, bytes, int]:
    """Returns (lower-cased name or None when there are no more attributes, value, new pos)."""
    m = _ATTR.match(data, pos)
    if m is None:  # end of input while skipping whitespace
        raise _Abort
    end = m.end()
    if m.group(1) is not None:  # ">"
        return None, b"", end
    name = m.group(2)
    if m.group(3) is None:  # no "=": valueless attribute
        if end >= len(data):
            raise _Abort
        return name.lower(), b"", end
    if m.group(4) is not None:
        if m.group(5) is None:  # unterminated quote
            raise _Abort
        return name.lower(), m.group(4).lower(), end
    if m.group(6) is not None:
        if m.group(7) is None:
            raise _Abort
        return name.lower(), m.group(6).lower(), end
    if end >= len(data):  # unquoted value or "=" running to the end of input
        raise _Abort
    return name.lower(), m.group(8).lower(), end


def _charset_from_content(value: bytes) -> str | None:
    """HTML's "extracting a character encoding from a meta element" (content attribute)."""
    pos = 0
    while True:
        m = _META_CHARSET.search(value, pos)
        if m is None:
            return None
        i = m.end()
        if i >= len(value):
            return None
        q = value[i : i + 1]
        if q in (b'"', b"'"):
            j = value.find(q, i + 1)
            if j < 0:
                return None
            return lookup(value[i + 1 : j])
        j = i
        while j < len(value) and value[j] not in b"\t\n\x0c\r ;":
            j += 1
        return lookup(value[i:j])


def _meta(data: bytes, pos: int) -> tuple[str | None, int]:
    seen: set[bytes] = set()
    got_pragma = False
    need_pragma: bool | None = None
    charset: str | None = None
    while True:
        name, value, pos = _get_attr(data, pos)
        if name is None:
            break
        if name in seen:
            continue
        seen.add(name)
        if name == b"http-equiv":
            if value == b"content-type":
                got_pragma = True
        elif name == b"content":
            if charset is None:
                found = _charset_from_content(value)
                if found is not None:
                    charset = found
                    need_pragma = True
        elif name == b"charset":
            # an unknown label leaves charset unset (so a later content= may still count)
            charset = lookup(value)
            need_pragma = False
    if need_pragma is None or (need_pragma and not got_pragma) or charset is None:
        return None, pos
    if charset in ("utf-16le", "utf-16be"):
        charset = "utf-8"
    elif charset == "x-user-defined":
        charset = "windows-1252"
    return charset, pos


def prescan(content: bytes, max_length: int = DEFAULT_MAX_LENGTH) -> str | None:
    """The HTML standard's prescan of the first ``max_length`` bytes (``-1``: all), plus an XML
    declaration's ``encoding`` at offset 0. Returns the WHATWG encoding name or None."""
    data = content if max_length is None or max_length < 0 else content[:max_length]
    if data.startswith(b"<?xml"):
        m = _XML_DECL.match(data)
        if m is not None:
            enc = lookup(m.group(1))
            if enc is not None:
                return "utf-8" if enc in ("utf-16le", "utf-16be") else enc
    n = len(data)
    pos = 0
    find = data.find
    try:
        while True:
            pos = find(b"<", pos)
            if pos < 0 or pos + 1 >= n:
                return None
            nxt = data[pos + 1]
            if nxt == 0x21 and data.startswith(b"<!--", pos):  # comment
                end = find(b"-->", pos + 2)
                if end < 0:
                    return None
                pos = end + 3
                continue
            if nxt in b"mM" and data[pos : pos + 5].lower() == b"<meta" and pos + 5 < n and (
                data[pos + 5] in b"\t\n\x0c\r /"
            ):
                charset, pos = _meta(data, pos + 6)
                if charset is not None:
                    return charset
                continue
            if nxt == 0x2F:  # "</"
                if pos + 2 < n and data[pos + 2] in _LETTERS:
                    nxt = data[pos + 2]
                    tagpos = pos + 2
                else:
                    end = find(b">", pos + 2)
                    if end < 0:
                        return None
                    pos = end + 1
                    continue
            else:
                tagpos = pos + 1
            if nxt in _LETTERS:  # ASCII letter: a tag; skip its attributes
                m = _TAG_END.search(data, tagpos)
                if m is None:
                    return None
                pos = m.start()
                while True:
                    name, _value, pos = _get_attr(data, pos)
                    if name is None:
                        break
                continue
            if nxt in b"!/?":
                end = find(b">", pos + 2)
                if end < 0:
                    return None
                pos = end + 1
                continue
            pos += 1
    except _Abort:
        return None


# --- statistical guess ----------------------------------------------------------------------
_HIGH = re.compile(rb"[\x80-\xff]")


#: the guess never looks at more than this many bytes (charset-normalizer costs ~1 ms per 4 KB
#: of non-text bytes and ~25 ms per 10 KB)
GUESS_MAX_LENGTH = 4096


def guess(content: bytes, max_length: int = DEFAULT_MAX_LENGTH) -> str | None:
    """charset-normalizer's best guess on a sample of at most ``min(max_length, 4096)`` bytes
    that starts shortly before the first non-ASCII byte (a page's ASCII markup says nothing).
    Returns a WHATWG name, or None when there is no usable guess."""
    from charset_normalizer import from_bytes  # imported lazily: rarely needed, slow import

    size = GUESS_MAX_LENGTH
    if max_length is not None and 0 < max_length < size:
        size = max_length
    m = _HIGH.search(content)
    if m is None:
        return None
    start = max(0, m.start() - 256)
    sample = content[start : start + size]
    try:
        best = from_bytes(sample).best()
    except Exception:  # noqa: BLE001 - a failed guess only means "no guess"
        return None
    if best is None:
        return None
    enc = lookup(best.encoding) or lookup(best.encoding.replace("_", "-"))
    if enc == "utf-8":  # the bytes are known not to be UTF-8
        return None
    return enc


def _is_utf8(content: bytes) -> bool:
    try:
        content.decode("utf-8")
        return True
    except UnicodeDecodeError as exc:
        # a page cut off by http.content.limit may end inside a multi-byte sequence
        return exc.start >= len(content) - 3 and exc.reason == "unexpected end of data"


def detect(
    content: bytes, content_type: str | None = None, max_length: int = DEFAULT_MAX_LENGTH
) -> str:
    """The encoding to decode ``content`` with (a WHATWG name; see the module docstring for the
    precedence). ``max_length`` is ``detect.charset.maxlength``. Never raises on bytes input."""
    bom = read_bom(content)
    if bom is not None:
        return bom[0]
    enc = from_content_type(content_type)
    if enc is not None:
        return enc
    enc = prescan(content, max_length)
    if enc is not None:
        return enc
    if _is_utf8(content):
        return "utf-8"
    return guess(content, max_length) or "windows-1252"


def decode(content: bytes, encoding: str) -> str:
    """``content`` decoded with ``encoding`` (a WHATWG name or a Python codec name), invalid
    sequences replaced by U+FFFD; a leading BOM of that encoding is dropped. An unknown encoding
    falls back to UTF-8 (never raises)."""
    codec = python_codec(encoding)
    bom = read_bom(content)
    if bom is not None and bom[0] == encoding:
        content = content[bom[1] :]
    try:
        return content.decode(codec, "replace")
    except LookupError:
        return content.decode("utf-8", "replace")
