"""Tests for owler.blacklist: line formats, subdomain matching, URL prefixes, reloading, size."""

from __future__ import annotations

import logging
import os

import pytest

from owler.blacklist import Blacklist


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def lists(tmp_path):
    write(tmp_path / "spam-domains.txt", """\
# a comment
! adblock-style comment

spam.example
*.wild.example
.dotted.example
Bücher-Spam.de
||tracker.example^
192.0.2.7
www.Host-Only.example.  # trailing comment
""")
    write(tmp_path / "hosts.txt", """\
127.0.0.1 localhost
127.0.0.1 localhost.localdomain
255.255.255.255 broadcasthost
::1 localhost ip6-localhost
0.0.0.0 ads.example tracking.example
127.0.0.1\tmalware.example
""")
    write(tmp_path / "optout.txt", """\
# webmaster opt-out
https://shop.example.org/private/
http://example.net:8080/a
optout.example
""")
    write(tmp_path / "ignored.csv", "everything.example\n")
    return tmp_path


def test_formats_and_matching(lists):
    bl = Blacklist(lists)
    assert bl.match("http://spam.example/") == "spam-domains"
    assert bl.match("https://a.b.spam.example/x?y") == "spam-domains"
    assert bl.match("https://notspam.example/") is None  # label boundary
    assert bl.match("https://x.wild.example/") == "spam-domains"
    assert bl.match("https://wild.example/") == "spam-domains"
    assert bl.match("https://dotted.example/") == "spam-domains"
    assert bl.match("https://www.bücher-spam.de/") == "spam-domains"
    assert bl.match("https://cdn.tracker.example/t.js") == "spam-domains"
    assert bl.match("http://192.0.2.7:8080/") == "spam-domains"
    assert bl.match("http://1.192.0.2.7.nip.example/") is None
    assert bl.match("http://www.host-only.example/") == "spam-domains"
    assert bl.match("http://host-only.example/") is None
    assert bl.match("http://ads.example/") == "hosts"
    assert bl.match("http://tracking.example/") == "hosts"
    assert bl.match("http://malware.example/") == "hosts"
    # hosts-file boilerplate is not a blacklist entry
    assert bl.match("http://localhost/") is None
    assert bl.match("http://127.0.0.1/") is None
    assert bl.match("http://everything.example/") is None  # not a .txt file
    assert bl.match("not a url") is None


def test_url_prefixes(lists):
    bl = Blacklist(lists)
    assert bl.match("https://shop.example.org/private/") == "optout"
    assert bl.match("http://shop.example.org/private/orders?id=1") == "optout"  # scheme ignored
    assert bl.match("HTTPS://SHOP.example.org/./private/x") == "optout"  # compared normalized
    assert bl.match("https://shop.example.org/public/") is None
    assert bl.match("https://shop.example.org/privateer") is None
    assert bl.match("https://other.shop.example.org/private/") is None  # prefix is per host
    assert bl.match("http://example.net:8080/a/b") == "optout"
    assert bl.match("http://example.net/a/b") is None  # other port
    assert bl.match("http://optout.example/") == "optout"


def test_invalid_lines_counted_and_logged(tmp_path, caplog):
    write(tmp_path / "bad.txt", "good.example\nnot a domain at all\nbad_-.\nhttp://\n-x-.com\n" + "x" * 300 + "\n")
    with caplog.at_level(logging.WARNING):
        bl = Blacklist(tmp_path)
    assert bl.stats["bad"].invalid == 5
    assert bl.stats["bad"].domains == 1
    assert "not a domain at all" in caplog.text and "5 invalid lines" in caplog.text
    assert bl.match("http://good.example/") == "bad"


def test_first_list_by_name_wins(tmp_path):
    write(tmp_path / "a.txt", "dup.example\n")
    write(tmp_path / "b.txt", "dup.example\n")
    assert Blacklist(tmp_path).match("http://dup.example/") == "a"


def test_reload_on_change_appear_disappear(tmp_path):
    bl = Blacklist(tmp_path / "later", reload_interval=10)  # folder does not exist yet
    assert bl.match("http://spam.example/") is None
    (tmp_path / "later").mkdir()
    f = write(tmp_path / "later" / "spam.txt", "spam.example\n")
    assert bl.maybe_reload(now=5) is False  # interval not yet elapsed since t=0
    assert bl.maybe_reload(now=11) is True
    assert bl.match("http://spam.example/") == "spam"
    assert bl.maybe_reload(now=30) is False  # nothing changed
    write(f, "other.example\n")
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    assert bl.maybe_reload(now=31) is False  # checked at 30: too soon
    assert bl.maybe_reload(now=45) is True
    assert bl.match("http://spam.example/") is None
    assert bl.match("http://other.example/") == "spam"
    write(tmp_path / "later" / "optout.txt", "optout.example\n")
    assert bl.maybe_reload(now=60) is True
    assert bl.match("http://optout.example/") == "optout"
    f.unlink()
    assert bl.maybe_reload(now=80) is True
    assert bl.match("http://other.example/") is None
    assert bl.match("http://optout.example/") == "optout"


def test_from_conf_defaults_and_disabled(tmp_path):
    bl = Blacklist.from_conf({})  # resources/blacklists with the empty optout.txt
    assert bl.reload_interval == 30
    assert list(bl.stats) == ["optout"]  # README.txt is not a list
    assert len(bl) == 0 and bl.stats["optout"].invalid == 0
    assert bl.match("http://example.com/") is None
    off = Blacklist.from_conf({"blacklist.dir": ""})
    assert off.directory is None and off.match("http://example.com/") is None
    write(tmp_path / "x.txt", "x.example\n")
    custom = Blacklist.from_conf({"blacklist.dir": str(tmp_path), "blacklist.reload.interval": 5})
    assert custom.reload_interval == 5 and custom.match("http://a.x.example/") == "x"


class ProbedDict(dict):
    """The blacklist's domain table, counting its probes; a walk over its entries fails."""

    probes = 0

    def __contains__(self, key):
        self.probes += 1
        return super().__contains__(key)

    def __getitem__(self, key):
        self.probes += 1
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.probes += 1
        return super().get(key, default)

    def _walk(self, *args):
        raise AssertionError("a lookup walked the whole table")

    __iter__ = keys = values = items = _walk


def test_large_list(tmp_path):
    n = 200_000
    with open(tmp_path / "big.txt", "w", encoding="utf-8") as fh:
        fh.write("# generated\n")
        for i in range(n):
            if i % 4 == 0:
                fh.write(f"0.0.0.0 host{i}.spam{i % 997}.example\n")
            else:
                fh.write(f"domain{i}.example\n")
    bl = Blacklist(tmp_path)
    assert bl.stats["big"].domains == n and bl.stats["big"].invalid == 0 and len(bl) == n
    # a lookup probes the table once per label of the host (plus one to read a hit), whatever
    # its size: no walk over the 200,000 entries (the time it takes: bench/ has no bench of it)
    bl._domains = table = ProbedDict(bl._domains)
    hits = 0
    for i in range(20_000):
        before = table.probes
        if bl.match(f"https://www.sub.domain{i}.example/path?q={i}"):
            hits += 1
        assert table.probes - before <= len(f"www.sub.domain{i}.example".split(".")) + 1
    assert hits == 15_000  # the i % 4 == 0 ones are host entries (host{i}.spam...), not domain{i}
    # a miss tries each of the 4 suffixes of www.sub.domainN.example; a hit stops at domainN
    # (www.sub.domainN.example, sub.domainN.example, domainN.example)
    assert table.probes == 5_000 * 4 + 15_000 * 3
    assert bl.match("https://x.host4.spam4.example/") == "big"
    assert bl.match("https://spam4.example/") is None


def test_a_url_listed_after_it_entered_the_frontier_is_refused_after_the_reload(tmp_path):
    (tmp_path / "optout.txt").write_text("# opt-outs\n")
    bl = Blacklist(tmp_path, reload_interval=5)
    url = "http://www.shop.example/page"
    assert bl.refusal(url, now=100.0) is None
    (tmp_path / "optout.txt").write_text("shop.example\n")
    assert bl.refusal(url, now=102.0) is None  # not checked again before the interval
    assert bl.refusal(url, now=106.0) == "blacklist:optout"
    (tmp_path / "spam.txt").write_text("other.example\n")
    assert bl.refusal("http://other.example/", now=112.0) == "blacklist:spam"
