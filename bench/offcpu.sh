#!/usr/bin/env bash
# The offcpu probe's cost on the context-switch benchmark: `perf bench
# sched pipe` (two processes ping-ponging over a pipe on one CPU: every
# round trip is two context switches and two wakeups, the worst case for a
# sched_switch tracer) with, alternating round by round:
#
#   none       nothing attached;
#   empty      empty programs on the four tracepoints (the floor any tool
#              pays: the tracepoints' static calls and BPF entry/exit);
#   exact      perfscope's offcpu probe, every process, every switch,
#              stacks and wakers (bench/cmd/offcpuprobe, defaults);
#   nowaker    the same without the wakers' stacks;
#   every16    stacks at 1 in 16 switches (thread totals and histograms
#              still exact);
#   bpftrace   bench/offcpu.bt: the same tracepoints and maps;
#   offcputime libbpf-tools' offcputime -m 10 (tp_btf sched_switch, stacks
#              at the switch-in; no wakers, no run queue);
#   cmd-budget the command, `perfscope offcpu -a` at its defaults (the
#              overhead budget, 1.5 %: sampling windows);
#   cmd-exact  `perfscope offcpu -a --exact`.
#
# Hold the BPF lock while it runs, so that other perfscope tests do not
# load programs on the same tracepoints:
#
#   flock /tmp/perfscope-root-tests.lock bash bench/offcpu.sh [ROUNDS] [LOOPS]
#
# Prints one line per measurement, then the medians BENCHMARKS.md records,
# with the machine's load average and busy share around each round.
set -euo pipefail
ROUNDS=${1:-5}
LOOPS=${2:-200000}
# Both ends of the pipe run on one CPU: every round trip is then two
# direct context switches on that CPU. Left to float, a wakeup on this VM
# goes to the other, halted vCPU and costs an interrupt to wake it, which
# made the untraced run 4-8x slower whenever the machine was otherwise idle
# and drowned the tracers' cost.
CPU=${OFFCPU_BENCH_CPU:-0}
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/perfscope-bench-offcpu.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

[ "$(id -u)" = 0 ] || { echo "offcpu.sh: needs root (BPF)" >&2; exit 3; }
command -v perf >/dev/null || { echo "offcpu.sh: needs perf (bash scripts/deps.sh bench)" >&2; exit 3; }
(cd "$REPO" && go build -o "$WORK/offcpuprobe" ./bench/cmd/offcpuprobe && CGO_ENABLED=0 go build -o "$WORK/perfscope" ./cmd/perfscope)
read -r -a TRACERS <<<"${OFFCPU_TRACERS:-none empty exact nowaker every16 bpftrace offcputime cmd-budget cmd-exact}"

# bpf_links PID: the BPF links a process holds (the command's four sched
# hooks once it is attached).
bpf_links() { find "/proc/$1/fd" -lname 'anon_inode:bpf_link' 2>/dev/null | wc -l; }

busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }

# measure TRACER ROUND: one benchmark run, one line of results.
measure() {
	local tr=$1 round=$2 out=$WORK/$1-$2 tpid=
	case $tr in
	exact | nowaker | every16 | empty)
		local args=()
		[ "$tr" = nowaker ] && args=(-no-waker-stacks)
		[ "$tr" = every16 ] && args=(-stack-every 16)
		[ "$tr" = empty ] && args=(-empty)
		mkfifo "$out.in"
		"$WORK/offcpuprobe" "${args[@]}" <"$out.in" >"$out.probe" 2>&1 &
		tpid=$!
		exec 9>"$out.in"
		for _ in $(seq 100); do grep -q attached "$out.probe" 2>/dev/null && break; sleep 0.1; done
		;;
	bpftrace)
		# bpftrace finds tracepoints through tracefs: mount it in a
		# private mount namespace that ends with bpftrace.
		unshare -m --propagation private sh -c \
			'[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing; exec bpftrace "$0"' \
			"$REPO/bench/offcpu.bt" >"$out.bt" 2>&1 &
		tpid=$!
		for _ in $(seq 300); do grep -q Attaching "$out.bt" 2>/dev/null && break; sleep 0.1; done
		sleep 1
		;;
	cmd-budget | cmd-exact)
		local cargs=(offcpu -a -d 10m -o json)
		[ "$tr" = cmd-exact ] && cargs+=(--exact)
		"$WORK/perfscope" "${cargs[@]}" >"$out.json" 2>"$out.err" &
		tpid=$!
		for _ in $(seq 300); do [ "$(bpf_links "$tpid")" -ge 4 ] && break; sleep 0.1; done
		sleep 1 # the budget's calibration
		;;
	offcputime)
		/usr/sbin/offcputime -m 10 >"$out.ot" 2>&1 &
		tpid=$!
		sleep 3 # it prints nothing until it ends
		;;
	esac
	local load b0 b1
	load=$(cut -d' ' -f1 /proc/loadavg)
	b0=$(busy_jiffies)
	local usecs
	usecs=$(taskset -c "$CPU" perf bench sched pipe -l "$LOOPS" 2>/dev/null | awk '/usecs\/op/{print $1}')
	b1=$(busy_jiffies)
	local busy
	busy=$(echo "$b0 $b1" | awk '{printf "%.2f", ($3-$1)/($4-$2)}')
	if [ -n "$tpid" ]; then
		case $tr in
		exact | nowaker | every16 | empty) exec 9>&-; rm -f "$out.in" ;;
		*) kill -INT "$tpid" 2>/dev/null || true ;;
		esac
		wait "$tpid" 2>/dev/null || true
	fi
	local extra=
	if [ -f "$out.probe" ]; then
		extra=$(grep -E "programs|sched_switch" "$out.probe" | tr -s ' ' | paste -sd' ' - || true)
	fi
	echo "round $round $tr usecs/op $usecs load $load busy $busy $extra"
}

for round in $(seq "$ROUNDS"); do
	# Rotate the order each round so that no tracer always runs first.
	n=${#TRACERS[@]}
	for i in $(seq 0 $((n - 1))); do
		measure "${TRACERS[$(((i + round) % n))]}" "$round"
	done
done | tee "$WORK/lines"

echo
echo "median usecs/op per tracer (slowdown against none):"
awk '{u[$3]=u[$3]" "$5} END {for (t in u) print t, u[t]}' "$WORK/lines" | while read -r tr vals; do
	echo "$tr $(echo "$vals" | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
done | sort -k2 -n | awk 'NR==1 && $1!="none" {} {m[$1]=$2; order[NR]=$1} END {for (i=1;i<=NR;i++) {t=order[i]; printf "%-10s %8.2f  %+6.1f %%\n", t, m[t], 100*(m[t]/m["none"]-1)}}'
