#!/usr/bin/env bash
# User-space instructions per echo of one echo server, or per message of one firehose
# client, in the steady state.
#
#   bash benches/callgrind.sh SERVER SIZE [server arguments...]
#   bash benches/callgrind.sh firehose CLIENT SIZE
#   e.g. bash benches/callgrind.sh echo_rapidws 1024
#        bash benches/callgrind.sh echo_rapidws 1024 --handler
#        bash benches/callgrind.sh echo_rapidws 1024 --handler-ref
#        CONNS=100 KIND=text bash benches/callgrind.sh echo_wtx 16384
#        CONNS=200 RATE=2.5 MEASURE=10 WARM=4 bash benches/callgrind.sh echo_rapidws 1024
#        CONNS=1 INFLIGHT=64 COUNT=rapidws::handler::call \
#            bash benches/callgrind.sh echo_rapidws 1024 --handler
#        CONNS=1 INFLIGHT=64 COUNT=on_message_ref \
#            bash benches/callgrind.sh echo_rapidws 1024 --handler-ref
#        bash benches/callgrind.sh firehose rapidws-ref 64
#        bash benches/callgrind.sh firehose rapidws-batch 64
#        bash benches/callgrind.sh firehose mem-decoder 50-500
#
# Echo: runs the server (a binary of benches/load, built with
# `cargo build --release --manifest-path benches/load/Cargo.toml --bins`; any echo_* server
# and its arguments) under callgrind with instrumentation off, starts the load tool (CONNS
# connections, default 10, one message in flight, KIND binary or text), turns instrumentation
# on after WARM seconds (default 1.5) and off half a second before the load ends (MEASURE
# seconds, default 5), so that the connections' teardown is not counted. Echoes are counted in
# the same profile as calls to the socket write (`AsyncWrite>::poll_write*`, once per echo
# for every server at one in flight), so start-up and handshakes are left out and the
# machine's load does not change the figure. With INFLIGHT messages in flight on each
# connection (default 1) a write carries several echoes: name in COUNT a function the server
# calls once per message received (for rapidws: `rapidws::handler::call` under the handler
# API, `on_message_ref` under its borrowed callback (`--handler-ref`), `Connection>::take`
# otherwise).
#
# Firehose: runs the firehose client (any --client of benches/load/src/bin/firehose.rs,
# mem-* included) under callgrind against a firehose_server run natively, turns
# instrumentation on after WARM seconds and counts until the client exits (RUN seconds,
# default 5). Messages are counted in the same profile as calls to `Sink::consume`, which
# every client calls once per message.
#
# Valgrind does not emulate AVX-512: under it, run-time dispatch picks the AVX2 kernels.
# Needs valgrind (callgrind_control) and python3.
set -euo pipefail

warm=${WARM:-1.5}
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin="${CARGO_TARGET_DIR:-$repo/target}/release"
out="$(mktemp -t callgrind.XXXXXX)"
ready="$(mktemp -t ready.XXXXXX)"

# count_calls PROFILE PATTERN: total instructions and calls to functions matching PATTERN.
count_calls() {
    python3 - "$1" "$2" <<'PY'
import re, sys
path, pattern = sys.argv[1:]
names, total, calls, callee = {}, 0, 0, ""
for line in open(path, errors="replace"):
    if line.startswith(("fn=", "cfn=")):
        key, rest = line.rstrip("\n").split("=", 1)
        m = re.match(r"\((\d+)\)(?: (.*))?", rest)
        if m and m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        name = names.get(m.group(1), "") if m else rest
        if key == "cfn":
            callee = name
    elif line.startswith("calls=") and pattern in callee:
        calls += int(line[6:].split()[0])
    elif line.startswith(("summary:", "totals:")):
        total = int(line.split()[1])
print(total, calls)
PY
}

if [[ "$1" == firehose ]]; then
    client=$2
    size=$3
    run=${RUN:-5}
    server_pid=""
    portargs=()
    if [[ "$client" != mem-* ]]; then
        "$bin/firehose_server" --port 0 >"$ready" 2>/dev/null &
        server_pid=$!
        for _ in $(seq 200); do grep -q '^READY ' "$ready" && break; sleep 0.05; done
        portargs=(--port "$(awk '/^READY /{print $2; exit}' "$ready")")
    fi
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
        "$bin/firehose" --client "$client" "${portargs[@]}" --size "$size" --warmup 0 \
        --measure "$run" >/dev/null 2>&1 &
    pid=$!
    sleep "$warm"
    callgrind_control -i on "$pid" >/dev/null
    wait "$pid" || true
    [[ -n "$server_pid" ]] && { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; }
    rm -f "$ready"
    read -r total calls < <(count_calls "$out" "Sink::consume")
    if ((calls == 0)); then
        echo "no messages were profiled" >&2
        exit 1
    fi
    python3 -c "import sys; t, c = map(int, sys.argv[1:]); print(f'firehose $client $size B: {t / c:.0f} instructions per message ({c} messages, {t} instructions)')" "$total" "$calls"
    echo "profile: $out (callgrind_annotate $out)"
    exit 0
fi

server=$1
size=$2
shift 2
conns=${CONNS:-10}
kind=${KIND:-binary}
inflight=${INFLIGHT:-1}
count=${COUNT:-AsyncWrite>::poll_write}
if ((inflight > 1)) && [[ -z "${COUNT:-}" ]]; then
    echo "INFLIGHT > 1 needs COUNT: a function called once per message received" >&2
    exit 2
fi
# The raw TCP echo sends the client's masked frames back: the load tool must accept them.
loadargs=()
[[ "$server" == echo_raw ]] && loadargs=(--raw)

valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
    "$bin/$server" --port 0 "$@" >"$ready" 2>/dev/null &
pid=$!
for _ in $(seq 400); do grep -q '^READY ' "$ready" && break; sleep 0.05; done
port="$(awk '/^READY /{print $2; exit}' "$ready")"
# RATE: each connection sends RATE messages a second on its own schedule (the open-loop
# shape of a server whose connections send now and then) instead of the next one as soon
# as the echo is back.
[[ -n "${RATE:-}" ]] && loadargs+=(--rate "$RATE")
"$bin/load" --port "$port" --server-pid "$pid" --label callgrind --kind "$kind" --size "$size" \
    --conns "$conns" --inflight "$inflight" --warmup 0 --measure "${MEASURE:-5}" "${loadargs[@]}" >/dev/null 2>&1 &
load=$!
sleep "$warm"
callgrind_control -i on "$pid" >/dev/null
# Stop counting half a second before the load ends: when it ends, every connection closes,
# and its teardown (a close handshake, freeing the task and its buffers) is no part of an
# echo. With few echoes per connection (RATE) it would otherwise weigh in per echo.
sleep "$(python3 -c "print(max(0.5, ${MEASURE:-5} - $warm - 0.5))")"
callgrind_control -i off "$pid" >/dev/null
wait "$load"
sleep 0.3
kill "$pid"
wait "$pid" 2>/dev/null || true
rm -f "$ready"

# Total instructions, and calls to the socket write (or COUNT), from the profile itself.
read -r total calls < <(count_calls "$out" "$count")
if ((calls == 0)); then
    echo "no calls to $count were profiled" >&2
    exit 1
fi
label="$server $size B x $conns"
[[ -n "${RATE:-}" ]] && label+=" x $RATE msg/s"
((inflight > 1)) && label+=" x $inflight in flight"
python3 -c "import sys; t, c = map(int, sys.argv[1:]); print(f'$label: {t / c:.0f} instructions per echo ({c} echoes, {t} instructions)')" "$total" "$calls"
echo "profile: $out (callgrind_annotate $out)"
