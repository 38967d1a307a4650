"""WARC files in S3-compatible storage (boto3): listing, streaming reads that survive dropped
connections, and verified uploads.

Client (:func:`client`): ``s3.endpoint`` (an S3-compatible server; empty = AWS), ``s3.region``
(us-east-1), the standard credential chain of boto3 (environment, ``~/.aws``, instance roles),
``s3.max.attempts`` (5: boto3's own retries of throttling, 5xx and connection errors, with
back-off), ``s3.connect.timeout`` (10 s), ``s3.read.timeout`` (60 s).

Reads (:class:`S3Stream`): one ranged GET from the position asked for, read sequentially; when the
body stops (timeout, reset, a cut response), the stream is opened again at the byte it had reached,
up to ``s3.max.attempts`` times with back-off, so a long file is read once even over a bad network.

Uploads (:func:`upload_verified`): multipart above ``warc.s3.part.size`` (64 MiB), then the stored
object is checked against the local file: its size, and its ETag against the MD5 (single part) or
the MD5 of the parts' MD5s (``-N``) computed locally; a mismatch deletes the object and raises.
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

from owler import conf as C
from owler.constants import S3_MAX_ATTEMPTS_KEY

log = logging.getLogger("owler.s3")

WARC_SUFFIXES = (".warc", ".warc.gz")


class S3Error(RuntimeError):
    """An S3 operation failed after its retries; the message names the object."""


def parse_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` → ``(bucket, prefix)``."""
    if not uri.startswith("s3://"):
        raise C.ConfError(f"not an s3:// URI: {uri!r}")
    bucket, _, prefix = uri[5:].partition("/")
    if not bucket:
        raise C.ConfError(f"no bucket in {uri!r}")
    return bucket, prefix


def client(conf: Mapping[str, Any]):
    import boto3
    from botocore.config import Config

    cfg = Config(retries={"max_attempts": C.get_int(conf, S3_MAX_ATTEMPTS_KEY, 5), "mode": "standard"},
                 connect_timeout=C.get_float(conf, "s3.connect.timeout", 10.0),
                 read_timeout=C.get_float(conf, "s3.read.timeout", 60.0),
                 s3={"addressing_style": "path"})
    endpoint = C.get_str(conf, "s3.endpoint", "") or None
    return boto3.client("s3", endpoint_url=endpoint,
                        region_name=C.get_str(conf, "s3.region", "us-east-1") or "us-east-1",
                        config=cfg)


def list_warcs(s3, bucket: str, prefix: str) -> Iterator[tuple[str, int, str]]:
    """``(key, size, etag)`` of the WARC files under ``prefix``, in key order."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if key.endswith(WARC_SUFFIXES):
                    yield key, int(obj["Size"]), str(obj.get("ETag", "")).strip('"')
    except (BotoCoreError, ClientError) as exc:
        raise S3Error(f"cannot list s3://{bucket}/{prefix}: {exc}") from exc


class S3Stream:
    """A read-only, sequential file object over ``s3://bucket/key`` from byte ``start``."""

    def __init__(self, s3, bucket: str, key: str, start: int = 0, attempts: int = 5,
                 backoff: float = 0.5) -> None:
        self.s3, self.bucket, self.key = s3, bucket, key
        self.pos = start
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.body = None
        self.size: int | None = None
        self.reopened = 0

    def _open(self) -> None:
        from botocore.exceptions import ClientError

        try:
            resp = self.s3.get_object(Bucket=self.bucket, Key=self.key, Range=f"bytes={self.pos}-")
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("InvalidRange", "416"):  # at or past the end
                self.body = _Empty()
                return
            raise
        self.body = resp["Body"]

    def read(self, n: int = -1) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        delay = self.backoff
        for attempt in range(self.attempts):
            try:
                if self.body is None:
                    self._open()
                data = self.body.read(n) if n >= 0 else self.body.read()
                self.pos += len(data)
                return data
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code in ("NoSuchKey", "AccessDenied", "NoSuchBucket", "403", "404"):
                    raise S3Error(f"s3://{self.bucket}/{self.key}: {code}") from exc
                last = exc
            except (BotoCoreError, OSError, ValueError) as exc:  # reset, timeout, cut body
                last = exc
            self._close_body()
            if attempt + 1 < self.attempts:
                log.warning("reading s3://%s/%s at byte %d failed (%s); reopening in %.1f s",
                            self.bucket, self.key, self.pos, last, delay)
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
                self.reopened += 1
        raise S3Error(f"cannot read s3://{self.bucket}/{self.key} at byte {self.pos} after "
                      f"{self.attempts} attempts: {last}")

    def _close_body(self) -> None:
        if self.body is not None:
            try:
                self.body.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close
                pass
        self.body = None

    def close(self) -> None:
        self._close_body()


class _Empty:
    def read(self, n: int = -1) -> bytes:
        return b""

    def close(self) -> None:
        pass


def expected_etag(path: Path, part_size: int) -> str:
    """The ETag S3 gives ``path`` uploaded with parts of ``part_size`` (no SSE-KMS)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size < part_size:
            return hashlib.md5(f.read()).hexdigest()
        digests = []
        while True:
            part = f.read(part_size)
            if not part:
                break
            digests.append(hashlib.md5(part).digest())
    return f"{hashlib.md5(b''.join(digests)).hexdigest()}-{len(digests)}"


def upload_verified(s3, path: Path, bucket: str, key: str, part_size: int = 64 << 20) -> None:
    """Upload ``path`` to ``s3://bucket/key`` and check the stored object (module docstring).
    An object already there with the same size and ETag is kept (an upload finished before a
    crash). Raises :class:`S3Error`."""
    from boto3.s3.transfer import TransferConfig
    from botocore.exceptions import BotoCoreError, ClientError

    path = Path(path)
    size = path.stat().st_size
    etag = expected_etag(path, part_size)
    uri = f"s3://{bucket}/{key}"
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
        if int(head["ContentLength"]) == size and head["ETag"].strip('"') == etag:
            return
    except ClientError:
        pass  # not there (404): upload it
    except BotoCoreError as exc:
        raise S3Error(f"cannot reach S3 to upload {path} to {uri}: {exc}") from exc
    cfg = TransferConfig(multipart_threshold=part_size, multipart_chunksize=part_size,
                         use_threads=False)
    try:
        s3.upload_file(str(path), bucket, key, Config=cfg)
        head = s3.head_object(Bucket=bucket, Key=key)
    except (BotoCoreError, ClientError, OSError) as exc:
        raise S3Error(f"cannot upload {path} to {uri}: {exc}") from exc
    got_size, got_etag = int(head["ContentLength"]), head["ETag"].strip('"')
    if got_size != size or got_etag != etag:
        try:
            s3.delete_object(Bucket=bucket, Key=key)
        except (BotoCoreError, ClientError):
            pass
        raise S3Error(f"upload of {path} to {uri} does not verify: size {got_size} (expected "
                      f"{size}), ETag {got_etag} (expected {etag})")


def output_key(prefix: str, name: str) -> str:
    prefix = prefix.strip("/")
    return f"{prefix}/{name}" if prefix else name
