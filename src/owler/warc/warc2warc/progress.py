"""The warc2warc pipeline's progress store, and which one a run uses.

Two stores with the same operations: one SQLite file shared by the spout tasks of one node
(:class:`owler.warc.warc2warc.progress_sqlite.Progress`), and five OpenSearch indices beside the
frontier (:class:`owler.warc.warc2warc.progress_opensearch.OpenSearchProgress`), so that a task
restarted on another node resumes where the dead one stopped. :func:`open_progress` opens the one
the configuration names: OpenSearch with ``frontier.backend: opensearch``, SQLite otherwise;
``warc2warc.progress.backend`` (``sqlite`` | ``opensearch``) overrides.
"""

from __future__ import annotations

from typing import Any, Mapping

from owler import conf as C
from owler.constants import FRONTIER_BACKEND_KEY
from owler.warc.warc2warc.progress_sqlite import Progress, progress_path

BACKEND_KEY = "warc2warc.progress.backend"


def progress_backend(conf: Mapping[str, Any]) -> str:
    frontier = (C.get_str(conf, FRONTIER_BACKEND_KEY, "sqlite") or "sqlite").strip().lower()
    backend = (C.get_str(conf, BACKEND_KEY, "")
               or ("opensearch" if frontier == "opensearch" else "sqlite")).strip().lower()
    if backend not in ("sqlite", "opensearch"):
        raise C.ConfError(f"{BACKEND_KEY}: unknown backend {backend!r}; expected 'sqlite' or "
                          "'opensearch'")
    return backend


def open_progress(conf: Mapping[str, Any], create: bool = True):
    """The progress store ``conf`` names (module docstring); ``None`` when ``create`` is false
    and no warc2warc run has made one."""
    if progress_backend(conf) == "opensearch":
        from owler.warc.warc2warc.progress_opensearch import OpenSearchProgress

        if not create and not OpenSearchProgress.exists(conf):
            return None
        return OpenSearchProgress(conf)
    path = progress_path(conf)
    if not create and not path.exists():
        return None
    return Progress(path)
