#!/usr/bin/env bash
# Where `perfscope tcp` spends its own CPU: Debian's nginx-light in a
# network namespace of the benchmark's own, loaded by wrk opening a new
# connection per request (the load that fills the namespace with
# TIME_WAIT sockets), while `perfscope tcp --iface lo --port PORT -d 10s`
# runs at its defaults; 3.5 s into its window `perfscope profile --pid`
# samples perfscope's own process for 6 s at 999 Hz, kernel and user
# stacks. Prints per run: perfscope's CPU time over its first ~10 s (from
# /proc, start-up included), the profile's samples split into the
# accept-queue sampler (sock_diag), the overhead budget's governor
# (attaching and detaching the sampled hooks) and the rest, and what the
# report says of its own cost. With two binaries the runs alternate, A
# first. Run as root:
#
#   flock /tmp/perfscope-root-tests.lock bash bench/tcpselfcost.sh [RUNS] [A_BINARY [B_BINARY]]
#
# Without a binary it builds this checkout's perfscope.
set -euo pipefail
RUNS=${1:-3}
PORT=18951
REPO=$(cd "$(dirname "$0")/.." && pwd)
BENCH=tcpselfcost
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
NS=perfscope-ts-$ID
trap bench_cleanup EXIT INT TERM
bench_prepare tcpselfcost.sh "${2:-}"
bench_binaries "${3:-}"
bench_need tcpselfcost.sh nginx wrk

bench_nginx_netns "$NS" "$PORT"

run() {
	local bin=$1 out=$2 wk ps pspid pr ticks
	ip netns exec "$NS" wrk -t1 -c16 -d 14s -H "Connection: close" "http://127.0.0.1:$PORT/" >"$out.wrk" &
	wk=$!
	sleep 1
	ip netns exec "$NS" "$bin" tcp --iface lo --port "$PORT" -d 10s -o json >"$out.json" 2>"$out.err" &
	ps=$!
	sleep 0.3
	pspid=$(pgrep -n -f "$bin tcp --iface lo --port $PORT")
	sleep 3.2
	"$bin" profile --pid "$pspid" -d 6s --freq 999 -o folded >"$out.folded" 2>"$out.prof.err" &
	pr=$!
	wait "$pr"
	ticks=$(awk '{sub(/.*\) /, ""); print $12+$13}' "/proc/$pspid/stat" 2>/dev/null || echo "?")
	wait "$ps" || true
	wait "$wk" || true
	python3 - "$out" "$ticks" "$(getconf CLK_TCK)" <<'PY'
import collections, json, sys
out, ticks, hz = sys.argv[1], sys.argv[2], int(sys.argv[3])
c, total = collections.Counter(), 0
for line in open(out + ".folded"):
    stack, n = line.rsplit(" ", 1)
    n = int(n)
    total += n
    frames = stack.split(";")
    if any("tcpdiag" in f for f in frames):
        c["sampler"] += n
    elif any("budget.(*Governor)" in f for f in frames):
        c["governor"] += n
    else:
        c["other"] += n
ov = json.load(open(out + ".json")).get("overhead") or {}
b, programs = ov.get("budget") or {}, (ov.get("cpu_cost") or {}).get("max_share") or 0
cpu = "%.0f ms" % (int(ticks) * 1000 / hz) if ticks.isdigit() else "?"
# governed: what the report holds against the budget (the programs on the
# busiest CPU and the process while the budget governed); total: over the
# whole window, readings and symbols included.
print("cpu_first_10s %s profile_ms %d sampler_ms %d governor_ms %d other_ms %d report_programs %.2f%% report_process %.2f%% report_governed %.2f%% report_total %.2f%%" % (
    cpu, total, c["sampler"], c["governor"], c["other"], 100 * programs, 100 * (b.get("process_share") or 0),
    100 * (programs + (b.get("process_share") or 0)), 100 * (b.get("total_share") or 0)))
PY
}

echo "# $(date -u +%FT%TZ); kernel $(uname -r); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$RUNS"); do
	for k in "${!BINS[@]}"; do
		name=A
		[ "$k" = 1 ] && name=B
		echo "run $i $name $(run "${BINS[$k]}" "$WORK/run-$i-$name")"
		sleep 1
	done
done
