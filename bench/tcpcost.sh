#!/usr/bin/env bash
# What `perfscope tcp` costs an HTTP server: Debian's nginx-light (one
# process, a fixed 200 from memory) in a network namespace of the
# benchmark's own, loaded by wrk (one thread, 16 connections) in the same
# namespace, in two loads:
#
#   keepalive  requests on kept-alive connections: per-packet work
#              (softirq, NAPI, the packets' hooks);
#   newconn    every request on a new connection ("Connection: close"):
#              handshakes, accepts and closes as well.
#
# Each round runs, per load, every tracer in an order that rotates from
# round to round, the load's WINDOW under each, with nothing attached for
# a second between them:
#
#   none      nothing attached;
#   default   `perfscope tcp --iface lo --port PORT -d W+4s` at its defaults
#             (the 1.5 % overhead budget: per-packet hooks in sampling
#             windows), the load starting 1.5 s after it attached;
#   exact     the same with --exact (every hook attached throughout);
#   bpftrace  bench/tcp.bt: the same tracepoints, hash maps.
#
# The loss is 1 − requests/s under the tracer / requests/s under none in
# the same round and load. Run as root:
#
#   flock /tmp/perfscope-root-tests.lock bash bench/tcpcost.sh [ROUNDS] [WINDOW]
#
# TCPCOST_TRACERS picks the tracers ("none default exact bpftrace"; also
# noprofile, the defaults with --no-profile);
# TCPCOST_BIN benchmarks a perfscope built elsewhere. Prints one line per
# measurement (with the load average and how busy the CPUs were during
# it), what perfscope's report said of its own cost, then the table
# bench/results/tcp-cost.md records.
set -euo pipefail
ROUNDS=${1:-5}
WINDOW=${2:-5s}
PORT=18940
REPO=$(cd "$(dirname "$0")/.." && pwd)
BENCH=tcpcost
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
NS=perfscope-tc-$ID
trap bench_cleanup EXIT INT TERM
bench_prepare tcpcost.sh "${TCPCOST_BIN:-}"
bench_need tcpcost.sh nginx wrk
# perfscope's window: the load's, the wait for its attach and calibration
# (below), and a second to spare.
PERFSCOPE_SECS=$(python3 -c "import sys; w=sys.argv[1]; print(int(float(w.rstrip('s')) + 4))" "$WINDOW")
read -r -a TRACERS <<<"${TCPCOST_TRACERS:-none default exact bpftrace}"

bench_nginx_netns "$NS" "$PORT"
URL="http://127.0.0.1:$PORT/"

bpf_links() { find "/proc/$1/fd" -lname 'anon_inode:bpf_link' 2>/dev/null | wc -l; }
# busy (steal included), all, and the guest's own work (user, nice, system,
# irq, softirq: steal is time the host ran something else).
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9, $2+$3+$4+$7+$8}' /proc/stat; }
cpu_ticks() { awk '{sub(/.*\) /, ""); print $12+$13}' "/proc/$1/stat"; }

# load KIND: one wrk run; prints "rps R nginx_us_per_req C load L busy B
# errors E machine_us_per_req M": M is every CPU's own work (nginx, wrk,
# softirq, BPF programs, perfscope's process) per request, steal left out.
load() {
	local kind=$1 hdr=() b0 b1 t0 t1 l out
	[ "$kind" = newconn ] && hdr=(-H "Connection: close")
	l=$(cut -d' ' -f1 /proc/loadavg)
	b0=$(busy_jiffies)
	t0=$(cpu_ticks "$NGINX")
	out=$(ip netns exec "$NS" wrk -t1 -c16 -d "$WINDOW" "${hdr[@]}" "$URL")
	t1=$(cpu_ticks "$NGINX")
	b1=$(busy_jiffies)
	echo "$out" | T0=$t0 T1=$t1 B="$b0 $b1" L=$l python3 -c '
import os, re, sys
s = sys.stdin.read()
rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", s).group(1))
n = int(re.search(r"(\d+) requests in", s).group(1))
err = re.search(r"Socket errors: (.*)", s)
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", s)
b = [float(x) for x in os.environ["B"].split()]
ticks = int(os.environ["T1"]) - int(os.environ["T0"])
hz = os.sysconf("SC_CLK_TCK")
print("rps %.1f nginx_us_per_req %.2f load %s busy %.2f errors %s machine_us_per_req %.2f" % (rps, ticks * 1e4 / max(1, n), os.environ["L"], (b[3] - b[0]) / (b[4] - b[1]),
      (err.group(1).replace(" ", "") if err else "0") + ("/non2xx:" + non2xx.group(1) if non2xx else ""), (b[5] - b[2]) * 1e6 / hz / max(1, n)))'
}

measure() {
	local tr=$1 kind=$2 round=$3 out=$WORK/$1-$2-$3 tpid=
	case $tr in
	bpftrace)
		unshare -m --propagation private sh -c \
			'[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing; exec bpftrace "$0" "$1"' \
			"$REPO/bench/tcp.bt" "$PORT" >"$out.bt" 2>&1 &
		tpid=$!
		for _ in $(seq 300); do grep -q Attaching "$out.bt" 2>/dev/null && break; sleep 0.1; done
		sleep 1.5
		;;
	default | exact | noprofile)
		# A run as users make it: a duration that holds the load, ending
		# by itself after it (its report is built after the load ends).
		local cargs=(tcp --iface lo --port "$PORT" -d "$PERFSCOPE_SECS"s -o json)
		[ "$tr" = exact ] && cargs+=(--exact)
		[ "$tr" = noprofile ] && cargs+=(--no-profile)
		ip netns exec "$NS" "$BIN" "${cargs[@]}" >"$out.json" 2>"$out.err" &
		tpid=$!
		# softirq (2), NAPI (1), lockstat (2), tcpevents (4) stay attached.
		for _ in $(seq 300); do [ "$(bpf_links "$tpid")" -ge 9 ] && break; sleep 0.1; done
		sleep 1.5 # the budget's calibration and first windows
		;;
	esac
	echo "round $round $kind $tr $(load "$kind")"
	if [ "$tr" = bpftrace ]; then
		# bpftrace has been seen to miss a SIGINT: ask again each second,
		# then end it.
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -INT "$tpid" 2>/dev/null || break
			sleep 1
			case $(ps -o stat= -p "$tpid" 2>/dev/null) in "" | Z*) break ;; esac
		done
		case $(ps -o stat= -p "$tpid" 2>/dev/null) in "" | Z*) ;; *) kill -TERM "$tpid" 2>/dev/null || true ;; esac
	fi
	[ -n "$tpid" ] && { wait "$tpid" 2>/dev/null || true; }
	if [ -s "$out.json" ]; then
		python3 - "$out.json" "$round" "$kind" "$tr" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
o = r.get("overhead") or {}
cc, b = o.get("cpu_cost") or {}, o.get("budget") or {}
groups = " ".join("%s:%s:%s" % (g["group"], g["class"], "exact" if g.get("exact") else "sampled") for g in b.get("groups") or [])
ev = ((r.get("data") or {}).get("tcp") or {}).get("events") or {}
print("round %s %s %s report bpf_max_share %s process_share %s total_share %s groups %s retransmits %s resets_sent %s" % (
    sys.argv[2], sys.argv[3], sys.argv[4], cc.get("max_share"), b.get("process_share"), b.get("total_share"), groups or "-",
    (ev.get("retransmits") or {}).get("events"), (ev.get("resets_sent") or {}).get("events")))
PY
	fi
	sleep 1 # untraced: what the tracer's exit left behind settles
}

echo "# perfscope $("$BIN" version 2>/dev/null | head -1); kernel $(uname -r); $(nproc) CPUs; $(date -u +%FT%TZ)"
echo "# load before: $(uptime | sed 's/.*load average/load average/'); busiest processes: $(ps -eo pcpu=,comm= --sort=-pcpu | head -5 | awk '{printf "%s %s%%, ", $2, $1}')"
ip netns exec "$NS" wrk -t1 -c16 -d 2s "$URL" >/dev/null # warm up
for round in $(seq "$ROUNDS"); do
	for kind in keepalive newconn; do
		n=${#TRACERS[@]}
		for i in $(seq 0 $((n - 1))); do
			measure "${TRACERS[$(((i + round) % n))]}" "$kind" "$round"
		done
	done
done | tee "$WORK/lines"
echo "# load after: $(uptime | sed 's/.*load average/load average/'); $(date -u +%FT%TZ)"

python3 - "$WORK/lines" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1]) if l.split()[4:5] == ["rps"]]
T = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}
print("\n| load | tracer | rounds | requests/s (median) | lost vs none, paired by round (median; mean ± 95 %) | nginx µs CPU per request (median) | machine µs CPU per request (median) | machine CPU per request vs none, paired (median; mean ± 95 %) | load average | CPUs busy |")
print("|---|---|---|---|---|---|---|---|---|---|")
for kind in ("keepalive", "newconn"):
    by = {}
    for r in rows:
        if r[2] == kind:
            by.setdefault(r[3], {})[int(r[1])] = r
    none = by.get("none", {})
    for tr in ("none", "default", "noprofile", "exact", "bpftrace"):
        if tr not in by:
            continue
        rs = by[tr]
        rps = [float(r[5]) for r in rs.values()]
        cpu = [float(r[7]) for r in rs.values()]
        loads = [float(r[9]) for r in rs.values()]
        busy = [float(r[11]) for r in rs.values()]
        mach = [float(r[15]) for r in rs.values()]
        def paired(f):
            d = [f(k) for k in rs if k in none] if tr != "none" else []
            if len(d) < 2:
                return ""
            return "%+.1f %%; %+.1f ± %.1f %%" % (st.median(d), st.mean(d), T.get(len(d) - 1, 2.0) * st.stdev(d) / len(d) ** 0.5)
        lc = paired(lambda k: 100 * (1 - float(rs[k][5]) / float(none[k][5])))
        mc = paired(lambda k: 100 * (float(rs[k][15]) / float(none[k][15]) - 1))
        print("| %s | %s | %d | %.0f | %s | %.2f | %.2f | %s | %.1f–%.1f | %.0f–%.0f %% |" % (kind, tr, len(rs), st.median(rps), lc, st.median(cpu),
              st.median(mach), mc, min(loads), max(loads), 100 * min(busy), 100 * max(busy)))
PY
