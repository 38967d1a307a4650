#!/usr/bin/env bash
# Installs Apache Storm into .storm/apache-storm-<version>/ from Maven Central only
# (no Clojars, no Apache mirrors), with strict checksum verification (mvn -C).
#
# Maven Central has no binary distribution (final-package / apache-storm-bin tarball) of Storm 2.x,
# so the layout of the distribution is assembled from the jars:
#   lib/         storm-core and its runtime dependencies (daemons, local mode)
#   lib-worker/  storm-client and its runtime dependencies (worker classpath)
#   lib-flux/    flux-core + flux-wrappers (FluxShellBolt/Spout; `sparse run` topologies)
#   lib-owler/   the project's own Java (storm/java, storm/multilang), compiled here with javac
#   conf/, log4j2/, public/, bin/storm (the project's launcher script, storm/bin/storm)
# Idempotent: a stamp file records what was installed; a second run returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
version=$(cat "$here/VERSION")
home="$root/.storm/apache-storm-$version"
stamp="$home/.installed"
sources_sum=$(cat "$here/VERSION" "$here"/poms/*.pom "$here"/java/*.java "$here"/multilang/*.java "$here"/bin/storm "$here"/conf/* "$here"/ui/* | sha256sum | cut -c1-16)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sources_sum" ]; then
  exit 0
fi
command -v java >/dev/null || { echo "install.sh: java (17+) is required: apt-get install openjdk-17-jdk-headless" >&2; exit 3; }
command -v mvn >/dev/null || { echo "install.sh: mvn is required: apt-get install maven" >&2; exit 3; }

echo "Installing Apache Storm $version into $home (Maven Central, checksums verified) ..."
mkdir -p "$home"
plugin=org.apache.maven.plugins:maven-dependency-plugin
mvnlog="$root/.storm/maven.log"
: > "$mvnlog"
mvn_q() {  # quiet Maven; its output is shown only when it fails
  if ! mvn -B -C -Dstyle.color=never "$@" >> "$mvnlog" 2>&1; then
    grep -E 'ERROR|BUILD' "$mvnlog" | head -20 >&2
    echo "install.sh: Maven failed (full log: $mvnlog)" >&2
    exit 1
  fi
}
for d in lib lib-worker; do
  rm -rf "$home/$d.tmp"
  mvn_q -f "$here/poms/$d.pom" -Dstorm.version="$version" \
      "$plugin:3.8.1:copy-dependencies" -DincludeScope=runtime -DoutputDirectory="$home/$d.tmp"
  rm -rf "$home/$d"; mv "$home/$d.tmp" "$home/$d"
done
# Flux's parent POM (org.apache.storm:flux) is not on Maven Central, so its jars cannot be resolved
# transitively; the copy goal of plugin 2.10 fetches single artifacts without reading the parent.
# Flux's own dependencies (snakeyaml, commons-cli) are already in lib/.
rm -rf "$home/lib-flux.tmp"
for a in flux-core flux-wrappers; do
  mvn_q "$plugin:2.10:copy" -Dartifact="org.apache.storm:$a:$version" \
      -DoutputDirectory="$home/lib-flux.tmp"
done
rm -rf "$home/lib-flux"; mv "$home/lib-flux.tmp" "$home/lib-flux"

# The project's launcher (local mode with a clean stop; see storm/java/LocalRunner.java), its UI
# server, and the multilang serializer (storm/multilang; also compiled into the topology jar).
rm -rf "$home/lib-owler" "$home/classes"
mkdir -p "$home/lib-owler" "$home/classes"
javac -nowarn -d "$home/classes" -cp "$home/lib/*:$home/lib-flux/*" "$here"/java/*.java \
    "$here"/multilang/*.java
(cd "$home/classes" && jar cf "$home/lib-owler/owler-storm.jar" .)
# The agent that binds Storm's servers to one address (storm/java/LoopbackBind.java): its own jar
# with a manifest naming it and the ASM of Storm's lib/ (workers do not have lib/ on their classpath).
asm_jar=$(cd "$home/lib" && ls asm-[0-9]*.jar | head -1)
[ -n "$asm_jar" ] || { echo "install.sh: no asm jar in $home/lib" >&2; exit 1; }
printf 'Premain-Class: eu.ows.owler.storm.LoopbackBind\nClass-Path: ../lib/%s\n' "$asm_jar" \
    > "$home/classes/agent.mf"
(cd "$home/classes" && jar cfm "$home/lib-owler/owler-bind-agent.jar" agent.mf \
    eu/ows/owler/storm/LoopbackBind*.class)
rm -rf "$home/classes"

mkdir -p "$home/conf" "$home/log4j2" "$home/public" "$home/bin" "$home/extlib" "$home/extlib-daemon"
cp "$here/conf/storm.yaml" "$home/conf/storm.yaml"
cp "$here/conf/cluster.xml" "$here/conf/worker.xml" "$home/log4j2/"
rm -rf "$home/public"; mkdir -p "$home/public"
cp "$here"/ui/* "$home/public/"   # the page of the project's Storm UI (storm/java/UiServer.java)
install -m 0755 "$here/bin/storm" "$home/bin/storm"
echo "$version" > "$home/RELEASE"
echo "$sources_sum" > "$stamp"
echo "Storm $version installed: $home"
