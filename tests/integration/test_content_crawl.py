"""Content intelligence on real Storm (local mode), issue 18: the explorative crawl of a farm of
sites in six languages (tests/farm/languages.py, texts nobody on the project wrote) records each
page's language, its source and the page metadata in the frontier, with the shipped parse
filters; and a spout focused on ``lang:de`` (``frontier.tags`` ``"lang=*": "lang:*"``, ``lang``
in ``metadata.transfer``) fetches the German pages and the pages German pages link to, and
nothing further, on both the SQLite and the OpenSearch frontier."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from owler.conf import load_conf
from owler.frontier import open_frontier
from tests.farm import languages as L
from tests.farm.harness import HOST_FILES, farm_module
from tests.integration.cli import owler

pytestmark = pytest.mark.integration

BASE = ("http.allow.private.addresses: true\n"
        "fetcher.server.delay: 0.2\n"
        "http.timeout: 2000\n"
        "spout.min.delay.queries: 300\n")
FOCUS = ('metadata.transfer: ["lang"]\n'
         'frontier.tags: {"lang=*": "lang:*", "isSitemap=true": "Sitemap"}\n'
         'frontier.interest.tags: ["lang:de"]\n')


@pytest.fixture(scope="module")
def farm(tmp_path_factory):
    log = tmp_path_factory.mktemp("languages-farm") / "access.log"
    with farm_module("tests.farm.languages", log) as ready:
        yield {"port": int(ready[0]), "log": log}


def pages_served(farm, since: float) -> list[tuple[str, str]]:
    out = []
    for line in farm["log"].read_text().splitlines():
        e = json.loads(line)
        if e["t"] >= since and e["path"] not in HOST_FILES:
            out.append((e["host"], e["path"]))
    return out


def crawl(work: Path, farm, conf_text: str, seeds: str) -> tuple[dict, float]:
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "conf.yaml"
    conf.write_text(f"warc.dir: {work / 'warc'}\nowler.work.dir: {work}\n"
                    f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n" + BASE + conf_text)
    (work / "seeds.txt").write_text(seeds)
    since = time.time()
    inject = owler("inject", str(work / "seeds.txt"), "--conf", str(conf))
    assert inject.returncode == 0, inject.stderr
    run = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "6", "--time", "300")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # ended because nothing was left, not at its time limit (a tuple replayed without end)
    assert "stopped (idle for 6 s)" in run.stdout, run.stdout[-3000:]
    return load_conf(conf), since


def url(farm, addr: str, path: str) -> str:
    return f"http://{addr}:{farm['port']}{path}"


def test_every_page_gets_its_language_and_metadata(farm, tmp_path):
    seeds = "".join(url(farm, addr, "/") + "\n" for addr in L.SITES)
    conf, since = crawl(tmp_path, farm, "", seeds)
    served = pages_served(farm, since)
    assert sorted(set(served)) == sorted(L.EXPECTED)
    with open_frontier(conf) as f:
        for (addr, path), (lang, source) in L.EXPECTED.items():
            rec = f.get(url(farm, addr, path))
            md = rec.metadata
            assert rec.status.value == "FETCHED", (addr, path, md)
            assert (md.get("lang"), md.get("lang.source")) == ([lang], [source]), (addr, path, md)
            assert ("lang.confidence" in md) == (source == "text")
            assert md["parse.title"] and int(md["parse.text.length"][0]) > 0
            assert int(md["parse.outlinks.count"][0]) >= 1
            # the lists of both classes are installed: every page is judged, these are benign
            assert md["risk"] == ["benign"] and md["risk.classes"] == ["malicious", "adult"]
        fr = f.get(url(farm, "127.0.72.2", "/p/1")).metadata
        assert fr["parse.lang"] == ["fr-FR"] and float(fr["lang.confidence"][0]) >= 0.5
        pl = f.get(url(farm, "127.0.72.4", "/p/1")).metadata
        assert pl["protocol.content-language"] == ["pl"]
        es = f.get(url(farm, "127.0.72.3", "/p/2")).metadata
        assert es["parse.lang"] == ["en"] and es["lang"] == ["es"]  # the text wins


@pytest.mark.parametrize("backend", ["sqlite", "opensearch"])
def test_a_lang_focused_spout_fetches_only_german_pages_and_their_links(farm, tmp_path, backend,
                                                                        request):
    extra = FOCUS
    if backend == "opensearch":
        node = request.getfixturevalue("opensearch")
        extra += node.conf_lines(f"focus-{uuid.uuid4().hex[:8]}") + "frontier.lease.ttl: 30\n"
    german = "127.0.72.1"
    conf, since = crawl(tmp_path, farm, extra, url(farm, german, "/") + "\tlang=de\n")
    served = pages_served(farm, since)
    expected = {(german, p) for a, p in L.EXPECTED if a == german}
    expected |= {(addr, "/") for addr in L.SITES}  # linked from the German home page
    assert set(served) == expected
    assert len(served) == len(expected)  # each once
    with open_frontier({**conf, "frontier.interest.tags": []}) as f:
        home = f.get(url(farm, "127.0.72.2", "/")).metadata
        assert home["lang"] == ["fr"] and home["lang.source"] == ["text"]
        # the French home page's links carry its language and wait for a French spout
        page = f.get(url(farm, "127.0.72.2", "/p/1"))
        assert page.status.value == "DISCOVERED" and page.metadata["lang"] == ["fr"]
        if backend == "sqlite":
            assert f.tags(url(farm, "127.0.72.2", "/p/1")) == ["lang:fr"]
        assert f.get(url(farm, german, "/p/3")).metadata["lang"] == ["de"]
