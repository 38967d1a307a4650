"""The URLFrontier API in Python, built from the file descriptor that the ``urlfrontier-API``
artifact publishes (``urlfrontier.desc`` beside this module, written by ``make setup``:
``services/urlfrontier/extract_descriptor.py``), not retyped: every message class, the client
stub's methods and the server's method handlers come from the descriptor.

``pb.<Message>`` is a message class (``pb.GetParams``, ``pb.URLItem``, …); :class:`Stub` is the
client; :func:`add_service` registers an object with one method per RPC (named as in the API) on a
``grpc.Server``. A method the object lacks answers UNIMPLEMENTED.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from owler.frontier.crawls import DEFAULT_CRAWL  # noqa: F401 - the API's name for it

DESCRIPTOR_PATH = Path(__file__).with_name("urlfrontier.desc")
SERVICE = "urlfrontier.URLFrontier"
#: URLFrontier keeps no status, only a next fetch date: this project's client sends a known URL's
#: status (FETCHED, ERROR, REDIRECTION, FETCH_ERROR) in this metadata key, and its service stores
#: it as the record's status (a known URL sent without it is FETCHED).
STATUS_KEY = "urlfrontier.status"
#: The entry of GetStats' ``counts`` in which this project's service gives the URLs due now (the
#: API has no such call; ``owler run --idle-exit`` needs it).
DUE_COUNT = "due"


def _load() -> tuple[Any, Any]:
    try:
        data = DESCRIPTOR_PATH.read_bytes()
    except OSError as exc:
        raise ImportError(f"the URLFrontier API descriptor {DESCRIPTOR_PATH} is missing ({exc}); "
                          "`make setup` builds it from the urlfrontier-API artifact") from exc
    pool = descriptor_pool.DescriptorPool()
    fd = pool.Add(descriptor_pb2.FileDescriptorProto.FromString(data))
    return pool.FindFileByName(fd.name), pool


FILE, _POOL = _load()
pb = SimpleNamespace(**{name: message_factory.GetMessageClass(desc)
                        for name, desc in FILE.message_types_by_name.items()})
METHODS = FILE.services_by_name["URLFrontier"].methods_by_name


def _kind(method: Any) -> str:
    return (("stream" if method.client_streaming else "unary") + "_"
            + ("stream" if method.server_streaming else "unary"))


def _classes(method: Any) -> tuple[Any, Any]:
    return (message_factory.GetMessageClass(method.input_type),
            message_factory.GetMessageClass(method.output_type))


class Stub:
    """A client of the URLFrontier service on ``channel``: one callable per RPC, named as in the
    API (``stub.GetURLs(pb.GetParams(...))``), as grpc's generated stubs are."""

    def __init__(self, channel: grpc.Channel) -> None:
        for name, method in METHODS.items():
            request, response = _classes(method)
            make = getattr(channel, _kind(method))
            setattr(self, name, make(f"/{SERVICE}/{name}",
                                     request_serializer=request.SerializeToString,
                                     response_deserializer=response.FromString))


def add_service(server: grpc.Server, impl: Any) -> list[str]:
    """Serve ``impl``'s methods (``impl.GetURLs(request, context)`` …) as the URLFrontier service
    on ``server``; returns the names of the RPCs ``impl`` does not implement (they answer
    UNIMPLEMENTED, as grpc does for an unknown method)."""
    handlers = {}
    missing = []
    for name, method in METHODS.items():
        request, response = _classes(method)
        fn = getattr(impl, name, None)
        if fn is None:
            missing.append(name)
            continue
        make = getattr(grpc, f"{_kind(method)}_rpc_method_handler")
        handlers[name] = make(fn, request_deserializer=request.FromString,
                              response_serializer=response.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    return missing
