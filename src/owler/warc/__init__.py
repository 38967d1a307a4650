"""WARC output: :class:`WARCWriter` (rotated per-record-gzip WARC/1.1 files) and crash recovery."""

from owler.warc.records import WARCFormatError
from owler.warc.writer import WARCStats, WARCWriter, WrittenRecord, recover_open_files, scan_members

__all__ = ["WARCWriter", "WARCStats", "WrittenRecord", "WARCFormatError", "recover_open_files",
           "scan_members"]
