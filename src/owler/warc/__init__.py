"""WARC output: :class:`WarcWriter` (rotated per-record-gzip WARC/1.1 files) and crash recovery."""

from owler.warc.records import WarcFormatError
from owler.warc.writer import WarcStats, WarcWriter, WrittenRecord, recover_open_files, scan_members

__all__ = ["WarcWriter", "WarcStats", "WrittenRecord", "WarcFormatError", "recover_open_files",
           "scan_members"]
