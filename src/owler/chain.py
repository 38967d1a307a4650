"""Plug-in chains configured by a JSON file in StormCrawler's format: the URL filters
(``urlfilters.json``, :mod:`owler.filters`) and the parse filters (``parsefilters.json``,
:mod:`owler.parse.filters`).

The file is one JSON object whose single key names the chain (StormCrawler 3.x's or 2.x's class
name of it) and holds a list of ``{"class": ..., "name": ..., "params": {...}}`` entries. ``class``
is either a StormCrawler class name, mapped to this project's port of it, or a Python dotted path.
Every entry is built as ``cls()``, given its ``name`` (the class's short name when missing) and
configured with ``configure(conf, params)``; a failure names the entry and is fatal (the topology
must not run with half a chain). An entry without ``class`` is logged and left out, as
StormCrawler does.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from owler.conf import ConfError

log = logging.getLogger(__name__)

__all__ = ["ChainSpec", "load_class", "read_chain_file", "build_chain"]


class ChainSpec:
    """What tells one kind of chain from another: its root keys, the StormCrawler package
    prefixes of its classes and their ports, the method every member must have, and the error
    type and wording of its messages."""

    def __init__(self, root_keys: Sequence[str], prefixes: Sequence[str],
                 ported: Mapping[str, str], method: str, error: type[ConfError], what: str):
        self.root_keys = tuple(root_keys)
        self.prefixes = tuple(prefixes)
        self.ported = dict(ported)
        self.method = method
        self.error = error
        self.what = what  # "URL filters", "parse filters"


def load_class(name: str, spec: ChainSpec) -> type:
    """The class for a StormCrawler class name or a Python dotted path. Raises ``ValueError``."""
    dotted = name
    for prefix in spec.prefixes:
        if name.startswith(prefix):
            short = name[len(prefix):]
            if short not in spec.ported:
                raise ValueError(f"StormCrawler filter {name} is not ported "
                                 f"(known: {', '.join(sorted(spec.ported))})")
            dotted = spec.ported[short]
            break
    module_name, _, cls_name = dotted.rpartition(".")
    if not module_name:
        raise ValueError(f"{name!r} is not a dotted class path")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module {module_name}: {exc}") from exc
    cls = getattr(module, cls_name, None)
    if not isinstance(cls, type):
        raise ValueError(f"module {module_name} has no class {cls_name}")
    return cls


def read_chain_file(path: str | Path, spec: ChainSpec) -> Any:
    """The parsed JSON of a chain file; ``spec.error`` naming the file when it cannot be read."""
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise spec.error(f"cannot read {spec.what} file {p}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise spec.error(f"invalid JSON in {spec.what} file {p}: {exc}") from exc


def build_chain(data: Any, conf: Mapping[str, Any], spec: ChainSpec) -> list:
    """The configured members of a parsed chain document, in file order."""
    if not isinstance(data, dict):
        raise spec.error("expected a JSON object with key " + spec.root_keys[0])
    entries = None
    for key in spec.root_keys:
        if key in data:
            entries = data[key]
            break
    if entries is None:
        raise spec.error(f"no {spec.root_keys[0]} key in the JSON object (keys: {', '.join(data)})")
    if not isinstance(entries, list):
        raise spec.error(f"{spec.root_keys[0]} must hold a list of filters")
    members = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise spec.error(f"filter entry #{i} is not a JSON object: {entry!r}")
        class_name = entry.get("class")
        name = entry.get("name")
        if not class_name:
            log.warning("%s entry #%d (%s) has no 'class': skipped", spec.what, i,
                        name or "unnamed")
            continue
        class_name = str(class_name).strip()
        name = str(name) if name else class_name.rpartition(".")[2]
        params = entry.get("params") or {}
        try:
            if not isinstance(params, dict):
                raise ValueError("'params' must be a JSON object")
            member = load_class(class_name, spec)()
            member.name = name
            member.configure(conf, params)
        except Exception as exc:  # any setup failure is fatal and names the entry
            raise spec.error(f"Can't setup {name}[{class_name}]: {exc}") from exc
        if not callable(getattr(member, spec.method, None)):
            raise spec.error(f"Can't setup {name}[{class_name}]: it has no {spec.method}() method")
        members.append(member)
    return members
