#!/usr/bin/env bash
# Lays out what the container image holds, for one architecture, under
# dist/linux-ARCH/: the static binary at usr/local/bin/perfscope and
# async-profiler's library at usr/local/lib/perfscope/async-profiler/V/PLATFORM/.
# The Dockerfile's `local` target copies that tree onto an empty image:
#   bash scripts/dist.sh amd64 && docker build --target local -f Dockerfile dist
# The library comes out of the pinned jar in the local Maven repository
# (fetched with mvn when missing); the jar and the library are checked
# against the same SHA-256 digests as the Dockerfile and jvm/asprof.
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:-$(go env GOARCH)}"
case "$arch" in
amd64) platform=linux-x64 lib_sha=8d16556469adc3fe6661f0c023bfc2081342c930796b1d68ae1cd8248bef4c28 ;;
arm64) platform=linux-arm64 lib_sha=b2f7fa5a7caaf6ebf1f5e4c46af40d6fe7b623ed5421a4f9be7d45a08537a9e7 ;;
*) echo "dist: async-profiler ships no library for linux/$arch (amd64 or arm64)" >&2; exit 2 ;;
esac
asprof_version=4.1
jar_sha=5535baa56133628cfffe2f05ca9bfef1fae3d5abe49835447262b1c6da4a9582
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"

out="${DIST_DIR:-dist}/linux-$arch"
rm -rf "$out"
mkdir -p "$out/usr/local/bin" "$out/usr/local/lib/perfscope/async-profiler/$asprof_version/$platform"
CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath \
	-ldflags "-s -w -X github.com/perfscope/perfscope/internal/cli.version=$version" \
	-o "$out/usr/local/bin/perfscope" ./cmd/perfscope

repo="${MAVEN_REPO:-$HOME/.m2/repository}"
jar="$repo/tools/profiler/async-profiler/$asprof_version/async-profiler-$asprof_version.jar"
if [ ! -f "$jar" ]; then
	mvn -B -q dependency:get -Dartifact="tools.profiler:async-profiler:$asprof_version" -Dtransitive=false -Dmaven.repo.local="$repo"
fi
echo "$jar_sha  $jar" | sha256sum -c --quiet -
lib="$out/usr/local/lib/perfscope/async-profiler/$asprof_version/$platform/libasyncProfiler.so"
unzip -p "$jar" "$platform/libasyncProfiler.so" > "$lib"
echo "$lib_sha  $lib" | sha256sum -c --quiet -
chmod 0644 "$lib"
echo "$out"
