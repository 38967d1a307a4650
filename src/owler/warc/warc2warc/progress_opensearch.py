"""The warc2warc progress in OpenSearch, beside the frontier (``frontier.backend: opensearch``), so
that a spout task restarted on another node resumes where the dead one stopped.

The same operations as the SQLite :class:`owler.warc.warc2warc.progress_sqlite.Progress`, over
five indices ``<base>_<kind>`` (``resources/opensearch/warc2warc.json``; ``base`` is
``warc2warc.progress.index``, default ``<status index>_warc2warc``):

``files``
    one document per input file, ``_id`` = its file id (:func:`file_id`, a hash of its name, the
    same on every node). Only the spout task whose share holds the file writes it after
    registration (:class:`owler.task.shard.Shard`), so its updates never race.
``acks``
    the keys of records acked beyond the file's resume point: one document per flush of the
    spout; read when the file is opened again, deleted when the file is done.
``archived``
    one document per commit of a spout task's copy, ``_id`` = ``<output>@<length>``: the output file, its
    committed length after the commit, the input files and record keys the commit archived. A
    commit is this one document, so it is atomic: an output's committed length is the largest
    ``length`` of its commits, and a record is archived if and only if a commit names it.
    A document is deleted once its output is closed and all its input files are done.
``outputs``
    one document per output file once it is closed (``state``, ``committed``).
``problems``
    damage found in input files.

Lookups of archived records come from memory: the records of an input file are loaded once per
task when the task first meets the file, and the task's own commits are added as it makes them.
That is exact because a record is read, and copied, only by the spout task whose share holds
its file (:mod:`owler.warc.warc2warc.copying_feed`): no other task archives it.

Searches read refreshed indices (a refresh is asked for before each), and :meth:`open_files`
checks each file found with a real-time get, so a file done a moment ago is never read again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping
from urllib.parse import quote

import orjson

from owler import conf as C
from owler.constants import WARC2WARC_FILE_STATES as STATES
from owler.osclient import INDEX_NAME, OpenSearchError, OSClient, conn_key
from owler.warc.storage.files import parse_file_name

log = logging.getLogger("owler.warc.progress")

PROGRESS_INDEX_KEY = "warc2warc.progress.index"
KINDS = ("files", "acks", "archived", "outputs", "problems")
_FIELDS = ("id", "name", "size", "etag", "state", "resume_offset", "records", "errors", "error")
_PAGE = 1000
_CACHED_FILES = 64  # input files whose archived keys a task keeps in memory


class ProgressError(RuntimeError):
    """The progress indices cannot be read or written."""


def file_id(name: str) -> int:
    """The id of an input file: 60 bits of the SHA-256 of its name (the same on every node)."""
    return int(hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:15], 16)


def _key_start(key: str) -> int:
    """The member offset a record key starts with (``"123"``, ``"123+2"``)."""
    return int(key.split("+", 1)[0])


def progress_base(conf: Mapping[str, Any]) -> str:
    base = C.get_str(conf, PROGRESS_INDEX_KEY, "")
    return base or f"{conn_key(conf, 'status', INDEX_NAME, 'status')}_warc2warc"


class OpenSearchProgress:
    """One client of the progress indices (module docstring)."""

    def __init__(self, conf: Mapping[str, Any], create: bool = True) -> None:
        self.client = OSClient(conf, "status")
        self.base = progress_base(conf)
        self.index = {k: f"{self.base}_{k}" for k in KINDS}
        self.path = f"OpenSearch indices {self.base}_* at {self.client.address}"
        # the status index's replicas (a lost node must not take the progress's only copy)
        self.replicas = conn_key(conf, "status", "replicas")
        self._archived: OrderedDict[int, set[str]] = OrderedDict()
        self._pruned: dict[int, float] = {}
        try:
            if create:
                self._ensure_indices()
        except OpenSearchError as exc:
            raise ProgressError(f"warc2warc progress in {self.path}: {exc}") from exc

    @classmethod
    def exists(cls, conf: Mapping[str, Any]) -> bool:
        client = OSClient(conf, "status")
        try:
            status, _ = client.request("HEAD", f"/{progress_base(conf)}_files", ok=(200, 404))
            return status == 200
        finally:
            client.close()

    def _ensure_indices(self) -> None:
        body = json.loads(C.resource_path(Path("opensearch") / "warc2warc.json").read_text())
        if self.replicas is not None:
            body["settings"]["index"]["number_of_replicas"] = self.replicas
        for kind in KINDS:
            name = self.index[kind]
            status, _ = self.client.request("HEAD", f"/{name}", ok=(200, 404))
            if status == 200:
                continue
            status, data = self.client.request(
                "PUT", f"/{name}", {"settings": body["settings"],
                                    "mappings": body["mappings"][kind]}, ok=(200, 201, 400))
            err = (data or {}).get("error") if status == 400 else None
            if err and not (isinstance(err, dict)
                            and err.get("type") == "resource_already_exists_exception"):
                raise OpenSearchError(f"cannot create index {name!r}: {err}", 400, data)

    # -- plumbing ---------------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        try:
            return self.client.request(method, path, body, **kw)
        except OpenSearchError as exc:
            raise ProgressError(f"warc2warc progress: {exc}") from exc

    def _bulk(self, lines: list[bytes], conflicts_ok: bool = False) -> list[int]:
        """Send NDJSON actions; each item's status. Raises unless every item succeeded (a 409
        passes with ``conflicts_ok``)."""
        _, data = self._call("POST", "/_bulk", b"\n".join(lines) + b"\n",
                             params={"filter_path": "errors,items.*.status,items.*.error.reason"})
        items = [next(iter(i.values())) for i in (data or {}).get("items", [])]
        statuses = [int(i.get("status", 500)) for i in items]
        bad = [i for i in items if i.get("status", 500) >= 300
               and not (conflicts_ok and i.get("status") == 409)]
        if bad:
            raise ProgressError(f"warc2warc progress: {len(bad)} write(s) failed: "
                                f"{bad[0].get('error', {}).get('reason', bad[0].get('status'))}")
        return statuses

    def _refresh(self, *kinds: str) -> None:
        self._call("POST", "/" + ",".join(self.index[k] for k in kinds) + "/_refresh")

    def _scan(self, kind: str, query: dict, sort: list, source: Any = True) -> Iterator[dict]:
        """Every hit of ``query`` (pages of search_after over ``sort``, which must be unique)."""
        body: dict[str, Any] = {"size": _PAGE, "query": query, "sort": sort, "_source": source}
        while True:
            _, data = self._call("POST", f"/{self.index[kind]}/_search", body)
            hits = (data or {}).get("hits", {}).get("hits", [])
            yield from hits
            if len(hits) < _PAGE:
                return
            body["search_after"] = hits[-1]["sort"]

    def _get(self, kind: str, doc_id: str) -> dict | None:
        status, data = self._call("GET", f"/{self.index[kind]}/_doc/{_path_id(doc_id)}",
                                  ok=(200, 404))
        return data.get("_source") if status == 200 and data.get("found") else None

    def _mget(self, kind: str, ids: list[str]) -> dict[str, dict]:
        if not ids:
            return {}
        _, data = self._call("POST", f"/{self.index[kind]}/_mget", {"ids": ids})
        return {d["_id"]: d["_source"] for d in (data or {}).get("docs", []) if d.get("found")}

    def _row(self, doc_id: Any, src: Mapping[str, Any]) -> dict:
        row = {k: src.get(k) for k in _FIELDS[1:]}
        row["id"] = int(doc_id)
        row["resume_offset"] = int(row["resume_offset"] or 0)
        row["records"] = int(row["records"] or 0)
        row["errors"] = int(row["errors"] or 0)
        return row

    def close(self) -> None:
        self.client.close()

    # -- input files ------------------------------------------------------------------------------
    def register(self, files: Iterable[tuple[str, int | None, str | None]]) -> int:
        """Add input files ``(name, size, etag)`` not known yet; returns how many were new."""
        now = time.time()
        lines = []
        for name, size, etag in files:
            lines.append(b'{"create":{"_index":%s,"_id":"%d"}}' % (
                orjson.dumps(self.index["files"]), file_id(name)))
            lines.append(orjson.dumps({"name": name, "size": size, "etag": etag,
                                       "state": "pending", "resume_offset": 0, "records": 0,
                                       "errors": 0, "updated": now}))
        if not lines:
            return 0
        return sum(1 for s in self._bulk(lines, conflicts_ok=True) if s < 300)

    def file(self, name: str) -> dict | None:
        src = self._get("files", str(file_id(name)))
        return None if src is None else self._row(file_id(name), src)

    def open_files(self) -> list[dict]:
        """Files not done nor failed, by name (each checked with a real-time get)."""
        self._refresh("files")
        ids = [h["_id"] for h in self._scan(
            "files", {"terms": {"state": ["pending", "reading"]}}, [{"name": "asc"}], ["name"])]
        rows = [self._row(i, src) for i, src in self._mget("files", ids).items()
                if src.get("state") in ("pending", "reading")]
        return sorted(rows, key=lambda r: r["name"])

    def set_state(self, file_id_: int, state: str, error: str | None = None) -> None:
        doc: dict[str, Any] = {"state": state, "updated": time.time()}
        if error is not None:
            doc["error"] = error
        self._call("POST", f"/{self.index['files']}/_update/{file_id_}", {"doc": doc})
        if state == "done":  # (a query sees what a refresh made searchable)
            self._refresh("acks")
            self._call("POST", f"/{self.index['acks']}/_delete_by_query",
                       {"query": {"term": {"file_id": file_id_}}},
                       params={"conflicts": "proceed", "refresh": "true"})
            self._prune({"term": {"files": file_id_}})

    def acked_keys(self, file_id_: int) -> set[str]:
        self._refresh("acks")
        keys: set[str] = set()
        for hit in self._scan("acks", {"term": {"file_id": file_id_}}, [{"seq": "asc"}], ["keys"]):
            keys.update(hit["_source"].get("keys") or ())
        return keys

    def record_acks(self, acks: Mapping[int, list[str]], resume: Mapping[int, int]) -> None:
        """Acked keys per file and each file's new resume point, in one bulk request (the keys
        first: a resume point is never ahead of what is recorded)."""
        now = time.time()
        lines = []
        for fid, keys in acks.items():
            if keys:
                lines.append(b'{"index":{"_index":%s}}' % orjson.dumps(self.index["acks"]))
                lines.append(orjson.dumps({"file_id": fid, "keys": list(keys),
                                           "max": max(_key_start(k) for k in keys),
                                           "seq": time.time_ns(), "time": now}))
        for fid in set(acks) | set(resume):
            lines.append(b'{"update":{"_index":%s,"_id":"%d"}}' % (
                orjson.dumps(self.index["files"]), fid))
            lines.append(orjson.dumps({"script": {"lang": "painless", "params": {
                "n": len(acks.get(fid, ())), "r": resume.get(fid, 0), "t": now}, "source": (
                    "ctx._source.records += params.n; ctx._source.updated = params.t;"
                    " if (params.r > ctx._source.resume_offset)"
                    " { ctx._source.resume_offset = params.r }")}}))
        if lines:
            self._bulk(lines)
        # ack documents wholly before a resume point are never read again (at most every 30 s)
        for fid, offset in resume.items():
            if time.time() - self._pruned.get(fid, 0.0) >= 30:
                self._pruned[fid] = time.time()
                self._call("POST", f"/{self.index['acks']}/_delete_by_query", {"query": {
                    "bool": {"filter": [{"term": {"file_id": fid}},
                                        {"range": {"max": {"lt": offset}}}]}}},
                    params={"conflicts": "proceed"})

    def add_problem(self, file_id_: int, offset: int, message: str) -> None:
        row = self._get("files", str(file_id_)) or {}
        self._bulk([
            b'{"index":{"_index":%s}}' % orjson.dumps(self.index["problems"]),
            orjson.dumps({"file_id": file_id_, "file": row.get("name", ""), "offset": offset,
                          "message": message[:1000], "time": time.time()}),
            b'{"update":{"_index":%s,"_id":"%d"}}' % (orjson.dumps(self.index["files"]), file_id_),
            orjson.dumps({"script": {"lang": "painless",
                                     "source": "ctx._source.errors += 1"}})])

    # -- the copies ----------------------------------------------------------------------------
    def archived(self, file_id_: int, key: str) -> bool:
        keys = self._archived.get(file_id_)
        if keys is None:
            keys = self._load_archived(file_id_)
        else:
            self._archived.move_to_end(file_id_)
        return key in keys

    def _load_archived(self, file_id_: int) -> set[str]:
        self._refresh("archived")
        keys: set[str] = set()
        field = str(file_id_)
        for hit in self._scan("archived", {"term": {"files": file_id_}},
                              [{"output": "asc"}, {"length": "asc"}], [f"keys.{field}"]):
            keys.update((hit["_source"].get("keys") or {}).get(field) or ())
        self._archived[file_id_] = keys
        while len(self._archived) > _CACHED_FILES:
            self._archived.popitem(last=False)
        return keys

    def commit_archived(self, records: list[tuple[int, str, str]], output: str, length: int,
                        partition: str) -> None:
        """Records ``(file_id, key, output)`` written, and ``output`` committed up to ``length``:
        one document (atomic)."""
        by_file: dict[str, list[str]] = {}
        for fid, key, _ in records:
            by_file.setdefault(str(fid), []).append(key)
        doc = {"output": output, "partition": str(partition), "length": length,
               "files": [int(f) for f in by_file], "keys": by_file, "time": time.time()}
        self._call("PUT", f"/{self.index['archived']}/_doc/{_path_id(f'{output}@{length}')}", doc)
        for fid, keys in by_file.items():
            known = self._archived.get(int(fid))
            if known is not None:
                known.update(keys)

    def output(self, name: str) -> dict | None:
        done = self._get("outputs", name)
        self._refresh("archived")
        _, data = self._call("POST", f"/{self.index['archived']}/_search", {
            "size": 1, "query": {"term": {"output": name}}, "sort": [{"length": "desc"}],
            "_source": ["length", "partition"]})
        hits = (data or {}).get("hits", {}).get("hits", [])
        if not hits and done is None:
            return None
        committed = max(([hits[0]["_source"]["length"]] if hits else [])
                        + [(done or {}).get("committed", 0)])
        partition = (done or {}).get("partition") or (hits[0]["_source"]["partition"]
                                                       if hits else "")
        return {"name": name, "committed": int(committed),
                "state": (done or {}).get("state", "open"), "partition": partition}

    def set_output_state(self, name: str, state: str, committed: int | None = None) -> None:
        parts = parse_file_name(name) or {}
        doc = {"name": name, "partition": str(parts.get("partition", "")), "state": state,
               "updated": time.time()}
        if committed is not None:
            doc["committed"] = committed
        self._call("PUT", f"/{self.index['outputs']}/_doc/{_path_id(name)}", doc)
        if state != "open":
            self._prune({"term": {"output": name}})

    def _prune(self, query: dict) -> None:
        """Delete the commit documents matching ``query`` whose output is closed and whose input
        files are all done (module docstring); called when either happens."""
        self._refresh("archived")
        hits = list(self._scan("archived", query, [{"output": "asc"}, {"length": "asc"}],
                               ["output", "files"]))
        if not hits:
            return
        files = self._mget("files", sorted({str(f) for h in hits
                                            for f in h["_source"].get("files") or ()}))
        outputs = self._mget("outputs", sorted({h["_source"]["output"] for h in hits}))
        gone = [h["_id"] for h in hits
                if h["_source"]["output"] in outputs
                and all(files.get(str(f), {}).get("state") == "done"
                        for f in h["_source"].get("files") or ())]
        if gone:
            self._bulk([b'{"delete":{"_index":%s,"_id":%s}}' % (
                orjson.dumps(self.index["archived"]), orjson.dumps(i)) for i in gone])

    # -- reports ------------------------------------------------------------------------------------
    def summary(self) -> dict:
        self._refresh("files", "outputs", "problems")
        _, data = self._call("POST", f"/{self.index['files']}/_search", {
            "size": 0, "aggs": {"states": {"terms": {"field": "state", "size": 10}},
                                "records": {"sum": {"field": "records"}},
                                "errors": {"sum": {"field": "errors"}}}})
        aggs = (data or {}).get("aggregations", {})
        states = {s: 0 for s in STATES}
        for b in aggs.get("states", {}).get("buckets", []):
            states[b["key"]] = b["doc_count"]
        _, data = self._call("POST", f"/{self.index['files']}/_search", {
            "size": 20, "query": {"term": {"state": "failed"}}, "sort": [{"name": "asc"}],
            "_source": ["name", "error"]})
        failed = [{"file": h["_source"]["name"], "error": h["_source"].get("error")}
                  for h in data["hits"]["hits"]]
        _, data = self._call("POST", f"/{self.index['problems']}/_search", {
            "size": 20, "sort": [{"time": "desc"}], "_source": ["file", "offset", "message"]})
        problems = [{"file": h["_source"]["file"], "offset": h["_source"]["offset"],
                     "message": h["_source"]["message"]} for h in data["hits"]["hits"]]
        _, data = self._call("POST", f"/{self.index['outputs']}/_search", {
            "size": 0, "aggs": {"states": {"terms": {"field": "state", "size": 10}}}})
        outputs = {b["key"]: b["doc_count"]
                   for b in data.get("aggregations", {}).get("states", {}).get("buckets", [])}
        return {"files": states, "records": int(aggs.get("records", {}).get("value") or 0),
                "errors": int(aggs.get("errors", {}).get("value") or 0), "failed": failed,
                "problems": problems, "outputs": outputs}


def _path_id(doc_id: str) -> str:
    """A document id as a URL path segment."""
    return quote(doc_id, safe="")
