"""The crawl's WARC archive: :mod:`.archiver`, the fetcher's request and response records written
on a thread of its own. Uses :mod:`owler.warc.format` and :mod:`owler.warc.storage`, never
:mod:`owler.warc.warc2warc`."""
