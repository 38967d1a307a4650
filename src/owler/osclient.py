"""A small OpenSearch REST client for the frontier: urllib3 connection pools, orjson bodies.

Why not opensearch-py: the status updater's hot path is one ``_bulk`` request of thousands of
pre-serialized NDJSON lines and a response reduced by ``filter_path``; a client that builds and
parses Python objects per action costs more than the rest of the update (see BENCHMARKS.md).

Connection keys, StormCrawler's ``OpenSearchConnection`` names (``opensearch.<type>.<k>`` first,
then ``opensearch.<k>``; ``type`` is ``status`` for the frontier):

``addresses``
    a list, or one string split on ``;`` or ``,``; ``http://`` and port 9200 are assumed when missing.
    Default: the nodes of ``owler services up opensearch`` (``services.opensearch.port``,
    ``services.opensearch.nodes``).
``user``, ``password``
    HTTP basic authentication.
``disable.tls.validation`` (false), ``ca.certs`` (a PEM file of trusted CAs for https addresses)
``connect.timeout`` (5 s), ``socket.timeout`` (60 s)
``max.retries`` (3): a request that cannot reach any address, or gets 429/502/503/504, is retried
    this many times with exponential back-off (0.5 s, 1 s, 2 s …) before it fails.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import time
from typing import Any, Mapping

import orjson
import urllib3

from owler import conf as C
from owler.conf import ConfError
from owler.constants import OPENSEARCH_NODES_KEY, OPENSEARCH_PORT_KEY

log = logging.getLogger("owler.opensearch")

RETRY_STATUSES = frozenset({429, 502, 503, 504})


class OpenSearchError(RuntimeError):
    """A request failed. ``status`` is the HTTP status (0 when no node answered)."""

    def __init__(self, message: str, status: int = 0, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


#: ``opensearch.<kind>.index.name``: the index of a kind (``status``, ``metrics``)
INDEX_NAME = "index.name"


def conn_key(conf: Mapping[str, Any], kind: str, key: str, default: Any = None) -> Any:
    """``opensearch.<kind>.<key>`` if set, else ``opensearch.<key>``, else ``default``."""
    for name in (f"opensearch.{kind}.{key}", f"opensearch.{key}"):
        if conf.get(name) not in (None, ""):
            return conf[name]
    return default


def service_nodes(port: int, nodes: int = 1) -> list[tuple[str, int]]:
    """``(host, HTTP port)`` of each node of ``owler services up opensearch``: one on
    127.0.0.1:``port``, or node k of a cluster of ``nodes`` on 127.0.0.k, port ``port`` + k − 1
    (:mod:`owler.run.services`)."""
    if nodes <= 1:
        return [("127.0.0.1", port)]
    return [(f"127.0.0.{k}", port + k - 1) for k in range(1, nodes + 1)]


def parse_addresses(value: Any, default_port: int = 9200) -> list[str]:
    if isinstance(value, str):
        items = [v for part in value.split(";") for v in part.split(",")]
    elif isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    else:
        raise ConfError(f"opensearch.addresses: expected a list or a string, got {value!r}")
    out = []
    for item in items:
        item = item.strip().rstrip("/")
        if not item:
            continue
        if "://" not in item:
            item = "http://" + item
        scheme, rest = item.split("://", 1)
        if scheme not in ("http", "https"):
            raise ConfError(f"opensearch.addresses: {item!r} is neither http nor https")
        hostport = rest.split("/", 1)[0]
        if ":" not in hostport.rsplit("]", 1)[-1]:
            item = f"{scheme}://{hostport}:{default_port}" + rest[len(hostport):]
        out.append(item)
    if not out:
        raise ConfError("opensearch.addresses: no address given")
    return out


class OSClient:
    """JSON over HTTP to one cluster, failing over between its addresses (module docstring)."""

    def __init__(self, conf: Mapping[str, Any], kind: str = "status") -> None:
        conf = conf or {}
        port = C.get_int(conf, OPENSEARCH_PORT_KEY, 9200)
        nodes = C.get_int(conf, OPENSEARCH_NODES_KEY, 1)
        local = ";".join(f"{host}:{p}" for host, p in service_nodes(port, nodes))
        self.addresses = parse_addresses(conn_key(conf, kind, "addresses", local))
        self.user = conn_key(conf, kind, "user")
        password = conn_key(conf, kind, "password", "")
        self.headers = {"Content-Type": "application/json"}
        if self.user:
            token = base64.b64encode(f"{self.user}:{password}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"
        self.max_retries = int(conn_key(conf, kind, "max.retries", 3))
        timeout = urllib3.Timeout(connect=float(conn_key(conf, kind, "connect.timeout", 5)),
                                  read=float(conn_key(conf, kind, "socket.timeout", 60)))
        no_verify = str(conn_key(conf, kind, "disable.tls.validation", "false")).lower() == "true"
        ca = conn_key(conf, kind, "ca.certs")
        pool_kw: dict[str, Any] = {"timeout": timeout, "retries": False, "maxsize": 4}
        if any(a.startswith("https") for a in self.addresses):
            pool_kw["cert_reqs"] = "CERT_NONE" if no_verify else "CERT_REQUIRED"
            if ca:
                pool_kw["ca_certs"] = str(ca)
            if no_verify:
                urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        self.pool = urllib3.PoolManager(**pool_kw)
        self._current = 0

    @property
    def address(self) -> str:
        return self.addresses[self._current]

    def request(self, method: str, path: str, body: Any = None, params: Mapping[str, Any] | None
                = None, ok: tuple[int, ...] = (200, 201), retries: int | None = None,
                raw: bool = False) -> tuple[int, Any]:
        """Send one request; return ``(status, parsed JSON body)``, or with ``raw`` the body's
        bytes as they came (an answer with a status outside ``ok`` is parsed for the error).

        ``body``: bytes (sent as is; NDJSON for ``_bulk``) or a JSON-serializable object. A status
        outside ``ok`` raises :class:`OpenSearchError`; 401/403 name the credentials; no answer
        from any address after the retries raises with status 0.
        """
        if body is not None and not isinstance(body, (bytes, bytearray)):
            body = orjson.dumps(body)
        headers = self.headers
        if path.endswith("_bulk"):
            headers = {**headers, "Content-Type": "application/x-ndjson"}
        query = ""
        if params:
            query = "?" + "&".join(f"{k}={v}" for k, v in params.items())
        attempts = (self.max_retries if retries is None else retries) + 1
        delay = 0.5
        last_error = ""
        for attempt in range(attempts):
            for _ in range(len(self.addresses)):
                url = self.address + path + query
                try:
                    resp = self.pool.request(method, url, body=body, headers=headers)
                except urllib3.exceptions.HTTPError as exc:
                    last_error = f"cannot reach OpenSearch at {self.address}: {_reason(exc)}"
                    self._current = (self._current + 1) % len(self.addresses)
                    continue
                status = resp.status
                if raw and status in ok:
                    return status, resp.data
                data = _parse(resp.data)
                if status in ok:
                    return status, data
                if status in (401, 403):
                    who = f"user {self.user!r}" if self.user else "no credentials"
                    raise OpenSearchError(
                        f"OpenSearch at {self.address} refused {method} {path} with {status} "
                        f"({who}): check opensearch.user / opensearch.password", status, data)
                if status in RETRY_STATUSES:
                    last_error = f"OpenSearch at {self.address} answered {status} to {method} {path}"
                    break
                raise OpenSearchError(
                    f"OpenSearch {method} {path} failed with {status}: {_error_text(data)}",
                    status, data)
            if attempt + 1 < attempts:
                log.warning("%s; retrying in %.1f s", last_error, delay)
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
        raise OpenSearchError(last_error or f"OpenSearch {method} {path} failed", 0)

    def close(self) -> None:
        self.pool.clear()


def _reason(exc: Exception) -> str:
    reason = getattr(exc, "reason", None) or exc
    text = str(reason)
    if "Connection refused" in text:
        return "connection refused"
    return text.split(": ", 1)[-1][:200]


def _parse(data: bytes) -> Any:
    if not data:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data[:500].decode("utf-8", "replace")


def _error_text(data: Any) -> str:
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            root = (err.get("root_cause") or [err])[0]
            return f"{root.get('type')}: {root.get('reason')}"
        if err:
            return str(err)
    return str(data)[:300]


def epoch_of(value: Any) -> float | None:
    """An OpenSearch date (epoch millis, or ISO 8601 text with ``Z``) in epoch seconds; ``None``
    when it is missing or unreadable."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) / 1000.0
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
