"""Documents in a crawl (issue 48): the explorative topology on real Storm (local mode) crawls the
documents farm (tests/farm/documents.py: the 21 real PDFs of two Debian manuals in thirteen
languages, each with a link to a page of the farm added, one of them also as
application/octet-stream, and a decompression bomb, a PDF whose page tree and xref chain loop and a
cut one) with the shipped configuration: every real PDF is FETCHED with its title and language,
the page its link leads to is fetched (its outlinks are followed), each hostile PDF ends ERROR with
its cause, and the crawl finishes."""

from __future__ import annotations

import json

import pytest

from owler.frontier.sqlite import SQLiteFrontier
from tests.farm import documents as D
from tests.farm.harness import farm_module
from tests.integration.cli import farm_conf, host_only_urlfilters, owler

pytestmark = pytest.mark.integration

CAUSES = {"bomb": "document.memory", "loop": "document.unreadable",
          "truncated": "document.truncated"}


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    work = tmp_path_factory.mktemp("documents")
    # the farm's pages only: the manuals link to the Debian web site, which is not on loopback
    filters = host_only_urlfilters(work)
    with farm_module("tests.farm.documents", work / "access.log") as ready:
        base = f"http://{D.ADDR}:{int(ready[0])}"
        conf = farm_conf(work, D.NETWORK, filters, "warc.enabled: false")
        (work / "seeds.txt").write_text(f"{base}/\n")
        owler("inject", str(work / "seeds.txt"), "--conf", str(conf))
        run = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "10",
                    "--time", "400", check=False)
    with SQLiteFrontier(work / "frontier.sqlite") as f:
        urls = [f"{base}/pdf/{n}" for n in D.real()]
        urls += [f"{base}{D.after_path(n)}" for n in D.real()]
        urls += [f"{base}/hostile/{h}.pdf" for h in D.HOSTILE]
        urls.append(f"{base}/bin/{next(iter(D.real()))}")
        records = {u[len(base):]: f.get(u) for u in urls}
    log = [json.loads(line) for line in (work / "access.log").read_text().splitlines()]
    return {"run": run, "records": records, "log": log}


def test_the_crawl_finishes(crawl):
    run = crawl["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_every_real_pdf_is_read_with_its_language(crawl):
    for name in D.real():
        record = crawl["records"][f"/pdf/{name}"]
        assert record is not None and record.status.name == "FETCHED", (name, record)
        md = record.metadata
        assert md["parse.mimetype"] == ["application/pdf"], name
        assert int(md["parse.document.pages"][0]) >= 1 and md["signature"], name
        if name in D.full():
            assert md["parse.title"] and md["lang"] == [D.language(name)], (name, md)
            assert md["lang.source"] == ["text"]
        else:  # the placeholders: a sentence, no language judged
            assert "lang" not in md, (name, md)


def test_the_links_of_every_pdf_are_followed(crawl):
    for name in D.real():
        record = crawl["records"][D.after_path(name)]
        assert record is not None and record.status.name == "FETCHED", (name, record)
        assert record.metadata["parse.title"] == [f"After {D.after_path(name)[7:]}"]


def test_a_pdf_served_as_octet_stream_is_read(crawl):
    name = next(iter(D.real()))
    record = crawl["records"][f"/bin/{name}"]
    assert record.status.name == "FETCHED" and record.metadata["lang"] == [D.language(name)]


def test_every_hostile_pdf_ends_with_its_cause(crawl):
    for name, cause in CAUSES.items():
        record = crawl["records"][f"/hostile/{name}.pdf"]
        assert record is not None and record.status.name == "ERROR", (name, record)
        assert record.metadata["error.cause"] == [cause], (name, record.metadata)
        assert record.metadata["error.source"] == ["parser"]


def test_every_document_was_fetched_once(crawl):
    paths = [e["path"] for e in crawl["log"] if e["status"] == 200]
    docs = [p for p in paths if p.startswith(("/pdf/", "/hostile/", "/bin/"))]
    assert len(docs) == len(set(docs)) == len(D.real()) + len(D.HOSTILE) + 1, docs
