;; Leiningen project used by streamparse (`sparse run`, `sparse submit`) to build the topology jar.
;; Only Maven Central (lein's own first default repository) and Debian's local Maven repository
;; are used: no Clojars.
;; The Storm version here must match storm/VERSION (see storm/install.sh).
(defproject owler "0.1.0-SNAPSHOT"
  :description "OWLer-py: a Python port of StormCrawler for Apache Storm"
  :resource-paths ["_resources"]
  ;; The multilang serializer of crawler-conf.yaml (topology.multilang.serializer) must be on the
  ;; workers' classpath, which on a cluster is Storm's lib-worker plus this jar.
  :java-source-paths ["storm/multilang"]
  :javac-options ["-nowarn" "--release" "11"]
  :target-path "_build"
  :min-lein-version "2.0.0"
  :jvm-opts ["-client"]
  :repositories ^:replace [~(first leiningen.core.project/default-repositories) ; Maven Central
                           ["debian" {:url "file:///usr/share/maven-repo" :snapshots false :checksum :ignore}]]
  ;; :provided - storm-client and msgpack-core, to compile storm/multilang; never packaged (the
  ;; workers have them: storm/poms/lib-worker.pom).
  ;; :storm - only for `lein deps :tree`, where streamparse reads the Storm version (a plain
  ;; `[org.apache.storm/storm-core "X"]` line): storm-clojure-test pulls storm-core in, and the
  ;; exclusion of the Clojars-only carbonite sits on its vector, not on storm-core's. Never packaged:
  ;; the jars that run come from the project's Storm installation (.storm/).
  :profiles {:provided {:dependencies [[org.apache.storm/storm-client "2.8.3"]
                                        [org.msgpack/msgpack-core "0.9.10"]]}
             :storm {:dependencies [[org.apache.storm/storm-clojure-test "2.8.3"
                                     :exclusions [org.clojars.bipinprasad/carbonite]]]}
             :default [:leiningen/default :storm]}
  :jar-exclusions [#"log4j\.properties" #"^META-INF/" #"^(defaults|storm)\.yaml$" #"\.java$"]
  :uberjar-exclusions [#"log4j\.properties" #"^META-INF/" #"^(defaults|storm)\.yaml$"])
