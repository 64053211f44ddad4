# perfscope jvm: JDK 17 (java, javac) and Maven are on the CI image; async-profiler comes from
# Maven Central the way perfscope fetches it (pinned SHA-256 checked by perfscope).
command -v javac >/dev/null || apt-get install -y openjdk-17-jdk-headless
command -v mvn >/dev/null || apt-get install -y maven
command -v unshare >/dev/null || apt-get install -y util-linux
mvn -B -q dependency:get -Dartifact=tools.profiler:async-profiler:4.1 -Dtransitive=false
# tests: go test ./collectors/hsperf/... ./jvm/... ./internal/httpload/... ./diagnose/... ./internal/cli/...
#        go test -run TestJVM ./integration/   (root; ~50 s)
