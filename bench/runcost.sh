#!/usr/bin/env bash
# A run's whole cost, exec to exit: what a short `perfscope udp` costs the
# machine and a flood beside it, start-up, loading, naming the stacks and
# teardown included (the budget's benchmark, bench/budget.sh, starts its
# floods after perfscope attached and ends them before it exits). One
# command, as root:
#
#   flock /tmp/perfscope-root-tests.lock bash bench/runcost.sh [RUNS] [ROUNDS]
#
# 1. Fixed cost (RUNS, default 7, per tracer): `perfscope udp --iface lo
#    --duration 4s -o json` on the host with no traffic of its own; its CPU
#    time as the kernel counted it for the child (user + sys from wait4),
#    beside what the report says of itself (overhead.run_cpu_ns, which
#    leaves out formatting the report and exiting; attach_cpu_ns;
#    process_cpu_ns, the window). The same for `--exact`, and for bpftrace
#    with the same tracepoints (bench/udp.bt) for 4 s.
# 2. Loss (ROUNDS, default 5): a one-sender loopback flood into one socket
#    read by one thread, in a network namespace of its own; each round runs
#    every tracer once in an order that rotates from round to round, each
#    for its whole life — `perfscope udp --iface lo --port 9000 --duration
#    4s`, the same with `--exact`, bpftrace bench/udp.bt exiting after 4 s —
#    and no tracer for as long as the round's previous span. The datagrams
#    the server read within each span (its progress lines every 20 ms,
#    interpolated at the span's ends) over the span's length is the rate;
#    the loss is 1 − rate/untraced rate of the same round.
#
# RUNCOST_BIN benchmarks a perfscope built elsewhere instead of this
# checkout's; RUNCOST_BASE adds a second one (e.g. the build before a
# change) as tracer `base` to both parts, alternating with the first, so a
# before/after comparison shares the same machine conditions. The machine's
# load (uptime, the busiest other processes) is printed before and after:
# CPU times are robust to other work on the machine, loss rates are not.
set -euo pipefail
RUNS=${1:-7}
ROUNDS=${2:-5}
PORT=9000
REPO=$(cd "$(dirname "$0")/.." && pwd)
BENCH=runcost
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
NS=perfscope-rc-$ID
NETNS=("$NS")
trap bench_cleanup EXIT INT TERM
bench_prepare runcost.sh "${RUNCOST_BIN:-}"
TRACERS=(default exact bpftrace)
if [ -n "${RUNCOST_BASE:-}" ]; then
	cp "$RUNCOST_BASE" "$WORK/perfscope-base"
	TRACERS=(default base exact bpftrace)
fi
# bpftrace with the same tracepoints, ending itself 4 s after it attached.
{ cat "$REPO/bench/udp.bt"; echo 'interval:s:4 { exit(); }'; } >"$WORK/udp4s.bt"

load() {
	echo "# load $1: $(uptime | sed 's/.*load average/load average/'); busiest other processes (%CPU since start):" \
		"$(ps -eo pcpu=,comm= --sort=-pcpu | head -5 | awk '{printf "%s %s%%, ", $2, $1}')"
}

# run TRACER OUT [NETNS]: runs one tracer for its whole life and prints
# "start_ns end_ns cpu_s" (CPU: user + sys of it and its children, from
# wait4).
run() {
	local tr=$1 out=$2 ns=${3:-}
	local cmd=()
	[ -n "$ns" ] && cmd=(ip netns exec "$ns")
	local port=()
	[ -n "$ns" ] && port=(--port $PORT)
	case $tr in
	default) cmd+=("$BIN" udp --iface lo "${port[@]}" --duration 4s -o json) ;;
	base) cmd+=("$WORK/perfscope-base" udp --iface lo "${port[@]}" --duration 4s -o json) ;;
	exact) cmd+=("$BIN" udp --iface lo "${port[@]}" --duration 4s --exact -o json) ;;
	bpftrace) cmd=(bpftrace "$WORK/udp4s.bt" $PORT) ;;
	none) cmd=(sleep "$NONE_SECS") ;;
	esac
	python3 - "$out" "${cmd[@]}" <<'EOF'
import os, sys, time
out, argv = sys.argv[1], sys.argv[2:]
t0 = time.time_ns()
pid = os.fork()
if pid == 0:
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    err = os.open(out + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(err, 2)
    os.execvp(argv[0], argv)
_, status, ru = os.wait4(pid, 0)
t1 = time.time_ns()
if os.waitstatus_to_exitcode(status) != 0:
    sys.stderr.write(f"{argv[0]} exited {os.waitstatus_to_exitcode(status)}: {open(out + '.err').read()[-500:]}\n")
    sys.exit(1)
print(t0, t1, ru.ru_utime + ru.ru_stime)
EOF
}

echo "# perfscope $("$BIN" version 2>/dev/null | head -1); kernel $(uname -r); $(nproc) CPUs"
load "before"

# --- 1. Fixed cost -----------------------------------------------------------
echo "## fixed cost: perfscope udp --iface lo --duration 4s, $RUNS runs per tracer, alternating"
for ((i = 1; i <= RUNS; i++)); do
	for tr in "${TRACERS[@]}"; do
		o=$WORK/fixed-$tr-$i
		read -r t0 t1 cpu < <(run "$tr" "$o")
		python3 - "$tr" "$i" "$o" "$t0" "$t1" "$cpu" <<'EOF' | tee -a "$WORK/fixed"
import json, sys
tr, i, out, t0, t1, cpu = sys.argv[1:]
row = {"tracer": tr, "run": int(i), "wall_s": (int(t1) - int(t0)) / 1e9, "cpu_s": float(cpu)}
if tr != "bpftrace":
    ov = json.load(open(out)).get("overhead") or {}
    for k in ("run_cpu_ns", "attach_cpu_ns", "process_cpu_ns", "attach_ns"):
        if ov.get(k) is not None:
            row[k.replace("_ns", "_s")] = ov[k] / 1e9
print(json.dumps(row))
EOF
	done
done

# --- 2. Loss -------------------------------------------------------------------
echo "## loss: one-sender loopback flood, $ROUNDS rounds, tracers ${TRACERS[*]} and none, each span a tracer's whole life"
ip netns add "$NS"
ip -n "$NS" link set lo up
LOSS_TRACERS=(none "${TRACERS[@]}")
for ((round = 1; round <= ROUNDS; round++)); do
	srv=$WORK/srv-$round
	ip netns exec "$NS" "$BIN" lab udp-server --listen 127.0.0.1:$PORT --mode single --threads 1 --for 300s \
		--progress 20ms >"$srv.json" 2>"$srv.progress" &
	spid=$!
	PIDS+=("$spid")
	sleep 0.3
	ip netns exec "$NS" "$BIN" lab udp-flood --target 127.0.0.1:$PORT --senders 1 --flows 1 --duration 290s \
		--max-packets 10000000000 >/dev/null 2>&1 &
	fpid=$!
	PIDS+=("$fpid")
	sleep 2 # the flood at its steady rate
	NONE_SECS=4.5
	n=${#LOSS_TRACERS[@]}
	for ((k = 0; k < n; k++)); do
		tr=${LOSS_TRACERS[$(((k + round) % n))]}
		o=$WORK/loss-$tr-$round
		read -r t0 t1 _ < <(run "$tr" "$o" "$NS")
		[ "$tr" != none ] && NONE_SECS=$(python3 -c "print(($t1 - $t0) / 1e9)")
		echo "$tr $round $t0 $t1" >>"$WORK/spans"
		sleep 1 # what the tracer's exit left behind settles
	done
	kill -INT "$fpid" 2>/dev/null || true
	wait "$fpid" 2>/dev/null || true
	kill -INT "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	python3 - "$WORK/spans" "$srv.progress" "$round" <<'EOF' | tee -a "$WORK/loss"
import bisect, json, sys
spans, progress, rnd = sys.argv[1], sys.argv[2], int(sys.argv[3])
pts = []
for line in open(progress):
    f = line.split()
    if len(f) == 4 and f[0] == "received":
        pts.append((int(f[3]), int(f[1])))
ts = [t for t, _ in pts]
def at(t):
    i = bisect.bisect_left(ts, t)
    if i == 0 or i >= len(pts):
        raise SystemExit(f"span end {t} outside the server's progress ({ts[0]}..{ts[-1]})")
    (ta, ra), (tb, rb) = pts[i - 1], pts[i]
    return ra + (rb - ra) * (t - ta) / (tb - ta)
for line in open(spans):
    tr, r, t0, t1 = line.split()
    if int(r) != rnd:
        continue
    t0, t1 = int(t0), int(t1)
    print(json.dumps({"tracer": tr, "round": rnd, "span_s": (t1 - t0) / 1e9, "read_per_s": (at(t1) - at(t0)) / ((t1 - t0) / 1e9)}))
EOF
done
load "after"

python3 - "$WORK/fixed" "$WORK/loss" <<'EOF'
import json, statistics as st, sys
fixed = [json.loads(l) for l in open(sys.argv[1])]
loss = [json.loads(l) for l in open(sys.argv[2])]
def med(v): return st.median(v) if v else float("nan")
def rng(v, f="{:.3f}"): return (f.format(min(v)) + "–" + f.format(max(v))) if v else ""
order = [t for t in ("default", "base", "exact", "bpftrace") if any(r["tracer"] == t for r in fixed)]
print("\n| tracer | runs | CPU s, user+sys (median; range) | wall s (median) | run_cpu_ns (median) | attach_cpu_ns (median) | process_cpu_ns, the window (median) |")
print("|---|---|---|---|---|---|---|")
for t in order:
    rs = [r for r in fixed if r["tracer"] == t]
    col = lambda k: [r[k] for r in rs if k in r]
    cell = lambda k: f"{med(col(k)):.3f}" if col(k) else ""
    print(f"| {t} | {len(rs)} | {med(col('cpu_s')):.3f}; {rng(col('cpu_s'))} | {med(col('wall_s')):.2f} | {cell('run_cpu_s')} | {cell('attach_cpu_s')} | {cell('process_cpu_s')} |")
print("\n| tracer | rounds | read/s (median; range) | span s (median) | loss vs none, paired by round (median; mean; range) |")
print("|---|---|---|---|---|")
none = {r["round"]: r["read_per_s"] for r in loss if r["tracer"] == "none"}
for t in ["none"] + order:
    rs = [r for r in loss if r["tracer"] == t]
    rates = [r["read_per_s"] for r in rs]
    l = [1 - r["read_per_s"] / none[r["round"]] for r in rs if r["round"] in none] if t != "none" else []
    lc = f"{100*med(l):.1f} %; {100*st.mean(l):.1f} %; {100*min(l):.1f} – {100*max(l):.1f} %" if l else ""
    print(f"| {t} | {len(rs)} | {med(rates):.0f}; {rng(rates, '{:.0f}')} | {med([r['span_s'] for r in rs]):.2f} | {lc} |")
EOF
