# Shared by the benchmark scripts (source it after setting REPO and BENCH,
# the script's short name): root and bpftrace checks, the perfscope binary
# under test, tracefs for bpftrace, and the cleanup of everything a script
# started or created. It sets WORK (the run's temporary directory), BIN
# (the binary's path in it) and ID (random hex for names); a script appends
# to PIDS (background processes) and NETNS (namespaces) as it goes.
WORK=$(mktemp -d "/tmp/perfscope-bench-$BENCH.XXXXXX")
BIN=$WORK/perfscope
ID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
PIDS=()
NETNS=()
MOUNTED_TRACEFS=

bench_cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
	[ -n "$MOUNTED_TRACEFS" ] && umount /sys/kernel/tracing 2>/dev/null || true
	rm -rf "$WORK"
}

# bench_prepare NAME PREBUILT: checks root and bpftrace, copies PREBUILT to
# $BIN or builds this checkout's perfscope there, and mounts tracefs when
# it is not (bpftrace finds tracepoints through it in this mount
# namespace; unmounted again on exit).
bench_prepare() {
	local name=$1 prebuilt=$2
	[ "$(id -u)" = 0 ] || { echo "$name: needs root (BPF, namespaces)" >&2; exit 3; }
	command -v bpftrace >/dev/null || { echo "$name: needs bpftrace (bash scripts/deps.sh bench)" >&2; exit 3; }
	if [ -n "$prebuilt" ]; then
		cp "$prebuilt" "$BIN"
	else
		(cd "$REPO" && CGO_ENABLED=0 go build -o "$BIN" ./cmd/perfscope)
	fi
	if [ ! -d /sys/kernel/tracing/events ]; then
		mount -t tracefs nodev /sys/kernel/tracing && MOUNTED_TRACEFS=1
	fi
}
