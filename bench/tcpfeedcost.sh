#!/usr/bin/env bash
# What the tcpevents probe's per-packet hooks cost, by their own counters:
# Debian's nginx-light in a network namespace of the benchmark's own,
# loaded by wrk (one thread, 16 kept-alive connections) in the same
# namespace, while `perfscope tcp --iface lo --port PORT --exact -d 5s`
# measures it (every hook attached throughout). Prints per run the
# report's runs and self-timed ns a run of sock:sk_data_ready (a delivery
# to a socket) and sock:sock_recv_length (a read), its BPF share of all
# CPU time and wrk's requests/s. Two binaries alternate, A first. Run as
# root:
#
#   flock /tmp/perfscope-root-tests.lock bash bench/tcpfeedcost.sh [RUNS] A_BINARY [B_BINARY]
set -euo pipefail
RUNS=${1:-3}
PORT=18977
REPO=$(cd "$(dirname "$0")/.." && pwd)
BENCH=tcpfeedcost
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
NS=perfscope-tf-$ID
trap bench_cleanup EXIT INT TERM
bench_prepare tcpfeedcost.sh "${2:-}"
bench_binaries "${3:-}"
bench_need tcpfeedcost.sh nginx wrk
bench_nginx_netns "$NS" "$PORT"

echo "# kernel $(uname -r); $(nproc) CPUs; $(date -u +%FT%TZ); load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$RUNS"); do
	for i in "${!BINS[@]}"; do
		name=A
		[ "$i" = 1 ] && name=B
		ip netns exec "$NS" wrk -t1 -c16 -d8s "http://127.0.0.1:$PORT/" >"$WORK/wrk.log" 2>&1 &
		wk=$!
		sleep 1
		ip netns exec "$NS" "${BINS[$i]}" tcp --iface lo --port "$PORT" --exact -d 5s -o json >"$WORK/run.json" 2>"$WORK/run.err" || true
		wait "$wk"
		python3 - "$r" "$name" "$WORK/run.json" "$WORK/wrk.log" <<'PY'
import json, re, sys
run, name, path, wrk = sys.argv[1:]
o = json.load(open(path)).get("overhead") or {}
rps = re.search(r"Requests/sec:\s+([\d.]+)", open(wrk).read())
rows = {p["program"]: p for p in o.get("programs", [])}
out = [f"run {run} {name}"]
for prog in ("sock:sk_data_ready", "sock:sock_recv_length"):
    p = rows.get(prog)
    if p:
        out.append(f"{prog} runs {p['run_count']} ns_per_run {p.get('per_run_ns', 0):.0f}")
out.append(f"bpf_time_share {100 * o.get('bpf_time_share', 0):.2f}% wrk_rps {rps.group(1) if rps else '?'}")
print(" ".join(out))
PY
	done
done
echo "# done $(date -u +%FT%TZ); load $(cut -d' ' -f1-3 /proc/loadavg)"
