#!/usr/bin/env bash
# Installs the lists of the risk-class parse filter (owler.parse.filters.risk) from two Debian 12
# packages pinned in services/risk/VERSIONS, without installing the packages themselves:
#   webext-ublock-origin-firefox: uAssets' badware list (GPL-3) and abuse.ch URLhaus (CC0), for
#     the `malicious` class;
#   e2guardian: DansGuardian weighted phrase lists (GPL-2+), pornography + goodphrases, for `adult`.
# Each .deb is fetched with `apt-get download` (`apt-get update` first only when that fails), its
# SHA256 checked against the one `apt-cache show <pkg>=<version>` reports, unpacked with
# `dpkg-deb -x` into a temporary folder, and only the list files and the copyright files are kept:
#   <dest>/<package>-<version>/...   and the symlink <dest>/<package> -> <package>-<version>
# Usage: install.sh [dest]   (default: .services/risk under the project root)
# Idempotent: a stamp records what was installed; a second run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dest=${1:-$root/.services/risk}
case "$dest" in /*) ;; *) dest="$root/$dest" ;; esac
versions="$here/VERSIONS"
stamp="$dest/.installed"
sources_sum=$(cat "$versions" "$0" | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sources_sum" ]; then
  exit 0
fi
for tool in apt-get apt-cache dpkg-deb sha256sum; do
  command -v "$tool" >/dev/null || { echo "install.sh: $tool is required (Debian/Ubuntu)" >&2; exit 3; }
done
SUDO=$( [ "$(id -u)" = 0 ] || echo sudo )
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
updated=0

version_of() { awk -v p="$1" '$1 == p { print $2 }' "$versions"; }

# resolve PKG PINNED: the pinned version when the package lists have it (after one apt-get update
# if needed), else Debian's current candidate (a stable update superseded the pin) with a warning
resolve() {
  local pkg=$1 ver=$2 cand
  if ! apt-cache show "$pkg=$ver" >/dev/null 2>&1 && [ "$updated" = 0 ]; then
    echo "install.sh: $pkg=$ver not in the package lists; running apt-get update" >&2
    $SUDO apt-get update -qq >&2
    updated=1
  fi
  if apt-cache show "$pkg=$ver" >/dev/null 2>&1; then
    echo "$ver"
    return
  fi
  cand=$(apt-cache policy "$pkg" | awk '/Candidate:/ { print $2 }')
  if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
    echo "install.sh: no version of $pkg is available" >&2
    return 1
  fi
  echo "install.sh: WARNING: $pkg=$ver is gone from Debian; taking its current version $cand" \
       "(pin it in $versions)" >&2
  echo "$cand"
}

# fetch PKG VERSION: the verified .deb's path on stdout
fetch() {
  local pkg=$1 ver=$2 deb want got
  mkdir -p "$tmp/dl"
  if ! (cd "$tmp/dl" && apt-get download -q "$pkg=$ver" >/dev/null 2>"$tmp/apt.err"); then
    if [ "$updated" = 0 ]; then
      echo "install.sh: $pkg=$ver not in the package lists; running apt-get update" >&2
      $SUDO apt-get update -qq >&2
      updated=1
    fi
    (cd "$tmp/dl" && apt-get download -q "$pkg=$ver" >/dev/null 2>"$tmp/apt.err") || {
      cat "$tmp/apt.err" >&2
      echo "install.sh: cannot download $pkg=$ver (superseded? pin the current version in $versions)" >&2
      return 1
    }
  fi
  deb=$(ls "$tmp/dl/${pkg}_"*.deb | head -1)
  want=$(apt-cache show "$pkg=$ver" | awk '/^SHA256:/ { print $2; exit }')
  got=$(sha256sum "$deb" | cut -d' ' -f1)
  if [ -z "$want" ] || [ "$want" != "$got" ]; then
    echo "install.sh: SHA256 mismatch for $deb: apt says '${want}', file is $got" >&2
    return 1
  fi
  echo "$deb"
}

# unpack PKG VERSION: the verified .deb extracted into $tmp/x/PKG
unpack() {
  local deb
  deb=$(fetch "$1" "$2")
  rm -rf "$tmp/x/$1"; mkdir -p "$tmp/x/$1"
  dpkg-deb -x "$deb" "$tmp/x/$1"
  rm -f "$deb"
}

install_pkg() {  # PKG VERSION NEW_FOLDER: publish NEW_FOLDER as <dest>/<pkg>-<ver> + symlink
  local pkg=$1 ver=$2 new=$3 final="$dest/$1-$2"
  echo "$pkg $ver" > "$new/VERSION"
  rm -rf "$final"; mv "$new" "$final"
  ln -sfn "$pkg-$ver" "$dest/$pkg"
  echo "  $pkg $ver -> $final ($(find "$final" -type f | wc -l) files)"
}

mkdir -p "$dest"
echo "Installing the risk-class lists into $dest (Debian packages, SHA256 checked) ..."

pkg=webext-ublock-origin-firefox; ver=$(version_of $pkg)
[ -n "$ver" ] || { echo "install.sh: no version of $pkg in $versions" >&2; exit 2; }
ver=$(resolve "$pkg" "$ver")
unpack "$pkg" "$ver"
src=$(find "$tmp/x/$pkg" -type d -path '*uBlock0@raymondhill.net/assets' | head -1)
[ -n "$src" ] || { echo "install.sh: no uBlock assets folder in $pkg" >&2; exit 1; }
new="$dest/.$pkg.new"; rm -rf "$new"; mkdir -p "$new"
cp "$src/ublock/badware.min.txt" "$src/thirdparties/urlhaus-filter/urlhaus-filter-online.txt" "$new/"
cp "$src/thirdparties/urlhaus-filter/LICENSE.md" "$new/urlhaus-filter-LICENSE.md"
cp "$tmp/x/$pkg/usr/share/doc/$pkg/copyright" "$new/copyright"
install_pkg "$pkg" "$ver" "$new"

pkg=e2guardian; ver=$(version_of $pkg)
[ -n "$ver" ] || { echo "install.sh: no version of $pkg in $versions" >&2; exit 2; }
ver=$(resolve "$pkg" "$ver")
unpack "$pkg" "$ver"
src="$tmp/x/$pkg/etc/e2guardian/lists/phraselists"
new="$dest/.$pkg.new"; rm -rf "$new"; mkdir -p "$new/pornography" "$new/goodphrases"
cp "$src"/pornography/weighted* "$new/pornography/"
cp "$src/goodphrases/weighted_general" "$new/goodphrases/"
cp "$tmp/x/$pkg/usr/share/doc/$pkg/copyright" "$new/copyright"
install_pkg "$pkg" "$ver" "$new"

echo "$sources_sum" > "$stamp"
echo "Risk-class lists installed: $dest"
