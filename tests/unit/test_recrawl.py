"""The re-visit path without Storm, with the default configuration but for the adaptive scheduler:
what the parser makes of a page, what the status updater writes, what the SQLite frontier keeps
and gives back for the next fetch. An unchanged page's interval grows, a changed page's shrinks,
a 304 counts as unchanged (StormCrawler's AdaptiveScheduler, with signature and fetchInterval
persisted) and the validators and last capture travel with the URL."""

from __future__ import annotations

from owler import wire
from owler.conf import load_conf
from owler.constants import Status
from owler.fetch.revisit import Revisits
from owler.frontier.sqlite import SQLiteFrontier
from owler.parse.page import PageHandler
from owler.scheduler import load_scheduler
from owler.status import StatusUpdater

NOW = 1_700_000_000.0
HOUR = 3600.0


def page(n: int, words: str) -> bytes:
    return (f"<html><head><title>{n}</title></head><body><p>{words} " * 30
            + "</p></body></html>").encode()


def test_fetch_intervals_follow_the_change_rate_across_passes(tmp_path):
    conf = {**load_conf(None), "scheduler.class": "AdaptiveScheduler"}
    handler, revisits = PageHandler(conf), Revisits(conf)
    updater = StatusUpdater(conf, load_scheduler(conf))
    frontier = SQLiteFrontier(tmp_path / "f.sqlite")
    urls = {"http://a.example/same": [page(1, "steady")] * 2,
            "http://a.example/changes": [page(2, "first"), page(2, "second")]}
    intervals: dict[str, list[float]] = {u: [] for u in urls}

    def one_pass(i: int, now: float, not_modified: bool = False) -> None:
        updates = []
        for url, versions in urls.items():
            rec = frontier.get(url)
            md = dict(rec.metadata) if rec else {}
            md[wire.RAW_HEADERS] = ["Content-Type: text/html", 'ETag: "e"']
            if not_modified and url.endswith("same"):
                assert revisits.conditional_headers(md) == {"If-None-Match": '"e"'}
                md["fetch.statusCode"] = ["304"]
                revisits.note_not_modified(md, {}.get)
                content = b""
            else:
                md["fetch.statusCode"] = ["200"]
                content = versions[min(i, len(versions) - 1)]
                revisits.note_validators(md, {"ETag": '"e"'}.get)
                revisits.note_capture(md, content, now)
            out = handler.handle_page(url, content, md)
            assert out.status is Status.FETCHED
            updates.append(updater.to_update(url, out.metadata, out.status, now))
        assert frontier.apply_updates(updates) == []
        for url in urls:
            rec = frontier.get(url)
            intervals[url].append((rec.next_fetch_date - now) / 60)
            assert "signatureOld" not in rec.metadata  # used, not stored
            assert rec.metadata["protocol.etag"] == ['"e"'] and rec.metadata["capture.digest"]

    one_pass(0, NOW)
    one_pass(1, NOW + 13 * HOUR)
    one_pass(2, NOW + 40 * HOUR, not_modified=True)
    # first fetch: no earlier signature (a change, as in StormCrawler): 1440 → 750
    assert intervals["http://a.example/same"] == [750, 1125, 1687.5]
    assert intervals["http://a.example/changes"][:2] == [750, 405]
    same = frontier.get("http://a.example/same").metadata
    assert same["fetchInterval"] == ["1687.50"]
    assert same["signatureChangeDate"] == ["2023-11-14T22:13:20Z"]  # the first fetch only
    changed = frontier.get("http://a.example/changes").metadata
    assert changed["signatureChangeDate"] == ["2023-11-15T11:13:20Z"]
    frontier.close()


def test_the_default_scheduler_stays_the_default():
    assert type(load_scheduler(load_conf(None))).__name__ == "DefaultScheduler"
