# perfscope flame: the unit tests (go test ./flame/... ./internal/cli/...) need
# nothing beyond Go. node runs the flame graph's JavaScript (zoom, search,
# reset, icicle) against the generated SVG in TestSVGScriptBehaviour; without
# it that one test skips.
command -v node >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs
# Only for bench/flame.sh (not run by CI): GNU time, flamegraph.pl, inferno.
# command -v /usr/bin/time >/dev/null || apt-get install -y time
# ls /usr/share/frama-c/analysis-scripts/flamegraph.pl >/dev/null 2>&1 || apt-get install -y frama-c-base
# command -v inferno-flamegraph >/dev/null || cargo install inferno
