"""Tests for owler.filters: the urlfilters.json chain and each filter built from its params
(StormCrawler's BasicURLFilterTest style)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from owler.filters import URLFilter, URLFilters, URLFilterSetupError, check_url, load_filter_class
from owler.filters.basic import BasicURLFilter, BasicURLNormalizer, SelfURLFilter
from owler.filters.depth import MaxDepthFilter
from owler.filters.host import HostURLFilter
from owler.filters.metadata import MetadataFilter
from owler.filters.regex import DEFAULT_RULES_FILE, RegexURLFilter
from owler.filters.regex import lowercase_form as re_lowercase_form

ROOT = "org.apache.stormcrawler.filtering.URLFilters"
URL_DATA = Path(__file__).resolve().parents[1] / "data" / "url"
DEFAULT_RULES = Path(__file__).resolve().parents[2] / "resources" / DEFAULT_RULES_FILE


def make(cls, **params):
    f = cls()
    f.name = cls.__name__
    f.configure({}, params)
    return f


# ---- BasicURLNormalizer ------------------------------------------------------------------------


def test_normalizer_defaults():
    f = make(BasicURLNormalizer)
    assert f.filter(None, {}, "HTTP://Foo.COM:80/a/./b/../c.html#top") == "http://foo.com/a/c.html"
    assert f.filter(None, {}, "mailto:x@y.z") is None
    assert f.filter(None, {}, "not a url") is None


def test_normalizer_keeps_anchor_when_asked():
    f = make(BasicURLNormalizer, removeAnchorPart=False)
    assert f.filter(None, {}, "http://foo.com/a#top") == "http://foo.com/a#top"


def test_normalizer_unmangle_query():
    f = make(BasicURLNormalizer)
    assert f.filter(None, {}, "http://foo.com/page&a=1&b=2") == "http://foo.com/page?a=1&b=2"
    assert f.filter(None, {}, "http://foo.com/a&b/page") == "http://foo.com/a&b/page"  # not last segment
    assert f.filter(None, {}, "http://foo.com/page&ab") == "http://foo.com/page&ab"  # no '='
    off = make(BasicURLNormalizer, unmangleQueryString=False)
    assert off.filter(None, {}, "http://foo.com/page&a=1") == "http://foo.com/page&a=1"


def test_normalizer_query_elements_to_remove():
    f = make(BasicURLNormalizer, queryElementsToRemove=["jsessionid", "utm_source"])
    assert f.filter(None, {}, "http://a.com/p?x=1&utm_source=tw&y=2") == "http://a.com/p?x=1&y=2"
    assert f.filter(None, {}, "http://a.com/p?utm_source=tw") == "http://a.com/p"
    assert f.filter(None, {}, "http://a.com/p;jsessionid=ABC?x=1") == "http://a.com/p?x=1"
    assert f.filter(None, {}, "http://a.com/p;v=2;jsessionid=ABC") == "http://a.com/p;v=2"
    # in any path segment (a trap that puts a new session id on every link)
    assert f.filter(None, {}, "http://a.com/app;jsessionid=A1/p;jsessionid=B2/q") == "http://a.com/app/p/q"
    assert f.filter(None, {}, "http://a.com/a;b/c") == "http://a.com/a;b/c"
    # order and encoding of the other params are kept
    assert f.filter(None, {}, "http://a.com/p?b=%2F&a=1") == "http://a.com/p?b=%2F&a=1"


def test_normalizer_remove_hashes():
    f = make(BasicURLNormalizer, removeHashes=True)
    url = "http://a.com/p?id=3&sess=0123456789abcdef0123456789ABCDEF"
    assert f.filter(None, {}, url) == "http://a.com/p?id=3"
    assert make(BasicURLNormalizer).filter(None, {}, url) == url


def test_normalizer_bad_params():
    with pytest.raises(ValueError, match="removeAnchorPart"):
        make(BasicURLNormalizer, removeAnchorPart="maybe")
    with pytest.raises(ValueError, match="queryElementsToRemove"):
        make(BasicURLNormalizer, queryElementsToRemove=[1, 2])


# ---- BasicURLFilter ----------------------------------------------------------------------------


def test_basic_filter_max_length():
    f = make(BasicURLFilter, maxLength=32)
    assert f.filter(None, {}, "http://a.com/" + "x" * 19) is not None  # 32 chars
    assert f.filter(None, {}, "http://a.com/" + "x" * 20) is None
    assert make(BasicURLFilter).filter(None, {}, "http://a.com/" + "x" * 5000) is not None


def test_basic_filter_path_repetition():
    f = make(BasicURLFilter, maxPathRepetition=3)
    assert f.filter(None, {}, "http://a.com/x/x/y") is not None
    assert f.filter(None, {}, "http://a.com/x/y/x/z/x/") is None
    assert f.filter(None, {}, "http://a.com/a/b/c/d/e/f") is not None
    off = make(BasicURLFilter, maxPathRepetition=1)
    assert off.filter(None, {}, "http://a.com/x/x/x/x") is not None
    two = make(BasicURLFilter, maxPathRepetition=2)
    assert two.filter(None, {}, "http://a.com/x/y/x") is None


# ---- MaxDepthFilter ----------------------------------------------------------------------------


def test_max_depth():
    f = make(MaxDepthFilter, maxDepth=2)
    url = "http://a.com/"
    assert f.filter(None, {}, url) == url  # seed-like source: depth 0 → outlink depth 1
    assert f.filter(None, {"depth": ["1"]}, url) == url  # outlink depth 2
    assert f.filter(None, {"depth": ["2"]}, url) is None  # outlink depth 3
    assert f.filter(None, {"depth": ["0"], "max.depth": ["0"]}, url) is None  # per-page override
    assert f.filter(None, {"depth": ["5"], "max.depth": ["-1"]}, url) == url
    assert make(MaxDepthFilter, maxDepth=0).filter(None, {}, url) is None
    assert make(MaxDepthFilter).filter(None, {"depth": ["1000"]}, url) == url
    with pytest.raises(ValueError, match="depth='deep'"):
        f.filter(None, {"depth": ["deep"]}, url)


# ---- HostURLFilter -----------------------------------------------------------------------------


def test_host_filter():
    src = "https://www.example.com/page"
    host = make(HostURLFilter, ignoreOutsideHost=True)
    assert host.filter(src, {}, "https://www.example.com/other") is not None
    assert host.filter(src, {}, "https://blog.example.com/") is None
    assert host.filter(None, {}, "https://blog.example.com/") is not None  # no source: accept
    dom = make(HostURLFilter, ignoreOutsideDomain=True)
    assert dom.filter(src, {}, "https://blog.example.com/") is not None
    assert dom.filter(src, {}, "https://example.org/") is None
    assert dom.filter("http://a.farm.test/", {}, "http://b.farm.test/") is not None
    assert dom.filter("http://foo.github.io/", {}, "http://bar.github.io/") is None
    off = make(HostURLFilter)
    assert off.filter(src, {}, "https://example.org/") is not None


# ---- RegexURLFilter ----------------------------------------------------------------------------


def test_regex_inline_first_match_decides():
    f = make(RegexURLFilter, urlFilters=["-(?i)\\.jpg$", "+^https://good\\.", "-.*"])
    assert f.filter(None, {}, "https://good.com/a.JPG") is None
    assert f.filter(None, {}, "https://good.com/a.html") is not None
    assert f.filter(None, {}, "https://bad.com/") is None
    no_match = make(RegexURLFilter, urlFilters=["+^https://good\\."])
    assert no_match.filter(None, {}, "https://other.com/") is None  # no rule matches → reject


def test_regex_default_file():
    f = make(RegexURLFilter)  # default-regex-filters.txt from resources/
    assert len(f.rules) > 3
    for url in ["https://a.com/img/photo.JPG", "https://a.com/x.png?w=10", "https://a.com/f.zip",
                "https://a.com/v.mp4", "https://a.com/s.css", "ftp://a.com/x", "https://u:p@a.com/"]:
        assert f.filter(None, {}, url) is None, url
    for url in ["https://a.com/", "https://a.com/page.html", "http://127.0.0.5:8080/x",
                "https://a.com/jpg-guide", "https://a.com/?q=.zip+files"]:
        assert f.filter(None, {}, url) == url, url


def _ascii_url_corpus() -> list[str]:
    """Real links (the Common Crawl sample's pages, the recorded URL cases), each also with its
    letters' case scrambled, and links to files of every extension the default rules name."""
    import random

    from owler.parse.html import parse_html
    from tests.realpages import CRAWL_WARCS, warc_html

    out = []
    for url, headers, body in warc_html(CRAWL_WARCS[0]):
        out += [link.url for link in parse_html(url, body, {k.lower(): v for k, v in headers}).outlinks]
    for line in (URL_DATA / "w3lib_2.5.0_url_cases.jsonl").read_text(encoding="utf-8").splitlines():
        out += [v for v in json.loads(line).get("args", []) if isinstance(v, str)]
    exts = re.findall(r"[a-z0-9]+", " ".join(re.findall(r"\\.\(([^)]*)\)", DEFAULT_RULES.read_text())))
    for ext in exts:
        for tail in ("", "?w=1", "&x", "#f", "x", "/", "\n"):
            out.append(f"https://a.example/d/file.{ext}{tail}")
    rng = random.Random(20)
    out += ["".join(c.upper() if rng.random() < 0.5 else c for c in u) for u in list(out)]
    return [u for u in out if u.isascii()]


# (?i) rules lowercase_form() may not lower, each with a URL on which searching its text in the
# lower-cased URL would answer otherwise than the rule does
_NOT_LOWERED = {
    "(?i)[@-\\[]": "https://a.example/",         # a range holding uppercase letters only
    "(?i)\\x41": "https://a.example/",            # an escape that is an uppercase letter
    "(?i)\\.JPG$": "https://a.example/x.jpg",      # an uppercase literal
    "(?i)\\.(?-i:jpg)$": "https://a.example/x.JPG",  # case turned back on inside
}
# refused though lowering them would be sound: the check reads text, not meaning
_REFUSED_TOO = ("(?i)\\D$", "(?i)(a)\\1", "(?i)(?P<x>a)", "(?i)[a-z]", "(?i)\u017f", "(?i)a(?#c)")


def test_regex_lowercase_form_finds_what_the_ignore_case_rule_finds():
    corpus = _ascii_url_corpus()
    assert len(corpus) > 3000
    f = make(RegexURLFilter)
    safe = [p for _, p in f.rules if re_lowercase_form(p) is not None]
    assert len(safe) == 5  # the default file's extension rules
    safe += [re.compile(x) for x in ("(?i)^https?://.*\\.example/d/", "(?i)(?:file|x)\\.(?=j)jp.{1,2}$",
                                     "(?i)(?<!a)\\.cs{1,2}(\\?|&|$)", "(?i)^(?!https://a\\.)")]
    for p in safe:
        low = re_lowercase_form(p)
        assert low is not None, p.pattern
        differ = [u for u in corpus if (p.search(u) is None) != (low.search(u.lower()) is None)]
        assert differ == [], (p.pattern, differ[:3])
        assert any(p.search(u) for u in corpus) and not all(p.search(u) for u in corpus), p.pattern
    for text, url in _NOT_LOWERED.items():
        p = re.compile(text)
        assert re_lowercase_form(p) is None, text
        naive = re.compile(text[4:])  # what lowering it would search: it answers otherwise
        assert (p.search(url) is None) != (naive.search(url.lower()) is None), text
    for text in _REFUSED_TOO + ("\\.jpg$", "(?s)\\.jpg$", "(?i)(?m)\\.jpg$", "(?im)\\.jpg$"):
        assert re_lowercase_form(re.compile(text)) is None, text


def test_regex_filter_lowers_ascii_urls_only():
    f = make(RegexURLFilter, urlFilters=["-(?i)\\.css$", "+."])
    assert f._compiled[0][2] is not None
    assert f.filter(None, {}, "https://a.example/X.CSS") is None
    assert f.filter(None, {}, "https://a.example/x.html") == "https://a.example/x.html"
    odd = "https://a.example/x.c\u017fs"  # not ASCII: the rule itself is searched, and matches
    assert f.filter(None, {}, odd) is None


def test_regex_file_param_and_errors(tmp_path):
    rules = tmp_path / "rules.txt"
    rules.write_text("# comment\n\n ignored line\n-\\.pdf\n+.\n", encoding="utf-8")
    f = make(RegexURLFilter, regexFilterFile=str(rules))
    assert f.filter(None, {}, "http://a.com/x.pdf") is None
    assert f.filter(None, {}, "http://a.com/x.html") is not None
    with pytest.raises(ValueError, match="line 1: invalid regex"):
        make(RegexURLFilter, urlFilters=["+(unclosed"])
    with pytest.raises(ValueError, match="line 2: a rule starts with"):
        make(RegexURLFilter, urlFilters=["+.", "*x"])
    with pytest.raises(ValueError, match="cannot read regexFilterFile"):
        make(RegexURLFilter, regexFilterFile=str(tmp_path / "missing.txt"))


# ---- small ones ----------------------------------------------------------------------------------


def test_self_and_metadata_filters():
    s = make(SelfURLFilter)
    assert s.filter("http://a.com/X", {}, "http://a.com/x#frag") is None
    assert s.filter("http://a.com/x", {}, "http://a.com/y") is not None
    assert s.filter(None, {}, "http://a.com/y") is not None
    m = make(MetadataFilter, noFollow="true")
    assert m.filter(None, {"noFollow": ["TRUE"]}, "http://a.com/") is None
    assert m.filter(None, {"noFollow": ["false"]}, "http://a.com/") is not None


# ---- the chain ---------------------------------------------------------------------------------


def test_load_filter_class_names():
    assert load_filter_class("org.apache.stormcrawler.filtering.basic.BasicURLFilter") is BasicURLFilter
    assert load_filter_class("com.digitalpebble.stormcrawler.filtering.depth.MaxDepthFilter") is MaxDepthFilter
    assert load_filter_class("owler.filters.regex.RegexURLFilter") is RegexURLFilter
    with pytest.raises(ValueError, match="not ported"):
        load_filter_class("org.apache.stormcrawler.filtering.sitemap.SitemapFilter")
    with pytest.raises(ValueError, match="cannot import"):
        load_filter_class("nope.Missing")
    with pytest.raises(ValueError, match="no class"):
        load_filter_class("owler.filters.basic.Missing")


def test_default_chain_from_conf():
    chain = URLFilters.from_conf({"urlfilters.config.file": "urlfilters.json"})
    names = [f.name for f in chain.filters]
    assert names == ["BasicURLNormalizer", "BasicURLFilter", "MaxDepthFilter", "HostURLFilter", "RegexURLFilter"]
    src = "https://www.example.com/"
    assert chain.filter(src, {"depth": ["3"]}, "HTTPS://WWW.Example.com/a/../b?utm_source=x#f") == (
        "https://www.example.com/b", None)
    assert chain.filter(src, {}, "https://www.example.com/logo.png") == (None, "RegexURLFilter")
    assert chain.filter(src, {}, "javascript:void(0)") == (None, "BasicURLNormalizer")
    assert chain.filter(src, {}, "https://a.com/" + "x" * 1100) == (None, "BasicURLFilter")
    assert chain.filter(None, None, "https://a.com/") == ("https://a.com/", None)


def test_empty_chain_when_unset():
    assert len(URLFilters.from_conf({})) == 0
    assert len(URLFilters.from_conf({"urlfilters.config.file": ""})) == 0
    assert URLFilters.from_conf({}).filter(None, {}, "anything") == ("anything", None)


def test_chain_setup_errors(tmp_path, caplog):
    def build(entries):
        return URLFilters.from_json({ROOT: entries})

    with pytest.raises(URLFilterSetupError, match=r"Can't setup depth\[org.apache.stormcrawler.filtering.depth.MaxDepthFilter\]: param maxDepth"):
        build([{"class": "org.apache.stormcrawler.filtering.depth.MaxDepthFilter", "name": "depth",
                "params": {"maxDepth": "deep"}}])
    with pytest.raises(URLFilterSetupError, match=r"Can't setup x\[owler.nothing.Here\]"):
        build([{"class": "owler.nothing.Here", "name": "x"}])
    with pytest.raises(URLFilterSetupError, match="no org.apache.stormcrawler.filtering.URLFilters key"):
        URLFilters.from_json({"other": []})
    with caplog.at_level(logging.WARNING):
        chain = build([{"name": "noclass"}, {"class": "owler.filters.basic.BasicURLFilter"}])
    assert [f.name for f in chain.filters] == ["BasicURLFilter"]  # name defaults to the class
    assert "noclass" in caplog.text and "no 'class'" in caplog.text
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(URLFilterSetupError, match="invalid JSON.*bad.json"):
        URLFilters.from_conf({"urlfilters.config.file": str(bad)})
    with pytest.raises(URLFilterSetupError, match="cannot read URL filters file"):
        URLFilters.from_conf({"urlfilters.config.file": str(tmp_path / "missing.json")})


class Boom(URLFilter):
    def filter(self, source_url, source_md, url):
        raise RuntimeError("kaput")


def test_filter_raising_rejects_and_logs(caplog):
    chain = URLFilters([make(BasicURLNormalizer), Boom()])
    chain.filters[1].name = "boom"
    with caplog.at_level(logging.WARNING):
        assert chain.filter(None, {}, "http://a.com/") == (None, "boom")
    assert "boom" in caplog.text and "kaput" in caplog.text


def test_chain_from_file_with_python_paths(tmp_path):
    p = tmp_path / "f.json"
    p.write_text(json.dumps({ROOT: [
        {"class": "owler.filters.basic.BasicURLNormalizer", "name": "norm"},
        {"class": "owler.filters.host.HostURLFilter", "name": "host", "params": {"ignoreOutsideHost": True}},
    ]}), encoding="utf-8")
    chain = URLFilters.from_file(p)
    assert chain.filter("http://a.com/", {}, "http://A.com/x") == ("http://a.com/x", None)
    assert chain.filter("http://a.com/", {}, "http://b.com/x") == (None, "host")


# ---- check_url ---------------------------------------------------------------------------------


def test_check_url():
    conf = {"urlfilters.config.file": "urlfilters.json", "partition.url.mode": "byDomain"}
    chain = URLFilters.from_conf(conf)
    assert check_url(conf, "HTTP://www.BBC.co.uk/news#x", chain) == (
        "HTTP://www.BBC.co.uk/news#x", "ACCEPT", "http://www.bbc.co.uk/news", "bbc.co.uk")
    assert check_url(conf, "https://a.site1.farm.test/pic.jpg", chain) == (
        "https://a.site1.farm.test/pic.jpg", "REJECT:RegexURLFilter", "https://a.site1.farm.test/pic.jpg", "farm.test")
    assert check_url(conf, "mailto:x@y.z", chain) == ("mailto:x@y.z", "REJECT:BasicURLNormalizer", "", "")
    host_conf = dict(conf, **{"partition.url.mode": "byHost"})
    assert check_url(host_conf, "http://www.bbc.co.uk/")[3] == "www.bbc.co.uk"
    # depth limit 0 still accepts the URL itself (checked as a seed)
    depth0 = URLFilters([make(MaxDepthFilter, maxDepth=0)])
    assert check_url(conf, "http://a.com/", depth0)[1] == "ACCEPT"
    # rejected before any normaliser ran: no normalized URL, key from the plain normalisation
    only_basic = URLFilters([make(BasicURLFilter, maxLength=10)])
    only_basic.filters[0].name = "len"
    assert check_url(conf, "http://www.a.com/long", only_basic) == ("http://www.a.com/long", "REJECT:len", "", "a.com")


def test_a_chain_that_looks_only_at_urls_remembers_its_answers():
    from owler.conf import load_conf
    from owler.filters import URLFilters

    chain = URLFilters.from_conf(load_conf())
    assert chain.memo is not None  # the default chain looks at URLs only
    first = chain.filter("http://a.example/", {}, "HTTP://B.example/x?utm_source=y")
    assert chain.filter("http://c.example/", {"depth": ["9"]},
                        "HTTP://B.example/x?utm_source=y") == first == ("http://b.example/x", None)
    assert chain.filter(None, None, "ftp://x/") == (None, chain.filter(None, None, "ftp://x/")[1])
    depth = URLFilters.from_json({"org.apache.stormcrawler.filtering.URLFilters": [
        {"class": "org.apache.stormcrawler.filtering.depth.MaxDepthFilter",
         "params": {"maxDepth": 1}}]})
    assert depth.memo is None  # the answer depends on the source's depth
    assert depth.filter("http://a/", {"depth": ["0"]}, "http://b/")[0] == "http://b/"
    assert depth.filter("http://a/", {"depth": ["1"]}, "http://b/")[0] is None
