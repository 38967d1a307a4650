#!/usr/bin/env bash
# Installs the dashboard's chart library, uPlot (MIT), from its npm package pinned in
# services/dashboard/VERSIONS: `npm pack` fetches the tarball from the configured registry, its
# SHA256 is checked against the pin, and only dist/uPlot.iife.min.js, dist/uPlot.min.css and the
# LICENSE are kept in <dest> (default .services/dashboard). The dashboard serves them itself
# (src/owler/run/dashboard.py): the page needs no CDN.
# Idempotent: a stamp records what was installed; a second run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dest=${1:-$root/.services/dashboard}
case "$dest" in /*) ;; *) dest="$root/$dest" ;; esac
stamp="$dest/.installed"
sources_sum=$(cat "$here/VERSIONS" "$0" | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sources_sum" ]; then
  exit 0
fi
command -v npm >/dev/null || {
  echo "install.sh: npm is required to fetch uPlot (Node.js 18 or later with npm)" >&2; exit 3; }
read -r pkg version want < <(grep -v '^#' "$here/VERSIONS" | awk 'NF == 3 && $1 == "uplot"')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$pkg@$version" >/dev/null)
tarball="$tmp/$pkg-$version.tgz"
got=$(sha256sum "$tarball" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "install.sh: $pkg-$version.tgz has SHA256 $got, expected $want" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$tmp" package/dist/uPlot.iife.min.js package/dist/uPlot.min.css \
    package/LICENSE
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$dest.tmp/"
cp "$tmp/package/LICENSE" "$dest.tmp/LICENSE.uPlot"
echo "$pkg $version" > "$dest.tmp/VERSION"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$sources_sum" > "$stamp"
echo "uPlot $version installed: $dest"
