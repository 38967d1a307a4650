"""Fetching pages politely, without Storm: what the fetcher bolt runs.

- :mod:`owler.fetch.engine`: the fetch loop (:class:`~owler.fetch.engine.FetchEngine`): queues,
  robots.txt, sitemap discovery and the HTTP fetch of one URL, in that order, giving an
  ``Outcome`` per URL;
- :mod:`owler.fetch.politeness`: the per-queue delays (StormCrawler's fetch item queues);
- :mod:`owler.fetch.robots`: robots.txt parsing, matching, fetch policy and cache;
- :mod:`owler.fetch.discovery`: which sitemaps a host has (robots.txt ``Sitemap:`` lines, or
  guessed paths), found while its robots.txt is read;
- :mod:`owler.fetch.http`: the HTTP client (aiohttp) with its size limits, content decoding and
  private-address guard.

This package imports nothing of the URL filters, the blacklists or the sitemap parser: what the
fetcher finds is filtered by the bolt (:mod:`owler.sitemap.processor`'s ``EntryGate``) and the
pipeline downstream.
"""
