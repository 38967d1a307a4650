#!/usr/bin/env bash
# Installs pywb (the web archive replay tool; GPL-3.0) from the Python package registry into a
# virtualenv of its own, .services/pywb-<version>/ (version from the pywb line of
# services/pywb/requirements.txt, every package pinned there), never the project's .venv: pywb pins
# Werkzeug, redis and gevent versions the crawler's own packages would clash with. The tests call
# its `wayback` (replay server), `cdx-indexer` and `wb-manager` from <home>/bin to judge the CDXJ
# indices the crawl writes beside its WARC files (owler.warc.format.cdxj); the crawler itself never
# imports pywb.
# Idempotent: a stamp records what was installed; a second run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(awk -F'==' '$1 == "pywb" {print $2}' "$here/requirements.txt")
[ -n "$version" ] || { echo "install.sh: no pywb==<version> line in $here/requirements.txt" >&2; exit 1; }
home="$root/.services/pywb-$version"
stamp="$home/.installed"
sources_sum=$(cat "$here/requirements.txt" "$0" | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sources_sum" ] && [ -x "$home/bin/wayback" ]; then
  exit 0
fi
python=${PYTHON:-python3}
echo "Installing pywb $version into $home (its own virtualenv) ..."
# a virtualenv's scripts name its folder, so it is built at its final path; the stamp, written
# last, says it is complete
rm -rf "$home"
"$python" -m venv "$home"
"$home/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
"$home/bin/python" -c "import pywb, surt, warcio" >/dev/null
echo "$sources_sum" > "$stamp"
echo "pywb $version installed: $home"
