#!/usr/bin/env bash
# User-space instructions per echo of one echo server, in the steady state.
#
#   bash benches/callgrind.sh SERVER SIZE [server arguments...]
#   e.g. bash benches/callgrind.sh echo_rapidws 1024
#        CONNS=100 KIND=text bash benches/callgrind.sh echo_fastwebsockets 16384
#
# Runs the server (a binary of benches/load, built with
# `cargo build --release --manifest-path benches/load/Cargo.toml --bins`) under callgrind with
# instrumentation off, starts the load tool (CONNS connections, default 10, one message in
# flight, KIND binary or text), turns instrumentation on after WARM seconds (default 1.5) and
# counts until the load ends. Echoes are counted in the same profile as calls to the socket
# write (`AsyncWrite>::poll_write*`, once per echo for every server at one in flight), so
# start-up and handshakes are left out and the machine's load does not change the figure.
# Needs valgrind (callgrind_control) and python3.
set -euo pipefail

server=$1
size=$2
shift 2
conns=${CONNS:-10}
kind=${KIND:-binary}
warm=${WARM:-1.5}
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin="${CARGO_TARGET_DIR:-$repo/target}/release"
out="$(mktemp -t callgrind.XXXXXX)"
ready="$(mktemp -t ready.XXXXXX)"

valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
    "$bin/$server" --port 0 "$@" >"$ready" 2>/dev/null &
pid=$!
for _ in $(seq 400); do grep -q '^READY ' "$ready" && break; sleep 0.05; done
port="$(awk '/^READY /{print $2; exit}' "$ready")"
"$bin/load" --port "$port" --server-pid "$pid" --label callgrind --kind "$kind" --size "$size" \
    --conns "$conns" --inflight 1 --warmup 0 --measure 5 >/dev/null 2>&1 &
load=$!
sleep "$warm"
callgrind_control -i on "$pid" >/dev/null
wait "$load"
sleep 0.3
kill "$pid"
wait "$pid" 2>/dev/null || true
rm -f "$ready"

# Total instructions, and calls to the socket write, from the profile itself.
python3 - "$out" "$server" "$size" "$conns" <<'PY'
import re, sys
path, server, size, conns = sys.argv[1:]
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
    elif line.startswith("calls=") and "AsyncWrite>::poll_write" in callee:
        calls += int(line[6:].split()[0])
    elif line.startswith(("summary:", "totals:")):
        total = int(line.split()[1])
if calls == 0:
    sys.exit("no socket writes were profiled")
print(f"{server} {size} B x {conns}: {total / calls:.0f} instructions per echo "
      f"({calls} echoes, {total} instructions)")
PY
echo "profile: $out (callgrind_annotate $out)"
