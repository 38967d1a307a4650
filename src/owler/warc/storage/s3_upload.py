"""Finished WARC files to S3: ``warc.s3.bucket`` / ``warc.s3.prefix`` with ``warc.s3.stream: false``
(no bucket: the files stay in ``warc.dir``; the default with a bucket streams each file to S3 as it
is written, :mod:`owler.warc.storage.s3_stream`).

A writer hands every file it closes to :class:`Uploader`, whose own thread uploads it with
:func:`owler.warc.storage.s3.upload_verified` (multipart, verified), retrying with back-off while
S3 fails, and then deletes the local copy (``warc.s3.keep.local: true`` keeps it and leaves a
``<name>.uploaded`` marker). Only finished files are ever uploaded (a file being written ends in
``.open``). At start, finished files of the writer's prefix and partition still in ``warc.dir``
(closed before a crash or while S3 was down) are queued again; an object that is already in S3
with the same size and ETag is not sent twice. ``close()`` waits up to ``warc.s3.close.wait``
seconds (120) for the queue; what is left is uploaded by the next start.

Each file's CDXJ index (``<name>.cdxj``, :mod:`owler.warc.storage.index`; ``warc.cdxj``) goes
beside it under the same prefix, uploaded after the file and before either local copy is deleted
(the index first, so a file still in ``warc.dir`` always has its index uploaded again with it). A
file that has no index yet (written before ``warc.cdxj``, or its index could not be written) gets
one made from its records before it is uploaded.

Config keys: ``warc.s3.bucket``, ``warc.s3.prefix``, ``warc.s3.part.size`` (64 MiB),
``warc.s3.keep.local`` (false), ``warc.s3.close.wait`` (120), ``warc.cdxj`` (true), and the
``s3.*`` client keys of :mod:`owler.warc.storage.s3`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from owler import conf as C
from owler.constants import WARC_S3_BUCKET_KEY, WARC_S3_PREFIX_KEY
from owler.warc.format.cdxj import index_name
from owler.warc.storage import index as X
from owler.warc.storage import s3 as S3
from owler.warc.storage.files import WARC_SUFFIX, WARCWriter, parse_file_name, recover_open_files

log = logging.getLogger("owler.warc.upload")

UPLOADED_SUFFIX = ".uploaded"


def open_output(conf: Mapping[str, Any], partition: str, extra_info: Mapping[str, Any] | None = None
                ) -> tuple[WARCWriter, "Uploader | None"]:
    """A writer task's WARC output: with ``warc.s3.stream`` (and a bucket) an
    :class:`~owler.warc.storage.s3_stream.S3StreamWriter` that has completed the uploads its
    partition left open; else local files, where files of ``partition`` left ``.open`` by an earlier
    run are finalized, its finished files still in ``warc.dir`` are queued for upload (with
    ``warc.s3.bucket``), and the writer hands every file it closes to the uploader."""
    from owler.warc.storage.s3_stream import S3StreamWriter, stream_enabled

    if stream_enabled(conf):  # straight to S3: nothing on the node's disk
        stream = S3StreamWriter.from_conf(conf, partition, extra_info=extra_info)
        done = stream.recover()
        if done:
            log.warning("completed %d WARC uploads left open by an earlier run", len(done))
        return stream, None
    writer = WARCWriter.from_conf(conf, partition, extra_info=extra_info)  # opens no file yet
    recovered = recover_open_files(writer.directory, prefix=writer.prefix, partition=partition,
                                   cdxj=writer.cdxj)
    if recovered:
        log.warning("finalized %d WARC files left open by an earlier run", len(recovered))
    uploader = Uploader.from_conf(conf)
    if uploader is not None:
        uploader.submit_leftovers(writer.directory, writer.prefix, partition)
        writer.on_close = uploader.submit
    return writer, uploader


class Uploader:
    def __init__(self, conf: Mapping[str, Any], on_done: Callable[[Path, str], None] | None = None,
                 client=None) -> None:
        self.bucket = C.get_str(conf, WARC_S3_BUCKET_KEY, "") or ""
        self.prefix = C.get_str(conf, WARC_S3_PREFIX_KEY, "") or ""
        self.part_size = C.get_int(conf, "warc.s3.part.size", 64 << 20)
        if self.part_size < 5 << 20:
            raise C.ConfError("warc.s3.part.size: S3 parts are at least 5 MiB (5242880)")
        self.keep_local = C.get_bool(conf, "warc.s3.keep.local", False)
        self.close_wait = C.get_float(conf, "warc.s3.close.wait", 120.0)
        self.cdxj = X.indexing(conf)
        self.on_done = on_done
        self.conf = conf
        self._client = client
        self.queue: queue.Queue = queue.Queue()
        self.uploaded = 0
        self.failures = 0
        self.last_error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="warc-upload", daemon=True)
        self._thread.start()

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any], **kw: Any) -> "Uploader | None":
        """An uploader when ``warc.s3.bucket`` is set, else ``None``."""
        if not (C.get_str(conf, WARC_S3_BUCKET_KEY, "") or ""):
            return None
        return cls(conf, **kw)

    @property
    def client(self):
        if self._client is None:
            self._client = S3.client(self.conf)
        return self._client

    def submit(self, path: Path) -> None:
        self.queue.put(Path(path))

    def submit_leftovers(self, directory: Path, prefix: str, partition: str) -> int:
        """Queue the finished files of ``prefix``/``partition`` still waiting in ``directory``."""
        n = 0
        for path in sorted(Path(directory).glob("*" + WARC_SUFFIX)):
            parts = parse_file_name(path.name)
            if not parts or parts["prefix"] != prefix or parts["partition"] != str(partition):
                continue
            if path.with_name(path.name + UPLOADED_SUFFIX).exists():
                continue
            self.submit(path)
            n += 1
        return n

    @property
    def pending(self) -> int:
        return self.queue.qsize()

    def _run(self) -> None:
        delay = 1.0
        while not self._stop.is_set() or not self.queue.empty():
            try:
                path = self.queue.get(timeout=0.5)
            except queue.Empty:
                continue
            key = S3.output_key(self.prefix, path.name)
            index = (X.ensure_index(path) if self.cdxj and path.exists() else None)
            try:
                S3.upload_verified(self.client, path, self.bucket, key, self.part_size)
                if index is not None:
                    S3.upload_verified(self.client, index, self.bucket,
                                       S3.output_key(self.prefix, index.name), self.part_size)
            except Exception as exc:  # noqa: BLE001 - S3Error, OSError, any botocore error
                self.failures += 1
                self.last_error = str(exc)
                if not path.exists():
                    log.error("WARC file %s vanished before its upload", path)
                    continue
                log.warning("upload of %s failed (%s); retrying in %.0f s", path, exc, delay)
                self.queue.put(path)
                if self._stop.wait(delay):
                    break  # closing: what is left goes at the next start
                delay = min(delay * 2, 60.0)
                continue
            delay = 1.0
            self.uploaded += 1
            log.info("uploaded %s to s3://%s/%s", path, self.bucket, key)
            if self.keep_local:
                path.with_name(path.name + UPLOADED_SUFFIX).touch()
            else:  # the index first: a WARC file left behind brings its index again
                path.with_name(index_name(path.name)).unlink(missing_ok=True)
                path.unlink(missing_ok=True)
            if self.on_done is not None:
                try:
                    self.on_done(path, f"s3://{self.bucket}/{key}")
                except Exception:  # noqa: BLE001 - a bookkeeping error must not stop uploads
                    log.exception("after the upload of %s", path)

    def close(self) -> None:
        """Upload what is queued (up to ``warc.s3.close.wait`` seconds), then stop."""
        deadline = time.time() + self.close_wait
        while not self.queue.empty() and time.time() < deadline and self._thread.is_alive():
            time.sleep(0.2)
        self._stop.set()
        self._thread.join(timeout=max(0.0, deadline - time.time()) + 5.0)
