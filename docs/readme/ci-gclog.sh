# perfscope gclog: the parser tests run a small Java program under OpenJDK 17
# and Temurin 25 (expected under /usr/lib/jvm, already on the CI image);
# nothing else to install. They also read ../shared/gclogs beside the clone.
test -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java || apt-get install -y openjdk-17-jdk-headless
# fuzz smoke (optional, 30 s): go test ./collectors/gclog -run '^$' -fuzz FuzzParse -fuzztime 30s
