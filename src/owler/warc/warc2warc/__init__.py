"""The warc2warc pipeline: input WARC files read, copied unchanged into its own archive, and their
HTTP responses made into pages.

Input: :mod:`.inputs` (where the input files are), :mod:`.input_feed` (WARCFeed: the records the
spout emits, each until it is acked). Copy: :mod:`.copying_feed` (CopyingFeed: each record copied
before it is emitted), :mod:`.output` (ArchiveCopier: the output files, each record once). Parse:
:mod:`.record_as_page` (one archived record made into what a fetch would have given). Progress:
:mod:`.progress` (which store), :mod:`.progress_sqlite`, :mod:`.progress_opensearch`.
Uses :mod:`owler.warc.format` and :mod:`owler.warc.storage`, never :mod:`owler.warc.crawl`."""
