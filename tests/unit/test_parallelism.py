"""parallelism.<component>: the tasks of each component of a topology, from the conf file or -o, for
`owler run` (the Flux definition) and `owler cluster submit` (the topology class, built by sparse in
its own process from OWLER_CONF and OWLER_OPTIONS)."""

from __future__ import annotations

import pytest

from owler import conf as C
from owler.conf import ConfError, load_conf, project_root
from owler.run.runner import check_topology_conf, flux_definition, load_topology

ROOT = project_root()


def tasks(flux: dict) -> dict[str, int]:
    return {c["id"]: c["parallelism"] for c in flux["spouts"] + flux["bolts"]}


def test_owler_run_takes_the_parallelism_of_its_conf():
    conf = load_conf(None, ["parallelism.fetcher=4", "parallelism.parser=2"])
    cls = load_topology(ROOT, "explorative", conf)  # as owler run builds it
    check_topology_conf(cls, ROOT, conf)
    got = tasks(flux_definition(cls, "explorative", conf, "streamparse_run"))
    assert got["fetcher"] == 4 and got["parser"] == 2
    assert {k: v for k, v in got.items() if k not in ("fetcher", "parser")} == dict.fromkeys(
        ["spout", "partitioner", "urlfilter", "blacklist", "status"], 1)


def test_a_submitted_topology_class_reads_the_options_from_the_environment(monkeypatch, tmp_path):
    conf_file = tmp_path / "crawl.yaml"
    conf_file.write_text("parallelism.status: 3\nparallelism.spout: 5\n")
    monkeypatch.setenv("OWLER_CONF", str(conf_file))
    monkeypatch.setenv(C.OPTIONS_ENV, "parallelism.spout=2\n\nparallelism.parser=2\n")
    cls = load_topology(ROOT, "warc2warc")  # the class body runs again, as in sparse's process
    par = {spec.name: spec.par for spec in cls.specs}
    assert par == {"spout": 2, "parser": 2, "status": 3}


@pytest.mark.parametrize("topology,option,message", [
    ("explorative", "parallelism.fetchr=2", "no component 'fetchr'"),
    # the fetcher archives what it fetches: no writer of its own since issue 20
    ("explorative", "parallelism.warc=2", "no component 'warc'"),
    ("explorative", "parallelism.fetcher=0", r"expected 1\.\.1024"),
    ("explorative", "parallelism.fetcher=many", "expected an integer"),
    ("sitemap", "parallelism.spout_seeds=2", "spout_seeds runs one task only"),
])
def test_bad_parallelism_is_a_clear_error(topology, option, message):
    cls = load_topology(ROOT, topology)
    with pytest.raises(ConfError, match=message):
        check_topology_conf(cls, ROOT, load_conf(None, [option]))


# --- where pages are archived (owler/warc/crawl/archiver.py: in the fetcher) --------------------
def inputs(cls) -> dict[str, dict[str, str]]:
    return {s.name: {k.componentId: str(v) for k, v in s.inputs.items()} for s in cls.specs}


#: how the fetcher's pages reach their first reader: the explorative parser by queue key (its
#: near-duplicate memory, parser.grouping), the sitemap parser in the worker (it passes the HTML
#: pages on to the parser by key)
PAGES = {"explorative": "fields(['key'])", "sitemap": "LOCAL_OR_SHUFFLE"}


@pytest.mark.parametrize("topology,reader", [("explorative", "parser"), ("sitemap", "sitemap")])
@pytest.mark.parametrize("options", [[], ["warc.s3.bucket=crawl"],
                                     ["warc.s3.bucket=crawl", "warc.s3.stream=false"],
                                     ["warc.enabled=false"]])
def test_pages_go_from_the_fetcher_to_the_parser(topology, reader, options):
    """The fetcher archives a page before it emits it, so no component sits between them. A
    replay (streamed to S3) meets the task that stored it: the fetcher's input is grouped by
    queue key."""
    got = inputs(load_topology(ROOT, topology, load_conf(None, options)))
    assert "warc" not in got
    assert got[reader] == {"fetcher": PAGES[topology]}
    assert got["fetcher"] == {"partitioner": "fields(['key'])"}


@pytest.mark.parametrize("topology", ["explorative", "sitemap"])
@pytest.mark.parametrize("options,message", [
    (["warc.s3.stream.part.size=1048576"], "S3 parts are at least 5 MiB"),
    (["warc.s3.max.age=120", "topology.message.timeout.secs=60"], "a page held longer is replayed"),
    (["warc.s3.max.age=0"], "expected more than 0"),
    (["warc.s3.dedup.window=10", "topology.message.timeout.secs=60"], "must cover at least"),
])
def test_bad_streaming_keys_are_a_clear_error(topology, options, message):
    conf = load_conf(None, ["warc.s3.bucket=crawl", *options])
    with pytest.raises(ConfError, match=message):
        check_topology_conf(load_topology(ROOT, topology, conf), ROOT, conf)
    plain = load_conf(None, options)  # without a bucket nothing is streamed: not checked
    check_topology_conf(load_topology(ROOT, topology, plain), ROOT, plain)


@pytest.mark.parametrize("options,message", [
    (["warc2warc.progress.backend=redis"], "warc2warc.progress.backend: unknown backend 'redis'"),
    (["warc.s3.bucket=out", "warc.s3.stream.part.size=1048576"], "S3 parts are at least 5 MiB"),
    (["warc.s3.bucket=out", "warc.s3.max.age=30", "topology.message.timeout.secs=20"], "a page held longer is replayed"),
])
def test_bad_warc2warc_keys_are_a_clear_error(options, message):
    conf = load_conf(None, options)
    with pytest.raises(ConfError, match=message):
        check_topology_conf(load_topology(ROOT, "warc2warc", conf), ROOT, conf)


def test_warc2warc_records_are_copied_by_the_spout():
    """The spout copies every record and emits only the HTTP responses, to the parser: no copy
    bolt, no ``archive`` stream."""
    got = inputs(load_topology(ROOT, "warc2warc", load_conf(None, [])))
    assert set(got) == {"spout", "parser", "status"}
    assert got["parser"] == {"spout": "fields(['key'])"}
    # the copy finds replays in its progress store: the writer's dedup window is not its concern
    conf = load_conf(None, ["warc.s3.bucket=out", "warc.s3.dedup.window=10"])
    check_topology_conf(load_topology(ROOT, "warc2warc", conf), ROOT, conf)
    conf = load_conf(None, ["parallelism.warc=2"])
    with pytest.raises(C.ConfError, match="no component 'warc'"):
        check_topology_conf(load_topology(ROOT, "warc2warc", conf), ROOT, conf)


@pytest.mark.parametrize("topology,reader", [("explorative", "parser"), ("sitemap", "sitemap")])
def test_warc_output_off_wires_the_parser_to_the_fetcher(topology, reader):
    """warc.enabled: false (a crawl that only feeds the frontier or an index; the benchmark's
    like-for-like run against StormCrawler without WARC): no writer, the streaming keys unchecked."""
    conf = load_conf(None, ["warc.enabled=false", "warc.s3.bucket=crawl",
                            "warc.s3.stream.part.size=1"])
    cls = load_topology(ROOT, topology, conf)
    check_topology_conf(cls, ROOT, conf)
    wiring = inputs(cls)
    assert "warc" not in wiring
    assert wiring[reader] == {"fetcher": PAGES[topology]}


def test_warc2warc_refuses_warc_output_off():
    conf = load_conf(None, ["warc.enabled=false"])
    with pytest.raises(ConfError, match="warc2warc writes WARC files"):
        check_topology_conf(load_topology(ROOT, "warc2warc", conf), ROOT, conf)


@pytest.mark.parametrize("grouping,expected", [
    (None, "fields(['key'])"), ("key", "fields(['key'])"), ("local", "LOCAL_OR_SHUFFLE"),
    ("LOCAL", "LOCAL_OR_SHUFFLE")])
def test_the_parsers_take_pages_by_queue_key_unless_told_to_keep_them_local(grouping, expected):
    """parser.grouping: one parser task sees every page of a queue (owler/parse/simhash.py), or a
    page stays in its worker when a parser task runs there."""
    options = [] if grouping is None else [f"parser.grouping={grouping}"]
    for topology, parser, sender in (("explorative", "parser", "fetcher"),
                                     ("sitemap", "parser", "sitemap"),
                                     ("warc2warc", "parser", "spout")):
        got = inputs(load_topology(ROOT, topology, load_conf(None, options)))
        assert got[parser] == {sender: expected}, topology


def test_an_unknown_parser_grouping_is_a_clear_error():
    with pytest.raises(ConfError,
                       match="parser.grouping: expected one of key, local, got 'shuffle'"):
        load_topology(ROOT, "explorative", load_conf(None, ["parser.grouping=shuffle"]))
