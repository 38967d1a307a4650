"""WARC files: the record format and storage below, the two pipelines that write WARC files above
them (docs/ARCHITECTURE.md, "Inside warc/"):

- :mod:`owler.warc.format`: the WARC/1.1 record format, written (``serialize``) and read back with
  each record's exact bytes (``reader``); below everything else here;
- :mod:`owler.warc.storage`: where WARC files go: rotated local files (``files``), S3 uploads of
  finished files (``s3_upload``), files streamed to S3 (``s3_stream``), the S3 client (``s3``);
- :mod:`owler.warc.crawl`: the crawl's archive, written by the fetcher (``archiver``);
- :mod:`owler.warc.warc2warc`: the warc2warc pipeline, input WARC files read and copied.

The crawl and warc2warc never import each other; both use ``format`` and ``storage``.
This package's own names are the writer's: :class:`WARCWriter` (rotated per-record-gzip WARC/1.1
files) and crash recovery.
"""

from owler.warc.format.serialize import WARCFormatError
from owler.warc.storage.files import (WARCStats, WARCWriter, WrittenRecord, recover_open_files,
                                      scan_members)

__all__ = ["WARCWriter", "WARCStats", "WrittenRecord", "WARCFormatError", "recover_open_files",
           "scan_members"]
