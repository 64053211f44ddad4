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
	pkg_for ip iproute2
	pkg_for ethtool ethtool
	;;
test)
	pkg_for ip iproute2
	pkg_for ethtool ethtool
	pkg_for clang clang
	pkg_for llvm-strip llvm
	pkg_for bpftool bpftool
	pkg_for unshare util-linux
	pkg_for gcc gcc
	pkg_for javac openjdk-17-jdk-headless
	pkg_for mvn maven
	[ -f /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
	;;
esac

# Extra lines contributed by each area's tests (see docs/readme/ci-*.sh).
if [ "${1:-run}" = test ]; then
	for f in "$(dirname "$0")"/../docs/readme/ci-*.sh; do
		[ -f "$f" ] && . "$f"
	done
fi

if [ ${#need[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
