#!/usr/bin/env bash
# Quick start, step 2: install what the tests need and run every tier:
# unit tests, root probe tests and root integration tests, after checking
# formatting, vet, and that the committed BPF objects match their sources.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run as root: the probe and integration tests load eBPF programs" >&2; exit 3; }
bash scripts/deps.sh test
export PERFSCOPE_REQUIRE_ROOT_TESTS="${PERFSCOPE_REQUIRE_ROOT_TESTS:-1}"
# The GC log corpus tier runs where ../shared/gclogs-corpus is beside the
# clone; CI (.ci/run) sets PERFSCOPE_REQUIRE_CORPUS=1 so it cannot skip
# there. A plain clone skips it and still tests the parser on the real logs
# in collectors/gclog/testdata.
if [ ! -f ../shared/gclogs-corpus/PEERS.tsv ] && [ "${PERFSCOPE_REQUIRE_CORPUS:-}" != 1 ]; then
	echo "== GC log corpus: no ../shared/gclogs-corpus beside this clone: its tier skips (CI requires it)"
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || { echo "gofmt needed:"; echo "$unformatted"; exit 1; }

echo "== generated BPF objects match their sources"
gen=$(find probes -name '*_bpfel.go' -o -name '*_bpfel.o' | sort)
before=$(sha256sum $gen)
go generate ./probes/...
after=$(sha256sum $(find probes -name '*_bpfel.go' -o -name '*_bpfel.o' | sort))
if [ "$before" != "$after" ]; then
	diff <(echo "$before") <(echo "$after") || true
	echo "generated BPF files differ from the sources: run 'make generate' and commit" >&2
	exit 1
fi

echo "== go vet"
go vet ./...
(cd deploy/kubernetes && go vet ./...)

echo "== go test (all tiers)"
# Each package's limit. Root tests take turns on one lock
# (/tmp/perfscope-root-tests.lock), so on a machine where others run them
# too the integration package waits its turn and can need more than 25m:
# PERFSCOPE_TEST_TIMEOUT=60m raises it.
go test -count=1 -timeout "${PERFSCOPE_TEST_TIMEOUT:-25m}" ./...
# The Kubernetes manifests are checked against k8s.io/api in a module of
# their own, so the binary does not carry those types.
(cd deploy/kubernetes && go test -count=1 ./...)

echo "== cross-compile (the image's other architecture)"
GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -o /dev/null ./cmd/perfscope

# Every parser of untrusted input has a fuzz target; each runs for a bounded
# time here (PERFSCOPE_FUZZTIME, default 10s). Targets are found, not
# listed: a new `func FuzzX(f *testing.F)` in any *_test.go runs here.
echo "== fuzz (each target ${PERFSCOPE_FUZZTIME:-10s})"
grep -rl --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*(f \*testing\.F)' . | sort | while read -r file; do
	pkg="./$(dirname "${file#./}")"
	for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(f \*testing\.F).*/\1/p' "$file"); do
		echo "-- $pkg $target"
		# The last lines on success; on failure the last 60, which hold the
		# engine's reason (a crash, a hung worker) and the failing input.
		out=$(mktemp)
		# Minimizing each new-coverage input may take 60 s by default: it
		# stalled the 10 s runs after their first seconds and, at the end of
		# the fuzz time, made the engine report a worker "hung or terminated
		# unexpectedly" (golang/go#56238, #48820). A second keeps them fuzzing.
		fuzz() { go test -run '^$' -fuzz "^${target}\$" -fuzztime "${PERFSCOPE_FUZZTIME:-10s}" -fuzzminimizetime 1s "$pkg" >"$out" 2>&1; }
		crashers() { find "$pkg/testdata/fuzz/$target" -type f 2>/dev/null | sort || true; }
		before=$(crashers)
		ok=0
		fuzz && ok=1
		# Go's fuzz coordinator can fail a target at the end of -fuzztime
		# with a bare "context deadline exceeded" and no crasher (a race
		# when the deadline fires: golang/go#75804, fixed in Go 1.27): the
		# target is fuzzed once more, and that run's result counts. A
		# crasher written to testdata/fuzz is always a failure.
		if [ "$ok" = 0 ] && [ "$(crashers)" = "$before" ] && tail -n 5 "$out" | grep -q '^    context deadline exceeded$'; then
			echo "   $target: the fuzz coordinator's deadline race (golang/go#75804, no crasher): fuzzing it again"
			fuzz && ok=1
		fi
		if [ "$ok" = 1 ]; then
			tail -n 3 "$out"
			rm -f "$out"
		else
			tail -n 60 "$out"
			rm -f "$out"
			echo "fuzz target $target in $pkg failed" >&2
			exit 1
		fi
	done
done
