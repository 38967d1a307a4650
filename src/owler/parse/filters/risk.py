"""RiskClassifier: a page's risk class (benign / malicious / adult, OpenWebSearch D1.1 §1.1).

Each class is judged by one model; a model looks at one page and answers a :class:`Verdict`
(class, score, reason) or ``None``. Two kinds of models:

``malicious``: :class:`HostListModel`, host and URL lists in adblock or hosts-file syntax
    (uAssets' ``badware.min.txt``, abuse.ch's ``urlhaus-filter-online.txt``, both from Debian's
    ``webext-ublock-origin-firefox``; ``services/risk/install.sh``). Kept rules, exactly as a
    browser blocker applies them to a page it navigates to:

    - ``||host^`` (also a bare ``host``, an IP, a hosts-file line ``0.0.0.0 host``): the host
      and its subdomains (label boundaries; IPs match exactly);
    - ``||host/path...`` (optionally ending in ``^``): URLs on that host or a subdomain whose
      lower-cased normalized path+query starts with ``/path...`` (``^``: followed by the end or a
      separator). It never flags the host's other URLs.

    Options: none, ``$doc``/``$document``/``$all``/``$important`` (rules that apply to a page
    loaded as a document). Ignored, and counted per reason in :attr:`HostListModel.ignored`:
    cosmetic rules (``##``), regular expressions and wildcards (``/re/``, ``*``, ``|`` anchors),
    any other option (``$script``, ``$3p``, ``domain=``, ``to=``, ...), partial host names and
    ports (``||paypal-$doc``, ``||h.com:8443/x``: ``unsupported``) and exceptions (``@@``),
    which we cannot apply exactly: a host rule whose host an exception names is dropped too
    (counted as ``excepted``), so an exception never leaves a page flagged that the list spares.
    Host tokens are canonicalized by :mod:`owler.blacklist`'s helper (lower case, punycode); its
    line reader is not reused: it reads a folder of files, knows no options and treats
    ``||host/path`` lines as invalid.

``adult``: :class:`PhraseModel`, DansGuardian/e2guardian weighted phrase lists
    (``pornography/weighted*`` with the negative ``goodphrases/weighted_general``, from Debian's
    ``e2guardian``). Lines ``<phrase><weight>`` and combinations ``<a>,<b>,<c><weight>`` (the
    weight counts when all parts occur); ``#`` comments and malformed lines are skipped (counted).
    Matching, as e2guardian does it: over the lower-cased title and text (whitespace collapsed),
    a phrase is a literal substring (``<porn>`` matches "pornography"); a space in a phrase is a
    space in the text, so a leading or trailing space delimits a word (``< anal >`` does not match
    "canal"). Unlike e2guardian, which needs a literal space there, any character that is no
    letter or digit, or the text's edge, delimits the word too ("anal." matches ``< anal >``).
    ``mode``: ``singular`` (e2guardian's shipped ``weightedphrasemode = 2``): a phrase counts once
    per page; ``normal``: every occurrence counts. A phrase listed twice keeps its first weight.
    The page is ``adult`` when the score reaches ``limit`` (e2guardian's ``naughtynesslimit``; it
    suggests 50 / 100 / 160 for young children / older children / young adults). Files are read as
    UTF-8, else Latin-1 (e2guardian's Western lists); ``weighted_russian`` and ``weighted_japanese``
    are in other legacy encodings: use ``weighted_russian_utf8`` and leave those two out.

Written (keys cleared by the chain before each parse):

``risk``
    ``malicious`` when a malicious model fires, else ``adult`` when an adult model fires, else
    ``benign`` -- but only when both classes have a model: the filter never claims a class it
    cannot judge, so without one of them a page that fires nothing gets no ``risk``.
``risk.score``, ``risk.reason``
    of the firing model (``1`` and ``malicious:badware.min.txt:||example.com^``; the phrase score
    and ``adult:phrases:score=230``); for a benign page the adult score (when judged) and ``-``.
``risk.classes``
    the classes judged (one value each).

Params: ``dir`` (default: the config key ``risk.lists.dir``, itself ``.services/risk`` by default,
made absolute against the project root when a topology is submitted, so Storm workers running from
the topology jar find it; every machine of a cluster needs the lists there), ``malicious``
(a list of files, or ``{"files": [...]}``), ``adult`` (a list of files, or ``{"files": [...],
"limit": 160, "mode": "singular", "maxChars": 20000}``: the title and the first ``maxChars``
characters of the text are scanned, which bounds the cost of a long page, and only when the title
and the first 2,000 characters have a phrase at all: most pages cost a scan of those only, ~20 ns
per character); files are relative to ``dir``. A class
left out has no model. A missing file or an empty file list is a :class:`owler.conf.ConfError`
naming it.

Cost: models are built once per process and shared by every filter instance naming the same files
(parser bolts hold several): ~0.1 s for the two uBlock lists, ~0.1 s for the e2guardian lists.
Per page, the host lists cost a few dict lookups (and one URL normalization when the host has
URL rules); the phrases one pass of an Aho-Corasick automaton (``pyahocorasick``) over the text
plus a little Python per candidate hit (``bench/eval_risk.py`` measures it).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import ahocorasick

from owler import urls
from owler.blacklist import HOSTS_BOILERPLATE, HOSTS_IPS, IPV4_RE, clean_host, fast_host
from owler.conf import ConfError, get_int, project_root
from owler.constants import RISK_LISTS_DIR_KEY
from owler.metadata import set_value
from owler.parse.filters import ParsedPage, ParseFilter

__all__ = ["RiskClassifier", "Verdict", "RiskModel", "HostListModel", "PhraseModel",
           "load_host_list", "load_phrases"]

RISK = "risk"
SCORE = "risk.score"
REASON = "risk.reason"
CLASSES = "risk.classes"
MALICIOUS, ADULT, BENIGN = "malicious", "adult", "benign"
DEFAULT_DIR = ".services/risk"

DEFAULT_LIMIT = 160
#: characters of a page's text scanned first for phrases (PhraseModel.judge)
PROBE_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a model says of a page: its class, a score and why."""

    cls: str
    score: float
    reason: str


class RiskModel(Protocol):
    """Judges one class: a :class:`Verdict` when the page belongs to it, else None."""

    risk_class: str

    def judge(self, page: ParsedPage) -> Verdict | None: ...


# ---- host and URL lists ------------------------------------------------------------------------

_DOC_OPTIONS = frozenset({"doc", "document", "all", "important"})
# what may follow a URL rule's path for ``^``: a separator (not a letter, digit or ``_-.%``)
_NOT_SEPARATOR = re.compile(r"[a-z0-9_.%-]")


class HostListModel:
    """Host and URL-prefix rules of adblock/hosts-file lists (see the module docstring)."""

    def __init__(self, risk_class: str = MALICIOUS) -> None:
        self.risk_class = risk_class
        self.hosts: dict[str, str] = {}  # host -> "file:rule"
        self.url_rules: dict[str, list[tuple[str, bool, str]]] = {}  # host -> (path, ^, reason)
        self.ignored: Counter[str] = Counter()
        self.kept = 0

    # loading
    def add_file(self, path: Path) -> None:
        name = path.name
        excepted: set[str] = set()
        with open(path, encoding="utf-8", errors="replace") as fh:
            for raw in fh:
                line = raw.strip()
                if not line or line[0] in "!#[":
                    continue
                why = self._add_line(line, f"{name}:{line}", excepted)
                if why:
                    self.ignored[why] += 1
                else:
                    self.kept += 1
        for host in excepted:
            if self.hosts.pop(host, None) is not None:
                self.ignored["excepted"] += 1
                self.kept -= 1

    def _add_line(self, line: str, reason: str, excepted: set[str]) -> str | None:
        """Adds one rule; returns why it was ignored, or None."""
        if "##" in line or "#@#" in line or "#?#" in line or "#$#" in line:
            return "cosmetic"
        if line.startswith("@@"):
            host = re.split(r"[/^*$|]", line[2:].lstrip("|"), maxsplit=1)[0]
            h = clean_host(host) if host else None
            if h:
                excepted.add(h)
            return "exception"
        if line.startswith("/") or "*" in line:
            return "regex/wildcard"
        rule, _, options = line.partition("$")
        if options and not set(options.split(",")) <= _DOC_OPTIONS:
            return "options"
        if rule.startswith("||"):
            body = rule[2:]
        elif rule.startswith("|") or "|" in rule:
            return "regex/wildcard"
        else:
            tokens = rule.split()
            if len(tokens) > 1 and (tokens[0] in HOSTS_IPS or IPV4_RE.match(tokens[0])):
                names = [t for t in tokens[1:] if t.lower() not in HOSTS_BOILERPLATE]
                hosts = [h for h in map(clean_host, names) if h]
                if not hosts:
                    return "unsupported"
                for h in hosts:
                    self.hosts.setdefault(h, reason)
                return None
            if len(tokens) != 1 or "/" in rule or "^" in rule:
                return "unsupported"
            body = rule + "^"  # a bare host name: the host rule ||host^
        cut = min((i for i in (body.find("/"), body.find("^"), body.find("?")) if i >= 0),
                  default=len(body))
        host, tail = clean_host(body[:cut]), body[cut:]
        if host is None or not tail and options:
            return "unsupported"
        if tail in ("", "^"):
            self.hosts.setdefault(host, reason)
            return None
        if tail.startswith("^"):
            return "unsupported"  # ||host^path: not a URL prefix
        sep = tail.endswith("^")
        path = tail.rstrip("^")
        href = urls.normalize(f"http://{host}{path}")
        if href is None or "^" in path:
            return "unsupported"
        norm = href[href.index("/", href.index("://") + 3):].lower()
        self.url_rules.setdefault(host, []).append((norm, sep, reason))
        return None

    # lookup
    def match(self, url: str) -> str | None:
        """The ``file:rule`` that flags ``url``, else None."""
        host = fast_host(url) or urls.host_of(url)
        if not host:
            return None
        candidates = [host]
        if not IPV4_RE.match(host) and not host.startswith("["):
            i = host.find(".")
            while i >= 0:
                candidates.append(host[i + 1:])
                i = host.find(".", i + 1)
        hosts, url_rules = self.hosts, self.url_rules
        for h in candidates:
            reason = hosts.get(h)
            if reason is not None:
                return reason
        rules = [r for h in candidates for r in url_rules.get(h, ())]
        if not rules:
            return None
        href = urls.normalize(url)
        if href is None:
            return None
        start = href.find("/", href.index("://") + 3)
        rest = href[start:].lower() if start >= 0 else "/"
        for path, sep, reason in rules:
            if rest.startswith(path) and (
                    not sep or len(rest) == len(path) or not _NOT_SEPARATOR.match(rest, len(path))):
                return reason
        return None

    def judge(self, page: ParsedPage) -> Verdict | None:
        reason = self.match(page.url)
        return None if reason is None else Verdict(self.risk_class, 1, f"{self.risk_class}:{reason}")


# ---- weighted phrases --------------------------------------------------------------------------

_PHRASE_LINE = re.compile(r"((?:<[^<>]*>,)*<[^<>]*>)<(-?\d+)>")


class PhraseModel:
    """e2guardian weighted phrases and combinations over an Aho-Corasick automaton."""

    def __init__(self, risk_class: str = ADULT, limit: int = DEFAULT_LIMIT, singular: bool = True,
                 max_chars: int = 20_000, name: str = "phrases",
                 probe_chars: int = PROBE_CHARS) -> None:
        self.risk_class, self.limit, self.singular = risk_class, limit, singular
        self.max_chars, self.name, self.probe_chars = max_chars, name, probe_chars
        self._ids: dict[str, int] = {}  # normalized phrase -> id
        self.weights: list[int] = []  # per id: weight as a single phrase (0: only in combos)
        self._single: set[int] = set()
        self.combos: dict[int, list[tuple[tuple[int, ...], int]]] = {}  # by the first part
        self.skipped = 0
        self.last_score = 0  # of the last page judged (instances are per filter, not shared)
        self._automaton: Any = None

    def _phrase_id(self, phrase: str) -> int:
        """Id of a phrase: lower case, inner whitespace runs as one space, edge spaces kept."""
        core = " ".join(phrase.lower().split())
        phrase = (" " if phrase[0].isspace() else "") + core + (" " if phrase[-1].isspace() else "")
        pid = self._ids.get(phrase)
        if pid is None:
            pid = self._ids[phrase] = len(self.weights)
            self.weights.append(0)
        return pid

    def add_file(self, path: Path) -> None:
        data = path.read_bytes()
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
        for raw in text.splitlines():
            line = raw.strip()
            if not line.startswith("<"):
                continue
            m = _PHRASE_LINE.match(line)
            parts = m.group(1)[1:-1].split(">,<") if m else []
            if not parts or not all(p.strip() for p in parts):
                self.skipped += 1
                continue
            weight = int(m.group(2))
            ids = tuple(self._phrase_id(p) for p in parts)
            if len(ids) == 1:
                if ids[0] in self._single:
                    continue  # listed twice: the first weight stays
                self._single.add(ids[0])
                self.weights[ids[0]] = weight
            else:
                self.combos.setdefault(ids[0], []).append((ids, weight))
        self._automaton = None

    def build(self) -> None:
        variants: dict[str, list[tuple[int, int, bool, bool]]] = {}  # "porn", " porn", "porn "
        for phrase, pid in self._ids.items():
            core = phrase.strip(" ")
            variants.setdefault(core, []).append(
                (pid, len(core), phrase.startswith(" "), phrase.endswith(" ")))
        a = ahocorasick.Automaton()
        for core, entries in variants.items():
            a.add_word(core, tuple(entries))
        a.make_automaton()
        self._automaton = a

    def __len__(self) -> int:
        return len(self._ids)

    def found(self, text: str) -> Counter[int]:
        """Ids of the phrases in ``text`` (any case, whitespace collapsed) with their counts."""
        if self._automaton is None:
            self.build()
        t = text.lower()
        n = len(t)
        hits: Counter[int] = Counter()
        singular = self.singular
        for end, entries in self._automaton.iter(t):
            for pid, size, lead, trail in entries:
                if singular and pid in hits:
                    continue
                if lead:
                    start = end - size
                    if start >= 0 and t[start].isalnum():
                        continue
                if trail and end + 1 < n and t[end + 1].isalnum():
                    continue
                hits[pid] += 1
        return hits

    def score(self, text: str) -> int:
        hits = self.found(text)
        weights, combos = self.weights, self.combos
        total = 0
        for pid, count in hits.items():
            total += weights[pid] * (1 if self.singular else count)
            for parts, weight in combos.get(pid, ()):
                if all(p in hits for p in parts):
                    total += weight
        return total

    def page_text(self, page: ParsedPage, n: int) -> str:
        title = page.result.title
        text = page.text_head(n)
        return f"{title} {text}" if title else text

    def judge(self, page: ParsedPage) -> Verdict | None:
        # a probe of the title and the text's start first: a page where it finds no phrase at
        # all is not scanned further (most pages; the scan costs ~20 ns per character)
        probe = min(self.probe_chars, self.max_chars)
        title, head = page.result.title, page.text_head(probe)
        score = self.score(f"{title} {head}" if title else head)
        if score > 0 and self.max_chars > probe and len(head) >= probe:  # more text to read
            score = self.score(self.page_text(page, self.max_chars))
        self.last_score = score
        if score < self.limit:
            return None
        return Verdict(self.risk_class, score, f"{self.risk_class}:{self.name}:score={score}")


# ---- loading, once per process -----------------------------------------------------------------

_cache: dict[tuple, Any] = {}
_lock = threading.Lock()


def _signature(paths: Sequence[Path]) -> tuple:
    out = []
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            raise ConfError(f"risk list file {p} does not exist") from None
        if not p.is_file():
            raise ConfError(f"risk list file {p} is not a file")
        out.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(out)


def _once(key: tuple, build: Callable[[], Any]) -> Any:
    """``build()``'s model, built once per process for ``key`` (the files' signature in it)."""
    with _lock:
        model = _cache.get(key)
        if model is None:
            model = _cache[key] = build()
    return model


def load_host_list(paths: Sequence[Path], risk_class: str = MALICIOUS) -> HostListModel:
    """The :class:`HostListModel` of these files, built once per process."""
    def build() -> HostListModel:
        model = HostListModel(risk_class)
        for p in paths:
            model.add_file(p)
        return model
    return _once(("hosts", risk_class, _signature(paths)), build)


def load_phrases(paths: Sequence[Path], risk_class: str = ADULT, limit: int = DEFAULT_LIMIT,
                 singular: bool = True, max_chars: int = 20_000) -> PhraseModel:
    """The :class:`PhraseModel` of these files, built once per process (the automaton is shared
    by models that differ in ``limit``/``mode`` only)."""
    def build() -> PhraseModel:
        base = PhraseModel(risk_class)
        for p in paths:
            base.add_file(p)
        base.build()
        return base
    base = _once(("phrases", risk_class, _signature(paths)), build)
    model = PhraseModel(risk_class, limit, singular, max_chars)
    model._ids, model.weights, model._single = base._ids, base.weights, base._single
    model.combos, model.skipped, model._automaton = base.combos, base.skipped, base._automaton
    return model


# ---- the filter --------------------------------------------------------------------------------

def _files(value: Any, what: str) -> tuple[list[str], Mapping[str, Any]]:
    opts: Mapping[str, Any] = {}
    if isinstance(value, Mapping):
        opts, value = value, value.get("files")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip()
                                                           for v in value):
        raise ConfError(f"risk: {what} needs a non-empty list of list files, got {value!r}")
    return value, opts


class RiskClassifier(ParseFilter):
    documents = True  # reads the URL, title and text, no markup
    keys = (RISK, SCORE, REASON, CLASSES)
    # the phrases are matched over the text the chain hands out: lexbor's text of the body
    # unless another reason made the parser extract the text; words on both sides of a tag may
    # run together in it, which rarely hides or joins a phrase, and costs a quarter less parse
    needs_text = False

    def __init__(self) -> None:
        self.models: list[RiskModel] = []
        self.classes: tuple[str, ...] = ()

    def configure(self, conf: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        base = Path(str(params.get("dir") or conf.get(RISK_LISTS_DIR_KEY) or DEFAULT_DIR))
        if not base.is_absolute():
            base = project_root() / base
        models: list[RiskModel] = []
        if params.get(MALICIOUS) is not None:
            files, _ = _files(params[MALICIOUS], MALICIOUS)
            models.append(load_host_list([base / f for f in files]))
        if params.get(ADULT) is not None:
            files, opts = _files(params[ADULT], ADULT)
            mode = str(opts.get("mode", "singular"))
            if mode not in ("singular", "normal"):
                raise ConfError(f"risk: adult mode must be singular or normal, got {mode!r}")
            max_chars = get_int(opts, "maxChars", 20_000)
            models.append(load_phrases([base / f for f in files],
                                       limit=get_int(opts, "limit", DEFAULT_LIMIT),
                                       singular=mode == "singular", max_chars=max_chars))
        if not models:
            raise ConfError("risk: no class configured (params malicious and/or adult)")
        self.models = models  # malicious first: it wins over adult
        self.classes = tuple(m.risk_class for m in models)

    def classify(self, page: ParsedPage) -> Verdict | None:
        """The verdict of the first model that fires (malicious before adult); when none does,
        ``benign`` (scored with the adult score) if both classes are judged, else None."""
        for model in self.models:
            verdict = model.judge(page)
            if verdict is not None:
                return verdict
        if MALICIOUS in self.classes and ADULT in self.classes:
            score = sum(getattr(m, "last_score", 0) for m in self.models if m.risk_class == ADULT)
            return Verdict(BENIGN, score, "-")
        return None

    def filter(self, page: ParsedPage) -> None:
        md = page.metadata
        md[CLASSES] = list(self.classes)
        verdict = self.classify(page)
        if verdict is None:
            return
        set_value(md, RISK, verdict.cls)
        score = verdict.score
        set_value(md, SCORE, int(score) if float(score).is_integer() else score)
        set_value(md, REASON, verdict.reason)
