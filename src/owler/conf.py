"""Crawler configuration: StormCrawler key names, layered YAML, strict typed getters.

Layers, lowest first: ``resources/crawler-conf.yaml`` (every key with its default and a comment),
an optional user YAML file (``--conf FILE``), then ``-o key=value`` overrides. The result is a flat
``dict`` that also travels as the Storm topology conf, so bolts read the very same keys.

Getters follow StormCrawler's ``ConfUtils``: ``get_int(conf, key, default)`` and friends. They
raise :class:`ConfError` on values of the wrong type instead of guessing.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from owler.constants import (BLACKLIST_DIR_KEY, METRICS_SQLITE_PATH_KEY,
                             MULTILANG_SERIALIZER_KEY, PARSEFILTERS_FILE_KEY, PARSER_GROUPING_KEY,
                             POLITENESS_FILE_KEY, RISK_LISTS_DIR_KEY, SQLITE_PATH_KEY,
                             TAKEDOWN_FILE_KEY, URLFILTERS_FILE_KEY, WARC2WARC_INPUT_KEY,
                             WARC2WARC_PROGRESS_KEY, WARC_DIR_KEY)

#: Where the default configuration lives, relative to the project root.
DEFAULT_CONF_NAME = "crawler-conf.yaml"


class ConfError(ValueError):
    """A configuration file or value is invalid. The message says which key or file."""


def project_root() -> Path:
    """The project root: ``OWLER_HOME`` or the folder holding ``resources/crawler-conf.yaml``.

    Inside a Storm worker the code runs from the topology jar's ``resources/`` folder, where the
    project's ``resources/`` are packed as ``resources/resources``; both layouts are searched.
    """
    env = os.environ.get("OWLER_HOME")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    return root_among([Path.cwd(), *here.parents]) or here.parents[2]


def root_among(folders: Iterable[Path]) -> Path | None:
    """The first of ``folders`` that holds ``resources/crawler-conf.yaml``, except a checkout's
    ``src/``, whose ``resources`` is a link to the project's (it is there so that the topology
    jar, built from ``src/``, carries them): from a directory outside the project, the code's
    own parents are searched, and ``src/`` comes before the root."""
    for folder in folders:
        res = folder / "resources"
        if not (res / DEFAULT_CONF_NAME).is_file():
            continue
        if res.is_symlink() and res.resolve() == (folder.parent / "resources").resolve():
            continue
        return folder
    return None


def resource_path(name: str | os.PathLike, root: Path | None = None) -> Path:
    """Resolve a resource file name: absolute paths stay, others are looked up under ``resources/``
    of the project root, then relative to the current directory."""
    p = Path(name)
    if p.is_absolute():
        return p
    base = root or project_root()
    for cand in (base / "resources" / p, base / p, Path.cwd() / p):
        if cand.exists():
            return cand
    return base / "resources" / p


def load_yaml_file(path: str | os.PathLike) -> dict[str, Any]:
    """Load one YAML map of crawler keys. A top-level ``config:`` key (StormCrawler's layout) is
    unwrapped. Raises :class:`ConfError` with the file name on any problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfError(f"cannot read configuration file {p}: {exc.strerror or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfError(f"invalid YAML in {p}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfError(f"{p}: expected a map of configuration keys, got {type(data).__name__}")
    if set(data) == {"config"} and isinstance(data["config"], dict):
        data = data["config"]
    return {str(k): v for k, v in data.items()}


def parse_override(item: str) -> tuple[str, Any]:
    """``key=value`` → (key, YAML-typed value): ``-o fetcher.threads.number=50`` gives an int."""
    if "=" not in item:
        raise ConfError(f"override {item!r} is not of the form key=value")
    key, _, raw = item.partition("=")
    key = key.strip()
    if not key:
        raise ConfError(f"override {item!r} has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def load_conf(
    conf_file: str | os.PathLike | None = None,
    overrides: Iterable[str] | Mapping[str, Any] | None = None,
    root: Path | None = None,
) -> dict[str, Any]:
    """The layered crawler configuration (defaults < ``conf_file`` < ``overrides``)."""
    base = root or project_root()
    conf = load_yaml_file(base / "resources" / DEFAULT_CONF_NAME)
    if conf_file:
        conf.update(load_yaml_file(conf_file))
    if overrides:
        if isinstance(overrides, Mapping):
            conf.update({str(k): v for k, v in overrides.items()})
        else:
            for item in overrides:
                k, v = parse_override(item)
                conf[k] = v
    return conf


_MISSING = object()


def _get(conf: Mapping[str, Any], key: str, default: Any) -> Any:
    value = conf.get(key, _MISSING)
    if value is _MISSING or value is None:
        return default
    return value


def get_str(conf: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = _get(conf, key, default)
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        raise ConfError(f"{key}: expected a string, got {type(value).__name__}")
    return str(value)


def get_int(conf: Mapping[str, Any], key: str, default: int) -> int:
    value = _get(conf, key, default)
    if isinstance(value, bool):
        raise ConfError(f"{key}: expected an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ConfError(f"{key}: expected an integer, got {value!r}")


def get_float(conf: Mapping[str, Any], key: str, default: float) -> float:
    value = _get(conf, key, default)
    if isinstance(value, bool):
        raise ConfError(f"{key}: expected a number, got a boolean")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ConfError(f"{key}: expected a number, got {value!r}")


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def get_bool(conf: Mapping[str, Any], key: str, default: bool) -> bool:
    value = _get(conf, key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ConfError(f"{key}: expected true or false, got {value!r}")


def get_list(conf: Mapping[str, Any], key: str, default: list[str] | None = None) -> list[str]:
    """A list of strings; a plain string is split on commas (StormCrawler's ``loadListFromConf``)."""
    value = _get(conf, key, default if default is not None else [])
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    raise ConfError(f"{key}: expected a list or a comma-separated string, got {value!r}")


_DURATION_UNITS = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86400.0))


def parse_duration(value: Any, bare_unit: float = 1.0) -> float:
    """A duration in seconds: a number with a unit (``"500ms"``, ``"2s"``, ``"1m"``, ``"1h"``,
    ``"1d"``: StormCrawler's and OpenSearch's time values) or a bare number counted in
    ``bare_unit`` seconds (1: seconds, 0.001: milliseconds). Raises ``ValueError`` otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        return float(value) * bare_unit
    text = str(value).strip().lower()
    for suffix, factor in _DURATION_UNITS:
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text) * bare_unit


def get_duration(conf: Mapping[str, Any], key: str, default: float) -> float:
    """A duration key in seconds (:func:`parse_duration`; a bare number is seconds); ``default``
    when the key is unset or empty."""
    value = _get(conf, key, default)
    if value == "":
        return default
    try:
        return parse_duration(value)
    except ValueError:
        raise ConfError(f"{key}: expected a duration (seconds, or e.g. 500ms, 2s, 1m), "
                        f"got {value!r}") from None


#: Keys naming files or folders the crawler writes or reads; relative values are taken from the project root
#: (not from a Storm worker's working directory, which is the extracted topology jar).
PATH_KEYS = (SQLITE_PATH_KEY, WARC_DIR_KEY, "owler.work.dir", WARC2WARC_INPUT_KEY, RISK_LISTS_DIR_KEY,
             WARC2WARC_PROGRESS_KEY, METRICS_SQLITE_PATH_KEY, TAKEDOWN_FILE_KEY)


#: Keys naming resources, looked up by :func:`resource_path` (under ``resources/``, then the project
#: root, then the current directory). A Storm worker's current directory is not the user's, so a
#: value found only in the current directory of the command that reads the configuration is made
#: absolute (:func:`absolute_paths`); any other value is left for each process to look up.
RESOURCE_KEYS = (URLFILTERS_FILE_KEY, PARSEFILTERS_FILE_KEY, BLACKLIST_DIR_KEY, POLITENESS_FILE_KEY)


def absolute_paths(conf: dict[str, Any], root: Path | None = None) -> dict[str, Any]:
    """``conf`` with the :data:`PATH_KEYS` made absolute against ``root`` (the project root) and
    the :data:`RESOURCE_KEYS` found only in the current directory made absolute against it; URIs
    (``s3://…``) are left as they are."""
    base = root or project_root()
    for key in PATH_KEYS:
        value = conf.get(key)
        if value and "://" not in str(value) and not Path(str(value)).is_absolute():
            conf[key] = str(base / str(value))
    for key in RESOURCE_KEYS:
        value = conf.get(key)
        if not isinstance(value, str) or not value.strip() or "://" in value:
            continue
        name = value.strip()
        found = resource_path(name, base)
        if found.exists() and found not in (base / "resources" / name, base / name):
            conf[key] = str(found.resolve())  # found in the current directory only
    return conf


def resource_overrides(conf: Mapping[str, Any], root: Path | None = None) -> list[str]:
    """``KEY=VALUE`` options, one for each of the :data:`RESOURCE_KEYS` of ``conf`` that
    :func:`absolute_paths` makes absolute (found only in the current directory): what a command
    that hands its configuration to a process started elsewhere (``sparse submit``, whose current
    directory is the project root) adds after its own options. Each value is a quoted YAML
    string, so a path is read back as it is."""
    resolved = absolute_paths(dict(conf), root)
    return [f"{key}={json.dumps(resolved[key])}" for key in RESOURCE_KEYS
            if key in resolved and resolved[key] != conf.get(key)]


# -- topologies ---------------------------------------------------------------------------------
#: ``parallelism.<component>``: the number of tasks (executors) of a component of a topology
PARALLELISM_PREFIX = "parallelism."
MAX_PARALLELISM = 1024
#: the ``-o key=value`` options of ``owler cluster submit``, one per line, for the topology class
#: that ``sparse submit`` builds in its own process (its ``-o`` reach the topology's conf only)
OPTIONS_ENV = "OWLER_OPTIONS"


_BUILD_CONF: dict[str, Any] | None = None  # set by building_with()


@contextmanager
def building_with(conf: Mapping[str, Any]):
    """Within it, :func:`topology_conf` is ``conf``: ``owler run`` builds a topology class with
    the run's configuration (its wiring and parallelism depend on it)."""
    global _BUILD_CONF
    saved, _BUILD_CONF = _BUILD_CONF, dict(conf)
    try:
        yield
    finally:
        _BUILD_CONF = saved


def topology_conf() -> dict[str, Any]:
    """The crawler conf a topology class is built with: the defaults, the file named by
    ``OWLER_CONF`` and the options in ``OWLER_OPTIONS``; its paths made absolute (within
    :func:`building_with`, that conf)."""
    if _BUILD_CONF is not None:
        return dict(_BUILD_CONF)
    options = [line for line in os.environ.get(OPTIONS_ENV, "").splitlines() if line.strip()]
    return absolute_paths(load_conf(os.environ.get("OWLER_CONF") or None, options))


def parallelism(conf: Mapping[str, Any], component: str, default: int = 1) -> int:
    """``parallelism.<component>``: how many tasks of ``component`` the topology runs."""
    key = PARALLELISM_PREFIX + component
    n = get_int(conf, key, default)
    if not 1 <= n <= MAX_PARALLELISM:
        raise ConfError(f"{key}: expected 1..{MAX_PARALLELISM}, got {n}")
    return n


#: the values of ``parser.grouping``
PARSER_GROUPINGS = ("key", "local")


def parser_grouping(conf: Mapping[str, Any]) -> str:
    """``parser.grouping``: ``key`` (the default: a parser's input grouped on the pages'
    partition key, so that one parser task sees every page of a queue and its near-duplicates)
    or ``local`` (a page goes to a parser task of its sender's worker when there is one: no page
    crosses workers for it). The topologies map it to Storm's fields and local-or-shuffle
    groupings; :mod:`owler.parse.simhash` says what each means for near-duplicates."""
    value = (get_str(conf, PARSER_GROUPING_KEY, "key") or "key").strip().lower()
    if value not in PARSER_GROUPINGS:
        raise ConfError(f"{PARSER_GROUPING_KEY}: expected one of {', '.join(PARSER_GROUPINGS)}, "
                        f"got {value!r}")
    return value


#: Java multilang serializers -> the pystorm serializer (``streamparse_run -s``) that speaks with them
MULTILANG_SERIALIZERS = {
    "eu.ows.owler.storm.MsgpackSerializer": "msgpack",
    "eu.ows.owler.storm.FastJsonSerializer": "json",
    "org.apache.storm.multilang.JsonSerializer": "json",
}


def multilang_serializer(conf: Mapping[str, Any]) -> str:
    """The pystorm serializer of the components (``json`` or ``msgpack``), from the JVM's
    ``topology.multilang.serializer``: the two ends of every pipe must speak the same protocol."""
    cls = get_str(conf, MULTILANG_SERIALIZER_KEY, "org.apache.storm.multilang.JsonSerializer")
    try:
        return MULTILANG_SERIALIZERS[cls.strip()]
    except KeyError:
        raise ConfError(f"{MULTILANG_SERIALIZER_KEY}: {cls!r} is not a serializer the Python "
                        f"components can speak with; expected one of "
                        f"{', '.join(MULTILANG_SERIALIZERS)}") from None


def check_parallelism(conf: Mapping[str, Any], components: Iterable[str],
                      single: Iterable[str] = ()) -> None:
    """Every ``parallelism.*`` key names one of ``components`` and is valid; the components in
    ``single`` run one task only."""
    names = set(components)
    for key in conf:
        if key.startswith(PARALLELISM_PREFIX):
            name = key[len(PARALLELISM_PREFIX):]
            if name not in names:
                raise ConfError(f"{key}: this topology has no component {name!r} "
                                f"(it has {', '.join(sorted(names))})")
            if parallelism(conf, name) > 1 and name in set(single):
                raise ConfError(f"{key}: {name} runs one task only")
