"""The language of every page of real multilingual sites (issue 48): the explorative topology on
real Storm (local mode) crawls the manuals farm (tests/farm/manuals.py: two Debian manuals in
thirteen languages, 308 pages, every language declaration removed, served in UTF-8 and ten legacy
charsets declared in the header, in a ``<meta>`` or nowhere). Goal: at least 98 % of the pages
get their language right, and at least 90 % of every language with ten pages or more; every page
is read in its charset (its title as in the UTF-8 original)."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from selectolax.lexbor import LexborHTMLParser

from owler.frontier.sqlite import SQLiteFrontier
from tests.farm import manuals as M
from tests.farm.harness import farm_module
from tests.integration.cli import farm_conf, host_only_urlfilters, owler

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    work = tmp_path_factory.mktemp("manuals")
    pages = M.pages()
    # each site's pages only: the manuals link to the Debian web site, which is not on loopback
    filters = host_only_urlfilters(work)
    with farm_module("tests.farm.manuals", work / "access.log") as ready:
        port = int(ready[0])
        conf = farm_conf(work, M.NETWORK, filters, "warc.enabled: false")
        (work / "seeds.txt").write_text("".join(f"http://{addr}:{port}{path}\n"
                                                for addr, path in pages))
        owler("inject", str(work / "seeds.txt"), "--conf", str(conf))
        run = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "10",
                    "--time", "400", check=False)
    with SQLiteFrontier(work / "frontier.sqlite") as f:
        records = {(addr, path): f.get(f"http://{addr}:{port}{path}") for addr, path in pages}
    return {"run": run, "records": records, "pages": pages}


def test_every_page_is_fetched(crawl):
    run = crawl["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    missing = [k for k, r in crawl["records"].items() if r is None or r.status.name != "FETCHED"]
    assert not missing and len(crawl["records"]) == 308, missing[:10]


def test_every_language_reaches_the_goal(crawl):
    right, total, misses = Counter(), Counter(), []
    for key, truth in crawl["pages"].items():
        md = crawl["records"][key].metadata
        got = (md.get("lang") or [None])[0]
        total[truth] += 1
        if got == truth:
            right[truth] += 1
            assert md["lang.source"] == ["text"]  # nothing declared: the text decides
        else:
            misses.append((key, truth, got, md.get("lang.confidence")))
    assert len(total) >= 13 and all(total[lang] >= 10 for lang in total)
    rates = {lang: right[lang] / total[lang] for lang in total}
    overall = sum(right.values()) / sum(total.values())
    assert overall >= 0.98 and min(rates.values()) >= 0.90, (overall, rates, misses)


def test_every_page_is_read_in_its_charset(crawl):
    by_charset: dict[str, int] = defaultdict(int)
    for (addr, path), record in crawl["records"].items():
        package, charset, _ = M.SITES[addr]
        original = (M.root() / package / path.lstrip("/")).read_bytes()
        title = LexborHTMLParser(original).css_first("title")
        if title is None or not title.text(strip=True):
            continue
        want = " ".join(title.text().split())
        assert record.metadata["parse.title"] == [want], (addr, path, charset)
        by_charset[charset] += 1
    assert len(by_charset) == 11 and min(by_charset.values()) >= 10, by_charset
