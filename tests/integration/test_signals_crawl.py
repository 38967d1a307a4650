"""Webmasters' signals in a crawl (issue 47): the explorative topology on real Storm (local mode)
crawls the signals farm (tests/farm/signals.py) for search and text and data mining
(``signals.purposes: [search, tdm]``) three times at once, one crawl per
``signals.refused.action`` (mark, strip, skip), each known in the farm's log by its User-Agent
(``http.agent.version`` = the action). Every page the farm serves is a seed, so what is requested
depends on the policy alone, not on which pages were parsed for links.

Judged for each action: the farm's log holds exactly the requests the action allows (robots.txt
and tdmrep.json once per host, every page once, nothing the host's signals refuse under skip);
every URL records in the frontier what its host said (robots.txt, tdmrep.json, headers, ``<meta>``;
conflicts resolved, malformed ones unknown with their reasons); the WARC files hold every page's
response, in full or (strip, and skip told by the response) without its content, and beside it a
metadata record with the same signals; a page whose content was withheld gave the parser no
outlinks."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from owler.frontier.sqlite import SQLiteFrontier
from tests.farm import signals as S
from tests.farm.harness import farm_module
from tests.integration.cli import owler

pytestmark = pytest.mark.integration

ACTIONS = ("mark", "strip", "skip")
REASON_500 = "tdmrep.file: /.well-known/tdmrep.json: HTTP 500: unknown until asked again"
#: what each page records (signals.* but signals.withheld) when it is fetched
SAID = {
    ("usage", "/"): {"signals.ai-train": ["refused"]},
    ("usage", "/no-search/a"): {"signals.search": ["refused"]},
    ("usage", "/ai-ok/b"): {"signals.ai-train": ["allowed"]},
    ("usage", "/plain/c"): {"signals.ai-train": ["refused"]},
    ("cfsignal", "/"): {"signals.search": ["allowed"], "signals.ai-train": ["refused"],
                        "signals.unreadable": ["robots.content-signal: use=reference: use= says "
                                               "how far content may be used, kept as written"]},
    ("cfnosearch", "/"): {"signals.search": ["refused"]},
    ("headers", "/"): {"signals.search": ["allowed"], "signals.ai-train": ["refused"],
                       "signals.ai-input": ["refused"], "signals.tdm": ["refused"]},
    ("headers", "/other"): {},  # another crawler's noai
    ("meta", "/"): {"signals.ai-train": ["refused"], "signals.ai-input": ["refused"]},
    ("meta", "/tdm"): {"signals.tdm": ["refused"]},
    ("meta", "/tdm-off"): {"signals.tdm": ["allowed"]},  # the meta supersedes the header
    ("meta", "/bad"): {"signals.unreadable": [
        "tdmrep.meta: tdm-reservation: yes: neither 1 nor 0: a protocol error, unset"]},
    ("meta", "/after-head"): {},  # a meta after </head> is not the head's
    ("meta", "/linked"): {},
    ("tdmfile", "/"): {"signals.tdm": ["allowed"]},
    ("tdmfile", "/reserved/a"): {"signals.tdm": ["refused"]},
    ("tdmfile", "/reserved/lifted"): {"signals.tdm": ["allowed"]},  # the header supersedes
    ("tdmbad", "/"): {"signals.unreadable": [
        "tdmrep.file: /.well-known/tdmrep.json: not JSON: Expecting property name enclosed in "
        "double quotes: line 1 column 2 (char 1)"]},
    ("tdm5xx", "/"): {"signals.unreadable": [REASON_500]},
}
SAID[("cfsignal", "/p")] = SAID[("cfsignal", "/")]
SAID[("cfnosearch", "/p")] = SAID[("cfnosearch", "/")]
SAID[("tdmbad", "/p")] = SAID[("tdmbad", "/")]
SAID[("tdm5xx", "/p")] = SAID[("tdm5xx", "/")]
#: with skip: not requested, for what the host said before (ERROR, error.cause signals)
SKIPPED = {("usage", "/no-search/a"): {"signals.search": ["refused"]},
           ("cfnosearch", "/"): {"signals.search": ["refused"]},
           ("cfnosearch", "/p"): {"signals.search": ["refused"]},
           ("tdmfile", "/reserved/a"): {"signals.tdm": ["refused"]},
           ("tdmfile", "/reserved/lifted"): {"signals.tdm": ["refused"]}}  # the file alone
#: the purpose of the crawl each refusing page refuses (its content withheld under strip)
REFUSES = {("usage", "/no-search/a"): "search", ("cfnosearch", "/"): "search",
           ("cfnosearch", "/p"): "search", ("headers", "/"): "tdm", ("meta", "/tdm"): "tdm",
           ("tdmfile", "/reserved/a"): "tdm"}


def seeds(port: int) -> list[str]:
    return [f"http://{S.HOSTS[site]}:{port}{path}" for site in S.HOSTS
            for path in ["/", *S.PAGES[site]]]


def crawl_with(work: Path, action: str, port: int) -> dict:
    work.mkdir()
    conf = work / "conf.yaml"
    conf.write_text(f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n"
                    f"warc.dir: {work / 'warc'}\n"
                    f"owler.work.dir: {work}\n"
                    f"http.allowed.networks: [{S.NETWORK}]\n"
                    "http.robots.agents: [owler]\n"
                    f"http.agent.version: {action}\n"
                    "signals.purposes: [search, tdm]\n"
                    f"signals.refused.action: {action}\n"
                    "fetcher.server.delay: 0.2\n")
    (work / "seeds.txt").write_text("".join(u + "\n" for u in seeds(port)))
    owler("inject", str(work / "seeds.txt"), "--conf", str(conf))
    run = owler("run", "explorative", "--conf", str(conf), "--idle-exit", "10",
                "--time", "300", check=False)
    with SQLiteFrontier(work / "frontier.sqlite") as f:
        urls = [row[0] for row in f.conn.execute("SELECT url FROM urls")]
        records = {u: f.get(u) for u in urls}
    responses, metadata = {}, {}
    for path in sorted((work / "warc").glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                target = rec.rec_headers.get_header("WARC-Target-URI")
                if rec.rec_type == "response":
                    assert target not in responses, f"{target} archived twice"
                    responses[target] = (rec.rec_headers, rec.content_stream().read())
                elif rec.rec_type == "metadata":
                    metadata[target] = (rec.rec_headers.get_header("WARC-Concurrent-To"),
                                        json.loads(rec.content_stream().read()))
    return {"run": run, "records": records, "responses": responses, "metadata": metadata}


@pytest.fixture(scope="module")
def crawls(tmp_path_factory):
    work = tmp_path_factory.mktemp("signals")
    log = work / "access.log"
    with farm_module("tests.farm.signals", log) as ready:
        port = int(ready[0])
        with ThreadPoolExecutor(len(ACTIONS)) as pool:
            done = dict(zip(ACTIONS, pool.map(
                lambda action: crawl_with(work / action, action, port), ACTIONS)))
        requests = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for action, crawl in done.items():
        crawl["port"] = port
        crawl["requests"] = [e for e in requests if e["ua"].startswith(f"OWLer-py/{action} ")]
    assert sum(len(c["requests"]) for c in done.values()) == len(requests), \
        "a request of no crawl"
    return done


def url(crawl, site: str, path: str) -> str:
    return f"http://{S.HOSTS[site]}:{crawl['port']}{path}"


def signals_of(crawl, site: str, path: str) -> dict:
    rec = crawl["records"][url(crawl, site, path)]
    return {k: v for k, v in rec.metadata.items() if k.startswith("signals.")}


def fetched(action: str) -> set[tuple[str, str]]:
    """The pages each action requests: every seed (and, when the page linking to it is parsed,
    meta's /linked), but those the host refuses before the request under skip."""
    pages = {(site, path) for site in S.HOSTS for path in ["/", *S.PAGES[site]]}
    if action == "mark":
        return pages | {("meta", "/linked")}
    return pages - set(SKIPPED) if action == "skip" else pages


def withheld(action: str) -> dict[tuple[str, str], str]:
    """The pages whose content each action keeps out of the archive and away from the parser."""
    if action == "mark":
        return {}
    return {p: why for p, why in REFUSES.items() if p in fetched(action)}


@pytest.mark.parametrize("action", ACTIONS)
def test_the_crawl_ends_by_itself(crawls, action):
    run = crawls[action]["run"]
    assert run.returncode == 0 and "idle for 10 s" in run.stdout, run.stdout[-3000:] + run.stderr


@pytest.mark.parametrize("action", ACTIONS)
def test_the_farm_sees_exactly_the_requests_the_action_allows(crawls, action):
    asked = [(e["host"], e["path"]) for e in crawls[action]["requests"]]
    assert len(asked) == len(set(asked)), "asked twice: " + str(sorted(
        a for a in asked if asked.count(a) > 1))
    pages = {(S.HOSTS[site], path) for site, path in fetched(action)}
    sites = {site for site, _ in fetched(action)}
    host_files = {(S.HOSTS[site], "/robots.txt") for site in S.HOSTS}
    host_files |= {(S.HOSTS[site], S.TDMREP) for site in sites}
    assert set(asked) == pages | host_files, (sorted(set(asked) - pages - host_files),
                                              sorted(pages | host_files - set(asked)))
    if action == "skip":  # nothing but its robots.txt, not even its tdmrep.json
        assert {p for h, p in asked if h == S.HOSTS["cfnosearch"]} == {"/robots.txt"}


@pytest.mark.parametrize("action", ACTIONS)
def test_every_url_records_what_its_host_said(crawls, action):
    crawl = crawls[action]
    pages = fetched(action)
    kept = withheld(action)
    for (site, path), said in SAID.items():
        if (site, path) not in pages:
            continue
        rec = crawl["records"][url(crawl, site, path)]
        assert rec.status.name == "FETCHED", (site, path, rec.metadata)
        got = signals_of(crawl, site, path)
        why = got.pop("signals.withheld", None)
        assert got == said, (site, path)
        assert why == ([kept[(site, path)]] if (site, path) in kept else None), (site, path)
    for (site, path), said in (SKIPPED.items() if action == "skip" else ()):
        rec = crawl["records"][url(crawl, site, path)]
        assert rec.status.name == "ERROR" and rec.metadata["error.cause"] == ["signals"]
        assert signals_of(crawl, site, path) == said, (site, path)
    # the malformed host: every signal unknown, each with its reason, crawled as any other
    bad = signals_of(crawl, "malformed", "/")["signals.unreadable"]
    assert len(bad) == 3 and any("not a structured field dictionary" in r for r in bad)
    assert len(signals_of(crawl, "malformed", "/p")["signals.unreadable"]) == 2


@pytest.mark.parametrize("action", ACTIONS)
def test_the_warc_holds_what_the_action_allows_and_the_signals_beside_it(crawls, action):
    crawl = crawls[action]
    kept = withheld(action)
    responses, metadata = crawl["responses"], crawl["metadata"]
    assert set(responses) == {url(crawl, *p) for p in fetched(action)}
    for site, path in fetched(action):
        head, payload = responses[url(crawl, site, path)]
        if (site, path) in kept:  # the exchange's head, not its content
            assert payload == b"" and head.get_header("WARC-Truncated") == "unspecified"
        else:
            assert payload == S.html(site, path) and head.get_header("WARC-Truncated") is None
    # a page that said something has its metadata record, linked to its response; others none
    with_signals = {u for u, r in crawl["records"].items() if r.status.name == "FETCHED"
                    and any(k.startswith("signals.") for k in r.metadata)}
    assert set(metadata) == with_signals
    ids = {h.get_header("WARC-Record-ID"): u for u, (h, _) in responses.items()}
    for target, (concurrent, record) in metadata.items():
        assert ids[concurrent] == target
        assert record["vocab"] == "draft-ietf-aipref-vocab-08"
        md = crawl["records"][target].metadata
        assert {f"signals.{p}": [r["state"]] for p, r in record["purposes"].items()
                if r["state"] != "unknown"} == {k: v for k, v in md.items()
                                                if k.startswith("signals.") and k not in (
                                                    "signals.unreadable", "signals.withheld")}
        assert record.get("withheld") == (md.get("signals.withheld") or [None])[0]
    _, headers = metadata[url(crawl, "headers", "/")]
    assert headers["purposes"]["tdm"] == {"state": "refused", "sources": ["tdmrep.header"]}
    assert any(s["raw"].endswith("tdm-policy: https://policy.example/p.json")
               for s in headers["statements"])
    _, meta = metadata[url(crawl, "meta", "/")]
    assert meta["purposes"]["ai-train"] == {"state": "refused", "sources": ["meta.robots"]}
    _, tdm = metadata[url(crawl, "meta", "/tdm")]
    assert [s["raw"] for s in tdm["statements"]] == [
        "tdm-reservation: 1; tdm-policy: https://policy.example/t?a=1&b=2"]
    _, lifted = metadata.get(url(crawl, "tdmfile", "/reserved/lifted"), (None, None))
    if action != "skip":  # the file reserved it, its header lifted the reservation
        assert lifted["purposes"]["tdm"] == {"state": "allowed", "sources": ["tdmrep.header"]}
        assert {s["source"] for s in lifted["statements"]} == {"tdmrep.file", "tdmrep.header"}


def test_a_withheld_page_gives_the_parser_no_outlinks(crawls):
    """/linked is linked from meta's /tdm only, whose content strip and skip withhold."""
    for action in ACTIONS:
        crawl = crawls[action]
        linked = crawl["records"].get(url(crawl, "meta", "/linked"))
        if action == "mark":
            assert linked is not None and linked.status.name == "FETCHED"
        else:
            assert linked is None, action
