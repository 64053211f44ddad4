#!/usr/bin/env bash
# The overhead budget's estimates and their bounds on a real DNS server:
# Knot DNS in a namespace behind the 4-queue veth rig (GRO on), answering
# dnsperf from the other namespace, measured by `perfscope udp --port 53`
# with the default budget, runs of several lengths, binaries alternating
# round by round. Per binary and run length it prints each sampled group's
# windows and 95 % bound (median and worst), how far the server's reads
# came from the namespace's exact InDatagrams, how many sections that saw
# events had no bound, how many bounds over 10 % did not say the
# --duration that would bring them there, and how many warn/crit findings
# rested on a section without a bound.
#
#   flock /tmp/perfscope-root-tests.lock bash bench/budgetdns.sh [ROUNDS] [DURATIONS]
#
# ROUNDS (3) rounds of every duration in DURATIONS ("4s 5s 10s").
# BUDGETDNS_BINS="name=/path/to/perfscope ..." compares builds (default:
# this checkout's, named "this"); BUDGETDNS_QPS paces dnsperf (40000; 0:
# as fast as it goes). Needs root, knot, dnsperf, iproute2, ethtool
# (bash scripts/deps.sh test). Every namespace it creates is removed on
# exit.
set -euo pipefail
ROUNDS=${1:-3}
DURATIONS=${2:-"4s 5s 10s"}
QPS=${BUDGETDNS_QPS:-40000}
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/perfscope-bench-budgetdns.XXXXXX)
ID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
NSS=perfscope-ds-$ID
NSR=perfscope-dr-$ID
PIDS=()

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for ns in "$NSS" "$NSR"; do ip netns del "$ns" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

[ "$(id -u)" = 0 ] || { echo "budgetdns.sh: needs root (BPF, namespaces)" >&2; exit 3; }
for t in knotd dnsperf ip ethtool python3; do
	command -v "$t" >/dev/null || { echo "budgetdns.sh: needs $t (bash scripts/deps.sh test)" >&2; exit 3; }
done
declare -A BIN
if [ -n "${BUDGETDNS_BINS:-}" ]; then
	for nb in $BUDGETDNS_BINS; do BIN[${nb%%=*}]=${nb#*=}; done
else
	(cd "$REPO" && CGO_ENABLED=0 go build -o "$WORK/perfscope" ./cmd/perfscope)
	BIN[this]=$WORK/perfscope
fi

ip netns add "$NSS"
ip netns add "$NSR"
ip link add name vs"$ID" numtxqueues 4 numrxqueues 4 netns "$NSS" type veth peer name vr"$ID" numtxqueues 4 numrxqueues 4 netns "$NSR"
ip -n "$NSS" addr add 198.18.0.1/24 dev vs"$ID"
ip -n "$NSR" addr add 198.18.0.2/24 dev vr"$ID"
for ns in "$NSS" "$NSR"; do ip -n "$ns" link set lo up; done
ip -n "$NSS" link set vs"$ID" up
ip -n "$NSR" link set vr"$ID" up
ip netns exec "$NSR" ethtool -K vr"$ID" gro on rx-udp-gro-forwarding on >/dev/null
sleep 2 # operstate turns up asynchronously

cat >"$WORK/example.zone" <<'EOF'
$ORIGIN example.
$TTL 3600
@ SOA ns.example. admin.example. 1 3600 900 604800 300
@ NS ns.example.
ns A 198.18.0.2
www A 198.18.0.10
EOF
cat >"$WORK/knot.conf" <<EOF
server:
    listen: 198.18.0.2@53
    rundir: $WORK
    udp-workers: 2
    tcp-workers: 1
    background-workers: 1
database:
    storage: $WORK/db
zone:
  - domain: example
    file: $WORK/example.zone
log:
  - target: stderr
    any: warning
EOF
for _ in $(seq 20); do echo "www.example A"; done >"$WORK/queries.txt"
ip netns exec "$NSR" knotd -c "$WORK/knot.conf" 2>"$WORK/knotd.log" &
PIDS+=($!)
sleep 2

paced=()
[ "$QPS" != 0 ] && paced=(-Q "$QPS")
for round in $(seq "$ROUNDS"); do
	for dur in $DURATIONS; do
		for name in "${!BIN[@]}"; do
			secs=${dur%s}
			ip netns exec "$NSS" dnsperf -s 198.18.0.2 -d "$WORK/queries.txt" -l $((secs + 6)) -c 8 -T 2 "${paced[@]}" >/dev/null 2>&1 &
			dp=$!
			sleep 2
			out="$WORK/$name-$dur-$round.json"
			ip netns exec "$NSR" "${BIN[$name]}" udp --iface vr"$ID" --port 53 --duration "$dur" -o json >"$out" 2>"$WORK/err" ||
				{ echo "perfscope udp failed: $(cat "$WORK/err")" >&2; exit 1; }
			wait "$dp" || true
			echo "round $round $name $dur done" >&2
		done
	done
done

python3 - "$WORK" <<'EOF'
import glob, json, os, statistics, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*-*-*.json"))):
    name, dur, _ = os.path.basename(f)[:-5].rsplit("-", 2)
    d = json.load(open(f))
    r = rows.setdefault((name, dur), {"groups": {}, "reads": [], "nobound": 0, "noadvice": 0, "unconfirmed": 0, "runs": 0})
    r["runs"] += 1
    bounded = {}
    for g in (d["overhead"].get("budget") or {}).get("groups") or []:
        e = g.get("estimate")
        if g["exact"] or not e:
            continue
        gr = r["groups"].setdefault(g["group"], {"windows": [], "rel": [], "ref": e.get("reference", "") or "time"})
        gr["windows"].append(e["windows"])
        rel = e.get("rel_error")
        if rel is not None:
            gr["rel"].append(rel)
        elif e["sampled_events"] > 0:
            r["nobound"] += 1
        if rel is not None and rel > 0.10 and not e.get("duration_for_10pct_ns"):
            r["noadvice"] += 1
    data = d["data"]
    snmp = data["drops"].get("udp_snmp") or {}
    kernel = (snmp.get("udp") or {}).get("in_datagrams", 0) + (snmp.get("udp6") or {}).get("in_datagrams", 0)
    reads = sum(s.get("received_packets") or 0 for s in data["sockets"].get("sockets") or [])
    if kernel:
        r["reads"].append(reads / kernel - 1)
    sections = {k: (data.get(k) or {}).get("estimate") for k in ("softirq", "queues", "queue_cpu", "tx", "locks", "drops", "sockets")}
    for f in d.get("findings") or []:
        if f["severity"] in ("warn", "crit"):
            for s in f.get("estimates") or []:
                e = sections.get(s)
                if e and e.get("sampled_events", 0) > 0 and (e.get("rel_error") is None or e["rel_error"] >= 1):
                    r["unconfirmed"] += 1
for (name, dur), r in sorted(rows.items(), key=lambda kv: (kv[0][0], float(kv[0][1].rstrip("s")))):
    reads = r["reads"]
    print(f"{name} {dur} ({r['runs']} runs): reads vs InDatagrams {'/'.join(f'{100*x:+.2f}%' for x in reads)}; "
          f"sections seen without a bound {r['nobound']}; bounds >10 % without a --duration {r['noadvice']}; warn/crit findings on an unbounded estimate {r['unconfirmed']}")
    for g, v in sorted(r["groups"].items()):
        rel = v["rel"]
        print(f"  {g:18s} by {v['ref'][:40]:40s} windows {min(v['windows'])}-{max(v['windows'])}, bound median "
              f"{100*statistics.median(rel):.1f} % worst {100*max(rel):.1f} %" if rel else f"  {g:18s} windows {v['windows']}, no bound")
EOF
