#!/usr/bin/env bash
# perfscope gclog side by side with GCViewer 1.36 on the same ~200 MB logs:
# wall time, throughput, peak RSS and the pauses each reports.
#
#   bash bench/gclog-vs-gcviewer.sh [SIZE_MB]
#
# The logs are real ones from ../shared/gclogs-corpus repeated with their
# uptimes shifted so that time keeps going forward: one JDK 6 Parallel log
# with -XX:+PrintHeapAtGC (gc_ccpcc01_late.log) and one JDK 11 unified CMS
# log (gctoolkit's unified/cms/gc.log). GCViewer comes from Maven Central
# (com.github.chewiebug:gcviewer:1.36) and runs headless with -t SUMMARY.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb=${1:-200}
corpus=../shared/gclogs-corpus/gctoolkit-testdata/gctoolkit-gclogs
[ -d "$corpus" ] || { echo "this benchmark reads the GC log corpus: $corpus is not beside this clone" >&2; exit 2; }
work=$(mktemp -d /tmp/perfscope-gclog-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

jar=$HOME/.m2/repository/com/github/chewiebug/gcviewer/1.36/gcviewer-1.36.jar
[ -f "$jar" ] || mvn -q dependency:get -Dartifact=com.github.chewiebug:gcviewer:1.36 >/dev/null
go build -o "$work/perfscope" ./cmd/perfscope

# repeat SRC DST FORMAT: copies of SRC, uptimes shifted by the previous
# copies' span, until DST holds size_mb.
repeat() {
	python3 - "$1" "$2" "$3" "$size_mb" <<'EOF'
import re, sys
src, dst, fmt, mb = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
text = open(src, errors="replace").read()
if fmt == "jdk8":   # "12.345: " uptimes
    pat = re.compile(r"(?<![\d.])(\d+\.\d{3})(?=: )")
    fmtv = lambda v: "%.3f" % v
else:               # "[12.345s]" decorations
    pat = re.compile(r"(?<=\[)(\d+\.\d{3})(?=s\])")
    fmtv = lambda v: "%.3f" % v
span = max(float(m) for m in pat.findall(text)) + 1
with open(dst, "w") as out:
    n, off = 0, 0.0
    while n < mb << 20:
        chunk = pat.sub(lambda m: fmtv(float(m.group(1)) + off), text)
        out.write(chunk)
        n += len(chunk)
        off += span
EOF
}

printf '%-10s %-10s %8s %8s %9s %10s %12s\n' log tool seconds MB/s "RSS MB" pauses "pause total"
for spec in "jdk8:$corpus/preunified/ps/details/gc_ccpcc01_late.log" "unified:$corpus/unified/cms/gc.log"; do
	fmt=${spec%%:*}
	log="$work/$fmt.log"
	repeat "${spec#*:}" "$log" "$fmt"
	mb=$(($(stat -c %s "$log") / 1048576))

	/usr/bin/time -f '%e %M' -o "$work/t" "$work/perfscope" gclog --no-rotated -o json "$log" >"$work/ps.json" || true
	read -r secs kb <"$work/t"
	read -r n total < <(jq -r '.data.gc.all_pauses | "\(.count) \(.total_ns / 1e9)"' "$work/ps.json")
	printf '%-10s %-10s %8.2f %8.0f %9.0f %10s %11.1fs\n' "$fmt ${mb}MB" perfscope "$secs" "$(echo "$mb / $secs" | bc -l)" "$((kb / 1024))" "$n" "$total"

	/usr/bin/time -f '%e %M' -o "$work/t" java -jar "$jar" "$log" "$work/gcv.csv" -t SUMMARY >/dev/null 2>&1 || true
	read -r secs kb <"$work/t"
	# GCViewer's summary gives the pause total, not the count.
	total=$(awk -F'; ' '$1=="accumPause"{gsub(",","",$2); print $2}' "$work/gcv.csv" 2>/dev/null || echo "?")
	printf '%-10s %-10s %8.2f %8.0f %9.0f %10s %11ss\n' "$fmt ${mb}MB" GCViewer "$secs" "$(echo "$mb / $secs" | bc -l)" "$((kb / 1024))" "-" "$total"
done
