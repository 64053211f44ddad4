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

# bench_need NAME TOOL...: exits 3 naming the first TOOL not on PATH.
bench_need() {
	local name=$1 t
	shift
	for t in "$@"; do
		command -v "$t" >/dev/null || { echo "$name: needs $t (bash scripts/deps.sh bench)" >&2; exit 3; }
	done
}

# bench_binaries [B_BINARY]: BINS lists the binaries a script alternates,
# $BIN (bench_prepare's) first, then a copy of B_BINARY when given.
bench_binaries() {
	BINS=("$BIN")
	if [ -n "${1:-}" ]; then
		cp "$1" "$WORK/perfscope-b"
		BINS+=("$WORK/perfscope-b")
	fi
}

# bench_nginx_netns NS PORT: a network namespace NS of the benchmark's own
# (deleted on exit) with lo up and room for new connections at thousands
# per second for minutes (its own ports and TIME_WAIT sockets, nothing
# outside it), and Debian's nginx-light in it: one process, a fixed 200
# from memory on 127.0.0.1:PORT. Sets NGINX to its pid.
bench_nginx_netns() {
	local ns=$1 port=$2
	ip netns add "$ns"
	NETNS+=("$ns")
	ip -n "$ns" link set lo up
	ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="10000 65000" net.ipv4.tcp_tw_reuse=1
	mkdir -p "$WORK/nginx"
	cat >"$WORK/nginx/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $WORK/nginx/body;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:$port backlog=4096;
		location / { return 200 "ok\n"; }
	}
}
CONF
	ip netns exec "$ns" nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" &
	NGINX=$!
	PIDS+=("$NGINX")
	for _ in $(seq 50); do ip netns exec "$ns" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null && break; sleep 0.1; done
}
