"""warc2warc on real archives nobody on the project wrote, on real Storm (local mode).

Inputs: a Common Crawl 2014 sample (tests/data/warc, from the npm package warc), two wget crawls
of 18 hosts (from the PyPI package dolma), the warcbench crawls (browsertrix, wget, Scoop), the
sample archives of the PyPI package pywb
(wget 1.14, wpull, a crawl of iana.org whose chunked responses are stored de-chunked; downloaded
by ``make setup`` into .work/testdata), and, read in place, StormCrawler's WARCSpout fixture and
warcio's edge cases in ../shared/testdata/warc (reference material, never copied).

The judge is independent of the project's parsers: warcio reads the records and decodes their
bodies, BeautifulSoup's html.parser extracts the links of every archived HTML page, and only the
project's URL filters and blacklist (what ``owler check-url`` applies) decide which of those links
should reach the frontier. Every readable HTML page must be FETCHED, never an ERROR, and every
link the filters accept must be in the frontier. The run is made twice, once on each frontier:
SQLite, and the status index of a real OpenSearch node, written through the status updater's
pipelined bulks.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest
import zstandard
from bs4 import BeautifulSoup
from warcio.archiveiterator import ArchiveIterator
from yarl import URL

from owler.blacklist import Blacklist
from owler.conf import load_conf
from owler.filters import URLFilters, check_url
from owler.frontier import open_frontier
from owler.warc.format.reader import InputRecord, WARCReadError, iter_records
from tests.material import fetched, shared

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "warc"

#: input files each source gives (warc2warc reads *.warc and *.warc.gz only: warcio's .arc files
#: and example-bad.warc.gz.bad stay out): a source that shrinks fails the run, it does not
#: silently test less
PER_SOURCE = {"own": 6, "pywb": 13, "stormcrawler": 2, "warcio-github-test-data": 11}

pytestmark = pytest.mark.integration


def inputs() -> dict[str, Path]:
    """The real archives, by the name they get in the input folder."""
    folders = {"own": DATA, "pywb": fetched("pywb-2.10.0", "warcs", pattern="*.warc*")}
    for sub in ("stormcrawler", "warcio-github-test-data"):
        folders[sub] = shared("warc", sub, pattern="*.warc*")
    files = {f"{name}/{p.name}": p for name, folder in folders.items()
             for p in sorted(folder.glob("*.warc*")) if p.name.endswith((".warc", ".warc.gz"))}
    given = Counter(name.split("/")[0] for name in files)
    assert given == PER_SOURCE, f"input files per source: {dict(given)}, expected {PER_SOURCE}"
    return files


@pytest.fixture(scope="module", params=["sqlite", "opensearch"])
def run(request, tmp_path_factory):
    work = tmp_path_factory.mktemp(f"real-{request.param}")
    src = work / "input"
    for name, path in inputs().items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).symlink_to(path)
    conf = work / "conf.yaml"
    conf.write_text(f"warc2warc.input: {src}\n"
                    f"warc.dir: {work / 'warc'}\n"
                    "warc.prefix: REAL\n"
                    f"owler.work.dir: {work}\n"
                    f"frontier.sqlite.path: {work / 'frontier.sqlite'}\n")
    if request.param == "opensearch":  # the session's node; an index of this run's own
        node = request.getfixturevalue("opensearch")
        with conf.open("a") as fh:
            fh.write(node.conf_lines("real_archives_status"))
    env = {**os.environ, "OWLER_HOME": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "owler", "run", "warc2warc", "--conf", str(conf),
                           "--idle-exit", "5", "--time", "400"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # it ends because the input is done and every record acked, not at the time limit: a record
    # the frontier keeps refusing is replayed forever and holds the run open
    assert "stopped (idle for 5 s)" in proc.stdout, proc.stdout[-3000:]
    return {"work": work, "conf": load_conf(conf), "stdout": proc.stdout}


# -- the independent judge -------------------------------------------------------------------

def html_pages():
    """``(file, url, body, http headers)`` of every 200 text/html response warcio can read."""
    for name, path in inputs().items():
        with open(path, "rb") as fh:
            try:
                for rec in ArchiveIterator(fh):
                    if rec.rec_type != "response" or rec.http_headers is None:
                        continue
                    if rec.http_headers.get_statuscode() != "200":
                        continue
                    ctype = (rec.http_headers.get_header("Content-Type") or "").lower()
                    if "html" not in ctype:
                        continue
                    url = rec.rec_headers.get_header("WARC-Target-URI")
                    body = rec.content_stream().read()
                    if (rec.http_headers.get_header("Content-Encoding") or "").strip() == "zstd":
                        body = zstandard.ZstdDecompressor().stream_reader(
                            io.BytesIO(body), read_across_frames=True).read()
                    yield name, url, body, rec.http_headers
            except Exception:  # noqa: BLE001 - warcio gives up on a damaged file: its pages so far
                continue


@lru_cache(maxsize=1)
def bad_digests() -> frozenset[str]:
    """URLs of responses whose payload digest warcio, too, finds wrong."""
    out = set()
    for path in inputs().values():
        with open(path, "rb") as fh:
            try:
                for rec in ArchiveIterator(fh, check_digests=True):
                    rec.content_stream().read()
                    if rec.rec_type == "response" and rec.digest_checker.passed is False:
                        out.add(rec.rec_headers.get_header("WARC-Target-URI"))
            except Exception:  # noqa: BLE001 - damaged files: what warcio read
                continue
    return frozenset(out)


def urljoin(base: str, href: str) -> str:
    """RFC 3986 resolution of the characters as written (yarl; Python's urljoin drops empty path
    segments, which the standards keep); the filters' normaliser then encodes them."""
    return str(URL(base, encoded=True).join(URL(href.replace(" ", "%20"), encoded=True)))


def links_of(url: str, body: bytes, http_headers) -> list[str]:
    """The ``<a href>`` links a crawler that honours nofollow (rel, meta robots, X-Robots-Tag)
    follows, resolved against ``<base href>``: BeautifulSoup with Python's html.parser."""
    robots_header = (http_headers.get_header("X-Robots-Tag") or "").lower()
    if "nofollow" in robots_header or "none" in robots_header:
        return []
    charset = None
    ctype = http_headers.get_header("Content-Type") or ""
    if "charset=" in ctype.lower():
        charset = ctype.lower().split("charset=", 1)[1].split(";")[0].strip(" \"'")
    soup = BeautifulSoup(body, "html.parser", from_encoding=charset or None)
    for meta in soup.find_all("meta", attrs={"name": True, "content": True}):
        if meta["name"].strip().lower() == "robots":
            content = meta["content"].lower()
            if "nofollow" in content or "none" in content:
                return []
    base = url
    tag = soup.find("base", href=True)
    if tag is not None:
        try:
            base = urljoin(url, tag["href"].strip())
        except (ValueError, TypeError):
            pass
    out = []
    for a in soup.find_all("a", href=True):
        href = a["href"].strip()
        if not href or href.startswith("#") or "nofollow" in " ".join(a.get("rel") or []).lower():
            continue
        try:
            out.append(urljoin(base, href))
        except (ValueError, TypeError):
            continue
    return out


def visible_text(body: bytes) -> str:
    """The page's text but that of scripts, styles and templates, whitespace removed."""
    soup = BeautifulSoup(body, "html.parser")
    for tag in soup(["script", "style", "template", "noscript"]):
        tag.decompose()
    return "".join(soup.get_text().split())


@pytest.fixture(scope="module")
def expected(run):
    """``{page url: set of normalized links the filters and blacklist accept}``."""
    conf = run["conf"]
    filters = URLFilters.from_conf(conf)
    blacklist = Blacklist.from_conf(conf)
    pages: dict[str, set[str]] = {}
    for _, url, body, headers in html_pages():
        accepted = pages.setdefault(url, set())
        for link in links_of(url, body, headers):
            _, verdict, normalized, _ = check_url(conf, link, filters, url, {})
            if verdict == "ACCEPT" and normalized != url and not blacklist.match(normalized):
                accepted.add(normalized)
    return pages


def test_the_run_reads_every_real_archive(run):
    assert f"{len(inputs())} input WARC file(s)" in run["stdout"], run["stdout"]


def test_every_readable_html_page_is_fetched_not_an_error(run, expected):
    with open_frontier(run["conf"]) as f:
        statuses = {url: f.get(url) for url in expected}
    missing = sorted(u for u, s in statuses.items() if s is None)
    assert not missing, missing
    # ERROR only for a payload that is not what was captured (warcio agrees its digest is wrong)
    wrong = {u: (s.status.value, s.metadata.get("error.cause"))
             for u, s in statuses.items() if s.status.value not in ("FETCHED", "REDIRECTION")
             and not (s.metadata.get("error.cause") == ["warc.digest"] and u in bad_digests())}
    assert not wrong, wrong
    assert len(expected) >= 60  # distinct pages: CC, iana.org, wget, wpull, browsertrix, …
    # bodies stored already de-chunked or decoded were read as they were, and said so
    lenient = Counter(v for s in statuses.values() for v in s.metadata.get("warc.lenient", []))
    assert lenient["not-chunked"] >= 10 and lenient["not-encoded:gzip"] >= 1, lenient


def test_every_outlink_the_filters_accept_is_in_the_frontier(run, expected):
    wanted = set().union(*expected.values())
    with open_frontier(run["conf"]) as f:
        lost = sorted(u for u in wanted if f.get(u) is None)
    print(f"\n{len(wanted)} distinct accepted outlinks of {len(expected)} HTML pages; "
          f"{len(wanted) - len(lost)} in the frontier")
    assert len(wanted) >= 4000
    assert not lost, f"{len(lost)} of {len(wanted)} lost, e.g. {lost[:10]}"


#: Inputs whose damage costs records that warcio still reads (it trusts a Content-Length that the
#: record's end contradicts, or lines ending in CR CR LF); the reader reports each as a problem.
#: (Records that end in too few or too many line ends are read: pywb's example-extra.warc.)
DAMAGED = {
    "pywb/example.warc": "a record followed by stray bytes instead of CRLF CRLF",
    "pywb/example-url-agnostic-orig.warc.gz": "a warcinfo whose Content-Length exceeds its member",
    "pywb/example-url-agnostic-revisit.warc.gz": "a warcinfo whose Content-Length exceeds its member",
    "pywb/missing-status-text.warc": "header lines ending in CR CR LF",
    "warcio-github-test-data/example-trunc.warc": "a truncated last record",
    "warcio-github-test-data/example-wrong-chunks.warc.gz": "gzip members that split records",
}


def record_ids(data: bytes) -> list[str]:
    out = []
    try:
        for rec in ArchiveIterator(io.BytesIO(data)):
            if (rec.rec_headers.get_header("WARC-Filename") or "").startswith("REAL"):
                continue  # the warcinfo record of an output file
            out.append(rec.rec_headers.get_header("WARC-Record-ID"))
    except Exception:  # noqa: BLE001 - what warcio read before the damage
        pass
    return out


def test_every_record_is_archived_once_but_those_of_known_damage(run):
    archived = Counter()
    for path in (run["work"] / "warc").glob("*.warc.gz"):
        archived.update(record_ids(path.read_bytes()))
    archived.pop(None, None)
    given = Counter()  # several inputs hold copies of one record (the same example.com crawl)
    per_file = {name: record_ids(path.read_bytes()) for name, path in inputs().items()}
    assert set(DAMAGED) <= set(per_file), set(DAMAGED) - set(per_file)  # each entry is read
    for ids in per_file.values():
        given.update(ids)
    given.pop(None, None)
    # nothing archived twice: where warcio stops at damage, the records the reader went on with
    read_on = Counter()
    for path in inputs().values():
        with open(path, "rb") as fh:
            try:
                for item in iter_records(fh):
                    if isinstance(item, InputRecord):
                        read_on[item.headers.get("warc-record-id")] += 1
            except WARCReadError:
                pass
    assert not [i for i in archived if archived[i] > max(given[i], read_on[i])]
    in_damaged = Counter(i for name, ids in per_file.items() if name in DAMAGED for i in ids)
    unexplained = {i: given[i] - archived[i] for i in given
                   if given[i] - archived[i] > in_damaged[i]}
    assert not unexplained, [(n, i) for n, ids in per_file.items() for i in ids if i in unexplained]
    assert sum(max(0, given[i] - archived[i]) for i in given) <= 12
    assert sum(archived.values()) >= 500


def test_the_parse_filters_fill_the_page_metadata(run, expected):
    """Issue 18: the archived pages get what a crawl's pages get from the shipped parse filters:
    language, page metadata, risk class (the pages are English mostly; iana.org, CC, dolma)."""
    with open_frontier(run["conf"]) as f:
        fetched = [r for r in (f.get(u) for u in expected) if r and r.status.value == "FETCHED"]
    assert len(fetched) >= 50
    langs = Counter((r.metadata.get("lang") or ["-"])[0] for r in fetched)
    assert langs["en"] >= 0.8 * len(fetched), langs
    captures = Counter(url for _, url, _, _ in html_pages())
    texts = {url: visible_text(body) for _, url, body, _ in html_pages()}
    once = [r for r in fetched if captures[r.url] == 1]  # (several captures: the last one's)
    assert len(once) >= 0.9 * len(fetched)
    for r in once:
        md = r.metadata
        # the parser's outlinks (before the URL filters) hold at least the distinct links the
        # judge saw accepted; a page has text for the parser exactly when it has for the judge
        assert int(md["parse.outlinks.count"][0]) >= len(expected[r.url]), (r.url, md)
        assert (int(md["parse.text.length"][0]) > 0) == bool(texts[r.url]), (r.url, md)
    for r in fetched:
        md = r.metadata
        assert md["risk.classes"] == ["malicious", "adult"]
        assert "parse.filters.failed" not in md, (r.url, md["parse.filters.failed"])
    sources = Counter(r.metadata["lang.source"][0] for r in fetched if "lang.source" in r.metadata)
    assert sources["text"] >= 0.7 * len(fetched), sources
    assert sum(1 for r in fetched if "parse.description" in r.metadata) >= 5
    assert Counter(r.metadata.get("risk", ["-"])[0] for r in fetched)["benign"] >= 0.9 * len(fetched)
