#!/usr/bin/env bash
# Installs what perfscope's build, labs and tests need on Debian/Ubuntu.
# Idempotent; each group is installed only when a tool of it is missing.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1; }
pkg_for() { # tool package
	have "$1" || need+=("$2")
}

case "${1:-run}" in
run)
	# perfscope lab udp: namespaces, veth features, pinned senders,
	# per-namespace sysctls and the netfilter scenario's table.
	pkg_for ip iproute2
	pkg_for ethtool ethtool
	pkg_for taskset util-linux
	pkg_for sysctl procps
	pkg_for nft nftables
	pkg_for iptables-legacy iptables # the legacy-iptables scenario's tables
	;;
test)
	pkg_for ip iproute2
	pkg_for ethtool ethtool
	pkg_for taskset util-linux
	pkg_for sysctl procps
	pkg_for nft nftables         # lab udp's netfilter scenario
	pkg_for iptables-legacy iptables # legacy tables: the netfilter reader's tests, lab udp
	pkg_for clang clang
	pkg_for llvm-strip llvm
	pkg_for bpftool bpftool
	pkg_for unshare util-linux
	pkg_for gcc gcc              # symbolization tests build small C programs
	[ -f /usr/include/stdio.h ] || need+=(libc6-dev)
	pkg_for setpriv util-linux   # unprivileged-exit tests drop root with setpriv
	pkg_for javac openjdk-17-jdk-headless
	pkg_for mvn maven            # async-profiler comes from the Maven repository
	pkg_for node nodejs          # runs the flame graph's JavaScript in a test
	pkg_for chromium chromium    # loads the HTML report pages in a headless browser test
	pkg_for podman podman        # the container image test (integration/container_test.go)
	pkg_for socat socat          # a UDP server in a pod-shaped cgroup (integration/pods_test.go)
	pkg_for runc runc
	pkg_for unzip unzip          # scripts/dist.sh takes the library out of the jar
	pkg_for knotd knot           # a real DNS server under the budget (integration/budgetdns_test.go)
	pkg_for dnsperf dnsperf      # its load
	[ -f /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
	# The Go tests: Debian's Go 1.19 beside the default go (it installs
	# under /usr/lib/go-1.19; /usr/local/go stays first on PATH), a Go
	# service built by a distribution (caddy) and ab to drive it.
	[ -x /usr/lib/go-1.19/bin/go ] || need+=(golang-go)
	pkg_for caddy caddy
	pkg_for ab apache2-utils
	pkg_for nginx nginx-light    # perfscope tcp's accept-queue test (integration/tcp_test.go), perfscope load's (load_test.go), bench/offcpuhttp.sh
	;;
bench)
	# bench/budget.sh and BenchmarkUDPCommandOverhead: the rigs, and
	# bpftrace with the same tracepoints to compare with. (bcc's netqtop,
	# bpfcc-tools, is tried by budget.sh when installed; it compiles
	# against the running kernel's headers.)
	pkg_for ip iproute2
	pkg_for ethtool ethtool
	pkg_for bpftrace bpftrace
	pkg_for /usr/bin/time time
	# bench/offcpu.sh: perf bench sched pipe, and libbpf-tools' offcputime
	# (CO-RE, no kernel headers needed) to compare with.
	pkg_for perf linux-perf
	pkg_for /usr/sbin/offcputime libbpf-tools
	# bench/tcpcost.sh: nginx in a namespace under wrk's load.
	pkg_for nginx nginx-light
	pkg_for wrk wrk
	;;
esac

if [ ${#need[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The jvm tests attach async-profiler from the local Maven repository, as a
# Java shop would; fetch it once through Maven so the user's mirrors apply.
if [ "${1:-run}" = test ] && [ ! -d "$HOME/.m2/repository/tools/profiler/async-profiler/4.1" ]; then
	mvn -B -q dependency:get -Dartifact=tools.profiler:async-profiler:4.1 -Dtransitive=false
fi

# The Go tests build the Go lab service with every release from 1.20 on
# (lab/goapp.ProxyReleases); the go command fetches each toolchain from the
# Go module proxy once.
if [ "${1:-run}" = test ] && command -v go >/dev/null 2>&1; then
	for v in go1.20.14 go1.21.13 go1.22.12 go1.23.12 go1.24.13 go1.25.9; do
		GOTOOLCHAIN=$v go version >/dev/null || { echo "deps: could not fetch the Go toolchain $v" >&2; exit 1; }
	done
fi

# The Spring Boot test service (integration/springapp) is built offline from
# the local Maven repository; building it once here fetches Spring Boot,
# its plugins and their dependencies.
if [ "${1:-run}" = test ] && [ ! -d "$HOME/.m2/repository/org/springframework/boot/spring-boot-maven-plugin/3.5.7" ]; then
	tmp=$(mktemp -d)
	cp -r "$(dirname "$0")/../integration/springapp/pom.xml" "$(dirname "$0")/../integration/springapp/src" "$tmp"/
	(cd "$tmp" && mvn -B -q package -DskipTests >/dev/null) || { echo "deps: could not build the Spring Boot test service with Maven" >&2; rm -rf "$tmp"; exit 1; }
	rm -rf "$tmp"
fi
