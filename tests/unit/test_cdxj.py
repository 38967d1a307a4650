"""owler.warc.format.cdxj: SURT keys as pywb computes them, the index line of each kind of
record (what pywb's own indexer writes for it, byte for byte), and the look-ups of every capture
of a host or under a URL prefix in sorted indices, by binary search. The keys are checked against
the ``surt`` package on thousands of URLs and the lines against pywb's indexer on real crawls in
tests/integration/test_cdxj_pywb.py; the expected values here are what those tools gave."""

from __future__ import annotations

import gzip
import io
import json
import random
from pathlib import Path

import pytest

from owler.warc import WARCWriter
from owler.warc.format import cdxj
from owler.warc.format import serialize as R
from owler.warc.format.reader import InputRecord, iter_records

# what surt.surt (0.3.1, pywb 2.10's) gives for each
SURT = {
    "http://www.Example.com/": "com,example)/",
    "https://example.com:443/a/b/": "com,example)/a/b",
    "http://example.com:8080/A/B/?z=1&a=2&A=3": "com,example:8080)/a/b?a=2&a=3&z=1",
    "http://www2.example.com/a/./b/../c//d#frag": "com,example)/a/c/d",
    "http://127.0.0.1:8080/": "1,0,0,127:8080)/",
    "http://2130706433/x": "1,0,0,127)/x",
    "http://0177.0.0.1/": "1,0,0,127)/",
    "http://xn--bcher-kva.example/%C3%BC": "example,xn--bcher-kva)/%c3%bc",
    "http://bücher.example/ü": "example,xn--bcher-kva)/%c3%bc",
    "http://ex%41mple.com/%2541": "com,example)/a",
    "http://example.com/?": "com,example)/",
    "http://example.com/page?jsessionid=0123456789abcdef0123456789abcdef&b=2&a":
        "com,example)/page?a&b=2",
    "http://example.com/(a(0123456789abcdefghijklmn))/Page.aspx": "com,example)/page.aspx",
    "example.com/a b": "com,example)/a%20b",
    "http://[::1]:8080/x": "::1:8080)/x",
    "dns:example.com": "dns:example.com",
    "http://example.com./x": "com,example)/x",
    "http://http://example.com/x": "com,example)/x",
    "https://example.co/": "co,example)/",
    "http://example.com:80/": "com,example)/",
}


@pytest.mark.parametrize("url", sorted(SURT))
def test_surt_keys_are_the_surt_packages(url):
    assert cdxj.surt(url) == SURT[url]


def test_surt_refuses_what_pywb_cannot_look_up():
    for bad in ("http://example.com:99999/", "http://example.com:8o/", " \t"):
        with pytest.raises(cdxj.CDXJError):
            cdxj.surt(bad)
    assert cdxj.surt("") == "-"
    assert cdxj.surt_host("WWW.Bücher.Example") == "example,xn--bcher-kva"
    assert cdxj.surt_host("example.com:8080") == "com,example"


def test_timestamps_cut_the_fraction_and_refuse_what_is_not_a_date():
    assert cdxj.timestamp14("2026-11-30T12:34:56.999999Z") == "20261130123456"
    assert cdxj.timestamp14("2026-11-30T12:34:56Z") == "20261130123456"
    assert cdxj.timestamp14("2026-11-30") == "20261130000000"
    assert cdxj.timestamp14("2026-1-3T4:5:6Z") == "20260103040506"
    for bad in ("yesterday", "2026-13-01T00:00:00Z", "26-11-30T00:00:00Z", "2026-11-30T25:00:00Z"):
        with pytest.raises(cdxj.CDXJError, match="not a WARC-Date"):
            cdxj.timestamp14(bad)


# -- lines ----------------------------------------------------------------------------------------

def written(tmp_path: Path, **kw) -> tuple[Path, list[InputRecord]]:
    """One exchange written by the crawl's writer (no index of its own), and its records."""
    w = WARCWriter(tmp_path, prefix="T", partition="00", cdxj=False)
    args = dict(fetch_time=1_764_504_000.25, request_line_and_headers=b"GET / HTTP/1.1\r\n",
                status_line="HTTP/1.1 200 OK",
                response_headers=[("Content-Type", "text/html; charset=utf-8")],
                payload=b"<html>hello</html>")
    args.update(kw)
    w.write_exchange(kw.pop("url", "http://www.example.com/a?b=2&a=1"),
                     **{k: v for k, v in args.items() if k != "url"})
    w.close()
    [path] = tmp_path.glob("*.warc.gz")
    with open(path, "rb") as f:
        return path, [r for r in iter_records(f) if isinstance(r, InputRecord)]


def fields(line: str) -> dict:
    return cdxj.line_fields(line)[2]


def test_a_response_line_is_pywbs(tmp_path):
    path, recs = written(tmp_path, metadata='{"signals": 1}')
    assert [r.type for r in recs] == ["warcinfo", "request", "response", "metadata"]
    lines = [cdxj.member_line(r.raw, r.offset, path.name) for r in recs]
    assert lines[0] is None and lines[1] is None and lines[3] is None  # metadata: not indexed
    resp = recs[2]
    digest = resp.headers["warc-payload-digest"][5:]
    assert lines[2] == (
        f'com,example)/a?a=1&b=2 20251130120000 {{"url": "http://www.example.com/a?b=2&a=1", '
        f'"mime": "text/html", "status": "200", "digest": "{digest}", "length": '
        f'"{len(resp.raw)}", "offset": "{resp.offset}", "filename": "{path.name}"}}')
    # the same line from the record parsed whole, and from a file read front to back
    assert cdxj.record_line(resp.headers, resp.block, resp.offset, len(resp.raw),
                            path.name) == lines[2]
    with open(path, "rb") as f:
        assert list(cdxj.file_lines(f, path.name)) == [lines[2]]
    # and from the heads the writer has in hand (WARC headers as pairs, the HTTP head)
    head = resp.block[:resp.block.find(b"\r\n\r\n") + 4]
    pairs = [(k.upper(), v) for k, v in resp.headers.items()]
    assert cdxj.heads_line(pairs, head, resp.offset, len(resp.raw), path.name) == lines[2]


def test_revisits_resources_and_odd_heads(tmp_path):
    _, recs = written(tmp_path, status_line="HTTP/1.1 304 Not Modified", response_headers=[],
                      payload=b"", revisit="server-not-modified",
                      refers_to_date="2025-11-29T00:00:00Z", payload_digest="sha1:ABCD")
    f = fields(cdxj.member_line(recs[2].raw, 7, "x.warc.gz"))
    assert f == {"url": "http://www.example.com/a?b=2&a=1", "mime": "warc/revisit",
                 "digest": "ABCD", "length": str(len(recs[2].raw)), "offset": "7",
                 "filename": "x.warc.gz"}  # no status for a revisit, as pywb
    # a resource: its WARC Content-Type, its digest computed when it has none
    block = b"some text"
    rec = {"warc-type": "resource", "warc-target-uri": "<http://e.example/r.txt>",
           "warc-date": "2025-01-01T00:00:00Z", "content-type": "text/plain; charset=ascii",
           "warc-identified-payload-type": "text/plain"}
    f = fields(cdxj.record_line(rec, block, 0, 10, "r.warc.gz"))
    assert f["url"] == "http://e.example/r.txt" and f["mime"] == "text/plain"
    assert f["mime-detected"] == "text/plain" and "status" not in f
    assert f["digest"] == R.sha1_b32(block)[5:]
    # a response without Content-Type or payload digest; folded and odd header lines
    resp = {"warc-type": "response", "warc-target-uri": "https://e.example/",
            "warc-date": "2025-01-01T00:00:00Z"}
    block = b"HTTP/1.1 404 Not Found\nServer: x\n\nbody"
    f = fields(cdxj.record_line(resp, block, 0, 1, "r.warc.gz"))
    assert (f["mime"], f["status"], f["digest"]) == ("unk", "404", R.sha1_b32(b"body")[5:])
    block = b"HTTP/1.1 200 OK\r\ncontent-type : text/html\r\n ;x=1\r\n\r\n"
    assert fields(cdxj.record_line(resp, block, 0, 1, "r"))["mime"] == "text/html"
    block = b"HTTP/1.1 200 OK\r\nContent-Type:\r\n  text/html\r\n\r\n"  # warcio: "  text/html"
    assert "mime" not in fields(cdxj.record_line(resp, block, 0, 1, "r"))  # cut at its space
    block = b"HTTP/1.0 204 Error somewhere\r\n\r\n"
    assert "status" not in fields(cdxj.record_line(resp, block, 0, 1, "r"))
    for other in ("request", "warcinfo", "metadata", "conversion"):
        assert cdxj.record_line({**resp, "warc-type": other}, block, 0, 1, "r") is None
    assert cdxj.record_line({**resp, "content-type": "application/warc-fields"}, block, 0, 1,
                            "r") is None
    with pytest.raises(cdxj.CDXJError, match="no WARC-Target-URI"):
        cdxj.record_line({**resp, "warc-target-uri": ""}, block, 0, 1, "r")
    with pytest.raises(cdxj.CDXJError, match="not a WARC-Date"):
        cdxj.record_line({**resp, "warc-date": "soon"}, block, 0, 1, "r")


def test_a_member_whose_heads_are_long_is_inflated_further(tmp_path):
    big = [(f"X-Header-{i}", "v" * 200) for i in range(40)]  # an HTTP head of 9 KiB
    path, recs = written(tmp_path, response_headers=[("Content-Type", "text/plain"), *big],
                         url="http://e.example/" + "p" * 5000)
    line = cdxj.member_line(recs[2].raw, recs[2].offset, path.name)
    assert fields(line)["mime"] == "text/plain" and line.startswith("example,e)/" + "p" * 5000)
    with pytest.raises(cdxj.CDXJError, match="corrupt gzip member|ends inside"):
        cdxj.member_line(recs[2].raw[:-30], 0, "x")
    with pytest.raises(cdxj.CDXJError, match="not a WARC record"):
        cdxj.member_line(gzip.compress(b"HTTP/1.1 200 OK\r\n\r\n"), 0, "x")


def test_member_lines_split_several_members(tmp_path):
    path, recs = written(tmp_path)
    both = recs[1].raw + recs[2].raw  # a request member then the response's
    assert cdxj.member_lines(both, 100, "f") == [
        cdxj.member_line(recs[2].raw, 100 + len(recs[1].raw), "f")]
    assert cdxj.member_lines(recs[2].raw, 5, "f") == [cdxj.member_line(recs[2].raw, 5, "f")]
    plain = gzip.decompress(recs[2].raw)
    assert cdxj.raw_line(plain, 5, len(recs[2].raw), "f") == cdxj.member_line(recs[2].raw, 5, "f")


def test_lines_sort_by_their_bytes_and_read_back():
    lines = ['com,example)/b 2025 {"url": "b"}', 'com,example)/ 2025 {"url": "a"}',
             'com,example,www)/ 2025 {"url": "c"}', 'com,example:81)/ 2025 {"url": "d"}']
    data = cdxj.sorted_lines(lines)
    assert data.decode().splitlines() == sorted(lines) and data.endswith(b"\n")
    assert cdxj.line_fields(data.splitlines()[0]) == ("com,example)/", "2025", {"url": "a"})
    for bad in ("no json", "k ts [1]", "k ts {bad"):
        with pytest.raises(cdxj.CDXJError, match="not a CDXJ line"):
            cdxj.line_fields(bad)


# -- look-ups -------------------------------------------------------------------------------------

HOSTS = ["example.com", "www.example.com", "a.example.com", "b.a.example.com", "example.co",
         "badexample.com", "example-shop.com", "example1.com", "examples.com", "xn--bcher-kva.example",
         "sub.xn--bcher-kva.example", "127.0.0.1", "co.uk", "example.co.uk", "www.example.co.uk"]


def capture_urls(n_per_host: int = 3) -> list[str]:
    urls = []
    for host in HOSTS:
        for port in ("", ":8080"):
            for scheme in ("http", "https"):
                for i in range(n_per_host):
                    urls.append(f"{scheme}://{host}{port}/p{i}")
                urls.append(f"{scheme}://{host}{port}/private/x")
                urls.append(f"{scheme}://{host}{port}/private")
                urls.append(f"{scheme}://{host}{port}/Private/y")
                urls.append(f"{scheme}://{host}{port}/privateer")
    return urls


def index_of(urls: list[str], path: Path, name: str = "f.warc.gz") -> Path:
    lines = []
    for i, url in enumerate(urls):
        rec = {"warc-type": "response", "warc-target-uri": url,
               "warc-date": f"2025-01-01T00:00:{i % 60:02d}Z", "warc-payload-digest": "sha1:D"}
        lines.append(cdxj.record_line(rec, b"HTTP/1.1 200 OK\r\n\r\n", i * 1000, 1000, name))
    path.write_bytes(cdxj.sorted_lines(lines))
    return path


def found(paths, target) -> list[str]:
    return sorted(c.url for c in cdxj.find_captures(paths, target))


def expected(urls, host_ok, rest_ok=lambda rest: True) -> list[str]:
    out = []
    for u in urls:
        hostport, _, rest = u.split("://", 1)[1].partition("/")
        if host_ok(hostport) and rest_ok("/" + rest):
            out.append(u)
    return sorted(out)


def test_a_host_matches_itself_and_its_subdomains_on_label_boundaries(tmp_path):
    urls = capture_urls()
    random.Random(3).shuffle(urls)
    idx = index_of(urls, tmp_path / "a.cdxj")

    def host_is(name):
        return lambda hp: (h := hp.split(":")[0]) == name or h.endswith("." + name)

    assert found([idx], "example.com") == expected(urls, host_is("example.com"))
    assert "http://badexample.com/p0" not in found([idx], "example.com")
    assert found([idx], "example.co") == expected(urls, host_is("example.co"))  # not .com
    assert found([idx], "a.example.com") == expected(urls, host_is("a.example.com"))
    # www is part of the host name here, though the keys drop it
    assert found([idx], "www.example.com") == expected(urls, host_is("www.example.com"))
    assert found([idx], "Bücher.example") == expected(urls, host_is("xn--bcher-kva.example"))
    assert found([idx], "127.0.0.1") == expected(urls, host_is("127.0.0.1"))
    assert found([idx], "example.com:8080") == expected(
        urls, lambda hp: hp.endswith(":8080") and host_is("example.com")(hp))
    assert found([idx], "co.uk") == expected(urls, host_is("co.uk"))
    assert found([idx], "nothing.example") == []
    cap = next(cdxj.find_captures([idx], "b.a.example.com"))
    assert (cap.file, cap.length, cap.status, cap.mime, cap.digest, cap.index) == (
        "f.warc.gz", 1000, "200", "unk", "D", idx)
    assert cap.offset == urls.index(cap.url) * 1000 and len(cap.timestamp) == 14


def test_a_url_prefix_ignores_the_scheme_and_keeps_the_path_as_written(tmp_path):
    urls = capture_urls()
    idx = index_of(urls, tmp_path / "a.cdxj")
    assert found([idx], "https://example.com/private/") == expected(
        urls, lambda hp: hp == "example.com", lambda rest: rest.startswith("/private/"))
    assert found([idx], "example.com/private") == expected(
        urls, lambda hp: hp == "example.com", lambda rest: rest.startswith("/private"))
    assert found([idx], "http://WWW.example.com:8080/Private/") == expected(
        urls, lambda hp: hp == "www.example.com:8080", lambda rest: rest.startswith("/Private/"))
    assert found([idx], "http://example.com:80/p1") == ["http://example.com/p1",
                                                        "https://example.com/p1"]
    assert found([idx], "https://bücher.example/p") == expected(
        urls, lambda hp: hp == "xn--bcher-kva.example", lambda rest: rest.startswith("/p"))
    assert found([idx], "http://example.com/") == expected(urls, lambda hp: hp == "example.com")


def test_look_ups_read_only_the_ranges_they_need(tmp_path, monkeypatch):
    # a large index: 60,000 lines of 600 hosts, about 13 MB
    urls = [f"http://h{h:03d}.example.org/page/{i}" for h in range(600) for i in range(100)]
    idx = index_of(urls, tmp_path / "big.cdxj")
    size = idx.stat().st_size
    read = []

    class Counted(io.FileIO):
        def readline(self, *a):
            line = super().readline(*a)
            read.append(len(line))
            return line

        def __iter__(self):
            return self

        def __next__(self):
            line = self.readline()
            if not line:
                raise StopIteration
            return line

    monkeypatch.setattr(cdxj, "open", lambda p, mode: Counted(p, "r"), raising=False)
    assert found([idx], "h417.example.org") == sorted(
        f"http://h417.example.org/page/{i}" for i in range(100))
    assert sum(read) < 100_000 < size  # a few probes and the host's own lines
    read.clear()
    assert found([idx], "http://h417.example.org/page/7") == [
        "http://h417.example.org/page/7", "http://h417.example.org/page/70",
        "http://h417.example.org/page/71", "http://h417.example.org/page/72",
        "http://h417.example.org/page/73", "http://h417.example.org/page/74",
        "http://h417.example.org/page/75", "http://h417.example.org/page/76",
        "http://h417.example.org/page/77", "http://h417.example.org/page/78",
        "http://h417.example.org/page/79"]
    assert sum(read) < 30_000


def test_several_indices_and_the_folder_listing(tmp_path):
    d = tmp_path / "warc"
    d.mkdir()
    a = index_of(["http://e.example/1", "http://x.example/1"], d / "A.warc.gz.cdxj", "A.warc.gz")
    b = index_of(["http://e.example/2"], d / "B.warc.gz.cdxj", "B.warc.gz")
    (d / "C.warc.gz.cdxj.part").write_text("being written\n")
    (d / "C.warc.gz").write_bytes(b"")
    assert cdxj.cdxj_files(d) == [a, b] and cdxj.cdxj_files(tmp_path / "none") == []
    caps = list(cdxj.find_captures(cdxj.cdxj_files(d), "e.example"))
    assert [(c.file, c.url, c.index) for c in caps] == [
        ("A.warc.gz", "http://e.example/1", a), ("B.warc.gz", "http://e.example/2", b)]


def test_bad_targets_and_bad_lines_are_clear_errors(tmp_path):
    idx = index_of(["http://e.example/1"], tmp_path / "a.cdxj")
    for bad in ("", "   ", "two words", "/path/only", "http://:80/"):
        with pytest.raises(cdxj.CDXJError):
            list(cdxj.find_captures([idx], bad))
    broken = tmp_path / "b.cdxj"
    broken.write_text('example,e)/1 2025 {"url": "http://e.example/1"}\n')  # no offset
    with pytest.raises(cdxj.CDXJError, match="without"):
        list(cdxj.find_captures([broken], "e.example"))
    json.loads(idx.read_text().split(" ", 2)[2])  # a line's JSON is JSON
