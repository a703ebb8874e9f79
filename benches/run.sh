#!/usr/bin/env bash
# Loopback benchmark of rapidws against its peers, with one command:
#
#   bash benches/run.sh            the whole matrix (about 24 minutes on 2 cores: 215 echo
#                                  cells, 11 idle runs, 12 rate cells of 10,000 connections
#                                  (about 25 s each), 5 cells of 256 KiB x 10,000 (about
#                                  45 s each), 3 rounds of 60 firehose runs)
#   bash benches/run.sh quick      a reduced matrix (9 echo cells, firehose at 64 and 256 B;
#                                  no rate or 256 KiB x 10,000 cells)
#   bash benches/run.sh rate       only the rate cells, RATE_ROUNDS rounds (default 6) at
#                                  2.5 msg/s (about 10 minutes), and their summary: each
#                                  server's EER over the rounds and, round by round, rapidws'
#                                  against the better of fastwebsockets and tokio-websockets;
#                                  leaves the other results and RESULTS.md as they are
#
# It builds benches/load (its own workspace: the load tool, one echo server per library, the
# firehose server and client) in release mode once, then
# - echo: for every cell of the matrix runs every server variant in turn (started fresh,
#   pinned to core 0) under the load tool (pinned to core 1): echoes per server CPU-second;
# - idle: the server memory per idle connection of every server;
# - rate: open loop, every connection sending on its own schedule (load --rate): for each
#   of RATES messages/s per connection, RATE_CONNS connections x 1 KiB binary against
#   RATE_SERVERS: answered rate, latency from the intended send time, server CPU %, EER
#   (echoes/s per server CPU %), server peak RSS, the load tool's own CPU;
# - big: 256 KiB binary, one message in flight on each of BIG_CONNS connections, against
#   BIG_SERVERS (closed loop, as the echo cells): echoes per server CPU-second and the
#   server's peak RSS;
# - firehose: in each of FH_ROUNDS rounds, for every message size, every client in a new
#   random order (pinned to core 1) reads from a fresh firehose_server (core 0) that writes
#   pre-encoded frames in 256 KiB writes, and the in-memory readers go over the same bytes:
#   messages per client CPU-second, the best round of each client reported (a round that
#   another tenant of the machine slowed is never the best, for any client);
# writes the raw rows to benches/results/{echo,idle,rate,big,firehose}.csv (the rate profile
# rate.csv only) and
# benches/results/meta.json, and runs benches/plot.py (which reads echo, idle and
# firehose; rate.csv and big.csv are raw rows only), which regenerates the generated
# parts of benches/RESULTS.md (echo matrix, pipelined echo, echo with permessage-deflate,
# idle memory, firehose client), benches/results/TABLES.md and the SVG charts.
#
# Knobs (environment):
#   WARMUP, MEASURE   seconds per echo cell (default 0.5 and 2)
#   SERVERS           space-separated subset of the server labels below (default all)
#   IDLE_CONNS        connections of the idle-memory run (default 10000; 0 skips it)
#   RATES             messages/s per connection of the rate cells (default "2.5 5"; quick
#                     and empty skip them)
#   RATE_CONNS        connections of the rate cells (default 10000)
#   RATE_SERVERS      server labels of the rate cells (default rapidws rapidws-handler
#                     rapidws-handler-ref fastwebsockets tokio-websockets raw-tcp)
#   RATE_WARMUP, RATE_MEASURE  seconds per rate cell (default 5 and 10)
#   RATE_ROUNDS       rounds of the rate cells, every server once in each (default 1; 6 in
#                     the rate profile): one round's ratios move by 10-20 % on a shared machine
#   BIG_CONNS         connections of the 256 KiB cell (default 10000; quick and 0 skip it)
#   BIG_SERVERS       server labels of the 256 KiB cell (default rapidws rapidws-unbounded
#                     rapidws-stream rapidws-handler-ref fastwebsockets; -unbounded is rapidws
#                     without its default 1 GiB memory budget and 30 s message deadline,
#                     which 2.5 GiB of messages in flight can meet)
#   BIG_WARMUP, BIG_MEASURE    seconds of the 256 KiB cell (default 15 and 15: one round
#                     of 10,000 x 256 KiB took 6 s here, and the warm-up must see the
#                     first ones through)
#   FIREHOSE_SIZES    message sizes of the firehose, N or LO-HI (default "50 64 256 500
#                     50-500", quick "64 256"; empty skips it)
#   FIREHOSE_CLIENTS  space-separated subset of the firehose clients below (default all)
#   FH_WARMUP, FH_MEASURE  seconds per firehose run (default 0.5 and 1)
#   FH_ROUNDS         firehose rounds (default 3)
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
WARMUP="${WARMUP:-0.5}"
MEASURE="${MEASURE:-2}"
IDLE_CONNS="${IDLE_CONNS:-10000}"
if [[ "$profile" == quick ]]; then
    FIREHOSE_SIZES="${FIREHOSE_SIZES-64 256}"
    RATES="${RATES-}"
    BIG_CONNS="${BIG_CONNS:-0}"
elif [[ "$profile" == rate ]]; then
    FIREHOSE_SIZES=""
    RATES="${RATES-2.5}"
    BIG_CONNS=0
    IDLE_CONNS=0
    RATE_ROUNDS="${RATE_ROUNDS:-6}"
else
    FIREHOSE_SIZES="${FIREHOSE_SIZES-50 64 256 500 50-500}"
    RATES="${RATES-2.5 5}"
    BIG_CONNS="${BIG_CONNS:-10000}"
fi
RATE_CONNS="${RATE_CONNS:-10000}"
RATE_SERVERS="${RATE_SERVERS:-rapidws rapidws-handler rapidws-handler-ref fastwebsockets tokio-websockets raw-tcp}"
RATE_WARMUP="${RATE_WARMUP:-5}"
RATE_MEASURE="${RATE_MEASURE:-10}"
RATE_ROUNDS="${RATE_ROUNDS:-1}"
BIG_SERVERS="${BIG_SERVERS:-rapidws rapidws-unbounded rapidws-stream rapidws-handler-ref fastwebsockets}"
BIG_WARMUP="${BIG_WARMUP:-15}"
BIG_MEASURE="${BIG_MEASURE:-15}"
FH_WARMUP="${FH_WARMUP:-0.5}"
FH_MEASURE="${FH_MEASURE:-1}"
FH_ROUNDS="${FH_ROUNDS:-3}"

# Server variants: label|binary|server arguments|load arguments|cells
# cells: all; core (a subset, for variants whose other cells would only repeat another
# variant's: the split halves cost what the whole connection costs plus a lock); core+arena
# (core and the HttpArena cells: the handler API, whose question is batching); std (all but
# the HttpArena cells: compressing 5-byte messages says nothing about a compressor).
ALL_SERVERS=(
    "rapidws|echo_rapidws|||all"
    "rapidws-feed|echo_rapidws|--feed||all"
    "rapidws-handler|echo_rapidws|--handler||core+arena"
    "rapidws-handler-ref|echo_rapidws|--handler-ref||core+arena"
    "rapidws-split|echo_rapidws|--split||core"
    "tokio-tungstenite|echo_tungstenite|||all"
    "fastwebsockets|echo_fastwebsockets|||all"
    "tokio-websockets|echo_tokio_websockets|||all"
    "yawc|echo_yawc|||all"
    "wtx|echo_wtx|||all"
    "raw-tcp|echo_raw||--raw|all"
    "rapidws-deflate|echo_rapidws|--deflate|--deflate|std"
    "yawc-deflate|echo_yawc|--deflate|--deflate|std"
)
CORE_CELLS=" binary|1024|1|1 binary|1024|100|1 binary|1024|1000|1 binary|16384|100|1 binary|1024|1|64 "
# Variants only the rate and 256 KiB cells run (same format; not in the echo matrix).
EXTRA_SERVERS=(
    "rapidws-stream|echo_rapidws|--stream||none"
    "rapidws-unbounded|echo_rapidws|--unbounded||none"
    "rapidws-tungstenite|echo_rapidws_tungstenite|||none"
)
# server_spec LABEL: the line of ALL_SERVERS or EXTRA_SERVERS for LABEL, if SERVERS (when
# set) has it.
server_spec() {
    local s
    [[ -z "${SERVERS:-}" || " $SERVERS " == *" $1 "* ]] || return 1
    for s in "${ALL_SERVERS[@]}" "${EXTRA_SERVERS[@]}"; do
        if [[ "${s%%|*}" == "$1" ]]; then
            echo "$s"
            return 0
        fi
    done
    return 1
}
# HttpArena's echo-ws-pipeline shape: 5-byte text, 16 messages in flight per connection.
ARENA_CELLS=" text|5|512|16 text|5|4096|16 "

# Firehose clients (benches/load/src/bin/firehose.rs); mem-* read the same bytes in memory.
ALL_FIREHOSE_CLIENTS="rapidws rapidws-ref rapidws-batch tokio-tungstenite fastwebsockets tokio-websockets wtx mem-scan mem-run mem-decoder mem-connection"
FIREHOSE_CLIENTS="${FIREHOSE_CLIENTS:-$ALL_FIREHOSE_CLIENTS}"

# Cells: payload kind|size|connections|messages in flight per connection.
# 256 KiB x 1,000 connections is skipped: a quarter gigabyte in flight per round trip
# measures the kernel's socket buffers, not the libraries.
if [[ "$profile" == rate ]]; then
    CELLS=()
elif [[ "$profile" == quick ]]; then
    CELLS=(
        "binary|16|100|1" "binary|1024|1|1" "binary|1024|100|1" "binary|16384|100|1"
        "binary|262144|1|1" "text|16384|100|1" "binary|1024|1000|1" "binary|1024|1|64"
        "text|5|512|16"
    )
else
    CELLS=()
    for p in "binary|16" "binary|1024" "binary|16384" "binary|262144" "text|1024" "text|16384"; do
        for c in 1 100 1000; do
            [[ "$p" == "binary|262144" && "$c" == 1000 ]] && continue
            CELLS+=("$p|$c|1")
        done
    done
    # Pipelined: 64 messages in flight on one connection, and the HttpArena shape.
    CELLS+=("binary|1024|1|64" $ARENA_CELLS)
fi

if [[ -n "${SERVERS:-}" ]]; then
    selected=()
    for s in "${ALL_SERVERS[@]}"; do
        [[ " $SERVERS " == *" ${s%%|*} "* ]] && selected+=("$s")
    done
else
    selected=("${ALL_SERVERS[@]}")
fi

# 10,000 idle connections (and the 4,096-connection cell) need as many descriptors in the
# server and in the load tool: raise the soft limit as far as allowed, and leave out what
# still does not fit (logged, and counted in meta.json).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
max_conns=$(($(ulimit -n) - 100))
skipped=0

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    cargo build --release --manifest-path benches/load/Cargo.toml --bins
fi

echo_csv="$results/echo.csv"
idle_csv="$results/idle.csv"
big_csv="$results/big.csv"
firehose_csv="$results/firehose.csv"
log="$results/run.log"
if [[ "$profile" == rate ]]; then
    # Only rate.csv is written: the other results stay those of the last full run.
    echo_csv=/dev/null idle_csv=/dev/null big_csv=/dev/null firehose_csv=/dev/null
    log="$results/rate.log"
fi
: >"$log"
echo_header="server,payload,size,conns,inflight,deflate,seconds,msgs,msgs_per_s,mb_per_s,p50_us,p99_us,server_user_s,server_sys_s,echoes_per_cpu_s,client_cpu_s,wire_bytes_per_echo,errors,server_peak_rss_bytes"
echo "$echo_header" >"$echo_csv"
rate_csv="$results/rate.csv"
echo "server,payload,size,conns,rate_per_conn,deflate,seconds,offered_per_s,sent_per_s,answered_per_s,p50_us,p99_us,p999_us,max_us,send_lag_p50_us,send_lag_p99_us,server_user_s,server_sys_s,server_cpu_pct,eer,server_peak_rss_bytes,client_cpu_s,client_cpu_pct,pending_at_end,errors" >"$rate_csv"
echo "$echo_header" >"$big_csv"
echo "server,conns,rss_before_bytes,rss_after_bytes,bytes_per_conn,errors" >"$idle_csv"
echo "client,size,seconds,msgs,msgs_per_s,mb_per_s,client_user_s,client_sys_s,msgs_per_cpu_s,server_cpu_s,errors" >"$firehose_csv"
if ((IDLE_CONNS > max_conns)); then
    echo "SKIPPED: idle run of $IDLE_CONNS connections (descriptor limit $(ulimit -n))" | tee -a "$log" >&2
    IDLE_CONNS=0
    skipped=$((skipped + 1))
fi

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
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
# Cell by cell, every server in turn (each started fresh for its cell): the machine's load
# drifts over a run, and interleaving makes every server of a cell meet the same drift, so
# the ratios within a cell hold even when absolute figures move between cells.
for c in "${CELLS[@]}"; do
    IFS='|' read -r payload size conns inflight <<<"$c"
    if ((conns > max_conns)); then
        echo "SKIPPED: $payload $size x$conns n=$inflight (descriptor limit $(ulimit -n))" | tee -a "$log" >&2
        skipped=$((skipped + 1))
        continue
    fi
    for s in "${selected[@]}"; do
        IFS='|' read -r label binary sargs largs which <<<"$s"
        case "$which" in
            core) [[ "$CORE_CELLS" == *" $c "* ]] || continue ;;
            core+arena) [[ "$CORE_CELLS$ARENA_CELLS" == *" $c "* ]] || continue ;;
            std) [[ "$ARENA_CELLS" != *" $c "* ]] || continue ;;
        esac
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
        sleep 0.1
    done
done
echo_seconds=$((SECONDS - start))

if ((IDLE_CONNS > 0)); then
    for s in "${selected[@]}"; do
        IFS='|' read -r label binary sargs largs which <<<"$s"
        # Same connection state as rapidws.
        [[ "$label" == rapidws-feed || "$label" == rapidws-handler ]] && continue
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

# Rate cells: rate by rate, every server in turn, each started fresh.
rate_start=$SECONDS
if [[ -n "$RATES" ]] && ((RATE_CONNS > max_conns)); then
    echo "SKIPPED: rate cells of $RATE_CONNS connections (descriptor limit $(ulimit -n))" | tee -a "$log" >&2
    skipped=$((skipped + 1))
    RATES=""
fi
for rate in $RATES; do
for ((round = 1; round <= RATE_ROUNDS; round++)); do
    for label in $RATE_SERVERS; do
        spec="$(server_spec "$label")" || continue
        IFS='|' read -r label binary sargs largs which <<<"$spec"
        start_server "$label" "$binary" "$sargs" || { failures=$((failures + 1)); continue; }
        # shellcheck disable=SC2086 # largs is a list.
        if ! timeout --kill-after=5 $((${RATE_WARMUP%.*} + ${RATE_MEASURE%.*} + 90)) \
            taskset -c 1 "$bin/load" --rate "$rate" --port "$port" --server-pid "$server_pid" \
            --label "$label" --kind binary --size 1024 --conns "$RATE_CONNS" \
            --warmup "$RATE_WARMUP" --measure "$RATE_MEASURE" $largs >>"$rate_csv" 2> >(tee -a "$log" >&2); then
            echo "FAILED: rate $label $rate/s x$RATE_CONNS" | tee -a "$log" >&2
            failures=$((failures + 1))
        fi
        stop_server
        sleep 0.5
    done
done
done
rate_seconds=$((SECONDS - rate_start))
if [[ -n "$RATES" ]]; then
    python3 benches/rate_summary.py "$rate_csv" | tee -a "$log" >&2
fi
if [[ "$profile" == rate ]]; then
    echo "done in $((SECONDS - start)) s with $failures failed cells; rows in $rate_csv" >&2
    exit $((failures > 0))
fi

# How many times since boot the kernel entered TCP memory pressure (0 where unknown).
tcp_pressures() {
    awk '/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) n[i] = $i; h = 1 }
        else for (i = 1; i <= NF; i++) if (n[i] == "TCPMemoryPressures") { print $i; f = 1 } }
        END { if (!f) print 0 }' /proc/net/netstat 2>/dev/null || echo 0
}

# The 256 KiB cell: one message in flight on each connection, closed loop.
big_start=$SECONDS
if ((BIG_CONNS > max_conns)); then
    echo "SKIPPED: 256 KiB cell of $BIG_CONNS connections (descriptor limit $(ulimit -n))" | tee -a "$log" >&2
    skipped=$((skipped + 1))
    BIG_CONNS=0
fi
if ((BIG_CONNS > 0)); then
    # 10,000 x 256 KiB in flight may not fit the kernel's TCP memory: past `tcp_mem`'s
    # pressure mark (its second field, in pages) send buffers shrink and segments are
    # dropped, which a server that leaves the bytes in the kernel (a streaming echo) pays
    # for in CPU and memory (benches/RESULTS.md). Logged, and whether each cell met it.
    echo "256 KiB cell: net.ipv4.tcp_mem = $(cat /proc/sys/net/ipv4/tcp_mem 2>/dev/null)" | tee -a "$log" >&2
    for label in $BIG_SERVERS; do
        spec="$(server_spec "$label")" || continue
        IFS='|' read -r label binary sargs largs which <<<"$spec"
        start_server "$label" "$binary" "$sargs" || { failures=$((failures + 1)); continue; }
        pressures_before=$(tcp_pressures)
        # shellcheck disable=SC2086 # largs is a list.
        if ! timeout --kill-after=5 $((${BIG_WARMUP%.*} + ${BIG_MEASURE%.*} + 90)) \
            taskset -c 1 "$bin/load" --port "$port" --server-pid "$server_pid" --label "$label" \
            --kind binary --size 262144 --conns "$BIG_CONNS" --inflight 1 \
            --warmup "$BIG_WARMUP" --measure "$BIG_MEASURE" $largs >>"$big_csv" 2> >(tee -a "$log" >&2); then
            echo "FAILED: big $label 256 KiB x$BIG_CONNS" | tee -a "$log" >&2
            failures=$((failures + 1))
        fi
        echo "256 KiB $label: the kernel went under TCP memory pressure" \
            "$(($(tcp_pressures) - pressures_before)) times during the cell" | tee -a "$log" >&2
        stop_server
        sleep 0.5
    done
fi
big_seconds=$((SECONDS - big_start))

# Firehose: round by round and size by size, every client in a new order, each against a
# fresh server (the in-memory readers need none).
fh_start=$SECONDS
for ((round = 1; round <= FH_ROUNDS; round++)); do
for size in $FIREHOSE_SIZES; do
    # shellcheck disable=SC2086
    for client in $(printf '%s\n' $FIREHOSE_CLIENTS | shuf); do
        portargs=()
        if [[ "$client" != mem-* ]]; then
            start_server "firehose" firehose_server "" || { failures=$((failures + 1)); continue; }
            portargs=(--port "$port" --server-pid "$server_pid")
        fi
        if ! timeout --kill-after=5 $((${FH_WARMUP%.*} + ${FH_MEASURE%.*} + 30)) \
            taskset -c 1 "$bin/firehose" --client "$client" "${portargs[@]}" --size "$size" \
            --warmup "$FH_WARMUP" --measure "$FH_MEASURE" >>"$firehose_csv" 2> >(tee -a "$log" >&2); then
            echo "FAILED: firehose $client $size" | tee -a "$log" >&2
            failures=$((failures + 1))
        fi
        stop_server
    done
done
done
firehose_seconds=$((SECONDS - fh_start))

# What was measured, for RESULTS.md.
peers="$(awk '/^name = /{n=$3} /^version = /{gsub(/"/,"",n); if (n ~ /^(tokio-tungstenite|tungstenite|fastwebsockets|tokio-websockets|yawc|wtx|tokio|flate2|zlib-rs)$/) {gsub(/"/,"",$3); printf "%s%s %s", sep, n, $3; sep=", "}}' benches/load/Cargo.lock)"
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
  "firehose_warmup_s": $FH_WARMUP,
  "firehose_measure_s": $FH_MEASURE,
  "firehose_rounds": $FH_ROUNDS,
  "peers": "$peers",
  "load_start": "$load_start",
  "load_end": "$(cut -d' ' -f1-3 /proc/loadavg)",
  "echo_seconds": $echo_seconds,
  "rates": "$RATES",
  "rate_conns": $RATE_CONNS,
  "rate_warmup_s": $RATE_WARMUP,
  "rate_measure_s": $RATE_MEASURE,
  "rate_seconds": $rate_seconds,
  "big_conns": $BIG_CONNS,
  "big_warmup_s": $BIG_WARMUP,
  "big_measure_s": $BIG_MEASURE,
  "big_seconds": $big_seconds,
  "firehose_seconds": $firehose_seconds,
  "seconds": $((SECONDS - start)),
  "skipped": $skipped,
  "failures": $failures
}
EOF

python3 benches/plot.py
echo "done in $((SECONDS - start)) s with $failures failed cells ($skipped skipped); see benches/RESULTS.md" >&2
