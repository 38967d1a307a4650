#!/usr/bin/env bash
# Builds the URLFrontier API's descriptor (src/owler/frontier/urlfrontier.desc) from the
# urlfrontier-API sources jar on Maven Central (checksums verified, mvn -C): the artifact carries
# no .proto file, only protoc's Java output with the serialized descriptor (extract_descriptor.py).
# Also the API's Java stubs with grpc-java (java-client.pom) into java-lib/: the tests' foreign
# client (tests/java/urlfrontier/JavaClient.java).
# Idempotent: a stamp records what was built; a second run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(cat "$here/VERSION")
home="$root/.services/urlfrontier-api-$version"
out="$root/src/owler/frontier/urlfrontier.desc"
stamp="$home/.installed"
sources_sum=$(cat "$here/VERSION" "$here/extract_descriptor.py" "$here/java-client.pom" | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sources_sum" ] && [ -s "$out" ]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "install.sh: mvn is required: apt-get install maven" >&2; exit 3; }
python=${PYTHON:-$root/.venv/bin/python}
mkdir -p "$home"
log="$home/maven.log"
if ! mvn -B -C -Dstyle.color=never org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
    -Dartifact="com.github.crawler-commons:urlfrontier-API:$version:jar:sources" \
    -DoutputDirectory="$home" > "$log" 2>&1; then
  grep -E 'ERROR|BUILD' "$log" | head -20 >&2
  echo "install.sh: Maven failed (full log: $log)" >&2
  exit 1
fi
rm -rf "$home/java-lib.tmp"
if ! mvn -B -C -Dstyle.color=never -f "$here/java-client.pom" -Durlfrontier.version="$version" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$home/java-lib.tmp" >> "$log" 2>&1; then
  grep -E 'ERROR|BUILD' "$log" | head -20 >&2
  echo "install.sh: Maven failed (full log: $log)" >&2
  exit 1
fi
rm -rf "$home/java-lib"; mv "$home/java-lib.tmp" "$home/java-lib"
"$python" "$here/extract_descriptor.py" "$home/urlfrontier-API-$version-sources.jar" "$out"
echo "$sources_sum" > "$stamp"
