#!/usr/bin/env bash
# Runs the Autobahn testsuite against rapidws in one or both roles and checks the results.
#
#   bash autobahn/run.sh [server|client|all] [--quick] [--write-expected]
#
#   server  wstest (fuzzingclient mode) tests our server testee, the example
#           `autobahn_server`, which must listen on 127.0.0.1:PORT (given as `--port PORT`),
#           echo every message and accept permessage-deflate.
#           Spec: autobahn/fuzzingclient.json.
#   client  wstest (fuzzingserver mode) listens on 127.0.0.1:PORT and our client testee,
#           the example `autobahn_client` (given `--url ws://127.0.0.1:PORT`), connects
#           to it: GET /getCaseCount, then for
#           N in 1..=count /runCase?case=N&agent=rapidws (echoing every message), then
#           /updateReports?agent=rapidws, then exits 0.  Spec: autobahn/fuzzingserver.json.
#   all     both (the default); the exit code is non-zero if either fails.
#
#   --quick           leave out case groups 12.* and 13.* (compression; the slow part), for
#                     local iterations. CI runs everything.
#   --write-expected  (re)write autobahn/expected/{server,client}.json from this run instead
#                     of comparing with it (check the printed table before committing it).
#
# Environment (all optional):
#   AUTOBAHN_SERVER_CARGO_FLAGS  extra cargo flags for building the server testee, e.g.
#                                "--no-default-features --features tokio,deflate" (no SIMD)
#   AUTOBAHN_SERVER_ARGS         arguments for the server testee binary, e.g. "--split"
#   AUTOBAHN_CLIENT_CARGO_FLAGS  extra cargo flags for building the client testee
#   AUTOBAHN_CLIENT_ARGS         arguments for the client testee binary
#   AUTOBAHN_EXAMPLE_PREFIX      build the examples `<prefix>autobahn_server` and
#                                `<prefix>autobahn_client` instead (e.g. "tungstenite_" with
#                                "-p rapidws-tungstenite" in the cargo flags: the drop-in
#                                crate's testees)
#   AUTOBAHN_SERVER_CMD          run this shell command as the server testee instead of
#                                building the example (for checking the harness or a peer);
#                                it finds its port in $AUTOBAHN_PORT
#   AUTOBAHN_CLIENT_CMD          the same for the client testee ($AUTOBAHN_URL: the URL of
#                                the fuzzing server)
#   AUTOBAHN_SERVER_PORT         the port of the server role (default: a free one, picked
#                                at run time, so that runs on a shared machine never collide)
#   AUTOBAHN_CLIENT_PORT         the port wstest listens on in the client role (default: a
#                                free one)
#   AUTOBAHN_VARIANT             name of this configuration (default "default"); reports go
#                                to autobahn/reports/<variant>/{server,client}/
#   AUTOBAHN_EXPECTED_DIR        where {server,client}.json live (default autobahn/expected)
#   AUTOBAHN_TIMEOUT             seconds one role may take before it is killed (default 2700: the compression
#                                cases cost wstest itself 3-10 s of CPU each)
#   AUTOBAHN_PARALLEL            1 (default): `all` runs both roles at once; 0: one by one
#
# Every variant is compared with the same expected files: a build without SIMD or with
# split halves must behave exactly like the default one.
#
# wstest is installed on first use by autobahn/install.sh. Everything this script starts is
# killed when it exits. A testee that prints "panicked at" fails the run even when every
# case passed: hostile input must never panic.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$here"

role="all"
quick=0
write_expected=0
for arg in "$@"; do
    case "$arg" in
        server | client | all) role="$arg" ;;
        --quick) quick=1 ;;
        --write-expected) write_expected=1 ;;
        -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "run.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
    esac
done

variant="${AUTOBAHN_VARIANT:-default}"
expected_dir="${AUTOBAHN_EXPECTED_DIR:-$here/expected}"
role_timeout="${AUTOBAHN_TIMEOUT:-2700}"
reports="$here/reports/$variant"
wstest="$here/.venv/bin/wstest"

log() { echo "[autobahn $(date -u +%H:%M:%S)] $*"; }

# --- process bookkeeping: everything started here is killed on exit -----------------
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]+"${pids[@]}"}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            # Give it a moment (a child run.sh cleans up its own processes), then make sure.
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -9 "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    pids=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

stop() {
    local pid="$1" keep=() p
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 25); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for p in "${pids[@]+"${pids[@]}"}"; do [[ "$p" == "$pid" ]] || keep+=("$p"); done
    pids=("${keep[@]+"${keep[@]}"}")
}

# run_waited CMD...: runs CMD in the background and waits for it. Bash defers a trap while
# a foreground child runs; `wait` is interrupted at once, so a signal ends the run promptly.
run_waited() {
    "$@" &
    local p=$! rc=0 keep=() q
    pids+=("$p")
    wait "$p" || rc=$?
    for q in "${pids[@]}"; do [[ "$q" == "$p" ]] || keep+=("$q"); done
    pids=("${keep[@]+"${keep[@]}"}")
    return "$rc"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port: a loopback port nothing listens on now, from the kernel's ephemeral range.
# Between this and the testee's bind another program could take it; then the testee fails
# to bind, or require_free_port finds it taken, and the run fails loudly instead of testing
# the wrong program.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_port PORT PID SECONDS: until PORT accepts, failing early if PID dies.
wait_port() {
    local port="$1" pid="$2" limit="$3" i
    for ((i = 0; i < limit * 10; i++)); do
        if port_open "$port"; then return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then
            log "process $pid exited before port $port opened"
            return 1
        fi
        sleep 0.1
    done
    log "port $port did not open within ${limit}s"
    return 1
}

require_free_port() {
    if port_open "$1"; then
        log "something already listens on 127.0.0.1:$1; stop it first (it would be tested instead)"
        return 1
    fi
}

# build_example NAME FLAGS: builds the example and prints the path of its executable.
build_example() {
    local name="$1" flags="$2"
    # shellcheck disable=SC2086 # FLAGS is a list of cargo arguments.
    (cd "$repo" && cargo build --release --example "$name" $flags --message-format=json-render-diagnostics) |
        python3 -c '
import json, sys
name = sys.argv[1]
exe = None
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == name and msg.get("executable"):
        exe = msg["executable"]
if exe is None:
    sys.exit("no executable for example " + name)
print(exe)' "$name"
}

# effective_spec ROLE TEMPLATE PORT: writes the spec wstest runs (the URL with this run's
# port, outdir, --quick exclusions).
effective_spec() {
    local role_name="$1" template="$2" port="$3" out="$reports/$1-spec.json"
    python3 - "$template" "$out" "$reports/$role_name" "$quick" "$port" <<'PY'
import json, sys
template, out, outdir, quick, port = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5]
with open(template) as f:
    spec = json.load(f)
spec["outdir"] = outdir
url = "ws://127.0.0.1:" + port
if "servers" in spec:
    for server in spec["servers"]:
        server["url"] = url
else:
    spec["url"] = url
if quick:
    spec["exclude-cases"] = sorted(set(spec.get("exclude-cases", [])) | {"12.*", "13.*"})
with open(out, "w") as f:
    json.dump(spec, f, indent=2)
PY
    echo "$out"
}

summarize() {
    local role_name="$1" args=()
    local index="$reports/$role_name/index.json"
    if [[ ! -f "$index" ]]; then
        log "$role_name: wstest wrote no $index"
        return 1
    fi
    ((quick)) && args+=(--subset)
    ((write_expected)) && args+=(--write-expected)
    python3 "$here/summarize.py" "$index" --expected "$expected_dir/$role_name.json" "${args[@]+"${args[@]}"}"
}

check_no_panic() {
    local what="$1" logfile="$2"
    if grep -q "panicked at" "$logfile"; then
        log "$what panicked (see $logfile):"
        grep -m 5 -A 3 "panicked at" "$logfile" || true
        return 1
    fi
}

show_tail() {
    log "last lines of $1:"
    tail -n 20 "$1" || true
}

run_server_role() {
    local start=$SECONDS spec testee_log="$reports/server-testee.log" wstest_log="$reports/server-wstest.log"
    local exe=""
    # Build first: the port is picked just before the testee binds it.
    if [[ -z "${AUTOBAHN_SERVER_CMD:-}" ]]; then
        exe="$(build_example "${AUTOBAHN_EXAMPLE_PREFIX:-}autobahn_server" "${AUTOBAHN_SERVER_CARGO_FLAGS:-}")" || return 1
    fi
    local server_port="${AUTOBAHN_SERVER_PORT:-}"
    if [[ -z "$server_port" ]]; then server_port="$(free_port)" || return 1; fi
    log "server role: wstest fuzzingclient -> our server on 127.0.0.1:$server_port (variant $variant)"
    require_free_port "$server_port" || return 1
    rm -rf "$reports/server"
    mkdir -p "$reports/server" || return 1
    spec="$(effective_spec server "$here/fuzzingclient.json" "$server_port")" || return 1

    local cmd
    if [[ -n "${AUTOBAHN_SERVER_CMD:-}" ]]; then
        cmd="$AUTOBAHN_SERVER_CMD"
    else
        cmd="$(printf '%q' "$exe") --port $server_port ${AUTOBAHN_SERVER_ARGS:-}"
    fi
    log "server testee: $cmd"
    AUTOBAHN_PORT="$server_port" bash -c "exec $cmd" >"$testee_log" 2>&1 &
    local testee=$!
    pids+=("$testee")
    if ! wait_port "$server_port" "$testee" 30; then
        show_tail "$testee_log"
        return 1
    fi

    local rc=0
    run_waited timeout "$role_timeout" "$wstest" -m fuzzingclient -s "$spec" >"$wstest_log" 2>&1 || rc=$?
    if ((rc != 0)); then
        log "wstest fuzzingclient exited with $rc$( ((rc == 124)) && echo " (timed out after ${role_timeout}s)")"
        show_tail "$wstest_log"
    fi
    if ! kill -0 "$testee" 2>/dev/null; then
        log "the server testee died during the run"
        show_tail "$testee_log"
        rc=1
    fi
    stop "$testee"
    check_no_panic "the server testee" "$testee_log" || rc=1
    summarize server || rc=1
    log "server role took $((SECONDS - start))s"
    return "$rc"
}

run_client_role() {
    local start=$SECONDS spec testee_log="$reports/client-testee.log" wstest_log="$reports/client-wstest.log"
    local exe=""
    # Build first: the port is picked just before wstest binds it.
    if [[ -z "${AUTOBAHN_CLIENT_CMD:-}" ]]; then
        exe="$(build_example "${AUTOBAHN_EXAMPLE_PREFIX:-}autobahn_client" "${AUTOBAHN_CLIENT_CARGO_FLAGS:-}")" || return 1
    fi
    local client_port="${AUTOBAHN_CLIENT_PORT:-}"
    if [[ -z "$client_port" ]]; then client_port="$(free_port)" || return 1; fi
    local url="ws://127.0.0.1:$client_port"
    log "client role: our client -> wstest fuzzingserver on 127.0.0.1:$client_port (variant $variant)"
    require_free_port "$client_port" || return 1
    rm -rf "$reports/client"
    mkdir -p "$reports/client" || return 1
    spec="$(effective_spec client "$here/fuzzingserver.json" "$client_port")" || return 1

    local cmd
    if [[ -n "${AUTOBAHN_CLIENT_CMD:-}" ]]; then
        cmd="$AUTOBAHN_CLIENT_CMD"
    else
        cmd="$(printf '%q' "$exe") --url $url ${AUTOBAHN_CLIENT_ARGS:-}"
    fi

    # --webport 0: no report web server (it would take port 8080).
    timeout "$role_timeout" "$wstest" -m fuzzingserver -s "$spec" --webport 0 >"$wstest_log" 2>&1 &
    local ws=$!
    pids+=("$ws")
    if ! wait_port "$client_port" "$ws" 60; then
        show_tail "$wstest_log"
        return 1
    fi

    log "client testee: $cmd"
    local rc=0
    AUTOBAHN_URL="$url" run_waited timeout "$role_timeout" bash -c "exec $cmd" >"$testee_log" 2>&1 || rc=$?
    if ((rc != 0)); then
        log "the client testee exited with $rc$( ((rc == 124)) && echo " (timed out after ${role_timeout}s)")"
        show_tail "$testee_log"
    fi
    # wstest writes the reports while answering /updateReports; wait (bounded) for them.
    for _ in $(seq 1 100); do
        [[ -f "$reports/client/index.json" ]] && break
        sleep 0.2
    done
    if ! kill -0 "$ws" 2>/dev/null; then
        log "wstest fuzzingserver died during the run"
        show_tail "$wstest_log"
        rc=1
    fi
    stop "$ws"
    check_no_panic "the client testee" "$testee_log" || rc=1
    summarize client || rc=1
    log "client role took $((SECONDS - start))s"
    return "$rc"
}

bash "$here/install.sh"
mkdir -p "$reports"

# Note: a function called as `f || x` runs without errexit, so the role functions check
# every step themselves (`|| return 1`).
status=0
if [[ "$role" == all && "${AUTOBAHN_PARALLEL:-1}" == 1 ]]; then
    # The roles share nothing (each picks its own free port, separate report directories) and each
    # wstest is one single-threaded Python process: running them side by side halves the
    # wall time on two cores. Each role's output is printed when it is done.
    pass=()
    ((quick)) && pass+=(--quick)
    ((write_expected)) && pass+=(--write-expected)
    log "running the server and client roles in parallel (AUTOBAHN_PARALLEL=0 runs them one after the other)"
    bash "$here/run.sh" server "${pass[@]+"${pass[@]}"}" >"$reports/server.out" 2>&1 &
    server_job=$!
    pids+=("$server_job")
    bash "$here/run.sh" client "${pass[@]+"${pass[@]}"}" >"$reports/client.out" 2>&1 &
    client_job=$!
    pids+=("$client_job")
    wait "$server_job" || status=1
    wait "$client_job" || status=1
    pids=()
    for r in server client; do
        echo "----- $r role -----"
        cat "$reports/$r.out"
    done
else
    if [[ "$role" == server || "$role" == all ]]; then
        run_server_role || status=1
    fi
    if [[ "$role" == client || "$role" == all ]]; then
        run_client_role || status=1
    fi
fi
if ((status == 0)); then
    log "PASSED ($role, variant $variant$( ((quick)) && echo ", quick"))"
else
    log "FAILED ($role, variant $variant$( ((quick)) && echo ", quick"))"
fi
exit "$status"
