#!/usr/bin/env bash
# Compressed text echo, server variants alternating within each round (A/B runs of
# permessage-deflate settings and encoders against yawc):
#
#   bash benches/deflate_ab.sh ROUNDS OUT.csv "LABEL|BINARY|SERVER ARGS" ...
#
# BINARY is a name under $CARGO_TARGET_DIR/release (default target/) or an absolute path
# (another build); every variant runs with --deflate. Cells (payload size|connections) come
# from CELLS (default: 1 KiB and 16 KiB text at 1, 100 and 1,000 connections). Each run: the
# server pinned to core 0 and started fresh, the load tool on core 1, 1 s warm-up, 2.5 s
# measured, one message in flight per connection; the load tool's CSV row is appended to
# OUT.csv after the round number. Loopback only; every run is bounded by `timeout`.
set -uo pipefail
rounds=$1 out=$2
shift 2
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${CARGO_TARGET_DIR:-$repo/target}/release"
CELLS="${CELLS:-1024|1 1024|100 1024|1000 16384|1 16384|100 16384|1000}"
ulimit -n 65536 2>/dev/null || true
ready="$(mktemp)"
trap 'rm -f "$ready"' EXIT
for r in $(seq "$rounds"); do
    for cell in $CELLS; do
        size=${cell%|*} conns=${cell#*|}
        for v in "$@"; do
            IFS='|' read -r label server args <<<"$v"
            [[ "$server" == /* ]] || server="$bin/$server"
            : >"$ready"
            # shellcheck disable=SC2086 # args is a list.
            taskset -c 0 "$server" --port 0 --deflate $args >"$ready" 2>/dev/null &
            pid=$!
            for _ in $(seq 200); do grep -q '^READY ' "$ready" && break; sleep 0.05; done
            port=$(awk '/^READY /{print $2; exit}' "$ready")
            row=$(timeout 60 taskset -c 1 "$bin/load" --port "$port" --server-pid "$pid" \
                --label "$label" --kind text --size "$size" --conns "$conns" --inflight 1 \
                --warmup 1 --measure 2.5 --deflate 2>/dev/null | tail -1)
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            echo "$r,$row" >>"$out"
            sleep 0.3
        done
    done
done
