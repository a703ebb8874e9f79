#!/usr/bin/env bash
# Browser interop: headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
# against a WebSocket echo server, see browser_test.js for what is checked.
#
#   bash tests/interop/browser.sh                 # against rapidws: builds and starts
#                                                 # `--example echo_server` (127.0.0.1:9001)
#   bash tests/interop/browser.sh ws://127.0.0.1:PORT/   # against a server already running
#
# BROWSER_SERVER_ARGS are passed to the example (e.g. "--no-deflate"); BROWSER_EXPECT_DEFLATE=1
# or 0 makes the page check that permessage-deflate was (or was not) agreed.
#
# BROWSER_H2=1: WebSockets over HTTP/2 (RFC 8441). Builds and starts `-p rapidws-integration
# --example axum_h2` (axum with HTTP/1.1 and HTTP/2 over TLS, a fresh self-signed
# certificate, 127.0.0.1:9443) in the dev profile: an example of that package builds all its
# dev-dependencies (the peer libraries, criterion, hyper, axum, rustls), which in the dev
# profile are the ones `cargo test --workspace` builds, and in release would be about 110
# crates more to compile for this one run;
# Chromium loads https://localhost:9443/ over h2 and opens wss:// to /ws (deflate) and
# /ws/plain (none) on that connection; the server's log must record both as HTTP/2
# extended CONNECTs, none as an HTTP/1.1 upgrade, and both closed with 1000. With a URL
# (https://localhost:PORT/), BROWSER_CERT names that server's certificate (PEM) and the
# log check is the server's own business.
#
# Environment: BROWSER_SERVER_CMD runs that command (exec'd) as the server instead of the
# example, still expected on 127.0.0.1:9001 (e.g. the Python peer:
# "tests/interop/.venv/bin/python tests/interop/py_echo_server.py 9001"). CHROMIUM=/path
# overrides the browser. Needs `apt-get install chromium` (.ci/run does that).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
h2="${BROWSER_H2:-0}"
if [[ "$h2" == 1 ]]; then
    port=9443
    example=axum_h2
    build=(-p rapidws-integration --features axum,tokio-rustls)
    profile=debug
    cert="$(mktemp -t rapidws-browser-cert.XXXXXX)"
    example_args="--port $port --write-cert $(printf '%q' "$cert")"
else
    port=9001
    example=echo_server
    build=(--release)
    profile=release
    example_args="${BROWSER_SERVER_ARGS:-}"
fi

if [[ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]]; then
    echo "browser.sh: no Chromium at ${CHROMIUM:-/usr/bin/chromium} (apt-get install chromium)" >&2
    exit 1
fi
bash "$here/setup.sh" >/dev/null

server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 25); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$server_pid" 2>/dev/null || true
    fi
    [[ -z "$server_pid" ]] || wait "$server_pid" 2>/dev/null || true
    [[ -z "${cert:-}" ]] || rm -f "$cert"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

url="${1:-}"
if [[ -z "$url" ]]; then
    if port_open "$port"; then
        echo "browser.sh: something already listens on 127.0.0.1:$port; stop it first" >&2
        exit 1
    fi
    if [[ -n "${BROWSER_SERVER_CMD:-}" ]]; then
        cmd="$BROWSER_SERVER_CMD"
    else
        (cd "$repo" && cargo build --example "$example" "${build[@]}")
        exe="${CARGO_TARGET_DIR:-$repo/target}/$profile/examples/$example"
        cmd="$(printf '%q' "$exe") $example_args"
    fi
    log="$(mktemp -t rapidws-browser-server.XXXXXX)"
    echo "browser.sh: starting server: $cmd (log $log)"
    (cd "$repo" && exec bash -c "exec $cmd") >"$log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 300); do
        port_open "$port" && break
        if ! kill -0 "$server_pid" 2>/dev/null; then
            echo "browser.sh: the server exited before listening:" >&2
            tail -n 20 "$log" >&2
            exit 1
        fi
        sleep 0.1
    done
    port_open "$port" || { echo "browser.sh: nothing listens on $port after 30 s" >&2; exit 1; }
    if [[ "$h2" == 1 ]]; then url="https://localhost:$port/"; else url="ws://127.0.0.1:$port/"; fi
fi

rc=0
if [[ "$h2" == 1 ]]; then
    # The certificate of the server started here; for a server given by URL, BROWSER_CERT.
    if [[ -n "$server_pid" ]]; then export BROWSER_CERT="$cert"; fi
    node "$here/browser_test.js" "$url" || rc=$?
else
    node "$here/browser_test.js" "$url" || rc=$?
fi
if [[ "$h2" == 1 && -n "$server_pid" ]]; then
    # What the server recorded of each WebSocket: the form it came in and how it closed
    # (the close is logged once the stream has ended, which may trail the browser's
    # close event a little).
    for _ in $(seq 1 50); do
        (($(grep -c "^websocket closed:" "$log" || true) >= 2)) && break
        sleep 0.1
    done
    h2_opens=$(grep -c "^websocket open: HTTP/2 extended CONNECT" "$log" || true)
    h1_opens=$(grep -c "^websocket open: HTTP/1.1 upgrade" "$log" || true)
    clean=$(grep -c "^websocket closed: Some(1000)" "$log" || true)
    echo "browser.sh: the server recorded $h2_opens HTTP/2 extended CONNECT(s), $h1_opens HTTP/1.1 upgrade(s), $clean close(s) with 1000"
    if ((h2_opens != 2 || h1_opens != 0 || clean != 2)); then
        echo "browser.sh: expected 2 WebSockets over HTTP/2, none over HTTP/1.1, both closed with 1000:" >&2
        tail -n 20 "$log" >&2
        rc=1
    fi
fi
if [[ -n "$server_pid" ]] && ! kill -0 "$server_pid" 2>/dev/null; then
    echo "browser.sh: the server died during the test:" >&2
    tail -n 20 "$log" >&2
    rc=1
fi
if [[ -n "$server_pid" ]] && grep -q "panicked at" "$log"; then
    echo "browser.sh: the server panicked:" >&2
    grep -m 3 -A 3 "panicked at" "$log" >&2
    rc=1
fi
exit "$rc"
