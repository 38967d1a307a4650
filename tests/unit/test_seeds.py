"""Seed files: StormCrawler's URL<TAB>key=value format, line-numbered errors, unreadable files."""

from __future__ import annotations

import io
import sys

import pytest

from owler.seeds import SeedFileError, parse_seeds, read_seed_file


def test_parse_valid_lines_with_metadata():
    seeds, errors = parse_seeds([
        "  https://Example.com/a#x  ",
        "http://b.org/\tisSitemap=true\ttag=a\ttag=b\tq=x=y",
        "http://c.org/\tempty=",
    ])
    assert errors == []
    assert seeds == [
        ("https://example.com/a", {}),
        ("http://b.org/", {"isSitemap": ["true"], "tag": ["a", "b"], "q": ["x=y"]}),
        ("http://c.org/", {"empty": [""]}),
    ]


def test_comments_blank_lines_and_line_numbers():
    lines = ["# comment", "", "   ", "ftp://files.example.com/", "http://ok.com/",
             "example.com/no-scheme", "http:///nohost", "http://x.com/\tnokeyvalue",
             "http://x.com/\t=v", "mailto:someone@example.com", "http://[::1/",
             "https://a.com/ tag=x"]
    seeds, errors = parse_seeds(lines)
    assert seeds == [("http://ok.com/", {})]
    by_line = {n: (line, reason) for n, line, reason in errors}
    assert sorted(by_line) == [4, 6, 7, 8, 9, 10, 11, 12]
    assert "unsupported scheme 'ftp'" in by_line[4][1]
    assert by_line[4][0] == "ftp://files.example.com/"
    assert "no scheme" in by_line[6][1]
    assert "empty host" in by_line[7][1]
    assert "not key=value" in by_line[8][1]
    assert "empty key" in by_line[9][1]
    assert "unsupported scheme 'mailto'" in by_line[10][1]
    assert "unparsable" in by_line[11][1]
    assert "whitespace" in by_line[12][1]


def test_host_and_port_without_scheme():
    _, errors = parse_seeds(["localhost:8080/x"])
    assert "no scheme" in errors[0][2]


def test_read_file_with_bom_and_crlf(tmp_path):
    p = tmp_path / "seeds.txt"
    p.write_bytes("\ufeffhttp://a.com/\r\n# c\r\nhttp://b.com/\tk=v\r\nbad\r\n".encode("utf-8"))
    seeds, errors = read_seed_file(p)
    assert seeds == [("http://a.com/", {}), ("http://b.com/", {"k": ["v"]})]
    assert [(n, line) for n, line, _ in errors] == [(4, "bad")]


def test_read_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"http://a.com/\n")))
    assert read_seed_file("-") == ([("http://a.com/", {})], [])


def test_unreadable_files(tmp_path):
    with pytest.raises(SeedFileError, match="does not exist"):
        read_seed_file(tmp_path / "missing.txt")
    with pytest.raises(SeedFileError, match="is a directory"):
        read_seed_file(tmp_path)
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(SeedFileError, match="binary"):
        read_seed_file(binary)
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("http://caf\xe9.com/\n".encode("latin-1"))
    with pytest.raises(SeedFileError, match="not UTF-8.*offset 10"):
        read_seed_file(latin)


def test_permission_denied_simulated(tmp_path, monkeypatch):
    p = tmp_path / "secret.txt"
    p.write_text("http://a.com/\n")

    def deny(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(type(p), "read_bytes", deny)
    with pytest.raises(SeedFileError, match="permission denied"):
        read_seed_file(p)
