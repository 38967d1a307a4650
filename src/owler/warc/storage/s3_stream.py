"""WARC files written straight to S3, so that no WARC byte a tuple's ack depends on lives on a
node's disk (``warc.s3.bucket`` with ``warc.s3.stream: true``, the default).

Each file is one S3 multipart upload. The writer (:class:`S3StreamWriter`, a
:class:`~owler.warc.storage.files.WARCWriter` whose files are uploads) keeps the part being filled
in memory and cuts it only between records (gzip members), so every stored part holds whole
records:

- a part is sent as soon as it holds ``warc.s3.stream.part.size`` bytes (8 MiB; S3's minimum is
  5 MiB);
- :meth:`S3StreamWriter.make_durable` stores what is buffered at once: as a part when it holds
  5 MiB, else by completing the file (the last part of an upload may be smaller). The WARC bolt
  calls it when its oldest pending page has waited ``warc.s3.max.age`` seconds, so a slow crawl
  makes smaller files instead of holding tuples past Storm's message timeout;
- every part's ETag is checked against the MD5 of the bytes sent.

:meth:`S3StreamWriter.durable` tells the bolt which written pages are stored (their tuples can be
acked); :meth:`S3StreamWriter.lost` which never will be (a part that could not be stored: the file
is completed with the parts already stored, the buffered records are dropped, and their tuples are
failed, so Storm replays them into a new file).

After a crash (:func:`recover_uploads`, run when a writer of the partition starts, on any node):
the uploads of the partition left open are completed with the parts they hold (each part was
stored whole, so no half record reaches the bucket) or aborted when they hold none; and the pages
the partition stored in the last ``warc.s3.dedup.window`` seconds are read back
(:func:`archived_urls`), so a page stored just before the crash whose tuple Storm replays is not
archived a second time (:meth:`S3StreamWriter.recently_archived`). The window is kept while the
writer runs, for the same reason. A start reads the partition's files opened within
``warc.rotation.time`` + the window: keep ``warc.rotation.time`` short (minutes) with S3.

Each file's CDXJ index (``warc.cdxj``, :mod:`owler.warc.storage.index`) is kept in memory while
the file is written and stored as the object ``<key>.cdxj`` beside it, with the lines of the
records the completed object keeps, just before the upload is completed (so a completed file has
its index but when that store failed: logged, tried again when the next file is completed). After
a crash (:func:`recover_indices`): the files whose uploads were completed by the recovery get an
index read off their objects (what they keep may not be what the lost writer held), so do the
partition's recent files without one; an index whose file is gone is removed.

Config keys: ``warc.s3.bucket``, ``warc.s3.prefix``, ``warc.s3.stream`` (true),
``warc.s3.stream.part.size``, ``warc.s3.max.age`` (10 s), ``warc.s3.dedup.window`` (600 s), the WARC
writer's keys (``warc.prefix``, rotation, gzip level, ``warc.cdxj``) and the ``s3.*`` client keys
of :mod:`owler.warc.storage.s3`.
"""

from __future__ import annotations

import calendar
import hashlib
import logging
import time
from collections import OrderedDict
from pathlib import PurePosixPath
from typing import Any, Callable, Iterator, Mapping

from owler import conf as C
from owler.constants import MESSAGE_TIMEOUT_KEY, WARC_S3_BUCKET_KEY, WARC_S3_PREFIX_KEY
from owler.warc.format import cdxj
from owler.warc.format.reader import InputRecord, iter_records
from owler.warc.storage import s3 as S3
from owler.warc.storage.files import WARC_SUFFIX, WARCWriter, parse_file_name
from owler.warc.storage.index import MemoryIndex

log = logging.getLogger("owler.warc.stream")

MIN_PART = 5 << 20  # S3's smallest part but the last
STREAM_KEY = "warc.s3.stream"
MAX_AGE_KEY = "warc.s3.max.age"
DEDUP_WINDOW_KEY = "warc.s3.dedup.window"
STREAM_PART_KEY = "warc.s3.stream.part.size"
STREAM_PART_SIZE = 8 << 20


class MultipartFile:
    """One WARC file being uploaded: the part being filled is in memory; file-like for
    :class:`~owler.warc.storage.files.WARCWriter` (``write``, ``flush``, ``seek`` + ``truncate``
    within the unsent part)."""

    def __init__(self, s3, bucket: str, key: str, part_size: int) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        self.s3, self.bucket, self.key, self.part_size = s3, bucket, key, part_size
        try:
            self.upload_id = s3.create_multipart_upload(
                Bucket=bucket, Key=key, ContentType="application/warc")["UploadId"]
        except (BotoCoreError, ClientError) as exc:
            raise S3.S3Error(f"cannot start the upload of s3://{bucket}/{key}: {exc}") from exc
        self.parts: list[dict[str, Any]] = []
        self.sizes: list[int] = []  # bytes of each stored part
        self.stored = 0  # bytes in stored parts
        self.buf = bytearray()
        self._cut = 0

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def write(self, data: bytes) -> int:
        self.buf += data
        return len(data)

    def flush(self) -> None:
        """The writer calls this after whole records: send a full part. A part S3 refuses is an
        OSError, so the writer cuts the records of that write back out of the buffer."""
        if len(self.buf) >= self.part_size:
            try:
                self.send_part()
            except S3.S3Error as exc:
                raise OSError(str(exc)) from exc

    def close(self) -> None:
        """Nothing to release (the upload stays open for :func:`recover_uploads`)."""

    def seek(self, pos: int) -> None:
        if pos < self.stored:
            raise OSError(f"{self.uri}: cannot go back into a stored part ({pos} < {self.stored})")
        self._cut = pos

    def truncate(self, pos: int | None = None) -> None:
        pos = self._cut if pos is None else pos
        if pos < self.stored:
            raise OSError(f"{self.uri}: cannot cut a stored part ({pos} < {self.stored})")
        del self.buf[pos - self.stored:]

    def send_part(self) -> None:
        """Store the buffer as the next part (S3Error if S3 refuses it after its retries)."""
        from botocore.exceptions import BotoCoreError, ClientError

        if not self.buf:
            return
        data = bytes(self.buf)
        number = len(self.parts) + 1
        try:
            etag = self.s3.upload_part(Bucket=self.bucket, Key=self.key, UploadId=self.upload_id,
                                       PartNumber=number, Body=data)["ETag"].strip('"')
        except (BotoCoreError, ClientError) as exc:
            raise S3.S3Error(f"cannot store part {number} of {self.uri}: {exc}") from exc
        if etag != hashlib.md5(data).hexdigest():
            raise S3.S3Error(f"part {number} of {self.uri} does not verify (ETag {etag})")
        self.parts.append({"PartNumber": number, "ETag": etag})
        self.sizes.append(len(data))
        self.stored += len(data)
        del self.buf[:len(data)]

    def salvage(self, keep: int | None = None) -> int:
        """Keep what is stored (the first parts holding no more than ``keep`` bytes, when given),
        drop the buffer (a part S3 would not take): the object's size (0, the upload aborted,
        when no part is kept)."""
        self.buf.clear()
        parts, size = _first_parts(self.parts, self.sizes, self.stored if keep is None else keep)
        if not parts:
            self.abort()
            return 0
        complete(self.s3, self.bucket, self.key, self.upload_id, parts)
        return size

    def abort(self) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.s3.abort_multipart_upload(Bucket=self.bucket, Key=self.key,
                                           UploadId=self.upload_id)
        except (BotoCoreError, ClientError) as exc:  # left for the next start to clean
            log.warning("cannot abort the upload of %s: %s", self.uri, exc)


def _first_parts(parts: list, sizes: list[int], keep: int) -> tuple[list, int]:
    """The leading parts whose bytes add up to no more than ``keep``, and their size."""
    size = 0
    for i, n in enumerate(sizes):
        if size + n > keep:
            return parts[:i], size
        size += n
    return list(parts), size


def complete(s3, bucket: str, key: str, upload_id: str, parts: list[dict[str, Any]]) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                     MultipartUpload={"Parts": parts})
    except (BotoCoreError, ClientError) as exc:
        raise S3.S3Error(f"cannot complete the upload of s3://{bucket}/{key}: {exc}") from exc


class S3StreamWriter(WARCWriter):
    """A :class:`WARCWriter` whose files are S3 multipart uploads (module docstring)."""

    def __init__(self, *args: Any, s3=None, bucket: str = "", key_prefix: str = "",
                 part_size: int = STREAM_PART_SIZE, dedup_window: float = 600.0,
                 **kw: Any) -> None:
        kw["fsync"] = False  # nothing local to fsync: a part is stored or it is not
        super().__init__(*args, **kw)
        if part_size < MIN_PART:
            raise C.ConfError(f"{STREAM_PART_KEY}: S3 parts are at least 5 MiB ({MIN_PART})")
        self.s3, self.bucket, self.key_prefix = s3, bucket, key_prefix
        self.part_size = part_size
        self.dedup_window = dedup_window
        self.closed_sizes: OrderedDict[str, int] = OrderedDict()  # file -> bytes stored
        self.lost_from: OrderedDict[str, int] = OrderedDict()  # file -> first byte not stored
        self.recent: OrderedDict[str, float] = OrderedDict()  # url -> archived at
        #: ``before_complete(name, stored) -> bytes to keep``: called when a file's last part is
        #: stored, before the upload is completed (the warc2warc copier records its records
        #: then, so a completed file never holds a record that is not recorded)
        self.before_complete = None
        self.unstored_indices: OrderedDict[str, bytes] = OrderedDict()  # key -> index, to retry

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any], partition: str = "0", **kw: Any
                  ) -> "S3StreamWriter":
        kw.setdefault("s3", S3.client(conf))
        kw.setdefault("bucket", C.get_str(conf, WARC_S3_BUCKET_KEY, ""))
        kw.setdefault("key_prefix", C.get_str(conf, WARC_S3_PREFIX_KEY, "") or "")
        kw.setdefault("part_size", C.get_int(conf, STREAM_PART_KEY, STREAM_PART_SIZE))
        kw.setdefault("dedup_window", C.get_float(conf, DEDUP_WINDOW_KEY, 600.0))
        return super().from_conf(conf, partition, **kw)

    def key(self, name: str) -> str:
        return S3.output_key(self.key_prefix, name)

    # -- storage hooks of WARCWriter --------------------------------------------------------
    def _name_taken(self, name: str) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.s3.head_object(Bucket=self.bucket, Key=self.key(name))
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise S3.S3Error(f"cannot check s3://{self.bucket}/{self.key(name)}: {exc}") from exc
        except BotoCoreError as exc:
            raise S3.S3Error(f"cannot reach S3 for {self.key(name)}: {exc}") from exc

    def _create(self, name: str):
        f = MultipartFile(self.s3, self.bucket, self.key(name), self.part_size)
        return f, PurePosixPath(f.uri)

    def _discard(self, fh, path) -> None:
        fh.abort()

    def _open_index(self, name: str):
        return MemoryIndex(name)

    def _store_index(self, name: str, data: bytes) -> None:
        """Put ``<key>.cdxj``; one that S3 refuses is kept to be tried again when the next file
        is completed (and at the next start, :func:`recover_indices`)."""
        self.unstored_indices[self.key(cdxj.index_name(name))] = data
        self.unstored_indices.move_to_end(self.key(cdxj.index_name(name)))
        for key, body in list(self.unstored_indices.items()):
            try:
                put_verified(self.s3, self.bucket, key, body)
            except S3.S3Error as exc:
                log.error("%s; tried again with the next file", exc)
                continue
            del self.unstored_indices[key]
        while len(self.unstored_indices) > 64:
            key, _ = self.unstored_indices.popitem(last=False)
            log.error("s3://%s/%s given up: made from its file at the next start", self.bucket,
                      key)

    def _finish(self, fh: MultipartFile, path):
        name = self._final_name
        try:
            fh.send_part()  # the rest, as the last part
        except S3.S3Error as exc:
            log.error("%s; keeping the %d bytes stored", exc, fh.stored)
            self._lost(name, fh.stored)
        keep = fh.stored
        if self.before_complete is not None:
            keep = min(keep, self.before_complete(name, fh.stored))
            if keep < fh.stored:
                log.error("%s: only %d of its %d stored bytes are kept", fh.uri, keep, fh.stored)
                self._lost(name, keep)
        index, self._index = self._index, None
        if index is not None and keep > 0:  # the index of what the object keeps, before it is
            self._store_index(name, index.data(_kept_size(fh, keep)))  # an object
        try:
            fh.salvage(keep)
        except S3.S3Error as exc:  # once more; else the parts stay for the next start
            log.error("%s; trying once more", exc)
            try:
                fh.salvage(keep)
            except S3.S3Error as again:
                log.error("%s; left for the next writer of partition %s", again, self.partition)
        self._remember(self.closed_sizes, name, keep)
        return path

    # -- durability ---------------------------------------------------------------------------
    def durable(self, name: str, end: int) -> bool:
        if self._fh is not None and name == self._final_name:
            return end <= self._fh.stored
        return end <= self.closed_sizes.get(name, -1)

    def lost(self, name: str, end: int) -> bool:
        return end > self.lost_from.get(name, end)

    def sync(self) -> None:
        self.make_durable()

    def make_durable(self) -> None:
        """Store everything written so far (module docstring); a part S3 refuses makes the
        buffered records lost (:meth:`lost`), never half stored."""
        fh = self._fh
        if fh is None or not fh.buf:
            return
        if len(fh.buf) >= MIN_PART:
            try:
                fh.send_part()
                return
            except S3.S3Error as exc:  # once more as the last part, else lost
                log.error("%s; closing the file", exc)
        self._close_file()

    def _lost(self, name: str, size: int) -> None:
        self._remember(self.lost_from, name, size)

    @staticmethod
    def _remember(table: OrderedDict, name: str, value: int) -> None:
        table[name] = value
        while len(table) > 64:
            table.popitem(last=False)

    # -- the dedup window -----------------------------------------------------------------------
    def archived(self, url: str, when: float) -> None:
        self.recent[url] = when
        self.recent.move_to_end(url)

    def recently_archived(self, url: str, now: float) -> bool:
        while self.recent:
            first, at = next(iter(self.recent.items()))
            if now - at <= self.dedup_window:
                break
            self.recent.popitem(last=False)
        return url in self.recent

    def recover(self, now: float | None = None) -> list[str]:
        """Complete this partition's uploads left open and reload the dedup window; the keys
        completed."""
        now = time.time() if now is None else now
        done = recover_uploads(self.s3, self.bucket, self.key(self.prefix + "-"), self.partition)
        if self.cdxj:
            recover_indices(self.s3, self.bucket, self.key(self.prefix + "-"), self.partition,
                            done, now - max(self.rotation_time, 0.0) - self.dedup_window - 3600)
        found = archived_urls(self.s3, self.bucket, self.key(self.prefix + "-"), self.partition,
                              now - self.dedup_window, self.rotation_time)
        for url, at in sorted(found, key=lambda f: f[1]):  # oldest first, as the window expires
            if now - at <= self.dedup_window:
                self.archived(url, at)
        return done


def _kept_size(fh: MultipartFile, keep: int) -> int:
    """The bytes :meth:`MultipartFile.salvage` keeps of ``keep``: its first parts within it."""
    return _first_parts(fh.parts, fh.sizes, keep)[1]


def put_verified(s3, bucket: str, key: str, body: bytes) -> None:
    """Put a small object (an index) and check its ETag against the bytes sent; S3Error."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        etag = s3.put_object(Bucket=bucket, Key=key, Body=body,
                             ContentType="text/plain; charset=utf-8")["ETag"].strip('"')
    except (BotoCoreError, ClientError) as exc:
        raise S3.S3Error(f"cannot store s3://{bucket}/{key}: {exc}") from exc
    if etag != hashlib.md5(body).hexdigest():
        raise S3.S3Error(f"s3://{bucket}/{key} does not verify (ETag {etag})")


def recover_indices(s3, bucket: str, key_prefix: str, partition: str, completed: list[str],
                    since: float) -> list[str]:
    """Index objects of ``partition``'s WARC files under ``key_prefix`` after a crash: made from
    the records of the objects ``completed`` by the recovery and of those dated ``since`` or
    later that have none; removed where their WARC file is gone (an upload aborted). The index
    keys written. Raises S3Error when S3 cannot be listed; a file whose index cannot be made is
    logged and left without (a later start tries again while it is recent)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        objects = {o["Key"]: o["LastModified"].timestamp()
                   for page in s3.get_paginator("list_objects_v2").paginate(
                       Bucket=bucket, Prefix=key_prefix) for o in page.get("Contents", [])}
    except (BotoCoreError, ClientError) as exc:
        raise S3.S3Error(f"cannot list s3://{bucket}/{key_prefix}: {exc}") from exc
    suffix = cdxj.INDEX_SUFFIX
    for key in objects:
        if key.endswith(WARC_SUFFIX + suffix) and _ours(key[:-len(suffix)], partition) \
                and key[:-len(suffix)] not in objects:
            try:
                s3.delete_object(Bucket=bucket, Key=key)
                log.warning("WARC recovery: removed s3://%s/%s (its file is gone)", bucket, key)
            except (BotoCoreError, ClientError) as exc:
                log.warning("WARC recovery: cannot remove s3://%s/%s: %s", bucket, key, exc)
    written = []
    for key, modified in sorted(objects.items()):
        if not key.endswith(WARC_SUFFIX) or not _ours(key, partition):
            continue
        if key not in completed and (key + suffix in objects or modified < since):
            continue
        name = key.rsplit("/", 1)[-1]
        stream = S3.S3Stream(s3, bucket, key)
        try:
            lines = list(cdxj.file_lines(stream, name))
            put_verified(s3, bucket, key + suffix, cdxj.sorted_lines(lines))
        except Exception as exc:  # noqa: BLE001 - S3Error, a damaged object: the others go on
            log.error("WARC recovery: cannot index s3://%s/%s: %s: %s", bucket, key,
                      type(exc).__name__, exc)
            continue
        finally:
            stream.close()
        log.warning("WARC recovery: indexed s3://%s/%s (%d captures)", bucket, key, len(lines))
        written.append(key + suffix)
    return written


def _ours(key: str, partition: str) -> bool:
    parts = parse_file_name(key.rsplit("/", 1)[-1])
    return parts is not None and parts["partition"] == partition


def recover_uploads(s3, bucket: str, key_prefix: str, partition: str,
                    keep: Callable[[str], int] | None = None) -> list[str]:
    """Complete (or abort, with no part) the multipart uploads of ``partition`` under
    ``key_prefix``; the keys completed. ``keep(key)``: how many bytes of the upload to keep (its
    leading parts up to that size; the warc2warc copier's committed length), all without it.
    Raises S3Error when S3 cannot be asked."""
    from botocore.exceptions import BotoCoreError, ClientError

    done = []
    try:
        pages = s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket,
                                                                      Prefix=key_prefix)
        uploads = [u for page in pages for u in page.get("Uploads", [])
                   if _ours(u["Key"], partition)]
        for u in uploads:
            key, uid = u["Key"], u["UploadId"]
            stored = sorted((p for page in s3.get_paginator("list_parts").paginate(
                                 Bucket=bucket, Key=key, UploadId=uid)
                             for p in page.get("Parts", [])), key=lambda p: p["PartNumber"])
            parts = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in stored]
            if keep is not None:
                parts, _ = _first_parts(parts, [p["Size"] for p in stored], keep(key))
                if len(parts) < len(stored):
                    log.warning("WARC recovery: s3://%s/%s: %d stored part(s) beyond its "
                                "committed length dropped (their records come again)", bucket,
                                key, len(stored) - len(parts))
            if parts:
                complete(s3, bucket, key, uid, parts)
                log.warning("WARC recovery: completed s3://%s/%s from its %d stored parts",
                            bucket, key, len(parts))
                done.append(key)
            else:
                s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=uid)
                log.warning("WARC recovery: aborted the empty upload of s3://%s/%s", bucket, key)
    except (BotoCoreError, ClientError) as exc:
        raise S3.S3Error(f"cannot recover the uploads under s3://{bucket}/{key_prefix}: {exc}"
                         ) from exc
    return done


def archived_urls(s3, bucket: str, key_prefix: str, partition: str, since: float,
                  rotation_time: float = 0.0) -> Iterator[tuple[str, float]]:
    """``(url, WARC-Date)`` of the responses and revisits that files of ``partition`` may have
    stored since ``since``: files opened (the time in their name) less than ``rotation_time``
    seconds before it, or modified since (S3 dates a multipart object by its upload's start)."""
    from botocore.exceptions import BotoCoreError, ClientError

    def recent(o) -> bool:
        parts = parse_file_name(o["Key"].rsplit("/", 1)[-1])
        if parts is None or parts["partition"] != partition:
            return False
        opened = calendar.timegm(time.strptime(parts["ts"], "%Y%m%d%H%M%S"))
        return (rotation_time > 0 and opened >= since - rotation_time - 60
                or o["LastModified"].timestamp() >= since)

    try:
        objects = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
                       Bucket=bucket, Prefix=key_prefix)
                   for o in page.get("Contents", []) if recent(o)]
    except (BotoCoreError, ClientError) as exc:
        raise S3.S3Error(f"cannot list s3://{bucket}/{key_prefix}: {exc}") from exc
    for key in objects:
        stream = S3.S3Stream(s3, bucket, key)
        try:
            for rec in iter_records(stream, verify=False):
                if isinstance(rec, InputRecord) and rec.type in ("response", "revisit"):
                    yield rec.target_uri, _warc_time(rec.date)
        finally:
            stream.close()


def _warc_time(date: str) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(date.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def stream_enabled(conf: Mapping[str, Any]) -> bool:
    return bool(C.get_str(conf, WARC_S3_BUCKET_KEY, "")) and C.get_bool(conf, STREAM_KEY, True)


def check_conf(conf: Mapping[str, Any], dedup: bool = True) -> None:
    """Raise ConfError for streaming keys a writer could not work with (before Storm starts);
    ``dedup``: the writer reads back its files for Storm's replays (the fetcher's archiver; the
    warc2warc copy finds replays in its progress store instead)."""
    if not stream_enabled(conf):
        return
    part = C.get_int(conf, STREAM_PART_KEY, STREAM_PART_SIZE)
    if part < MIN_PART:
        raise C.ConfError(f"{STREAM_PART_KEY}: S3 parts are at least 5 MiB ({MIN_PART}), got {part}")
    age = C.get_float(conf, MAX_AGE_KEY, 10.0)
    timeout = C.get_float(conf, MESSAGE_TIMEOUT_KEY, 30.0)
    if not 0 < age < timeout:
        raise C.ConfError(f"{MAX_AGE_KEY}: expected more than 0 and less than {MESSAGE_TIMEOUT_KEY} "
                          f"({timeout:g} s), got {age:g}: a page held longer is replayed by Storm")
    if dedup and C.get_float(conf, DEDUP_WINDOW_KEY, 600.0) < timeout:
        raise C.ConfError(f"{DEDUP_WINDOW_KEY}: must cover at least {MESSAGE_TIMEOUT_KEY} "
                          f"({timeout:g} s), the time after which Storm replays a page")
