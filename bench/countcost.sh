#!/usr/bin/env bash
# What the passive HTTP request count of `perfscope go` (and `perfscope
# jvm`) costs per request, by its programs' own counters: the Go lab
# service (lab/goapp/server, built from this checkout) on loopback, loaded
# by wrk (one thread, 2 connections), while `perfscope go --pid P -d 6s
# --no-pools -o json` measures it; the report's own-cost table gives the
# send program's runs and time (self-timed), the data its request count.
# The program runs on every socket send of any process (wrk's too, which
# return at the first comparison), so its time per request is its time
# over the requests counted, set against the service's own CPU per
# request (/proc/PID/stat over perfscope's run). With two binaries the runs alternate, A
# first. Run as root:
#
#   flock /tmp/perfscope-root-tests.lock bash bench/countcost.sh [RUNS] [A_BINARY [B_BINARY]]
#
# Without a binary it builds this checkout's perfscope.
set -euo pipefail
RUNS=${1:-3}
PORT=18961
REPO=$(cd "$(dirname "$0")/.." && pwd)
BENCH=countcost
# shellcheck source=bench/common.sh
. "$REPO/bench/common.sh"
trap bench_cleanup EXIT INT TERM
bench_prepare countcost.sh "${2:-}"
bench_binaries "${3:-}"
bench_need countcost.sh wrk
(cd "$REPO" && go build -o "$WORK/goapp" ./lab/goapp/server)
"$WORK/goapp" -addr "127.0.0.1:$PORT" >"$WORK/goapp.log" 2>&1 &
PIDS+=($!)
APP=$!
for _ in $(seq 50); do
	curl -sf -o /dev/null "http://127.0.0.1:$PORT/work" && break
	sleep 0.1
done

# The service's user and system CPU so far, in clock ticks.
app_ticks() { awk '{sub(/.*\) /, ""); print $12+$13}' "/proc/$APP/stat"; }

echo "# $("$BIN" version 2>/dev/null | head -1); kernel $(uname -r); $(nproc) CPUs; $(date -u +%FT%TZ)"
echo "# load before: $(uptime | sed 's/.*load/load/')"
for r in $(seq "$RUNS"); do
	for i in "${!BINS[@]}"; do
		name=A
		[ "$i" = 1 ] && name=B
		wrk -t1 -c2 -d9s "http://127.0.0.1:$PORT/work" >"$WORK/wrk.log" 2>&1 &
		wk=$!
		sleep 1
		t0=$(app_ticks)
		"${BINS[$i]}" go --pid "$APP" -d 6s --no-pools -o json >"$WORK/run.json" 2>"$WORK/run.err"
		t1=$(app_ticks)
		wait "$wk"
		python3 - "$r" "$name" "$WORK/run.json" "$WORK/wrk.log" "$((t1 - t0))" "$(getconf CLK_TCK)" <<'EOF'
import json, re, sys
run, name, path, wrk, ticks, hz = sys.argv[1:]
d = json.load(open(path))
o = d.get("overhead") or d["data"].get("overhead")
reqs = d["data"].get("requests") or 0
rps = re.search(r"Requests/sec:\s+([\d.]+)", open(wrk).read())
for p in o["programs"]:
    if p["program"].startswith("sock:"):
        per_req = p["run_time_ns"] / reqs if reqs else float("nan")
        # The service's CPU over perfscope's run (start-up and teardown
        # included, so a little more than the window's requests used).
        app_ns = int(ticks) * 1e9 / int(hz)
        app_per_req = app_ns / reqs if reqs else float("nan")
        print(f"run {run} {name} {p['program']} runs {p['run_count']} time_ms {p['run_time_ns']/1e6:.1f} "
              f"ns_per_run {p['per_run_ns']:.0f} requests {reqs} ns_per_request {per_req:.0f} "
              f"service_us_per_request {app_per_req/1e3:.1f} share {100*per_req/app_per_req:.2f}% "
              f"wrk_rps {rps.group(1) if rps else '?'}")
EOF
		sleep 1
	done
done
echo "# load after: $(uptime | sed 's/.*load/load/'); $(date -u +%FT%TZ)"
