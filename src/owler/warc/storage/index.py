"""The CDXJ index beside every WARC file a writer finishes: ``<WARC file name>.cdxj``, the file's
captures sorted as pywb reads them (:mod:`owler.warc.format.cdxj`), written as the records are.

While a local file is written, each indexed record's line is appended to a companion,
``<name>.cdxj.part``, after the record itself (flushed like the WARC's bytes, never fsynced: the
WARC file is the truth, the companion only spares re-reading it). When the file is finished
(:meth:`LocalIndex.finish`, from the writer's rotation or close) the lines are sorted and written
as ``<name>.cdxj`` through a temporary file, fsynced and renamed, *before* the WARC file gets its
final name, so that a finished WARC file always has its index; then the companion goes. A
companion that missed a line (a write to it failed) is not trusted: the index is then read off the
WARC file's own records (:func:`rebuild`).

After a crash (:func:`recover_index`, from :func:`owler.warc.storage.files.recover_open_files`):
the recovered file's index is its companion's lines of the records it still holds, when they are
exactly the indexed records the recovery's scan found (same offsets and lengths), else rebuilt
from the file; a companion whose WARC file is gone (deleted: it held no capture; or kept as
``.corrupt``) is removed, and one whose WARC file is finished but has no index yet (the index
could not be written when it was closed) becomes that index (:func:`finish_leftovers`).

A file streamed to S3 (:mod:`owler.warc.storage.s3_stream`) keeps its lines in memory
(:class:`MemoryIndex`): nothing goes to the node's disk; the stream writer stores the index as an
object beside the file's. The writer cuts an index back with its file
(:meth:`LocalIndex.cut_back`: warc2warc's copy drops records it could not record).

Config key: ``warc.cdxj`` (true): false writes no index, no companion.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from owler import conf as C
from owler.warc.format import cdxj

log = logging.getLogger("owler.warc.index")

WARC_CDXJ = "warc.cdxj"
#: the lines of a file being written (not ``.open``: that names the WARC files being written)
COMPANION_SUFFIX = cdxj.INDEX_SUFFIX + ".part"
_TMP_SUFFIX = cdxj.INDEX_SUFFIX + ".tmp"


def indexing(conf: Mapping[str, Any]) -> bool:
    """Whether WARC files get their CDXJ index (``warc.cdxj``, true by default)."""
    return C.get_bool(conf, WARC_CDXJ, True)


def _end(line: str) -> tuple[int, int]:
    """(offset, length) of the record an index line names."""
    fields = cdxj.line_fields(line)[2]
    try:
        return int(fields["offset"]), int(fields["length"])
    except (KeyError, ValueError):
        raise cdxj.CDXJError(f"an index line without offset or length: {line[:200]!r}") from None


class MemoryIndex:
    """The lines of a file being written, in memory (a file streamed to S3)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lines: list[str] = []

    def add(self, lines: Iterable[str]) -> None:
        self.lines.extend(lines)

    def cut_back(self, length: int) -> None:
        """Forget the lines of records that do not end within the first ``length`` bytes."""
        self.lines = [line for line in self.lines if sum(_end(line)) <= length]

    def close(self) -> None:
        """Nothing to release."""

    def data(self, length: int | None = None) -> bytes:
        """The index's bytes (sorted); of the records within ``length`` bytes when given."""
        if length is not None:
            self.cut_back(length)
        return cdxj.sorted_lines(self.lines)


class LocalIndex:
    """The index of a local WARC file being written: the companion file, then the index."""

    def __init__(self, directory: Path, name: str) -> None:
        self.name = name
        self.companion = directory / (name + COMPANION_SUFFIX)
        self.final = directory / cdxj.index_name(name)
        self.broken: str | None = None  # why the companion is missing lines
        self._fh = None
        try:
            self._fh = open(self.companion, "wb")
        except OSError as exc:  # the index is read off the file when it is finished
            self.broken = f"{type(exc).__name__}: {exc}"
            log.warning("cannot open the index companion %s: %s", self.companion, self.broken)

    def add(self, lines: Iterable[str]) -> None:
        """Append lines to the companion (flushed). A failed write is logged and the companion
        no longer trusted: the index will be read off the WARC file when it is finished."""
        if self.broken is not None:
            return
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        if not data:
            return
        try:
            self._fh.write(data)
            self._fh.flush()
        except OSError as exc:
            self.broken = f"{type(exc).__name__}: {exc}"
            log.warning("index companion %s: %s; the index of %s will be read off the file",
                        self.companion, self.broken, self.name)

    def cut_back(self, length: int) -> None:
        """Drop the lines of records that do not end within the file's first ``length`` bytes
        (the writer cut the file back)."""
        if self.broken is not None:
            return
        try:
            self._fh.flush()
            keep = [line for line in _read_lines(self.companion) if sum(_end(line)) <= length]
            self._fh.seek(0)
            self._fh.truncate(0)
            self._fh.write("".join(line + "\n" for line in keep).encode("utf-8"))
            self._fh.flush()
        except (OSError, cdxj.CDXJError) as exc:
            self.broken = f"{type(exc).__name__}: {exc}"
            log.warning("index companion %s: %s", self.companion, self.broken)

    def finish(self, warc_path: Path) -> Path | None:
        """Write ``<name>.cdxj`` (sorted, atomically) from the companion, or from the records of
        ``warc_path`` (the WARC file, still under its ``.open`` name) when the companion is not
        trusted; remove the companion. The index's path; None when it could not be written
        (logged: the companion stays, and the next recovery makes the index from the file)."""
        self.close()
        try:
            if self.broken is None:
                lines = _read_lines(self.companion)
            else:
                lines = rebuild(warc_path, self.name)
            write_index(self.final, lines)
        except (OSError, cdxj.CDXJError) as exc:
            log.error("cannot write the CDXJ index of %s (%s: %s); left for the next start",
                      self.name, type(exc).__name__, exc)
            return None
        self.companion.unlink(missing_ok=True)
        return self.final

    def close(self) -> None:
        if self._fh is not None and not self._fh.closed:
            try:
                self._fh.close()
            except OSError as exc:  # a flush that fails: the lines written may be short
                self.broken = self.broken or f"{type(exc).__name__}: {exc}"

    def discard(self) -> None:
        """The WARC file was never written: no index."""
        self.close()
        self.companion.unlink(missing_ok=True)


def _read_lines(path: Path) -> list[str]:
    """The whole lines of a companion (a last line without its newline was cut by a crash)."""
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        data = data[:data.rfind(b"\n") + 1]
    return data.decode("utf-8").splitlines()


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable (the writer's files and indices);
    a file system that cannot sync a folder is left as it is."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_index(path: Path, lines: Iterable[str]) -> Path:
    """``lines`` sorted into ``path`` through a temporary file, fsynced, renamed over any older
    index of that name, and the folder fsynced."""
    tmp = path.with_name(path.name[: -len(cdxj.INDEX_SUFFIX)] + _TMP_SUFFIX)
    data = cdxj.sorted_lines(lines)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return path


def rebuild(warc_path: Path, name: str) -> list[str]:
    """The index lines of a WARC file read off its records (``name``: its final name, what the
    lines call it)."""
    with open(warc_path, "rb") as f:
        return list(cdxj.file_lines(f, name))


def recover_index(warc_path: Path, name: str, valid_end: int,
                  indexed: Iterable[tuple[int, int]] | None) -> Path | None:
    """The index of a WARC file being recovered (``warc_path``, still ``.open``, cut to its
    first ``valid_end`` bytes, its whole records; ``name`` its final name; ``indexed`` the
    (offset, length) of the members holding indexed records that the recovery's scan found): the
    companion's lines of records within ``valid_end`` when they name exactly those records, else
    (and always when ``indexed`` is None: no scan) the file's own (module docstring). Written
    before the WARC file is renamed; the companion removed. None (logged) when no index could be
    written."""
    directory = warc_path.parent
    companion = directory / (name + COMPANION_SUFFIX)
    final = directory / cdxj.index_name(name)
    want = sorted(indexed) if indexed is not None else None
    lines = None
    if want is not None and companion.exists():
        try:
            got = _read_lines(companion)
            kept = [line for line in got if sum(_end(line)) <= valid_end]
            if sorted(_end(line) for line in kept) == want:
                lines = kept
            else:
                log.warning("WARC recovery: the index companion of %s names %d of its %d indexed "
                            "records; reading the index off the file", name,
                            len({_end(line) for line in kept} & set(want)), len(want))
        except (OSError, UnicodeDecodeError, cdxj.CDXJError) as exc:
            log.warning("WARC recovery: the index companion of %s is unreadable (%s); reading "
                        "the index off the file", name, exc)
    try:
        if lines is None:
            lines = rebuild(warc_path, name)
        write_index(final, lines)
    except (OSError, cdxj.CDXJError) as exc:
        log.error("WARC recovery: cannot write the CDXJ index of %s (%s: %s)", name,
                  type(exc).__name__, exc)
        return None
    companion.unlink(missing_ok=True)
    return final


def drop(directory: Path, name: str) -> None:
    """Remove what indexed a WARC file that is no more (deleted, or kept as corrupt)."""
    for path in (directory / (name + COMPANION_SUFFIX), directory / cdxj.index_name(name)):
        path.unlink(missing_ok=True)


def finish_leftovers(directory: Path, ours) -> list[Path]:
    """Indices of finished WARC files that a crash or a failed write left as companions only:
    each made from its WARC file's records (``ours(final WARC name)``: whether this writer may
    touch it). Companions of WARC files still ``.open`` are the recovery's; those of files that
    are gone are removed. Returns the indices written."""
    done = []
    for companion in sorted(directory.glob("*" + COMPANION_SUFFIX)):
        name = companion.name[: -len(COMPANION_SUFFIX)]
        if not ours(name):
            continue
        warc = directory / name
        if (directory / (name + ".open")).exists():
            continue
        if not warc.exists():
            log.warning("WARC recovery: %s indexes no WARC file; removed", companion)
            companion.unlink(missing_ok=True)
            continue
        try:
            done.append(write_index(directory / cdxj.index_name(name), rebuild(warc, name)))
        except (OSError, cdxj.CDXJError) as exc:
            log.error("WARC recovery: cannot write the CDXJ index of %s (%s: %s)", name,
                      type(exc).__name__, exc)
            continue
        companion.unlink(missing_ok=True)
        log.warning("WARC recovery: wrote the missing CDXJ index of %s", name)
    return done


def ensure_index(warc_path: Path) -> Path | None:
    """``<name>.cdxj`` beside a finished local WARC file, made from its records when it is
    missing (a file from before ``warc.cdxj``, or one whose index could not be written): for
    the uploader, which deletes the WARC file once uploaded. None (logged) when it cannot be
    made."""
    final = warc_path.with_name(cdxj.index_name(warc_path.name))
    if final.exists():
        return final
    try:
        write_index(final, rebuild(warc_path, warc_path.name))
    except (OSError, cdxj.CDXJError) as exc:
        log.error("cannot index %s (%s: %s)", warc_path, type(exc).__name__, exc)
        return None
    warc_path.with_name(warc_path.name + COMPANION_SUFFIX).unlink(missing_ok=True)
    return final
