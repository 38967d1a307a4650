"""The warc2warc pipeline's progress, in one SQLite file shared by its spout and writer tasks.

Tables

``files(id, name, size, etag, state, resume_offset, records, errors, error, updated)``
    one row per input file (``name`` = ``s3://bucket/key`` or an absolute path). ``state``:
    ``pending`` (not started), ``reading``, ``done`` (every record acked, or the file ended in
    damage that was recorded), ``failed`` (could not be read at all; ``error`` says why).
    ``resume_offset``: a member boundary before which every record is acked, where a restarted
    spout starts reading again. ``records``: records acked; ``errors``: problems recorded.
``acked(file_id, key)``
    records acked beyond ``resume_offset`` (skipped when the file is read again); pruned as the
    resume point moves on, deleted when the file is done.
``archived(file_id, key, output)``
    records the writer has copied, with the output file they went to: a record replayed by Storm
    after it was archived is acknowledged without being written again.
``outputs(name, committed, state, partition)``
    the writer's output files: ``committed`` = the length up to which every record is recorded in
    ``archived`` (a ``.open`` file left by a crash is cut back to it, so the records after it, never
    recorded, are written again once and only once); ``state``: ``open``, ``closed``,
    ``uploaded``.
``problems(file_id, offset, message, time)``
    damage found in input files (truncation, corrupt members, digest mismatches...): what
    ``owler status`` reports.

Durability: WAL, ``synchronous=NORMAL`` (a commit survives the crash of any process), writers wait
up to 30 s for one another. Config key: ``warc2warc.progress.path``
(default ``<owler.work.dir>/warc2warc.sqlite``).

That file is on one node's disk; :func:`owler.warc.warc2warc.progress.open_progress` chooses
between it and the same operations in OpenSearch.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from owler import conf as C
from owler.constants import WARC2WARC_FILE_STATES as STATES, WARC2WARC_PROGRESS_KEY
from owler.frontier.sqlite import _Transaction

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS files (
        id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, size INTEGER, etag TEXT,
        state TEXT NOT NULL DEFAULT 'pending', resume_offset INTEGER NOT NULL DEFAULT 0,
        records INTEGER NOT NULL DEFAULT 0, errors INTEGER NOT NULL DEFAULT 0, error TEXT,
        updated REAL NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS acked (file_id INTEGER NOT NULL, key TEXT NOT NULL, "
    "PRIMARY KEY (file_id, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS archived (file_id INTEGER NOT NULL, key TEXT NOT NULL, "
    "output TEXT NOT NULL, PRIMARY KEY (file_id, key)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS outputs (name TEXT PRIMARY KEY, committed INTEGER NOT NULL, "
    "state TEXT NOT NULL, partition TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS problems (file_id INTEGER NOT NULL, offset INTEGER NOT NULL, "
    "message TEXT NOT NULL, time REAL NOT NULL)",
]


def progress_path(conf: Mapping[str, Any]) -> Path:
    conf = C.absolute_paths(dict(conf))
    path = C.get_str(conf, WARC2WARC_PROGRESS_KEY, "")
    if path:
        return Path(path)
    return Path(C.get_str(conf, "owler.work.dir", ".work")) / "warc2warc.sqlite"


class Progress:
    """One connection to the progress file (one per thread/process)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(self.path), timeout=30, isolation_level=None,
                                    check_same_thread=False)
        self.conn.execute("PRAGMA busy_timeout = 30000")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        with self.tx():
            for stmt in _SCHEMA:
                self.conn.execute(stmt)

    def tx(self) -> _Transaction:
        return _Transaction(self.conn)

    def close(self) -> None:
        self.conn.close()

    # -- input files ------------------------------------------------------------------------------
    def register(self, files: Iterable[tuple[str, int | None, str | None]]) -> int:
        """Add input files ``(name, size, etag)`` not known yet; returns how many were new."""
        now = time.time()
        with self.tx():
            before = self.conn.total_changes
            self.conn.executemany(
                "INSERT OR IGNORE INTO files (name, size, etag, updated) VALUES (?, ?, ?, ?)",
                [(n, s, e, now) for n, s, e in files])
            return self.conn.total_changes - before

    def file(self, name: str) -> dict | None:
        row = self.conn.execute(
            "SELECT id, name, size, etag, state, resume_offset, records, errors, error "
            "FROM files WHERE name = ?", (name,)).fetchone()
        return None if row is None else dict(zip(
            ("id", "name", "size", "etag", "state", "resume_offset", "records", "errors", "error"),
            row))

    def open_files(self) -> list[dict]:
        """Files not done nor failed, by name."""
        rows = self.conn.execute(
            "SELECT name FROM files WHERE state IN ('pending', 'reading') ORDER BY name").fetchall()
        return [self.file(r[0]) for r in rows]

    def set_state(self, file_id: int, state: str, error: str | None = None) -> None:
        with self.tx():
            self.conn.execute("UPDATE files SET state = ?, error = COALESCE(?, error), updated = ? "
                              "WHERE id = ?", (state, error, time.time(), file_id))
            if state == "done":
                self.conn.execute("DELETE FROM acked WHERE file_id = ?", (file_id,))

    def acked_keys(self, file_id: int) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT key FROM acked WHERE file_id = ?",
                                                (file_id,))}

    def record_acks(self, acks: Mapping[int, list[str]], resume: Mapping[int, int]) -> None:
        """Acked keys per file and each file's new resume point, in one transaction."""
        with self.tx():
            for file_id, keys in acks.items():
                # a key recorded already (an ack repeated) is not counted again
                new = self.conn.executemany(
                    "INSERT OR IGNORE INTO acked (file_id, key) VALUES (?, ?)",
                    [(file_id, k) for k in keys]).rowcount
                self.conn.execute("UPDATE files SET records = records + ?, updated = ? "
                                  "WHERE id = ?", (new, time.time(), file_id))
            for file_id, offset in resume.items():
                self.conn.execute("UPDATE files SET resume_offset = MAX(resume_offset, ?) "
                                  "WHERE id = ?", (offset, file_id))
                # keys of members before the resume point are never looked up again
                self.conn.execute(
                    "DELETE FROM acked WHERE file_id = ? AND CAST(key AS INTEGER) < ?",
                    (file_id, offset))

    def add_problem(self, file_id: int, offset: int, message: str) -> None:
        with self.tx():
            self.conn.execute("INSERT INTO problems (file_id, offset, message, time) "
                              "VALUES (?, ?, ?, ?)", (file_id, offset, message[:1000], time.time()))
            self.conn.execute("UPDATE files SET errors = errors + 1 WHERE id = ?", (file_id,))

    # -- the writer ---------------------------------------------------------------------------------
    def archived(self, file_id: int, key: str) -> bool:
        return self.conn.execute("SELECT 1 FROM archived WHERE file_id = ? AND key = ?",
                                 (file_id, key)).fetchone() is not None

    def commit_archived(self, records: list[tuple[int, str, str]], output: str, length: int,
                        partition: str) -> None:
        """Records ``(file_id, key, output)`` written, and ``output`` committed up to ``length``."""
        with self.tx():
            self.conn.executemany(
                "INSERT OR IGNORE INTO archived (file_id, key, output) VALUES (?, ?, ?)", records)
            self.conn.execute(
                "INSERT INTO outputs (name, committed, state, partition) VALUES (?, ?, 'open', ?) "
                "ON CONFLICT (name) DO UPDATE SET committed = excluded.committed",
                (output, length, partition))

    def output(self, name: str) -> dict | None:
        row = self.conn.execute("SELECT name, committed, state, partition FROM outputs "
                                "WHERE name = ?", (name,)).fetchone()
        return None if row is None else dict(zip(("name", "committed", "state", "partition"), row))

    def set_output_state(self, name: str, state: str, committed: int | None = None) -> None:
        with self.tx():
            self.conn.execute("UPDATE outputs SET state = ?, committed = COALESCE(?, committed) "
                              "WHERE name = ?", (state, committed, name))

    # -- reports ------------------------------------------------------------------------------------
    def summary(self) -> dict:
        states = {s: 0 for s in STATES}
        for state, n in self.conn.execute("SELECT state, COUNT(*) FROM files GROUP BY state"):
            states[state] = n
        records, errors = self.conn.execute(
            "SELECT COALESCE(SUM(records), 0), COALESCE(SUM(errors), 0) FROM files").fetchone()
        failed = [{"file": n, "error": e} for n, e in self.conn.execute(
            "SELECT name, error FROM files WHERE state = 'failed' ORDER BY name LIMIT 20")]
        problems = [{"file": n, "offset": o, "message": m} for n, o, m in self.conn.execute(
            "SELECT f.name, p.offset, p.message FROM problems p JOIN files f ON f.id = p.file_id "
            "ORDER BY p.time DESC LIMIT 20")]
        outputs = dict(self.conn.execute("SELECT state, COUNT(*) FROM outputs GROUP BY state"))
        return {"files": states, "records": records, "errors": errors, "failed": failed,
                "problems": problems, "outputs": outputs}
