"""The risk-class parse filter (owler.parse.filters.risk): list and phrase logic on small inline
lists written in the real lists' syntax, then the real lists services/risk/install.sh installs into
.services/risk (`make setup`; a missing list is a failure) on real pages: trafilatura's test pages
and the HTML responses of the WARC samples in tests/data."""

from __future__ import annotations

from pathlib import Path

import pytest

from owler.conf import ConfError, project_root
from owler.parse.filters import ParsedPage, ParseFilters, ParseFilterSetupError
from owler.parse.filters.risk import HostListModel, PhraseModel, RiskClassifier
from owler.parse.html import parse_html
from tests.realpages import trafilatura, warc_html

DATA = Path(__file__).resolve().parents[1] / "data"
LISTS = project_root() / ".services" / "risk"
UBO = "webext-ublock-origin-firefox"
BADWARE, URLHAUS = f"{UBO}/badware.min.txt", f"{UBO}/urlhaus-filter-online.txt"
PORN, GOOD = "e2guardian/pornography/weighted", "e2guardian/goodphrases/weighted_general"
WARCS = ("CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc",
         "dolma-sample-0000.warc.gz", "dolma-sample-0001.warc.gz", "example.com.warc")
REAL = {"dir": str(LISTS), "malicious": [BADWARE, URLHAUS],
        "adult": {"files": [PORN, GOOD], "limit": 160}}


def page(url: str, html: bytes | str) -> ParsedPage:
    content = html.encode() if isinstance(html, str) else html
    headers = {"content-type": "text/html"}
    res = parse_html(url, content, headers, conf={})
    return ParsedPage(url, content, headers, res, {})


def classifier(**params) -> RiskClassifier:
    f = RiskClassifier()
    f.name = "risk"
    f.configure({}, params)
    return f


def run(f: RiskClassifier, p: ParsedPage) -> dict[str, list[str]]:
    ParseFilters([f]).run(p)
    return p.metadata


# ---- the host/URL list model -------------------------------------------------------------------

HOST_LINES = """\
! Title: uBlock filters – Badware risks
||flexytalk.net^
||gmboxx.com^$doc
||beqbox.com^$all
||01net.com/telecharger/$doc
||2024.sci-hub.se/2294/7a43bb4cf6c57229b02a9604a1f4614e/skidmore1966.pdf^$all
||example.org/get?id=1^$all
1.1.104.12
111101111.ru
0.0.0.0 tracker.example.net
||s3blog.org^$3p
||newsharecounts.s3-us-west-2.amazonaws.com/nsc.js$script
||discordap.$all
/?track=*&key=$all
||onelink.me^$doc
@@||onelink.me/*://app/$doc
majorgeeks.com##b:has(a[target^="reimage"])
"""


@pytest.fixture
def hosts(tmp_path) -> HostListModel:
    f = tmp_path / "bad.txt"
    f.write_text(HOST_LINES, encoding="utf-8")
    m = HostListModel()
    m.add_file(f)
    return m


def test_host_rules_match_host_and_subdomains_on_label_boundaries(hosts):
    assert hosts.match("https://flexytalk.net/") == "bad.txt:||flexytalk.net^"
    assert hosts.match("http://www.flexytalk.net/a?b") == "bad.txt:||flexytalk.net^"
    assert hosts.match("https://notflexytalk.net/") is None
    assert hosts.match("https://gmboxx.com:8080/x").endswith("||gmboxx.com^$doc")
    assert hosts.match("http://1.1.104.12/bin.sh") == "bad.txt:1.1.104.12"
    assert hosts.match("http://x.111101111.ru/") == "bad.txt:111101111.ru"
    assert hosts.match("http://tracker.example.net/") == "bad.txt:0.0.0.0 tracker.example.net"


def test_url_rules_flag_that_url_only(hosts):
    url = "https://2024.sci-hub.se/2294/7a43bb4cf6c57229b02a9604a1f4614e/skidmore1966.pdf"
    assert "skidmore1966.pdf^$all" in hosts.match(url)
    assert hosts.match(url + "?dl=1") is not None  # ^: a separator follows
    assert hosts.match(url + "x") is None  # ^: no separator
    assert hosts.match("https://2024.sci-hub.se/") is None
    assert hosts.match("https://2024.sci-hub.se/2294/other.pdf") is None
    assert hosts.match("https://01net.com/telecharger/windows/x.html") is not None
    assert hosts.match("https://01net.com/actualites/") is None
    assert hosts.match("https://example.org/get?id=1") is not None
    assert hosts.match("https://example.org/get?id=12") is None


def test_rules_not_representable_are_ignored_and_counted(hosts):
    assert hosts.match("https://s3blog.org/") is None  # $3p: not a page rule
    assert hosts.match("https://discordapp.com/") is None  # partial host name
    assert hosts.match("https://onelink.me/x") is None  # an exception names it: dropped
    assert hosts.ignored == {"options": 2, "unsupported": 1, "regex/wildcard": 1, "cosmetic": 1,
                             "exception": 1, "excepted": 1}
    assert hosts.kept == 9


# ---- the phrase model --------------------------------------------------------------------------

PHRASES = """\
#listcategory: "Pornography"
< anal ><20>
< anal >,< porn><70>
<porn><30>
<xxx><30>
< bra ><2>
<nsfw><150> #Abbreviation for Not Safe For Work
<incest rape<50>
< breast cancer><-50>
<porn><99>
"""


@pytest.fixture
def phrases(tmp_path) -> PhraseModel:
    f = tmp_path / "weighted"
    f.write_text(PHRASES, encoding="latin-1")
    m = PhraseModel(limit=100)
    m.add_file(f)
    return m


def test_phrase_semantics(phrases):
    assert phrases.skipped == 1  # the malformed line
    assert phrases.score("the canal and the banality") == 0  # < anal >: a word
    assert phrases.score("anal.") == 20  # punctuation delimits a word
    assert phrases.score("Pornography") == 30  # <porn>: a substring; first weight stays
    assert phrases.score("anal porn") == 20 + 30 + 70  # the combination
    assert phrases.score("porn porn porn") == 30  # singular: once per page
    assert phrases.score("NSFW breast cancer") == 150 - 50
    assert phrases.score("brazil library") == 0
    normal = PhraseModel(singular=False)
    normal._ids, normal.weights, normal._single = phrases._ids, phrases.weights, phrases._single
    normal.combos = phrases.combos
    assert normal.score("porn porn porn") == 90


# ---- the filter --------------------------------------------------------------------------------

def test_classes_and_keys(tmp_path):
    (tmp_path / "bad.txt").write_text(HOST_LINES, encoding="utf-8")
    (tmp_path / "weighted").write_text(PHRASES, encoding="utf-8")
    both = classifier(dir=str(tmp_path), malicious=["bad.txt"],
                      adult={"files": ["weighted"], "limit": 100})
    assert set(both.keys) == {"risk", "risk.score", "risk.reason", "risk.classes"}
    assert not both.needs_text  # lexbor's text of the body will do
    md = run(both, page("https://flexytalk.net/", "<title>xxx</title><p>nsfw porn</p>"))
    assert md["risk"] == ["malicious"] and md["risk.score"] == ["1"]
    assert md["risk.reason"] == ["malicious:bad.txt:||flexytalk.net^"]
    assert md["risk.classes"] == ["malicious", "adult"]
    md = run(both, page("https://ok.example/", "<title>XXX</title><p>free porn, nsfw</p>"))
    assert md["risk"] == ["adult"] and md["risk.score"] == ["210"]
    assert md["risk.reason"] == ["adult:phrases:score=210"]
    md = run(both, page("https://ok.example/", "<p>A canal boat.</p>"))
    assert md["risk"] == ["benign"] and md["risk.reason"] == ["-"]
    # one class only: never benign
    adult_only = classifier(dir=str(tmp_path), adult=["weighted"])
    md = run(adult_only, page("https://flexytalk.net/", "<p>A canal boat.</p>"))
    assert "risk" not in md and md["risk.classes"] == ["adult"]
    mal_only = classifier(dir=str(tmp_path), malicious="bad.txt")
    assert not mal_only.needs_text
    md = run(mal_only, page("https://ok.example/", "<p>xxx porn nsfw</p>"))
    assert "risk" not in md and md["risk.classes"] == ["malicious"]


def test_setup_errors(tmp_path):
    with pytest.raises(ConfError, match="nope.txt does not exist"):
        classifier(dir=str(tmp_path), malicious=["nope.txt"])
    with pytest.raises(ConfError, match="non-empty list"):
        classifier(dir=str(tmp_path), adult={"files": []})
    with pytest.raises(ConfError, match="no class configured"):
        classifier(dir=str(tmp_path))
    with pytest.raises(ParseFilterSetupError, match="gone.txt"):
        ParseFilters.from_json({"org.apache.stormcrawler.parse.ParseFilters": [
            {"class": "owler.parse.filters.risk.RiskClassifier", "name": "risk",
             "params": {"dir": str(tmp_path), "malicious": ["gone.txt"]}}]})


def test_models_load_once_per_process(tmp_path):
    (tmp_path / "bad.txt").write_text(HOST_LINES, encoding="utf-8")
    a, b = classifier(dir=str(tmp_path), malicious=["bad.txt"]), \
        classifier(dir=str(tmp_path), malicious=["bad.txt"])
    assert a.models[0] is b.models[0]


# ---- the real lists on real pages --------------------------------------------------------------

def real_pages() -> list[tuple[str, bytes]]:
    out = [("https://www.mozilla.org/en-US/firefox/developer/",
            trafilatura("mozilla.org.firefox.developer.html")),
           ("https://www.apache.org/", trafilatura("apache.html")),
           ("https://fivethirtyeight.com/", trafilatura("webpage.html.gz"))]
    for name in WARCS:
        out += [(url, body) for url, _, body in warc_html(name)]
    return out


@pytest.fixture(scope="module")
def real() -> RiskClassifier:
    assert (LISTS / ".installed").is_file(), "run `make setup` (services/risk/install.sh)"
    return classifier(**REAL)


def test_real_lists_load(real):
    mal, adult = real.models
    assert len(mal.hosts) > 5000 and sum(map(len, mal.url_rules.values())) > 3000
    assert mal.ignored["regex/wildcard"] > 500
    assert len(adult) > 3000 and adult.skipped < 10


def test_real_lists_known_entries(real):
    mal = real.models[0]
    assert mal.match("https://flexytalk.net/") == "badware.min.txt:||flexytalk.net^"
    assert mal.match("https://www.gmboxx.com/") is not None
    url = "https://2024.sci-hub.se/2294/7a43bb4cf6c57229b02a9604a1f4614e/skidmore1966.pdf"
    assert mal.match(url).startswith("urlhaus-filter-online.txt:||2024.sci-hub.se/")
    assert mal.match("https://2024.sci-hub.se/") is None
    assert mal.match("http://1.1.104.12/") == "urlhaus-filter-online.txt:1.1.104.12"
    assert mal.match("https://www.wikipedia.org/") is None


def test_real_pages_are_benign(real):
    pages = real_pages()
    assert len(pages) >= 20
    for url, body in pages:
        md = run(real, page(url, body))
        assert md["risk"] == ["benign"], (url, md)
        assert int(md["risk.score"][0]) < 160


def test_real_scam_and_adult_pages(real):
    md = run(real, page("https://www.flexytalk.net/chat", trafilatura("apache.html")))
    assert md["risk"] == ["malicious"] and md["risk.reason"] == [
        "malicious:badware.min.txt:||flexytalk.net^"]
    html = ("<title>Free XXX porn videos</title><p>Hot hardcore sex movies with horny sluts. "
            "Watch free porn now, adults only, 18+.</p>")
    md = run(real, page("https://adult.example/", html))
    assert md["risk"] == ["adult"] and int(md["risk.score"][0]) >= 160
    assert md["risk.reason"][0].startswith("adult:phrases:score=")
    md = run(real, page("https://health.example/", "<p>Breast cancer screening: a guide for "
                                                   "women on self-examination.</p>"))
    assert md["risk"] == ["benign"]
