"""The OpenSearch frontier's monitoring figures from a snapshot (owler.frontier.opensearch_stats)
on a real node: equal to the index's own when nothing was written since, within the bound they
state when something was, renewed by one writer at a time, and by a reader when no writer is left."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from owler.constants import Status
from owler.frontier import StatusUpdate, open_frontier
from owler.frontier import opensearch_stats as stats
from tests.integration import cli

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LIVE = {"frontier.stats.exact.max": 10 ** 12}


@pytest.fixture
def conf(opensearch):
    return {"frontier.backend": "opensearch", "services.opensearch.port": opensearch.port,
            "opensearch.status.index.name": f"fs-{uuid.uuid4().hex[:10]}",
            "fetcher.server.delay": 1.0, "frontier.lease.ttl": 60,
            "frontier.stats.exact.max": 0, "frontier.stats.interval": 600}


@pytest.fixture(autouse=True)
def unshared(monkeypatch):
    """Every read asks the index (readers of a process otherwise share one for a second), and
    snapshots come every ``frontier.stats.interval`` however long one took on a busy machine
    (the ten-times rule: tests/unit/test_opensearch_stats.py)."""
    monkeypatch.setattr(stats, "SHARED_FOR", 0.0)
    monkeypatch.setattr(stats.StatsKeeper, "period", lambda self, snap: self.interval)


def upd(url, status, nfd, key):
    return StatusUpdate(url, Status(status), {}, nfd, key)


def crawl_like(now: float) -> list[StatusUpdate]:
    """12 hosts of 1-40 URLs: fetched ones due tomorrow, URLs due minutes ago, due within the
    hour and later, errors never due again."""
    out = []
    for h in range(12):
        key = f"h{h}.example"
        for j in range(1 + h * 3):
            url = f"http://{key}/{j}"
            if j % 4 == 0:
                out.append(upd(url, "FETCHED", now + 86400, key))
            elif j % 4 == 1:
                out.append(upd(url, "DISCOVERED", now - 60 * (h + 1) - j, key))
            elif j % 4 == 2:
                out.append(upd(url, "DISCOVERED", now + 90 * j + 30, key))
            else:
                out.append(upd(url, "ERROR", None, key))
    return out


def figures(f, now):
    return {"counts": f.counts(), "keys": f.queue_count(), "top": f.top_hosts(5),
            "delayed": [k for k, _ in f.most_delayed(now, 5)]}


def test_snapshot_figures_equal_the_index_and_stay_within_their_bound(conf):
    now = time.time()
    with open_frontier(conf, owner="w") as f, open_frontier({**conf, **LIVE}, owner="r") as live:
        assert f.apply_updates(crawl_like(now)) == []
        f.refresh()
        assert live.estimate(now) is None  # below frontier.stats.exact.max: the index's own
        est = f.estimate(now)
        assert est is not None and est["writes_since"] == 0
        assert figures(f, now) == figures(live, now)
        assert f.counts()["DISCOVERED"] == live.counts()["DISCOVERED"] > 0
        # the due count to the minute: between the index's at t and at t + 60 s
        for t in (now, now + 300, now + 1800):
            assert live.due_count(t) <= f.due_count(t) <= live.due_count(t + 60), t
        assert f.due_resolution == 60 and live.due_resolution == 0
        # five writes (two fetched, three new; two DISCOVERED of known URLs change nothing)
        assert f.apply_updates([upd("http://h11.example/1", "FETCHED", now + 86400, "h11.example"),
                                upd("http://h11.example/5", "FETCHED", now + 86400, "h11.example"),
                                *[upd(f"http://new.example/{i}", "DISCOVERED", now - 1,
                                      "new.example") for i in range(3)],
                                upd("http://h1.example/1", "DISCOVERED", now, "h1.example"),
                                upd("http://h2.example/2", "DISCOVERED", now, "h2.example")]) == []
        f.refresh()
        est = f.estimate(now)
        assert est["writes_since"] == 5 and est["as_of"] <= time.time()
        got, want = f.counts(), live.counts()
        assert got != want
        assert all(abs(got[s] - want[s]) <= 5 for s in want)
        assert abs(f.due_count(now) - live.due_count(now)) <= 5
        # a reader in another process sees the same snapshot and bound
        r = cli.owler("status", "--json", *[x for k, v in conf.items()
                                             for x in ("-o", f"{k}={v}")], check=True)
        doc = json.loads(r.stdout)
        assert doc["estimate"]["writes_since"] == 5 and doc["DISCOVERED"] == got["DISCOVERED"]
        text = cli.owler("status", *[x for k, v in conf.items() for x in ("-o", f"{k}={v}")],
                         check=True).stdout
        assert "each within 5 writes since" in text


def test_nothing_due_is_said_exactly_whatever_the_snapshot_says(conf):
    """The idle test of ``owler run`` stops a crawl when nothing is due: a snapshot whose URLs
    were fetched since says 0 only when the index has none due."""
    now = time.time()
    with open_frontier(conf, owner="w") as f:
        f.apply_updates([upd(f"http://a.example/{i}", "DISCOVERED", now - 10, "a.example")
                         for i in range(3)])
        f.refresh()
        assert f.due_count(now) == 3
        f.apply_updates([upd(f"http://a.example/{i}", "FETCHED", now + 86400, "a.example")
                         for i in range(2)])
        f.refresh()
        assert f.estimate(now)["writes_since"] == 2 and f.due_count(now) == 3
        f.apply_updates([upd("http://a.example/2", "FETCHED", now + 86400, "a.example")])
        f.refresh()
        assert f.estimate(now)["writes_since"] == 3 and f.due_count(now) == 0


def test_one_claim_at_a_time_and_a_dead_claimant_holds_nobody_up(conf, opensearch):
    """A writer killed -9 while it computes leaves its claim: readers answer meanwhile from the
    snapshot before it, with its bound, and once the claim has expired the next writer's bulk
    renews the figures."""
    now = time.time()
    index = conf["opensearch.status.index.name"]
    with open_frontier(conf, owner="w") as f:
        f.apply_updates(crawl_like(now))
        f.stats.join(30)
        assert f.estimate(now)["writes_since"] == 0  # the first snapshot, stored
    dies = ("import json, os, signal, sys, time\n"
            "from owler.frontier import open_frontier, opensearch_stats as st\n"
            "f = open_frontier(json.loads(sys.argv[1]), owner='dies')\n"
            "st.compute = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
            "snap, state = f.stats.read()\n"
            "f.stats.renew(time.time(), snap, state)\n")
    r = subprocess.run([sys.executable, "-c", dies, json.dumps(conf)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr
    status, doc = opensearch.request("GET", f"/{index}_leases/_doc/{stats.STATS_ID}")
    claim = doc["_source"]
    assert claim["owner"].startswith("dies/") and claim["until"] > time.time() * 1000
    conf1 = {**conf, "frontier.stats.interval": 1}
    with open_frontier(conf1, owner="w2") as f, open_frontier({**conf, **LIVE}) as live:
        f.apply_updates([upd("http://late.example/", "DISCOVERED", now, "late.example")])
        f.stats.join(30)  # its tick found the claim another's: nothing renewed
        f.refresh()
        time.sleep(3.1)  # three intervals: a reader would renew, but the claim is another's
        got, want = f.counts(), live.counts()
        assert f.estimate(now)["writes_since"] == 1 and got["DISCOVERED"] == want["DISCOVERED"] - 1
        snap, state = f.stats.read()
        assert state["owner"] == claim["owner"] and f.stats.renew(time.time(), snap, state) is None
        # of two conditional writes on the state both read, one wins
        other = stats.StatsKeeper(conf, f.client, f.index, f.leases_index, "x", lambda: None)
        assert other._write(state, {"owner": "x", "stats": snap.to_doc(), "until": 0}) is not None
        assert other._write(state, {"owner": "y", "stats": None, "until": 0}) is None
        # the claim expired (as 60 s later): the next bulk's tick renews the figures
        opensearch.request("PUT", f"/{index}_leases/_doc/{stats.STATS_ID}",
                           {"owner": claim["owner"], "stats": snap.to_doc(), "until": 0})
        f.stats._next_tick = 0
        f.apply_updates([upd("http://late.example/2", "DISCOVERED", now, "late.example")])
        f.stats.join(30)
        snap, state = f.stats.read()
        assert state["owner"] == f.stats.owner and state["until"] == 0
        f.refresh()
        assert f.counts() == live.counts() and f.estimate(now)["writes_since"] == 0


def test_a_reader_renews_figures_nobody_renewed_and_an_index_made_anew(conf, opensearch):
    """Statuses written by a process that did not renew the figures (here: straight into the
    index) are counted by the next reader once three intervals have passed; an index deleted and
    made anew (its sequence numbers start again) is read again at once."""
    now = time.time()
    conf1 = {**conf, "frontier.stats.interval": 1}
    index = conf["opensearch.status.index.name"]
    with open_frontier(conf1, owner="r") as f, open_frontier({**conf, **LIVE}) as live:
        f.apply_updates(crawl_like(now))
        f.stats.join(30)
        f.refresh()
        assert f.counts() == live.counts()
        lines = b"".join(b'{"index":{"_id":"x%d"}}\n{"url":"http://x.example/%d","status":"FETCHED",'
                         b'"key":"x.example","nextFetchDate":"2030-01-01T00:00:00Z"}\n' % (i, i)
                         for i in range(4))
        f.client.request("POST", f"/{index}/_bulk", lines, params={"refresh": "true"})
        assert f.estimate(time.time())["writes_since"] == 4
        time.sleep(3.1)
        assert f.counts() == live.counts() and f.estimate(time.time())["writes_since"] == 0
        before = f.counts()["FETCHED"]
    opensearch.request("DELETE", f"/{index}")
    with open_frontier(conf1, owner="r2") as f, open_frontier({**conf, **LIVE}) as live:
        f.apply_updates([upd("http://y.example/", "FETCHED", now + 86400, "y.example")])
        f.refresh()
        assert f.counts()["FETCHED"] == 1 != before
        assert f.counts() == live.counts()


def test_a_computation_that_fails_gives_its_claim_up(conf, monkeypatch):
    from owler.osclient import OpenSearchError

    now = time.time()
    with open_frontier(conf, owner="w") as f:
        f.apply_updates(crawl_like(now))
        f.stats.join(30)

        def broken(*a):
            raise OpenSearchError("a primary is not assigned")

        monkeypatch.setattr(stats, "compute", broken)
        snap, state = f.stats.read()
        with pytest.raises(OpenSearchError):
            f.stats.renew(time.time(), snap, state)
        after, state = f.stats.read()
        assert state["until"] == 0 and after == snap  # the figures before, claimable at once
        # a reader meanwhile asks the index itself, and says so in the log
        monkeypatch.setattr(stats, "SHARED_FOR", 0.0)
        f.stats.interval = 0.01
        f.apply_updates([upd("http://z.example/", "DISCOVERED", now, "z.example")])
        f.refresh()
        time.sleep(0.1)
        assert f.estimate(now) is None and f.counts()["DISCOVERED"] == after.counts["DISCOVERED"] + 1


def test_a_leases_index_of_an_older_version_gets_the_snapshots_field(conf, opensearch):
    """A crawl of yesterday: its leases index (strict mapping) has no field for the snapshot; the
    first frontier to open it adds the field, and the figures come as for a new one."""
    index = conf["opensearch.status.index.name"]
    template = json.loads((ROOT / "resources" / "opensearch" / "leases.json").read_text())
    template.pop("_comment")
    del template["mappings"]["properties"]["stats"]
    status, _ = opensearch.request("PUT", f"/{index}_leases", template)
    assert status == 200
    now = time.time()
    with open_frontier(conf, owner="w") as f, open_frontier({**conf, **LIVE}) as live:
        f.apply_updates(crawl_like(now))
        f.refresh()
        assert f.estimate(now) is not None and f.counts() == live.counts()
    _, mapping = opensearch.request("GET", f"/{index}_leases/_mapping")
    assert mapping[f"{index}_leases"]["mappings"]["properties"]["stats"] == {
        "type": "object", "enabled": False}
