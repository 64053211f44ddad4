#!/usr/bin/env bash
# The overhead budget's benchmark, one script, one run, every
# configuration alternating round by round:
#
#   workloads: a loopback flood into one socket, into a SO_REUSEPORT group
#              of two, and the 4-queue veth rig with GRO (NAPI batches);
#   tracers:   none, `perfscope udp` (default budget), `perfscope udp
#              --exact`, bpftrace with the same tracepoints (bench/udp.bt);
#              bcc's netqtop is tried once and its failure reported;
#              on request (BUDGET_TRACERS), steal: a process burning a
#              fixed share of one CPU and nothing else, the control;
#   modes:     sat  — an unpaced flood: datagrams/s the server read;
#              rate — a flood paced at 60 % of the untraced rate: host CPU
#                     time per datagram (/proc/stat, every CPU).
#
# Every flood runs inside network namespaces the script creates (their
# names start with perfscope-, so the lab's flood tool accepts them) and
# removes on exit. Hold the BPF lock while it runs, so other perfscope
# tests do not flood at the same time:
#
#   flock /tmp/perfscope-root-tests.lock bash bench/budget.sh [ROUNDS] [SECONDS]
#
# Prints one line per measurement, then the summary BENCHMARKS.md records.
set -euo pipefail
ROUNDS=${1:-2}
SECS=${2:-3}
PORT=9000
REPO=$(cd "$(dirname "$0")/.." && pwd)
BENCH=budget
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
NSL=perfscope-bl-$ID
NSS=perfscope-bs-$ID
NSR=perfscope-br-$ID
NETNS=("$NSL" "$NSS" "$NSR")
trap bench_cleanup EXIT INT TERM
# BUDGET_BIN benchmarks a perfscope built elsewhere (another commit, a
# variant) instead of this checkout's.
bench_prepare budget.sh "${BUDGET_BIN:-}"

# The rigs: a namespace of its own for loopback (its counters are the
# flood's alone), and two joined by a 4-queue veth, GRO on the receiver.
ip netns add "$NSL"
ip -n "$NSL" link set lo up
ip netns add "$NSS"
ip netns add "$NSR"
ip link add name vb"$ID" numtxqueues 4 numrxqueues 4 netns "$NSS" type veth peer name vr"$ID" numtxqueues 4 numrxqueues 4 netns "$NSR"
ip -n "$NSS" addr add 198.18.0.1/24 dev vb"$ID"
ip -n "$NSR" addr add 198.18.0.2/24 dev vr"$ID"
for ns in "$NSS" "$NSR"; do ip -n "$ns" link set lo up; done
ip -n "$NSS" link set vb"$ID" up
ip -n "$NSR" link set vr"$ID" up
ip netns exec "$NSR" ethtool -K vr"$ID" gro on >/dev/null
sleep 2 # operstate turns up asynchronously

# workload → server namespace, flood namespace, target, interface, server
# mode and threads, flood senders and flows.
declare -A SRV_NS FLOOD_NS TARGET IFACE MODE THREADS SENDERS FLOWS
SRV_NS[lo-single]=$NSL; FLOOD_NS[lo-single]=$NSL; TARGET[lo-single]=127.0.0.1; IFACE[lo-single]=lo
MODE[lo-single]=single; THREADS[lo-single]=1; SENDERS[lo-single]=1; FLOWS[lo-single]=1
SRV_NS[lo-reuseport]=$NSL; FLOOD_NS[lo-reuseport]=$NSL; TARGET[lo-reuseport]=127.0.0.1; IFACE[lo-reuseport]=lo
MODE[lo-reuseport]=reuseport; THREADS[lo-reuseport]=2; SENDERS[lo-reuseport]=1; FLOWS[lo-reuseport]=8
SRV_NS[veth4]=$NSR; FLOOD_NS[veth4]=$NSS; TARGET[veth4]=198.18.0.2; IFACE[veth4]=vr$ID
MODE[veth4]=single; THREADS[veth4]=1; SENDERS[veth4]=2; FLOWS[veth4]=16
# BUDGET_WORKLOADS, BUDGET_TRACERS and BUDGET_MODES narrow a run (space
# separated). One more tracer is not in the default list: steal, a process
# that only burns CPU — STEAL_PCT % of one CPU (default 5) in 1 ms slices —
# the control for what perfscope's CPU alone costs a saturated machine;
# and budgetPCT (budget1, budget0.5): perfscope with --overhead-budget PCT.
read -r -a WORKLOADS <<<"${BUDGET_WORKLOADS:-lo-single lo-reuseport veth4}"
read -r -a TRACERS <<<"${BUDGET_TRACERS:-none default exact bpftrace}"
read -r -a MODES <<<"${BUDGET_MODES:-sat rate}"
STEAL_PCT=${STEAL_PCT:-5}
declare -A RATE

busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }

# measure WORKLOAD TRACER MODE ROUND: one flood, one line of results.
measure() {
	local w=$1 tr=$2 mode=$3 round=$4 out=$WORK/$1-$2-$3-$4
	local tpid= tsig=INT
	# The server first, so that perfscope finds its socket on the port.
	ip netns exec "${SRV_NS[$w]}" "$BIN" lab udp-server --listen "${TARGET[$w]}:$PORT" --mode "${MODE[$w]}" \
		--threads "${THREADS[$w]}" --for "$((SECS + 4))s" >"$out.srv" 2>/dev/null &
	local spid=$!
	sleep 0.3
	case $tr in
	default | exact | budget*)
		local extra=()
		[ "$tr" = exact ] && extra=(--exact)
		[[ $tr = budget* ]] && extra=(--overhead-budget "${tr#budget}")
		/usr/bin/time -f %M -o "$out.rss" ip netns exec "${SRV_NS[$w]}" "$BIN" udp --iface "${IFACE[$w]}" --port $PORT \
			--duration $((SECS + 30))s -o json "${extra[@]}" >"$out.json" 2>"$out.err" &
		tpid=$!
		sleep 2 # attached, calibrated
		;;
	bpftrace)
		bpftrace "$REPO/bench/udp.bt" $PORT >"$out.bt" 2>&1 &
		tpid=$!
		for _ in $(seq 100); do grep -q Attaching "$out.bt" 2>/dev/null && break; sleep 0.1; done
		sleep 1
		;;
	steal)
		python3 -c '
import sys, time
duty = float(sys.argv[1]) / 100
slice_s = 0.001
while True:
    end = time.perf_counter() + slice_s
    while time.perf_counter() < end:
        pass
    time.sleep(slice_s * (1 - duty) / duty)
' "$STEAL_PCT" &
		# A background job of a script ignores SIGINT: end it with TERM.
		tpid=$! tsig=TERM
		sleep 0.5
		;;
	*) sleep 0.5 ;;
	esac
	local rate=()
	[ "$mode" = rate ] && rate=(--rate "${RATE[$w]}")
	local j0; j0=$(busy_jiffies)
	ip netns exec "${FLOOD_NS[$w]}" "$BIN" lab udp-flood --target "${TARGET[$w]}:$PORT" --senders "${SENDERS[$w]}" \
		--flows "${FLOWS[$w]}" --duration "${SECS}s" --max-packets 100000000 "${rate[@]}" >/dev/null 2>&1 || true
	local j1; j1=$(busy_jiffies)
	if [ -n "$tpid" ]; then
		# perfscope reports what it measured on SIGINT; time(1) passes
		# nothing on, so signal its child.
		local child; child=$(pgrep -P "$tpid" | head -1 || true)
		kill -"$tsig" ${child:-} "$tpid" 2>/dev/null || true
		wait "$tpid" 2>/dev/null || true
	fi
	wait $spid || true
	python3 - "$w" "$tr" "$mode" "$round" "$out" "$SECS" "$((j1 - j0))" "$(getconf CLK_TCK)" <<'EOF'
import json, os, sys
w, tr, mode, rnd, out, secs, jiffies, hz = sys.argv[1:]
received = json.load(open(out + ".srv"))["data"]["received"]
cpu_s = int(jiffies) / int(hz)
row = {"workload": w, "tracer": tr, "mode": mode, "round": int(rnd), "read_per_s": received / float(secs),
       "cpu_us_per_dgram": 1e6 * cpu_s / max(received, 1)}
if os.path.exists(out + ".rss"):
    try:
        row["rss_kib"] = int(open(out + ".rss").read().split()[-1])
    except (ValueError, IndexError):
        pass
if os.path.exists(out + ".json") and os.path.getsize(out + ".json") > 0:
    r = json.load(open(out + ".json"))
    d, ov = r["data"], r["overhead"]
    snmp = (d["drops"].get("udp_snmp") or {}).get("udp", {})
    reads = sum(s.get("received_packets") or 0 for s in d["sockets"].get("sockets") or [] if s.get("port") == 9000)
    est = d["sockets"].get("estimate")
    row["reads_vs_snmp"] = reads / snmp["in_datagrams"] - 1 if snmp.get("in_datagrams") else None
    row["reads_bound"] = (est or {}).get("rel_error")
    netrx = [t for t in d["softirq"].get("totals") or [] if t.get("vector") == "NET_RX"]
    row["netrx_vs_proc"] = netrx[0].get("diff") if netrx else None
    row["softirq_bound"] = (d["softirq"].get("estimate") or {}).get("rel_error")
    rx = d["queues"].get("rx") or []
    kern = sum(q.get("kernel_packets") or 0 for q in rx)
    drv = sum(q.get("driver_packets") or 0 for q in rx)
    row["queues_vs_driver"] = kern / drv - 1 if drv else None
    row["queues_bound"] = (d["queues"].get("estimate") or {}).get("rel_error")
    cc = ov.get("cpu_cost") or {}
    row["bpf_max_cpu_share"] = cc.get("max_share")
    row["process_cpu_share"] = ov.get("process_cpu_share")
print(json.dumps(row))
EOF
}

# netqtop (bcc): compiled at run time against the running kernel's headers.
NETQTOP=$(command -v netqtop-bpfcc || command -v netqtop || true)
if [ -n "$NETQTOP" ]; then
	if ! timeout 30 ip netns exec "$NSR" "$NETQTOP" -n vr"$ID" -i 1 >"$WORK/netqtop" 2>&1; then
		echo "# netqtop: $(grep -m1 -E 'Exception|error|Error' "$WORK/netqtop" || tail -1 "$WORK/netqtop")" \
			"(kernel $(uname -r): no /lib/modules/$(uname -r)/build headers, no kheaders)"
	fi
else
	echo "# netqtop: not installed (apt-get install bpfcc-tools)"
fi

# The paced rate of each workload: 60 % of what it reads untraced.
for w in "${WORKLOADS[@]}"; do
	r=$(measure "$w" none sat 0 | tee -a "$WORK/rows" | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["read_per_s"]*0.6))')
	RATE[$w]=$r
	echo "# $w: paced at $r datagrams/s"
done
for ((round = 1; round <= ROUNDS; round++)); do
	for w in "${WORKLOADS[@]}"; do
		for mode in "${MODES[@]}"; do
			n=${#TRACERS[@]}
			for ((k = 0; k < n; k++)); do
				tr=${TRACERS[$(((k + round) % n))]}
				measure "$w" "$tr" "$mode" "$round" | tee -a "$WORK/rows"
			done
		done
	done
done

python3 - "$WORK/rows" <<'EOF'
import json, math, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and json.loads(l)["round"] > 0]
def mean(v): return st.mean(v) if v else float("nan")
def spread(v): return f"{min(v):.0f}–{max(v):.0f}" if v else ""
# Student's t at 97.5 % for df degrees of freedom (rounds − 1).
T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09}
def t975(df): return T975[max(k for k in T975 if k <= df)] if df >= 1 else float("nan")
def paired(w, tr, mode, key, fn):
    # Per round, fn(tracer's value, the untraced value of the same round):
    # the untraced rate drifts over minutes and a round's tracers run
    # within a minute of each other, so pairing by round removes the drift.
    by = {}
    for r in rows:
        if r["workload"] == w and r["mode"] == mode and r["tracer"] in (tr, "none"):
            by.setdefault(r["round"], {})[r["tracer"]] = r[key]
    return [fn(v[tr], v["none"]) for v in by.values() if tr in v and "none" in v]
def half(v): return t975(len(v) - 1) * st.stdev(v) / math.sqrt(len(v))
def ci(v): return f"{100*mean(v):.1f} %" if len(v) < 2 else f"{100*mean(v):.1f} % ± {100*half(v):.1f}"
def ci_us(v): return f"{mean(v):+.2f}" if len(v) < 2 else f"{mean(v):+.2f} ± {half(v):.2f}"
print("\n| workload | tracer | read/s (mean; range) | loss vs none, paired by round (mean ± 95 %) | CPU µs/datagram at fixed rate | added, paired (± 95 %) | perfscope: reads vs SNMP (bound) | NET_RX runs vs /proc/softirqs (bound) | busiest CPU BPF (mean; max) | perfscope process, share of all CPUs (mean) | peak RSS |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
present = lambda key, order: [x for x in order if any(r[key] == x for r in rows)]
for w in present("workload", ["lo-single", "lo-reuseport", "veth4"]):
    budgets = sorted({r["tracer"] for r in rows if r["tracer"].startswith("budget")})
    for tr in present("tracer", ["none", "default"] + budgets + ["exact", "bpftrace", "steal"]):
        sat = [r for r in rows if r["workload"] == w and r["tracer"] == tr and r["mode"] == "sat"]
        rate = [r for r in rows if r["workload"] == w and r["tracer"] == tr and r["mode"] == "rate"]
        rs = [r["read_per_s"] for r in sat]
        cpu = mean([r["cpu_us_per_dgram"] for r in rate])
        def acc(key, bound):
            return "; ".join(f"{100*r[key]:+.1f}%" + (f" (±{100*r[bound]:.0f}%)" if r.get(bound) else "")
                             for r in sat + rate if r.get(key) is not None)
        bpf = [r["bpf_max_cpu_share"] for r in sat + rate if r.get("bpf_max_cpu_share") is not None]
        proc = [r["process_cpu_share"] for r in sat + rate if r.get("process_cpu_share") is not None]
        rss = [r["rss_kib"] for r in sat + rate if r.get("rss_kib")]
        loss = "" if tr == "none" else ci(paired(w, tr, "sat", "read_per_s", lambda a, b: 1 - a / b))
        added = "" if tr == "none" else ci_us(paired(w, tr, "rate", "cpu_us_per_dgram", lambda a, b: a - b))
        print(f"| {w} | {tr} | {mean(rs):.0f}; {spread(rs)} | {loss} | {cpu:.2f} | {added} | "
              f"{acc('reads_vs_snmp', 'reads_bound')} | {acc('netrx_vs_proc', 'softirq_bound')} | "
              f"{(f'{100*mean(bpf):.1f} %; {100*max(bpf):.1f} %' if bpf else '')} | "
              f"{(f'{100*mean(proc):.1f} %' if proc else '')} | {(f'{max(rss)/1024:.1f} MB' if rss else '')} |")
# The default's estimates against the kernel's own counters, all runs.
for key, bound, what in (("reads_vs_snmp", "reads_bound", "reads vs Udp InDatagrams"),
                         ("netrx_vs_proc", "softirq_bound", "NET_RX runs vs /proc/softirqs"),
                         ("queues_vs_driver", "queues_bound", "queue packets vs the driver")):
    est = [r for r in rows if r["tracer"] == "default" and r.get(key) is not None and r.get(bound)]
    if est:
        inside = sum(abs(r[key]) <= r[bound] for r in est)
        within5 = sum(abs(r[key]) <= 0.05 for r in est)
        print(f"# default, {what}: {len(est)} estimates, {inside} inside their 95 % bound, {within5} within 5 %, "
              f"median |error| {100*st.median(abs(r[key]) for r in est):.1f} %, median bound ±{100*st.median(r[bound] for r in est):.0f} %")
EOF
