"""The sitemap refresh rules both frontier backends apply (:mod:`owler.frontier.sqlite`'s module
docstring has the full statement): a DISCOVERED that comes from a sitemap (``isDiscoveredOnSitemap``
or ``isSitemap`` true, or the seed spout's ``sitemap.seeded``) is, for a URL the frontier knows, a
refresh of what sitemaps say of it rather than a no-op: its status stays, the sitemap keys are
merged, and it may become due (a later ``lastmod``, a seed a sitemap now lists, the next look-up of
a seed on no sitemap)."""

from __future__ import annotations

from typing import Mapping

from owler.constants import IS_SITEMAP, ON_SITEMAP, SITEMAP_EXTENSIONS, SITEMAP_SEEDED

#: metadata key prefixes of the sitemap extensions (a new listing replaces them all)
EXT_PREFIXES = tuple(f"{ext}." for ext in SITEMAP_EXTENSIONS)
TRUE = ["true"]
REFRESH_KEYS = frozenset((IS_SITEMAP, ON_SITEMAP, SITEMAP_SEEDED))


def is_refresh(status: str, md: Mapping[str, list[str]]) -> bool:
    """A DISCOVERED whose metadata says it comes from a sitemap or the seed spout."""
    return status == "DISCOVERED" and (md.get(ON_SITEMAP) == TRUE or md.get(IS_SITEMAP) == TRUE
                                       or SITEMAP_SEEDED in md)


def listed(md: Mapping[str, list[str]]) -> bool:
    """The metadata says the URL is on a sitemap (or is one)."""
    return md.get(ON_SITEMAP) == TRUE or md.get(IS_SITEMAP) == TRUE


def is_sitemap_key(key: str) -> bool:
    """A key a refresh merges (besides ``isSitemap``, which is never turned back to false)."""
    return key == ON_SITEMAP or key.startswith("sitemap.") or key.startswith(EXT_PREFIXES)


def merge_sitemap_facts(stored: dict[str, list[str]], update: Mapping[str, list[str]]
                        ) -> dict[str, list[str]]:
    """The stored metadata with the sitemap keys of ``update`` merged in."""
    md = dict(stored)
    if update.get(ON_SITEMAP) == TRUE and any(k.startswith(EXT_PREFIXES) for k in update):
        for k in [k for k in md if k.startswith(EXT_PREFIXES)]:
            del md[k]
    for k, v in update.items():
        if k == IS_SITEMAP:
            if stored.get(IS_SITEMAP) != TRUE:
                md[k] = list(v)
        elif is_sitemap_key(k):
            md[k] = list(v)
    return md
