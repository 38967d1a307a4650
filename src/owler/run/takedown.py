"""What ``owler takedown`` does beyond the take-down file (:mod:`owler.blacklist.takedown`): every
URL of the site in the frontier set to ERROR at once, on every backend (:func:`take_down`), and
the captures already archived found in the CDXJ indices beside the crawl's WARC files, local or in
S3 (:func:`archive_indices`, :func:`find_captures`)."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from owler import conf as C
from owler import urls
from owler.blacklist import RELOAD_INTERVAL_KEY
from owler.blacklist.hosts import IPV4_RE
from owler.blacklist.takedown import MD_TARGET, Takedown, TakedownError
from owler.constants import (PARTITION_MODE_IP, WARC_DIR_KEY, WARC_S3_BUCKET_KEY,
                             WARC_S3_PREFIX_KEY, Status)
from owler.frontier.dump import records
from owler.status import commit_settings
from owler.warc.format.cdxj import cdxj_files, find_captures as search_index

#: URLs per frontier write of :func:`take_down`
BATCH = 1000
#: seconds added to the settle time (:func:`settle_time`): a batch being written, a slow disk
SETTLE_MARGIN = 5.0


def settle_time(conf: Mapping[str, Any]) -> float:
    """How long after a take-down no status of its URLs but ERROR reaches the frontier: every
    task reloads the file within ``blacklist.reload.interval``, from then on the status updater
    writes ERROR for them, and what it took before is committed within
    ``status.updater.commit.interval`` (:func:`owler.status.commit_settings`)."""
    return (C.get_float(conf, RELOAD_INTERVAL_KEY, 30.0) + commit_settings(conf)[1]
            + SETTLE_MARGIN)


def candidate_keys(frontier: Any, entry: Takedown, mode: str) -> list[str] | None:
    """The queues that may hold URLs of ``entry``: its host, its pay-level domain and the keys
    of its subdomains the frontier has; None with ``byIP`` keys (any queue may: every URL is
    read)."""
    if mode == PARTITION_MODE_IP:
        return None
    keys = {entry.host, urls.pay_level_domain(entry.host)}
    if not entry.prefix:
        keys.update(subdomain_keys(frontier, entry.host))
    return sorted(keys)


def subdomain_keys(frontier: Any, host: str) -> list[str]:
    """The keys of ``frontier`` that are subdomains of ``host``, asked of each backend in its
    own way: SQLite's ``queues`` (every key), an OpenSearch terms aggregation
    with a regular expression, a URLFrontier service's ListQueues."""
    if IPV4_RE.match(host) or host.startswith("["):
        return []
    suffix = "." + host
    from owler.frontier.sqlite import SQLiteFrontier

    if isinstance(frontier, SQLiteFrontier):
        rows = frontier.conn.execute(
            "SELECT key FROM queues WHERE key LIKE ? ESCAPE '\\'",
            ("%" + suffix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_"),))
        return [k for (k,) in rows if k.endswith(suffix)]
    from owler.frontier.opensearch import OpenSearchFrontier

    if isinstance(frontier, OpenSearchFrontier):
        body = {"size": 0, "aggs": {"keys": {"terms": {
            "field": "key", "size": 65536, "include": ".+" + re.escape(suffix)}}}}
        _, data = frontier.client.request("POST", f"/{frontier.index}/_search", body)
        return [b["key"] for b in data["aggregations"]["keys"]["buckets"]
                if b["key"].endswith(suffix)]
    from owler.frontier.urlfrontier import URLFrontierClient

    if isinstance(frontier, URLFrontierClient):
        return [k for k in frontier.keys() if k.endswith(suffix)]
    raise TypeError(f"cannot list the queues of a {type(frontier).__name__}")


def take_down(frontier: Any, entry: Takedown, updater: Any, mode: str,
              now: float | None = None) -> int:
    """Give every URL of ``entry`` in ``frontier`` the status ERROR (module docstring), through
    ``updater`` (:class:`owler.status.StatusUpdater`: the crawl's own metadata and scheduling
    rules) and the backend's ``apply_updates``; returns how many URLs were written. URLs already
    taken down by the same target are left as they are (running it again writes nothing)."""
    now = time.time() if now is None else now
    keys = candidate_keys(frontier, entry, mode)
    batch: list = []
    written = 0

    def flush() -> None:
        nonlocal written
        if batch:
            frontier.apply_updates(batch)
            written += len(batch)
            batch.clear()

    for key in (keys if keys is not None else [None]):
        # (a URL written here may come again later in its queue's order, by its new date: it is
        # then one this target took down, and left)
        for rec in records(frontier, key=key):
            if not entry.matches(rec.url):
                continue
            md = rec.metadata
            if rec.status == Status.ERROR and md.get(MD_TARGET) == [entry.target]:
                continue
            update = updater.to_update(rec.url, {**md, **entry.metadata()}, Status.ERROR, now)
            batch.append(replace(update, key=rec.key))
            if len(batch) >= BATCH:
                flush()
    flush()
    return written


def archive_indices(conf: Mapping[str, Any], scratch: Path) -> list[tuple[str, Path]]:
    """The CDXJ indices of the crawl's WARC files: ``(where the WARC files are, index file)``,
    from ``warc.dir`` and, with ``warc.s3.bucket``, from the bucket's ``warc.s3.prefix`` (each
    index copied into ``scratch`` to be searched)."""
    out: list[tuple[str, Path]] = []
    local = C.absolute_paths({WARC_DIR_KEY: C.get_str(conf, WARC_DIR_KEY, ".work/warc")})
    folder = Path(local[WARC_DIR_KEY])
    if folder.is_dir():
        out.extend((str(folder), p) for p in cdxj_files(folder))
    bucket = C.get_str(conf, WARC_S3_BUCKET_KEY, "")
    if bucket:
        from botocore.exceptions import BotoCoreError, ClientError

        from owler.warc.storage import s3 as S3

        prefix = C.get_str(conf, WARC_S3_PREFIX_KEY, "")
        client = S3.client(conf)
        try:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                        Prefix=prefix):
                for obj in page.get("Contents", []):
                    key = obj["Key"]
                    if key.endswith(".cdxj"):
                        copy = scratch / f"{len(out)}-{Path(key).name}"
                        client.download_file(bucket, key, str(copy))
                        where = f"s3://{bucket}/{key.rpartition('/')[0]}".rstrip("/")
                        out.append((where, copy))
        except (BotoCoreError, ClientError) as exc:
            raise TakedownError(f"cannot read the indices in s3://{bucket}/{prefix}: "
                                f"{exc}") from exc
    return out


def find_captures(indices: list[tuple[str, Path]], entry: Takedown) -> list[tuple[str, Any]]:
    """``(where, capture)`` of every archived capture of ``entry`` in ``indices``
    (:func:`archive_indices`; :func:`owler.warc.format.cdxj.find_captures`), by date."""
    out = []
    for where, index in indices:
        out.extend((where, c) for c in search_index([index], entry.target))
    out.sort(key=lambda wc: (wc[1].timestamp, wc[1].url))
    return out
