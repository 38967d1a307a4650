#!/usr/bin/env bash
# Real WARC files the tests read but the repository does not hold (their licence, GPL-3.0, does not
# let the project copy them): the sample archives shipped in the source of the PyPI package
# pywb 2.10.0 (wget 1.14 and wpull output, a crawl of iana.org), fetched from the package registry
# into .work/testdata/pywb-2.10.0/. Idempotent: returns at once when they are there.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.work/testdata/pywb-2.10.0
[ -f "$dest/.complete" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
.venv/bin/pip download -q --no-deps --no-binary :all: -d "$tmp" pywb==2.10.0
mkdir -p "$dest"
tar -xzf "$tmp"/pywb-2.10.0.tar.gz -C "$tmp" pywb-2.10.0/sample_archive/warcs pywb-2.10.0/LICENSE
rm -rf "$dest/warcs"
mv "$tmp"/pywb-2.10.0/sample_archive/warcs "$dest/warcs"
mv "$tmp"/pywb-2.10.0/LICENSE "$dest/LICENSE"
touch "$dest/.complete"
echo "pywb 2.10.0 sample archives in $dest/warcs"
