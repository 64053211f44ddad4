#!/usr/bin/env bash
# The offcpu probe's cost on an HTTP service: Debian's nginx-light (one
# process) on loopback answering a fixed 200 from memory, loaded by
# bench/cmd/httprate (base/httpload) with, alternating round by round:
#
#   none       nothing attached;
#   cmd-budget `perfscope offcpu --pid NGINX` at its defaults (the overhead
#              budget, 1.5 %: the sched hooks in sampling windows);
#   cmd-exact  `perfscope offcpu --pid NGINX --exact` (every switch);
#   cmd-every16 the same with stacks at 1 in 16 switches (--stack-every 16);
#   cmd-all    `perfscope offcpu -a --exact` (every process, every switch:
#              what bpftrace does);
#   bpftrace   bench/offcpu.bt: the same tracepoints and maps, every process;
#   base-budget, base-exact  cmd-budget and cmd-exact run by another build of
#              perfscope, $OFFCPU_BASE_BIN (a before/after comparison in
#              one run, alternating with the rest, so both see the same load).
#
# Each round runs two loads per tracer:
#   fixed  RATE requests/s (default 4000, below the untraced capacity here)
#          for WINDOW: the achieved rate, p50/p99, and nginx's CPU per
#          request (/proc/PID/stat) — the CPU the tracer adds to each
#          request is the capacity it takes;
#   max    a closed loop of 16 connections for WINDOW: the requests/s lost
#          at saturation.
#
#   flock /tmp/perfscope-root-tests.lock bash bench/offcpuhttp.sh [ROUNDS] [RATE] [WINDOW]
#
# Prints one line per measurement, then the medians BENCHMARKS.md records,
# with the machine's load average and busy share around each load.
set -euo pipefail
ROUNDS=${1:-3}
RATE=${2:-4000}
WINDOW=${3:-5s}
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/perfscope-bench-offcpuhttp.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

[ "$(id -u)" = 0 ] || { echo "offcpuhttp.sh: needs root (BPF)" >&2; exit 3; }
command -v nginx >/dev/null || { echo "offcpuhttp.sh: needs nginx (bash scripts/deps.sh test installs nginx-light)" >&2; exit 3; }
(cd "$REPO" && go build -o "$WORK/httprate" ./bench/cmd/httprate && CGO_ENABLED=0 go build -o "$WORK/perfscope" ./cmd/perfscope)
read -r -a TRACERS <<<"${OFFCPU_TRACERS:-none cmd-budget cmd-exact cmd-all bpftrace}"

PORT=${OFFCPU_HTTP_PORT:-18932}
cat >"$WORK/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $WORK/body;
	server {
		listen 127.0.0.1:$PORT;
		location / { return 200 "ok\n"; }
	}
}
CONF
nginx -c "$WORK/nginx.conf" -p "$WORK" &
NGINX=$!
PIDS+=("$NGINX")
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
URL="http://127.0.0.1:$PORT/"

bpf_links() { find "/proc/$1/fd" -lname 'anon_inode:bpf_link' 2>/dev/null | wc -l; }
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
# nginx's CPU time in ns, from the scheduler's own account of every thread
# (/proc/PID/task/*/schedstat: exact, where /proc/PID/stat counts 10 ms
# ticks — ±1 tick was ±3 % of a 4 s load at 3,000 requests/s).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s+=$1} END {printf "%.0f", s}'; }

# load MODE: one load, one line of results (after the tracer's name).
load() {
	local mode=$1 rate=0 b0 b1 t0 t1 l
	[ "$mode" = fixed ] && rate=$RATE
	l=$(cut -d' ' -f1 /proc/loadavg)
	b0=$(busy_jiffies)
	t0=$(cpu_ns "$NGINX")
	local res
	res=$("$WORK/httprate" -url "$URL" -rate "$rate" -c 16 -d "$WINDOW")
	t1=$(cpu_ns "$NGINX")
	b1=$(busy_jiffies)
	echo "$res" | RATE_MODE=$mode T0=$t0 T1=$t1 B="$b0 $b1" L=$l python3 -c '
import json, os, sys
r = json.load(sys.stdin)
b = [float(x) for x in os.environ["B"].split()]
ns = int(os.environ["T1"]) - int(os.environ["T0"])
n = max(1, r["completed"])
print("%s rps %.1f p50_us %.1f p99_us %.1f errors %d nginx_us_per_req %.2f load %s busy %.2f" % (os.environ["RATE_MODE"], r["requests_per_second"],
      r["p50_ns"] / 1e3, r["p99_ns"] / 1e3, r["failures"] + r["non_2xx"], ns / 1e3 / n, os.environ["L"], (b[2] - b[0]) / (b[3] - b[1])))'
}

measure() {
	local tr=$1 round=$2 out=$WORK/$1-$2 tpid=
	case $tr in
	bpftrace)
		unshare -m --propagation private sh -c \
			'[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing; exec bpftrace "$0"' \
			"$REPO/bench/offcpu.bt" >"$out.bt" 2>&1 &
		tpid=$!
		for _ in $(seq 300); do grep -q Attaching "$out.bt" 2>/dev/null && break; sleep 0.1; done
		sleep 1
		;;
	cmd-budget | cmd-exact | cmd-every16 | cmd-all | base-budget | base-exact)
		local bin=$WORK/perfscope cargs=(offcpu --pid "$NGINX" -d 10m -o json)
		case $tr in base-*)
			[ -x "${OFFCPU_BASE_BIN:-}" ] || { echo "offcpuhttp.sh: $tr needs OFFCPU_BASE_BIN, a perfscope binary to compare with" >&2; exit 2; }
			bin=$OFFCPU_BASE_BIN
			;;
		esac
		[ "$tr" = cmd-exact ] || [ "$tr" = base-exact ] && cargs+=(--exact)
		[ "$tr" = cmd-every16 ] && cargs+=(--exact --stack-every 16)
		[ "$tr" = cmd-all ] && cargs=(offcpu -a --exact -d 10m -o json)
		"$bin" "${cargs[@]}" >"$out.json" 2>"$out.err" &
		tpid=$!
		for _ in $(seq 300); do [ "$(bpf_links "$tpid")" -ge 4 ] && break; sleep 0.1; done
		sleep 1 # the budget's calibration
		;;
	esac
	for mode in fixed max; do
		echo "round $round $tr $(load $mode)"
	done
	if [ -n "$tpid" ]; then
		kill -INT "$tpid" 2>/dev/null || true
		wait "$tpid" 2>/dev/null || true
	fi
	# What the command's own report says it covered and cost.
	if [ -s "$out.json" ]; then
		python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); c=r["data"].get("coverage"); o=r.get("overhead") or {}; cc=o.get("cpu_cost") or {}
print("round %s %s report coverage %s cpu_cost_max_share %s" % (sys.argv[2], sys.argv[3], c["coverage"] if c else "whole", cc.get("max_share")))' "$out.json" "$round" "$tr" || true
	fi
}

"$WORK/httprate" -url "$URL" -c 16 -d 2s >/dev/null # warm up
for round in $(seq "$ROUNDS"); do
	n=${#TRACERS[@]}
	for i in $(seq 0 $((n - 1))); do
		measure "${TRACERS[$(((i + round) % n))]}" "$round"
	done
done | tee "$WORK/lines"

echo
for mode in fixed max; do
	echo "$mode: median requests/s, p99 µs and nginx µs CPU per request per tracer (against none):"
	awk -v m="$mode" '$4==m && $5=="rps" {r[$3]=r[$3]" "$6; p[$3]=p[$3]" "$10; c[$3]=c[$3]" "$14} END {for (t in r) print t "|" r[t] "|" p[t] "|" c[t]}' "$WORK/lines" |
		while IFS='|' read -r tr rs ps cs; do
			med() { echo "$1" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
			echo "$tr $(med "$rs") $(med "$ps") $(med "$cs")"
		done | awk '{t[NR]=$1; r[$1]=$2; p[$1]=$3; c[$1]=$4} END {for (i=1;i<=NR;i++) {x=t[i]; printf "  %-10s %9.1f rps (%+6.1f %%)  p99 %8.1f µs  %6.2f µs/req (%+6.1f %%)\n", x, r[x], 100*(r[x]/r["none"]-1), p[x], c[x], 100*(c[x]/c["none"]-1)}}'
done
