"""Every component test runs twice: with the JSON multilang serializer and with MessagePack, the
one a crawl uses by default (resources/crawler-conf.yaml: ``topology.multilang.serializer``),
through :class:`tests.component.multilang.ShellComponent`."""

from __future__ import annotations

import pytest

from tests.component import multilang


@pytest.fixture(autouse=True, params=multilang.SERIALIZERS)
def multilang_serializer(request, monkeypatch) -> str:
    """What every ShellComponent of the test speaks (``-s json`` / ``-s msgpack``)."""
    monkeypatch.setattr(multilang, "default_serializer", request.param)
    return request.param
