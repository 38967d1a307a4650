"""A farm of sites in several languages, for the content-intelligence crawl tests: each page's
text is made of labelled sentences nobody on the project wrote (eld 1.0.6's test set,
tests/data/lang), so what language a page is in is known.

One site per language, by address (one aiohttp app on one port):

- ``/`` links to ``/p/1`` … ``/p/PAGES`` of its own site and to every other site's ``/``;
- ``/p/<n>`` has eight sentences of the site's language and links to the next page;
- ``/short`` (linked from ``/``) has one word and a declared language (``<html lang>`` on the
  German site, a ``Content-Language`` header elsewhere): the crawler must fall back to it.

Declarations that lie or are missing, on purpose: the Spanish site says ``<html lang="en">``;
the German and Japanese sites declare nothing on their pages but ``/short``.

:data:`EXPECTED` gives, per site and path, the language and its source the crawler should
record. Run: ``python -m tests.farm.languages --log FILE`` → prints ``READY <port>``; every
request is logged as a JSON line (time, host, path, status).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from aiohttp import web

from tests.farm import aiosites

DATA = Path(__file__).resolve().parents[1] / "data" / "lang" / "eld-1.0.6-big-test-sample.tsv"
#: address → (language, what its pages declare: ("html", tag) / ("header", tag) / None)
SITES = {
    "127.0.72.1": ("de", None),
    "127.0.72.2": ("fr", ("html", "fr-FR")),
    "127.0.72.3": ("es", ("html", "en")),  # a wrong declaration: the text decides
    "127.0.72.4": ("pl", ("header", "pl")),
    "127.0.72.5": ("ja", None),
    "127.0.72.6": ("en", ("html", "en")),
}
NETWORK = "127.0.72.0/24"
PAGES = 3
#: the declared language of each site's /short page
SHORT = {"127.0.72.1": ("html", "de-DE"), "127.0.72.2": ("header", "fr"),
         "127.0.72.3": ("html", "es"), "127.0.72.4": ("header", "pl-PL"),
         "127.0.72.5": ("html", "ja"), "127.0.72.6": ("header", "en-GB")}


def sentences() -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for line in DATA.read_text(encoding="utf-8").splitlines():
        lang, _, text = line.partition("\t")
        out[lang].append(text)
    return out


def expected() -> dict[tuple[str, str], tuple[str, str]]:
    """(address, path) → (lang, lang.source) the crawl should record."""
    out = {}
    for addr, (lang, _) in SITES.items():
        out[(addr, "/")] = (lang, "text")
        for n in range(1, PAGES + 1):
            out[(addr, f"/p/{n}")] = (lang, "text")
        out[(addr, "/short")] = (SHORT[addr][1].split("-")[0].lower(), SHORT[addr][0])
    return out


EXPECTED = expected()


class Farm:
    def __init__(self, port: int) -> None:
        self.text = sentences()
        self.port = port

    def page(self, addr: str, title: str, body: str, links: list[str],
             declared: tuple[str, str] | None) -> web.Response:
        lang_attr = f' lang="{declared[1]}"' if declared and declared[0] == "html" else ""
        anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
        html = (f"<!doctype html><html{lang_attr}><head><meta charset=utf-8><title>{title}"
                f"</title></head><body><h1>{title}</h1><p>{body}</p><ul>{anchors}</ul>"
                "</body></html>")
        headers = {"Content-Language": declared[1]} if declared and declared[0] == "header" else {}
        return web.Response(text=html, content_type="text/html", charset="utf-8", headers=headers)

    def answer(self, addr: str, path: str) -> web.Response:
        if addr not in SITES or path == "/robots.txt":
            return web.Response(status=404)
        lang, declared = SITES[addr]
        words = self.text[lang]
        if path == "/":
            links = [f"/p/{n}" for n in range(1, PAGES + 1)] + ["/short"]
            links += [f"http://{other}:{self.port}/" for other in SITES if other != addr]
            return self.page(addr, words[0][:40], " ".join(words[:4]), links, declared)
        if path == "/short":
            return self.page(addr, "-", "ok", ["/"], SHORT[addr])
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "p" and parts[1].isdigit() \
                and 1 <= int(parts[1]) <= PAGES:
            n = int(parts[1])
            links = [f"/p/{n % PAGES + 1}", "/"]
            return self.page(addr, words[n][:40], " ".join(words[4 + 4 * n:12 + 4 * n]), links,
                             declared)
        return web.Response(status=404)


def main() -> None:
    aiosites.main(aiosites.answering(lambda port: Farm(port).answer), list(SITES))


if __name__ == "__main__":
    main()
