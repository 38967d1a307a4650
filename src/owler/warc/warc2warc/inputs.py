"""Where the warc2warc pipeline's input WARC files are: ``warc2warc.input`` is an
``s3://bucket/prefix`` (every ``*.warc`` / ``*.warc.gz`` object under it, through
:mod:`owler.warc.storage.s3`) or a local folder (every such file under it, recursively).

A file is named by ``s3://bucket/key`` or its absolute path; its ``etag`` (S3's ETag, or
mtime-size locally) lets a changed file be told from the one that was read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO, Mapping

from owler import conf as C
from owler.constants import S3_MAX_ATTEMPTS_KEY, WARC2WARC_INPUT_KEY
from owler.warc.storage import s3 as S3

INPUT_KEY = WARC2WARC_INPUT_KEY


class InputSource:
    def __init__(self, location: str, conf: Mapping[str, Any]) -> None:
        self.location = location
        self.conf = conf
        self._s3 = None
        if location.startswith("s3://"):
            self.bucket, self.prefix = S3.parse_uri(location)
        else:
            self.bucket = None
            self.root = Path(location)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "InputSource":
        location = (C.get_str(conf, INPUT_KEY, "") or "").strip()
        if not location:
            raise C.ConfError(f"{INPUT_KEY}: name the input WARC files (s3://bucket/prefix or a "
                              "local folder)")
        return cls(str(C.absolute_paths({INPUT_KEY: location})[INPUT_KEY]), conf)

    @property
    def s3(self):
        if self._s3 is None:
            self._s3 = S3.client(self.conf)
        return self._s3

    def list(self) -> list[tuple[str, int, str]]:
        """``(name, size, etag)`` of every input file. Raises :class:`S3.S3Error` or
        ``FileNotFoundError`` when the location cannot be listed."""
        if self.bucket is not None:
            return [(f"s3://{self.bucket}/{key}", size, etag)
                    for key, size, etag in S3.list_warcs(self.s3, self.bucket, self.prefix)]
        if not self.root.is_dir():
            raise FileNotFoundError(f"{INPUT_KEY}: no folder {self.root}")
        out = []
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and path.name.endswith(S3.WARC_SUFFIXES):
                st = path.stat()
                out.append((str(path.resolve()), st.st_size, f"{int(st.st_mtime)}-{st.st_size}"))
        return out

    def open(self, name: str, start: int = 0) -> BinaryIO:
        """A sequential binary stream of file ``name`` from byte ``start``."""
        if name.startswith("s3://"):
            bucket, key = S3.parse_uri(name)
            return S3.S3Stream(self.s3, bucket, key, start,
                               attempts=C.get_int(self.conf, S3_MAX_ATTEMPTS_KEY, 5))
        f = open(name, "rb")
        if start:
            f.seek(start)
        return f
