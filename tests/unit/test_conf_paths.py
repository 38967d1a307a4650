"""owler.conf.absolute_paths: what the command that reads the configuration resolves before the
workers, whose current directory is not the user's, read it."""

from __future__ import annotations

from pathlib import Path

from owler import conf as C
from owler.constants import (BLACKLIST_DIR_KEY, PARSEFILTERS_FILE_KEY, POLITENESS_FILE_KEY,
                             SQLITE_PATH_KEY, URLFILTERS_FILE_KEY)


def test_a_resource_found_only_in_the_current_directory_is_made_absolute(tmp_path, monkeypatch):
    root, here = tmp_path / "project", tmp_path / "here"
    (root / "resources" / "blacklists").mkdir(parents=True)
    (root / "resources" / "urlfilters.json").write_text("{}")
    (here / "mylists").mkdir(parents=True)
    (here / "parse.json").write_text("{}")
    monkeypatch.chdir(here)
    conf = C.absolute_paths({
        BLACKLIST_DIR_KEY: "mylists",  # only here: absolute
        PARSEFILTERS_FILE_KEY: " parse.json ",
        URLFILTERS_FILE_KEY: "urlfilters.json",  # under resources/: each process looks it up
        POLITENESS_FILE_KEY: "nowhere.txt",  # nowhere: left as it is, for the reader's own error
        SQLITE_PATH_KEY: ".work/frontier.sqlite"}, root)
    assert conf[BLACKLIST_DIR_KEY] == str(here / "mylists")
    assert conf[PARSEFILTERS_FILE_KEY] == str(here / "parse.json")
    assert conf[URLFILTERS_FILE_KEY] == "urlfilters.json"
    assert conf[POLITENESS_FILE_KEY] == "nowhere.txt"
    assert conf[SQLITE_PATH_KEY] == str(root / ".work/frontier.sqlite")
    # the worker's lookup, from another directory, finds what the user meant
    monkeypatch.chdir(tmp_path)
    assert C.resource_path(conf[BLACKLIST_DIR_KEY], root) == here / "mylists"


def test_a_resource_of_the_project_stays_relative(tmp_path, monkeypatch):
    """The default blacklists folder exists under resources/ and in the current directory too
    (a crawl started from the project root): each process finds it under its own project root."""
    root = tmp_path / "project"
    (root / "resources" / "blacklists").mkdir(parents=True)
    (root / "blacklists").mkdir()
    monkeypatch.chdir(root)
    for value in ("blacklists", "", "s3://bucket/lists", "/abs/lists"):
        assert C.absolute_paths({BLACKLIST_DIR_KEY: value}, root)[BLACKLIST_DIR_KEY] == value
    assert BLACKLIST_DIR_KEY not in C.absolute_paths({}, root)


def test_the_project_root_from_outside_the_project(tmp_path, monkeypatch):
    """From a directory outside the project the code's own parents are searched: the checkout's
    src/ (whose resources/ links to the project's) is passed over for the root (a command run
    elsewhere crashed looking for src/storm/VERSION); a real resources/ folder, as the topology
    jar's, is a root."""
    repo = Path(C.__file__).resolve().parents[2]
    monkeypatch.delenv("OWLER_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert C.project_root() == repo
    checkout, jar = tmp_path / "checkout", tmp_path / "jar"
    (checkout / "resources").mkdir(parents=True)
    (checkout / "resources" / C.DEFAULT_CONF_NAME).write_text("{}")
    (checkout / "src").mkdir()
    (checkout / "src" / "resources").symlink_to("../resources")
    (jar / "resources" / "resources").mkdir(parents=True)
    (jar / "resources" / "resources" / C.DEFAULT_CONF_NAME).write_text("{}")
    assert C.root_among([checkout / "src" / "owler", checkout / "src", checkout]) == checkout
    assert C.root_among([jar / "resources" / "owler", jar / "resources", jar]) == jar / "resources"
    assert C.root_among([tmp_path]) is None
