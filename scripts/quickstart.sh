#!/usr/bin/env bash
# Quick start, step 1: build perfscope and run its main job on the built-in
# lab: Makita's network faults planted one at a time in two network
# namespaces, each found by `perfscope udp`, fixed, and measured again.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run as root: perfscope loads eBPF programs" >&2; exit 3; }
bash scripts/deps.sh run
CGO_ENABLED=0 go build -trimpath -o perfscope ./cmd/perfscope
./perfscope doctor >/dev/null || ./perfscope doctor
exec ./perfscope lab udp
