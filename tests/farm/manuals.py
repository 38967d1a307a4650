"""A farm of real multilingual sites for the language test (issue 48): the HTML pages of two Debian
manuals in their translations (the Debian FAQ and the New Maintainers' Guide, thirteen languages,
308 pages nobody on the project wrote; ``tests/testdata.sh`` takes them from the Debian packages
of ``tests/manuals.versions`` into ``.work/testdata/debian-manuals``), one site per package.

Each site serves its package's pages at their paths under ``usr/share/doc`` (so their relative
links hold), with every language declaration removed (``lang`` and ``xml:lang`` attributes,
``<meta http-equiv="Content-Language">``; no ``Content-Language`` header): the crawler has only
the text to go by. Pages are served in the charset :data:`SITES` gives their site, declared in the
``Content-Type`` header, in a ``<meta>`` only, or nowhere (the charset detector's job): UTF-8 and
ten legacy charsets (Shift_JIS, EUC-JP, KOI8-R, windows-1251, GB18030, GBK, Big5, EUC-KR,
ISO-8859-1, windows-1252), characters a charset lacks written as character references.

:func:`pages` gives every page's URL path and true language (the package's: ``zh-cn`` and
``zh-tw`` are ``zh``; the English originals ``en``). Run: ``python -m tests.farm.manuals --log
FILE`` → prints ``READY <port>``; every request is logged as a JSON line (time, host, path,
status).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from aiohttp import web

from tests.farm import aiosites
from tests.material import fetched

#: address → (package, charset, where it is declared: "header", "meta" or "none")
SITES = {
    "127.0.73.1": ("debian-faq", "utf-8", "header"),
    "127.0.73.2": ("debian-faq-de", "iso-8859-1", "none"),
    "127.0.73.3": ("debian-faq-fr", "windows-1252", "header"),
    "127.0.73.4": ("debian-faq-it", "utf-8", "meta"),
    "127.0.73.5": ("debian-faq-ja", "shift_jis", "header"),
    "127.0.73.6": ("debian-faq-ko", "euc-kr", "header"),
    "127.0.73.7": ("debian-faq-nl", "windows-1252", "meta"),
    "127.0.73.8": ("debian-faq-pt", "utf-8", "none"),
    "127.0.73.9": ("debian-faq-ru", "koi8-r", "header"),
    "127.0.73.10": ("debian-faq-zh-cn", "gb18030", "meta"),
    "127.0.73.11": ("maint-guide", "utf-8", "header"),
    "127.0.73.12": ("maint-guide-ca", "iso-8859-1", "meta"),
    "127.0.73.13": ("maint-guide-de", "utf-8", "header"),
    "127.0.73.14": ("maint-guide-es", "windows-1252", "none"),
    "127.0.73.15": ("maint-guide-fr", "utf-8", "header"),
    "127.0.73.16": ("maint-guide-it", "iso-8859-1", "header"),
    "127.0.73.17": ("maint-guide-ja", "euc-jp", "meta"),
    "127.0.73.18": ("maint-guide-ru", "windows-1251", "meta"),
    "127.0.73.19": ("maint-guide-vi", "utf-8", "meta"),
    "127.0.73.20": ("maint-guide-zh-cn", "gbk", "header"),
    "127.0.73.21": ("maint-guide-zh-tw", "big5", "meta"),
}
NETWORK = "127.0.73.0/24"

_DECLARATIONS = [re.compile(r'\s(?:xml:)?lang\s*=\s*("[^"]*"|\'[^\']*\')', re.I),
                 re.compile(r"<meta[^>]*http-equiv\s*=\s*[\"']?content-language[^>]*>", re.I)]
_CHARSET_META = re.compile(r"<meta[^>]*(?:charset\s*=|http-equiv\s*=\s*[\"']?content-type)[^>]*>",
                           re.I)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")


def root() -> Path:
    return fetched("debian-manuals").resolve()


def language(package: str) -> str:
    """The language of a package's pages."""
    rest = package.split("-")[2:]  # debian-faq-zh-cn, maint-guide-de; debian-faq: English
    return rest[0] if rest else "en"


@lru_cache(maxsize=None)
def pages() -> dict[tuple[str, str], str]:
    """(address, URL path) → the true language, for every page of every site."""
    out = {}
    for addr, (package, _, _) in SITES.items():
        base = root() / package
        files = sorted(base.rglob("*.html"))
        if not files:
            raise FileNotFoundError(f"no pages of {package} in {base}: run `make setup`")
        for path in files:
            out[(addr, "/" + path.relative_to(base).as_posix())] = language(package)
    return out


def undeclared(text: str) -> str:
    """The page without its language declarations and its charset declarations (the
    ``<meta>``, and the XML declaration's ``encoding`` of the XHTML pages: a page served in
    another charset must not say UTF-8)."""
    for pattern in _DECLARATIONS:
        text = pattern.sub(lambda m: " " if m.group(0)[0].isspace() else "", text)
    return _CHARSET_META.sub("", _XML_DECLARATION.sub("", text))


def served(addr: str, path: str) -> tuple[bytes, str] | None:
    """The bytes and the Content-Type of ``path`` on the site at ``addr``."""
    package, charset, where = SITES[addr]
    file = (root() / package / path.lstrip("/")).resolve()
    if not file.is_relative_to(root() / package) or not file.is_file() \
            or file.suffix != ".html":
        return None
    text = undeclared(file.read_text(encoding="utf-8"))
    if where == "meta":
        text = re.sub(r"<head([^>]*)>", rf'<head\1><meta charset="{charset}">', text, count=1,
                      flags=re.I)
    body = text.encode(charset, "xmlcharrefreplace")
    return body, (f"text/html; charset={charset}" if where == "header" else "text/html")


def answer(addr: str, path: str) -> web.Response:
    found = served(addr, path) if addr in SITES else None
    if found is None:
        return web.Response(status=404)
    return web.Response(body=found[0], headers={"Content-Type": found[1]})


def main() -> None:
    aiosites.main(aiosites.answering(lambda port: answer), list(SITES))


if __name__ == "__main__":
    main()
