#!/usr/bin/env bash
# Installs the lists of the risk-class parse filter (owler.parse.filters.risk) from two Debian 12
# packages pinned in services/risk/VERSIONS, without installing the packages themselves:
#   webext-ublock-origin-firefox: uAssets' badware list (GPL-3) and abuse.ch URLhaus (CC0), for
#     the `malicious` class;
#   e2guardian: DansGuardian weighted phrase lists (GPL-2+), pornography + goodphrases, for `adult`.
# Each .deb is fetched, checked and unpacked into a temporary folder by services/debian.sh, and
# only the list files and the copyright files are kept:
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
sources_sum=$(cat "$versions" "$0" "$here/../debian.sh" | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sources_sum" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
DEB_TMP=$tmp DEB_VERSIONS=$versions DEB_WHO=install.sh
# shellcheck source=services/debian.sh
. "$here/../debian.sh"

install_pkg() {  # PKG VERSION NEW_FOLDER: publish NEW_FOLDER as <dest>/<pkg>-<ver> + symlink
  local pkg=$1 ver=$2 new=$3 final="$dest/$1-$2"
  echo "$pkg $ver" > "$new/VERSION"
  rm -rf "$final"; mv "$new" "$final"
  ln -sfn "$pkg-$ver" "$dest/$pkg"
  echo "  $pkg $ver -> $final ($(find "$final" -type f | wc -l) files)"
}

mkdir -p "$dest"
echo "Installing the risk-class lists into $dest (Debian packages, SHA256 checked) ..."

pkg=webext-ublock-origin-firefox
deb_unpack "$pkg"; ver=$(cat "$tmp/x/$pkg.version")
src=$(find "$tmp/x/$pkg" -type d -path '*uBlock0@raymondhill.net/assets' | head -1)
[ -n "$src" ] || { echo "install.sh: no uBlock assets folder in $pkg" >&2; exit 1; }
new="$dest/.$pkg.new"; rm -rf "$new"; mkdir -p "$new"
cp "$src/ublock/badware.min.txt" "$src/thirdparties/urlhaus-filter/urlhaus-filter-online.txt" "$new/"
cp "$src/thirdparties/urlhaus-filter/LICENSE.md" "$new/urlhaus-filter-LICENSE.md"
cp "$tmp/x/$pkg/usr/share/doc/$pkg/copyright" "$new/copyright"
install_pkg "$pkg" "$ver" "$new"

pkg=e2guardian
deb_unpack "$pkg"; ver=$(cat "$tmp/x/$pkg.version")
src="$tmp/x/$pkg/etc/e2guardian/lists/phraselists"
new="$dest/.$pkg.new"; rm -rf "$new"; mkdir -p "$new/pornography" "$new/goodphrases"
cp "$src"/pornography/weighted* "$new/pornography/"
cp "$src/goodphrases/weighted_general" "$new/goodphrases/"
cp "$tmp/x/$pkg/usr/share/doc/$pkg/copyright" "$new/copyright"
install_pkg "$pkg" "$ver" "$new"

echo "$sources_sum" > "$stamp"
echo "Risk-class lists installed: $dest"
