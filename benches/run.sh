#!/usr/bin/env bash
# Loopback echo benchmark of rapidws against its peers, with one command:
#
#   bash benches/run.sh            the whole matrix (about 15 minutes: 167 cells, 9 idle runs)
#   bash benches/run.sh quick      a reduced matrix (about 4 minutes)
#
# It builds benches/load (its own workspace: the load tool and one echo server per
# library) in release mode once, then for every cell of the matrix runs every server variant
# in turn (started fresh, pinned to core 0) under the load tool (pinned to core 1), writes the
# raw rows to benches/results/{echo,idle}.csv and benches/results/meta.json, and runs
# benches/plot.py, which regenerates the "Loopback echo" and "Idle memory" sections of
# benches/RESULTS.md and the SVG charts next to it.
#
# Knobs (environment):
#   WARMUP, MEASURE   seconds per cell (default 1 and 2.5)
#   SERVERS           space-separated subset of the server labels below (default all)
#   IDLE_CONNS        connections of the idle-memory run (default 10000; 0 skips it)
#   SKIP_BUILD=1      use the binaries already built
#
# Everything runs on 127.0.0.1 only; every cell is bounded by `timeout`.
set -euo pipefail
export RUST_BACKTRACE=0

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo="$(pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
bin="$CARGO_TARGET_DIR/release"
results="$repo/benches/results"
mkdir -p "$results"

profile="${1:-full}"
WARMUP="${WARMUP:-1}"
MEASURE="${MEASURE:-2.5}"
IDLE_CONNS="${IDLE_CONNS:-10000}"

# Server variants: label|binary|server arguments|load arguments|cells
# cells: all, or core (a subset, for variants whose other cells would only repeat another
# variant's: the split halves cost what the whole connection costs plus a lock).
ALL_SERVERS=(
    "rapidws|echo_rapidws|||all"
    "rapidws-feed|echo_rapidws|--feed||all"
    "rapidws-split|echo_rapidws|--split||core"
    "tokio-tungstenite|echo_tungstenite|||all"
    "fastwebsockets|echo_fastwebsockets|||all"
    "tokio-websockets|echo_tokio_websockets|||all"
    "yawc|echo_yawc|||all"
    "raw-tcp|echo_raw||--raw|all"
    "rapidws-deflate|echo_rapidws|--deflate|--deflate|all"
    "yawc-deflate|echo_yawc|--deflate|--deflate|all"
)
CORE_CELLS=" binary|1024|1|1 binary|1024|100|1 binary|1024|1000|1 binary|16384|100|1 binary|1024|1|64 "

# Cells: payload kind|size|connections|messages in flight per connection.
# 256 KiB x 1,000 connections is skipped: a quarter gigabyte in flight per round trip
# measures the kernel's socket buffers, not the libraries.
if [[ "$profile" == quick ]]; then
    CELLS=(
        "binary|16|100|1" "binary|1024|1|1" "binary|1024|100|1" "binary|16384|100|1"
        "binary|262144|1|1" "text|16384|100|1" "binary|1024|1000|1" "binary|1024|1|64"
    )
else
    CELLS=()
    for p in "binary|16" "binary|1024" "binary|16384" "binary|262144" "text|1024" "text|16384"; do
        for c in 1 100 1000; do
            [[ "$p" == "binary|262144" && "$c" == 1000 ]] && continue
            CELLS+=("$p|$c|1")
        done
    done
    # Pipelined: 64 messages in flight on one connection.
    CELLS+=("binary|1024|1|64")
fi

if [[ -n "${SERVERS:-}" ]]; then
    selected=()
    for s in "${ALL_SERVERS[@]}"; do
        [[ " $SERVERS " == *" ${s%%|*} "* ]] && selected+=("$s")
    done
else
    selected=("${ALL_SERVERS[@]}")
fi

# 10,000 idle connections need as many descriptors in the server and in the load tool.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release --manifest-path benches/load/Cargo.toml --bins
fi

echo_csv="$results/echo.csv"
idle_csv="$results/idle.csv"
log="$results/run.log"
: >"$log"
echo "server,payload,size,conns,inflight,deflate,seconds,msgs,msgs_per_s,mb_per_s,p50_us,p99_us,server_user_s,server_sys_s,echoes_per_cpu_s,client_cpu_s,wire_bytes_per_echo,errors" >"$echo_csv"
echo "server,conns,rss_before_bytes,rss_after_bytes,bytes_per_conn,errors" >"$idle_csv"

tmp="$(mktemp -d)"
server_pid=""
stop_server() {
    if [[ -n "$server_pid" ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
trap 'stop_server; rm -rf "$tmp"' EXIT

# start_server LABEL BINARY ARGS: starts it on core 0, sets server_pid and port.
start_server() {
    local label="$1" binary="$2" args="$3" ready="$tmp/ready"
    : >"$ready"
    # shellcheck disable=SC2086 # args is a list.
    taskset -c 0 "$bin/$binary" --port 0 $args >"$ready" 2>>"$log" &
    server_pid=$!
    local i
    for ((i = 0; i < 200; i++)); do
        if grep -q '^READY ' "$ready"; then
            port="$(awk '/^READY /{print $2; exit}' "$ready")"
            return 0
        fi
        if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
        sleep 0.05
    done
    echo "server $label did not start" | tee -a "$log" >&2
    stop_server
    return 1
}

failures=0
start=$SECONDS
# Cell by cell, every server in turn (each started fresh for its cell): the machine's load
# drifts over a run, and interleaving makes every server of a cell meet the same drift, so
# the ratios within a cell hold even when absolute figures move between cells.
for c in "${CELLS[@]}"; do
    IFS='|' read -r payload size conns inflight <<<"$c"
    for s in "${selected[@]}"; do
        IFS='|' read -r label binary sargs largs which <<<"$s"
        [[ "$which" == core && "$CORE_CELLS" != *" $c "* ]] && continue
        start_server "$label" "$binary" "$sargs" || { failures=$((failures + 1)); continue; }
        # shellcheck disable=SC2086 # largs is a list.
        if ! timeout --kill-after=5 $((${WARMUP%.*} + ${MEASURE%.*} + 90)) \
            taskset -c 1 "$bin/load" --port "$port" --server-pid "$server_pid" --label "$label" \
            --kind "$payload" --size "$size" --conns "$conns" --inflight "$inflight" \
            --warmup "$WARMUP" --measure "$MEASURE" $largs >>"$echo_csv" 2> >(tee -a "$log" >&2); then
            echo "FAILED: $label $payload $size x$conns n=$inflight" | tee -a "$log" >&2
            failures=$((failures + 1))
        fi
        stop_server
        # Let the kernel finish with the reset connections before the next server.
        sleep 0.3
    done
done

if ((IDLE_CONNS > 0)); then
    for s in "${selected[@]}"; do
        IFS='|' read -r label binary sargs largs which <<<"$s"
        [[ "$label" == rapidws-feed ]] && continue # same connection state as rapidws
        start_server "$label" "$binary" "$sargs" || { failures=$((failures + 1)); continue; }
        # shellcheck disable=SC2086
        if ! timeout --kill-after=5 120 taskset -c 1 "$bin/load" --idle --port "$port" \
            --server-pid "$server_pid" --label "$label" --conns "$IDLE_CONNS" --size 16 \
            --idle-wait 2 $largs >>"$idle_csv" 2> >(tee -a "$log" >&2); then
            echo "FAILED: idle $label" | tee -a "$log" >&2
            failures=$((failures + 1))
        fi
        stop_server
    done
fi

# What was measured, for RESULTS.md.
peers="$(awk '/^name = /{n=$3} /^version = /{gsub(/"/,"",n); if (n ~ /^(tokio-tungstenite|tungstenite|fastwebsockets|tokio-websockets|yawc|tokio|flate2|zlib-rs)$/) {gsub(/"/,"",$3); printf "%s%s %s", sep, n, $3; sep=", "}}' benches/load/Cargo.lock)"
cpu="$(awk -F: '/model name/{gsub(/^ +/,"",$2); print $2; exit}' /proc/cpuinfo)"
simd="AVX2, no AVX-512"
grep -qw avx512f /proc/cpuinfo && simd="AVX-512"
grep -qw avx2 /proc/cpuinfo || simd="no AVX2"
cat >"$results/meta.json" <<EOF
{
  "command": "bash benches/run.sh${1:+ $1}",
  "profile": "$profile",
  "date": "$(date -u +%Y-%m-%dT%H:%MZ)",
  "git": "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)",
  "rustc": "$(rustc --version)",
  "cpu": "$cpu",
  "machine": "$(nproc)-core, $simd, shared/noisy; client and server pinned to separate cores",
  "warmup_s": $WARMUP,
  "measure_s": $MEASURE,
  "idle_conns": $IDLE_CONNS,
  "peers": "$peers",
  "seconds": $((SECONDS - start)),
  "failures": $failures
}
EOF

python3 benches/plot.py
echo "done in $((SECONDS - start)) s with $failures failed cells; see benches/RESULTS.md" >&2
