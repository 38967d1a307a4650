"""The URLFrontier API as built from the published artifact (services/urlfrontier/): the Java
string literals of protoc's output read back byte for byte, and the messages and RPCs the project
relies on, as the API defines them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from owler.frontier import urlfrontier_api as api
from owler.frontier.urlfrontier_api import METHODS, pb

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "extract_descriptor", ROOT / "services" / "urlfrontier" / "extract_descriptor.py")
extract = importlib.util.module_from_spec(spec)
spec.loader.exec_module(extract)


def sources_jar() -> Path:
    version = (ROOT / "services" / "urlfrontier" / "VERSION").read_text().strip()
    return ROOT / ".services" / f"urlfrontier-api-{version}" / f"urlfrontier-API-{version}-sources.jar"


def test_java_literals_are_read_back_byte_for_byte():
    java = ('java.lang.String[] descriptorData = {\n'
            '      "\\n\\021a\\"b\\\\c\\t\\r\\377\\0012" +\n'
            '      "\\u0041\'",\n      "x"\n    };')
    assert extract.descriptor_bytes(java) == b'\n\x11a"b\\c\t\r\xff\x012A\'x'
    with pytest.raises(ValueError, match="no descriptorData"):
        extract.descriptor_bytes("class X {}")
    with pytest.raises(ValueError, match="not the URLFrontier API"):
        extract.check(b"")


def test_the_built_descriptor_is_the_artifacts(tmp_path):
    """What make setup wrote is what the sources jar holds (and nothing hand-made)."""
    out = tmp_path / "u.desc"
    assert extract.main(["x", str(sources_jar()), str(out)]) == 0
    assert out.read_bytes() == api.DESCRIPTOR_PATH.read_bytes()
    assert extract.main(["x"]) == 2


def test_messages_and_rpcs_as_the_api_defines_them():
    assert set(METHODS) >= {"GetURLs", "PutURLs", "ListQueues", "ListCrawls", "DeleteCrawl",
                            "GetStats", "BlockQueueUntil", "SetDelay", "SetActive", "GetActive",
                            "GetURLStatus", "CountURLs", "ListURLs", "DeleteQueue"}
    put, get = METHODS["PutURLs"], METHODS["GetURLs"]
    assert (put.client_streaming, put.server_streaming) == (True, True)
    assert (get.client_streaming, get.server_streaming) == (False, True)
    fields = {f.name: f.number for f in pb.GetParams.DESCRIPTOR.fields}
    assert fields == {"max_urls_per_queue": 1, "max_queues": 2, "key": 3, "delay_requestable": 4,
                      "anyCrawlID": 5, "crawlID": 6}
    assert [v.name for v in pb.AckMessage.DESCRIPTOR.enum_types_by_name["Status"].values] == [
        "OK", "SKIPPED", "FAIL"]
    item = pb.URLItem(known=pb.KnownURLItem(info=pb.URLInfo(url="http://a/", key="a"),
                                            refetchable_from_date=5), ID="1")
    assert pb.URLItem.FromString(item.SerializeToString()) == item


def test_what_a_urlfrontier_frontier_cannot_serve_is_refused_up_front():
    """The sitemap topology serves its spouts by tags and counts host budgets in the frontier;
    URLFrontier has neither."""
    from owler.conf import ConfError, load_conf, project_root
    from owler.frontier import open_frontier
    from owler.run.runner import check_topology_conf, load_topology

    root = project_root()
    conf = load_conf(None, ["frontier.backend=urlfrontier"])
    with pytest.raises(ConfError, match="URLFrontier has neither"):
        check_topology_conf(load_topology(root, "sitemap", conf), root, conf)
    check_topology_conf(load_topology(root, "explorative", conf), root, conf)
    with pytest.raises(ConfError, match="a URLFrontier service serves no tags"):
        open_frontier({**conf, "frontier.interest.tags": ["Sitemap"]})
