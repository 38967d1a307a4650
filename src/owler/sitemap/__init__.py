"""The sitemap pipeline without Storm.

- :mod:`owler.sitemap.parser`: the bytes of a sitemap or feed → its entries (safe, streaming,
  bounded);
- :mod:`owler.sitemap.processor`: one fetched sitemap → the entries to store (scope, filters,
  budgets, metadata) and its own status; the checks and metadata of the sitemaps the fetcher
  finds for a host.

How sitemaps are found is :mod:`owler.fetch.discovery`; how a sitemap's news reaches URLs the
frontier knows already is :mod:`owler.frontier.refresh` (a rule of the frontier's writes).
"""
