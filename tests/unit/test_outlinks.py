import pytest

from owler import outlinks
from owler.conf import load_conf
from owler.parse.page import PageHandler


def test_split_and_join_both_forms():
    assert outlinks.split("http://a/") == ("http://a/", "")
    assert outlinks.split(["http://a/", "x"]) == ("http://a/", "x")
    assert outlinks.split(["http://a/"]) == ("http://a/", "")
    assert outlinks.join("http://a/", "") == "http://a/"
    assert outlinks.join("http://a/", "x") == ["http://a/", "x"]
    for bad in (None, 3, [], [3, "x"], {"url": "http://a/"}):
        with pytest.raises(TypeError):
            outlinks.split(bad)


def _page(conf_over):
    conf = load_conf()
    conf.update(conf_over)
    html = (b'<html><body><a href="/x">  The\n X  </a><a href="/y"></a>'
            b'<meta http-equiv="refresh" content="0; url=/z"></body></html>')
    md = {"_raw.headers": ["Content-Type: text/html"]}
    return PageHandler(conf).handle_page("http://h.example/", html, md)


def test_parser_keeps_anchor_texts_when_they_are_used_unless_disabled():
    out = _page({"metadata.persist": ["anchors"]})
    assert out.outlinks == [["http://h.example/x", "The X"], "http://h.example/y",
                            "http://h.example/z"]
    assert _page({"metadata.transfer": ["anch*"]}).outlinks[0] == ["http://h.example/x", "The X"]
    plain = ["http://h.example/x", "http://h.example/y", "http://h.example/z"]
    assert _page({"metadata.persist": ["anchors"], "track.anchors": False}).outlinks == plain
    assert _page({}).outlinks == plain  # nobody stores or passes them on: not extracted


def test_parser_extracts_the_text_only_for_a_text_signature():
    import hashlib

    html = (b'<html><body><a href="/x">  The\n X  </a><a href="/y"></a>'
            b'<meta http-equiv="refresh" content="0; url=/z"></body></html>')
    plain = _page({})
    assert plain.text == ""  # nothing reads it
    assert plain.metadata["signature"] == [hashlib.md5(html).hexdigest()]
    text = _page({"signature.useText": True})
    assert text.text == "The X"
    assert text.metadata["signature"] == [hashlib.md5(b"The X").hexdigest()]


def test_a_batch_travels_as_one_string_and_comes_back():
    items = [["http://h.example/x", "The\tX\nnext"], "http://h.example/y", ("http://h.example/z", "")]
    wire = outlinks.encode(items)
    assert isinstance(wire, str) and wire.count("\n") == 2
    assert outlinks.decode(wire) == [("http://h.example/x", "The X next"),
                                     ("http://h.example/y", ""), ("http://h.example/z", "")]
    assert outlinks.decode(["http://a/", ["http://b/", "b"]]) == [("http://a/", ""),
                                                                  ("http://b/", "b")]
    assert outlinks.decode("") == [] and outlinks.decode(None) == []
    with pytest.raises(TypeError):
        outlinks.decode(42)


def test_recently_sent_links_are_sent_once_unless_replayed():
    sent = outlinks.RecentlySent(3)
    assert sent.new(["http://a/", ["http://b/", "B"], "http://a/"]) == ["http://a/", ["http://b/", "B"]]
    assert sent.new(["http://a/", "http://c/"]) == ["http://c/"]
    # a replayed batch goes whole: its first emission may not have been stored
    assert sent.new(["http://a/", "http://b/", "http://d/"], replay=True) == [
        "http://a/", "http://b/", "http://d/"]
    # bounded: d pushed the oldest (a) out, so a is sent again
    assert sent.new(["http://a/", "http://d/"]) == ["http://a/"]
    assert outlinks.RecentlySent(0).new(["http://a/", "http://a/"]) == ["http://a/", "http://a/"]


def test_recently_sent_keeps_the_newest_through_a_long_churn():
    # many more URLs than it holds, asked about before each send as the gate does: it holds
    # exactly the last `size` URLs it sent, and asking does not make a URL newer
    sent = outlinks.RecentlySent(1000)
    for i in range(20_000):
        url = f"http://h{i % 7}.example/p{i}"
        assert url not in sent
        assert sent.new([url, url]) == [url]
        assert "http://h0.example/p0" not in sent or i < 1000
    assert all(f"http://h{i % 7}.example/p{i}" in sent for i in range(19_000, 20_000))
    assert not any(f"http://h{i % 7}.example/p{i}" in sent for i in range(19_000))
    # an old URL is new again and pushes out the oldest held (p19000); p19001 is still held
    assert sent.new(["http://h1.example/p18999", "http://h3.example/p19001"]) == [
        "http://h1.example/p18999"]
    assert "http://h2.example/p19000" not in sent
