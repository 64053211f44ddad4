#!/usr/bin/env bash
# Flame graph benchmark: perfscope flame vs inferno-flamegraph vs flamegraph.pl
# on the same generated 200 000-stack folded file and the same minimum frame
# width. Prints wall time and peak RSS (GNU time) of each, best of RUNS runs.
#
# Needs: go, GNU time (apt-get install time), inferno (cargo install inferno),
# flamegraph.pl (apt-get install frama-c-base ships it). Not run by CI.
#
# Usage: bench/flame.sh            (RUNS=3 STACKS=200000 MINWIDTH_PX=0.1 WIDTH=1200)
set -euo pipefail

RUNS=${RUNS:-3}
STACKS=${STACKS:-200000}
WIDTH=${WIDTH:-1200}
MINWIDTH_PX=${MINWIDTH_PX:-0.1}
PL_RUNS=${PL_RUNS:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GNU_TIME=${GNU_TIME:-/usr/bin/time}
INFERNO=${INFERNO:-$(command -v inferno-flamegraph || echo "$HOME/.cargo/bin/inferno-flamegraph")}
FLAMEGRAPH_PL=${FLAMEGRAPH_PL:-$(find /usr/share /usr/lib -name flamegraph.pl 2>/dev/null | head -n1)}

for tool in "$GNU_TIME" "$INFERNO" "$FLAMEGRAPH_PL"; do
	if [[ ! -x $tool ]]; then
		echo "flame.sh: $tool missing: apt-get install -y time frama-c-base; cargo install inferno" >&2
		exit 2
	fi
done

WORK=$(mktemp -d /tmp/perfscope-flame-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

echo "building perfscope and the input generator..."
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$WORK/perfscope" ./cmd/perfscope &&
	go build -o "$WORK/genfolded" ./bench/cmd/genfolded)
"$WORK/genfolded" -stacks "$STACKS" -min-depth 10 -max-depth 40 -seed 5 >"$WORK/stacks.folded"
INPUT="$WORK/stacks.folded"
# Warm the page cache so that every tool reads from memory.
cat "$INPUT" >/dev/null

# inferno's --minwidth is a percentage of the width, flamegraph.pl's and
# perfscope's are pixels of the drawable width (WIDTH - 2×10 px padding).
MINWIDTH_PCT=$(awk -v px="$MINWIDTH_PX" -v w="$WIDTH" 'BEGIN { printf "%.9f", px / (w - 20) * 100 }')

# measure NAME RUNS CMD... → prints "NAME best_wall_s peak_rss_MB frames svg_bytes"
measure() {
	local name=$1 runs=$2
	shift 2
	local best="" rss="" i
	for ((i = 0; i < runs; i++)); do
		"$GNU_TIME" -v -o "$WORK/time.txt" "$@" <"$INPUT" >"$WORK/$name.svg"
		local wall kb
		wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0; for (j = 1; j <= n; j++) s = s * 60 + t[j]; print s }' "$WORK/time.txt")
		kb=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$WORK/time.txt")
		if [[ -z $best ]] || awk -v a="$wall" -v b="$best" 'BEGIN { exit !(a < b) }'; then
			best=$wall
			rss=$kb
		fi
	done
	# Frames drawn: <g> elements holding a <title> (each tool adds a few
	# <g> of its own around them).
	printf "%-16s %8.2f %10.0f %8d %12d\n" "$name" "$best" "$((rss / 1024))" \
		"$(grep -o '<title>' "$WORK/$name.svg" | wc -l)" "$(stat -c %s "$WORK/$name.svg")"
}

echo
echo "input: $STACKS stacks, depth 10-40, $(($(stat -c %s "$INPUT") / 1000000)) MB; width $WIDTH px, minwidth $MINWIDTH_PX px (= $MINWIDTH_PCT % for inferno)"
echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), kernel $(uname -r)"
echo
printf "%-16s %8s %10s %8s %12s\n" tool wall_s peak_MB frames svg_bytes
measure perfscope "$RUNS" "$WORK/perfscope" flame - --width "$WIDTH" --minwidth "$MINWIDTH_PX" | tee "$WORK/results"
measure inferno "$RUNS" "$INFERNO" --width "$WIDTH" --minwidth "$MINWIDTH_PCT" | tee -a "$WORK/results"
measure flamegraph.pl "$PL_RUNS" "$FLAMEGRAPH_PL" --width "$WIDTH" --minwidth "$MINWIDTH_PX" | tee -a "$WORK/results"

echo
awk '{ wall[$1] = $2; rss[$1] = $3 }
END {
	ok = (wall["perfscope"] <= wall["inferno"]) && (rss["perfscope"] <= rss["inferno"]) && (wall["flamegraph.pl"] / wall["perfscope"] >= 20)
	printf "perfscope vs inferno: %.2fx the time, %.2fx the memory\n", wall["perfscope"] / wall["inferno"], rss["perfscope"] / rss["inferno"]
	printf "perfscope vs flamegraph.pl: %.1fx faster, %.2fx the memory\n", wall["flamegraph.pl"] / wall["perfscope"], rss["perfscope"] / rss["flamegraph.pl"]
	print (ok ? "targets met (no slower, no bigger than inferno; >= 20x faster than flamegraph.pl)" : "TARGETS MISSED")
	exit !ok
}' "$WORK/results"
