#!/usr/bin/env bash
# Real files the tests read but the repository does not hold, because their licence does not let
# the project copy them, fetched from the package registry into .work/testdata/:
# - the sample archives shipped in the source of the PyPI package pywb 2.10.0 (GPL-3.0: wget 1.14
#   and wpull output, a crawl of iana.org) into .work/testdata/pywb-2.10.0/warcs;
# - the text samples shipped in the source of the PyPI package charset-normalizer 3.5.2 (its
#   data/ folder: Wikipedia text under CC-BY-SA, in eighteen languages and legacy encodings) into
#   .work/testdata/charset-normalizer-3.5.2/data, for the charset guesser's tests;
# - the HTML pages of two Debian manuals in their translations (the Debian FAQ and the New
#   Maintainers' Guide, GPL-2+: thirteen languages, packages pinned in tests/manuals.versions,
#   taken apart without installing them by services/debian.sh) into
#   .work/testdata/debian-manuals/<package>/, for the language test (tests/farm/manuals.py);
# - the PDF versions of the same manuals, shipped in the same packages (gzipped ones unpacked),
#   into .work/testdata/debian-documents/<package>/, for the documents' tests
#   (tests/unit/test_documents.py, tests/farm/documents.py).
# Idempotent: a package whose folder is complete is not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# fetch NAME VERSION DEST MEMBER... : the source distribution's MEMBERs (paths under
# NAME-VERSION/) moved into DEST
fetch() {
  local name=$1 version=$2 dest=$3
  shift 3
  [ -f "$dest/.complete" ] && return 0
  local tmp="$work/$name"
  mkdir -p "$tmp"
  .venv/bin/pip download -q --no-deps --no-binary :all: -d "$tmp" "$name==$version"
  local archive
  archive=$(ls "$tmp"/*.tar.gz)
  local top
  top=$(basename "$archive" .tar.gz)
  local members=()
  for m in "$@"; do members+=("$top/$m"); done
  tar -xzf "$archive" -C "$tmp" "${members[@]}"
  mkdir -p "$dest"
  for m in "$@"; do
    rm -rf "${dest:?}/$(basename "$m")"
    mv "$tmp/$top/$m" "$dest/"
  done
  touch "$dest/.complete"
  echo "$name $version: $* in $dest"
}

fetch pywb 2.10.0 .work/testdata/pywb-2.10.0 sample_archive/warcs LICENSE
fetch charset-normalizer 3.5.2 .work/testdata/charset-normalizer-3.5.2 data LICENSE

# manuals: every package of tests/manuals.versions, unpacked once: its HTML pages (paths under
# usr/share/doc/) into .work/testdata/debian-manuals/<package>/, its PDFs (a .pdf.gz unpacked) into
# .work/testdata/debian-documents/<package>/, and its copyright file into both
manuals() {
  local html=.work/testdata/debian-manuals pdf=.work/testdata/debian-documents sum
  sum=$(cat tests/manuals.versions services/debian.sh | sha256sum | cut -c1-16)
  [ "$(cat "$html/.complete" 2>/dev/null)" = "$sum" ] &&
    [ "$(cat "$pdf/.complete" 2>/dev/null)" = "$sum" ] && return 0
  DEB_TMP=$work DEB_VERSIONS=tests/manuals.versions DEB_WHO=testdata.sh
  # shellcheck source=services/debian.sh
  . services/debian.sh
  rm -rf "$html" "$pdf"; mkdir -p "$html" "$pdf"
  local pkg doc f n
  for pkg in $(awk '!/^#/ && NF { print $1 }' tests/manuals.versions); do
    deb_unpack "$pkg"
    doc=$work/x/$pkg/usr/share/doc
    (cd "$doc" && find . -name '*.html' -print0 |
       xargs -0 -I{} install -D -m 644 {} "$OLDPWD/$html/$pkg/{}")
    n=$(find "$html/$pkg" -name '*.html' | wc -l)
    [ "$n" -gt 0 ] || { echo "testdata.sh: no HTML page in $pkg" >&2; exit 1; }
    mkdir -p "$pdf/$pkg"
    while IFS= read -r -d '' f; do
      case $f in
        *.gz) gzip -dc "$f" > "$pdf/$pkg/$(basename "${f%.gz}")" ;;
        *) cp "$f" "$pdf/$pkg/" ;;
      esac
    done < <(find "$doc" -type f \( -name '*.pdf' -o -name '*.pdf.gz' \) -print0)
    ls "$pdf/$pkg"/*.pdf >/dev/null 2>&1 || { echo "testdata.sh: no PDF in $pkg" >&2; exit 1; }
    cp "$doc/$pkg/copyright" "$html/$pkg/copyright"
    cp "$doc/$pkg/copyright" "$pdf/$pkg/copyright"
    rm -rf "${work:?}/x/$pkg"
  done
  echo "$sum" > "$html/.complete"
  echo "$sum" > "$pdf/.complete"
  echo "Debian manuals: $(find "$html" -name '*.html' | wc -l) HTML pages in $html"
  echo "Debian documents: $(find "$pdf" -name '*.pdf' | wc -l) PDFs in $pdf"
}
manuals
